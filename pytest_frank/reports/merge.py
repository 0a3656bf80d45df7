"""`frank merge A.json B.json ...`: one fleet's reports from the `--frank-json` records of the
runners a CI matrix split it over (`--frank-shard I/N`, or `-k`). The same writers a run uses
(the page, the Markdown, the Prometheus textfile, the JSON) read the merged record. Records of
different fleet files are refused unless asked for; an endpoint of the fleet that no record ran
is reported, and fails the merge: nobody verified it."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from pytest_frank.base import redact
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import EndpointInfo, Row, Run, RunFileError, read_run

FAILED = {Verdict.FAIL, Verdict.ERROR}


class MergeError(Exception):
    """A record that cannot join the others; the message names the file and the reason."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        records = [(path, _load(path)) for path in args.records]
        if not args.allow_mixed_fleets:
            _same_fleet(records)
        run = merge(records)
    except MergeError as exc:
        print(f"frank merge: {redact.inert(str(exc), 2000)}", file=sys.stderr)
        return 2
    written = _write(args, run)
    if written:
        return written
    missing = missing_endpoints(run)
    if missing:
        print(f"frank merge: {', '.join(missing)}: in the fleet file, but no record ran "
              f"{'them' if len(missing) > 1 else 'it'} (a shard or -k split left "
              f"{'them' if len(missing) > 1 else 'it'} out)", file=sys.stderr)
    failed = sum(1 for row in run.rows if row.verdict in FAILED)
    print(f"frank merge: {len(records)} records, {len(run.rows)} tests, {failed} failed, "
          f"{len(run.endpoints)} endpoints")
    return 1 if missing or failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="frank merge", description="Build one fleet's reports from the --frank-json records "
        "of the runners that verified a share of it (--frank-shard I/N, or -k).")
    parser.add_argument("records", nargs="+", metavar="RECORD.json",
                        help="a runner's --frank-json record")
    parser.add_argument("--html", metavar="PATH.html", help="write the fleet's page (static HTML)")
    parser.add_argument("--frank-report", metavar="PATH.md", help="write the Markdown page")
    parser.add_argument("--frank-prometheus", metavar="PATH.prom",
                        help="write the Prometheus textfile, atomically")
    parser.add_argument("--frank-json", metavar="PATH",
                        help="write the merged record: a later run's --frank-baseline")
    parser.add_argument("--allow-mixed-fleets", action="store_true",
                        help="merge records of different fleet files (refused by default)")
    return parser


def _load(path: str) -> Run:
    try:
        return read_run(Path(path))
    except RunFileError as exc:
        raise MergeError(str(exc)) from None


def _same_fleet(records: list[tuple[str, Run]]) -> None:
    first_path, first = records[0]
    for path, run in records[1:]:
        if run.sha256 != first.sha256:
            raise MergeError(
                f"{path}: a record of fleet file {run.fleet} (sha256 {run.sha256[:12]}), not of "
                f"{first_path}'s {first.fleet} (sha256 {first.sha256[:12]}): the shards of one CI "
                "matrix verify one fleet file (--allow-mixed-fleets merges them anyway)")


Records = list[tuple[str, Run]]  # (the file, its record), in the order given


def merge(records: Records) -> Run:
    """One record of the fleet from its shards' (file, record) pairs, endpoints in the fleet
    file's order: each field of Run by its rule in RULES, each endpoint's by its fields' rules
    (results.EndpointInfo)."""
    return Run(**{f.name: RULES[f.name](records) for f in fields(Run)})


def _fleet_endpoints(records: Records) -> list[str]:
    return list(dict.fromkeys(n for _, run in records
                              for n in (run.fleet_endpoints or run.endpoints)))


def _endpoints(records: Records) -> dict[str, EndpointInfo]:
    runs = [run for _, run in records]
    return {name: info for name in _fleet_endpoints(records)
            if (info := _endpoint(name, runs)) is not None}


def _started(records: Records) -> float | None:
    return min((run.started for _, run in records if run.started is not None), default=None)


