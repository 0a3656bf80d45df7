"""One run's results as plain data: a row per test, the endpoints' identities, the matrix of
verdicts. The terminal table, the HTML page, the Markdown page and the JSON file all read this;
`--frank-baseline` compares two of them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_frank import redact
from pytest_frank.figures import number
from pytest_frank.verdict import Verdict

FORMAT = "pytest-frank/1"
LAUNCH_LOG = "llama.cpp log"  # the attachment's name in a launched endpoint's test_health


@dataclass(frozen=True)
class Source:
    """What the run reports on: the fleet file and its entries (the glue stashes it at configure,
    the reports read it; neither imports the other)."""

    fleet_path: Path
    fleet: dict[str, Any]  # name -> pytest_frank.fleet.Endpoint


SOURCE = pytest.StashKey[Source]()
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
class EndpointInfo:
    name: str
    engine: str
    url: str = ""
    build: str | None = None
    models: list[str] = field(default_factory=list)
    launch_log: str | None = None
    description: str = ""  # fleet.yaml's free text for the report
    generations: int = 0  # what the battery cost it: the generations sent
    tokens: int = 0  # and the tokens they made (the server's count where it gives one)
    min_tokens: int = 0  # the plan's minimum: each distinct request once, at the budget it needed
    time_to_verdict_s: float = 0.0  # wall seconds from its first generation to its last answer

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


class BaselineError(Exception):
    """A baseline file that cannot be read; the message names the file and the reason."""


def load(path: Path) -> Run:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BaselineError(f"{path}: not a pytest-frank JSON file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{path}: not a pytest-frank JSON file (no \"format\": "
                            f"\"{FORMAT}\"; write one with --frank-json)")
    odd = next((r["verdict"] for r in data.get("rows", []) if isinstance(r, dict)
                and "verdict" in r and r["verdict"] not in set(Verdict)), None)
    if odd is not None:
        raise BaselineError(f"{path}: unknown verdict {odd!r} (known: {', '.join(Verdict)})")
    try:
        endpoints = {n: EndpointInfo(**e) for n, e in data.get("endpoints", {}).items()}
        rows = [Row(**r) for r in data.get("rows", [])]
    except TypeError as exc:
        raise BaselineError(f"{path}: a row or endpoint has unexpected fields ({exc})") from None
    return Run(fleet=data.get("fleet", ""), sha256=data.get("sha256", ""),
               version=data.get("version", ""), endpoints=endpoints, rows=rows,
               started=data.get("started"), duration_s=data.get("duration_s"),
               fleet_endpoints=list(data.get("fleet_endpoints") or endpoints),
               shard=data.get("shard"))
