"""stream: a streamed answer keeps its API shape's wire format, frame by frame."""

from pytest_frank.claims import stream
from pytest_frank.claims.checks import battery_test

test_stream_wire = battery_test(stream.STREAM_WIRE)