def _duration(records: Records) -> float | None:
    """From the first record's start to the last one's end: the runners ran side by side."""
    start = _started(records)
    if start is None:
        return None
    ends = [run.started + (run.duration_s or 0) for _, run in records if run.started is not None]
    return round(max(ends) - start, 3)


def _rows(records: Records) -> list[Row]:
    """Every record's rows, health first and the claims in battery order as one run orders them;
    a test in two records is a shard given twice, or -k splits that overlap."""
    from pytest_frank.claims import CLAIMS

    seen: dict[tuple[str, str], int] = {}
    rows = []
    for i, (path, run) in enumerate(records):
        for row in run.rows:
            first = seen.setdefault((row.endpoint, row.key), i)
            if first != i:
                raise MergeError(f"{path}: {row.key} is in {records[first][0]} too: a record "
                                 "given twice, or shards that overlap (each test belongs to one "
                                 "record)")
            rows.append(row)
    order = {claim: i for i, claim in enumerate(CLAIMS)}
    return sorted(rows, key=lambda row: order.get(row.claim, len(order)))


def _endpoint(name: str, runs: list[Run]) -> EndpointInfo | None:
    """The endpoint as the records that ran it saw it, each field by its merge rule (its cost
    summed over them)."""
    infos = [run.endpoints[name] for run in runs if name in run.endpoints
             and any(row.endpoint == name for row in run.rows)]
    infos = infos or [run.endpoints[name] for run in runs if name in run.endpoints]
    if not infos:
        return None  # another shard's, and no record ran it: reported as missing
    return EndpointInfo.merged(infos)


# How the merged record's fields come from the records: one rule per field of Run
# (tests/reports/test_merge.py fails on a field without one, and merge() on its first use).
RULES: dict[str, Callable[[Records], Any]] = {
    "fleet": lambda records: _joined(run.fleet for _, run in records),
    "sha256": lambda records: _joined(run.sha256 for _, run in records),
    "version": lambda records: _joined(run.version for _, run in records),
    "endpoints": _endpoints,
    "rows": _rows,
    "regressions": lambda records: [r for _, run in records for r in run.regressions],
    "noise": lambda records: [r for _, run in records for r in run.noise],
    "started": _started,
    "duration_s": _duration,
    "fleet_endpoints": _fleet_endpoints,
    "shard": lambda records: None,  # the merge is the whole matrix, no shard of it
    "notes": lambda records: list(dict.fromkeys(n for _, run in records for n in run.notes)),
    "error": lambda records: next((run.error for _, run in records if run.error), None),
    "baseline": lambda records: _baseline(records),
}


def _baseline(records: Records) -> dict[str, Any] | None:
    """The shards' comparisons as one: each compared its own tests with the same baseline."""
    compared = [run.baseline for _, run in records if run.baseline]
    if not compared:
        return None
    counts = ("tests", "figures", "regressions", "noise")
    return {**compared[0], **{key: sum(b.get(key, 0) for b in compared) for key in counts}}


def missing_endpoints(run: Run) -> list[str]:
    """The fleet's endpoints no record has a test of."""
    ran = {row.endpoint for row in run.rows}
    return [name for name in run.fleet_endpoints if name not in ran]


def _joined(values) -> str:
    return ", ".join(dict.fromkeys(v for v in values if v))


def _write(args: argparse.Namespace, run: Run) -> int:
    """Each report asked for, by the writers a run uses, with the merged record's charts (a
    merge keeps no history: no trends); one the disk refuses is named, with why, and the merge
    fails."""
    from pytest_frank.reports import glance
    from pytest_frank.reports.writers import WRITERS

    charts = glance.figure_charts(run)
    status = 0
    for option, write in WRITERS.items():
        path = getattr(args, option)
        if not path:
            continue
        try:
            write(run, Path(path), charts)
        except OSError as exc:
            print(f"frank merge: --{option.replace('_', '-')} {redact.inert(path)}: not written "
                  f"({redact.inert(exc.strerror or str(exc))})", file=sys.stderr)
            status = 2
    return status
