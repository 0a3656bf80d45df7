"""contract: every reply keeps its API's published contract and its own request, and a stream
adds up to its plain twin (judged over the replies the other checks received)."""

from pytest_frank.claims import contract
from pytest_frank.claims.checks import battery_test

test_contract_replies = battery_test(contract.REPLIES)
test_contract_stream_twins = battery_test(contract.STREAM_TWINS)
