"""The fingerprint comparison: agreement before the first divergence, logprob drift on the
common prefix, and how the baseline reports each past its tolerance."""

import json

import pytest

from pytest_frank.baseline import Tolerances, compare as regressions
from pytest_frank.claims.fingerprint import ATTACHMENT, compare
from pytest_frank.results import Row, Run

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
