"""reasoning: content and separate reasoning, plain and streamed; off means off."""

from pytest_frank.claims import reasoning
from pytest_frank.claims.checks import battery_test

test_reasoning = battery_test(reasoning.REASONING)
test_reasoning_streamed = battery_test(reasoning.STREAMED)
test_reasoning_off = battery_test(reasoning.OFF)
