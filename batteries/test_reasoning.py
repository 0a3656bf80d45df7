"""reasoning: content and separate reasoning, plain and streamed; off means off."""

from pytest_frank.claims.checks import battery

globals().update(battery("reasoning"))
