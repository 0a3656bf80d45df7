"""reasoning: content and separate reasoning, plain and streamed; off means off."""

from pytest_frank.claims import battery

globals().update(battery("reasoning"))
