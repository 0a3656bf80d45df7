"""tools: tool calls a strict client can use, under each tool_choice, plain and streamed."""

from pytest_frank.claims import battery

globals().update(battery("tools"))
