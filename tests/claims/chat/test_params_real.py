"""params against a real llama.cpp (xllamacpp): the passing side on the self-test models, and
each fault the claim exists to catch through a proxy that rewrites the request (tests/support/proxy.py,
in front of the real server: no engine here drops a parameter by itself).

`selftest:chatty` never stops talking ("Hello!" until max_tokens), so a cap and a stop string
always have something to cut; `selftest` writes JSON under a schema through llama.cpp's grammar.
The Anthropic shape goes through llama.cpp's own /v1/messages and count_tokens.
"""


import json

import pytest

from fleets import one_endpoint
from proxy import Proxy
from checkout import ROOT

pytestmark = pytest.mark.real

OPENAI = ["max_tokens", "stop", "response_format", "logprobs", "stream_usage", "context_limit",
          "prompt_tokens", "sampling"]


@pytest.fixture(scope="module")
def chatty(llama):
    return llama(model="selftest:chatty", alias="frank", ctx_size=1024, threads=1)


def _params(result):
    """{test name: outcome} from a -v run of one endpoint."""
    out = {}
    for line in result.outlines:
        if line.startswith("test_params.py::") and " " in line:
            test, outcome = line.split()[:2]
            out[test.split("::")[1].split("[")[0]] = outcome
    return out


def test_openai_shape_passes_on_real_llamacpp(chatty, run_fleet):
    result = run_fleet(one_endpoint(chatty.url, alias="frank", expect={"params": True}),
                       "-m", "params", "-v", "-rA")
    outcomes = _params(result)
    assert outcomes == {f"test_params_{p}": "PASSED" for p in OPENAI} | {
        "test_params_count_tokens": "SKIPPED", "test_params_system_message": "SKIPPED",
        # asked with their keys: llama.cpp itself answers malformed requests with 200
        "test_params_validation": "SKIPPED", "test_params_response_format_variants": "SKIPPED"}, \
        result.stdout.str()[-3000:]


def test_the_embedded_default_asks_params_and_passes(run_fleet):
    """examples/selftest.yaml (the README's main command) asks params of its chatty endpoint."""
    example = ROOT / "examples" / "selftest.yaml"
    result = run_fleet(example.read_text(), "-m", "params", "-v")
    result.assert_outcomes(passed=8, skipped=4)
    result.stdout.fnmatch_lines(["frank-selftest-params *params ok*"])


def test_logprobs_behind_a_draft_model_lack_their_alternatives(llama, run_fleet):
    """A field failure shown by the real engine: with a draft model, llama.cpp sends no
    top_logprobs for the tokens the draft proposed, so a client asking for two gets none."""
    drafted = llama(model="selftest:chatty", alias="frank", draft_model="selftest:chatty",
                    threads=1)
    result = run_fleet(one_endpoint(drafted.url, alias="frank", expect={"params": True}),
                       "-k", "test_params_logprobs")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["top_logprobs: 2 was sent and token '*' came with 0 "
                                 "alternatives*"])


def _reasoning_left_out(request: dict, answer: dict) -> dict:
    """For `rewrite_answer`: usage.completion_tokens less the tokens before the content (the
    thinking block), read off the answer's own logprobs, as a server that counts only the answer
    reports it. No engine here miscounts by itself: the proxy shows the fault."""
    usage, (choice, *_) = answer.get("usage"), answer.get("choices") or [{}]
    tokens = ((choice.get("logprobs") or {}).get("content") or [])
    content = (choice.get("message") or {}).get("content") or ""
    thought = next((i for i in range(len(tokens))
                    if "".join(t["token"] for t in tokens[i:]).strip() == content.strip()), 0)
    if usage and thought:
        usage["completion_tokens"] -= thought
        usage["total_tokens"] -= thought
    return answer


