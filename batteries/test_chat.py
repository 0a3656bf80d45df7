"""chat: a plain question gets a plain answer that ends by itself, with no template markup."""

from pytest_frank.claims import battery

globals().update(battery("chat"))
