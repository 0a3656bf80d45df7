"""The contract claim's judgement over replies built by hand: the shapes llama.cpp sends
(xllamacpp 2026.10: recorded replies of the self-test model, `<think>Thinking</think>Hello!`
and a get_weather call) pass on every route, plain and streamed; each fault the mutation
operators make of them (a field dropped, retyped, renamed, repeated, sent again at the end,
accumulated instead of delta, a count zeroed or inflated, a value emptied, a stream ended
early) fails, naming the field, the frame and the reply. No server."""

from __future__ import annotations

import copy
import json

import pytest

from pytest_frank.claims import Options, contract
from pytest_frank.claims import reply_contract as rc
from pytest_frank.claims.checks import Context
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.verdict import Failure, Inconclusive
from pytest_frank.transport.http import Exchange

pytestmark = pytest.mark.unit

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64,
        "temperature": 0}
CHAT_TOOL = {**CHAT, "tools": TOOLS, "tool_choice": "required"}
CHUNK = {"created": 1796520269, "id": "chatcmpl-5s", "model": "m",
         "system_fingerprint": "b0-unknown", "object": "chat.completion.chunk"}
USAGE = {"completion_tokens": 6, "prompt_tokens": 21, "total_tokens": 27}


def chat_plain(calls: bool = False) -> dict:
    message = {"role": "assistant", "content": "Hello!", "reasoning_content": "Thinking"}
    if calls:
        message["tool_calls"] = [{"type": "function", "id": "c1", "function": {
            "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]
    return {"choices": [{"finish_reason": "tool_calls" if calls else "stop", "index": 0,
                         "message": message}], "created": 1796520269, "model": "m",
            "object": "chat.completion", "usage": dict(USAGE), "id": "chatcmpl-6Z",
            "timings": {"cache_n": 0}}


def chunk(delta: dict | None, finish: str | None = None, **extra) -> dict:
    choices = [] if delta is None else [{"finish_reason": finish, "index": 0, "delta": delta}]
    return {"choices": choices, **CHUNK, **extra}


def chat_chunks(calls: bool = False) -> list[dict]:
    out = [chunk({"role": "assistant", "content": None}), chunk({"reasoning_content": "Thinking"}),
           chunk({"content": "Hello"}), chunk({"content": "!"})]
    if calls:
        out += [chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                       "function": {"name": "get_weather", "arguments": "{"}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": "\"city\":"}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]})]
    return out + [chunk({}, "tool_calls" if calls else "stop"), chunk(None, usage=dict(USAGE))]


def sse(events: list, done: bool = True, named: bool = False) -> str:
    out = ""
    for e in events:
        out += (f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n"
    return out + ("data: [DONE]\n\n" if done else "")


def streamed(request: dict) -> dict:
    return {**request, "stream": True, "stream_options": {"include_usage": True}}


MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
           "content": [{"type": "thinking", "thinking": "Thinking", "signature": ""},
                       {"type": "text", "text": "Hello!"}],
           "stop_reason": "end_turn", "stop_sequence": None,
           "usage": {"cache_read_input_tokens": 20, "input_tokens": 1, "output_tokens": 6}}
MESSAGE_EVENTS = [
    {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None,
                                          "usage": {**MESSAGE["usage"], "output_tokens": 0}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking",
                                                                  "thinking": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta",
                                                          "thinking": "Thinking"}},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hello"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "!"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta",
                                                          "signature": ""}},
    {"type": "content_block_stop", "index": 0}, {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
     "usage": {"output_tokens": 6}},
    {"type": "message_stop"}]
MSG_REQ = {"model": "m", "max_tokens": 64, "messages": [], "temperature": 0}


def llamacpp(api: str = "chat"):
    return driver_for("llamacpp").with_api(api)


