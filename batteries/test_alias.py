"""alias: the name clients ask for is served by /v1/models."""

from pytest_frank.claims import battery

globals().update(battery("alias"))
