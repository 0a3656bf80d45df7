"""test_agent_reasoning_history against real llama.cpp (xllamacpp): one agent history asked for one
token without the previous turn's reasoning, with it in reasoning_content and in reasoning, and
the server's prompt counts compared. The passing side on the self-test agent model (its template
keeps an agent's reasoning; llama.cpp reads reasoning_content, not `reasoning`) and on the real
SmolLM2 (plain ChatML keeps none); the fault through a proxy (tests/support/proxy.py) that strips
reasoning_content from the history, as a gateway does, since llama.cpp itself keeps it. On
llama.cpp's /v1/messages the same with the agent's own signed thinking block, and a proxy that
strips thinking blocks from the history."""

import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real


def run(run_fleet, url, api=None, **agent):
    expect = {"agent": agent or True, **({"reasoning": True} if api else {})}
    return run_fleet(one_endpoint(url, "llamacpp", expect=expect, **({"api": api} if api else {})),
                     "-p", "no:randomly", "-k", "reasoning_history", "--frank-json=run.json")


def notes(pytester) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(n for row in data["rows"] for n in row["notes"])


def _strip_reasoning_content(body):
    """A gateway that forwards assistant messages without reasoning_content (chat and /props
    alike: only chat bodies carry messages)."""
    if "messages" not in body:
        return body
    return {**body, "messages": [{k: v for k, v in m.items() if k != "reasoning_content"}
                                 for m in body["messages"]]}


def test_reasoning_read_where_the_template_keeps_it_passes(llama, run_fleet, pytester):
    server = llama(model="selftest:agent")
    result = run(run_fleet, server.url)
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    # llama.cpp reads reasoning_content only: `reasoning` is a note, not a failure.
    assert "with it in `reasoning_content`" in text, text
    assert "`reasoning` does not reach the prompt (the llama.cpp server reads " \
           "`reasoning_content`)" in text, text
    assert "the template keeps an agent's reasoning, and `reasoning_content` reaches it" in text


def test_template_keeping_no_reasoning_is_a_note_on_smollm2(smollm2, run_fleet, pytester):
    server = smollm2(alias="smollm2")
    result = run(run_fleet, server.url)
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    assert "the template keeps no earlier reasoning in an agent's history (the served " \
           "template, rendered here with the same history, drops it)" in text, text


def test_proxy_stripping_reasoning_content_fails(llama, run_fleet):
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite=_strip_reasoning_content) as proxy:
        result = run(run_fleet, proxy.url)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the previous turn's reasoning left the prompt at * tokens in every field clients send "
        "it in (`reasoning_content`, `reasoning`), as long as without it, though the served "
        "template, rendered here with the same history, keeps it: the llama.cpp server reads "
        "`reasoning_content`, so it was dropped on the way*",
        "*fix: a proxy or gateway in front strips `reasoning_content` from the history's "
        "assistant messages*"])


def test_fleet_saying_the_template_keeps_reasoning_holds_it(smollm2, run_fleet):
    # SmolLM2's ChatML keeps none: a fleet that says it does is held to its word.
    server = smollm2(alias="smollm2")
    result = run(run_fleet, server.url, reasoning_history=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*though fleet.yaml says the template keeps it "
                                 "(expect.agent.reasoning_history)*"])
    result = run(run_fleet, server.url, reasoning_history=False)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*expect.agent.reasoning_history is false*"])


def _strip_thinking_blocks(body):
    """A gateway that forwards an assistant turn's content without its thinking blocks."""
    if "messages" not in body:
        return body
    return {**body, "messages": [
        {**m, "content": [b for b in m["content"] if b.get("type") != "thinking"]}
        if m.get("role") == "assistant" and isinstance(m.get("content"), list) else m
        for m in body["messages"]]}


def test_messages_route_thinking_block_reaches_the_prompt(llama, run_fleet, pytester):
    # The agent's own turn (thinking asked, its block signed "" by llama.cpp) sent back with and
    # without its thinking block, counted by usage.input_tokens.
    server = llama(model="selftest:agent")
    with Proxy(server.url) as proxy:
        result = run(run_fleet, proxy.url, api="messages")
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    assert "input tokens without the previous turn's reasoning; " in text, text
    assert "the template keeps an agent's reasoning, and `thinking` blocks reaches it" in text
    sent = [m for body in proxy.sent for m in body.get("messages", [])
            if m["role"] == "assistant"]
    assert [[b["type"] for b in m["content"]] for m in sent] == [["tool_use"],
                                                                 ["thinking", "tool_use"]], sent


def test_proxy_stripping_thinking_blocks_fails(llama, run_fleet):
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite=_strip_thinking_blocks) as proxy:
        result = run(run_fleet, proxy.url, api="messages")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the previous turn's reasoning left the prompt at * input tokens in every field "
        "clients send it in (`thinking` blocks), as long as without it, though the served "
        "template, rendered here with the same history, keeps it: the llama.cpp server reads "
        "`thinking` blocks, so it was dropped on the way*",
        "*fix: a proxy or gateway in front strips the `thinking` blocks from the history's "
        "assistant turns*"])