def keep(api: str, request: dict, body: str, driver=None) -> rc.Digest:
    ex = Exchange("POST", f"http://h/v1/{'chat/completions' if api == 'chat' else api}",
                  request_json=request, status=200, body=body)
    found = contract.keep(api, ex, ("pytest_frank.claims.tools.streamed", None),
                          driver or llamacpp(api))
    assert found is not None
    return found


def breaches(api: str, request: dict, body: str) -> list[str]:
    return [f"{b.field} @ {b.where}: {b.said}" for b in keep(api, request, body).breaches]


def ctx() -> Context:
    return Context(Endpoint("ep", "llamacpp", url="http://h"), llamacpp(), Options())


def judged(*digests: rc.Digest) -> str:
    obs = contract.Replies(digests=list(digests),
                           tests={("pytest_frank.claims.tools.streamed", None):
                                  "test_tools_streamed[ep]"})
    with pytest.raises(Failure) as failed:
        contract.judge_replies(obs, ctx())
    return failed.value.line + "\n" + str(failed.value.fix)


# -- healthy: llama.cpp's own shapes pass ------------------------------------------------------
@pytest.mark.parametrize("calls", [False, True])
def test_llamacpps_chat_replies_keep_the_contract_plain_and_streamed(calls):
    request = CHAT_TOOL if calls else CHAT
    assert breaches("chat", request, json.dumps(chat_plain(calls))) == []
    assert breaches("chat", streamed(request), sse(chat_chunks(calls))) == []


def test_llamacpps_messages_stream_passes_with_its_known_omissions_noted():
    found = keep("messages", {**MSG_REQ, "stream": True}, sse(MESSAGE_EVENTS, False, True))
    assert found.breaches == []
    assert found.gaps == {"content_block_start:content_block.signature"}
    assert keep("messages", MSG_REQ, json.dumps(MESSAGE)).breaches == []


def test_a_gap_of_llamacpps_is_a_failure_on_an_engine_that_does_not_know_it():
    """The same missing signature, served by an engine whose driver lists no such gap."""
    found = keep("messages", {**MSG_REQ, "stream": True}, sse(MESSAGE_EVENTS, False, True),
                 driver_for("vllm").with_api("messages"))
    assert [b.field for b in found.breaches] == ["content_block.signature"]


def test_healthy_replies_pass_the_judge_and_name_the_gaps():
    notes: list[str] = []
    c = ctx()
    c.note = notes.append
    obs = contract.Replies(digests=[keep("chat", CHAT, json.dumps(chat_plain())),
                                    keep("messages", {**MSG_REQ, "stream": True},
                                         sse(MESSAGE_EVENTS, False, True))])
    contract.judge_replies(obs, c)
    assert "leaves out 1 field(s)" in notes[0] and "signature" in notes[0]
    assert notes[-1].startswith("2 replies on /v1/chat/completions, /v1/messages (1 streamed")


# -- schema: dropped, retyped, renamed fields ---------------------------------------------------
@pytest.mark.parametrize(("value", "said"), [
    ("stop", None), (7, "input should be a valid string"),
    ({"text": "Hello!"}, "input should be a valid string"), (None, None)])
def test_a_retyped_content_is_named_with_its_frame(value, said):
    chunks = chat_chunks()
    chunks[2]["choices"][0]["delta"]["content"] = value
    found = breaches("chat", streamed(CHAT), sse(chunks))
    if said is None:  # a string or null is what the type allows: the twin comparison sees it
        assert not [b for b in found if "delta.content" in b]
    else:
        assert f"choices[0].delta.content @ frame 2 (chunk): `choices[0].delta.content` is " \
               f"{json.dumps(value)}: {said}" in found


@pytest.mark.parametrize("field", ["id", "model", "created", "object", "choices"])
def test_a_required_field_dropped_from_the_reply_is_named(field):
    reply = chat_plain()
    del reply[field]
    assert f"{field} @ the reply: `{field}` is missing (required)" in \
        breaches("chat", CHAT, json.dumps(reply))


