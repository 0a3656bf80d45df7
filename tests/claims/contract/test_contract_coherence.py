"""The contract's rules between a reply's fields and between replies, on replies as real llama.cpp
sends them (recorded from xllamacpp 2026.10 serving the self-test model: `Hello!` after
`Thinking`, a get_weather call where tools are offered): each passes llama.cpp's own reply,
plain and streamed, and fails the fault it exists for (the survivors of bench/mutations.py on
main), naming the field, the reply and the clients that break. No server: the real-server run is
test_contract_real's healthy one, where these rules judge every reply of the tools and agent
checks."""

from __future__ import annotations

import copy
import json

import pytest

from pytest_frank.claims import Options, contract
from pytest_frank.claims import reply_contract as rc
from pytest_frank.claims.checks import Context
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.verdict import Failure
from pytest_frank.transport.http import Exchange

pytestmark = pytest.mark.unit

PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages",
         "responses": "/v1/responses"}
SAY = [{"role": "user", "content": "Say hello."}]
CHAT_REQ = {"model": "selftest", "messages": SAY, "max_tokens": 64, "temperature": 0}
MSG_REQ = dict(CHAT_REQ)
RESP_REQ = {"model": "selftest", "input": "Say hello.", "max_output_tokens": 64, "temperature": 0}
TIMINGS = {"cache_n": 28, "prompt_n": 1, "prompt_ms": 0.338, "predicted_n": 6,
           "predicted_ms": 0.448}
CHAT = {"choices": [{"finish_reason": "stop", "index": 0, "message": {
    "role": "assistant", "content": "Hello!", "reasoning_content": "Thinking"}}],
    "created": 1796533620, "model": "selftest", "system_fingerprint": "b0-unknown",
    "object": "chat.completion", "usage": {"completion_tokens": 6, "prompt_tokens": 29,
                                           "total_tokens": 35,
                                           "prompt_tokens_details": {"cached_tokens": 28}},
    "id": "chatcmpl-hxjZSxDXD7sW0z4B2PJDbPzvfw9T7SG2", "timings": TIMINGS}
CALL = {"type": "function", "function": {"name": "get_weather",
                                         "arguments": "{\"city\":\"Paris\"}"},
        "id": "LOSGS6E3kbkmQnI4c7HIoavJT5iYfUUF"}
MESSAGE = {"id": "chatcmpl-7XvJ9FBOXnilSiOZaQ7ftGJOIXrl1dGP", "type": "message",
           "role": "assistant", "content": [{"type": "thinking", "thinking": "Thinking",
                                             "signature": ""},
                                            {"type": "text", "text": "Hello!"}],
           "model": "selftest", "stop_reason": "end_turn", "stop_sequence": None,
           "usage": {"cache_read_input_tokens": 28, "input_tokens": 1, "output_tokens": 6}}
MESSAGE_START = {"type": "message_start", "message": {
    **MESSAGE, "content": [], "stop_reason": None,
    "usage": {"cache_read_input_tokens": 28, "input_tokens": 1, "output_tokens": 0}}}
MESSAGE_EVENTS = [
    MESSAGE_START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
     "usage": {"output_tokens": 6}},
    {"type": "message_stop"}]
RESPONSE = {"completed_at": 1796533623, "created_at": 1796533623,
            "id": "resp_jc64c7458tJ8CxJuT9srRHVK6B27VzAS", "model": "selftest",
            "object": "response", "status": "completed",
            "output": [{"id": "rs_KxhdIbJqw3sihARUGN56GA5UkohYQJEX", "summary": [],
                        "type": "reasoning", "content": [{"text": "Thinking",
                                                          "type": "reasoning_text"}],
                        "encrypted_content": "", "status": "completed"},
                       {"content": [{"type": "output_text", "annotations": [], "logprobs": [],
                                     "text": "Hello!"}],
                        "id": "msg_RFyYqMlC6ENWyNYlCxAH8hCnYcbzrg8R", "role": "assistant",
                        "status": "completed", "type": "message"}],
            "usage": {"input_tokens": 29, "output_tokens": 6, "total_tokens": 35,
                      "input_tokens_details": {"cached_tokens": 28}}}


def sse(events: list, named: bool = True) -> str:
    return "".join((f"event: {e['type']}\n" if named else "") + f"data: {json.dumps(e)}\n\n"
                   for e in events)


def keep(api: str, request: dict, body: str) -> rc.Digest:
    ex = Exchange("POST", f"http://h{PATHS[api]}", request_json=request, status=200, body=body)
    found = contract.keep(api, ex, ("pytest_frank.claims.tools.streamed", None),
                          driver_for("llamacpp").with_api(api))
    assert found is not None
    return found


