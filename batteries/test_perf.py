"""perf: time to first token, decode speed and the prefix-cache effect meet the fleet's floors."""

from pytest_frank.claims import perf
from pytest_frank.claims.checks import battery_test

test_perf_ttft = battery_test(perf.TTFT)
test_perf_decode = battery_test(perf.DECODE)
test_perf_prefix_cache = battery_test(perf.PREFIX_CACHE)
