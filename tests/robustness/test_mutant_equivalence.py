"""The mutation harness's third equivalence rule and its scoring (tests/support/mutants.py,
bench/mutations.py), on a chat stream shaped as real llama.cpp sends it (xllamacpp 2026.10: the
thinking, `Hello!`, a get_weather call): two events of different parts moved past each other
that every client reassembles alike are equivalent, and nothing else a reorder makes is; a kill
whose fix blames the chat template never names the right cause; --only reruns what a run left."""

from __future__ import annotations

import json
import sys

import pytest

from checkout import ROOT
from mutants import Event, Mutant, Reply, _equivalent, mutate_stream

pytestmark = pytest.mark.unit

HEAD = {"created": 1796533621, "id": "chatcmpl-3pnY", "model": "selftest",
        "system_fingerprint": "b0-unknown", "object": "chat.completion.chunk"}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
REQUEST = {"model": "selftest", "messages": [{"role": "user", "content": "Say hello."}],
           "tools": TOOLS, "stream": True}


def _chunk(delta: dict, finish=None) -> Event:
    return Event(None, {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
                        **HEAD})


def _stream() -> list[Event]:
    call = {"index": 0, "id": "Ug48", "type": "function",
            "function": {"name": "get_weather", "arguments": "{"}}
    return [_chunk({"role": "assistant", "content": None}),
            _chunk({"reasoning_content": "Thinking"}), _chunk({"content": "Hello"}),
            _chunk({"content": "!"}), _chunk({"tool_calls": [call]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "\"city\":\"Paris\"}"}}]}),
            _chunk({}, "tool_calls"), Event(None, "[DONE]")]


def _why(path: str) -> str:
    reply = Reply("chat", True, REQUEST, _stream())
    return _equivalent(reply, "reorder", path, mutate_stream(reply.answer, "reorder", path))


def test_a_call_moved_before_the_texts_last_piece_is_reassembled_alike():
    assert _why("chunk:choices[].delta.tool_calls").startswith("reassembled alike:")


@pytest.mark.parametrize("path", [
    "chunk:choices[].delta.content",  # the answer before its thinking
    "chunk:choices[].finish_reason",  # the finish before the call's last piece
    "chunk:choices[].delta.tool_calls[].function.arguments"])  # one call's pieces swapped
def test_a_reorder_a_client_reads_otherwise_is_a_mutant(path):
    assert _why(path) == ""


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    import mutations
    return mutations


def test_a_kill_whose_fix_blames_the_template_is_not_the_right_cause():
    bench = _bench()
    mutant = Mutant("chat", False, "tool", "drop", "id", "id")
    right = bench.Outcome(mutant, 1, [{"fix": "a gateway in front rewrites replies"}])
    assert right.right_cause
    both = bench.Outcome(mutant, 1, [{"fix": "a gateway in front rewrites replies"},
                                     {"fix": "a gateway, or serve with --jinja"}])
    assert both.blames_template and not both.right_cause


def test_only_takes_a_runs_survivors_and_wrong_causes(tmp_path):
    bench = _bench()
    path = tmp_path / "run.json"
    path.write_text(json.dumps([
        {"mutant": "a", "status": "killed", "right_cause": True},
        {"mutant": "b", "status": "killed", "right_cause": False},
        {"mutant": "c", "status": "survived", "right_cause": False},
        {"mutant": "d", "status": "equivalent", "right_cause": False}]))
    assert bench.chosen(path) == {"b", "c"}
    names = tmp_path / "names.txt"
    names.write_text("chat plain text: empty id\n\n")
    assert bench.chosen(names) == {"chat plain text: empty id"}
