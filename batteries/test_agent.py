"""agent: a tool result sent back gets a final answer, plain, streamed and with parallel calls."""

from pytest_frank.claims import agent
from pytest_frank.claims.agent import breadth as agent_breadth
from pytest_frank.claims.agent import chain as agent_chain
from pytest_frank.claims.agent import reasoning_history
from pytest_frank.claims.agent import template as agent_template
from pytest_frank.claims.checks import battery_test

test_agent = battery_test(agent.PLAIN)
test_agent_streamed = battery_test(agent.STREAMED)
test_agent_parallel = battery_test(agent.PARALLEL)
test_agent_template = battery_test(agent_template.TEMPLATE)
test_agent_reasoning_history = battery_test(reasoning_history.HISTORY)
test_agent_rounds = battery_test(agent_breadth.ROUNDS)
test_agent_long_answer = battery_test(agent_breadth.LONG_ANSWER)
test_agent_chain = battery_test(agent_chain.CHAIN)
