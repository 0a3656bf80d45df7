"""serve: the files that start the endpoint hold what its claims need (offline), and the running
server still runs what they say (live)."""

from pytest_frank.claims import serve
from pytest_frank.claims.checks import battery_test

test_serve_config = battery_test(serve.CONFIG)
test_serve_drift = battery_test(serve.DRIFT)
