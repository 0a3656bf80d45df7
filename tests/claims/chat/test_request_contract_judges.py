"""The request-contract judges (pytest_frank.claims.contract), table-driven on replies built by
hand for what no engine here shows: a 5xx to a malformed request, no answer, a generic endpoint
that accepts one, sampling fields refused together but each accepted alone (as some Anthropic
models refuse temperature with top_p), a call or markup under tool_choice none on vLLM.
tests/claims/chat/test_request_contract_real.py proves the same judges on real llama.cpp and proxies."""

import pytest

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, contract
from pytest_frank.claims.params import request_contract
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

pytestmark = pytest.mark.unit

Failed = pytest.fail.Exception
OK = Reply(status=200, content="Hello!", finish="stop")
JSON = Reply(status=200, content='{"city": "Paris"}', finish="stop")


def ctx(engine="llamacpp", claim="params", notes=None):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1",
                       expect={"params": {"validation": True}, "tools": True}))
    return Context(ep, driver_for(engine), ep.options(claim), None,
                   (notes if notes is not None else []).append)


def refused(status=400, problem="bad request"):
    return Reply(status=status, problem=problem)


def choices(**given):
    replies = {c.key: refused() for c in contract.CHOICE_MALFORMED}
    replies |= {c.key: OK for c in contract.CHOICE_ACCEPTED}
    return contract.Asked(replies={**replies, **given})


def formats(**given):
    replies = {c.key: refused() for c in contract.FORMAT_MALFORMED}
    replies |= {"format_no_schema": JSON, "format_text": OK, "format_json_object": JSON,
                "format_loose_schema": JSON}
    return contract.Asked(replies={**replies, **given})


def test_refused_malformed_and_answered_valid_requests_pass():
    notes = []
    contract.judge_validation(choices(), ctx(notes=notes))
    contract.judge_format_variants(formats(), ctx())
    assert 'tool_choice "required" without tools: answered 400: bad request' in notes


@pytest.mark.parametrize("given, line", [
    ({"required_without_tools": refused(500, "internal error")},
     'tool_choice "required" without tools answered 500: internal error: a malformed or unusual '
     "request must be refused with a 4xx"),
    ({"none_without_tools": refused(500, "internal error")},
     'tool_choice "none" without tools answered 500: internal error'),
    ({"unknown_choice": Reply(problem="connection reset")},
     'tool_choice "sometimes" (no such value): connection reset'),
    ({"auto_without_tools": refused(400, "When using `tool_choice`, `tools` must be set.")},
     'tool_choice "auto" without tools answered 400: When using `tool_choice`, `tools` must be '
     "set.: a valid request clients send is refused"),
])
def test_validation_faults(given, line):
    with pytest.raises(Failed, match=line.replace("(", r"\(").replace(")", r"\)")):
        contract.judge_validation(choices(**given), ctx())


def test_a_generic_endpoint_that_accepts_is_not_blamed_on_an_engine():
    with pytest.raises(Failed) as failed:
        contract.judge_validation(choices(required_without_tools=OK), ctx("openai"))
    said = str(failed.value)
    assert "tool_choice \"required\" without tools answered 200 ('Hello!'): a malformed request " \
        "is accepted, so a client's mistake goes unnoticed\n" in said + "\n", said
    assert "put a gateway that validates requests in front" in said, said


def test_llamacpp_is_named_only_for_what_it_is_known_to_accept():
    with pytest.raises(Failed) as failed:  # llama.cpp refuses an unknown tool_choice itself
        contract.judge_validation(choices(unknown_choice=OK), ctx())
    said = str(failed.value)
    assert "llama.cpp server answers" not in said and "llama.cpp does not check" not in said, said
    assert "put a gateway that validates requests in front" in said, said


@pytest.mark.parametrize("given, line", [
    ({"format_no_schema": refused(502, "bad gateway")},
     "a json_schema format without a schema answered 502: bad gateway"),
    ({"format_json_object": Reply(status=200, content='["Paris"]', finish="stop")},
     r"response_format json_object was sent and the content is a JSON list, not an object"),
    ({"format_text": Reply(status=200, content="", finish="stop")},
     "response_format text answered 200 with empty content"),
    ({"format_schema_text": OK},
     'a json_schema format whose schema is "x" answered 200'),
])
def test_format_faults(given, line):
    with pytest.raises(Failed, match=line):
        contract.judge_format_variants(formats(**given), ctx())


def test_a_format_without_a_schema_passes_either_way_and_a_loose_schema_is_a_hint():
    notes = []
    loose = Reply(status=200, content='{"town": "Paris"}', finish="stop")
    contract.judge_format_variants(formats(format_no_schema=refused(400, "schema is required"),
                                           format_loose_schema=loose), ctx(notes=notes))
    assert "a json_schema format without a schema: answered 400: schema is required" in notes
    assert any("does not follow the schema, which strict false makes a hint" in n for n in notes)


