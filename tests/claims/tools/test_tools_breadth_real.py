"""tools in breadth against real llama.cpp (xllamacpp, the self-test model): the schema corpus,
parallel calls under auto, reasoning under a forced call and the trigger agreement with a
reference, each passing on a healthy server and failing with its diagnosis on each fault.
Faults llama.cpp itself cannot show go through a gateway (tests/support/proxy.py) in front of it."""

import copy
import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real


def run(run_fleet, url, *args, engine="llamacpp", **expect):
    return run_fleet(one_endpoint(url, engine, expect=expect), "-p", "no:randomly", "-m", "tools",
                     *args)


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def test_schema_corpus_passes_every_keyword_strict_and_streamed(llama, run_fleet, pytester):
    server = llama()
    result = run(run_fleet, server.url, "-k", "schema_corpus", "--frank-json=run.json",
                 tools={"schemas": 8})
    result.assert_outcomes(passed=1)
    notes = "\n".join(rows(pytester)["test_tools_schema_corpus[ep]"]["notes"])
    assert "schema corpus: 8/8 tool(s) called validly" in notes, notes
    # the four pairings of strict and streamed, and the recursive tree closed at once
    for label in ("make_tree_0 (strict, whole): valid", "book_trip_0 (not strict, streamed)",
                  "search_records_0 (strict, streamed)", "set_alarm_0 (not strict, whole)"):
        assert label in notes, notes
    assert '"children":[]' in notes, notes


def _forced_recursion(body):
    """A gateway that makes a tree's children obligatory (minItems 1): the grammar then
    opens the recursive $ref at every level, as a model that recurses of its own accord does."""
    body = copy.deepcopy(body)
    for tool in body.get("tools") or []:
        defs = tool["function"]["parameters"].get("$defs") or {}
        if "folder" in defs:
            defs["folder"]["properties"]["children"]["minItems"] = 1
    return body


def test_recursing_into_optional_refs_is_caught_at_the_budget(llama, run_fleet):
    server = llama()
    with Proxy(server.url, rewrite=_forced_recursion) as proxy:
        result = run(run_fleet, proxy.url, "-k", "schema_corpus",
                     tools={"schemas": 1, "schema_budget": 200})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*schema corpus: 0/1 tool(s) called validly (0%, need 100%); make_tree_0 (strict, "
        "whole): still writing the call when max_tokens=200 ran out (finish_reason 'length'), "
        "* levels deep into the recursive $defs/folder: the model recursed into optional $ref "
        "fields*",
        "*fix: a model that keeps opening an optional recursive field never closes the call*"])


def _drop_required_arg(request, answer):
    """A gateway that loses the last argument of every call it passes back."""
    for choice in answer.get("choices") or []:
        for call in choice.get("message", {}).get("tool_calls") or []:
            args = json.loads(call["function"]["arguments"])
            args.pop(next(reversed(args)), None)
            call["function"]["arguments"] = json.dumps(args)
    return answer


def test_arguments_that_break_the_schema_fail_the_corpus(llama, run_fleet):
    server = llama()
    with Proxy(server.url, rewrite_answer=_drop_required_arg) as proxy:
        result = run(run_fleet, proxy.url, "-k", "schema_corpus", tools={"schemas": 1})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*schema corpus: 0/1 tool(s) called validly*; make_tree_0 (strict, whole): missing "
        "required: make_tree_0 lacks 'dry_run'*"])


def test_parallel_under_auto_cut_to_one_call(llama, run_fleet):
    # The agent model calls under auto, one call where two are asked at once.
    server = llama(model="selftest:agent")
    result = run(run_fleet, server.url, "-k", "parallel_auto", tools={"parallel": True})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '*parallel tool calls under tool_choice "auto": 0/1 trial(s) valid (0%, need 100%); '
        "parallel calls truncated: 1 call(s) where 2 were asked for at once*",
        "*fix: the server cut parallel calls to one*"])


def test_parallel_auto_is_not_asked_without_parallel(llama, run_fleet):
    result = run(run_fleet, llama().url, "-k", "parallel", tools=True)
    result.assert_outcomes(skipped=1)  # test_tools_parallel's skip row; parallel_auto not collected


