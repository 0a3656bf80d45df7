"""The figure registry (pytest_frank/base/figures.py) is the one place a figure is declared: every
figure the package records is in it, and what reads figures (the baseline, the charts, the
Prometheus metrics, the fleet schema's `regression` block) follows it."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest

from checkout import ROOT as CHECKOUT  # docs/ is not installed with the package
import pytest_frank
from pytest_frank.base import figures
from pytest_frank.reports import glance, prometheus
from pytest_frank.reports.baseline import Tolerances, compare
from pytest_frank.claims import fingerprint
from pytest_frank.base.figures import FIGURES, TOLERANCES, lookup
from pytest_frank.record.results import Row, Run
from pytest_frank.outcome.verdict import Verdict

pytestmark = pytest.mark.unit

PACKAGE = Path(pytest_frank.__file__).parent
ROOT = PACKAGE.parent


def _recorded() -> list[tuple[str, int, ast.expr]]:
    """(file, line, name expression) of every figure the package records: `ctx.figure(NAME, ...)`
    and a failure's `figures={NAME: ...}`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            where = (str(path.relative_to(ROOT)), node.lineno)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "figure" and node.args:
                found.append((*where, node.args[0]))
            for kw in node.keywords:
                if kw.arg == "figures" and isinstance(kw.value, ast.Dict):
                    found += [(*where, key) for key in kw.value.keys if key is not None]
    return found


def test_every_figure_a_run_records_is_in_the_registry():
    """A name written out is an entry of FIGURES; one built (the load ladder's `_at_N`) is built
    from an entry (`FIGURES[...].at(level)`, which a missing entry fails at once)."""
    recorded = _recorded()
    assert len(recorded) >= 10, recorded  # the scan sees the claims' figures
    astray = []
    for path, line, name in recorded:
        if isinstance(name, ast.Constant):
            if lookup(str(name.value)) is None:
                astray.append(f"{path}:{line}: {name.value!r}")
        elif not (isinstance(name, ast.Call) and isinstance(name.func, ast.Attribute)
                  and name.func.attr == "at"):
            astray.append(f"{path}:{line}: {ast.unparse(name)} (not an entry's name)")
    assert not astray, "figures not in pytest_frank/base/figures.py FIGURES: " + "; ".join(astray)


def test_a_levelled_name_is_its_entry_and_level():
    assert lookup("decode_tps_at_4") == (FIGURES["decode_tps"], 4)
    assert FIGURES["ttft_p90_s"].at(8) == "ttft_p90_s_at_8"
    assert lookup("ttft_s") == (FIGURES["ttft_s"], None)
    for name in ("decode_tps", "ttft_s_at_4", "decode_tps_at_x", "my_own_figure"):
        assert lookup(name) is None, name


def test_each_entry_names_a_known_tolerance_a_unique_series_and_chart():
    for f in FIGURES.values():
        assert f.tolerance is None or f.tolerance in TOLERANCES, f
        assert f.metric is None or f.metric.startswith("frank_"), f
        assert f.label and (f.metric is None or f.about), f
    metrics = [f.metric for f in FIGURES.values() if f.metric]
    assert len(metrics) == len(set(metrics))
    shared = {}
    for f in FIGURES.values():
        if f.chart is not None:  # a chart two figures share tells their bars apart by a word
            assert f.chart.word or f.chart.name not in shared, f
            shared[f.chart.name] = f


def test_the_schemas_regression_block_is_the_registrys():
    """fleet.schema.json's `$defs.regression` is written from TOLERANCES by `python docs/gen.py`;
    the endpoint's `regression` key says each key's default as the registry does."""
    spec = importlib.util.spec_from_file_location("docs_gen", CHECKOUT / "docs" / "gen.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (PACKAGE / "fleet" / "fleet.schema.json").read_text()
    assert gen.schema_text(gen.with_regression(json.loads(text))) == text, \
        "run `python docs/gen.py`: fleet.schema.json's regression keys are stale"
    said = json.loads(text)["$defs"]["endpoint"]["properties"]["regression"]["description"]
    for key, t in TOLERANCES.items():
        default = re.search(rf"`{key}` \([^()]*?default ([0-9.]+)", said)
        assert default and float(default[1]) == t.default, (key, said)


def test_the_tolerances_default_to_the_registry():
    tol = Tolerances()
    assert {key: getattr(tol, key) for key in TOLERANCES} == \
        {key: t.default for key, t in TOLERANCES.items()}
    assert (fingerprint.AGREEMENT, fingerprint.DRIFT) == (tol.fingerprint_agreement,
                                                          tol.logprob_drift)
    assert Tolerances.from_fleet({"tok_s_drop": 0.5}).tok_s_drop == 0.5
    with pytest.raises(TypeError, match="no regression tolerance tok_s_fall"):
        Tolerances(tok_s_fall=0.5)


def _run(**values: float) -> Run:
    return Run(fleet="f", sha256="", version="", rows=[Row(
        key="m::test_x[ep]", endpoint="ep", claim="perf", verdict=Verdict.PASS,
        figures={n: {"value": v, "unit": lookup(n)[0].unit} for n, v in values.items()})])


def test_every_compared_figure_regresses_by_its_tolerance_and_direction():
    """Each entry with a tolerance, moved the wrong way past its default, is a regression named
    by its label; moved the right way, none."""
    for f in FIGURES.values():
        if f.tolerance is None:
            continue
        name = f.at(4) if f.levelled else f.name
        step = 1 + 2 * TOLERANCES[f.tolerance].default  # past a relative or an absolute band
        worse, better = (0.5 / step, 0.5 * step) if f.higher_better else (0.5 * step, 0.5 / step)
        if TOLERANCES[f.tolerance].absolute:
            worse, better = (0.5 - step / 3, 0.5) if f.higher_better else (0.5 + step / 3, 0.5)
        found = compare(_run(**{name: 0.5}), _run(**{name: worse}), {"ep": Tolerances()})
        assert [r["what"].split(" ")[0] for r in found] == [f.label.split(" ")[0]], (f, found)
        assert (" at 4 in flight" in found[0]["what"]) is f.levelled
        assert compare(_run(**{name: 0.5}), _run(**{name: better}), {"ep": Tolerances()}) == []


def test_the_charts_and_series_follow_the_registry():
    """A figure with a chart is drawn, one with a trend is trended, one with a series is
    exported at its factor: read from the entry, not from lists of their own."""
    values = {f.at(2) if f.levelled else f.name: 1.0 for f in FIGURES.values()}
    run = _run(**values)
    drawn = {c.name for c in glance.figure_charts(run)}
    assert drawn == {f.chart.name for f in FIGURES.values() if f.chart}
    trended = {c.name for c in glance.trends([run, run])}
    assert trended == {f"trend-{f.name}" for f in FIGURES.values() if f.trend}
    exported = {m.name: m for m in prometheus.registry(run).collect()}
    for f in FIGURES.values():
        if f.metric:
            (sample,) = exported[f.metric].samples
            assert sample.value == f.factor, f
            assert ("in_flight" in sample.labels) is f.levelled
            assert f.levelled or prometheus.FIGURES[f.name] == (f.metric, f.about, f.factor)
    assert figures.number(2190.4) == "2190"
