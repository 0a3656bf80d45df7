"""perf: time to first token, decode speed and the prefix-cache effect meet the fleet's floors."""

from pytest_frank.claims import battery

globals().update(battery("perf"))
