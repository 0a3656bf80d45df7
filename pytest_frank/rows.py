"""Each test report's row of the run record (pytest_frank.results.Row), built as plain data
where the test ran, so it crosses xdist's wire to the reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_frank import probes, redact
from pytest_frank.checks import check_of
from pytest_frank.claims import claim_of
from pytest_frank.stash import SESSION
from pytest_frank.verdict import Verdict


def verdict_of(report: pytest.TestReport, hint: Verdict | None) -> Verdict:
    """A test's verdict: `hint` is what a skip means (blocked, inconclusive, not asked)."""
    if report.when != "call":
        return Verdict.ERROR if report.failed else hint or Verdict.SKIPPED
    if report.passed:
        return Verdict.PASS
    return Verdict.FAIL if report.failed else hint or Verdict.SKIPPED


def _reports_asked(config) -> bool:
    """Whether a page or file will show exchanges: else a row carries no copy of them."""
    return bool(config.getoption("htmlpath", None) or config.getoption("frank_json")
                or config.getoption("frank_report"))


def row_of(item, call, report, name: str, probed) -> dict:
    """The report's row as plain data (pytest_frank.results.Row), so it crosses xdist's wire."""
    evidence = probed.evidence(_reports_asked(item.config)) if probed is not None \
        else {"verdict": None}
    why = _why(call)
    line, _, fix = why.partition("\n  fix: ")
    hint = evidence.pop("verdict", None)
    row = {"key": f"{Path(str(item.path)).stem}::{item.name}", "endpoint": name,
           "claim": claim_of(item) or "custom", "verdict": verdict_of(report, hint).value,
           "line": redact.inert(line), "fix": redact.inert(fix) if fix else None, **evidence}
    frank = item.config.stash.get(SESSION, None)
    target = frank.targets.get(name) if frank is not None else None
    if target is None:
        return row
    check = check_of(item)
    health = check is not None and check.probe is probes.health and report.passed
    # Under xdist a worker probes on first use, after its health test: a later row carries it.
    if call.when == "call" and (health or _measured(target)):
        row["identity"] = _identity(target)
    row["spend"] = {"generations": target.spend.generations, "tokens": target.spend.tokens}
    return row


def _why(call) -> str:
    exc = call.excinfo
    if exc is None:
        return ""
    if isinstance(exc.value, (pytest.fail.Exception, pytest.skip.Exception)):
        return str(exc.value.msg)
    return exc.exconly()


def _measured(target) -> bool:
    from pytest_frank import identify

    return target.measured(identify.identity)


def _identity(target) -> dict:
    from pytest_frank import identify

    if not _measured(target):
        return {"url": target.endpoint.url}  # the probe phase did not reach it: none at report time
    seen = target.need(identify.identity)
    return {"build": getattr(seen, "build", None), "models": getattr(seen, "models", []),
            "url": target.endpoint.url}


