"""reasoning_effort: one test per client level of the fleet's map, so the report names the level."""

from pytest_frank.claims import reasoning_effort
from pytest_frank.claims.reasoning_effort import trend as effort_trend
from pytest_frank.claims.checks import battery_test

test_reasoning_effort = battery_test(reasoning_effort.LEVEL)
test_reasoning_effort_unmapped = battery_test(reasoning_effort.UNMAPPED)
test_reasoning_effort_trend = battery_test(effort_trend.TREND)