def test_usage_that_leaves_out_the_reasoning_is_named_not_logprobs(chatty, run_fleet):
    """The same server healthy, then behind a gateway whose usage.completion_tokens leaves the
    reasoning out: the logprobs are whole, so the failure names the count, not the logprobs."""
    fleet = one_endpoint(chatty.url, alias="frank", expect={"params": True})
    healthy = run_fleet(fleet, "-k", "test_params_logprobs")
    healthy.assert_outcomes(passed=1)
    with Proxy(chatty.url, rewrite_answer=_reasoning_left_out) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="frank", expect={"params": True}),
                           "-k", "test_params_logprobs")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*usage.completion_tokens counts * tokens and * logprobs came back, one per generated "
        "token, spelling the reasoning and the answer: the count is exactly the answer's *: the "
        "reasoning's * tokens are left out of it; the logprobs themselves are whole",
        "*fix: the server's usage accounting: usage.completion_tokens must count every generated "
        "token, the reasoning's included*"])
    assert "must pass logprobs and top_logprobs through" not in result.stdout.str()


def _streamed_reasoning_left_out(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: the last chunk's usage.completion_tokens less the chunks that
    carried reasoning (a token each on llama.cpp), as a gateway that counts only the streamed
    answer reports it; the unstreamed count stays whole."""
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events
              if e.startswith(b"data: {")]
    thought = sum(bool(c["choices"] and c["choices"][0]["delta"].get("reasoning_content"))
                  for c in chunks)
    out = []
    for event, chunk in zip([e for e in events if e.startswith(b"data: {")], chunks):
        if chunk.get("usage") and thought:
            chunk["usage"]["completion_tokens"] -= thought
            event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        out.append(event)
    return out + [e for e in events if not e.startswith(b"data: {")]


def test_streamed_usage_that_leaves_out_the_reasoning_names_the_count(chatty, run_fleet):
    """Streamed and unstreamed counts of one request differ by the reasoning: the failure names
    the count that leaves it out, not stream_options' passing."""
    with Proxy(chatty.url, rewrite_stream=_streamed_reasoning_left_out) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="frank", expect={"params": True}),
                           "-k", "test_params_stream_usage")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*usage.completion_tokens is * unstreamed and * streamed for the same request, whose "
        "prompt both count as *, on an answer with reasoning: the streamed count leaves * "
        "tokens out, likely the reasoning's",
        "*fix: the server's usage accounting: usage.completion_tokens must count every generated "
        "token, the reasoning's included*"])
    assert "must pass stream_options through" not in result.stdout.str()


def test_anthropic_shape_on_llamacpp_messages(chatty, run_fleet):
    """max_tokens, count_tokens (llama.cpp has the route) and a system message inside
    `messages` pass. stop_sequences cuts the answer, but this llama.cpp reports the match as
    stop_reason "end_turn" (with stop_sequence set), not "stop_sequence": the field failure the
    test exists for, shown by a real engine. The context limit is inconclusive: an Anthropic
    endpoint does not say its context."""
    fleet = one_endpoint(chatty.url, "anthropic", alias="frank",
                         expect={"params": {"claude_code": True}})
    result = run_fleet(fleet, "-m", "params", "-v", "-rA")
    outcomes = _params(result)
    assert {k: v for k, v in outcomes.items() if v != "SKIPPED"} == {
        "test_params_max_tokens": "PASSED", "test_params_stop": "FAILED",
        "test_params_count_tokens": "PASSED", "test_params_system_message": "PASSED",
        "test_params_sampling": "PASSED"}, \
        result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "*stop_sequences=[[]'*'[]] cut the answer but it came back as stop_reason 'end_turn', "
        "stop_sequence '*': clients look for stop_reason \"stop_sequence\"*"])


# -- faults: a proxy in front of the real server rewrites what clients send ---------------------
def _without(*keys):
    return lambda body: {k: v for k, v in body.items() if k not in keys}


def _usage_always(body):
    return {**body, "stream_options": {"include_usage": True}} if body.get("stream") else body


def _truncating(body):
    """A gateway that keeps the last 200 characters of an over-long prompt and answers."""
    messages = [{**m, "content": m["content"][-200:]} if isinstance(m.get("content"), str)
                else m for m in body.get("messages", [])]
    return {**body, "messages": messages}


