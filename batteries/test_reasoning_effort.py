"""reasoning_effort: one test per client level of the fleet's map, so the report names the level."""

from pytest_frank.claims import battery

globals().update(battery("reasoning_effort"))
