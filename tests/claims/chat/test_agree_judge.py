"""The shared judgements of a stream that must reassemble into the plain reply and of replies
of reasoning alone (pytest_frank.claims.replies), on replies built by hand: what each compares,
what it leaves alone, and the lines it fails with."""

import pytest

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind
from pytest_frank.claims.replies import (reasoning_only, require_not_reasoning_only,
                                         require_stream_agrees, stream_difference)
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

pytestmark = pytest.mark.unit

Failed = pytest.fail.Exception


def ctx(engine="llamacpp", temperature=0.0, notes=None):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1", expect={"tools": True},
                       sampling={"temperature": temperature}))
    return Context(ep, driver_for(engine), ep.options("tools"),
                   note=(notes if notes is not None else []).append)


def ok(content="", reasoning="", calls=(), finish="stop"):
    return Reply(status=200, content=content, reasoning=reasoning, calls=list(calls),
                 finish=finish)


@pytest.mark.parametrize("streamed, plain, said", [
    (ok("Hello!", "Thinking"), ok("Hello!", "Thinking"), None),
    # the whitespace at the ends, which the parsers of one engine trim differently
    (ok("\nHello!", "Thinking\n"), ok("Hello!", "Thinking"), None),
    # cut by the budget: as far as both go, calls not compared
    (ok("Hel", finish="length"), ok("Hello!"), None),
    (ok("Hxl", finish="length"), ok("Hello!"), "content differs at character 1: streamed "
                                               "'Hxl', plain 'Hel'"),
    (ok("HelloHello!!"), ok("Hello!"), "content differs at character 5: streamed "
                                       "'HelloHello!!', plain 'Hello!' (12 characters "
                                       "streamed, 6 plain: twice as long"),
    (ok("Hi", "Thinking about it"), ok("Hi", "Thinking"), "reasoning differs at character 8"),
    (ok(calls=[Call("get_weather", '{"city": "Paris", "days": 1}', "a")], finish="tool_calls"),
     ok(calls=[Call("get_weather", '{"days": 1, "city": "Paris"}', "b")], finish="tool_calls"),
     None),
    (ok(calls=[Call("get_weather", '{"city": "Paris", "days": 2}', "a")], finish="tool_calls"),
     ok(calls=[Call("get_weather", '{"city": "Paris", "days": 1}', "b")], finish="tool_calls"),
     "get_weather's arguments differ: streamed {\"city\": \"Paris\", \"days\": 2}, plain "
     "{\"city\": \"Paris\", \"days\": 1}"),
    (ok(calls=[Call("get_time", "{}", "a")], finish="tool_calls"),
     ok(calls=[Call("get_weather", "{}", "b")], finish="tool_calls"),
     "the calls differ: streamed ['get_time'], plain ['get_weather']"),
])
def test_the_first_difference_is_named(streamed, plain, said):
    found = stream_difference(streamed, plain)
    assert (found is None) if said is None else (found is not None and said in found), found


def test_a_greedy_pair_that_differs_fails_with_the_stream_assembly_fix():
    with pytest.raises(Failed) as failed:
        require_stream_agrees(ok("HelloHello!!"), ok("Hello!"), ctx("vllm"), "chat")
    said = str(failed.value)
    assert said.startswith("chat: the streamed reply differs from the plain (non-streamed) one "
                           "to the same request at temperature 0: content differs"), said
    assert "fix: vLLM's streaming path" in said and "--tool-call-parser" in said, said


def test_a_sampled_pair_is_not_compared_and_says_so():
    notes: list[str] = []
    require_stream_agrees(ok("Hi there"), ok("Hello!"), ctx(temperature=0.7, notes=notes),
                          "chat")
    assert notes == ["chat: streamed and plain not compared: sampled at temperature 0.7, two "
                     "draws may differ"], notes


def test_a_pair_where_either_side_did_not_answer_is_left_to_its_own_judgement():
    notes: list[str] = []
    require_stream_agrees(Reply(status=500, problem="boom"), ok("Hello!"), ctx(notes=notes), "x")
    assert notes == []


@pytest.mark.parametrize("reply, alone", [
    (ok("", "Thinking"), True),
    (ok("", "Thinking", finish="tool_calls"), True),
    (ok("", "Thinking", finish="length"), False),  # cut: require_thinking_ended's
    (ok("Hi", "Thinking"), False),
    (ok("", "Thinking", calls=[Call("get_weather", "{}", "a")]), False),
    (ok("", ""), False),  # empty: no reasoning either, judged as an empty answer
    (Reply(status=400, problem="bad", reasoning="Thinking"), False),
])
def test_reasoning_alone_is_an_answered_reply_with_nothing_else(reply, alone):
    assert reasoning_only(reply) is alone


def test_replies_of_reasoning_alone_are_counted_over_the_trials():
    replies = [ok("", "Thinking"), ok(calls=[Call("get_weather", "{}", "a")]),
               ok("", "Thinking hard")]
    with pytest.raises(Failed) as failed:
        require_not_reasoning_only(replies, driver_for("llamacpp"), 'tool_choice "required"')
    said = str(failed.value)
    assert said.startswith('tool_choice "required": 2 of 3 replies carried reasoning only: no '
                           "content and no tool call (finish_reason 'stop', reasoning "
                           "'Thinking'); a client has nothing to show or run"), said
    assert "fix: llama.cpp kept the answer (or the call) inside the thinking" in said, said
    require_not_reasoning_only(replies[1:2], driver_for("llamacpp"), "x")  # none: passes
