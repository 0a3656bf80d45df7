"""The report in a real browser (Debian's chromium, headless): a healthy real llama.cpp with a
draft model, a real llama.cpp that sees (its vision row's probe images), and a broken emulated
endpoint whose answers carry markup. With JavaScript on and off the page opens with the fleet's
standing and the matrix, then the figures as SVG charts, then the broken endpoint's failing row
first with its fix and curl, the passing rows folded; nothing the model sent runs. The
screenshots stay in artifacts/browser/ for people to look at."""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from browser import open_page

from emulator import Emulator, chat_json, serve_chat
from llama import DRAFTING
from checkout import ROOT

pytestmark = pytest.mark.real

ARTIFACTS = ROOT / "artifacts" / "browser"
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


class Shown(HTMLParser):
    """The text of a DOM outside folded <details>, <template>, <script> and <style>."""

    HIDDEN = {"details", "template", "script", "style"}

    def __init__(self, dom: str):
        super().__init__()
        self.depth, self.parts, self.imgs, self.opened = 0, [], [], []
        self.feed(dom)
        self.text = " ".join(" ".join(self.parts).split())

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:  # an open <details> shows, and still counts for its end tag
            self.depth += 0 if tag == "details" and "open" in dict(attrs) else 1
            self.opened.append(tag == "details" and "open" in dict(attrs))
        if tag == "img":
            self.imgs.append(dict(attrs).get("src", ""))

    def handle_endtag(self, tag):
        if tag in self.HIDDEN:
            self.depth -= 0 if self.opened.pop() else 1

    def handle_data(self, data):
        if self.depth == 0:
            self.parts.append(data)


@pytest.fixture(scope="module")
def page(llama, tmp_path_factory):
    """One run of the whole battery in its own pytest process, its HTML report's path."""
    server = llama(**DRAFTING)
    seeing = llama(model="selftest:vision", mmproj="selftest", threads=1)
    where = tmp_path_factory.mktemp("report")
    with Emulator("vllm", models=["m"]) as broken:
        serve_chat(broken, lambda body: chat_json(f"<think>Thinking</think>{HOSTILE}"))
        fleet = {"endpoints": {
            # selftest:chatty never ends a turn (it is built to fill a draft's window), so
            # its chat check is off, as in examples/selftest.yaml
            "draft": {"url": server.url, "engine": "llamacpp", "alias": "m", "expect": {
                "chat": False, "spec_decode": {"min_acceptance": 0.5},
                "perf": {"runs": 2, "max_ttft_s": 10}}},
            "broken": {"url": broken.url, "engine": "vllm", "alias": "m",
                       "expect": {"reasoning": True}},
            # the self-test model that sees, as tests/claims/vision/test_vision_real.py launches it
            # (shared)
            # (no alias: it serves its file's path, so its alias check is not asked)
            "eyes": {"url": seeing.url, "engine": "llamacpp",
                     "expect": {"chat": False, "vision": True}}}}
        history = f"--frank-history={where / 'history'}"
        done = _battery(where, fleet, "--frank-json=first.json", history)
        # The second run: the draft endpoint's band now says its acceptance is too high.
        fleet["endpoints"]["draft"]["expect"]["spec_decode"] = {"max_acceptance": 0.9}
        again = _battery(where / "again", fleet, "--frank-baseline=../first.json",
                         "--frank-report=report.md", "--frank-json=again.json", history)
    assert done.returncode == 1, done.stdout[-3000:]  # the broken endpoint fails, and only it
    assert "broken  health ok  alias ok  chat ok  reasoning FAIL" in done.stdout, done.stdout[-3000:]
    assert "draft   health ok  alias ok  spec_decode FAIL" in again.stdout, again.stdout[-3000:]
    return where


