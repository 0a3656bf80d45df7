"""What the top of a report answers first, "is the fleet ok?": each endpoint's standing, the
slowest endpoints, and the figures as charts (this run's against their bounds, and each figure's
trend over the kept history). The HTML page and the Markdown both read it, from the record."""

from __future__ import annotations

import base64
import json
import re
import time
from dataclasses import dataclass

from pytest_frank.base import hosts
from pytest_frank.base.figures import FIGURES, Bars, Figure, lookup
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import RANK, EndpointInfo, Row, Run
from pytest_frank.reports import charts
from pytest_frank.reports.charts import Point

FAILING = (Verdict.FAIL, Verdict.ERROR, Verdict.BLOCKED)
INCONCLUSIVE = (Verdict.INCONCLUSIVE, Verdict.INTERRUPTED)
# a row that needs no reading
FOLDED = (Verdict.PASS, Verdict.SKIPPED, Verdict.NOT_ASKED, Verdict.NOT_APPLICABLE)


@dataclass(frozen=True)
class Chart:
    name: str  # the file name's part: ttft_s, trend-tok_s, ...
    title: str
    svg: str


def standing(run: Run) -> dict[str, Verdict]:
    """Each endpoint's worst verdict over its rows (an endpoint with no row ran nothing)."""
    worst: dict[str, Verdict] = {}
    for row in run.rows:
        if RANK[row.verdict] >= RANK[worst.get(row.endpoint, Verdict.NOT_ASKED)]:
            worst[row.endpoint] = row.verdict
    return worst


def tally(run: Run) -> dict[str, list[str]]:
    """Endpoints by their standing: passing, failing (or blocked), inconclusive."""
    found: dict[str, list[str]] = {"failing": [], "inconclusive": [], "passing": []}
    for name, verdict in standing(run).items():
        group = ("failing" if verdict in FAILING else
                 "inconclusive" if verdict in INCONCLUSIVE else "passing")
        found[group].append(name)
    return found


def headline(run: Run) -> str:
    """The answer in words: fleet ok, not ok (something fails), or not known (inconclusive)."""
    groups = tally(run)
    if groups["failing"]:
        return "fleet not ok"
    return "fleet not known to be ok" if groups["inconclusive"] or not groups["passing"] \
        else "fleet ok"


def run_lines(run: Run) -> list[str]:
    """What the run as a whole says, in every report: the usage error that stopped it, its
    notes (the offline gate with nothing to check), what its baseline comparison had to go on
    (said with 0 regressions too: the line shows the baseline was read)."""
    lines = []
    if run.error:
        lines.append("usage error (exit 4), no check ran: "
                     + " ".join(part.strip() for part in run.error.splitlines() if part.strip()))
    lines += run.notes
    base = run.baseline
    if base:
        when = (time.strftime("the run of %Y-%m-%d %H:%M UTC", time.gmtime(base["started"]))
                if base.get("started") else "a run of unknown date")
        noise = f", {base['noise']} change(s) within noise" if base.get("noise") else ""
        lines.append(f"baseline {base['file']} ({when}): {base['tests']} test(s) and "
                     f"{base['figures']} figure(s) compared, {base['regressions']} "
                     f"regression(s){noise}")
    return lines


def shared(run: Run) -> list[str]:
    """A line for each server that several of the fleet's entries reach (its routes, a
    replica's name): their figures come from one server, measured one at a time."""
    urls = {info.name: info.url for info in run.endpoints.values()}
    return [hosts.shared_line(server, names)
            for server, names in hosts.shared_servers(urls).items()]


def time_to_verdict(run: Run, endpoint: str) -> float | None:
    """How long an endpoint kept the run waiting for its verdicts: the wall time from its first
    generation to its last answer (the cost line's figure); for an endpoint that generated
    nothing, the time its answers took, summed over the exchanges its rows recorded (a shared
    exchange once). The one place a report reads it."""
    info = run.endpoints.get(endpoint)
    if info is not None and info.time_to_verdict_s:
        return info.time_to_verdict_s
    seen = {json.dumps(ex, sort_keys=True, default=str): ex.get("elapsed_s") or 0.0
            for row in run.rows_of(endpoint) for ex in row.exchanges}
    return round(sum(seen.values()), 3) if seen else None


def slowest(run: Run, n: int = 5) -> list[tuple[str, float]]:
    timed = [(name, time_to_verdict(run, name)) for name in run.endpoints]
    return sorted(((name, s) for name, s in timed if s is not None), key=lambda t: -t[1])[:n]


