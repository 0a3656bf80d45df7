"""stream: a streamed answer keeps its API shape's wire format, frame by frame."""

from pytest_frank.claims import battery

globals().update(battery("stream"))
