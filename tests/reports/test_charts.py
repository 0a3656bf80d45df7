"""The charts and the top of the reports, from records built here: the SVG's numbers are the
record's, its bounds drawn, what an endpoint sent stays text in SVG too; the fleet's standing,
the slowest endpoints, failing rows before folded passing ones; the kept history prunes."""

import json
import re
from html import escape as html_escape
import xml.etree.ElementTree as ET

import pytest

from pytest_frank.reports import charts, glance, history, markdown, page
from pytest_frank.reports.charts import Point
from pytest_frank.record.results import EndpointInfo, Row, Run, read_run
from pytest_frank.outcome.verdict import Verdict

pytestmark = pytest.mark.unit

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script>&\"x'"


def marks(svg: str, tag: str = "rect") -> list[dict]:
    """The marks that carry a number, as their attributes (the SVG parsed as XML)."""
    root = ET.fromstring(svg)
    return [dict(e.attrib, title=e.findtext(f"{SVG}title"))
            for e in root.iter(f"{SVG}{tag}") if "data-value" in e.attrib]


def answered(*seconds: float) -> list[dict]:
    return [{"request": f"POST /v1/chat/completions #{i}", "status": 200, "elapsed_s": s}
            for i, s in enumerate(seconds)]


def a_run(started: float = 1.7e9, ttft: float = 0.0123) -> Run:
    return Run(
        fleet="fleet.yaml", sha256="ab", version="1", started=started,
        endpoints={"good": EndpointInfo("good", "vllm"), HOSTILE: EndpointInfo(HOSTILE, "llamacpp"),
                   "unsure": EndpointInfo("unsure", "vllm")},
        rows=[Row("test_health::test_health[good]", "good", "health", "pass",
                  exchanges=answered(1.25, 2.0)),
              Row("test_perf::test_perf_ttft[good]", "good", "perf", "pass",
                  figures={"ttft_s": {"value": ttft, "unit": "s", "max": 0.5}}),
              Row("test_spec_decode::test_spec_decode[good]", "good", "spec_decode", "pass",
                  figures={"acceptance": {"value": 0.7123, "unit": "", "min": 0.5, "max": 0.9}}),
              Row("test_vram::test_vram_model[good]", "good", "vram", "pass",
                  figures={"vram_modelled_mib": {"value": 1000.5, "unit": "MiB"}}),
              Row("test_vram::test_vram_measured[good]", "good", "vram", "pass",
                  figures={"vram_used_mib": {"value": 1100.25, "unit": "MiB", "max": 1200.0}}),
              Row(f"test_health::test_health[{HOSTILE}]", HOSTILE, "health", "pass",
                  exchanges=answered(12.5)),
              Row(f"test_perf::test_perf_ttft[{HOSTILE}]", HOSTILE, "perf", "FAIL",
                  line="too slow", figures={"ttft_s": {"value": 0.9, "unit": "s", "max": 0.5}},
                  exchanges=answered(12.5)),  # the same exchange, shown by two rows: once
              Row("test_reasoning::test_reasoning[unsure]", "unsure", "reasoning",
                  "inconclusive", line="inconclusive: no thinking seen",
                  figures={"thinking_tokens": {"value": 906.0, "unit": "tokens"}},
                  exchanges=answered(0.5))])


def test_a_bar_carries_the_records_number_and_its_bounds():
    svg = charts.bars("ttft_s", "time to first token", "s",
                      [Point("a", 0.0123, high=0.5), Point("b", 0.9, high=0.5)])
    bars = marks(svg)
    assert [(b["data-label"], float(b["data-value"]), float(b["data-high"])) for b in bars] == \
        [("a", 0.0123, 0.5), ("b", 0.9, 0.5)]
    assert bars[0]["fill"] == charts.BAR and bars[1]["fill"] == charts.OVER  # b is over its bound
    assert bars[0]["title"] == "a: 0.0123 s"
    root = ET.fromstring(svg)
    assert int(root.get("width")) > 0 and int(root.get("height")) > 0
    assert len(list(root.iter(f"{SVG}line"))) >= 3  # two bound ticks and the axis
    # a bar is as long as its value on the scale: 0.9 of a 1 s scale
    assert float(bars[1]["width"]) == pytest.approx(0.9 * (charts.WIDTH - charts.LABEL_W - 70), 0.01)


def test_a_band_is_shaded_and_a_value_inside_it_is_not_red():
    svg = charts.bars("acceptance", "acceptance", "", [Point("a", 0.7, 0.5, 0.9)], top=1.0)
    root = ET.fromstring(svg)
    band = next(e for e in root.iter(f"{SVG}rect") if e.get("class") == "band")
    plot = charts.WIDTH - charts.LABEL_W - 70
    assert float(band.get("x")) == pytest.approx(charts.LABEL_W + 0.5 * plot, abs=0.1)
    assert float(band.get("width")) == pytest.approx(0.4 * plot, abs=0.1)
    assert marks(svg)[0]["fill"] == charts.BAR
    assert charts.Point("a", 0.95, 0.5, 0.9).inside() is False


