"""The Responses route (fleet.yaml `api: responses`, POST /v1/responses through the openai
client's responses.create) against real llama.cpp servers (xllamacpp, the self-test model):
every generating claim runs through it, the agent loop carries function_call_output items and
echoes reasoning items as Codex does, and the turn-2 faults fail through it."""

import json

from fleets import one_endpoint
from proxy import Proxy
from test_agent_real import _template

from pytest_frank.local.selftest_model import chat_template

SEEDS_MAP = {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "max": "xhigh"}


def run(run_fleet, server, *args, **expect):
    return run_fleet(one_endpoint(server.url, "llamacpp", api="responses",
                                  alias="frank-default-large", expect=expect),
                     "-p", "no:randomly", *args)


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def test_generating_claims_run_through_responses(llama, run_fleet):
    server = llama(alias="frank-default-large")
    with Proxy(server.url) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", api="responses",
                                        alias="frank-default-large", expect={
                                            "reasoning": True, "reasoning_effort": SEEDS_MAP,
                                            "tools": {"trials": 2}, "params": True,
                                            "fingerprint": True, "perf": True, "chat": True}),
                           "-p", "no:randomly", "-m", "not health and not alias")
    # Every generation went to /v1/responses: input items, never chat messages.
    bodies = [b for b in proxy.sent if "model" in b]
    assert bodies and all("input" in b and "messages" not in b for b in bodies), bodies
    assert all(b["store"] is False and "max_output_tokens" in b for b in bodies), bodies
    # 3 reasoning + 5 levels + 4 tools + chat + context_limit + fingerprint + ttft, decode;
    # stop, stream_usage, count_tokens, system_message are not Responses parameters; named
    # (ignored by llama.cpp), parallel, unmapped, prefix_cache not asked; max_tokens is left
    # inconclusive by a terse model.
    result.assert_outcomes(passed=17, failed=2, skipped=9)
    result.stdout.fnmatch_lines([
        # llama.cpp's /v1/responses passes the body on to chat, where text.format means
        # nothing and top_logprobs without the chat's logprobs: true is refused.
        "*text.format json_schema was sent and the content is not JSON ('Hello!'): the "
        "schema is not enforced",
        "*fix: the server accepts text.format without enforcing it*",
        "*a request with logprobs answered 400: top_logprobs requires logprobs to be set to "
        "true*",
        "*test_params_stop*: stop is not part of the Responses API shape"])


def test_agent_echoes_reasoning_items_and_answers_function_call_output(llama, run_fleet,
                                                                       pytester):
    server = llama(model="selftest:agent", alias="frank-default-large")
    result = run(run_fleet, server, "-m", "agent", "--frank-json=run.json",
                 agent={"steps": 2}, reasoning=True)
    result.assert_outcomes(passed=2, skipped=1)
    notes = "\n".join(rows(pytester)["test_agent_streamed[ep]"]["notes"])
    # The reasoning item echoed with its reasoning_text content (as Codex does), the call, its
    # output; turn 2 answered with text beside its call, echoed as an assistant message.
    assert "turn 2 sent: user, reasoning, function_call, function_call_output\n" in notes, notes
    assert ("turn 3 sent: user, reasoning, function_call, function_call_output, assistant "
            "(output_text), function_call, function_call_output") in notes, notes
    assert "turn 3 came back: finish stop, content 'Hello!'" in notes, notes


def test_template_raising_on_role_tool_fails_through_responses(llama, run_fleet, tmp_path):
    strict = ("{%- for m in messages %}{%- if m.role == 'tool' and 'ref-' in m.content %}"
              "{{- raise_exception("
              "'Conversation roles must alternate user/assistant/user/assistant/...') }}"
              "{%- endif %}{%- endfor %}\n" + chat_template("agent"))
    server = llama(model="selftest:agent", alias="frank-default-large",
                   chat_template_file=_template(tmp_path, "strict.jinja", strict))
    result = run(run_fleet, server, "-m", "agent", agent={"stream": False})
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "*turn 2 (the answer to the tool result) answered 400: the chat template could not "
        "render the history (user, reasoning, function_call, function_call_output)"
        ": *Conversation roles must alternate*",
        "*fix: serve the model's own chat template*"])


def test_template_dropping_tool_results_repeats_the_call_through_responses(llama, run_fleet,
                                                                          tmp_path):
    deaf = chat_template().replace("message.role == 'tool'", "message.role == 'nobody'")
    server = llama(model="selftest:agent", alias="frank-default-large",
                   chat_template_file=_template(tmp_path, "deaf.jinja", deaf))
    result = run(run_fleet, server, "-m", "agent", agent=True)
    result.assert_outcomes(failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 2 called get_* again with the "
        "same arguments (*) instead of answering*",
        "*fix: the tool result did not reach the prompt: does the chat template render*"])