def test_a_renamed_field_is_the_one_missing():
    reply = chat_plain()
    reply["choices"][0]["stop_reason"] = reply["choices"][0].pop("finish_reason")
    found = breaches("chat", CHAT, json.dumps(reply))
    assert "choices[0].finish_reason @ the reply: `choices[0].finish_reason` is missing " \
           "(required)" in found


def test_a_finish_reason_outside_the_api_is_named():
    reply = chat_plain()
    reply["choices"][0]["finish_reason"] = "done"
    found = breaches("chat", CHAT, json.dumps(reply))
    assert any(b.startswith("choices[0].finish_reason @ the reply: `choices[0].finish_reason` "
                            "is \"done\": input should be") for b in found), found


def test_a_stream_event_type_renamed_is_one_the_api_does_not_define():
    events = copy.deepcopy(MESSAGE_EVENTS)
    events[4]["type"] = "content_delta"
    found = breaches("messages", {**MSG_REQ, "stream": True}, sse(events, False))
    assert "type @ frame 4: an event of type \"content_delta\", which the API does not " \
           "define: a client that dispatches on `type` drops it" in found


def test_a_block_of_a_type_no_member_holds_is_named_at_the_union():
    events = copy.deepcopy(MESSAGE_EVENTS)
    events[3]["content_block"]["type"] = "words"
    found = breaches("messages", {**MSG_REQ, "stream": True}, sse(events, False))
    assert any(b.startswith("content_block.type @ frame 3 (content_block_start)")
               for b in found), found


def test_the_schema_failure_names_the_reply_and_the_clients():
    chunks = chat_chunks()
    chunks[3]["choices"][0]["delta"]["content"] = 7
    said = judged(keep("chat", streamed(CHAT), sse(chunks)))
    assert said.startswith("1 of 1 replies break their contract: test_tools_streamed[ep]'s "
                           "streamed reply on /v1/chat/completions, frame 3 (chunk): "
                           "`choices[0].delta.content` is 7: input should be a valid string")
    assert "the AI SDK behind opencode checks each reply and chunk" in said
    assert "the OpenAI SDKs do not validate" in said


# -- the request: honoured, or refused --------------------------------------------------------
def test_a_count_past_the_budget_is_a_cap_not_applied():
    reply = chat_plain()
    reply["usage"].update(completion_tokens=600, total_tokens=621)
    assert "usage.completion_tokens @ the reply: usage.completion_tokens is 600, past the " \
           "max_tokens=64 the request set: the cap was not applied, or the count is wrong" in \
        breaches("chat", CHAT, json.dumps(reply))


def test_tool_choice_none_answered_with_a_call():
    reply = chat_plain(calls=True)
    found = breaches("chat", {**CHAT, "tools": TOOLS, "tool_choice": "none"}, json.dumps(reply))
    assert "tool_calls @ the reply: tool_choice none was sent and the reply calls get_weather: " \
           "a client that forbade calls receives one" in found


def test_a_forced_call_answered_with_text():
    found = breaches("chat", streamed(CHAT_TOOL), sse(chat_chunks(calls=False)))
    assert any(b.startswith("tool_calls @ the stream: tool_choice \"required\" was sent and the "
                            "reply holds no call") for b in found), found


def test_a_named_choice_answered_with_another_tool():
    request = {**CHAT, "tools": TOOLS,
               "tool_choice": {"type": "function", "function": {"name": "get_time"}}}
    found = breaches("chat", request, json.dumps(chat_plain(calls=True)))
    assert "tool_calls[0].function.name @ the reply: tool_choice names 'get_time' and the reply " \
           "calls get_weather" in found


def test_json_asked_and_text_answered():
    request = {**CHAT, "response_format": {"type": "json_object"}}
    assert "content @ the reply: response_format json_object was sent and the content is not " \
           "JSON (Hello!)" in breaches("chat", request, json.dumps(chat_plain()))
    reply = chat_plain()
    reply["choices"][0]["message"]["content"] = "{\"city\": \"Paris\"}"
    assert breaches("chat", request, json.dumps(reply)) == []


