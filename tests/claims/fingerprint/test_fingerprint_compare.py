"""The fingerprint comparison: agreement before the first divergence, logprob drift on the
common prefix, and how the baseline reports each past its tolerance."""

import json

import pytest

from pytest_frank.reports.baseline import Tolerances, compare as regressions
from pytest_frank.claims.fingerprint import ATTACHMENT, compare
from pytest_frank.record.results import Row, Run

pytestmark = pytest.mark.unit


def _rec(tokens, logprobs=None):
    return {"unit": "token", "tokens": list(tokens), "logprobs": logprobs or []}


def test_identical_records_agree_with_no_drift():
    d = compare(_rec("abc", [-0.1, -0.2, -0.3]), _rec("abc", [-0.1, -0.2, -0.3]))
    assert (d.agreement, d.drift, d.diverges) == (1.0, 0.0, None)


def test_a_divergence_names_its_position_and_both_texts():
    d = compare(_rec("abcd"), _rec("abXY"))
    assert (d.agreement, d.diverges, d.before, d.now) == (0.5, 2, "cd", "XY")
    assert d.says("short") == "'short' diverges at token 2 of 4: before 'cd', now 'XY'"


def test_drift_is_the_mean_on_the_common_prefix_only():
    d = compare(_rec("abc", [-1.0, -1.0, -1.0]), _rec("abX", [-1.5, -1.0, -9.0]))
    assert d.drift == pytest.approx(0.25) and d.worst == (0, "a", -1.0, -1.5)


def test_a_shorter_answer_is_a_divergence_where_it_ends():
    d = compare(_rec("abc"), _rec("ab"))
    assert d.diverges == 2 and d.before == "c" and d.now == ""


def _run(records):
    row = Row(key="test_fingerprint.py::test_fingerprint[ep]", endpoint="ep",
              claim="fingerprint", verdict="pass",
              attachments=[{"name": ATTACHMENT, "mime": "application/json",
                            "data": json.dumps(records)}])
    return Run(fleet="f", sha256="", version="", rows=[row])


def test_baseline_reports_divergence_and_drift_past_their_tolerances():
    before = _run({"short": _rec("abc", [-1, -1, -1]), "long": _rec("xyz", [-1, -1, -1])})
    now = _run({"short": _rec("abQ", [-1, -1, -1]), "long": _rec("xyz", [-1, -1.2, -1])})
    found = [r["what"] for r in regressions(before, now, {})]
    assert found == [
        "fingerprint 'short' diverges at token 2 of 3: before 'c', now 'Q' (agreement 0.67, "
        "tolerance 1)",
        "fingerprint 'long': logprob drift 0.0667 on the common prefix, most at token 1 ('y'): "
        "before -1.000, now -1.200 (tolerance 0.05)"]
    loose = {"ep": Tolerances(fingerprint_agreement=0.5, logprob_drift=0.1)}
    assert regressions(before, now, loose) == []


def test_unmeasured_tokens_are_not_judged_for_drift():
    """A drafting llama.cpp sends the tokens it took from the draft with logprob 0.0 and no
    alternatives: recorded as None, they leave the drift to the measured ones."""
    from pytest_frank.runtime.chat import Logprob, Reply
    from pytest_frank.claims.fingerprint import record
    from pytest_frank.drivers import driver_for

    drafted = Reply(status=200, content="Hello! I", logprobs=[
        Logprob("Hello", -2.036, 1), Logprob("!", 0.0, 0), Logprob(" I", 0.0, 0)])
    plain = Reply(status=200, content="Hello! I", logprobs=[
        Logprob("Hello", -2.036, 1), Logprob("!", -1.079, 1), Logprob(" I", -0.968, 1)])
    driver = driver_for("llamacpp")
    now, before = record(drafted, 32, driver), record(plain, 32, driver)
    assert now["logprobs"] == [-2.036, None, None]
    d = compare(before, now)
    assert (d.agreement, d.drift, d.unjudged) == (1.0, 0.0, 2)
    # A measured token whose logprob is 0.0 (it came with its alternative) is judged.
    peaked = Reply(status=200, content="!", logprobs=[Logprob("!", 0.0, 1)])
    assert record(peaked, 32, driver)["logprobs"] == [0.0]


def test_a_divergence_shows_a_newline_and_a_space_apart():
    d = compare(_rec(["Hi", "\n", "there"]), _rec(["Hi", " ", "there"]))
    assert d.says("short") == r"'short' diverges at token 1 of 3: before '\nthere', now ' there'"
    assert compare(_rec(["\n"], [-1.0]), _rec(["\n"], [-2.0])).drifted("p").endswith(
        r"most at token 0 ('\n'): before -1.000, now -2.000")


def test_records_of_two_prompts_are_not_compared():
    """The baseline's long prompt was sized to another slot: no regression is claimed from it."""
    before = _run({"long": {**_rec("abc", [-1, -1, -1]), "prompt": "aaaa"}})
    now = _run({"long": {**_rec("xyz", [-1, -1, -1]), "prompt": "bbbb"}})
    assert regressions(before, now, {}) == []
    same = _run({"long": {**_rec("xyz", [-1, -1, -1]), "prompt": "aaaa"}})
    assert [r["what"][:30] for r in regressions(before, same, {})] == [
        "fingerprint 'long' diverges at"]


def test_the_baseline_long_prompt_is_asked_again_where_it_can_be_rebuilt():
    from pytest_frank.claims.fingerprint import Long, digest, from_baseline, long_prompt

    rec = {"tokens": [], "words": 480, "prompt_tokens": 512,
           "prompt": digest(long_prompt(480))}
    assert from_baseline({"long": rec}) == (Long(480, 512, "the baseline's"), None)
    assert from_baseline({"short": _rec("ab")}) == (None, None)  # it asked no long prompt
    older, why = from_baseline({"long": _rec("ab")})
    assert older is None and "does not record its long prompt's size" in why
    changed, why = from_baseline({"long": {**rec, "prompt": "0123456789abcdef"}})
    assert changed is None and "its text changed" in why


def test_a_divergence_at_a_near_tie_is_no_regression():
    """SmolLM2's plain server put ' type' 0.099 above ' word' at token 11 of the long prompt; a
    drafting twin, verifying its drafts in batches, took ' word'. Arithmetic broke a tie."""
    top = [["type", -3.4485], ["reference", -3.4859], ["word", -3.5479]]
    before = {**_rec(["a", "type"], [-0.1, -3.4485]), "top": [[["a", -0.1]], top]}
    drafted = {**_rec(["a", "word"], [-0.1, None]), "top": [[["a", -0.1]], []]}
    d = compare(before, drafted)
    assert d.tie == pytest.approx(0.0994) and not d.regressed(1.0)
    assert "diverges at token 1 of 2 at a near tie (the two tokens 0.099 apart" in d.says("long")
    assert "compared up to there" in d.figures()
    assert regressions(_run({"long": before}), _run({"long": drafted}), {}) == []
    # A token the server put far below its choice, or not among its alternatives, is a change.
    far = {**before, "top": [[["a", -0.1]], [["type", -3.4485], ["word", -4.0]]]}
    assert compare(far, drafted).regressed(1.0)
    assert compare(before, {**drafted, "tokens": ["a", "cat"]}).tie is None
