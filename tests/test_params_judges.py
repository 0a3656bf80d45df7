"""The params judges, table-driven: replies built by hand for the field failures no engine here
shows (each row names its report); tests/test_params_real.py proves the same judges against real
llama.cpp and a proxy in front of it."""

import pytest

from pytest_frank.chat import Logprob, Reply
from pytest_frank.checks import Context
from pytest_frank.claims import params
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

Failed = pytest.fail.Exception
REF = Reply(status=200, content="one, two, three, four, five", reasoning="counting", finish="stop")


def ctx(engine="llamacpp", notes=None):
    ep = Endpoint("ep", engine, url="http://127.0.0.1:1", expect={"params": True})
    return Context(ep, driver_for(engine), ep.options("params"), None,
                   (notes if notes is not None else []).append)


def stopped(reply, engine="llamacpp"):
    stop = params.stop_string(REF.content, REF.reasoning)
    return params.Sent(reference=REF, stop=stop, replies={"stop": reply}), stop


def test_stop_string_comes_from_the_middle_and_not_the_reasoning():
    assert params.stop_string("Hello!Hello!Hello!Hello!") == "ello"
    assert params.stop_string("ab") is None
    assert params.stop_string("xx aaaa bbbb", reasoning="bbbb") == "aaaa"


@pytest.mark.parametrize("reply, line", [
    # SGLang issue 6997: part of the stop string leaks into the content
    (Reply(status=200, content="one, two, three, fo", reasoning="counting", finish="stop"),
     "of the stop string leaked into the content"),
    # vLLM issue 38499: the stop cuts the reasoning instead of the answer
    (Reply(status=200, content="one, two, three, ", reasoning="", finish="stop"),
     "the reasoning came back empty (it was 'counting' without): the stop cut the reasoning"),
    (Reply(status=200, content=REF.content, reasoning="counting", finish="stop"),
     "the content still holds it"),
    (Reply(status=200, content="one, two, three, ", reasoning="counting", finish="length"),
     "the answer ended with 'length', not at the stop string"),
])
def test_stop_faults(reply, line):
    obs, stop = stopped(reply)
    assert stop == "four"
    with pytest.raises(Failed, match=line.replace("(", r"\(").replace(")", r"\)")):
        params.judge_stop(obs, ctx())


def test_stop_passes_when_cut_before_the_string():
    obs, _ = stopped(Reply(status=200, content="one, two, three, ", reasoning="counting", finish="stop"))
    params.judge_stop(obs, ctx())


def test_anthropic_stop_must_say_stop_sequence():
    r = Reply(status=200, content="one, two, three, ", reasoning="counting", finish="end_turn",
              stop_sequence="four")
    with pytest.raises(Failed, match="stop_reason 'end_turn', stop_sequence 'four'"):
        params.judge_stop(stopped(r)[0], ctx("anthropic"))
    params.judge_stop(stopped(Reply(status=200, content="one, two, three, ", reasoning="counting",
                                    finish="stop_sequence", stop_sequence="four"))[0],
                      ctx("anthropic"))


@pytest.mark.parametrize("reply, line", [
    # vLLM issue 44012: the schema escapes through the reasoning channel
    (Reply(status=200, content="", reasoning='{"colour": "red"}', finish="stop"),
     "the content is empty and the reasoning holds"),
    # llama.cpp issue 24097: accepted with 200 and not enforced
    (Reply(status=200, content='{"colour": "purple", "code": "PAR", "place": {"city": "Paris"}}',
           finish="stop"), "breaks it at colour: 'purple' is not one of"),
    (Reply(status=200, content='{"colour": "red", "code": "Paris", "place": {"city": "Paris"}}',
           finish="stop"), "breaks it at code: 'Paris' does not match"),
    (Reply(status=200, content='{"colour": "red", "code": "PAR", "place": {}}', finish="stop"),
     "breaks it at place: 'city' is a required property"),
])
def test_response_format_faults(reply, line):
    with pytest.raises(Failed, match=line):
        params.judge_response_format(params.Sent(replies={"response_format": reply}), ctx())


def test_response_format_passes_on_valid_json():
    good = '{"colour": "red", "code": "PAR", "place": {"city": "Paris"}}'
    params.judge_response_format(params.Sent(replies={"response_format": Reply(
        status=200, content=good, reasoning="thinking", finish="stop")}), ctx())


def test_logprobs_of_the_wrong_width_fail():
    r = Reply(status=200, content="Hi", tokens=1, logprobs=[Logprob("Hi", -0.1, 1)])
    with pytest.raises(Failed, match="token 'Hi' came with 1 alternatives"):
        params.judge_logprobs(params.Sent(replies={"logprobs": r}), ctx())


def test_max_tokens_not_cut_fails():
    r = Reply(status=200, content="one, two", finish="stop", tokens=9)
    with pytest.raises(Failed, match="max_tokens=16 was sent .* ended with finish_reason 'stop'"):
        params.judge_max_tokens(params.Sent(replies={"max_tokens": r}), ctx())


@pytest.mark.parametrize("reply, line", [
    # LM Studio issue 2339: over the context, 200 with nothing in it
    (Reply(status=200, content="", finish="stop"), "answered 200 ('', finish_reason 'stop') "
                                                   "instead of refusing it"),
    (Reply(status=500, error="internal error"), "answered 500: internal error; a client cannot"),
    (Reply(status=400, error="bad request"), "answered 400 without naming the limit"),
])
def test_context_limit_faults(reply, line):
    obs = params.Sent(context=1024, sent_words=1280, replies={"long": reply})
    with pytest.raises(Failed, match=line.replace("(", r"\(").replace(")", r"\)")):
        params.judge_context_limit(obs, ctx())


def test_count_tokens_far_from_usage_fails_and_a_missing_route_is_noted():
    usage = Reply(status=200, content="Hi", prompt_tokens=40)
    # LiteLLM issue 13252: count_tokens far from usage.input_tokens
    with pytest.raises(Failed, match="count_tokens says 400 tokens, the same prompt's usage 40"):
        params.judge_count_tokens(params.Sent(replies={"usage": usage}, counted=400),
                                  ctx("anthropic"))
    notes = []
    params.judge_count_tokens(params.Sent(replies={"usage": usage}, count_error="404"),
                              ctx("anthropic", notes))
    assert "the route does not exist here" in notes[0]


def test_system_message_rejected_fails():
    # vLLM issues 44000 and 48874: a system role inside messages, as newer Claude Code sends
    r = Reply(status=400, error="Unexpected role 'system'")
    with pytest.raises(Failed, match="a system message inside `messages` answered 400"):
        params.judge_system_message(params.Sent(replies={"system": r}), ctx("anthropic"))
