"""The fleet's verdict as static HTML: the block at the top of the pytest-html page, readable
with JavaScript off (many wikis strip scripts). Everything an endpoint sent is escaped text."""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from pytest_frank.base import redact
from pytest_frank.base.figures import number
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import LAUNCH_LOG, EndpointInfo, Row, Run
from pytest_frank.reports import glance
from pytest_frank.reports.glance import Chart

IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")
BASE64 = re.compile(r"[A-Za-z0-9+/=]*")
LONG = 20 * redact.MAX_MESSAGE  # a context table or a launch log may be long; not unbounded
STYLE = """
.frank,.frank td,.frank th,.frank pre{color:#222}
.frank table{border-collapse:collapse;margin:.5em 0}
.frank th,.frank td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.frank pre{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:4px;margin:2px 0}
.frank .v-pass{background:#dff0d8}.frank .v-FAIL,.frank .v-error{background:#f2dede}
.frank .v-blocked,.frank .v-inconclusive,.frank .v-interrupted{background:#fcf8e3}
.frank .v-skipped,.frank .v-not-asked,.frank .v-not-applicable{color:#777}
.frank .row{border-left:4px solid #ccc;padding:2px 8px;margin:6px 0}
.frank .row.v-pass{border-color:#3c763d}.frank .row.v-FAIL,.frank .row.v-error{border-color:#a94442}
.frank .fix{font-weight:bold}
.frank .glance{font-size:1.2em;margin:.3em 0}.frank .glance b{padding:1px 6px}
.frank .charts{display:flex;flex-wrap:wrap;gap:8px}.frank .frank-chart{border:1px solid #ddd}
.frank .probes{display:flex;flex-wrap:wrap;gap:8px}.frank .probes figure{margin:0}
.frank details.thumb{display:inline-block}.frank details.thumb summary{list-style:none}
.frank details.thumb img{max-width:120px;max-height:160px;cursor:zoom-in;outline:1px solid #999}
.frank details.thumb[open] img{max-width:none;max-height:none;cursor:zoom-out}
"""


def render(run: Run, charts: list[Chart] | None = None) -> str:
    """The block: the fleet's standing, what regressed, the slowest endpoints and the matrix in
    the first screen; then the charts, the endpoints, and each endpoint's rows, worst first."""
    charts = glance.figure_charts(run) if charts is None else charts
    if run.error:  # no fleet was run: no table to show
        return f'<section class="frank" id="frank"><style>{STYLE}</style>{_header(run)}</section>'
    parts = [f'<section class="frank" id="frank"><style>{STYLE}</style>',
             _header(run), _glance(run), _regressions(run), _slowest(run), _matrix(run),
             _charts(charts), _probe_images(run), _endpoints(run)]
    parts += [_endpoint(run, info) for info in glance.endpoints_worst_first(run)]
    return "\n".join(p for p in parts if p) + "</section>"


def row_html(row: Row) -> str:
    """One test as the page shows it: verdict line, figures, fix, curl, evidence folded."""
    parts = [f'<div class="row {_cls(row.verdict)}" id="{escape(row.anchor)}">',
             f"<b>{escape(row.verdict)}</b> <code>{_t(row.test)}</code>"]
    if row.line:
        parts.append(f"<pre>{_t(row.line)}</pre>")
    if row.figures:
        parts.append(f'<p class="figures">figures: {_t(row.figures_line())}</p>')
    if row.notes:
        parts.append("<ul>" + "".join(f"<li>{_t(n)}</li>" for n in row.notes) + "</ul>")
    for a in row.attachments:
        if a.get("name") != LAUNCH_LOG:  # shown once, at the end of the endpoint's section
            parts.append(_attachment(a))
    if row.fix:
        parts.append(f'<p class="fix">fix: {_t(row.fix)}</p>')
    if row.curl and row.verdict in (Verdict.FAIL, Verdict.ERROR):
        parts.append(f"<p>reproduce:</p><pre>{_t(row.curl)}</pre>")
    if row.exchanges:
        # A failure's exchanges are open: what was sent and what came back, without a click.
        opened = " open" if row.verdict in (Verdict.FAIL, Verdict.ERROR) else ""
        parts.append(f"<details{opened}><summary>evidence: {len(row.exchanges)} exchange(s)</summary>"
                     + "".join(_exchange(ex) for ex in row.exchanges) + "</details>")
    return "".join(parts) + "</div>"


