"""The fleet's verdict as Markdown (`--frank-report PATH.md`), for wikis that take Markdown: the
matrix as a table, each endpoint's figures, failures with their fix and curl in code blocks.
What an endpoint sent is text: Markdown and HTML in it are escaped, code blocks fenced past it."""

from __future__ import annotations

import json
import re
from html import escape

from pytest_frank.base import redact
from pytest_frank.base.figures import number
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import LAUNCH_LOG, EndpointInfo, Row, Run
from pytest_frank.reports import glance

_SPECIAL = re.compile(r"([\\`*_{}\[\]#+!|~])")  # mid-line, "-" and "." start nothing


def render(run: Run, images: list[tuple[str, str]] | None = None, prefix: str = "") -> str:
    """The page; `images` are the charts as (title, file beside the page) to show as images;
    with a `prefix`, the probes' images are files beside the page too, named `prefix` + their
    glance.Picture file."""
    lines = [f"# pytest-frank verdicts: {_md(run.fleet)}", "",
             f"fleet file `{_code(run.fleet)}` (sha256 `{run.sha256}`), pytest-frank "
             f"{_md(run.version)}: " + (", ".join(f"{n} {v}" for v, n in run.counts().items())
                                          or "no checks ran"), "",
             *(said for line in glance.shared(run) for said in (_md(line), "")),
             *(said for line in glance.run_lines(run)[bool(run.error):] for said in (_md(line), "")),
             *_error(run)]
    if run.error:
        return "\n".join(lines) + "\n"  # no fleet was run: no table to show
    lines += _glance(run)
    if run.regressions:
        lines += ["", "## Regressions since the baseline", ""]
        lines += [f"- `{_code(r['test'])}`: {_md(r['what'])}" for r in run.regressions]
    if run.noise:
        lines += ["", "## Noise since the baseline", ""]
        lines += [f"- `{_code(r['test'])}`: {_md(r['what'])}" for r in run.noise]
    slow = glance.slowest(run)
    if slow:
        lines += ["", *_table(["slowest endpoint", "time to verdict"],
                              [[n, f"{number(s)} s"] for n, s in slow])]
    claims = run.claims()
    lines += ["", "## Verdicts", ""]
    lines += _table(["endpoint", *claims], [[name, *(cells.get(c, Verdict.NOT_ASKED) for c in claims)]
                                            for name, cells in run.matrix().items()])
    if images:
        lines += ["", "## Figures", "", *(f"![{_md(title)}]({file})" for title, file in images)]
    if prefix and glance.pictures(run):
        # A thumbnail that opens full size: an image inside its own link (wikis allow both).
        lines += ["", "Probe images (click to open full size):", "", " ".join(
            f'<a href="{prefix}{p.file}"><img src="{prefix}{p.file}" width="120" border="1" '
            f'alt="{_attr(f"{p.endpoint}: {p.name}")}"></a>' for p in glance.pictures(run))]
    lines += ["", "## Endpoints", ""]
    lines += _table(["endpoint", "engine", "build", "serves", "url", "cost", "description"],
                    [[i.name, i.engine, i.build or "-", ", ".join(i.models) or "-", i.url or "-",
                      i.cost(), i.description] for i in run.endpoints.values()])
    for info in glance.endpoints_worst_first(run):
        lines += ["", *_endpoint(run, info)]
    return "\n".join(lines) + "\n"


def _error(run: Run) -> list[str]:
    """The usage error that stopped the run, whole, as pytest printed it."""
    if not run.error:
        return []
    return ["**usage error (exit 4): the run stopped before any check**", "",
            *_block(run.error), ""]


def _glance(run: Run) -> list[str]:
    """Is the fleet ok: endpoints passing, failing, inconclusive, the ones not passing named."""
    groups = glance.tally(run)
    lines = [f"**{glance.headline(run)}: {len(run.endpoints)} endpoint(s): "
             + ", ".join(f"{len(names)} {g}" for g, names in groups.items()) + "**"]
    named = [f"- {g}: " + ", ".join(_md(n) for n in groups[g])
             for g in ("failing", "inconclusive") if groups[g]]
    return lines + ([""] + named if named else [])


