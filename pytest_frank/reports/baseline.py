"""What got worse since a previous run (`--frank-baseline PREV.json`): a check that passed and
now does not, and measured figures past their tolerance (fleet.yaml `regression:`)."""

from __future__ import annotations

import statistics
from typing import Any

from pytest_frank.base.figures import TOLERANCES, lookup, number
from pytest_frank.claims import fingerprint
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import RANK, EndpointInfo, Row, Run

# A time to verdict this many seconds longer is the box's load, whatever its ratio.
TIME_NOISE_S = 5.0
# A timed median (first token, decode speed) past its tolerance is still noise while it moves
# less than this many times its runs' median absolute deviations, before and now together
# (about two standard deviations of the difference for normal noise).
SPREAD = 3.0


class Tolerances:
    """An endpoint's `regression:` block, each key of figures.TOLERANCES its given value or
    its default (`tol.ttft_rise`); a key not there is a TypeError, as a dataclass's would be."""

    def __init__(self, **given: float):
        unknown = set(given) - set(TOLERANCES)
        if unknown:
            raise TypeError(f"no regression tolerance {', '.join(sorted(unknown))} (known: "
                            f"{', '.join(TOLERANCES)})")
        self._values = {key: float(given.get(key, t.default)) for key, t in TOLERANCES.items()}

    def __getattr__(self, key: str) -> float:
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(key) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tolerances) and self._values == other._values

    def __repr__(self) -> str:
        return f"Tolerances({', '.join(f'{k}={v:g}' for k, v in self._values.items())})"

    @classmethod
    def from_fleet(cls, raw: dict[str, Any] | None) -> Tolerances:
        return cls(**(raw or {}))


def compared(before: Run, now: Run) -> dict[str, int]:
    """What a comparison had to go on: the tests both runs ran, the figures both recorded."""
    earlier = {row.key: row for row in before.rows}
    pairs = [(earlier[row.key], row) for row in now.rows if row.key in earlier]
    return {"tests": len(pairs),
            "figures": sum(len(set(old.figures) & set(row.figures)) for old, row in pairs)}


def compare(before: Run, now: Run, tolerances: dict[str, Tolerances],
            noise: list[dict[str, str]] | None = None) -> list[dict[str, str]]:
    """One entry per regression: {"test", "endpoint", "what"}. A timing past its tolerance
    that the runs' own spread covers is no regression: it goes to `noise`, where given."""
    earlier = {row.key: row for row in before.rows}
    found = []
    for row in now.rows:
        old = earlier.get(row.key)
        if old is None:
            continue  # new, or not run before: nothing to compare with
        tol = tolerances.get(row.endpoint, Tolerances())
        for what in [_verdict(old.verdict, row.verdict, row.line),
                     *(_figure(name, old.figures, row.figures, tol) for name in row.figures),
                     *_fingerprints(old, row, tol)]:
            if not what:
                continue
            entry = {"test": row.test, "endpoint": row.endpoint, "what": str(what)}
            if isinstance(what, Noise):
                if noise is not None:
                    noise.append(entry)
            else:
                found.append(entry)
    for name, info in now.endpoints.items():
        old_info = before.endpoints.get(name)
        if old_info is None or _plan(before, name) != _plan(now, name):
            continue  # another selection of tests asks other requests: no cost to compare
        for what in _cost(old_info, info, tolerances.get(name, Tolerances())):
            found.append({"test": "cost", "endpoint": name, "what": what})
    return found


def _plan(run: Run, endpoint: str) -> set[str]:
    return {row.key for row in run.rows if row.endpoint == endpoint}


def _cost(before: EndpointInfo, now: EndpointInfo, tol: Tolerances) -> list[str]:
    """The battery's cost on an endpoint, against the baseline's with the same tests: tokens
    generated, and the wall time to its verdict (past the same tolerance, and TIME_NOISE_S)."""
    found = []
    for label, old, new, unit in (
            ("tokens generated", before.tokens, now.tokens, ""),
            ("time to verdict", before.time_to_verdict_s, now.time_to_verdict_s, " s")):
        noise = TIME_NOISE_S if unit else 0
        if old > 0 and new - old > noise and (new - old) / old > tol.tokens_rise:
            found.append(f"{label} {number(old, 4)} -> {number(new, 4)}{unit} (up "
                         f"{(new - old) / old:.0%}, tolerance {tol.tokens_rise:.0%})")
    return found