def test_sampling_refused_together_but_accepted_alone_passes():
    notes = []
    obs = contract.Asked(sampled=("temperature", "top_p"), replies={
        "together": refused(400, "temperature and top_p cannot both be specified"),
        "temperature": OK, "top_p": OK})
    contract.judge_sampling(obs, ctx("anthropic", notes=notes))
    assert notes[0] == ("temperature: 0.7, top_p: 0.9 together answered 400: temperature and "
                        "top_p cannot both be specified; each alone is accepted")


def test_sampling_faults():
    fields = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
    crashed = contract.Asked(sampled=fields, replies={"together": refused(500, "boom")})
    with pytest.raises(Failed, match="frequency_penalty: 0.5 answered 500: boom"):
        contract.judge_sampling(crashed, ctx("vllm"))
    # a 200 whose body is no reply (a Messages content retyped to a string) was not asked
    # field by field: it fails as what it is, never a KeyError for a field not asked alone
    unreadable = contract.Asked(sampled=fields, replies={
        "together": Reply(status=200, problem="content is a str, not a list of blocks")})
    with pytest.raises(Failed, match="answered 200: content is a str, not a list of blocks"):
        contract.judge_sampling(unreadable, ctx("anthropic"))
    one = contract.Asked(sampled=fields, replies={"together": OK, "n": OK}, choices=1)
    with pytest.raises(Failed, match=r"n: 2 was sent and 1 choice\(s\) came back"):
        contract.judge_sampling(one, ctx("vllm"))


CALLED = Reply(status=200, finish="tool_calls",
               calls=[Call("get_weather", '{"city": "Paris", "days": 1}', "c1")])
MARKUP = Reply(status=200, finish="stop",
               content='<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>')


@pytest.mark.parametrize("engine, reply, line, fix", [
    ("anthropic", CALLED, "the answer called get_weather", "none must forbid calls"),
    ("vllm", MARKUP, "the content holds a tool call written as text",
     "--exclude-tools-when-tool-choice-none"),
    ("llamacpp", MARKUP, "the content holds a tool call written as text",
     "llama.cpp renders the tools into the prompt under tool_choice none"),
    ("vllm", Reply(status=200, content="", finish="stop"), "answered empty content", None),
    # vLLM's qwen3_xml parser under none takes the model's call out and sends nothing
    # (tests/vllm/test_tool_families_vllm_real.py); one token is the end token alone
    ("vllm", Reply(status=200, content="", finish="stop", tokens=7),
     "though the model wrote 7 tokens: with the tools still in the prompt it wrote a call",
     "--exclude-tools-when-tool-choice-none"),
    # ... and its harmony parser after gpt-oss's analysis: more tokens than the thinking's
    ("vllm", Reply(status=200, content="", reasoning="Thinking", finish="stop", tokens=29,
                   reasoning_tokens=10),
     "though the model wrote 29 tokens, 10 of them thinking: with the tools still in the",
     "--exclude-tools-when-tool-choice-none"),
])
def test_tool_choice_none_faults(engine, reply, line, fix):
    with pytest.raises(Failed) as failed:
        contract.judge_tool_choice_none(contract.Asked(replies={"none": reply}),
                                        ctx(engine, "tools"))
    assert line in str(failed.value) and (fix is None or fix in str(failed.value)), failed.value


@pytest.mark.parametrize("reply", [
    Reply(status=200, content="", finish="stop", tokens=1),
    # thinking and the end token (the server's count of thinking, or by length without one)
    Reply(status=200, content="", reasoning="Thinking", finish="stop", tokens=11,
          reasoning_tokens=10),
    Reply(status=200, content="", reasoning="Thinking", finish="stop", tokens=29),
])
def test_tool_choice_none_empty_after_the_end_token_alone_names_no_call(reply):
    with pytest.raises(Failed) as failed:
        contract.judge_tool_choice_none(contract.Asked(replies={"none": reply}),
                                        ctx("vllm", "tools"))
    assert str(failed.value) == 'tool_choice "none" answered empty content (finish_reason \'stop\')'


def test_tool_choice_none_passes_on_text():
    contract.judge_tool_choice_none(contract.Asked(replies={"none": OK}), ctx("vllm", "tools"))


def test_what_is_asked_where():
    opts = bind(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1",
                         expect={"params": True})).options("params")
    assert request_contract.VALIDATION.applies(opts, driver_for("llamacpp")) == \
        "expect.params.validation is not set"
    assert request_contract.SAMPLING.applies(opts, driver_for("llamacpp")) is None
    messages = driver_for("llamacpp").with_api("messages")
    assert request_contract.FORMAT_VARIANTS.applies(opts, messages) == \
        "response_format variants are not part of the anthropic API shape as asked here"
    assert messages.wire.sampling_fields == ("temperature", "top_p")
    assert "n" not in driver_for("llamacpp").wire.sampling_fields
    assert "n" in driver_for("vllm").wire.sampling_fields
