"""The contract claim end to end, against real llama.cpp (xllamacpp, the self-test model:
`<think>Thinking</think>Hello!`, a get_weather call where tools are offered). Healthy, every
reply the tools and agent checks received keeps its contract and each streamed reply equals its
plain twin. The faults come from a gateway in front of that same server (tests/support/proxy.py),
the cases of a field the other checks never read: a plain reply whose finish says stop beside
its call, and a stream that sends the text so far instead of each piece (accumulated deltas)."""

from __future__ import annotations

import json

import pytest
from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real

PATIENT = 300
# The checks whose probes send the replies judged: plain and streamed tool calls (their twins),
# the agent's turns. The contract itself sends nothing.
SELECTED = "test_contract or test_tools_streamed or test_agent_step"
EXPECT = {"reasoning": True, "tools": True, "agent": True}


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def run(run_fleet, url: str):
    return run_fleet(one_endpoint(url, timeout=PATIENT, expect=EXPECT), "-k", SELECTED,
                     "-p", "no:randomly", "--frank-json=run.json")


def test_llamacpps_replies_keep_their_contract_and_streams_equal_their_twins(
        llama, run_fleet, pytester):
    server = llama()
    result = run(run_fleet, server.url)
    found = rows(pytester)
    assert found["test_contract_replies[ep]"]["verdict"] == "pass", found["test_contract_replies[ep]"]
    assert found["test_contract_stream_twins[ep]"]["verdict"] == "pass", \
        found["test_contract_stream_twins[ep]"]
    notes = "\n".join(found["test_contract_stream_twins[ep]"]["notes"])
    assert "streamed replies equal their plain twins, reassembled 2 ways" in notes, notes
    assert "failed" not in result.stdout.str().split("short test summary")[-1]


def finish_stop(request: dict, answer: dict) -> dict:
    """For `rewrite_answer`: a plain chat reply whose finish_reason says stop though it holds
    a tool call (a gateway that maps every finish to stop)."""
    for choice in answer.get("choices") or []:
        if (choice.get("message") or {}).get("tool_calls"):
            choice["finish_reason"] = "stop"
    return answer


def test_a_call_whose_finish_says_stop_fails_the_contract_naming_the_field(
        llama, run_fleet, pytester):
    server = llama()
    with Proxy(server.url, rewrite_answer=finish_stop) as proxy:
        run(run_fleet, proxy.url)
    line = rows(pytester)["test_contract_replies[ep]"]["line"]
    assert "plain reply on /v1/chat/completions, the reply: the reply holds 1 call(s) and " \
           "choices[0].finish_reason is 'stop', not 'tool_calls': agent clients that loop on " \
           "the finish reason end the turn and never run the call" in line, line
    assert "Who breaks on it: agent clients that loop on the finish reason" in line, line


def accumulated(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: each chat chunk's content the text so far, not its own piece (a
    gateway that re-sends the accumulated message)."""
    out, so_far = [], ""
    for event in events:
        raw = event.removeprefix(b"data: ").strip()
        try:
            chunk = json.loads(raw)
        except ValueError:
            out.append(event)
            continue
        delta = ((chunk.get("choices") or [{}])[0]).get("delta") or {}
        if isinstance(delta.get("content"), str):
            so_far += delta["content"]
            delta["content"] = so_far
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    return out


def test_deltas_accumulated_by_a_gateway_fail_the_twins_naming_the_frame(
        llama, run_fleet, pytester):
    server = llama()
    with Proxy(server.url, rewrite_stream=accumulated) as proxy:
        run(run_fleet, proxy.url)
    line = rows(pytester)["test_contract_stream_twins[ep]"]["line"]
    assert "streamed reply on /v1/chat/completions differs from its plain twin to the same " \
           "greedy request in content (from frame" in line, line
    assert "streamed 'HelloHello!', plain 'Hello!'" in line, line
    assert "read by appending every delta (as opencode and the AI SDK do), the OpenAI SDK's " \
           "stream accumulator" in line, line
