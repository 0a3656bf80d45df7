"""The run as Prometheus metrics, from the run record alone: a textfile for node_exporter's
textfile collector (`--frank-prometheus`) and a push to a Pushgateway (`--frank-pushgateway`),
grouped by fleet as batch jobs are.

Every claim a fleet asks is a series, 0 when its endpoint was down: an absent series cannot
alert. Figures go out in base units (seconds, bytes, ratios). Label values are our own names
(endpoint, claim, test, the fleet file), scrubbed of secrets; prometheus-client escapes them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, Info, generate_latest

from pytest_frank.base import redact
from pytest_frank.base.figures import FIGURES as REGISTRY
from pytest_frank.base.figures import lookup
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import Run

JOB = "pytest_frank"
# Verdicts that say "nothing to judge", not "broken": the claim is not failing.
UNDECIDED = {Verdict.INCONCLUSIVE, Verdict.SKIPPED, Verdict.INTERRUPTED, Verdict.NOT_ASKED,
             Verdict.NOT_APPLICABLE}
# a test that did not run has no success series
NOT_RUN = {Verdict.SKIPPED, Verdict.NOT_ASKED, Verdict.NOT_APPLICABLE}
# JSON figure -> (metric, help, factor to the base unit), from figures.FIGURES
FIGURES = {f.name: (f.metric, f.about, f.factor) for f in REGISTRY.values()
           if f.metric and not f.levelled}
# The load claim's figures per level of its ladder (`ttft_p90_s_at_4`): one series per level,
# the level a label, so a dashboard draws the ladder.
LEVELLED = {f.name: (f.metric, f.about) for f in REGISTRY.values() if f.metric and f.levelled}


def label(text: str) -> str:
    return redact.scrub(str(text))


def registry(run: Run) -> CollectorRegistry:
    """The run's metrics in a registry of their own (never the process's default one)."""
    reg = CollectorRegistry(auto_describe=True)
    fleet = label(run.fleet)
    claim_ok = Gauge("frank_claim_success", "1 when the claim passed (its worst test passed)",
                     ["fleet", "endpoint", "claim"], registry=reg)
    claim_undecided = Gauge("frank_claim_inconclusive",
                            "1 when the claim had too little evidence to judge (inconclusive, "
                            "skipped, interrupted)", ["fleet", "endpoint", "claim"], registry=reg)
    for endpoint, claims in run.matrix().items():
        for claim, verdict in claims.items():
            labels = (fleet, label(endpoint), label(claim))
            claim_ok.labels(*labels).set(1 if verdict is Verdict.PASS else 0)
            claim_undecided.labels(*labels).set(1 if verdict in UNDECIDED else 0)
    test_ok = Gauge("frank_test_success", "1 when the test passed",
                    ["fleet", "endpoint", "claim", "test"], registry=reg)
    gauges = {name: Gauge(metric, about, ["fleet", "endpoint", "test"], registry=reg)
              for name, (metric, about, _) in FIGURES.items()}
    levelled = {name: Gauge(metric, about, ["fleet", "endpoint", "test", "in_flight"],
                            registry=reg) for name, (metric, about) in LEVELLED.items()}
    for row in run.rows:
        if row.verdict in NOT_RUN:
            continue
        test_ok.labels(fleet, label(row.endpoint), label(row.claim), label(row.test)).set(
            1 if row.verdict is Verdict.PASS else 0)
        for name, figure in row.figures.items():
            value, found = figure.get("value"), lookup(name)
            if found is None or not isinstance(value, (int, float)):
                continue
            kind, level = found
            if level is None and kind.name in gauges:
                gauges[kind.name].labels(fleet, label(row.endpoint), label(row.test)).set(
                    value * kind.factor)
            elif level is not None and kind.name in levelled:
                levelled[kind.name].labels(fleet, label(row.endpoint), label(row.test),
                                           str(level)).set(value * kind.factor)
    # Per endpoint, 0 where nothing regressed or no baseline was given: an alert on it needs
    # the series to be there.
    regressed = Gauge("frank_regressions", "what got worse since --frank-baseline (a test that "
                      "passed and now does not, a figure past its tolerance); noise not counted",
                      ["fleet", "endpoint"], registry=reg)
    for endpoint in run.endpoints or run.matrix():
        regressed.labels(fleet, label(endpoint)).set(
            sum(r["endpoint"] == endpoint for r in run.regressions))
    if run.started is not None:
        Gauge("frank_run_timestamp_seconds", "when the run started, Unix time", ["fleet"],
              registry=reg).labels(fleet).set(run.started)
    if run.duration_s is not None:
        Gauge("frank_run_duration_seconds", "how long the run took", ["fleet"],
              registry=reg).labels(fleet).set(run.duration_s)
    Info("frank", "the fleet file, its sha256 and the pytest-frank version",
         registry=reg).info({"fleet": fleet, "sha256": run.sha256, "version": label(run.version)})
    return reg


def text(run: Run) -> bytes:
    """The Prometheus text exposition format, as node_exporter's textfile collector reads it."""
    return generate_latest(registry(run))


def write(run: Run, path: str | os.PathLike) -> None:
    """Write the textfile atomically: a temp file beside it, then a rename, so the collector
    never reads half a file (and never a stale temp: its name does not end in .prom)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text(run))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from a node_exporter user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def push(run: Run, url: str, timeout: float = 10.0) -> None:
    """PUT the metrics to a Pushgateway under job pytest_frank and the fleet's group: each
    push replaces the fleet's previous one, as a batch job's should. Raises OSError."""
    from prometheus_client import push_to_gateway

    push_to_gateway(url, job=JOB, registry=registry(run), timeout=timeout,
                    grouping_key={"fleet": label(run.fleet)})
