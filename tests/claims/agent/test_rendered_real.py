"""The rendered prompt against real llama.cpp (xllamacpp): test_agent_template reads what an agent's
history renders to through POST /apply-template, test_params_prompt_tokens counts that prompt with
/tokenize against usage.prompt_tokens. The passing side on the real SmolLM2 (plain ChatML: no
tools, no reasoning, no ids in its template) and the self-test models (reasoning kept, and a
template that shows call ids); each fault through a proxy (tests/support/proxy.py), since llama.cpp
itself neither drops a history's parts nor miscounts: one that drops role tool messages, one that
strips reasoning_content, one that renames call ids, one that counts prompts with another
tokenizer."""

import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

from pytest_frank.local.selftest_model import chat_template

pytestmark = pytest.mark.real


def run(run_fleet, url, test, **expect):
    return run_fleet(one_endpoint(url, "llamacpp", expect=expect), "-p", "no:randomly",
                     "-k", test, "--frank-json=run.json")


def notes(pytester) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(n for row in data["rows"] for n in row["notes"])


def _messages(edit):
    """A gateway that rewrites the history of every body it forwards (chat and render alike)."""
    def rewrite(body):
        if "messages" not in body:
            return body
        return {**body, "messages": [m for m in map(edit, body["messages"]) if m is not None]}
    return rewrite


def _drop_tool(m):
    return None if m.get("role") == "tool" else m


def _drop_reasoning(m):
    return {k: v for k, v in m.items() if k != "reasoning_content"}


def _renumber(m):
    """Call ids renamed as a gateway that numbers calls itself does, on both sides."""
    if m.get("tool_calls"):
        return {**m, "tool_calls": [{**c, "id": f"call_{i}"} for i, c in
                                    enumerate(m["tool_calls"])]}
    return {**m, "tool_call_id": "call_0"} if m.get("role") == "tool" else m


# -- test_agent_template ----------------------------------------------------------------------
def test_template_keeping_reasoning_passes(llama, run_fleet, pytester):
    server = llama(model="selftest:agent")
    result = run(run_fleet, server.url, "agent_template", agent=True)
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    assert "the tool result is in the prompt" in text, text
    assert "the earlier reasoning is in the prompt" in text, text
    assert "the served template rendered here with the same history decides" in text, text
    assert "the template shows no call id (tool_call_id): ids are not asked for" in text, text


def test_chatml_without_reasoning_or_ids_passes_on_smollm2(smollm2, run_fleet, pytester):
    server = smollm2(alias="smollm2")
    result = run(run_fleet, server.url, "agent_template", agent=True)
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    assert "the tool result is in the prompt" in text, text
    assert "the template keeps no earlier reasoning (reasoning_content) by design" in text, text


def test_proxy_dropping_tool_results_fails(llama, run_fleet):
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite=_messages(_drop_tool)) as proxy:
        result = run(run_fleet, proxy.url, "agent_template", agent=True)
    result.assert_outcomes(failed=1)
    # llama.cpp refuses a history that ends in the assistant's call before any template runs.
    result.stdout.fnmatch_lines([
        "*POST /apply-template answered 400: an agent's history was sent with its tool result "
        "(user, assistant with a tool call, tool) but did not arrive whole: Cannot continue an "
        "assistant message that contains tool calls.",
        "*fix: the history reached the engine ending in the assistant's tool call: a proxy*"])


def _blank_tool(m):
    """A gateway that forwards role tool messages without their content."""
    return {**m, "content": ""} if m.get("role") == "tool" else m


def test_proxy_blanking_tool_results_fails(llama, run_fleet):
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite=_messages(_blank_tool)) as proxy:
        result = run(run_fleet, proxy.url, "agent_template", agent=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the rendered prompt lacks the tool result (ref-*) sent as a role tool message: the "
        "model answers without what the tool said; the served template, rendered here with the "
        "same history, shows it",
        "*fix: the result was lost before the template: a proxy or gateway in front dropped the "
        "role tool message (or its content)*"])


def test_proxy_blanking_tool_results_fails_on_smollm2(smollm2, run_fleet):
    server = smollm2(alias="smollm2")
    with Proxy(server.url, rewrite=_messages(_blank_tool)) as proxy:
        result = run(run_fleet, proxy.url, "agent_template", agent=True)
    result.assert_outcomes(failed=1)
    # SmolLM2's ChatML, rendered here, shows a role tool message by its role name.
    result.stdout.fnmatch_lines(["*lacks the tool result*rendered here with the same history, "
                                 "shows it", "*fix: the result was lost before the template*"])


