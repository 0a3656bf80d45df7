"""tools: tool calls a strict client can use, under each tool_choice, plain and streamed."""

import pytest

from pytest_frank.claims import tools
from pytest_frank.verdict import skip


def _settings(endpoint):
    return tools.settings(endpoint.config)


@pytest.mark.tools
def test_tools_required(endpoint):
    s = _settings(endpoint)
    tools.judge_calls(endpoint.probe(tools.probe_required), endpoint.driver, s["min_pass_rate"],
                      endpoint.note)


@pytest.mark.tools
def test_tools_auto(endpoint):
    s = _settings(endpoint)
    tools.judge_auto(endpoint.probe(tools.probe_auto), endpoint.driver, s["min_pass_rate"],
                     s["auto_must_call"], endpoint.note)


@pytest.mark.tools
def test_tools_named(endpoint):
    s = _settings(endpoint)
    named = s["named"] if s["named"] is not None else endpoint.driver.honours_named_tool_choice
    if not named:
        skip(f"{endpoint.driver.label} treats a named tool_choice as auto "
             f"(set expect.tools.named: true to probe it anyway)")
    tools.judge_calls(endpoint.probe(tools.probe_named), endpoint.driver, s["min_pass_rate"],
                      endpoint.note, expected_name=tools.NAMED)


@pytest.mark.tools
def test_tools_parallel(endpoint):
    s = _settings(endpoint)
    if not s["parallel"]:
        skip("expect.tools.parallel is not set (the endpoint does not claim parallel calls)")
    tools.judge_calls(endpoint.probe(tools.probe_parallel), endpoint.driver, s["min_pass_rate"],
                      endpoint.note, min_calls=2)


@pytest.mark.tools
def test_tools_plain_chat(endpoint):
    tools.judge_plain(endpoint.probe(tools.probe_plain), endpoint.driver)


@pytest.mark.tools
def test_tools_streamed(endpoint):
    if not _settings(endpoint)["stream"]:
        skip("expect.tools.stream is false")
    streamed = endpoint.probe(tools.probe_streamed)
    tools.judge_streamed(streamed, endpoint.target.probe(tools.probe_required), endpoint.driver,
                         endpoint.note)
