"""One run's results as plain data: a row per test, the endpoints' identities, the matrix of
verdicts. The terminal table, the HTML page, the Markdown page and the JSON file all read this;
`--frank-baseline` compares two of them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_frank.base import redact
from pytest_frank.base.figures import number
from pytest_frank.outcome.verdict import Verdict

FORMAT = "pytest-frank/1"
LAUNCH_LOG = "llama.cpp log"  # the attachment's name in a launched endpoint's test_health


@dataclass(frozen=True)
class Source:
    """What the run reports on: the fleet file and its entries (the glue stashes it at configure,
    the reports read it; neither imports the other)."""

    fleet_path: Path
    fleet: dict[str, Any]  # name -> pytest_frank.fleet.Endpoint


SOURCE = pytest.StashKey[Source]()
# What the run as a whole has to say, in every report (the glue adds, the reports read): the
# offline gate with nothing to check, ...
NOTES = pytest.StashKey[list[str]]()
# The usage error that stopped the run (exit 4): the reports are written with it all the same,
# so a CI step that reads them shows why.
USAGE_ERROR = pytest.StashKey[str]()


def note(config: pytest.Config, line: str) -> None:
    """A line of the run's own for every report."""
    config.stash.setdefault(NOTES, []).append(line)


class UsageErrors:
    """`with UsageErrors(config):` around what may refuse the run with a usage error: its
    message is kept for the reports (USAGE_ERROR) before pytest prints it and exits 4."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> None:
        if isinstance(exc, pytest.UsageError) and USAGE_ERROR not in self.config.stash:
            self.config.stash[USAGE_ERROR] = redact.scrub(str(exc))


# Worst first wins a cell: a claim is as good as its worst test.
RANK = {verdict: rank for rank, verdict in enumerate(Verdict)}  # Verdict's order, best first


@dataclass
class Row:
    """One test's verdict and what it measured."""

    key: str  # "<module>::<test name>": stable across folders and runs, the baseline's key
    endpoint: str
    claim: str
    verdict: Verdict  # a plain word from JSON or xdist's wire becomes a Verdict here
    line: str = ""  # why: the failure or skip reason, one diagnosis
    fix: str | None = None
    curl: str | None = None
    notes: list[str] = field(default_factory=list)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    exchanges: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)

    @property
    def test(self) -> str:
        return self.key.split("::")[-1]

    def figures_line(self) -> str:
        """"ttft_s 0.012 s, tok_s 480 tok/s": the measured numbers, for a glance."""
        return ", ".join(f"{name} {number(f['value'], 4)} {f.get('unit') or ''}".strip()
                         for name, f in self.figures.items())

    @property
    def anchor(self) -> str:
        return "frank-" + "".join(c if c.isalnum() else "-" for c in self.key)


@dataclass
class Payload:
    """What one test's report carries from where the test ran to the reports: its row's fields
    and, beside them, what the test saw of its endpoint (EndpointInfo's IDENTITY and SPEND
    fields). As plain data (`plain()`, pytest's report.frank): under xdist it crosses the wire
    to the controller, which reads it back with `of()`; every field of Row crosses."""

    row: Row
    identity: dict[str, Any] | None = None  # url, build, models: where the test measured them
    spend: dict[str, Any] | None = None  # a snapshot: the latest, largest one is the run's

    def plain(self) -> dict[str, Any]:
        data = {**asdict(self.row), "verdict": self.row.verdict.value}
        return {**data, **{f.name: getattr(self, f.name) for f in fields(self)
                           if f.name != "row" and getattr(self, f.name) is not None}}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Payload:
        beside = {f.name for f in fields(cls)} - {"row"}
        return cls(row=Row(**{k: v for k, v in data.items() if k not in beside}),
                   **{k: data[k] for k in beside if k in data})


# Where a run learns each field of EndpointInfo. The fleet file's and the rows' are at hand where
# the reports are written; what a test saw of its endpoint crosses from where it ran (xdist's
# wire) on its row's payload, as `identity` (what the endpoint said it is) and `spend` (what the
# battery cost it so far: target.Spend.record()).
FLEET, ROWS, IDENTITY, SPEND = "fleet", "rows", "identity", "spend"


