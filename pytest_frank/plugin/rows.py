"""Each test report's row of the run record (pytest_frank.record.results.Row), built as plain data
where the test ran, so it crosses xdist's wire to the reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_frank.base import redact
from pytest_frank.claims import claim_of
from pytest_frank.claims.checks import check_of
from pytest_frank.outcome.verdict import Failure, Skip, Verdict, render
from pytest_frank.plugin.stash import SESSION
from pytest_frank.plugin.under_test import EndpointUnderTest
from pytest_frank.record.results import Payload, Row
from pytest_frank.runtime import identify, probes
from pytest_frank.runtime.target import Target


def verdict_of(report: pytest.TestReport, raised: BaseException | None) -> Verdict:
    """A test's verdict: a skip's is the one its type names (blocked, inconclusive, not asked)."""
    if report.failed:
        return Verdict.FAIL if report.when == "call" else Verdict.ERROR
    if report.passed and report.when == "call":
        return Verdict.PASS
    return raised.verdict if isinstance(raised, Skip) else Verdict.SKIPPED


def _reports_asked(config: pytest.Config) -> bool:
    """Whether a page or file will show exchanges: else a row carries no copy of them."""
    return bool(config.getoption("htmlpath", None) or config.getoption("frank_json")
                or config.getoption("frank_report"))


def row_of(item: pytest.Item, report: pytest.TestReport, name: str,
           probed: EndpointUnderTest | None,
           raised: pytest.ExceptionInfo[BaseException] | None) -> dict[str, Any]:
    """The report's row as plain data (pytest_frank.record.results.Row), so it crosses xdist's wire;
    `raised` is what the test raised, as pytest recorded it."""
    evidence = probed.evidence(_reports_asked(item.config)) if probed is not None else {}
    exc = raised.value if raised is not None else None
    line, fix = said(raised)
    row = Row(key=f"{Path(str(item.path)).stem}::{item.name}", endpoint=name,
              claim=claim_of(item) or "custom", verdict=verdict_of(report, exc),
              line=redact.inert(line), fix=redact.inert(fix) if fix else None, **evidence)
    if isinstance(exc, Failure) and exc.figures:
        row.figures = {**row.figures, **{
            k: {"value": round(float(v), 4), "unit": unit} for k, (v, unit) in exc.figures.items()}}
    frank = item.config.stash.get(SESSION, None)
    target = frank.targets.get(name) if frank is not None else None
    if target is None:
        return Payload(row).plain()
    check = check_of(item)
    health = check is not None and check.probe is probes.health and report.passed
    # Under xdist a worker probes on first use, after its health test: a later row carries it.
    identity = _identity(target) if report.when == "call" and (health or _measured(target)) \
        else None
    return Payload(row, identity=identity, spend=target.pacing.spend.record()).plain()


def said(raised: pytest.ExceptionInfo[BaseException] | None) -> tuple[str, str | None]:
    """A row's line and fix, read from the exception's fields: a battery failure's diagnosis
    and fix, a skip's reason, pytest's own fail or skip message, or any other exception's
    one-line form (a plain assert's)."""
    if raised is None:
        return "", None
    exc = raised.value
    if isinstance(exc, Failure):
        return render(exc.line), render(exc.fix) if exc.fix else None
    if isinstance(exc, Skip):
        return exc.line, None
    if isinstance(exc, (pytest.fail.Exception, pytest.skip.Exception)):
        return str(exc.msg), None
    return raised.exconly(), None


def _measured(target: Target) -> bool:
    return target.measured(identify.identity)


def _identity(target: Target) -> dict[str, Any]:
    if not _measured(target):
        return {"url": target.endpoint.url}  # the probe phase did not reach it: none at report time
    seen = target.need(identify.identity)
    return {"build": getattr(seen, "build", None), "models": getattr(seen, "models", None) or [],
            "url": target.endpoint.url}


