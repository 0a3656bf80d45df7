"""The Responses route (fleet.yaml `api: responses`, POST /v1/responses through the openai
client's responses.create) against real llama.cpp servers (xllamacpp, the self-test model) and
one real vLLM: every generating claim runs through it, the agent loop carries
function_call_output items and echoes reasoning items as Codex does, and the turn-2 faults fail
through it. (Real vLLM's route: tests/vllm/test_responses_vllm_real.py.)

What llama.cpp's /v1/responses does (xllamacpp 2026.10): it turns the request into a chat
request and passes every other field on, so `text.format` means nothing there, `top_logprobs`
without the chat's `logprobs: true` is refused (400), and an answer cut at max_output_tokens
still says status "completed"; a reasoning item echoed without `content` is refused (400
"item['content'] is not an array"), while the items it sends carry their reasoning_text, which
Codex echoes. vLLM 0.32 serves the route natively: all of it right but a named tool_choice."""

import json
import re

import pytest
from fleets import one_endpoint
from proxy import Proxy
from llama import template_file

from pytest_frank.local.selftest_model import chat_template

pytestmark = pytest.mark.real

SEEDS_MAP = {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "max": "xhigh"}


def run(run_fleet, server, *args, **expect):
    return run_fleet(one_endpoint(server.url, "llamacpp", api="responses",
                                  alias="frank-default-large", expect=expect),
                     "-p", "no:randomly", *args)


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def test_generating_claims_run_through_responses(llama, run_fleet, pytester):
    server = llama(alias="frank-default-large")
    with Proxy(server.url) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", api="responses",
                                        alias="frank-default-large", expect={
                                            "reasoning": True, "reasoning_effort": SEEDS_MAP,
                                            "tools": {"trials": 2}, "params": True,
                                            "fingerprint": True, "perf": True, "chat": True}),
                           "-p", "no:randomly", "-m", "not health and not alias",
                           "--frank-json=run.json")
    # Every generation went to /v1/responses: input items, never chat messages.
    bodies = [b for b in proxy.sent if "model" in b]
    assert bodies and all("input" in b and "messages" not in b for b in bodies), bodies
    assert all(b["store"] is False and "max_output_tokens" in b for b in bodies), bodies
    # 3 reasoning + 5 levels + 5 tools + chat + context_limit + sampling + fingerprint + ttft,
    # decode; stop, stream_usage, count_tokens, system_message, validation and the format
    # variants are not Responses parameters; named
    # (ignored by llama.cpp), parallel, unmapped, prefix_cache not asked; max_tokens is left
    # inconclusive by a terse model.
    result.assert_outcomes(passed=22, failed=2, skipped=12)  # prompt_tokens: chat only; contract 2
    result.stdout.fnmatch_lines([
        # llama.cpp's /v1/responses passes the body on to chat, where text.format means
        # nothing and top_logprobs without the chat's logprobs: true is refused.
        "*text.format json_schema was sent and the content is not JSON ('Hello!'): the "
        "schema is not enforced",
        "*fix: the server accepts text.format without enforcing it*",
        "*a request with logprobs answered 400: top_logprobs requires logprobs to be set to "
        "true*",
        "*test_params_stop*: stop is not part of the Responses API shape"])
    notes = rows(pytester)["test_fingerprint[ep]"]["notes"]
    assert ("logprobs were refused (answered 400: top_logprobs requires logprobs to be set to "
            "true): asked without them") in notes, notes


