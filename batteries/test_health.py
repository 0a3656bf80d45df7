"""health: the endpoint's health route answers ready (a loading model is waited for)."""

import pytest

from pytest_frank.claims import health


@pytest.mark.health
def test_health(endpoint):
    health.judge(endpoint.probe(health.probe), endpoint.config.ready_timeout)