FAULTS = [
    ("max_tokens", _without("max_tokens", "max_completion_tokens"),
     "*max_tokens=16 was sent and * tokens came back (finish_reason *): the cap is not applied*"),
    ("stop", _without("stop"),
     "*stop=[[]'*'[]] was sent and the content still holds it (*): the stop string is ignored*"),
    ("response_format", _without("response_format"),
     "*response_format json_schema was sent and the content is not JSON (*'Hello!Hello!*"),
    ("logprobs", _without("logprobs", "top_logprobs"),
     "*logprobs: true, top_logprobs: 2 were sent and the reply has no logprobs*"),
    ("stream_usage", _usage_always,
     "*a stream without stream_options.include_usage carried usage in 1 chunk(s)*"),
    ("stream_usage", _without("stream_options"),
     "*stream_options.include_usage was sent and no chunk carried usage*"),
    ("context_limit", _truncating,
     "*a prompt of at least 1280 tokens over a 1024-token context answered 200 with "
     "usage.prompt_tokens *: the prompt was silently truncated*"),
]


@pytest.mark.parametrize("param, rewrite, line", FAULTS,
                         ids=[f[0] + ("_never" if i == 5 else "") for i, f in enumerate(FAULTS)])
def test_a_proxy_that_loses_the_parameter_fails_naming_it(chatty, run_fleet, param, rewrite,
                                                          line):
    with Proxy(chatty.url, rewrite=rewrite) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="frank", expect={"params": True}),
                           "-k", f"test_params_{param} and not variants")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([line])


def test_response_format_holds_with_thinking_asked_where_reasoning_is_asked(llama, run_fleet):
    """vLLM issue 44012's shape: with reasoning asked, the schema is sent again with thinking
    on, and must hold for the content, not the reasoning (`selftest` thinks, then writes JSON
    under llama.cpp's grammar)."""
    server = llama(model="selftest", alias="frank")
    result = run_fleet(one_endpoint(server.url, alias="frank",
                                    expect={"params": True, "reasoning": True}),
                       "-k", "test_params_response_format and not variants", "-rA")
    result.assert_outcomes(passed=1)
    assert "with thinking on" not in result.stdout.str()  # nothing to say: both held
    # the default, then thinking on, then the schema the prompt does not ask for
    result.stdout.fnmatch_lines(["ep  cost: 3 generations*"])


def _notes(pytester) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(n for row in data["rows"] for n in row["notes"])


def test_response_format_while_drafting_shows_the_drafts(llama, run_fleet, pytester):
    """vLLM PR 36138's shape: the schema must hold while drafting too. `selftest` drafting
    itself (/slots speculative true) writes the JSON, thinking on and off, with draft tokens in
    each reply's timings: the check shows drafting was engaged while the schema held."""
    server = llama(model="selftest", alias="frank", draft_model="selftest", threads=1)
    result = run_fleet(one_endpoint(server.url, alias="frank",
                                    expect={"params": True, "reasoning": True}),
                       "-k", "test_params_response_format and not variants",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    text = _notes(pytester)
    assert "drafting engaged during the JSON answers (thinking on and off) (/slots speculative " \
           "is true): " in text, text
    assert "accepted [the replies' timings.draft_n / draft_n_accepted], and the schema held" \
        in text, text
    result.stdout.fnmatch_lines(["ep  cost: 3 generations*"])  # no generation of its own


def test_drafting_asked_but_not_engaged_is_a_note_not_a_failure(llama, run_fleet, pytester):
    # The fleet asks spec_decode of a server started without a draft model: the schema holds,
    # and the drafting case is said to be not shown (test_spec_decode fails it on its own).
    server = llama(model="selftest", alias="frank")
    result = run_fleet(one_endpoint(server.url, alias="frank",
                                    expect={"params": True, "spec_decode": True}),
                       "-k", "test_params_response_format and not variants",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    assert "drafting not shown during the JSON answer: expect.spec_decode is asked, yet where " \
           "the llama.cpp server reports draft counts (each reply's timings.draft_n / " \
           "draft_n_accepted) none came; the schema held without it" in _notes(pytester)
