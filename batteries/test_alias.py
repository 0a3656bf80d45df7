"""alias: the name clients ask for is served by /v1/models."""

from pytest_frank.claims.checks import battery_test
from pytest_frank.claims import alias

test_alias = battery_test(alias.ALIAS)