def _header(run: Run) -> str:
    counts = ", ".join(f"{n} {v}" for v, n in run.counts().items()) or "no checks ran"
    return (f"<h2>pytest-frank verdicts</h2><p>fleet file <code>{_t(run.fleet)}</code> "
            f"(sha256 <code>{escape(run.sha256)}</code>), pytest-frank {escape(run.version)}: "
            f"{escape(counts)}</p>"
            + "".join(f'<p class="shared">{_t(line)}</p>' for line in glance.shared(run))
            + "".join(f'<p class="run">{_t(line)}</p>' for line in glance.run_lines(run)[
                bool(run.error):])
            + (f'<p class="run"><b>usage error (exit 4): the run stopped before any check</b></p>'
               f"<pre>{_t(run.error, 20 * redact.MAX_MESSAGE)}</pre>" if run.error else ""))


def _glance(run: Run) -> str:
    """Endpoints passing, failing, inconclusive: the failing ones named, linked to their rows."""
    groups = glance.tally(run)
    cls = {"failing": "v-FAIL", "inconclusive": "v-inconclusive", "passing": "v-pass"}
    said = " ".join(f'<b class="{cls[g]}">{len(names)} {g}</b>' for g, names in groups.items())
    named = "".join(f'<li>{escape(g)}: {", ".join(_link(n) for n in groups[g])}</li>'
                    for g in ("failing", "inconclusive") if groups[g])
    word = glance.headline(run)
    mood = "v-pass" if word == "fleet ok" else "v-FAIL" if word == "fleet not ok" else \
        "v-inconclusive"
    return (f'<p class="glance"><b class="{mood}">{escape(word)}</b>: {len(run.endpoints)} '
            f"endpoint(s): {said}</p>"
            + (f"<ul>{named}</ul>" if named else ""))


def _slowest(run: Run) -> str:
    slow = glance.slowest(run)
    if not slow:
        return ""
    rows = "".join(f"<tr><td>{_link(n)}</td><td>{escape(number(s))} s</td></tr>" for n, s in slow)
    return (f'<table class="slowest"><tr><th>slowest endpoint</th><th>time to verdict</th></tr>'
            f"{rows}</table>")


def _charts(charts: list[Chart]) -> str:
    if not charts:
        return ""
    return '<h2>Figures</h2><div class="charts">' + "".join(c.svg for c in charts) + "</div>"


def _probe_images(run: Run) -> str:
    """The images the probes sent (the vision rows'), as thumbnails beside the charts: a passing
    row is folded, its pictures should not be."""
    shown = [f"{_attachment(a, f'{row.endpoint}: ')}" for row in run.rows for a in row.attachments
             if str(a.get("mime", "")) in IMAGES]
    if not shown:
        return ""
    return '<h3>Probe images</h3><div class="probes">' + "".join(shown) + "</div>"


def _link(name: str) -> str:
    return f'<a href="#{escape(_section(name))}">{_t(name)}</a>'


def _section(name: str) -> str:
    return "frank-endpoint-" + "".join(c if c.isalnum() else "-" for c in name)


def _endpoints(run: Run) -> str:
    head = ("<tr><th>endpoint</th><th>engine</th><th>build</th><th>serves</th><th>url</th>"
            "<th>cost</th><th>description</th></tr>")
    rows = "".join(
        f"<tr><td>{_t(i.name)}</td><td>{_t(i.engine)}</td><td>{_t(i.build or '-')}</td>"
        f"<td>{_t(', '.join(i.models) or '-')}</td><td><code>{_t(i.url or '-')}</code></td>"
        f"<td>{_t(i.cost())}</td><td>{_t(i.description)}</td></tr>"
        for i in run.endpoints.values())
    return f'<h2>Endpoints</h2><table class="endpoints">{head}{rows}</table>'


