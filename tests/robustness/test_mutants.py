"""The mutation harness's operators (tests/support/mutants.py) on replies shaped as real llama.cpp
sends them (recorded from xllamacpp's chat completions route): each operator makes the fault it
names, every operator finds a field to work on, the sample is the seed's, and the equivalence
rule takes llama.cpp's own extras and nothing a client reads."""

from __future__ import annotations

import json

import pytest

from mutants import (MISSING, PLAIN_OPS, STREAM_OPS, Applier, Reply, candidates, generate,
                     mutate_plain, mutate_stream, parse_event, render_event)

pytestmark = pytest.mark.unit

MODEL = "selftest"
HEAD = {"created": 1796520369, "id": "chatcmpl-r8Y", "model": MODEL,
        "system_fingerprint": "b0-unknown", "object": "chat.completion.chunk"}


def _chunk(delta: dict, finish=None, **extra) -> bytes:
    body = {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], **HEAD, **extra}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


STREAM = [
    _chunk({"role": "assistant", "content": None}),
    _chunk({"reasoning_content": "Thinking"}),
    _chunk({"content": "Hello"}),
    _chunk({"content": "!"}),
    _chunk({}, "stop"),
    b"data: " + json.dumps({"choices": [], **HEAD, "usage": {
        "completion_tokens": 6, "prompt_tokens": 51, "total_tokens": 57},
        "timings": {"cache_n": 50, "predicted_n": 6}}).encode() + b"\n\n",
    b"data: [DONE]\n\n",
]
PLAIN = {"choices": [{"finish_reason": "stop", "index": 0, "message": {
    "role": "assistant", "content": "Hello!", "reasoning_content": "Thinking"}}],
    "created": 1796520369, "model": MODEL, "system_fingerprint": "b0-unknown",
    "object": "chat.completion", "id": "chatcmpl-1",
    "usage": {"completion_tokens": 6, "prompt_tokens": 51, "total_tokens": 57},
    "timings": {"cache_n": 50, "predicted_n": 6}}
REQUEST = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}]}


def _events():
    return [parse_event(raw) for raw in STREAM]


def _contents(events) -> list:
    return [e.data["choices"][0]["delta"].get("content") for e in events
            if isinstance(e.data, dict) and e.data["choices"]]


def test_the_stream_operators_make_the_faults_they_name():
    path = "chunk:choices[].delta.content"
    assert _contents(mutate_stream(_events(), "accumulate", path))[2:4] == ["Hello", "Hello!"]
    cut = mutate_stream(_events(), "end_early", "chunk:choices[].finish_reason")
    assert len(cut) == 4 and "[DONE]" not in [e.data for e in cut]
    again = mutate_stream(_events(), "again", path)
    assert [e.data for e in again][-1] == "[DONE]" and _contents(again).count("!") == 2
    repeated = mutate_stream(_events(), "repeat", "chunk:choices[].finish_reason")
    assert all(e.data["choices"][0]["finish_reason"] == "stop" for e in repeated[:5])
    moved = mutate_stream(_events(), "reorder", path)
    assert _contents(moved)[1:3] == ["Hello", None]
    renamed = mutate_stream(_events(), "rename", "chunk:choices[].delta.reasoning_content")
    assert "reasoningContent" in renamed[1].data["choices"][0]["delta"]
    assert mutate_stream(_events(), "zero", "chunk:model") is MISSING  # a name is no count
    assert render_event(parse_event(STREAM[2])) == STREAM[2]


def test_the_plain_operators_make_the_faults_they_name():
    assert "content" not in mutate_plain(PLAIN, "drop", "choices[].message.content")[
        "choices"][0]["message"]
    assert mutate_plain(PLAIN, "retype_string", "usage.completion_tokens")["usage"][
        "completion_tokens"] == "6"
    assert mutate_plain(PLAIN, "inflate", "usage.completion_tokens")["usage"][
        "completion_tokens"] == 160
    assert mutate_plain(PLAIN, "empty", "choices[].message.content")["choices"][0][
        "message"]["content"] == ""
    assert mutate_plain(PLAIN, "retype_null", "choices[].finish_reason")["choices"][0][
        "finish_reason"] is None
    assert mutate_plain(PLAIN, "retype_string", "model") is MISSING  # already a string


def test_every_operator_finds_a_field_and_the_sample_is_the_seeds():
    replies = [Reply("chat", False, REQUEST, PLAIN),
               Reply("chat", True, REQUEST, _events())]
    made = candidates(replies)
    # a chat reply has no list of two to reorder; a Messages reply's blocks are one
    assert {m.operator for m in made if not m.streamed} == set(PLAIN_OPS) - {"reorder"}
    blocks = {"content": [{"type": "thinking", "thinking": "Thinking", "signature": ""},
                          {"type": "text", "text": "Hello!"}]}
    assert [b["type"] for b in mutate_plain(blocks, "reorder", "content")["content"]] == [
        "text", "thinking"]
    assert {m.operator for m in made if m.streamed} == set(STREAM_OPS)
    assert all(m.kind == "reasoning" for m in made)
    first, again = generate(replies, 2, seed=7), generate(replies, 2, seed=7)
    assert first == again
    assert len(first) <= 2 * (len(PLAIN_OPS) + len(STREAM_OPS))


def test_equivalence_takes_the_engines_extras_and_nothing_a_client_reads():
    replies = [Reply("chat", False, REQUEST, PLAIN)]
    made = {(m.operator, m.path): m for m in generate(replies, 100, seed=1)}
    assert made[("drop", "timings")].equivalent.startswith("unread:")
    assert made[("drop", "system_fingerprint")].equivalent.startswith("unread:")
    assert not made[("drop", "choices[].message.content")].equivalent
    # read by no client, but the published type requires it: a mutant all the same
    assert not made[("retype_string", "created")].equivalent


def test_the_applier_changes_only_its_route_mode_and_kind_and_swaps_in_order():
    swap = next(m for m in candidates([Reply("chat", False, REQUEST, PLAIN)])
                if m.operator == "swap")
    applier = Applier(swap)
    first = {**PLAIN, "id": "first"}
    second = {**PLAIN, "id": "second"}
    assert applier.answer("/v1/chat/completions", REQUEST, first)["id"] == "first"
    assert applier.answer("/v1/chat/completions", REQUEST, second)["id"] == "first"
    assert applier.answer("/v1/messages", REQUEST, second)["id"] == "second"
    assert applier.stream("/v1/chat/completions", REQUEST, STREAM) == STREAM
    assert applier.fired == 1