def said(api: str, request: dict, reply) -> list[str]:
    body = reply if isinstance(reply, str) else json.dumps(reply)
    return [f"{b.kind} {b.field} @ {b.where}: {b.said}" for b in keep(api, request, body).breaches]


def judged(*digests: rc.Digest) -> str:
    obs = contract.Replies(digests=list(digests))
    c = Context(Endpoint("ep", "llamacpp", url="http://h"), driver_for("llamacpp"), Options())
    with pytest.raises(Failure) as failed:
        contract.judge_replies(obs, c)
    return failed.value.line + "\n" + str(failed.value.fix)


def test_llamacpps_own_replies_keep_every_rule_plain_and_streamed():
    tool = copy.deepcopy(CHAT)
    tool["choices"][0]["message"]["tool_calls"] = [CALL]
    tool["choices"][0]["finish_reason"] = "tool_calls"
    assert said("chat", CHAT_REQ, CHAT) == []
    assert said("chat", CHAT_REQ, tool) == []
    assert said("messages", MSG_REQ, MESSAGE) == []
    assert said("messages", {**MSG_REQ, "stream": True}, sse(MESSAGE_EVENTS)) == []
    assert said("responses", RESP_REQ, RESPONSE) == []
    # llama.cpp's own stop: the answer cut before the sequence, end_turn, the sequence named
    stopped = {**MESSAGE, "content": [MESSAGE["content"][0], {"type": "text", "text": "H"}],
               "stop_sequence": "ello"}
    assert said("messages", {**MSG_REQ, "stop_sequences": ["ello"]}, stopped) == []


# -- ids and names ---------------------------------------------------------------------------
def test_an_emptied_reply_id_is_named_with_the_clients_that_follow_it():
    reply = {**CHAT, "id": ""}
    assert said("chat", CHAT_REQ, reply) == [
        "ids id @ the reply: `id` is empty: an id identifies the reply, a call or an item, and "
        "an empty one matches none"]
    line = judged(keep("chat", CHAT_REQ, json.dumps(reply)))
    assert "Who breaks on it: agent clients, which answer a call by its id" in line, line
    assert "only whole (unstreamed) replies break it: a gateway or proxy in front" in line, line


def test_an_emptied_call_id_and_call_name_are_named():
    reply = copy.deepcopy(MESSAGE)
    reply["content"].append({"type": "tool_use", "id": "", "name": "get_weather",
                             "input": {"city": "Paris"}})
    reply["stop_reason"] = "tool_use"
    assert said("messages", MSG_REQ, reply)[0].startswith("ids content[2].id @ the reply")
    reply["content"][2].update(id="toolu_1", name="")
    assert said("messages", MSG_REQ, reply)[0].startswith(
        "ids content[2].name @ the reply: `content[2].name` is empty: a call names the tool")


def test_an_emptied_message_id_in_a_stream_names_the_frame_and_the_stream_path():
    events = copy.deepcopy(MESSAGE_EVENTS)
    events[0]["message"]["id"] = ""
    found = keep("messages", {**MSG_REQ, "stream": True}, sse(events))
    assert [f"{b.field} @ {b.where}" for b in found.breaches] == ["message.id @ frame 0"]
    line = judged(found)
    assert "only streamed replies break it: the engine's stream writer, or a proxy" in line


# -- usage -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("api", "reply", "part", "value", "wrong"), [
    # a cached count llama.cpp did not make, against its own timings in the same reply
    ("chat", CHAT, "prompt_tokens_details", {"cached_tokens": 0},
     "agrees usage @ the reply: its usage.prompt_tokens_details.cached_tokens is 0, where "
     "llama.cpp's own count in the reply (timings.cache_n) is 28: the count was changed "
     "between the engine and the client"),
    # a part of usage larger than its whole
    ("responses", RESPONSE, "input_tokens_details", {"cached_tokens": 380},
     "agrees usage.input_tokens_details.cached_tokens @ the reply: "
     "usage.input_tokens_details.cached_tokens is 380, more than the usage.input_tokens (29) "
     "it is part of")])
def test_a_count_the_rest_of_the_reply_contradicts_is_named(api, reply, part, value, wrong):
    reply = copy.deepcopy(reply)
    reply["usage"][part] = value
    assert said(api, CHAT_REQ if api == "chat" else RESP_REQ, reply) == [wrong]


def test_a_prompt_counted_zero_is_named():
    reply = copy.deepcopy(MESSAGE)
    reply["usage"].update(input_tokens=0, cache_read_input_tokens=0)
    assert said("messages", MSG_REQ, reply)[0].startswith(
        "agrees usage.input_tokens (with cache_read_input_tokens and "
        "cache_creation_input_tokens) @ the reply: ")