def test_forced_call_keeps_the_reasoning(llama, run_fleet):
    result = run(run_fleet, llama().url, "-k", "forced_thinking", tools={"thinking": True})
    result.assert_outcomes(passed=1)


def _drop_reasoning_of_forced_calls(request, answer):
    """A gateway that drops reasoning_content beside a forced call's tool calls."""
    if request.get("tool_choice") == "required":
        for choice in answer.get("choices") or []:
            choice.get("message", {}).pop("reasoning_content", None)
    return answer


def test_forced_call_without_its_reasoning_fails(llama, run_fleet):
    with Proxy(llama().url, rewrite_answer=_drop_reasoning_of_forced_calls) as proxy:
        result = run(run_fleet, proxy.url, "-k", "forced_thinking", tools={"thinking": True})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*tool_choice \"required\" suppressed the reasoning: the call came with none, where the "
        "same request under \"auto\" thought first ('Thinking')*",
        "*fix: the forced-call path starts the tool-call grammar at the first token*"])


def test_forced_thinking_on_a_model_that_never_thinks_is_inconclusive(llama, run_fleet):
    result = run(run_fleet, llama(model="selftest:no_think").url, "-k", "forced_thinking", "-rs",
                 tools={"thinking": True})
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(['*the model did not think under tool_choice "auto" either*'])


def two(ref_url, url, **tools):
    return {"endpoints": {"ref": {"url": ref_url, "engine": "llamacpp"},
                          "ep": {"url": url, "engine": "llamacpp", "expect": {"tools": tools}}}}


def test_triggers_agree_with_the_reference(llama, run_fleet, pytester):
    agent = llama(model="selftest:agent").url
    result = run_fleet(two(agent, agent, reference="ref"), "-p", "no:randomly", "-k", "trigger",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    notes = "\n".join(rows(pytester)["test_tools_trigger_agreement[ep]"]["notes"])
    assert "F1 1.00 (precision 1.00, recall 1.00, need 0.80) over 7 prompts" in notes, notes


def test_a_replica_is_compared_with_its_original_by_same_as(llama, run_fleet):
    agent = llama(model="selftest:agent").url
    fleet = {"endpoints": {"ref": {"url": agent, "engine": "llamacpp"},
                           "ep": {"url": agent, "engine": "llamacpp", "same_as": "ref",
                                  "expect": {"tools": True}}}}
    result = run_fleet(fleet, "-p", "no:randomly", "-k", "trigger")
    result.assert_outcomes(passed=1)


def test_a_model_that_never_calls_disagrees(llama, run_fleet):
    result = run_fleet(two(llama(model="selftest:agent").url, llama().url, reference="ref"),
                       "-p", "no:randomly", "-k", "trigger")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*tool-call trigger agreement with ref: F1 0.00 (precision 0.00, recall 0.00, need "
        "0.80) over 7 prompts: answered text where ref called on 'What is the weather in "
        "Paris tomorrow?'*",
        "*fix: this endpoint decides otherwise than ref on the same prompts*"])


def _calls_as_text(request, answer):
    """A gateway that passes the model's calls on as markup in content, finish stop."""
    for choice in answer.get("choices") or []:
        message = choice.get("message", {})
        calls = message.pop("tool_calls", None) or []
        if calls:
            message["content"] = "".join(
                f"<tool_call>{json.dumps(c['function'])}</tool_call>" for c in calls)
            choice["finish_reason"] = "stop"
    return answer


def test_leaked_markup_fails_the_agreement_with_the_parser_fix(llama, run_fleet):
    agent = llama(model="selftest:agent").url
    with Proxy(agent, rewrite_answer=_calls_as_text) as proxy:
        result = run_fleet(two(agent, proxy.url, reference="ref", min_trigger_f1=0.9),
                           "-p", "no:randomly", "-k", "trigger")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*F1 0.00 (*need 0.90) over 7 prompts: answered text where ref called on *; the text "
        "holds tool-call markup (*): the calls were made and not parsed*",
        "*fix: llama.cpp reads the tool-call format from the chat template*"])
