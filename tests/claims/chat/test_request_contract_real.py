"""The request-side contract (pytest_frank.claims.contract) against a real llama.cpp
(xllamacpp). What the engine itself shows: it answers 200 to tool_choice "required" without
tools or with tools [] and to malformed json_schema formats (an unknown tool_choice is its 400);
n: 2 is its 400, so n is asked of it only as a generic endpoint; it renders the tools into the
prompt under tool_choice "none", so a model that always writes its call markup leaks it. Through
a proxy in front of the real server (tests/support/proxy.py), what the engine does not show: a gateway
that validates (the passing side), one that fails with a 5xx, one that refuses valid requests,
one that turns json mode into text, one that refuses a penalty, one that drops n, one that fans
n out, one that rewrites tool_choice none.

`selftest:chatty` never stops talking, so a lost json format shows as "Hello!Hello!..."; the
`selftest` model answers "Hello!" under tool_choice none and calls get_weather under "required".
"""

import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real

ASKED = {"params": {"validation": True, "response_format_variants": True}}
REQUESTS = "test_params_validation or test_params_response_format_variants or test_params_sampling"


@pytest.fixture(scope="module")
def chatty(llama):
    return llama(model="selftest:chatty", alias="frank", ctx_size=1024, threads=1)


def _notes(pytester, test: str) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(n for row in data["rows"] if row["key"].endswith(f"::{test}[ep]")
                     for n in row["notes"])


def _validating(body):
    """A gateway's request validation: what OpenAI's reference makes malformed."""
    choice, fmt = body.get("tool_choice"), (body.get("response_format") or {}).get("json_schema")
    if choice is not None and choice not in ("none", "auto", "required") and \
            not isinstance(choice, dict):
        return f"tool_choice {choice!r} is not one of none, auto, required"
    if choice == "required" and not body.get("tools"):
        return "tool_choice required needs tools"
    if isinstance(fmt, dict) and "name" not in fmt:
        return "response_format.json_schema.name is required"
    if isinstance(fmt, dict) and not isinstance(fmt.get("strict", False), bool):
        return "response_format.json_schema.strict must be a boolean"
    if isinstance(fmt, dict) and not isinstance(fmt.get("schema", {}), dict):
        return "response_format.json_schema.schema must be an object"
    return None


def test_llamacpp_itself_answers_malformed_requests_with_200(chatty, run_fleet, pytester):
    result = run_fleet(one_endpoint(chatty.url, alias="frank", expect=ASKED), "-k", REQUESTS,
                       "--frank-json=run.json")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines([
        '*tool_choice "required" without tools answered 200 (*); tool_choice "required" with '
        "tools [[]] answered 200 (*): a malformed request is accepted, so a client's mistake "
        "goes unnoticed: the llama.cpp server answers these with 200 itself*",
        "*fix: llama.cpp does not check tool_choice against the tools sent*",
        '*tool_choice "sometimes" (no such value): answered 400: Invalid tool_choice*'])
    result.stdout.fnmatch_lines([
        "*a json_schema format without a name answered 200 (*); a json_schema format with "
        'strict "yes" answered 200 (*); a json_schema format whose schema is "x" answered 200 '
        "(*): a malformed request is accepted*the llama.cpp server answers these with 200 "
        "itself*", "*expect.params.response_format_variants: false*"])
    sampling = _notes(pytester, "test_params_sampling")
    assert "temperature: 0.7, top_p: 0.9, presence_penalty: 0.5, frequency_penalty: 0.5: " \
        "accepted" in sampling, sampling
    assert "n is not asked: a llama.cpp server on this route takes one choice a request" in \
        sampling, sampling


def test_a_gateway_that_validates_in_front_passes(chatty, run_fleet, pytester):
    with Proxy(chatty.url, refuse=_validating) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="frank", expect=ASKED), "-k", REQUESTS,
                           "--frank-json=run.json")
    result.assert_outcomes(passed=3)
    formats = _notes(pytester, "test_params_response_format_variants")
    assert "a json_schema format without a schema: answered" in formats, formats
    assert 'strict "yes": answered 400: response_format.json_schema.strict must be a boolean' \
        in formats, formats


def _choice_without_tools(body):
    return "tool_choice needs tools" if body.get("tool_choice") and not body.get("tools") \
        else _validating(body)


def _json_mode_as_text(body):
    fmt = body.get("response_format") or {}
    return {**body, "response_format": {"type": "text"}} if fmt.get("type") == "json_object" \
        else body