def test_what_an_endpoint_sent_stays_text_in_svg():
    svg = charts.bars("x", HOSTILE, HOSTILE, [Point(HOSTILE, 1.0)])
    svg += charts.trend("t", HOSTILE, "", [HOSTILE, "b"], {HOSTILE: [1.0, 2.0]})
    assert "<script" not in svg
    for one in (svg.split("</svg>")[0] + "</svg>", svg.split("</svg>")[1] + "</svg>"):
        root = ET.fromstring(one)  # well-formed: nothing it carries opened an element
        assert not [e for e in root.iter() if e.tag.endswith("script")]
        assert any(HOSTILE in (e.text or "") for e in root.iter())


def test_a_trend_has_a_point_per_run_and_skips_a_run_without_one():
    svg = charts.trend("trend-tok_s", "decode", "tok/s", ["r1", "r2", "r3"],
                       {"a": [10.5, None, 12.25], "b": [3.0, 4.0, 5.0]})
    points = marks(svg, "circle")
    assert [(p["data-label"], p["data-run"], float(p["data-value"])) for p in points] == [
        ("a", "r1", 10.5), ("a", "r3", 12.25), ("b", "r1", 3.0), ("b", "r2", 4.0), ("b", "r3", 5.0)]
    root = ET.fromstring(svg)
    assert len(list(root.iter(f"{SVG}polyline"))) == 2
    ys = {p["data-value"]: float(p["cy"]) for p in points}
    assert ys["12.25"] < ys["10.5"] < ys["5.0"]  # higher is up


def test_the_charts_numbers_equal_the_json_records(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(a_run().to_json())
    record = json.loads(path.read_text())
    drawn = {c.name: c.svg for c in glance.figure_charts(read_run(path))}
    assert sorted(drawn) == ["acceptance", "memory", "thinking_tokens", "ttft_s"]
    for name in ("ttft_s", "acceptance", "thinking_tokens"):
        want = sorted((r["endpoint"], r["figures"][name]["value"], r["figures"][name].get("max"))
                      for r in record["rows"] if name in r["figures"])
        got = sorted((b["data-label"], float(b["data-value"]),
                      float(b["data-high"]) if "data-high" in b else None)
                     for b in marks(drawn[name]))
        assert got == want, name
    assert sorted(float(b["data-value"]) for b in marks(drawn["memory"])) == [1000.5, 1100.25]


def test_the_load_ladder_is_a_bar_per_level_with_its_floor():
    run = Run(fleet="fleet.yaml", sha256="ab", version="1", endpoints={
        "gpu": EndpointInfo("gpu", "vllm")}, rows=[Row(
            "test_load::test_load[gpu]", "gpu", "load", "FAIL", line="decode collapsed",
            figures={"decode_tps_at_1": {"value": 41.5, "unit": "tok/s", "min": 20.0},
                     "decode_tps_at_2": {"value": 38.0, "unit": "tok/s", "min": 20.0},
                     "decode_tps_at_4": {"value": 12.25, "unit": "tok/s", "min": 20.0},
                     "aggregate_tps_at_4": {"value": 49.0, "unit": "tok/s"}})])
    drawn = {c.name: c.svg for c in glance.figure_charts(run)}
    assert sorted(drawn) == ["load_decode_tps"]
    bars = marks(drawn["load_decode_tps"])
    assert [(b["data-label"], float(b["data-value"]), float(b["data-low"])) for b in bars] == [
        ("gpu 1 in flight", 41.5, 20.0), ("gpu 2 in flight", 38.0, 20.0),
        ("gpu 4 in flight", 12.25, 20.0)]
    assert [b["fill"] for b in bars] == [charts.BAR, charts.BAR, charts.OVER]


def test_the_fleets_standing_and_the_slowest_endpoints():
    run = a_run()
    assert glance.tally(run) == {"failing": [HOSTILE], "inconclusive": ["unsure"],
                                 "passing": ["good"]}
    assert glance.slowest(run, 2) == [(HOSTILE, 12.5), ("good", 3.25)]
    assert [r.verdict.value for r in glance.worst_first(run.rows)][:2] == ["FAIL", "inconclusive"]
    assert glance.headline(run) == "fleet not ok"
    run.rows = [r for r in run.rows if r.endpoint != HOSTILE]
    assert glance.headline(run) == "fleet not known to be ok"
    run.rows = [r for r in run.rows if r.endpoint == "good"]
    assert glance.headline(run) == "fleet ok"
    # A claim this machine cannot show (a CPU server's GPU memory) counts against no one.
    run.rows.append(Row("test_vram::test_vram[good]", "good", "vram", "not applicable",
                        line="not applicable: no nvidia-smi on this machine"))
    assert glance.tally(run)["passing"] == ["good"] and glance.headline(run) == "fleet ok"
    assert "**fleet ok: " in markdown.render(run)
    run.rows[-1].verdict = Verdict.INCONCLUSIVE
    assert glance.headline(run) == "fleet not known to be ok"


def test_the_page_opens_with_the_standing_and_shows_a_failing_row_first():
    html = page.render(a_run())
    order = [html.index(s) for s in ('class="glance"', 'class="slowest"', 'class="matrix"',
                                     'class="charts"', 'class="endpoints"', 'class="row v-FAIL"')]
    assert order == sorted(order)
    assert '<b class="v-FAIL">fleet not ok</b>: 3 endpoint(s): ' in html
    assert '<b class="v-FAIL">1 failing</b>' in html
    # endpoints worst first, each one's rows worst first, what passed folded
    assert html.index('class="row v-FAIL"') < html.index('class="row v-pass"') \
        < html.index('id="frank-endpoint-unsure"') < html.index('class="row v-inconclusive"') \
        < html.index('id="frank-endpoint-good"')
    folded = html.split('<details class="passing">')[-1]
    assert folded.startswith("<summary>5 passing, 0 skipped or not asked</summary>")
    assert "<script>alert" not in html


def test_probe_images_are_thumbnails_beside_the_charts_and_a_bad_one_is_not_markup():
    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
           "RU5ErkJggg==")
    run = a_run()
    run.rows[0].attachments = [{"name": "data_url-red.png", "mime": "image/png", "data": png},
                               {"name": HOSTILE, "mime": "image/png", "data": '" onerror="x'}]
    html = page.render(run)
    strip = html.split('<div class="probes">', 1)[1].split("</div>", 1)[0]
    assert html.index('class="probes"') < html.index('class="endpoints"')
    assert (f'<details class="thumb"><summary><img alt="data_url-red.png" '
            f'src="data:image/png;base64,{png}"></summary></details>') in strip
    assert "good: data_url-red.png (click to open full size)" in strip
    assert "onerror" not in html and "<script>alert" not in html and "not base64" in strip
    # the Markdown: the good one as a file beside it, a thumbnail linking to it; the bad one not
    assert [(p.endpoint, p.file) for p in glance.pictures(run)] == [
        ("good", "probe-1-good-data_url-red-png.png")]
    md = markdown.render(run, [], "report-")
    assert ('<a href="report-probe-1-good-data_url-red-png.png"><img '
            'src="report-probe-1-good-data_url-red-png.png" width="120" border="1" alt="good: '
            'data_url-red.png"></a>') in md
    # a white image stays visible on a white page: each thumbnail has an outline (no border:
    # the thumbnail keeps its 120 px)
    assert "details.thumb img{max-width:120px;max-height:160px;cursor:zoom-in;outline:1px solid" \
        in html
    run.rows[0].endpoint = HOSTILE
    assert f'alt="{html_escape(HOSTILE)}: data_url-red.png"' in markdown.render(run, [], "r-")
    assert re.fullmatch(r"probe-1-[A-Za-z0-9_-]+-data_url-red-png\.png", glance.pictures(run)[0].file)