def _log_tail(log: str, limit: int = 4000) -> str:
    """The log's last `limit` characters from a whole line, its first line kept where it says
    the log is shared (the note belongs in every report)."""
    if len(log) <= limit:
        return log
    first, _, rest = log.partition("\n")
    note = f"{first}\n" if first.startswith("[one llama.cpp log per process") else ""
    tail = rest[-limit:] if note else log[-limit:]
    return f"{note}[...]\n{tail.partition(chr(10))[2]}"


def _endpoint(run: Run, info: EndpointInfo) -> list[str]:
    """Its rows that need reading first; those that passed (or were not asked) folded."""
    lines = [f"## {_md(info.name)}", ""]
    rows = glance.worst_first(run.rows_of(info.name))
    for row in (r for r in rows if r.verdict not in glance.FOLDED):
        lines += _row(row)
    folded = [r for r in rows if r.verdict in glance.FOLDED]
    if folded:
        passed = sum(r.verdict is Verdict.PASS for r in folded)
        lines += ["<details><summary>"
                  f"{passed} passing, {len(folded) - passed} skipped or not asked</summary>", ""]
        for row in folded:
            lines += _row(row)
        lines += ["", "</details>"]
    if info.launch_log:
        lines += ["", f"{LAUNCH_LOG} (launched server, its tail):", "",
                  *_block(_log_tail(info.launch_log)), ""]
    return lines


def _row(row: Row) -> list[str]:
    head = f"- **{row.verdict}** `{_code(row.test)}`"
    tables = [_table_text(a) for a in row.attachments if a.get("mime") == "text/markdown"]
    if row.figures:
        head += f" ({_md(row.figures_line())})"
    if row.verdict not in (Verdict.FAIL, Verdict.ERROR):
        detail = [row.line] if row.line else []
        return [head + "".join(f"; {_md(x)}" for x in detail + row.notes),
                *(line for t in tables for line in ["", *t, ""])]
    lines = [head, "", *_block(row.line)]
    if row.fix:
        lines += ["", f"  fix: {_md(row.fix)}"]
    lines += [f"  - {_md(n)}" for n in row.notes]
    if row.curl:
        lines += ["", "  reproduce:", "", *_block(row.curl, "sh")]
    for ex in row.exchanges[-2:]:  # the failing request and the one before it
        lines += ["", f"  {_md(str(ex.get('request', '')))} -> "
                  f"{_md(str(ex.get('status') or ex.get('error') or 'no answer'))}"]
        if ex.get("sent") is not None:
            lines += ["", "  sent:", "", *_block(json.dumps(ex["sent"], indent=1), "json")]
        if ex.get("body"):
            lines += ["", "  came back:", "", *_block(str(ex["body"]))]
    for t in tables:
        lines += ["", *t]
    return lines + [""]


def _table_text(a: dict) -> list[str]:
    """A check's own Markdown table (the context math): kept a table, its cells still inert."""
    text = redact.inert(str(a.get("data", "")), 20 * redact.MAX_MESSAGE)
    return ["  " + line.replace("<", "&lt;").replace(">", "&gt;") for line in text.splitlines()
            if line.startswith("|")]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(_md(str(c)) for c in row) + " |" for row in rows]


def _block(text: str, lang: str = "") -> list[str]:
    """A fenced block no line of `text` can close: the fence is longer than any run of backticks
    in it, and the lines are indented under the list item."""
    text = redact.inert(text, 20 * redact.MAX_MESSAGE)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"  {fence}{lang}", *(f"  {line}" for line in text.splitlines()), f"  {fence}"]


def _md(text: str) -> str:
    """Inline text: no Markdown, no HTML, one line."""
    text = redact.inert(str(text)).replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", text)


def _attr(text: str) -> str:
    """An HTML attribute's value: quotes and markup escaped, one line."""
    return escape(redact.inert(str(text)).replace("\n", " "))


def _code(text: str) -> str:
    return redact.inert(str(text)).replace("`", "'").replace("\n", " ")
