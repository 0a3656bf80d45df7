"""examples/ops and examples/ci name only what pytest-frank provides: the alert rules' metrics are
the ones --frank-prometheus writes, and every --frank-* option the unit and the CI jobs pass is
one the plugin registers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from checkout import ROOT
from pytest_frank import plugin
from pytest_frank.reports import prometheus
from pytest_frank.record.results import Row, Run
from pytest_frank.serve.systemd import parse_unit
from pytest_frank.outcome.verdict import Verdict

pytestmark = pytest.mark.unit

EXAMPLES = ROOT / "examples"


def written_metrics() -> set[str]:
    run = Run(fleet="fleet.yaml", sha256="0" * 64, version="1", started=1.0, duration_s=2.0,
              rows=[Row(key="m::test_perf_ttft[ep]", endpoint="ep", claim="perf",
                        verdict=Verdict.PASS, figures={n: {"value": 1.0} for n in
                                                        prometheus.FIGURES})])
    return {family.name for family in prometheus.registry(run).collect()} | {"frank_info"}


def test_alert_rules_use_written_metrics():
    rules = yaml.safe_load((EXAMPLES / "ops" / "frank-alerts.yml").read_text())
    exprs = [str(r["expr"]) for group in rules["groups"] for r in group["rules"]]
    used = {m for expr in exprs for m in re.findall(r"\bfrank_[a-z_]+", expr)}
    assert used and used <= written_metrics()
    assert any("26 * 3600" in expr for expr in exprs)


def test_options_in_the_examples_are_registered():
    registered = set(re.findall(r'"(--frank-[a-z-]+)"', Path(plugin.__file__).read_text()))
    for path in [*(EXAMPLES / "ops").iterdir(), *(EXAMPLES / "ci").iterdir()]:
        used = set(re.findall(r"--frank-[a-z-]+[a-z]", path.read_text()))
        assert used <= registered, path.name


def test_the_nightly_unit_writes_the_textfile():
    unit = parse_unit((EXAMPLES / "ops" / "frank-nightly.service").read_text(),
                      "frank-nightly.service")
    start = unit.last("Service", "ExecStart")
    assert start is not None and "--frank-prometheus" in start.value
    assert unit.last("Service", "Type").value == "oneshot"
