"""params: the request parameters clients rely on are honoured, not just accepted: one test per
parameter (a fleet turns off what its clients never send); the API shape says which exist."""

from pytest_frank.claims import battery

globals().update(battery("params"))