def _battery(where: Path, fleet: dict, *args: str) -> subprocess.CompletedProcess:
    """The whole battery in its own pytest process, writing report.html in `where`."""
    where.mkdir(exist_ok=True)
    (where / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    return subprocess.run([sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml",
                           "-p", "no:cacheprovider", "--html=report.html", "--self-contained-html",
                           *args], cwd=where, capture_output=True, text=True, timeout=300)


# What only layout knows, measured with scripts on: each chart's drawn size, and each probe
# image's size as a thumbnail, then opened (its details element, as a click opens it).
SIZES = """[...document.querySelectorAll("#frank svg.frank-chart")].map(s => ["chart",
s.dataset.figure, s.getBoundingClientRect().width, s.getBoundingClientRect().height]).concat(
[...document.querySelectorAll("#frank .probes details.thumb")].map(d => { const img =
d.querySelector("img"); const shut = img.getBoundingClientRect(); d.open = true; const opened =
img.getBoundingClientRect(); return ["thumb", img.alt, shut.width, shut.height, opened.width,
opened.height]; }))"""


def frank(dom: str) -> str:
    return dom.split('id="frank"', 1)[1].split("</section>", 1)[0]


@pytest.mark.parametrize("scripts", [True, False], ids=["javascript-on", "javascript-off"])
def test_the_page_opens_with_the_standing_then_charts_and_the_failing_row_first(page, scripts):
    name = "javascript-on" if scripts else "javascript-off"
    dom = open_page(page / "report.html", ARTIFACTS / f"report-{name}.png", scripts=scripts)
    shown = Shown(frank(dom)).text
    # the first screen: is the fleet ok, which endpoint is not, the slowest, then the matrix (the
    # contract's column judges the replies the claims before it got: the broken one's too)
    assert shown.index("fleet not ok : 3 endpoint(s): 1 failing 0 inconclusive 2 passing "
                       "failing: broken") \
        < shown.index("slowest endpoint time to verdict") \
        < shown.index("endpoint health alias chat reasoning contract spec_decode perf vision") \
        < shown.index("Figures")
    assert "draft pass pass not asked not asked pass pass pass not asked" in shown
    assert "broken pass pass pass FAIL FAIL not asked not asked not asked" in shown
    assert "eyes pass not asked not asked not asked pass not asked not asked pass" in shown
    # the charts, drawn with their numbers: draft's acceptance, every endpoint's TTFT
    charts = re.findall(r'<svg [^>]*data-figure="([^"]+)"', frank(dom))
    assert {"ttft_s", "tok_s", "acceptance"} <= set(charts), charts
    assert "draft acceptance inside its band" in shown and "against max_ttft_s" in shown
    # the failing row comes first, open: why, how to fix, how to reproduce, what came back
    first = re.search(r'<div class="row ([^"]+)" id="([^"]+)"', frank(dom))
    assert first.groups() == ("v-FAIL", "frank-test-reasoning--test-reasoning-broken-")
    assert "inside content" in shown and "fix: start vLLM with --reasoning-parser" in shown
    assert "reproduce: curl -sS -X POST http://127.0.0.1:" in shown
    assert 'sent: { "model": "m", "messages": [' in shown and "came back: {" in shown
    # the passing rows are folded: their notes are in the page, not in the first read
    assert "time to first token: median" in frank(dom) and "time to first token: median" \
        not in shown
    assert re.search(r"<summary>\d+ passing, \d+ skipped or not asked</summary>", frank(dom))
    # the model's markup stayed text: no element from it, no script ran
    assert "pwned" not in dom.split("<title", 1)[1].split("</title>", 1)[0]
    assert "x" not in Shown(dom).imgs
    assert "&lt;script&gt;document.title" in dom
    if scripts:  # pytest-html's own rows are drawn by its script
        assert dom.count('<tbody class="results-table-row ') >= 8


def test_charts_are_drawn_at_size_and_a_thumbnail_opens_full_size(page):
    dom = open_page(page / "report.html", ARTIFACTS / "report-thumbnail-opened.png",
                    measure=SIZES)
    measured = json.loads(dom.split('<pre id="measured">', 1)[1].split("</pre>", 1)[0])
    charts = [m for m in measured if m[0] == "chart"]
    assert len(charts) >= 3 and all(w >= 500 and h >= 40 for _, _, w, h in charts), charts
    thumbs = [m for m in measured if m[0] == "thumb"]
    # beside the charts, though the vision rows passed and are folded: two colours, two forms
    assert len(thumbs) == 4, measured
    for _, alt, w, h, opened_w, opened_h in thumbs:
        assert w <= 120 and h <= 160, (alt, w, h)  # a thumbnail
        assert (opened_w, opened_h) == (448, 448), alt  # opened: the probe image's own size


def svg_marks(html: str, tag: str) -> dict[str, list[tuple[str, float]]]:
    """figure -> (label, number) of each mark of the page's charts, parsed as SVG."""
    found = {}
    for svg in re.findall(r"<svg .*?</svg>", frank(html), re.S):
        root = ET.fromstring(svg)
        found[root.get("data-figure")] = [
            (e.get("data-label"), float(e.get("data-value")))
            for e in root.iter(f"{{http://www.w3.org/2000/svg}}{tag}") if e.get("data-value")]
    return found


def figures_of(record: dict, name: str) -> list[tuple[str, float]]:
    return [(r["endpoint"], r["figures"][name]["value"]) for r in record["rows"]
            if name in r["figures"]]


def test_the_charts_numbers_equal_the_json_records(page):
    first = json.loads((page / "first.json").read_text())
    again = json.loads((page / "again" / "again.json").read_text())
    bars = svg_marks((page / "report.html").read_text(), "rect")
    for name in ("ttft_s", "tok_s", "acceptance"):
        assert sorted(bars[name]) == sorted(figures_of(first, name)), name
    # the second page draws each figure's trend over both kept runs, oldest first
    trend = svg_marks((page / "again" / "report.html").read_text(), "circle")
    for name in ("ttft_s", "tok_s", "acceptance"):
        assert sorted(trend[f"trend-{name}"]) == sorted(figures_of(first, name)
                                                          + figures_of(again, name)), name
    assert len(list((page / "history").glob("frank-run-*.json"))) == 2
    # the Markdown shows the same charts, as .svg files beside it
    markdown = (page / "again" / "report.md").read_text()
    for name in ("ttft_s", "acceptance", "trend-tok_s"):
        assert f"(report-{name}.svg)" in markdown
        drawn = ET.parse(page / "again" / f"report-{name}.svg").getroot()
        assert drawn.get("data-figure") == name
    # and the probe images as files beside it, each a thumbnail linking to itself
    pngs = sorted(p.name for p in (page / "again").glob("report-probe-*.png"))
    assert len(pngs) == 4 and all(f'<a href="{p}"><img src="{p}" width="120"' in markdown
                                  for p in pngs), pngs


def test_a_second_run_shows_what_regressed_against_the_first(page):
    """The same fleet with spec_decode's band changed: the page (read with scripts off) and the
    Markdown name the check that passed and now fails."""
    dom = open_page(page / "again" / "report.html", ARTIFACTS / "report-regression.png",
                    scripts=False)
    shown = Shown(frank(dom)).text
    assert "Regressions since the baseline" in shown
    assert "test_spec_decode[draft] : passed before, FAIL now: acceptance" in shown
    assert "time to first token" not in shown.split("Regressions since the baseline")[1][:300]
    markdown = (page / "again" / "report.md").read_text()
    assert "## Regressions since the baseline" in markdown
    assert "- `test_spec_decode[draft]`: passed before, FAIL now: acceptance" in markdown
