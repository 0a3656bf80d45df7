"""serve: the files that start the endpoint hold what its claims need (offline), and the running
server still runs what they say (live)."""

from pytest_frank.claims import battery

globals().update(battery("serve"))
