"""The stream claim's rules over frames as servers send them: a healthy stream of each API shape
passes, each planted breach is named, and the judge fails on what is asked, notes what ops
turned off and names llama.cpp's own departures with its fix. No server: the frames are the
shapes recorded from llama.cpp (xllamacpp 2026.10) and OpenAI's documented streams."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, stream
from pytest_frank.claims import stream_rules as rules
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.transport.http import Exchange
from pytest_frank.outcome.verdict import Failure, render

pytestmark = pytest.mark.unit

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
        "model": "m"}


def chunk(delta=None, finish=None, **extra):
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {**BASE, "choices": choices, **extra}


def healthy_chat() -> list:
    """A streamed call with reasoning, text split inside no character, and usage at the end."""
    return [chunk({"role": "assistant", "content": None}),
            chunk({"reasoning_content": "Hmm"}),
            chunk({"content": "Bonjour, こん"}), chunk({"content": "にちは 👋"}),
            chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            chunk({}, "tool_calls"),
            chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 9})]


def sse(events, done=True, named=False) -> str:
    out = "".join((f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n"
                  for e in events)
    return out + ("data: [DONE]\n\n" if done else "")


def chat_breaches(events, body=None):
    return [(b.rule, b.said) for b in rules.chat(rules.parse(body or sse(events)), True)]


def test_a_healthy_chat_stream_passes():
    assert chat_breaches(healthy_chat()) == []
    # CRLF line ends, keep-alive comments and id:/retry: fields are SSE too
    body = ": keep-alive\r\nretry: 100\r\n" + sse(healthy_chat()).replace("\n", "\r\n")
    assert chat_breaches(None, body) == []


def planted(edit):
    events = copy.deepcopy(healthy_chat())
    edit(events)
    return events


@pytest.mark.parametrize("body, rule, said", [
    (sse(healthy_chat(), done=False), "done", "without its `data: [DONE]` terminator"),
    (sse(healthy_chat()) + sse([chunk({"content": "x"})], done=False), "done",
     "1 frame(s) came after `data: [DONE]`"),
    ("junk line\n" + sse(healthy_chat()), "framing", "no SSE field"),
    ("data: {not json\n\n" + sse(healthy_chat()), "framing", "frame 0 is not a JSON object"),
    (sse(planted(lambda e: e[3].update(id="chatcmpl-2"))), "constant",
     "`id` changes across frames: 'chatcmpl-1' in frame 0, 'chatcmpl-2' in frame 3"),
    (sse(planted(lambda e: e[3].update(model="other"))), "constant", "`model` changes"),
    (sse(planted(lambda e: e[7].update(created=1700000001))), "created",
     "`created` changes across frames: 1700000000 in frame 0, 1700000001 in frame 7"),
    (sse(planted(lambda e: e[2]["choices"][0]["delta"].update(role="assistant"))), "role",
     "choice 0's delta in frame 2 repeats `role` 'assistant'"),
    (sse(planted(lambda e: e[0]["choices"][0]["delta"].pop("role"))), "role",
     "choice 0's first delta (frame 0) has no `role`"),
    (sse(planted(lambda e: e[7]["choices"][0].update(finish_reason=None))), "finish",
     "choice 0 has no finish_reason"),
    (sse(planted(lambda e: e[6]["choices"][0].update(finish_reason="stop"))), "finish",
     "choice 0 has 2 finish_reasons (frames 6, 7)"),
    (sse(planted(lambda e: e[6]["choices"][0]["delta"]["tool_calls"][0].update(
        id="call_1", type="function"))), "continuation",
     "tool call 0's continuation chunk (frame 6) carries id, type again"),
    (sse(planted(lambda e: e[5]["choices"][0]["delta"]["tool_calls"][0]["function"].update(
        name="get_weather"))), "continuation", "carries function.name again"),
    (sse(planted(lambda e: e[4]["choices"][0]["delta"]["tool_calls"][0].pop("id"))),
     "continuation", "tool call 0's first chunk (frame 4) has no id"),
    (sse(planted(lambda e: e[2]["choices"][0]["delta"].update(content="Bonjour, \ufffd"))),
     "multibyte", "frame 2's delta.content carries U+FFFD"),
    (sse(planted(lambda e: e[3]["choices"][0]["delta"].update(content="\ud83d"))),
     "multibyte", "half a UTF-16 surrogate pair (\\ud83d)"),
    (sse(planted(lambda e: e[6]["choices"][0]["delta"]["tool_calls"][0]["function"].update(
        arguments='"Par\ufffd"}'))), "multibyte", "tool call arguments carries U+FFFD"),
    (sse(planted(lambda e: e[7].update(usage={"completion_tokens": 9}))), "usage",
     "usage came in frame(s) 7, before the last chunk (frame 8)"),
])
def test_each_chat_breach_is_named(body, rule, said):
    found = chat_breaches(None, body)
    assert [r for r, _ in found] == [rule], found
    assert said in found[0][1], found


def test_usage_is_judged_only_where_asked():
    events = planted(lambda e: e[7].update(usage={"completion_tokens": 9}))
    assert rules.chat(rules.parse(sse(events)), usage_asked=False) == []


# -- the Messages API ---------------------------------------------------------------------------
def block(i, kind, deltas):
    start = {"type": "content_block_start", "index": i, "content_block": {"type": kind}}
    return [start, *({"type": "content_block_delta", "index": i, "delta": d} for d in deltas)], \
        {"type": "content_block_stop", "index": i}


THINK = block(0, "thinking", [{"type": "thinking_delta", "thinking": "Hmm"},
                              {"type": "signature_delta", "signature": "s"}])
TEXT = block(1, "text", [{"type": "text_delta", "text": "こんにちは"}])
START = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 3}}}
END = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 4}}, {"type": "message_stop"}]


def messages_breaches(events, named=True):
    return [(b.rule, b.said) for b in rules.messages(rules.parse(sse(events, False, named)))]


def test_a_healthy_messages_stream_passes():
    events = [START, *THINK[0], THINK[1], {"type": "ping"}, *TEXT[0], TEXT[1], *END]
    assert messages_breaches(events) == []
    assert messages_breaches(events, named=False) == []  # the data's type names it too


@pytest.mark.parametrize("events, rule, said", [
    # llama.cpp: the text block opens while the thinking block is open; all close at the end
    ([START, *THINK[0], *TEXT[0], THINK[1], TEXT[1], *END], "block_order",
     "block 1 (text) opened at frame 4 while block 0 (thinking) was still open (its "
     "content_block_stop came at frame 6)"),
    ([START, *THINK[0], THINK[1], *TEXT[0], *END], "order",
     "message_delta at frame 7 while block(s) 1 were open"),
    ([START, *THINK[0], THINK[1], TEXT[0][1], *END], "order",
     "content_block_delta for block 1 at frame 5, which is not open"),
    ([START, *THINK[0], THINK[1], END[0]], "order", "ends with message_delta, not message_stop"),
    ([*THINK[0], THINK[1], *END], "order", "begins with content_block_start, not message_start"),
    ([START, *THINK[0], THINK[1], END[1]], "order", "no message_delta carried a stop_reason"),
    ([START, *THINK[0], THINK[1], *block(2, "text", [])[0], block(2, "text", [])[1], *END],
     "order", "block 2 opened (frame 5) where block 1 was next"),
    ([START, *THINK[0], THINK[1], *block(1, "text", [{"type": "text_delta", "text": "\ufffd"}])[0],
      TEXT[1], *END], "multibyte", "frame 6's text_delta carries U+FFFD"),
])
def test_each_messages_breach_is_named(events, rule, said):
    found = messages_breaches(events)
    assert rule in [r for r, _ in found], found
    assert any(said in s for _, s in found), found


def test_an_event_line_that_disagrees_with_its_data_is_a_framing_breach():
    body = sse([START], False, True).replace("event: message_start", "event: ping") + \
        sse([*THINK[0], THINK[1], *END], False, True)
    found = rules.messages(rules.parse(body))
    assert [(b.rule, b.said) for b in found] == [
        ("framing", "frame 0 is named `event: ping` but its data is a message_start event")]


# -- the Responses API --------------------------------------------------------------------------
def item(kind, n, deltas=()):
    body = {"id": f"{kind}_{n}", "type": kind}
    return ([{"type": "response.output_item.added", "item": body},
             *({"type": d, "item_id": body["id"], "delta": text} for d, text in deltas)],
            {"type": "response.output_item.done", "item": body})


REASONING = item("reasoning", 0, [("response.reasoning_text.delta", "Hmm")])
MESSAGE = item("message", 1, [("response.output_text.delta", "Salut 👋")])
CREATED = {"type": "response.created", "response": {"id": "resp_1"}}
COMPLETED = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}


def responses_breaches(events):
    return [(b.rule, b.said) for b in rules.responses(rules.parse(sse(events, False, True)))]


def test_a_healthy_responses_stream_passes():
    events = [CREATED, *REASONING[0], REASONING[1], *MESSAGE[0], MESSAGE[1], COMPLETED]
    assert responses_breaches(events) == []


@pytest.mark.parametrize("events, rule, said", [
    # llama.cpp: the reasoning item is done only after the message item streamed
    ([CREATED, *REASONING[0], *MESSAGE[0], REASONING[1], MESSAGE[1], COMPLETED], "item_order",
     "the message item was added at frame 3 while the reasoning item (added at frame 1) was "
     "still open: it was done only at frame 5"),
    ([CREATED, *REASONING[0], REASONING[1], MESSAGE[1], COMPLETED], "order",
     "output_item.done at frame 4 for the message item 'message_1', which was never added"),
    ([CREATED, *REASONING[0], REASONING[1], MESSAGE[0][1], COMPLETED], "order",
     "response.output_text.delta at frame 4 for item 'message_1', which is not open"),
    ([CREATED, *REASONING[0], COMPLETED], "order",
     "response.completed at frame 3 while the reasoning item(s) were open"),
    ([CREATED, *REASONING[0], REASONING[1]], "order", "ends with response.output_item.done"),
    ([CREATED, *item("message", 1, [("response.output_text.delta", "\ud83d")])[0], MESSAGE[1],
      COMPLETED], "multibyte", "frame 2's response.output_text.delta carries half"),
])
def test_each_responses_breach_is_named(events, rule, said):
    found = responses_breaches(events)
    assert rule in [r for r, _ in found], found
    assert any(said in s for _, s in found), found


# -- the judge: asked parts fail with their fix, parts turned off are noted ----------------------
def wire(api, body, reply=None, status=200) -> stream.Wire:
    reply = reply or Reply(status=status, content="Hello!", finish="stop")
    reply.exchange = Exchange("POST", "http://h/v1", status=status, body=body,
                              headers={"content-type": "text/event-stream; charset=utf-8"})
    return stream.Wire(api=api, streams=[stream.Streamed("a plain answer", reply,
                                                         rules.parse(body), 1000)])


def judged(seen: stream.Wire, engine="llamacpp", expect=None):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1",
                       expect={"stream": expect or True}))
    notes: list[str] = []
    ctx = Context(ep, driver_for(engine), ep.options("stream"), seen.api, notes.append)
    try:
        stream.judge(seen, ctx)
    except Failure as failed:
        return render(failed.line), render(failed.fix) if failed.fix else None, notes
    return None, None, notes


LLAMA_MESSAGES = sse([START, *THINK[0], *TEXT[0], THINK[1], TEXT[1], *END], False, True)


def test_llamacpps_open_blocks_fail_naming_the_engine_and_the_part_to_turn_off():
    line, fix, _ = judged(wire("messages", LLAMA_MESSAGES))
    assert line.startswith("the /v1/messages stream breaks its wire format: a plain answer: "
                           "block 1 (text) opened at frame 4 while block 0 (thinking)"), line
    assert "llama.cpp's /v1/messages keeps every content block open" in fix, fix
    assert "expect.stream.block_order: false" in fix
    line, fix, _ = judged(wire("messages", LLAMA_MESSAGES), engine="anthropic")
    assert "llama.cpp" not in fix and "close each content block" in fix, fix


def test_a_part_turned_off_is_noted_not_failed():
    line, _, notes = judged(wire("messages", LLAMA_MESSAGES), expect={"block_order": False})
    assert line is None
    assert notes[0].startswith("a plain answer, not asked (expect.stream.block_order: false): "
                               "block 1 (text) opened"), notes
    assert notes[-1] == "a plain answer: 10 frames, finish 'stop', all ASCII", notes


def test_llamacpps_created_and_late_reasoning_item_name_their_parts():
    moved = sse(planted(lambda e: e[7].update(created=1700000001)))
    line, fix, _ = judged(wire("chat", moved))
    assert "`created` changes across frames" in line and "expect.stream.created: false" in fix
    late = sse([CREATED, *REASONING[0], *MESSAGE[0], REASONING[1], MESSAGE[1], COMPLETED],
               False, True)
    line, fix, _ = judged(wire("responses", late))
    assert "the message item was added at frame 3 while the reasoning item" in line, line
    assert "llama.cpp's /v1/responses finishes the reasoning item only after" in fix, fix


def test_a_healthy_stream_notes_its_characters_past_ascii():
    reply = Reply(status=200, content="Bonjour, こんにちは 👋", finish="tool_calls",
                  calls=[Call("get_weather", '{"city":"Paris"}', "call_1")])
    line, _, notes = judged(wire("chat", sse(healthy_chat()), reply))
    assert line is None, line
    assert notes == ["a plain answer: 10 frames, finish 'tool_calls', 1 call(s), 6 character(s) "
                     "past ASCII came whole"], notes


def test_an_error_answer_fails_as_the_answer_it_is_before_any_frame_is_judged():
    reply = Reply(status=400, problem="tools are not supported")
    line, _, _ = judged(wire("chat", '{"error": "x"}', reply, status=400))
    assert line == "a plain answer streamed on /v1/chat/completions answered 400: tools are " \
                   "not supported", line


def test_the_shapes_asked_default_to_the_endpoints_own_route():
    ep = bind(Endpoint("ep", "llamacpp", url="http://h:1", expect={"stream": True}))
    assert stream.apis(ep.options("stream"), driver_for("llamacpp")) == ["chat"]
    assert stream.apis(ep.options("stream"), driver_for("anthropic")) == ["messages"]
    ep = bind(Endpoint("ep", "llamacpp", url="http://h:1",
                       expect={"stream": {"apis": ["responses", "chat"]}}))
    assert stream.apis(ep.options("stream"), driver_for("llamacpp")) == ["responses", "chat"]


def test_llamacpps_missing_role_names_its_part():
    events = planted(lambda e: e[0]["choices"][0]["delta"].pop("role"))
    line, fix, _ = judged(wire("chat", sse(events)))
    assert "choice 0's first delta (frame 0) has no `role`" in line, line
    assert "leaves it out where that piece waited for a character spanning tokens" in fix, fix
    assert "expect.stream.role: false" in fix


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["type", "index", "id", "item", "item_id",
                                                          "choices", "delta", "tool_calls",
                                                          "function", "content_block", "usage",
                                                          "finish_reason", "role", "created"]),
                                         inner, max_size=4), max_leaves=10)


@settings(max_examples=100, deadline=None, database=None)
@given(events=st.lists(JSONISH, max_size=6), junk=st.text(max_size=30))
def test_any_frames_are_judged_without_an_error(events, junk):
    body = "".join(f"event: x\ndata: {json.dumps(e)}\n\n" for e in events) + junk
    found = rules.parse(body)
    for breaches in (rules.chat(found, True), rules.messages(found), rules.responses(found)):
        assert all(isinstance(b, rules.Breach) and len(b.said) < 1000 for b in breaches)


def test_a_whole_json_answer_to_a_stream_is_a_framing_breach():
    seen = wire("chat", json.dumps({"choices": [{"message": {"content": "Hello!"}}]}))
    seen.streams[0].reply.exchange.headers = {"Content-Type": "application/json"}
    line, fix, _ = judged(seen)
    assert line.startswith("the /v1/chat/completions stream breaks its wire format: a plain "
                           "answer: the answer's content-type is 'application/json', not "
                           "text/event-stream; a plain answer: 1 line(s) that are no SSE field"), line
    assert "pass the engine's stream through unchanged" in fix


def test_an_error_event_mid_stream_fails_as_the_servers_error_not_as_a_format():
    body = sse([chunk({"role": "assistant", "content": None}), chunk({"content": "Hel"})],
               done=False) + 'data: {"error": {"code": 500, "message": "Unexpected empty ' \
        'grammar stack after accepting piece: <tool_call>"}}\n\n'
    line, _, _ = judged(wire("chat", body, Reply(status=200, problem="An error occurred")))
    assert line == ("a plain answer streamed on /v1/chat/completions broke off with the server's "
                    "error at frame 2: Unexpected empty grammar stack after accepting piece: "
                    "<tool_call>"), line
    events = [START, *THINK[0], {"type": "error", "error": {"type": "overloaded_error",
                                                             "message": "Overloaded"}}]
    line, _, _ = judged(wire("messages", sse(events, False, True)))
    assert line.endswith("broke off with the server's error at frame 4: Overloaded"), line