def test_template_dropping_tool_results_is_named(llama, run_fleet, tmp_path):
    # The agent template less its role-tool branch (as tests/claims/agent/test_agent_real.py's deaf one).
    deaf = chat_template("agent").replace("message.role == 'tool'", "message.role == 'nobody'")
    path = tmp_path / "deaf.jinja"
    path.write_text(deaf)
    server = llama(model="selftest:agent", chat_template_file=str(path))
    result = run(run_fleet, server.url, "agent_template", agent=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*lacks the tool result (ref-*) sent as a role tool message: the model answers without "
        "what the tool said; the served template drops it itself (rendered here with the same "
        "history: no result)",
        "*fix: the template drops role tool messages: serve the model's own chat template*"])


def test_proxy_stripping_reasoning_fails(llama, run_fleet):
    server = llama(model="selftest:agent")
    with Proxy(server.url, rewrite=_messages(_drop_reasoning)) as proxy:
        result = run(run_fleet, proxy.url, "agent_template", agent=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the rendered prompt lacks the earlier reasoning the history carried, though the "
        "served template keeps reasoning_content: *",
        "*fix: a proxy or gateway in front rewrote the history: make it forward the "
        "assistant's reasoning_content as the client sent them*"])


# A template that shows call ids, as Mistral's and Kimi's do: the result is rendered with its id.
SHOWS_IDS = chat_template("agent").replace(
    "{{- '\\n<tool_response>\\n' + message.content",
    "{{- '\\n<tool_response id=\"' + message.tool_call_id + '\">\\n' + message.content")


def test_template_showing_ids_passes_and_renamed_ids_fail(llama, run_fleet, pytester, tmp_path):
    assert SHOWS_IDS != chat_template("agent")
    path = tmp_path / "ids.jinja"
    path.write_text(SHOWS_IDS)
    server = llama(model="selftest:agent", chat_template_file=str(path))
    result = run(run_fleet, server.url, "agent_template", agent=True)
    result.assert_outcomes(passed=1)
    assert "the call id is in the prompt" in notes(pytester)
    with Proxy(server.url, rewrite=_messages(_renumber)) as proxy:
        result = run(run_fleet, proxy.url, "agent_template", agent=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the rendered prompt lacks the call id the history carried, though the served template "
        "shows call ids (tool_call_id): *tool_response id=?call_0?*",
        "*fix: a proxy or gateway in front rewrote the history: make it forward the "
        "tool_call_id of role tool messages and the ids of tool_calls*"])


def test_template_off_is_not_asked(llama, run_fleet):
    server = llama(model="selftest:agent")
    result = run(run_fleet, server.url, "agent_template", agent={"template": False})
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*expect.agent.template is false*"])


# -- test_params_prompt_tokens ----------------------------------------------------------------
def test_prompt_tokens_match_the_servers_count_on_smollm2(smollm2, run_fleet, pytester):
    server = smollm2(alias="smollm2")
    result = run(run_fleet, server.url, "prompt_tokens", params=True)
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    assert "the server's count" in text and "POST /tokenize of POST /apply-template's prompt" \
        in text, text
    said = [int(w) for w in text.split("usage.prompt_tokens ")[1].split(";")[:1]]
    assert said[0] > 20, text  # the system line and the request, in SmolLM2's tokens


def _miscount(request, answer):
    """A gateway that counts prompts with its own tokenizer: a third more than the engine's."""
    usage = answer.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
        usage["prompt_tokens"] = round(usage["prompt_tokens"] * 4 / 3)
    return answer


def test_proxy_miscounting_prompt_tokens_fails(smollm2, run_fleet):
    server = smollm2(alias="smollm2")
    with Proxy(server.url, rewrite_answer=_miscount) as proxy:
        result = run(run_fleet, proxy.url, "prompt_tokens", params=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*usage.prompt_tokens says *, the server's own count of the rendered prompt is * "
        "(POST /tokenize of POST /apply-template's prompt); clients that size their history by "
        "usage are misled",
        "*fix: a proxy or gateway that rewrites usage must pass the engine's prompt_tokens "
        "through*"])