def same(values: list[Any]) -> Any:
    """A merge rule: the first record's value (a name, an engine: one per endpoint)."""
    return values[0]


def first_set(values: list[Any]) -> Any:
    """A merge rule: the first record's that has one (a build only a measuring record knows)."""
    return next((v for v in values if v), values[0])


def total(values: list[Any]) -> Any:
    """A merge rule: the records' sum (a cost: each record paid its part)."""
    return sum(values)


def longest(values: list[Any]) -> Any:
    """A merge rule: the largest (wall time: a matrix's runners run side by side, so the
    verdict came with the slowest one's)."""
    return max(values)


def rule(merge: Callable[[list[Any]], Any], seen: str) -> dict[str, Any]:
    """A field's rules, as its metadata: how `frank merge` makes one value of the values of the
    records that ran the endpoint, and where a run learns it (FLEET, ROWS, IDENTITY, SPEND).
    Every field has both: EndpointInfo.merged and EndpointInfo.seen read them, and fail on a
    field without them (tests/reports/test_merge.py says which)."""
    return {"merge": merge, "seen": seen}


@dataclass
class EndpointInfo:
    name: str = field(metadata=rule(same, FLEET))
    engine: str = field(metadata=rule(same, FLEET))
    url: str = field(default="", metadata=rule(same, IDENTITY))
    build: str | None = field(default=None, metadata=rule(first_set, IDENTITY))
    models: list[str] = field(default_factory=list, metadata=rule(first_set, IDENTITY))
    launch_log: str | None = field(default=None, metadata=rule(first_set, ROWS))
    # fleet.yaml's free text for the report
    description: str = field(default="", metadata=rule(same, FLEET))
    # what the battery cost it: the generations sent
    generations: int = field(default=0, metadata=rule(total, SPEND))
    # and the tokens they made (the server's count where it gives one)
    tokens: int = field(default=0, metadata=rule(total, SPEND))
    # the plan's minimum: each distinct request once, at the budget it needed
    min_tokens: int = field(default=0, metadata=rule(total, SPEND))
    # wall seconds from its first generation to its last answer
    time_to_verdict_s: float = field(default=0.0, metadata=rule(longest, SPEND))

    @classmethod
    def merged(cls, infos: list[EndpointInfo]) -> EndpointInfo:
        """One endpoint's record from the records that ran it, field by field by its rule."""
        return cls(**{f.name: f.metadata["merge"]([getattr(i, f.name) for i in infos])
                      for f in fields(cls)})

    @classmethod
    def seen(cls, sources: dict[str, dict[str, Any]]) -> EndpointInfo:
        """The endpoint's record from what the run learnt of it, by source (FLEET, ROWS,
        IDENTITY, SPEND: each a field -> value map); a field a source does not give keeps its
        default (an endpoint never measured), a value no field of that source takes is refused."""
        by = {f.name: f.metadata["seen"] for f in fields(cls)}
        for source, values in sources.items():
            stray = [name for name in values if by.get(name) != source]
            if stray:
                raise TypeError(f"EndpointInfo has no {source} field {', '.join(stray)}")
        return cls(**{name: sources[source][name] for name, source in by.items()
                      if name in sources.get(source, {})})

    def cost(self) -> str:
        if not self.generations:
            return "-"
        plural = "s" if self.generations != 1 else ""
        said = f"{self.generations} generation{plural}, {self.tokens} tokens"
        if self.min_tokens:
            said += (f" ({self.tokens / self.min_tokens:.2f}x the plan's minimum of "
                     f"{self.min_tokens})")
        if self.time_to_verdict_s:
            said += f", {number(self.time_to_verdict_s, 3)} s to verdict"
        return said


