"""A fleet split in two (`--frank-shard I/2`) and put back together (`frank merge`) is the record
of the unsharded run, field by field: every endpoint's identity and cost (the plan's minimum and
the time to verdict too) and every row. The unsharded run is an xdist one (`-n 2`), so its rows
and costs crossed from the workers to the controller; the shards' did not. Two emulated healthy
vLLM endpoints, which answer alike every time: a real engine's answers would make the token
counts differ from run to run, not the merge (tests/reports/test_merge_real.py merges real llama.cpp's
pages). The merged Markdown and page carry the unsharded run's charts: one set of writers
writes both."""

import re
from dataclasses import fields

import pytest

from emulator import Emulator, Reply, serve_chat
from healthy_engines import healthy_chat

from pytest_frank.reports import merge
from pytest_frank.base.figures import lookup
from pytest_frank.record.results import EndpointInfo, Row, read_run
from pytest_frank.base.shard import shard_of

pytestmark = pytest.mark.emulated


def _measured(before, after) -> bool:
    """A wall-clock figure: two runs measure it apart; both measured it."""
    return bool(before) and bool(after)


def _timeless(exchanges: list[dict]) -> list[dict]:
    return [{k: v for k, v in ex.items() if k != "elapsed_s"} for ex in exchanges]


def _unmeasured(figures: dict) -> dict:
    return {name: {k: v for k, v in f.items() if k != "value"} for name, f in figures.items()}


BELOW = "each of its records compared field by field below"

# How the merged record is compared with the unsharded one, one rule per field: equal, but for
# what the clock measures. A field without a rule fails the test (add its rule here).
RUN = {"fleet": None, "sha256": None, "version": None, "endpoints": BELOW, "rows": BELOW,
       "regressions": None, "noise": None, "fleet_endpoints": None, "shard": None,
       "started": _measured, "duration_s": _measured, "notes": None, "error": None,
       "baseline": None}
ENDPOINT = {f.name: None for f in fields(EndpointInfo)} | {"time_to_verdict_s": _measured}
ROW = {f.name: None for f in fields(Row)} | {
    "exchanges": lambda a, b: _timeless(a) == _timeless(b),
    "figures": lambda a, b: _unmeasured(a) == _unmeasured(b)}


def _same(rules: dict, before, after, where: str) -> None:
    assert set(rules) == {f.name for f in fields(before)}, f"{where}: a field without a rule"
    for f in fields(before):
        a, b, compare = getattr(before, f.name), getattr(after, f.name), rules[f.name]
        if compare is BELOW:
            continue
        assert (a == b) if compare is None else compare(a, b), f"{where}.{f.name}: {a!r} != {b!r}"


def test_two_shards_merge_into_the_unsharded_runs_record(run_fleet, pytester, capsys):
    pytest.importorskip("xdist")
    assert (shard_of("good", 2), shard_of("beta", 2)) == (1, 2)  # one endpoint in each
    with Emulator("vllm", models=["model"]) as good, Emulator("vllm", models=["model"]) as beta:
        for em in (good, beta):
            serve_chat(em, healthy_chat("reasoning"))
            em.route("GET", "/version", lambda r: Reply(200, {"version": "0.32.0"}))
        fleet = {"endpoints": {name: {"url": em.url, "engine": "vllm", "alias": "model",
                                      "description": f"{name}'s", "expect": {"reasoning": True}}
                               for name, em in (("good", good), ("beta", beta))}}
        # the whole run under xdist: its rows and what they saw cross the wire to the controller
        run_fleet(fleet, "-p", "no:randomly", "-n", "2", "--dist", "loadgroup",
                  "--frank-json=whole.json", "--frank-report=whole/report.md",
                  "--html=whole/page.html").assert_outcomes(passed=12)
        for i in (1, 2):
            run_fleet(fleet, "-p", "no:randomly", f"--frank-shard={i}/2",
                      f"--frank-json=shard{i}.json").assert_outcomes(passed=6)
    records = [str(pytester.path / f"shard{i}.json") for i in (1, 2)]
    assert merge.main([*records, "--frank-json", str(pytester.path / "merged.json"),
                       "--frank-report", str(pytester.path / "merged" / "report.md"),
                       "--html", str(pytester.path / "merged" / "page.html")]) == 0
    capsys.readouterr()
    whole, merged = read_run(pytester.path / "whole.json"), read_run(pytester.path / "merged.json")
    shards = [read_run(pytester.path / f"shard{i}.json") for i in (1, 2)]

    _same(RUN, whole, merged, "run")
    assert merged.started == min(s.started for s in shards)
    assert list(merged.endpoints) == list(whole.endpoints) == ["beta", "good"]
    for name, info in whole.endpoints.items():
        assert info.generations and info.min_tokens and info.time_to_verdict_s, info
        _same(ENDPOINT, info, merged.endpoints[name], name)
        ran = next(s.endpoints[name] for s in shards if name in s.endpoints)
        assert merged.endpoints[name] == ran  # the shard's own, time to verdict included
    assert sorted(r.key for r in merged.rows) == sorted(r.key for r in whole.rows)
    rows = {r.key: r for r in merged.rows}
    for row in whole.rows:
        _same(ROW, row, rows[row.key], row.key)

    # every figure the run recorded is the registry's (figures.FIGURES), and charted alike
    recorded = {name for row in whole.rows for name in row.figures}
    assert recorded and all(lookup(name) for name in recorded), recorded
    _same_charts(pytester.path / "whole", pytester.path / "merged")


def _same_charts(whole, merged) -> None:
    """The Markdown's chart images (files beside it, linked by title) and the page's charts."""
    svgs = [sorted(p.name for p in folder.glob("report-*.svg")) for folder in (whole, merged)]
    assert svgs[0] and svgs[0] == svgs[1], svgs
    linked = [re.findall(r"^!\[.*\]\(report-.*\.svg\)$", (folder / "report.md").read_text(),
                         re.M) for folder in (whole, merged)]
    assert len(linked[0]) == len(svgs[0]) and linked[0] == linked[1], linked
    drawn = [re.findall(r'class="frank-chart" data-figure="([^"]+)"',
                        (folder / "page.html").read_text()) for folder in (whole, merged)]
    assert drawn[0] and drawn[0] == drawn[1], drawn
