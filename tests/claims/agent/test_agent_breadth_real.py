"""agent in breadth against real llama.cpp (xllamacpp, the self-test model): three rounds over
four tools pass, and a gateway that hands out the same call id every round fails; a long answer
after a tool result that the model cannot write is inconclusive, not a failure."""

import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real


def run(run_fleet, url, *args, **agent):
    return run_fleet(one_endpoint(url, "llamacpp", expect={"agent": agent}), "-p", "no:randomly",
                     "-m", "agent", *args)


def test_three_rounds_over_four_tools_pass(llama, run_fleet, pytester):
    result = run(run_fleet, llama().url, "-k", "rounds", "--frank-json=run.json", rounds=3)
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "run.json").read_text())
    notes = "\n".join(next(r for r in data["rows"] if "rounds" in r["key"])["notes"])
    # The self-test model calls one tool every round (the grammar's global ranking picks it).
    assert "3 round(s) called convert_currency, convert_currency, convert_currency (1 of " \
           "the 4 tools offered)" in notes, notes
    assert "turn 4 sent: user, " + ", ".join(
        ["assistant (1 tool_call(s), reasoning_content, content), tool"] * 3) in notes, notes
    assert "turn 4 came back: finish stop, content 'Hello!'" in notes, notes


def _one_id(request, answer):
    """A gateway that numbers calls per reply: every round's first call is call_0."""
    for choice in answer.get("choices") or []:
        for i, call in enumerate(choice.get("message", {}).get("tool_calls") or []):
            call["id"] = f"call_{i}"
    return answer


def test_a_call_id_reused_across_rounds_fails(llama, run_fleet):
    with Proxy(llama().url, rewrite_answer=_one_id) as proxy:
        result = run(run_fleet, proxy.url, "-k", "rounds", rounds=3, stream=False)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*agent loop of 3 rounds over 4 tools: turn 2 gave its convert_currency call the id "
        "'call_0', the id of a call of turn 1: a client that answers calls by id cannot tell "
        "the two results apart*",
        "*fix: the server (or a proxy) must give every call a fresh id*"])


def test_a_short_answer_leaves_the_long_answer_inconclusive(llama, run_fleet):
    result = run(run_fleet, llama().url, "-k", "long_answer", "-rs", long_answer=2500)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*the model answered 6 characters where 2,500 were asked*"])


def test_not_asked_by_default(llama, run_fleet):
    result = run(run_fleet, llama().url, "-k", "rounds or long_answer")
    result.assert_outcomes()  # neither collected
