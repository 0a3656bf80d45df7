"""slots: the live slot count and context per slot match fleet.yaml's `expect.slots`."""

from pytest_frank.checks import battery_test
from pytest_frank.claims import slots

test_slots = battery_test(slots.SLOTS)