FAULTS = [
    ("validation", {"refuse": _validating, "refuse_status": 500},
     '*tool_choice "required" without tools answered 500: tool_choice required needs tools: a '
     "malformed or unusual request must be refused with a 4xx*a 5xx reads as the server's "
     "fault*"),
    ("validation", {"refuse": _choice_without_tools},
     '*tool_choice "none" without tools answered 400: tool_choice needs tools: a valid request '
     "clients send is refused*"),
    ("response_format_variants", {"refuse": _validating, "rewrite": _json_mode_as_text},
     "*response_format json_object was sent and the content is not JSON ('Hello!Hello!*'): "
     "the format is not enforced*"),
    ("sampling", {"refuse": lambda b: "presence_penalty is not supported"
                  if "presence_penalty" in b else None},
     "*presence_penalty: 0.5 answered 400: presence_penalty is not supported: the API "
     "documents it and clients send it*"),
]


@pytest.mark.parametrize("test, proxied, line", FAULTS,
                         ids=["5xx", "valid_refused", "json_mode_lost", "penalty_refused"])
def test_a_proxy_that_breaks_the_contract_fails_naming_it(chatty, run_fleet, test, proxied,
                                                          line):
    with Proxy(chatty.url, **proxied) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="frank", expect=ASKED),
                           "-k", f"test_params_{test}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([line])


# -- n: asked of a generic endpoint; llama.cpp takes n: 1 only ----------------------------------
def _n_hidden(body):
    """A gateway that answers n itself: the upstream is asked one choice."""
    n = body.pop("n", None)
    return {**body, "x_fan_out": n} if n else body


def _fanned_out(request, answer):
    n = request.get("x_fan_out")
    if n and isinstance(answer.get("choices"), list) and answer["choices"]:
        answer["choices"] = [{**answer["choices"][0], "index": i} for i in range(n)]
    return answer


def test_n_on_a_generic_endpoint_in_front_of_llamacpp(chatty, run_fleet, pytester):
    """llama.cpp's own 400 for n: 2; a gateway that drops n (one choice back); one that fans the
    request out (two choices: the passing side)."""
    direct = run_fleet(one_endpoint(chatty.url, "openai", alias="frank", expect=ASKED),
                       "-k", "test_params_sampling")
    direct.assert_outcomes(failed=1)
    direct.stdout.fnmatch_lines(["*n: 2 answered 400: Field 'n': Value must be between 1 <= "
                                 "value <= 1, but got 2: clients that ask several choices at "
                                 "once get an error*"])
    with Proxy(chatty.url, rewrite=lambda b: {k: v for k, v in b.items() if k != "n"}) as proxy:
        dropped = run_fleet(one_endpoint(proxy.url, "openai", alias="frank", expect=ASKED),
                            "-k", "test_params_sampling")
    dropped.assert_outcomes(failed=1)
    dropped.stdout.fnmatch_lines(["*n: 2 was sent and 1 choice(s) came back: clients that "
                                  "sample several answers at once get fewer*"])
    with Proxy(chatty.url, rewrite=_n_hidden, rewrite_answer=_fanned_out) as proxy:
        fanned = run_fleet(one_endpoint(proxy.url, "openai", alias="frank", expect=ASKED),
                           "-k", "test_params_sampling", "--frank-json=run.json")
    fanned.assert_outcomes(passed=1)
    assert "n: 2: 2 choices" in _notes(pytester, "test_params_sampling")


# -- tool_choice none -----------------------------------------------------------------------
def test_tool_choice_none_answers_without_a_call(llama, run_fleet):
    result = run_fleet(one_endpoint(llama(alias="frank").url, alias="frank",
                                    expect={"tools": True}), "-k", "test_tools_none")
    result.assert_outcomes(passed=1)


def _none_as_required(body):
    return {**body, "tool_choice": "required"} if body.get("tool_choice") == "none" else body


def test_tool_choice_none_turned_into_required_is_a_call(llama, run_fleet):
    with Proxy(llama(alias="frank").url, rewrite=_none_as_required) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="frank", expect={"tools": True}),
                           "-k", "test_tools_none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '*tool_choice "none" was sent with tools offered and the answer called get_*({*}) '
        "(finish_reason 'tool_calls'): the server ignores none*",
        "*fix: update the engine, or the proxy in front that drops or rewrites tool_choice*"])


def test_llamacpp_keeps_the_tools_in_the_prompt_under_none(llama, run_fleet):
    """`selftest:agent` writes "<tool_call>" after its thinking whatever it is asked: llama.cpp
    makes no call under none (right) but renders the tools into the prompt (the prompt is 578
    tokens with them, 21 without), so a model that calls leaks its markup as the answer."""
    server = llama(model="selftest:agent", alias="frank")
    result = run_fleet(one_endpoint(server.url, alias="frank", expect={"tools": True}),
                       "-k", "test_tools_none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '*tool_choice "none" was sent with tools offered and the content holds a tool call '
        "written as text ('<tool_call>*'): no call was made, but the tools still reached the "
        "model's prompt*", "*fix: llama.cpp renders the tools into the prompt under tool_choice "
        "none*"])
