"""slots: the live slot count and context per slot match fleet.yaml's `expect.slots`."""

import pytest

from pytest_frank.claims import slots


@pytest.mark.slots
def test_slots(endpoint):
    slots.judge(endpoint.probe(slots.probe), endpoint.config.options("slots"), endpoint.driver)
