"""health: the endpoint's health route answers ready (a loading model is waited for)."""

from pytest_frank.claims import battery

globals().update(battery("health"))
