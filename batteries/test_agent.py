"""agent: a tool result sent back gets a final answer, plain, streamed and with parallel calls."""

from pytest_frank.claims import battery

globals().update(battery("agent"))