def _matrix(run: Run) -> str:
    claims, cells = run.claims(), run.matrix()
    head = "<tr><th>endpoint</th>" + "".join(f"<th>{_t(c)}</th>" for c in claims) + "</tr>"
    body = []
    for name, verdicts in cells.items():
        tds = []
        for claim in claims:
            verdict = verdicts.get(claim, Verdict.NOT_ASKED)
            first = _first_row(run, name, claim, verdict)
            text = escape(verdict)
            if first is not None:
                text = f'<a href="#{escape(first.anchor)}">{text}</a>'
            tds.append(f'<td class="{_cls(verdict)}">{text}</td>')
        body.append(f"<tr><th>{_t(name)}</th>{''.join(tds)}</tr>")
    return f'<table class="matrix">{head}{"".join(body)}</table>'


def _first_row(run: Run, endpoint: str, claim: str, verdict: Verdict) -> Row | None:
    rows = [r for r in run.rows if r.endpoint == endpoint and r.claim == claim]
    return next((r for r in rows if r.verdict == verdict), rows[0] if rows else None)


def _regressions(run: Run) -> str:
    found = ""
    for title, cls, entries in (("Regressions since the baseline", "regressions", run.regressions),
                                ("Noise since the baseline", "noise", run.noise)):
        if entries:
            items = "".join(f"<li><code>{_t(r['test'])}</code>: {_t(r['what'])}</li>"
                            for r in entries)
            found += f'<h2 class="{cls}">{title}</h2><ul>{items}</ul>'
    return found


def _endpoint(run: Run, info: EndpointInfo) -> str:
    """Its rows that need reading first, open; those that passed (or were not asked) folded."""
    rows = glance.worst_first(run.rows_of(info.name))
    open_ = [r for r in rows if r.verdict not in glance.FOLDED]
    folded = [r for r in rows if r.verdict in glance.FOLDED]
    parts = [f'<h2 id="{escape(_section(info.name))}">{_t(info.name)}</h2>']
    parts += [row_html(r) for r in open_]
    if folded:
        passed = sum(r.verdict is Verdict.PASS for r in folded)
        parts.append(f'<details class="passing"><summary>{passed} passing, '
                     f"{len(folded) - passed} skipped or not asked</summary>"
                     + "".join(row_html(r) for r in folded) + "</details>")
    if info.launch_log:
        parts.append(f"<details><summary>{LAUNCH_LOG} (launched server)</summary>"
                     f"<pre>{_t(info.launch_log, LONG)}</pre></details>")
    return "".join(parts)


def _attachment(a: dict[str, Any], whose: str = "") -> str:
    name = _t(a.get("name", ""))
    mime = str(a.get("mime", ""))
    if mime in IMAGES:
        # Inline, not a link: a data: link opens blank in Chromium, an inline image shows.
        data = str(a.get("data", ""))
        if not BASE64.fullmatch(data):
            return f"<p>{name}: not base64, not shown</p>"
        # A thumbnail that opens full size in place: a details element, no script.
        return (f'<figure><details class="thumb"><summary><img alt="{name}" '
                f'src="data:{mime};base64,{data}"></summary></details><figcaption>{_t(whose)}'
                f"{name} (click to open full size)</figcaption></figure>")
    return f"<p>{name}:</p><pre>{_t(str(a.get('data', '')), LONG)}</pre>"


def _exchange(ex: dict[str, Any]) -> str:
    status = ex.get("status") if ex.get("status") is not None else ex.get("error") or "no answer"
    parts = [f"<p><code>{_t(str(ex.get('request', '')))}</code> &rarr; {_t(str(status))} "
             f"({_t(str(ex.get('elapsed_s', '')))}s)</p>"]
    if ex.get("sent") is not None:
        parts.append(f"<p>sent:</p><pre>{_t(json.dumps(ex['sent'], indent=1))}</pre>")
    if ex.get("body"):
        parts.append(f"<p>came back:</p><pre>{_t(str(ex['body']))}</pre>")
    return "".join(parts)


def _cls(verdict: str) -> str:
    return "v-" + verdict.replace(" ", "-")


def _t(text: str, limit: int = redact.MAX_MESSAGE) -> str:
    return escape(redact.inert(str(text), limit))
