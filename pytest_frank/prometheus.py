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

from pytest_frank import redact
from pytest_frank.results import Run
from pytest_frank.verdict import Verdict

JOB = "pytest_frank"
# Verdicts that say "nothing to judge", not "broken": the claim is not failing.
UNDECIDED = {Verdict.INCONCLUSIVE, Verdict.SKIPPED, Verdict.INTERRUPTED, Verdict.NOT_ASKED,
             Verdict.NOT_APPLICABLE}
# a test that did not run has no success series
NOT_RUN = {Verdict.SKIPPED, Verdict.NOT_ASKED, Verdict.NOT_APPLICABLE}
MIB = 2**20
# JSON figure -> (metric, help, factor to the base unit)
FIGURES = {
    "ttft_s": ("frank_ttft_seconds", "median time to first token", 1.0),
    "tok_s": ("frank_decode_tokens_per_second", "median decode speed", 1.0),
    "acceptance": ("frank_spec_decode_acceptance_ratio", "draft tokens accepted / drafted", 1.0),
    "vram_modelled_mib": ("frank_vram_modelled_bytes", "GPU memory the memory model expects", MIB),
    "vram_used_mib": ("frank_vram_used_bytes", "GPU memory the source reports used", MIB),
    "cached_ttft_ratio": ("frank_prefix_cache_ttft_ratio",
                          "time to first token of a repeated prompt over the first", 1.0),
    "cached_share": ("frank_prefix_cache_hit_ratio",
                     "share of a repeated prompt served from the prefix cache", 1.0),
    "thinking_tokens": ("frank_thinking_tokens", "tokens of reasoning before the answer", 1.0),
    "error_rate": ("frank_load_error_ratio", "share of the load ladder's requests that failed",
                   1.0),
    "reasoning_only_rate": ("frank_load_reasoning_only_ratio",
                            "share of the load ladder's replies that carried reasoning only", 1.0),
}
# The load claim's figures per level of its ladder (`ttft_p90_s_at_4`): one series per level,
# the level a label, so a dashboard draws the ladder.
LEVELLED = {
    "ttft_p50_s": ("frank_load_ttft_p50_seconds", "time to first token, P50, at the level"),
    "ttft_p90_s": ("frank_load_ttft_p90_seconds", "time to first token, P90, at the level"),
    "decode_tps": ("frank_load_decode_tokens_per_second",
                   "median per-request decode speed at the level"),
    "aggregate_tps": ("frank_load_tokens_per_second", "tokens per second of the level's replies "
                                                      "together"),
}
AT = "_at_"


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
            value = figure.get("value")
            if name in gauges and isinstance(value, (int, float)):
                gauges[name].labels(fleet, label(row.endpoint), label(row.test)).set(
                    value * FIGURES[name][2])
            kind, _, level = name.rpartition(AT)
            if kind in levelled and level.isdigit() and isinstance(value, (int, float)):
                levelled[kind].labels(fleet, label(row.endpoint), label(row.test), level).set(
                    value)
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