def test_a_malformed_format_that_an_engine_let_through_is_not_held_to_json():
    """llama.cpp answers a json_schema whose schema is "x" with 200 and free text: the params
    claim judges that request (a lenient engine), not its answer's JSON."""
    request = {**CHAT, "response_format": {"type": "json_schema",
                                           "json_schema": {"name": "c", "schema": "x"}}}
    assert breaches("chat", request, json.dumps(chat_plain())) == []


def test_the_stop_string_left_in_the_content():
    assert "content @ the reply: stop '!' was sent and the content holds it (Hello!): the " \
           "answer must end before it" in breaches("chat", {**CHAT, "stop": ["!"]},
                                                   json.dumps(chat_plain()))


def test_the_model_another_than_the_one_asked():
    reply = chat_plain()
    reply["model"] = "gpt-4o"
    assert "model @ the reply: `model` is 'gpt-4o' where 'm' was asked, and the server's model " \
           "list names no such model: a gateway routed the request to another model, or " \
           "renamed it" in breaches("chat", CHAT, json.dumps(reply))


# -- the reply against itself ------------------------------------------------------------------
def test_calls_with_finish_stop_end_an_agents_turn():
    reply = chat_plain(calls=True)
    reply["choices"][0]["finish_reason"] = "stop"
    said = judged(keep("chat", CHAT_TOOL, json.dumps(reply)))
    assert "the reply holds 1 call(s) and choices[0].finish_reason is 'stop', not " \
           "'tool_calls': agent clients that loop on the finish reason end the turn" in said
    assert "agent clients that loop on the finish reason (opencode, pi, Claude Code)" in said


def test_finish_tool_calls_with_no_call():
    reply = chat_plain()
    reply["choices"][0]["finish_reason"] = "tool_calls"
    assert any("choices[0].finish_reason is 'tool_calls' and the reply holds no call" in b
               for b in breaches("chat", CHAT, json.dumps(reply)))


@pytest.mark.parametrize(("usage", "said"), [
    ({**USAGE, "completion_tokens": 0, "total_tokens": 21},
     "usage.completion_tokens is 0, yet the stream carried text"),
    ({**USAGE, "total_tokens": 2700}, "usage.total_tokens is 2700, not prompt_tokens 21 + "
                                      "completion_tokens 6")])
def test_usage_zeroed_or_inflated_in_a_stream(usage, said):
    chunks = chat_chunks()
    chunks[-1]["usage"] = usage
    assert any(said in b for b in breaches("chat", streamed(CHAT), sse(chunks))), said


def test_a_stream_whose_message_id_changes():
    events = copy.deepcopy(MESSAGE_EVENTS)
    body = sse(events, False).replace('"id": "msg_1"', '"id": "msg_2"', 1)
    assert breaches("messages", {**MSG_REQ, "stream": True}, body) == []  # one id, renamed
    events.insert(5, {"type": "message_start", "message": {**events[0]["message"],
                                                           "id": "msg_9"}})
    found = breaches("messages", {**MSG_REQ, "stream": True}, sse(events, False))
    assert any(b.startswith("message.id @ frame 5: `message.id` is \"msg_9\" where frame 0 said "
                            "\"msg_1\"") for b in found), found


# -- the stream's own rules, and the SDKs' reassemblies ----------------------------------------
def test_a_stream_ended_early_misses_its_end_and_its_finish():
    found = breaches("chat", streamed(CHAT), sse(chat_chunks()[:3], done=False))
    assert "done @ the stream: the stream ended without its `data: [DONE]` terminator" in found
    assert any("no choices[0].finish_reason" in b for b in found), found


def test_a_finish_repeated_in_every_chunk():
    chunks = [chunk(c["choices"][0]["delta"], "stop") if c["choices"] else c
              for c in chat_chunks()]
    found = breaches("chat", streamed(CHAT), sse(chunks))
    assert any(b.startswith("finish @ the stream: choice 0 has 5 finish_reasons") for b in found)