def test_agent_echoes_reasoning_items_and_answers_function_call_output(llama, run_fleet,
                                                                       pytester):
    server = llama(model="selftest:agent", alias="frank-default-large")
    result = run(run_fleet, server, "-m", "agent", "--frank-json=run.json",
                 agent={"steps": 2}, reasoning=True)
    # with the rendered history and the chain; the reasoning history is the chat route's
    result.assert_outcomes(passed=4, skipped=2)
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
                   chat_template_file=template_file(tmp_path, "strict.jinja", strict))
    result = run(run_fleet, server, "-m", "agent", agent={"stream": False})
    # /apply-template raises too; the chain leaves the template's fault to test_agent
    result.assert_outcomes(failed=2, skipped=3, passed=1)
    result.stdout.fnmatch_lines([
        "*turn 2 (the answer to the tool result) answered 400: the chat template could not "
        "render the history (user, reasoning, function_call, function_call_output)"
        ": *Conversation roles must alternate*",
        "*fix: serve the model's own chat template*"])


def test_template_dropping_tool_results_repeats_the_call_through_responses(llama, run_fleet,
                                                                          tmp_path):
    deaf = chat_template().replace("message.role == 'tool'", "message.role == 'nobody'")
    server = llama(model="selftest:agent", alias="frank-default-large",
                   chat_template_file=template_file(tmp_path, "deaf.jinja", deaf))
    result = run(run_fleet, server, "-m", "agent", agent=True)
    # the rendered prompt lacks it; the chain leaves the template's fault to test_agent
    result.assert_outcomes(failed=3, skipped=2, passed=1)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 2 called get_* again with the "
        "same arguments (*) instead of answering*",
        "*fix: the tool result did not reach the prompt: does the chat template render*"])


def _summary_only(request: dict, answer: dict) -> dict:
    """A gateway that hands reasoning on as OpenAI's models send it: a summary, no content."""
    for item in answer.get("output", []):
        if item.get("type") == "reasoning":
            text = "".join(p.get("text", "") for p in item.pop("content", None) or [])
            item["summary"] = [{"type": "summary_text", "text": text}]
    return answer


def test_reasoning_echoed_without_content_is_refused_by_llama_cpp(llama, run_fleet):
    # The reasoning comes as a summary; echoed back as Codex echoes it (summary, content null),
    # llama.cpp's /v1/responses answers 400: the agent claim names the reasoning item.
    server = llama(model="selftest:agent", alias="frank-default-large")
    with Proxy(server.url, rewrite_answer=_summary_only) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", api="responses",
                                        alias="frank-default-large",
                                        expect={"agent": {"stream": False}}),
                           "-p", "no:randomly", "-m", "agent")
    sent = next(b["input"] for b in proxy.sent if any(
        isinstance(i, dict) and i.get("type") == "reasoning" for i in b.get("input", [])))
    assert {"type": "reasoning", "status": "completed", "content": None,
            "summary": [{"type": "summary_text", "text": "Thinking"}],
            "encrypted_content": ""} in sent, sent
    # the rendered history passes, and the chain leaves the refusal to test_agent
    result.assert_outcomes(failed=1, passed=2, skipped=3)
    result.stdout.fnmatch_lines([
        "*turn 2 (the answer to the tool result) answered 400: the reasoning item echoed back "
        "as Codex echoes it (user, reasoning, function_call, function_call_output) was "
        "refused: item?'content'? is not an array",  # fnmatch reads [] as a class
        "*fix: Codex sends a reasoning item back as it came*"])


def test_vision_through_responses(llama, run_fleet):
    server = llama(model="selftest:vision", mmproj="selftest", threads=1)
    with Proxy(server.url) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", api="responses", alias="frank",
                                        expect={"vision": True}), "-m", "vision")
    result.assert_outcomes(passed=1)
    parts = [p for b in proxy.sent for m in b.get("input", []) for p in m.get("content", [])
             if isinstance(p, dict)]
    assert {p["type"] for p in parts} == {"input_text", "input_image"}, parts