def test_replies_to_one_prompt_count_it_alike_and_the_odd_one_is_named():
    """Three replies to one prompt (the budget and stop differ, which leave the prompt as it
    is): the one whose count stands alone is named; two that differ are both."""
    zeroed = copy.deepcopy(MESSAGE)
    zeroed["usage"]["cache_read_input_tokens"] = 0
    digests = [keep("messages", MSG_REQ, json.dumps(MESSAGE)),
               keep("messages", {**MSG_REQ, "max_tokens": 16}, json.dumps(MESSAGE)),
               keep("messages", {**MSG_REQ, "stop_sequences": ["x"]}, json.dumps(zeroed))]
    rc.prompt_disagreements(digests)
    rc.prompt_disagreements(digests)  # asked twice, said once
    assert [len(d.breaches) for d in digests] == [0, 0, 1]
    assert digests[2].breaches[0].said.startswith(
        "usage.input_tokens (with cache_read_input_tokens and cache_creation_input_tokens) "
        "counts 1 prompt tokens where 2 other replies to the same prompt count 29")
    other = keep("messages", {**MSG_REQ, "system": "Be brief."}, json.dumps(zeroed))
    rc.prompt_disagreements([digests[0], other])  # another prompt: no comparison
    assert other.breaches == []


# -- Messages' stop_sequence -------------------------------------------------------------------
def test_a_dropped_stop_sequence_is_named_plain_and_streamed():
    reply = dict(MESSAGE)
    del reply["stop_sequence"]
    assert said("messages", MSG_REQ, reply) == [
        "agrees stop_sequence @ the reply: `stop_sequence` is missing: the API sends it with "
        "the stop reason (null where no sequence matched)"]
    events = copy.deepcopy(MESSAGE_EVENTS)
    del events[0]["message"]["stop_sequence"]
    assert said("messages", {**MSG_REQ, "stream": True}, sse(events))[0].startswith(
        "agrees message.stop_sequence @ frame 0: `message.stop_sequence` is missing")


@pytest.mark.parametrize(("reason", "sequence", "sent", "wrong"), [
    ("stop_sequence", None, ["ello"], 'is "stop_sequence" and `stop_sequence` is null'),
    ("end_turn", "###", ["ello"], 'is "###", which the request\'s stop_sequences'),
    ("stop_sequence", "ello", ["ello"], None)])
def test_a_stop_sequence_agrees_with_its_reason_and_its_request(reason, sequence, sent, wrong):
    reply = {**MESSAGE, "content": [{"type": "text", "text": "H"}], "stop_reason": reason,
             "stop_sequence": sequence}
    found = said("messages", {**MSG_REQ, "stop_sequences": sent}, reply)
    if wrong is None:
        assert found == []
    else:
        assert len(found) == 1 and wrong in found[0], found


# -- order -----------------------------------------------------------------------------------
def test_thinking_after_the_text_it_led_to_is_named_with_who_refuses_it():
    reply = {**MESSAGE, "content": MESSAGE["content"][::-1]}
    assert said("messages", MSG_REQ, reply) == [
        "order content[1] @ the reply: the thinking block content[1] comes after the text "
        "block content[0]: the reasoning comes before what it led to"]
    line = judged(keep("messages", MSG_REQ, json.dumps(reply)))
    assert "which the API refuses unless the turn starts with its thinking" in line, line


def test_a_reasoning_item_after_the_message_is_named():
    reply = {**RESPONSE, "output": RESPONSE["output"][::-1]}
    assert said("responses", RESP_REQ, reply) == [
        "order output[1] @ the reply: the reasoning item output[1] comes after the message "
        "item output[0]: the reasoning comes before what it led to"]


# -- which path: the twin tells --------------------------------------------------------------
def test_a_stream_broken_where_its_plain_twin_keeps_the_contract_blames_the_stream_path():
    chunks = [{"choices": [{"finish_reason": None, "index": 0,
                            "delta": {"role": "assistant", "content": "Hello!"}}]},
              {"choices": [{"finish_reason": "stop", "index": 0, "delta": {}}]}]
    head = {k: CHAT[k] for k in ("created", "model", "system_fingerprint")}
    body = "".join(f"data: {json.dumps({**c, **head, 'id': '', 'object': 'chat.completion.chunk'})}"
                   f"\n\n" for c in chunks) + "data: [DONE]\n\n"
    streamed = keep("chat", {**CHAT_REQ, "stream": True}, body)
    assert streamed.breaches and streamed.breaches[0].field == "id"
    line = judged(streamed, keep("chat", CHAT_REQ, json.dumps(CHAT)))
    assert "the same greedy request unstreamed keeps it, so the stream path is at fault" in line