def test_usage_sent_again_at_the_end_of_every_chunk():
    chunks = [{**c, "usage": dict(USAGE)} for c in chat_chunks()]
    found = breaches("chat", streamed(CHAT), sse(chunks))
    assert any(b.startswith("usage @ the stream: usage came in frame(s) 0, 1, 2, 3") for b in found)


def test_the_parts_the_stream_claim_asks_under_its_options_are_left_to_it():
    """llama.cpp re-stamps `created` each second: the stream claim's own part, not failed
    here."""
    chunks = chat_chunks()
    chunks[3]["created"] += 1
    assert breaches("chat", streamed(CHAT), sse(chunks)) == []


def test_a_reordered_messages_stream_breaks_the_anthropic_sdks_accumulation():
    events = copy.deepcopy(MESSAGE_EVENTS)
    events[0], events[2] = events[2], events[0]  # a delta before message_start
    found = keep("messages", {**MSG_REQ, "stream": True}, sse(events, False))
    assert found.views[rc.ANTHROPIC_SDK].error is not None
    said = [b.said for b in found.breaches if b.kind == "stream"]
    assert any(s.startswith("the Anthropic SDK's MessageStream accumulation raises on this "
                            "stream") for s in said), said
    assert any("the stream begins with content_block_delta, not message_start" in s
               for s in said), said


# -- streamed equals plain ---------------------------------------------------------------------
def twins_judged(stream_body: str, plain: dict, api: str = "chat",
                 request: dict = CHAT) -> str:
    s = keep(api, streamed(request) if api == "chat" else {**request, "stream": True},
             stream_body)
    p = keep(api, request, json.dumps(plain))
    obs = contract.Replies(digests=[p, s], tests={
        ("pytest_frank.claims.tools.streamed", None): "test_tools_streamed[ep]"})
    with pytest.raises(Failure) as failed:
        contract.judge_stream_twins(obs, ctx())
    return failed.value.line


def test_twins_that_agree_pass_reassembled_each_way():
    notes: list[str] = []
    c = ctx()
    c.note = notes.append
    obs = contract.Replies(digests=[keep("chat", CHAT_TOOL, json.dumps(chat_plain(True))),
                                    keep("chat", streamed(CHAT_TOOL), sse(chat_chunks(True))),
                                    keep("messages", MSG_REQ, json.dumps(MESSAGE)),
                                    keep("messages", {**MSG_REQ, "stream": True},
                                         sse(MESSAGE_EVENTS, False, True))])
    contract.judge_stream_twins(obs, c)
    assert notes == ["2 streamed replies equal their plain twins, reassembled 3 ways (the "
                     "Anthropic SDK's MessageStream accumulation, appending every delta (as "
                     "opencode and the AI SDK do), the OpenAI SDK's stream accumulator "
                     "(ChatCompletionStreamState, client.chat.completions.stream))"]


def test_deltas_accumulated_instead_of_appended_name_the_frame_and_each_reassembly():
    chunks = chat_chunks()
    chunks[3]["choices"][0]["delta"]["content"] = "Hello!"  # the text so far, not the piece
    said = twins_judged(sse(chunks), chat_plain())
    assert said.startswith("test_tools_streamed[ep]'s streamed reply on /v1/chat/completions "
                           "differs from its plain twin to the same greedy request in content "
                           "(from frame 3 of the stream): content differs at character 5: "
                           "streamed 'HelloHello!', plain 'Hello!'; read by appending every "
                           "delta (as opencode and the AI SDK do), the OpenAI SDK's stream "
                           "accumulator"), said


def test_a_call_streamed_with_other_arguments():
    chunks = chat_chunks(True)
    chunks[6]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = "\"Rome\"}"
    said = twins_judged(sse(chunks), chat_plain(True), request=CHAT_TOOL)
    assert "in arguments: get_weather's arguments differ: streamed {\"city\": \"Rome\"}, plain " \
           "{\"city\": \"Paris\"}" in said


