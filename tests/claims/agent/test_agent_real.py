"""agent against real llama.cpp servers (xllamacpp, the self-test model): a tool result sent back
gets a final answer, plain, streamed, with parallel calls and through /v1/messages; a template
that cannot render role tool, or drops it, fails with its diagnosis."""

import pytest
import json

from fleets import one_endpoint
from llama import template_file
from proxy import Proxy

from checkout import ROOT
from pytest_frank.local.selftest_model import chat_template

pytestmark = pytest.mark.real


def run(run_fleet, server, *args, engine="llamacpp", **expect):
    return run_fleet(one_endpoint(server.url, engine, expect=expect),
                     "-p", "no:randomly", "-m", "agent", *args)


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def test_agent_model_passes_plain_and_streamed(llama, run_fleet, pytester):
    server = llama(model="selftest:agent")
    result = run(run_fleet, server, "--frank-json=run.json",
                 agent={"parallel": True, "trials": 2})
    # The self-test model makes one call where two are asked at once (as under tools'
    # parallel probe): the parallel step fails on the first turn, saying so. The rendered
    # history (test_agent_template) passes.
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines([
        "*agent step with parallel calls (1 call(s), then the answer): 0/2 conversation(s) "
        "reached a final answer: turn 1 (the tool call) is not a usable call: parallel calls "
        "truncated: 1 call(s) where 2 were asked for at once; cause: the engine's chat template "
        "and the parser it selects (the unstreamed request fails, again when asked once more*",
        "*fix: the server cut parallel calls to one*"])
    notes = rows(pytester)["test_agent[ep]"]["notes"]
    text = "\n".join(notes)
    assert "trial 2 turn 1 came back: finish tool_calls, calls get_" in text, text
    assert "turn 2 sent: user, assistant (1 tool_call(s), reasoning_content), tool" in text, text
    assert "turn 2 came back: finish stop, content 'Hello!'" in text, text
    assert '"reference": "ref-' in text, text


def test_default_model_passes_three_chained_steps(llama, run_fleet):
    server = llama()
    result = run(run_fleet, server, agent={"steps": 3})
    result.assert_outcomes(passed=4, skipped=1)  # parallel not asked


def test_messages_route_echoes_thinking_and_answers_tool_result(llama, run_fleet):
    # llama.cpp's own /v1/messages through the anthropic client, thinking on (reasoning asked).
    server = llama(model="selftest:agent")
    with Proxy(server.url) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "anthropic",
                                        expect={"agent": True, "reasoning": True}),
                           "-p", "no:randomly", "-m", "agent")
    # parallel; no template route for the shape; test_agent_reasoning_history passes
    result.assert_outcomes(passed=3, skipped=2)
    # Each thinking block went back with the signature it came with ("", llama.cpp's own):
    # test_agent's and test_agent_streamed's turn 2, and test_agent_reasoning_history's.
    echoed = [b for body in proxy.sent for m in body.get("messages", [])
              if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
    assert len(echoed) == 3 and all(b["signature"] == "" for b in echoed), echoed


def _unsigned(request: dict, answer: dict) -> dict:
    """A gateway that rebuilds thinking blocks without their signature (LiteLLM 26916)."""
    for block in answer.get("content") or []:
        block.pop("signature", None)
    return answer


def _unsigned_stream(request: dict, events: list[bytes]) -> list[bytes]:
    """The same gateway, streamed: the signature_delta events left out."""
    return [e for e in events if b'"signature_delta"' not in e]


def test_messages_route_thinking_signature_stripped_by_a_gateway(llama, run_fleet):
    # llama.cpp signs its thinking blocks with "" (plain, and a signature_delta when streamed),
    # which the echo carries back and llama.cpp takes; a gateway in front that leaves the
    # signature out passes llama.cpp's lenient next turn, and breaks the Messages API's.
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite_answer=_unsigned, rewrite_stream=_unsigned_stream) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "anthropic",
                                        expect={"agent": True, "reasoning": True}),
                           "-p", "no:randomly", "-m", "agent")
    # test_agent_reasoning_history passes: llama.cpp reads the unsigned block all the same
    result.assert_outcomes(passed=1, failed=2, skipped=2)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 1's thinking block came without its "
        "signature: a client (Claude Code) sends it back as it came*",
        "*fix: a gateway between the client and the engine rebuilt the thinking blocks*"])
    echoed = [b for body in proxy.sent for m in body.get("messages", [])
              if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
    assert echoed and all(b["signature"] is None for b in echoed), echoed


def test_template_raising_on_role_tool_is_a_template_error(llama, run_fleet, tmp_path):
    # As llama.cpp issue 19851's template: roles must alternate, a tool message raises. llama.cpp
    # renders sample conversations to learn the tool-call format, so the raise keys on this
    # probe's results (their marker) to leave that analysis, and turn 1, intact.
    strict = ("{%- for m in messages %}{%- if m.role == 'tool' and 'ref-' in m.content %}"
              "{{- raise_exception("
              "'Conversation roles must alternate user/assistant/user/assistant/...') }}"
              "{%- endif %}{%- endfor %}\n" + chat_template("agent"))
    server = llama(model="selftest:agent",
                   chat_template_file=template_file(tmp_path, "strict.jinja", strict))
    result = run(run_fleet, server, agent={"stream": False})
    # test_agent_template fails too: /apply-template renders through the same raise, and
    # test_agent_reasoning_history: its history is refused by it
    result.assert_outcomes(failed=3, skipped=2)
    # This build refuses while it builds the request's parser: 400, not the 500.
    result.stdout.fnmatch_lines([
        "*turn 2 (the answer to the tool result) answered 400: the chat template could not "
        "render the history (user, assistant (1 tool_call(s), reasoning_content), tool)"
        ": *Conversation roles must alternate*",
        "*fix: serve the model's own chat template*"])


def test_template_dropping_tool_messages_repeats_the_call(llama, run_fleet, tmp_path):
    # The default template less its role-tool branch: the result never reaches the prompt, so
    # the agent model (which answers once a result came last) calls again.
    deaf = chat_template().replace("message.role == 'tool'", "message.role == 'nobody'")
    server = llama(model="selftest:agent",
                   chat_template_file=template_file(tmp_path, "deaf.jinja", deaf))
    result = run(run_fleet, server, agent=True)
    # and test_agent_template: the rendered prompt lacks the result
    # (tests/claims/agent/test_rendered_real.py)
    # test_agent_reasoning_history passes: the template still keeps the reasoning
    result.assert_outcomes(passed=1, failed=3, skipped=1)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 2 called get_* again with the "
        "same arguments (*) instead of answering*",
        "*fix: the tool result did not reach the prompt: does the chat template render role "
        "tool*"])


