"""Debian's chromium, headless: a page's DOM after its scripts ran, and a screenshot, with
JavaScript on or off. "Off" serves a copy whose Content-Security-Policy forbids every script,
as a wiki that strips scripts would show it (chromium's own switch to turn scripts off also
stops its headless screenshots)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NO_SCRIPTS = '<meta http-equiv="Content-Security-Policy" content="script-src \'none\'">'


MEASURE = """<script>window.addEventListener("load", () => { const out = document.createElement(
"pre"); out.id = "measured"; out.textContent = JSON.stringify(EXPR);
document.body.appendChild(out); });</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") == "true":  # .ci/run installs it: missing there is a broken CI
        pytest.fail("chromium is not installed (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


def open_page(page: Path, screenshot: Path, scripts: bool = True, measure: str = "") -> str:
    """The DOM of `page` once loaded (and its scripts run), with a screenshot saved. `measure`
    (JavaScript, with scripts on): an expression whose value, as JSON, the DOM then carries in
    `<pre id="measured">`, for what only layout knows (a chart's drawn size)."""
    if not scripts:
        text = page.read_text(encoding="utf-8")
        page = page.with_name(page.stem + ".noscript.html")
        page.write_text(text.replace("<head>", "<head>" + NO_SCRIPTS, 1), encoding="utf-8")
    elif measure:
        text = page.read_text(encoding="utf-8")
        page = page.with_name(page.stem + ".measured.html")
        page.write_text(text.replace("</body>", MEASURE.replace("EXPR", measure) + "</body>", 1),
                        encoding="utf-8")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    # The virtual time budget lets the page's own scripts finish drawing before the dump.
    dom = _run(["--virtual-time-budget=10000", "--dump-dom", page.as_uri()]).stdout
    _run(["--virtual-time-budget=10000", f"--screenshot={screenshot}", "--window-size=1400,2000",
          page.as_uri()])
    assert screenshot.exists(), f"chromium wrote no screenshot of {page}"
    return dom


def _run(args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                               "--hide-scrollbars", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done