def test_usage_that_differs_between_twins():
    chunks = chat_chunks()
    chunks[-1]["usage"] = {**USAGE, "completion_tokens": 5, "total_tokens": 26}
    said = twins_judged(sse(chunks), chat_plain())
    assert "in usage: the generated tokens differ: streamed usage says 5, plain 6" in said


def test_a_messages_stream_that_drops_the_thinking():
    events = [e for e in copy.deepcopy(MESSAGE_EVENTS) if e.get("index") != 0]
    for e in events:
        if "index" in e:
            e["index"] = 0
    said = twins_judged(sse(events, False), MESSAGE, "messages", MSG_REQ)
    assert "in reasoning" in said and "the Anthropic SDK's MessageStream accumulation" in said


def test_a_sampled_pair_is_no_pair():
    request = {**CHAT, "temperature": 0.8}
    obs = contract.Replies(digests=[keep("chat", request, json.dumps(chat_plain())),
                                    keep("chat", streamed(request), sse(chat_chunks()))])
    with pytest.raises(Inconclusive):
        contract.judge_stream_twins(obs, ctx())


def test_usage_asked_and_dropped_from_the_stream():
    found = breaches("chat", streamed(CHAT), sse(chat_chunks()[:-1]))
    assert "usage @ the stream: stream_options.include_usage was sent and no chunk carried " \
           "usage: clients that count tokens from the stream get none" in found


def test_a_role_dropped_before_ascii_text_is_the_contracts_and_before_a_wide_one_the_stream_claims():
    chunks = chat_chunks()
    del chunks[0]["choices"][0]["delta"]["role"]
    assert any(b.startswith("role @ the stream: choice 0's first delta (frame 0) has no `role`")
               for b in breaches("chat", streamed(CHAT), sse(chunks)))
    chunks[1]["choices"][0]["delta"]["reasoning_content"] = "こんにちは"  # as llama.cpp does
    assert not [b for b in breaches("chat", streamed(CHAT), sse(chunks)) if "role" in b]
    again = chat_chunks()
    again[2]["choices"][0]["delta"]["role"] = "assistant"  # repeated: never llama.cpp's
    assert any("repeats `role`" in b for b in breaches("chat", streamed(CHAT), sse(again)))


def test_a_message_delta_sent_again_at_the_end():
    events = copy.deepcopy(MESSAGE_EVENTS)
    events.insert(-1, copy.deepcopy(events[-2]))
    found = breaches("messages", {**MSG_REQ, "stream": True}, sse(events, False))
    assert "message_delta @ frames 9, 10: message_delta came 2 times (frames 9, 10): a stream " \
           "has one" in found


def test_text_after_the_finish():
    chunks = chat_chunks()
    chunks.insert(-1, chunk({"content": " again"}))
    found = breaches("chat", streamed(CHAT), sse(chunks))
    assert "choices[0].delta.content @ frame 5: choice 0's delta.content came in frame 5, after " \
           "its finish_reason in frame 4: clients stop reading a choice at its finish and drop " \
           "the rest" in found


def test_a_count_deflated_below_the_deltas_that_came():
    chunks = chat_chunks(calls=True)
    chunks[-1]["usage"] = {**USAGE, "completion_tokens": 2, "total_tokens": 23}
    assert "usage.completion_tokens @ the stream: usage.completion_tokens is 2, yet 6 deltas " \
           "carried text: a token makes one delta at most, so the count is short" in \
        breaches("chat", streamed(CHAT_TOOL), sse(chunks))


def test_a_plain_reply_counting_no_token_for_its_text():
    reply = chat_plain()
    reply["usage"].update(completion_tokens=0, total_tokens=21)
    assert "usage.completion_tokens @ the reply: usage.completion_tokens is 0, yet the reply " \
           "carried text: clients that bill or budget by usage count nothing" in \
        breaches("chat", CHAT, json.dumps(reply))
