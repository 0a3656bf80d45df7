"""tools: tool calls a strict client can use, under each tool_choice, plain and streamed."""

from pytest_frank.claims import contract, tools
from pytest_frank.claims.tools import breadth as tools_breadth
from pytest_frank.claims.checks import battery_test

test_tools_required = battery_test(tools.REQUIRED)
test_tools_auto = battery_test(tools.AUTO)
test_tools_named = battery_test(tools.NAMED_CHOICE)
test_tools_parallel = battery_test(tools.PARALLEL)
test_tools_plain_chat = battery_test(tools.PLAIN)
test_tools_streamed = battery_test(tools.STREAMED)
test_tools_arguments = battery_test(tools.WIRE)
test_tools_none = battery_test(contract.NONE)
test_tools_parallel_auto = battery_test(tools.PARALLEL_AUTO)
test_tools_schema_corpus = battery_test(tools_breadth.SCHEMA_CORPUS)
test_tools_forced_thinking = battery_test(tools_breadth.FORCED_THINKING)
test_tools_trigger_agreement = battery_test(tools_breadth.TRIGGERS)
