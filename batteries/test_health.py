"""health: the endpoint's health route answers ready (a loading model is waited for)."""

from pytest_frank.claims import health
from pytest_frank.claims.checks import battery_test

test_health = battery_test(health.HEALTH)
