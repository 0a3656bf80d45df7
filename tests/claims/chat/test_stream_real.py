"""The stream claim against real llama.cpp (xllamacpp 2026.10): its chat, Messages and Responses
streams of a thinking model, plain and with a forced tool call, frame by frame; and a real
trained model's Japanese, whose characters span several tokens, reassembled whole.

What llama.cpp's streams do (the self-test model, thinking on): chat completions keep the wire
(role in the first delta, one finish_reason, tool-call continuations of index and argument text
alone, usage in its own last chunk, [DONE]) but stamp each chunk's `created` with the second it
is sent, so a stream that crosses a second boundary changes it; /v1/messages opens the text
block (and the tool_use block) while the thinking block is still open, and closes every block
at the end; /v1/responses adds the message item (and the function_call item) before the
reasoning item is done, and finishes every item at the end. SmolLM2 answering in Japanese:
every character whole, but the first delta, which waited for its character's last bytes, has
no `role`. (Real vLLM's chat stream: tests/vllm/test_breadth_vllm_real.py.)"""

from __future__ import annotations

import json

import pytest
from fleets import one_endpoint

pytestmark = pytest.mark.real

ALL = ["chat", "messages", "responses"]
# The shared 2-core machine, loaded by other suites, can take a minute for a few tokens of
# SmolLM2: the frames are judged here, not the speed.
PATIENT = 300


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def test_llamacpp_streams_keep_the_wire_but_its_open_blocks_and_late_reasoning_item(
        llama, run_fleet, pytester):
    server = llama(alias="frank-default-large")
    # created: not asked, as only a stream that happens to cross a second boundary shows it.
    # "lenient" stops asking llama.cpp's two departures: they are noted, and the rest passes.
    strict = {"reasoning": True, "stream": {"apis": ALL, "tools": False, "created": False}}
    lenient = {"reasoning": True, "stream": {"apis": ["messages", "responses"],
                                             "block_order": False, "item_order": False}}
    fleet = {"endpoints": {name: {"url": server.url, "engine": "llamacpp",
                                  "alias": "frank-default-large", "expect": expect}
                           for name, expect in (("strict", strict), ("lenient", lenient))}}
    result = run_fleet(fleet, "-m", "stream", "-p", "no:randomly", "--frank-json=run.json")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines_random([
        "*the /v1/messages stream breaks its wire format: a plain answer: block 1 (text) "
        "opened at frame 3 while block 0 (thinking) was still open (its content_block_stop "
        "came at frame 7)*",
        "*fix: llama.cpp's /v1/messages keeps every content block open until the answer ends*",
        "*the /v1/responses stream breaks its wire format: a plain answer: the message item "
        "was added at frame 4 while the reasoning item (added at frame 2) was still open*",
        "*fix: llama.cpp's /v1/responses finishes the reasoning item only after the message "
        "item has streamed*"])
    found = rows(pytester)
    assert found["test_stream_wire[strict-messages]"]["verdict"] == "FAIL"
    notes = "\n".join(found["test_stream_wire[strict-chat]"]["notes"])
    # 7 frames: role, reasoning, "Hello", "!", finish, usage, [DONE]
    assert "a plain answer: 7 frames, finish 'stop', all ASCII" in notes, notes
    notes = "\n".join(found["test_stream_wire[lenient-messages]"]["notes"])
    assert ("a plain answer, not asked (expect.stream.block_order: false): block 1 (text) "
            "opened at frame 3 while block 0 (thinking) was still open") in notes, notes
    notes = "\n".join(found["test_stream_wire[lenient-responses]"]["notes"])
    assert ("a plain answer, not asked (expect.stream.item_order: false): the message item "
            "was added at frame 4 while the reasoning item") in notes, notes


def test_llamacpps_streamed_tool_call_continues_with_index_and_arguments_alone(
        llama, run_fleet, pytester):
    server = llama(alias="frank-default-large")
    fleet = one_endpoint(server.url, alias="frank-default-large", expect={
        "stream": {"tools": True, "created": False}})
    result = run_fleet(fleet, "-m", "stream", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    notes = "\n".join(rows(pytester)["test_stream_wire[ep-chat]"]["notes"])
    # the call's first chunk (id, type, name), then its arguments piece by piece
    assert "a tool call: " in notes, notes
    assert "finish 'tool_calls', 1 call(s), all ASCII" in notes, notes


def test_smollm2s_japanese_comes_whole_but_its_first_delta_has_no_role(smollm2, run_fleet,
                                                                        pytester):
    server = smollm2()
    # Greedy (the fleet default) SmolLM2 answers in Japanese, characters of three UTF-8 bytes
    # its byte-level tokens split: llama.cpp holds a character's first bytes back until it is
    # whole, and the first delta, the one that waited, comes without its role.
    fleet = one_endpoint(server.url, timeout=PATIENT, expect={
        "stream": {"max_tokens": 12, "created": False, "role": False}})
    result = run_fleet(fleet, "-m", "stream", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    notes = "\n".join(rows(pytester)["test_stream_wire[ep-chat]"]["notes"])
    assert ("a plain answer, not asked (expect.stream.role: false): choice 0's first delta "
            "(frame 0) has no `role`") in notes, notes
    assert "character(s) past ASCII came whole" in notes, notes