def _strip(kind):
    """A gateway that drops one kind of content block from every message it forwards."""
    def rewrite(body):
        messages = []
        for m in body.get("messages", []):
            content = m.get("content")
            if isinstance(content, list):
                content = [b for b in content if b.get("type") != kind]
                if not content:
                    continue
            messages.append({**m, "content": content})
        return {**body, "messages": messages}
    return rewrite


def test_proxy_losing_tool_results_fails_the_step(llama, run_fleet):
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite=_strip("tool_result")) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "anthropic", expect={"agent": True}),
                           "-p", "no:randomly", "-m", "agent")
    result.assert_outcomes(failed=2, skipped=3)
    result.stdout.fnmatch_lines([
        "*turn 2 (the answer to the tool result) answered 400: the results were sent (user, "
        "assistant (thinking, tool_use), user (1 tool_result block(s))) but did not arrive: "
        "Cannot continue an assistant message that contains tool calls.",
        "*fix: the history reached the engine ending in the assistant's tool call: a proxy*"])


def test_the_embedded_default_asks_and_passes_it(run_fleet):

    example = ROOT / "examples" / "selftest.yaml"
    result = run_fleet(example.read_text(), "-m", "agent")
    # plain, streamed, template, reasoning history, rounds; parallel not asked
    result.assert_outcomes(passed=5, skipped=1)
    result.stdout.fnmatch_lines(["frank-selftest *agent ok*"])


def test_the_tools_claims_forced_call_is_the_agents_first_step_sent_once(llama, run_fleet,
                                                                         pytester):
    # Both claims send the forced call alike: one request, judged by both rows.
    server = llama(model="selftest:agent")
    result = run_fleet(one_endpoint(server.url, expect={"tools": True, "agent": True}),
                       "-p", "no:randomly", "-k", "test_tools_required or test_agent[",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=2)
    found = rows(pytester)
    posts = {key: [ex["sent"] for ex in row["exchanges"] if ex["request"].startswith("POST")]
             for key, row in found.items()}
    assert len(posts["test_tools_required[ep]"]) == 1
    assert posts["test_agent[ep]"][0] == posts["test_tools_required[ep]"][0]
    assert len(posts["test_agent[ep]"]) == 2  # the shared call, then the answer to its result
    result.stdout.fnmatch_lines(["ep  cost: 2 generations, *"])
