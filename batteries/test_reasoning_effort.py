"""reasoning_effort: one test per client level of the fleet's map, so the report names the level."""

import pytest

from pytest_frank.claims import reasoning_effort
from pytest_frank.verdict import skip


def frank_cases(endpoint_config):
    return [(level, level) for level in reasoning_effort.level_map(endpoint_config)]


@pytest.mark.reasoning_effort
def test_reasoning_effort(endpoint, case):
    efforts = endpoint.target.probe(reasoning_effort.probe)
    reply = efforts.replies[case]
    if reply.exchange is not None:
        endpoint.exchanges.append(reply.exchange)  # this level's exchange, not every level's
    reasoning_effort.judge_level(efforts, case, endpoint.driver)


@pytest.mark.reasoning_effort
def test_reasoning_effort_unmapped(endpoint):
    if not reasoning_effort.options(endpoint.config).get("unmapped"):
        skip("expect.reasoning_effort.unmapped is not set")
    efforts = endpoint.probe(reasoning_effort.probe_unmapped)
    mapping = reasoning_effort.level_map(endpoint.config)
    reasoning_effort.judge_unmapped(efforts, mapping, endpoint.note)
