"""The report in a real browser (Debian's chromium, headless): a healthy real llama.cpp with a
draft model and a broken emulated endpoint whose answers carry markup. With JavaScript on and
off the page shows the matrix, the measured figures, and the broken endpoint's failure with its
fix and curl, outside any folded block; nothing the model sent runs. The screenshots stay in
artifacts/browser/ for people to look at."""

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from browser import open_page

from emulator import Emulator, chat_json, serve_chat
from test_engine_battery_real import DRAFTING

pytestmark = pytest.mark.real

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "browser"
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
                       "expect": {"reasoning": True}}}}
        done = _battery(where, fleet, "--frank-json=first.json")
        # The second run: the draft endpoint's band now says its acceptance is too high.
        fleet["endpoints"]["draft"]["expect"]["spec_decode"] = {"max_acceptance": 0.9}
        again = _battery(where / "again", fleet, "--frank-baseline=../first.json",
                         "--frank-report=report.md")
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


@pytest.mark.parametrize("scripts", [True, False], ids=["javascript-on", "javascript-off"])
def test_the_page_shows_matrix_figures_and_the_fix_without_a_click(page, scripts):
    name = "javascript-on" if scripts else "javascript-off"
    dom = open_page(page / "report.html", ARTIFACTS / f"report-{name}.png", scripts=scripts)
    shown = Shown(dom.split('id="frank"', 1)[1].split("</section>", 1)[0]).text
    # the matrix: which endpoint passes what
    assert "endpoint health alias chat reasoning spec_decode perf" in shown
    assert "draft pass pass not asked not asked pass pass" in shown
    assert "broken pass pass pass FAIL not asked not asked" in shown
    # the figures of passing checks, inline
    assert "acceptance 0." in shown or "acceptance 1.00" in shown
    assert "time to first token: median" in shown and "decode: median" in shown
    # the broken one: why, how to fix, how to reproduce, what came back
    assert "inside content" in shown and "fix: start vLLM with --reasoning-parser" in shown
    assert "reproduce: curl -sS -X POST http://127.0.0.1:" in shown
    assert 'sent: { "model": "m", "messages": [' in shown and "came back: {" in shown
    # the model's markup stayed text: no element from it, no script ran
    assert "pwned" not in dom.split("<title", 1)[1].split("</title>", 1)[0]
    assert "x" not in Shown(dom).imgs
    assert "&lt;script&gt;document.title" in dom
    if scripts:  # pytest-html's own rows are drawn by its script
        assert dom.count('<tbody class="results-table-row ') >= 8


def test_a_second_run_shows_what_regressed_against_the_first(page):
    """The same fleet with spec_decode's band changed: the page (read with scripts off) and the
    Markdown name the check that passed and now fails."""
    dom = open_page(page / "again" / "report.html", ARTIFACTS / "report-regression.png",
                    scripts=False)
    shown = Shown(dom.split('id="frank"', 1)[1].split("</section>", 1)[0]).text
    assert "Regressions since the baseline" in shown
    assert "test_spec_decode[draft] : passed before, FAIL now: acceptance" in shown
    assert "time to first token" not in shown.split("Regressions since the baseline")[1][:300]
    markdown = (page / "again" / "report.md").read_text()
    assert "## Regressions since the baseline" in markdown
    assert "- `test_spec_decode[draft]`: passed before, FAIL now: acceptance" in markdown
