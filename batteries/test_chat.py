"""chat: a plain question gets a plain answer that ends by itself, with no template markup."""

from pytest_frank.claims import chat
from pytest_frank.claims.checks import battery_test

test_chat = battery_test(chat.CHAT)