def test_llama_cpp_reports_a_cut_answer_as_completed(llama, run_fleet):
    # selftest:chatty talks until the cap: llama.cpp's /v1/responses cuts it at
    # max_output_tokens and still says status "completed" (vLLM says "incomplete"), so a
    # Responses client takes the cut answer for a whole one.
    server = llama(model="selftest:chatty", alias="frank", ctx_size=1024, threads=1)
    result = run_fleet(one_endpoint(server.url, "llamacpp", api="responses", alias="frank",
                                    expect={"params": True}),
                       "-p", "no:randomly", "-k", "max_tokens")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        # Every cap is met exactly (16, 8, 4: each ask "ended by itself" is asked again smaller).
        "*max_output_tokens=4 was sent and the answer stopped at exactly 4 tokens with "
        "finish_reason 'stop' (16 tokens under a cap of 16, 8 tokens under a cap of 8, 4 tokens "
        "under a cap of 4 (finish_reason 'stop')): the cap cut it, but clients read the finish "
        "as a complete answer",
        "*fix: update the engine, or the proxy in front that rewrites the status: an answer cut "
        "by the budget must end with status \"incomplete\" and incomplete_details.reason "
        "\"max_output_tokens\""])


def test_send_on_the_responses_route_takes_a_client_shaped_request(llama):
    # As a client profile sends it (chat.send with api="responses" on a chat endpoint): its
    # own input items and fields past the battery's, which pass through unchanged.
    from pytest_frank.runtime.chat import Request, send
    from pytest_frank.claims.tools import TOOLS
    from pytest_frank.fleet import Endpoint
    from pytest_frank.runtime.target import Target

    server = llama(model="selftest:agent", alias="frank-default-large")
    target = Target(Endpoint("ep", "llamacpp", url=server.url, alias="frank-default-large"))
    items = [{"type": "message", "role": "developer",
              "content": [{"type": "input_text", "text": "Work in the repository."}]},
             {"type": "message", "role": "developer",
              "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
             {"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": "Weather in Paris?"}]}]
    extra = {"instructions": "You are a coding agent.", "store": False,
             "include": ["reasoning.encrypted_content"], "prompt_cache_key": "conv-1",
             "reasoning": {"effort": "medium", "summary": "auto"}}
    try:
        reply = send(target, Request("", 256, tools=TOOLS, tool_choice="auto", parallel=False,
                                     stream=True, messages=items, extra=extra), api="responses")
    finally:
        target.close()
    assert reply.ok, reply.problem_line
    assert reply.exchange is not None and reply.exchange.url.endswith("/v1/responses")
    sent = reply.exchange.request_json
    assert sent["input"] == items and sent["prompt_cache_key"] == "conv-1", sent
    assert sent["tools"][0] == {"type": "function", "name": TOOLS[0]["function"]["name"],
                                "description": TOOLS[0]["function"]["description"],
                                "parameters": TOOLS[0]["function"]["parameters"],
                                "strict": False}
    assert reply.reasoning == "Thinking" and reply.events > 0


def test_reasoning_effort_a_template_rejects_fails_through_responses(llama, run_fleet):
    # reasoning.effort reaches the template as reasoning_effort, as chat's field does.
    server = llama(alias="frank-default-large", model="selftest:effort_strict")
    raw = {"low": "low", "medium": "medium", "high": "high", "max": "max"}
    result = run(run_fleet, server, "-m", "reasoning_effort", reasoning_effort=raw)
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "*reasoning_effort 'high' (sent as 'high') answered 400: the chat template rejects it: "
        "Unexpected reasoning effort high. Supported types are xhigh, medium, and low*",
        "*fix: map it to a level the template accepts (xhigh, medium, low): `high: xhigh`*"])


def chain(run_fleet, url: str, *args, stream=False):
    """test_agent_chain alone, plain (`stream`: turn 2 by id asked streamed as well), on the
    Responses route at `url`."""
    return run_fleet(one_endpoint(url, "llamacpp", api="responses", alias="frank-default-large",
                                  expect={"agent": {"stream": stream}}),
                     "-p", "no:randomly", "-k", "chain", *args)


