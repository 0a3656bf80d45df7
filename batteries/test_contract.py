"""contract: every reply keeps its API's published contract and its own request, and a stream
adds up to its plain twin (judged over the replies the other checks received)."""

from pytest_frank.claims import battery

globals().update(battery("contract"))