# -- crossed answers -------------------------------------------------------------------------
def test_a_reply_that_is_another_requests_answer_is_named_crossed():
    """A gateway that hands request B the answer of request A: B's reply carries A's id. One
    greedy request asked twice (a cache's replay) is no crossing."""
    first = keep("chat", CHAT_REQ, json.dumps(CHAT))
    again = keep("chat", CHAT_REQ, json.dumps(CHAT))
    other = keep("chat", {**CHAT_REQ, "messages": [{"role": "user", "content": "Hi."}]},
                 json.dumps(CHAT))
    rc.crossed([first, again, other])
    rc.crossed([first, again, other])  # asked twice, said once
    assert first.breaches == [] and again.breaches == []
    assert [b.kind for b in other.breaches] == ["crossed"]
    line = judged(first, other)
    assert "is the id of streamed's plain reply to another request" in line, line
    assert "answers crossed between requests in flight" in line, line


def test_a_server_that_gives_every_answer_one_id_is_not_named_crossed():
    """Some servers (an emulator, a thin proxy) give every answer the same id: three requests'
    replies sharing one id is that server's habit, not an answer handed to another request."""
    asked = [keep("chat", {**CHAT_REQ, "messages": [{"role": "user", "content": word}]},
                  json.dumps(CHAT)) for word in ("Hi.", "Hello.", "Hey.")]
    rc.crossed(asked)
    assert [b.kind for d in asked for b in d.breaches] == []


def test_a_diagnosis_names_the_crossing_and_the_broken_contract_before_the_template():
    from pytest_frank.claims.diagnosis import CROSSED, GATEWAY, STREAM, TEMPLATE, Again, \
        Evidence, diagnose

    own = (TEMPLATE, "serve with --jinja")
    again = Again("no call", "answered 'Hello!'")
    crossed = Evidence("no call", crossed="its id 'x' is the id of agent's reply to another "
                                          "request", again=again, facts="the model")
    assert diagnose(crossed, driver_for("llamacpp"), own=own).cause == CROSSED
    plain = Evidence("no call", broken="the reply: `content[2].name` is null", again=again,
                     facts="the model")
    found = diagnose(plain, driver_for("llamacpp"), own=own)
    assert found.cause == GATEWAY and "--jinja" not in str(found.fix)
    assert "never a field's type or an empty id" in found.line
    streamed = Evidence("no call", streamed=True, broken="frame 3: `delta` is 1", again=again)
    assert diagnose(streamed, driver_for("llamacpp"), own=own).cause == STREAM
    assert diagnose(Evidence("no call", again=again, facts="the model"), driver_for("llamacpp"),
                    own=own).cause == TEMPLATE  # nothing else shown: the claim's own reading


# -- a stream cut short --------------------------------------------------------------------------
def test_a_stream_cut_before_its_end_names_the_cut_in_both_tests():
    events = MESSAGE_EVENTS[:3]  # the text's first piece, then nothing
    streamed = keep("messages", {**MSG_REQ, "stream": True}, sse(events))
    assert rc.ended_early(streamed.breaches) is not None
    line = judged(streamed)
    assert "the stream ended before its end event (the stream ends with content_block_delta" \
        in line, line
    plain = keep("messages", MSG_REQ, json.dumps({**MESSAGE, "content": MESSAGE["content"][1:]}))
    obs = contract.Replies(digests=[plain, streamed])
    c = Context(Endpoint("ep", "llamacpp", url="http://h"), driver_for("llamacpp"), Options())
    with pytest.raises(Failure) as failed:
        contract.judge_stream_twins(obs, c)
    assert "the stream ended before its end event" in str(failed.value.fix)
    assert "cuts streams short" in str(failed.value.fix)


def test_a_diagnosis_of_a_cut_stream_says_it_ended_early():
    from pytest_frank.claims.diagnosis import STREAM, Evidence, diagnose

    seen = Evidence("no call", streamed=True,
                    broken="the stream: the stream ended without its `data: [DONE]` terminator")
    found = diagnose(seen, driver_for("llamacpp"), own=("template", "serve with --jinja"))
    assert found.cause == STREAM and str(found.fix).startswith("the stream ended early")


def test_a_reply_of_a_type_no_client_reads_is_the_writers_fault_not_the_templates():
    """runtime.chat's words for such a 2xx get the known fix that names what wrote it."""
    from pytest_frank.runtime.chat import _failure
    from pytest_frank.runtime.known_errors import known_fix
    from pytest_frank.transport.wire import Unreadable

    reply = _failure(Unreadable("content is '[...]', not list"), None, driver_for("llamacpp"))
    fix = str(known_fix(driver_for("llamacpp"), reply.problem, 200))
    assert fix.startswith("what wrote the reply is at fault, not the model or its template: a "
                          "gateway or proxy in front"), fix
