"""slots: the live slot count and context per slot match fleet.yaml's `expect.slots`, and a
slot takes a prompt at 0.9 of that context whole."""

from pytest_frank.claims import battery

globals().update(battery("slots"))