def test_agent_chain_on_llama_cpp(llama, run_fleet, pytester):
    # llama.cpp takes an array-shaped function_call_output and skips web_search and custom
    # tools; it keeps no responses and says so in words (400 "llama.cpp does not support
    # 'previous_response_id'"), which the check notes instead of failing.
    server = llama(model="selftest:agent", alias="frank-default-large")
    with Proxy(server.url) as proxy:
        result = chain(run_fleet, proxy.url, "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    bodies = [b for b in proxy.sent if "input" in b]
    outputs = [item["output"] for b in bodies for item in b["input"]
               if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert [{"type": "input_text", "text": outputs[0]}] in outputs, outputs
    assert [t["type"] for t in bodies[-2]["tools"]] == ["web_search", "custom", "function",
                                                         "function"], bodies[-2]
    assert bodies[-1]["previous_response_id"] and bodies[-2]["store"] is True, bodies
    notes = "\n".join(rows(pytester)["test_agent_chain[ep]"]["notes"])
    assert "other tools: sent user; came back: finish tool_calls, calls get_" in notes, notes
    assert ("previous_response_id: turn 1 (sent with store: true) is not kept here, and the "
            "server says so (answered 400: llama.cpp does not support 'previous_response_id'.)"
            ) in notes, notes


class Store:
    """A gateway in front of llama.cpp that keeps responses (llama.cpp keeps none): a stored
    response's input and output items come back in front of the next turn's input where it
    names the response by previous_response_id; `lose_calls` leaves the function_call items
    out, as vLLM's store did (43244)."""

    def __init__(self, lose_calls: bool = False, lose_streamed: bool = False) -> None:
        self.kept: dict[str, list] = {}
        self.lose_calls = lose_calls
        # its streaming path rebuilds the stored history without the function_call items
        self.lose_streamed = lose_streamed

    def expand(self, body: dict) -> dict:
        earlier = self.kept.get(body.pop("previous_response_id", None) or "", [])
        if self.lose_streamed and body.get("stream"):
            earlier = [item for item in earlier if item.get("type") != "function_call"]
        return {**body, "input": [*earlier, *body["input"]]} if earlier else body

    def keep(self, request: dict, answer: dict) -> dict:
        if request.get("store") and "id" in answer:
            out = [{k: v for k, v in item.items() if k != "id"} for item in answer["output"]
                   if not (self.lose_calls and item.get("type") == "function_call")]
            self.kept[answer["id"]] = [*request["input"], *out]
        return answer


@pytest.mark.parametrize("lose_calls", [False, True], ids=["kept", "lost"])
def test_agent_chain_by_previous_response_id(llama, run_fleet, pytester, lose_calls):
    # No engine here stores responses that a chain can name: a gateway in front of llama.cpp
    # stores them, whole (passes) or without the function_call items (vLLM 43244, fails).
    server = llama(model="selftest:agent", alias="frank-default-large")
    store = Store(lose_calls)
    with Proxy(server.url, rewrite=store.expand, rewrite_answer=store.keep) as proxy:
        result = chain(run_fleet, proxy.url, "--frank-json=run.json")
    if not lose_calls:
        result.assert_outcomes(passed=1)
        notes = rows(pytester)["test_agent_chain[ep]"]["notes"]
        # turn 2 by id is at least the prompt of the same turn sent whole, less its reasoning
        chained, whole = (int(re.search(r"(\d+) prompt tokens", next(
            n for n in notes if n.startswith(what))).group(1)) for what in (
                "previous_response_id: sent function_call_output; came back: finish stop",
                "the chain's turn 2 sent whole: sent user, function_call, function_call_output"))
        assert chained >= whole, notes
        return
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*agent chain on /v1/responses: turn 2 by previous_response_id*",
                                 "*fix: previous_response_id must bring back the stored "
                                 "response whole*"])