def test_the_markdown_opens_with_the_standing_and_links_its_charts():
    md = markdown.render(a_run(), [("time to first token", "report-ttft_s.svg")])
    assert md.index("**fleet not ok: 3 endpoint(s): 1 failing, 1 inconclusive, 1 passing**") \
        < md.index("| slowest endpoint | time to verdict |") < md.index("## Verdicts") \
        < md.index("![time to first token](report-ttft_s.svg)")
    assert "| good | 3.25 s |" in md
    assert md.index("**FAIL**") < md.index("<details>") < md.index("**pass**") \
        < md.index("## unsure") < md.index("**inconclusive**") < md.index("## good")


def test_the_history_keeps_the_last_runs_and_prunes_the_oldest(tmp_path):
    (tmp_path / "notes.json").write_text("{}")  # not a record: neither read nor pruned
    for i in range(5):
        pruned = history.save(tmp_path, a_run(started=1.7e9 + 60 * i, ttft=0.01 * (i + 1)), keep=3)
        assert len(pruned) == (1 if i >= 3 else 0)
    kept = history.runs(tmp_path)
    assert [r.started for r in kept] == [1.7e9 + 120, 1.7e9 + 180, 1.7e9 + 240]
    assert (tmp_path / "notes.json").exists() and len(list(tmp_path.iterdir())) == 4
    trend = next(c for c in glance.trends(kept) if c.name == "trend-ttft_s")
    good = [float(p["data-value"]) for p in marks(trend.svg, "circle")
            if p["data-label"] == "good"]
    assert good == [0.03, 0.04, 0.05]
    assert glance.trends(kept[:1]) == []  # one run has no trend


def test_several_rows_of_one_endpoint_are_told_apart_by_test_and_case():
    run = Run(fleet="f", sha256="", version="1", endpoints={"ep": EndpointInfo("ep", "vllm")},
              rows=[Row(f"test_reasoning::{test}", "ep", "reasoning", "pass",
                        figures={"thinking_tokens": {"value": v, "unit": "tokens"}})
                    for test, v in (("test_reasoning[ep]", 3.0),
                                    ("test_reasoning_streamed[ep-plain]", 4.0))])
    chart = next(c for c in glance.figure_charts(run) if c.name == "thinking_tokens")
    assert [(b["data-label"], float(b["data-value"])) for b in marks(chart.svg)] == [
        ("ep reasoning", 3.0), ("ep reasoning_streamed plain", 4.0)]
