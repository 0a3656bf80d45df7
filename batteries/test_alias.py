"""alias: the name clients ask for is served by /v1/models."""

from pytest_frank.claims import alias
from pytest_frank.claims.checks import battery_test

test_alias = battery_test(alias.ALIAS)
