"""tools and agent in breadth against emulated engines, for what no engine here shows: two calls
under tool_choice auto (no self-test model makes two calls in one turn), cut to one under auto
alone; a long answer after a tool result (no model here writes one), whole, broken by a lazy
grammar's 500 and by a call that fires inside it; a gateway that forwards the last turn alone,
whose tool decisions then part from the reference's (the self-test model that calls does so on
every prompt, history or not)."""

import pytest

from emulator import Emulator, chat_json, error_json, serve_chat, tool_call
from fleets import one_endpoint
from healthy_engines import healthy_chat, run

pytestmark = pytest.mark.emulated


def test_two_calls_under_auto_pass(run_fleet):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, healthy_chat("reasoning"))
        result = run(run_fleet, em, "vllm", "-k", "parallel", tools={"parallel": True})
    result.assert_outcomes(passed=2)  # required and auto


def test_calls_cut_to_one_under_auto_alone(run_fleet):
    healthy = healthy_chat("reasoning")

    def cut_under_auto(body):
        return healthy({**body, "parallel_tool_calls": body.get("tool_choice") != "auto"})
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, cut_under_auto)
        result = run(run_fleet, em, "vllm", "-k", "parallel", tools={"parallel": True})
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        '*parallel tool calls under tool_choice "auto": 0/1 trial(s) valid (0%, need 100%); '
        "parallel calls truncated: 1 call(s) where 2 were asked for at once*",
        "*fix: the server cut parallel calls to one*"])


def test_a_text_answer_under_auto_passes_unless_a_call_is_required(run_fleet):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json("Hello!"))
        lenient = run(run_fleet, em, "vllm", "-k", "parallel_auto", tools={"parallel": True})
        strict = run(run_fleet, em, "vllm", "-k", "parallel_auto",
                     tools={"parallel": True, "auto_must_call": True})
    lenient.assert_outcomes(passed=1)
    strict.assert_outcomes(failed=1)


GUIDE = "Sunny, 21 C. " + "At nine, walk along the Seine; at noon, lunch in the Marais. " * 60


def agent_answers(final):
    """Turn 1: a get_weather call; once a tool result came back: `final(body)`."""
    def answer(body):
        if any(m.get("role") == "tool" for m in body["messages"]):
            return final(body)
        return chat_json(None, finish="tool_calls", reasoning="Weather first.",
                         tool_calls=[tool_call("get_weather", {"city": "Paris", "days": 1})])
    return answer


def long_run(run_fleet, final, *args):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, agent_answers(final))
        return run_fleet(one_endpoint(em.url, "vllm", alias="model",
                                      expect={"agent": {"long_answer": 2500}}),
                         "-p", "no:randomly", "-k", "long_answer", *args)


def test_a_long_answer_after_the_result_passes(run_fleet):
    result = long_run(run_fleet, lambda b: chat_json(GUIDE, tokens=900))
    result.assert_outcomes(passed=1)


def test_a_lazy_grammar_error_in_the_long_answer_fails(run_fleet):
    # What llama.cpp answered when a plain-text "<tool_call>" reached its lazy tool grammar.
    said = ("Unexpected empty grammar stack after accepting piece: <tool_call> (61235)")
    result = long_run(run_fleet, lambda b: error_json(500, said, "server_error"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the long answer after the tool result answered 500: Unexpected empty grammar stack*",
        "*fix: the engine's lazy tool-call grammar fired inside a plain answer*"])


def test_a_call_fired_inside_the_long_answer_fails(run_fleet):
    fired = chat_json(GUIDE[:1800], finish="tool_calls",
                      tool_calls=[tool_call("get_time", {"timezone": "Europe/Paris"}, "call_9")])
    result = long_run(run_fleet, lambda b: fired)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*a tool call (get_time) fired after 1,800 characters of the long answer to the tool "
        "result*", "*fix: the engine's lazy tool-call grammar fired*"])


def asked_for_a_tool(body):
    """A model that calls where the conversation asks for the weather or the time."""
    said = " ".join(str(m.get("content")) for m in body["messages"]).lower()
    if any(w in said for w in ("weather", "forecast", "time is it")):
        return chat_json(None, finish="tool_calls",
                         tool_calls=[tool_call("get_weather", {"city": "Lyon", "days": 1})])
    return chat_json("Hello!")


def last_turn_only(body):
    """A gateway that forwards the last message alone."""
    return {**body, "messages": body["messages"][-1:]}


def test_a_gateway_that_drops_history_disagrees_with_the_reference(run_fleet):
    from proxy import Proxy

    with Emulator("vllm", models=["model"]) as em, Proxy(em.url, rewrite=last_turn_only) as gw:
        serve_chat(em, asked_for_a_tool)
        fleet = {"endpoints": {
            "ref": {"url": em.url, "engine": "vllm", "alias": "model"},
            "ep": {"url": gw.url, "engine": "vllm", "alias": "model",
                   "expect": {"tools": {"reference": "ref", "min_trigger_f1": 1.0}}}}}
        result = run_fleet(fleet, "-p", "no:randomly", "-k", "trigger")
        kept = run_fleet({"endpoints": {**fleet["endpoints"], "ep": {
            **fleet["endpoints"]["ep"], "url": em.url}}}, "-p", "no:randomly", "-k", "trigger")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*tool-call trigger agreement with ref: F1 0.86 (precision 1.00, recall 0.75, need "
        "1.00) over 7 prompts: answered text where ref called on 'Lyon.' (after 2 turns)*",
        "*fix: *drops turns of the history*"])
    kept.assert_outcomes(passed=1)