def test_agent_chain_streamed_by_previous_response_id(llama, run_fleet, pytester):
    # Turn 2 by id asked streamed as well (as Codex streams), naming the same stored turn 1:
    # one generation more, its answer and prompt count read from the stream's events.
    server = llama(model="selftest:agent", alias="frank-default-large")
    store = Store()
    with Proxy(server.url, rewrite=store.expand, rewrite_answer=store.keep) as proxy:
        result = chain(run_fleet, proxy.url, "--frank-json=run.json", stream=True)
    result.assert_outcomes(passed=1)
    notes = rows(pytester)["test_agent_chain[ep]"]["notes"]
    assert any(n.startswith("previous_response_id, streamed: sent function_call_output; came "
                            "back: finish stop") for n in notes), notes
    streamed = [b for b in proxy.sent if b.get("stream") and "input" in b]
    assert len(streamed) == 1 and any(i.get("type") == "function_call"
                                      for i in streamed[0]["input"]), streamed


def test_agent_chain_losing_calls_only_when_streamed_fails(llama, run_fleet):
    # A gateway whose streaming path brings the stored response back without its
    # function_call items (the plain path keeps them): only the streamed turn 2 shows it.
    server = llama(model="selftest:agent", alias="frank-default-large")
    store = Store(lose_streamed=True)
    with Proxy(server.url, rewrite=store.expand, rewrite_answer=store.keep) as proxy:
        result = chain(run_fleet, proxy.url, stream=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*agent chain on /v1/responses: turn 2 by previous_response_id, streamed*only the "
        "streaming path*",
        "*fix: previous_response_id must bring back the stored response whole*"])


def _listed(body: dict) -> bool:
    """The request carries a function_call_output whose output is a list."""
    return any(isinstance(item, dict) and isinstance(item.get("output"), list)
               for item in body.get("input", []))


def _drop_listed(body: dict) -> dict:
    """A gateway that reads an output only as a string: a list becomes empty text."""
    return {**body, "input": [{**item, "output": ""} if isinstance(item, dict) and isinstance(
        item.get("output"), list) else item for item in body.get("input", [])]}


def _other_tools_500(body: dict) -> str | None:
    if any(t.get("type") != "function" for t in body.get("tools", [])):
        return "Unsupported tool type: web_search"
    return None


def test_agent_chain_array_output_dropped_by_a_gateway(llama, run_fleet):
    # A gateway that reads a function_call_output's output only as a string: the list's
    # text never reaches llama.cpp, which answers from a prompt without the result.
    server = llama(model="selftest:agent", alias="frank-default-large")
    with Proxy(server.url, rewrite=_drop_listed) as proxy:
        result = chain(run_fleet, proxy.url)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*agent chain on /v1/responses: turn 2 with each output as a list of input_text parts "
        "was * prompt tokens, the same history with the outputs as strings *: the list's text "
        "never reached the prompt*",
        "*fix: the Responses API takes a function_call_output's output as a string or as a list*"])


def test_agent_chain_array_output_refused_by_a_gateway(llama, run_fleet):
    # A gateway whose schema takes the output only as a string refuses the list (400).
    server = llama(model="selftest:agent", alias="frank-default-large")
    said = "input.3.output: Input should be a valid string"
    with Proxy(server.url, refuse=lambda body: said if _listed(body) else None) as proxy:
        result = chain(run_fleet, proxy.url)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*turn 2 with each function_call_output's output as a list of input_text parts (user, "
        "reasoning, function_call, function_call_output) answered 400: " + said + ", where "
        "the same outputs as strings were answered*",
        "*fix: the Responses API takes a function_call_output's output as a string or as a list*"])


def test_agent_chain_other_tools_answered_500(llama, run_fleet):
    # An engine that breaks on a tool that is not a function answers 500 (as llama.cpp did
    # before its fix of 20156); no engine here still does, so a gateway in front answers it.
    server = llama(model="selftest:agent", alias="frank-default-large")
    with Proxy(server.url, refuse=_other_tools_500, refuse_status=500) as proxy:
        result = chain(run_fleet, proxy.url)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*offered web_search and a custom tool beside the functions, the server answered 500: "
        "Unsupported tool type: web_search: a client shows an internal error*",
        "*fix: a client offers tools that are not functions*"])