@dataclass
class Run:
    fleet: str
    sha256: str
    version: str
    endpoints: dict[str, EndpointInfo] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    regressions: list[dict[str, str]] = field(default_factory=list)  # {"test", "endpoint", "what"}
    # changes past their tolerance that the runs' own spread covers: said, never failed on
    noise: list[dict[str, str]] = field(default_factory=list)
    started: float | None = None  # when the run started, Unix time
    duration_s: float | None = None  # from the start to the last test's report
    # Every endpoint the fleet file names, in its order: a shard's record covers some of them,
    # and `frank merge` tells which no shard ran.
    fleet_endpoints: list[str] = field(default_factory=list)
    shard: str | None = None  # "I/N" under --frank-shard: `endpoints` are this shard's
    # What the run as a whole says (the offline gate with nothing to check), in every report
    notes: list[str] = field(default_factory=list)
    # The usage error that stopped the run before any check (exit 4)
    error: str | None = None
    # --frank-baseline's comparison: {"file", "started" (the baseline run's, Unix time),
    # "tests", "figures" (compared), "regressions", "noise"}
    baseline: dict[str, Any] | None = None

    def matrix(self) -> dict[str, dict[str, Verdict]]:
        """endpoint -> claim -> verdict, endpoints in fleet order, claims in battery order."""
        from pytest_frank.claims import CLAIMS

        cells: dict[str, dict[str, Verdict]] = {name: {} for name in self.endpoints}
        for row in self.rows:
            claims = cells.setdefault(row.endpoint, {})
            if RANK[row.verdict] >= RANK[claims.get(row.claim, Verdict.NOT_ASKED)]:
                claims[row.claim] = row.verdict
        order = {claim: i for i, claim in enumerate(CLAIMS)}
        return {name: dict(sorted(c.items(), key=lambda kv: order.get(kv[0], len(order))))
                for name, c in cells.items()}

    def claims(self) -> list[str]:
        seen = dict.fromkeys(c for cells in self.matrix().values() for c in cells)
        return list(seen)

    def rows_of(self, endpoint: str) -> list[Row]:
        return [row for row in self.rows if row.endpoint == endpoint]

    def counts(self) -> dict[Verdict, int]:
        found: dict[Verdict, int] = {}
        for row in self.rows:
            found[row.verdict] = found.get(row.verdict, 0) + 1
        return dict(sorted(found.items(), key=lambda kv: -RANK[kv[0]]))

    def to_json(self) -> str:
        data = {"format": FORMAT, **asdict(self)}
        # Every string once more through the redactor: a key echoed in a body stays masked.
        return redact.scrub(json.dumps(data, indent=1, ensure_ascii=False))


def fleet_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class RunFileError(Exception):
    """A run record (--frank-json) that cannot be read, as a baseline, a history entry or a shard
    to merge; the message names the file and the reason."""


def read_run(path: Path) -> Run:
    """The run record a --frank-json file holds."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunFileError(f"{path}: not a pytest-frank JSON file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RunFileError(f"{path}: not a pytest-frank JSON file (no \"format\": "
                            f"\"{FORMAT}\"; write one with --frank-json)")
    odd = next((r["verdict"] for r in data.get("rows", []) if isinstance(r, dict)
                and "verdict" in r and r["verdict"] not in set(Verdict)), None)
    if odd is not None:
        raise RunFileError(f"{path}: unknown verdict {odd!r} (known: {', '.join(Verdict)})")
    try:
        endpoints = {n: EndpointInfo(**e) for n, e in data.get("endpoints", {}).items()}
        rows = [Row(**r) for r in data.get("rows", [])]
    except TypeError as exc:
        raise RunFileError(f"{path}: a row or endpoint has unexpected fields ({exc})") from None
    # Every field of Run as written (a field added to Run comes back without a word here); the
    # record's own types built from theirs, and what an older record lacks, as it meant then.
    kept = {f.name: data[f.name] for f in fields(Run) if f.name in data}
    return Run(**{"fleet": "", "sha256": "", "version": "", **kept, "endpoints": endpoints,
                  "rows": rows, "fleet_endpoints": list(data.get("fleet_endpoints") or endpoints)})