def endpoints_worst_first(run: Run) -> list[EndpointInfo]:
    """The endpoints as a reader should meet them: failing first, the fleet's order kept within."""
    worst = standing(run)
    return sorted(run.endpoints.values(),
                  key=lambda i: -RANK[worst.get(i.name, Verdict.NOT_ASKED)])


def worst_first(rows: list[Row]) -> list[Row]:
    """Rows as a reader should meet them: the worst verdict first, the run's order kept within."""
    return sorted(rows, key=lambda r: -RANK[r.verdict])


def figure_charts(run: Run) -> list[Chart]:
    """This run's figures, a chart each that figures.FIGURES draws (several on one where they
    share it: memory, modelled against measured), with the bounds each row recorded; a levelled
    figure a bar per endpoint and level (`decode_tps_at_4`), its floor ticked."""
    drawn: dict[str, tuple[Bars, Figure, list[Point]]] = {}
    for figure in FIGURES.values():
        if figure.chart is None:
            continue
        bars = figure.chart
        if figure.levelled:
            points = [_point(f"{row.endpoint} {hit[1]} in flight", f) for row in run.rows
                      for name, f in row.figures.items()
                      if (hit := lookup(name)) is not None and hit[0] is figure]
        else:
            points = [_point(f"{label} {bars.word}".strip(), f)
                      for label, f in _figured(run, figure.name)]
        drawn.setdefault(bars.name, (bars, figure, []))[2].extend(points)
    found = []
    for name, (bars, figure, points) in drawn.items():
        if points:
            if bars.word:  # a shared chart: each endpoint's bars side by side
                points.sort(key=lambda p: p.label)
            found.append(Chart(name, bars.title, charts.bars(name, bars.title, figure.unit,
                                                              points, figure.top)))
    return found


def trends(history: list[Run]) -> list[Chart]:
    """Each figure across the kept runs (oldest first), a line per endpoint; none from one run."""
    if len(history) < 2:
        return []
    runs = [_when(run) for run in history]
    found = []
    for figure in FIGURES.values():
        if figure.trend is None:
            continue
        name, title, unit = figure.name, figure.trend, figure.unit
        seen = [dict(_figured(run, name)) for run in history]
        labels = list(dict.fromkeys(label for one in seen for label in one))
        if not labels:
            continue
        series: dict[str, list[float | None]] = {
            label: [one[label]["value"] if label in one else None for one in seen]
            for label in labels}
        said = f"{title}, last {len(history)} runs"
        found.append(Chart(f"trend-{name}", said,
                           charts.trend(f"trend-{name}", said, unit, runs, series, figure.top)))
    return found


IMAGES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


@dataclass(frozen=True)
class Picture:
    """A probe's image (the vision rows'): whose, its name, and a file name safe to write."""

    endpoint: str
    name: str
    mime: str
    data: str  # base64
    file: str


def pictures(run: Run) -> list[Picture]:
    """The images the probes sent, base64 checked; file names made of safe characters only."""
    found: list[Picture] = []
    for row in run.rows:
        for a in row.attachments:
            mime, data = str(a.get("mime", "")), str(a.get("data", ""))
            if mime in IMAGES and _decodes(data):
                stem = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{row.endpoint}-{a.get('name', '')}")
                found.append(Picture(row.endpoint, str(a.get("name", "")), mime, data,
                                     f"probe-{len(found) + 1}-{stem[:60]}.{IMAGES[mime]}"))
    return found


def _decodes(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except ValueError:  # binascii.Error is one
        return False
    return True


def _figured(run: Run, name: str) -> list[tuple[str, dict]]:
    """(label, figure) for each row that measured `name`: labelled by its endpoint, and by its
    test and case where one endpoint has several."""
    rows = [r for r in run.rows if name in r.figures]
    many = {r.endpoint for r in rows if sum(o.endpoint == r.endpoint for o in rows) > 1}
    return [(_which(r) if r.endpoint in many else r.endpoint, r.figures[name]) for r in rows]


def _which(row: Row) -> str:
    """"ep reasoning_streamed", "ep vision data_url": the endpoint, the test, its case."""
    test, _, params = row.test.partition("[")
    case = params.rstrip("]").removeprefix(row.endpoint).lstrip("-")
    return " ".join(p for p in (row.endpoint, test.removeprefix("test_"), case) if p)


def _point(label: str, figure: dict) -> Point:
    return Point(label, figure["value"], figure.get("min"), figure.get("max"))


def _when(run: Run) -> str:
    if run.started is None:
        return "?"
    return time.strftime("%m-%d %H:%M", time.gmtime(run.started))
