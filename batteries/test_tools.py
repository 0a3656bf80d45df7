"""tools: tool calls a strict client can use, under each tool_choice, plain and streamed."""

from pytest_frank.checks import battery_test
from pytest_frank.claims import contract, tools

test_tools_required = battery_test(tools.REQUIRED)
test_tools_auto = battery_test(tools.AUTO)
test_tools_named = battery_test(tools.NAMED_CHOICE)
test_tools_parallel = battery_test(tools.PARALLEL)
test_tools_plain_chat = battery_test(tools.PLAIN)
test_tools_streamed = battery_test(tools.STREAMED)
test_tools_none = battery_test(contract.NONE)