def _verdict(before: Verdict, now: Verdict, line: str) -> str | None:
    if before is not Verdict.PASS or RANK[now] <= RANK[Verdict.INCONCLUSIVE]:
        return None  # only a pass that now fails, errs or is blocked counts
    why = line.splitlines()[0] if line else ""
    return f"passed before, {now} now" + (f": {why}" if why else "")


class Noise(str):
    """A change past its tolerance that stays within the runs' spread: said, not a regression."""


def _figure(name: str, before: dict, now: dict, tol: Tolerances) -> str | None:
    """A figure of figures.FIGURES with a tolerance, past it since the baseline; a levelled one
    (`decode_tps_at_4`) against the same level before."""
    found = lookup(name)
    if found is None or found[0].tolerance is None or name not in before:
        return None
    figure, level = found
    label = figure.label if level is None else f"{figure.label} at {level} in flight"
    higher_better, tolerance = figure.higher_better, TOLERANCES[str(figure.tolerance)]
    old, new = before[name]["value"], now[name]["value"]
    unit = now[name].get("unit") or ""
    allowed = getattr(tol, tolerance.key)
    worse = (old - new) if higher_better else (new - old)
    if tolerance.absolute:
        if worse > allowed:
            return f"{label} {old:.2f} -> {new:.2f} (down {worse:.2f}, tolerance {allowed:g})"
        return None
    if old <= 0 or worse / old <= allowed:
        return None
    if tolerance.floor and worse <= getattr(tol, tolerance.floor):
        return None
    change = "down" if higher_better else "up"
    said = (f"{label} {number(old, 4)} -> {number(new, 4)} {unit} ({change} {worse / old:.0%}, "
            f"tolerance {allowed:.0%})").replace("  ", " ")
    spread = _overlap(before[name].get("runs"), now[name].get("runs"), higher_better, unit)
    return Noise(f"{said}, {spread}") if spread else said


def _overlap(before: list | None, now: list | None, higher_better: bool, unit: str) -> str:
    """Whether a median's move is run-to-run spread: within SPREAD times the runs' median
    absolute deviations, before and now together (robust to one slow warm-up run). A shared
    machine moves an unchanged server's runs this way; a server that really got slower moves
    all its runs together, past the spread."""
    if not before or not now or len(before) < 3 or len(now) < 3:
        return ""  # too few runs to say what their spread is
    old, new = statistics.median(before), statistics.median(now)
    spread = _mad(before) + _mad(now)
    if abs(new - old) > SPREAD * spread:
        return ""
    unit = f" {unit}" if unit else ""
    return (f"within {SPREAD:g}x the runs' spread ({number(old, 4)} ± {number(_mad(before), 3)}"
            f"{unit} before, {number(new, 4)} ± {number(_mad(now), 3)}{unit} now, median "
            "absolute deviation): noise, not a regression")


def _mad(values: list) -> float:
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


def _fingerprints(before: Row, now: Row, tol: Tolerances) -> list[str]:
    """A fingerprint prompt whose greedy tokens diverge too early (not at a near tie), or whose
    logprobs drifted on the common prefix: named with its first diverging position, before and
    now."""
    old, new = fingerprint.read(before.attachments), fingerprint.read(now.attachments)
    if not old or not new:
        return []
    found = []
    for prompt in (p for p in new if p in old and fingerprint.comparable(old[p], new[p])):
        diff = fingerprint.compare(old[prompt], new[prompt])
        if diff.regressed(tol.fingerprint_agreement):
            found.append(f"fingerprint {diff.says(prompt)} (agreement {diff.agreement:.2f}, "
                         f"tolerance {tol.fingerprint_agreement:g})")
        elif diff.drift is not None and diff.drift > tol.logprob_drift:
            found.append(f"fingerprint {diff.drifted(prompt)} (tolerance {tol.logprob_drift:g})")
    return found
