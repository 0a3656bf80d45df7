"""Streamed and plain agree, and replies of reasoning alone, against real llama.cpp (xllamacpp,
the self-test model: `<think>Thinking</think>Hello!`, a get_weather call where tools are
offered). Healthy, its streamed replies at temperature 0 reassemble into its plain ones and no
reply is reasoning alone. The faults no engine here shows come from a proxy in front of that
same server (tests/support/proxy.py): every content delta of a request without tools sent twice, as
vLLM sent them with a tool parser on (PR 46183), and a whole answer left with its reasoning
alone, as a reasoning parser that swallows the reply returns it (vLLM PR 41467)."""

from __future__ import annotations

import json

import pytest
from fleets import one_endpoint
from proxy import Proxy, content_twice, reasoning_alone

pytestmark = pytest.mark.real

PATIENT = 300


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def notes(found: dict, test: str) -> str:
    return "\n".join(found[test]["notes"])


def test_llamacpps_streamed_replies_are_its_plain_ones_at_temperature_0(llama, run_fleet,
                                                                          pytester):
    server = llama()
    # one endpoint with reasoning (its pair compares a request without tools), one without
    # (the tools claim's plain chat asks its own streamed twin)
    fleet = {"endpoints": {name: {"url": server.url, "engine": "llamacpp", "timeout": PATIENT,
                                  "expect": expect}
                           for name, expect in (("thinks", {"reasoning": True, "tools": True,
                                                            "agent": True}),
                                                ("plain", {"tools": True, "agent": True}))}}
    # test_tools_required and test_agent: no reply of reasoning alone where the server is whole
    result = run_fleet(fleet, "-k", "test_reasoning_streamed or test_tools_plain_chat or "
                                    "test_tools_streamed or test_tools_required or (test_agent "
                                    "and not template and not reasoning_history)", "-p", "no:randomly",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=11, skipped=2)  # test_agent_parallel: not claimed
    found = rows(pytester)
    for test, said in (
            ("test_reasoning_streamed[thinks]", "chat without tools: streamed and plain agree "
                                                "at temperature 0: 6 characters of content, 8 "
                                                "of reasoning"),
            ("test_tools_plain_chat[plain]", "plain chat without tools: streamed and plain "
                                             "agree at temperature 0"),
            ("test_tools_streamed[thinks]", 'streamed tool_choice "required": streamed and '
                                            'plain agree at temperature 0'),
    ):
        assert said in notes(found, test), notes(found, test)
    # with reasoning asked, its pair compares: plain chat asks no twin of its own
    assert "streamed and plain" not in notes(found, "test_tools_plain_chat[thinks]")


def test_content_deltas_sent_twice_fail_as_a_stream_that_is_not_the_plain_reply(
        llama, run_fleet, pytester):
    """A proxy in front of llama.cpp sends every content delta of a request without tools
    twice (vLLM did so with a tool parser on); requests with tools pass through as they came."""
    server = llama()
    with Proxy(server.url, rewrite_stream=content_twice) as proxy:
        fleet = {"endpoints": {name: {"url": proxy.url, "engine": "llamacpp",
                                      "timeout": PATIENT, "expect": expect}
                               for name, expect in (("thinks", {"reasoning": True,
                                                                "tools": True}),
                                                    ("plain", {"tools": True}))}}
        result = run_fleet(fleet, "-k", "test_reasoning_streamed or test_tools_plain_chat or "
                                        "test_tools_streamed", "-p", "no:randomly",
                           "--frank-json=run.json")
    result.stdout.fnmatch_lines_random([
        "*chat without tools: the streamed reply differs from the plain (non-streamed) one to "
        "the same request at temperature 0: content differs at character 5: streamed "
        "'HelloHello!!', plain 'Hello!' (12 characters streamed, 6 plain: twice as long, as "
        "when every delta is sent twice); a client reading the stream gets another answer "
        "than one reading it whole*",
        "*plain chat without tools: the streamed reply differs from the plain*content differs "
        "at character 5*",
        "*fix: llama.cpp's streaming parser (the chat format's partial parse) sent deltas that "
        "do not add up to its whole answer*"])
    result.assert_outcomes(passed=3, failed=2)
    found = rows(pytester)
    assert found["test_reasoning_streamed[thinks]"]["verdict"] == "FAIL"
    assert found["test_tools_plain_chat[plain]"]["verdict"] == "FAIL"


def test_replies_of_reasoning_alone_fail_as_such_counted_over_the_trials(llama, run_fleet):
    """A proxy in front of llama.cpp drops the content and the tool calls of the first forced
    call's answer, its reasoning kept (a reasoning parser that swallows the reply): named as
    reasoning alone, counted over the trials, not folded into the valid share, and failed
    though min_pass_rate would let one invalid trial of two pass."""
    server = llama()
    seen = []

    def first_alone(request: dict, answer: dict) -> dict:
        seen.append(request)
        return reasoning_alone(request, answer) if len(seen) == 1 else answer

    with Proxy(server.url, rewrite_answer=first_alone) as proxy:
        result = run_fleet(one_endpoint(proxy.url, timeout=PATIENT, expect={
            "tools": {"trials": 2, "min_pass_rate": 0.5}}),
            "-k", "test_tools_required", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*tool_choice \"required\": 1 of 2 replies carried reasoning only: no content and no "
        "tool call (finish_reason 'stop', reasoning 'Thinking'); a client has nothing to show "
        "or run; cause: intermittent (the same request asked again came back right (called "
        "get_*",
        "*fix: an intermittent fault: the same request is answered right at other times*"])
    assert "--jinja" not in result.stdout.str()
    assert "1/2 trial(s) valid" not in result.stdout.str()


def test_an_agent_step_of_reasoning_alone_fails_as_such(llama, run_fleet):
    """The same proxy fault on every forced call: the agent's first turn comes back as
    reasoning alone, and the conversation fails naming it, not as "no tool call"."""
    server = llama()
    with Proxy(server.url, rewrite_answer=reasoning_alone) as proxy:
        result = run_fleet(one_endpoint(proxy.url, timeout=PATIENT, expect={"agent": True}),
                           "-k", "test_agent and not streamed and not parallel and not template "
                           "and not reasoning_history",
                           "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): 1 of 1 reply carried reasoning only: no "
        "content and no tool call*"])
