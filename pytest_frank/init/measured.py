"""What init measures rather than reads: perf bounds from repeated readings, with their spread
and a note where the machine was busy, and the load ladder on a server of more than one slot,
run once here as the battery runs it before it is written."""

from __future__ import annotations

import os
import statistics
import time

from pytest_frank.base.hosts import host_of, is_local
from pytest_frank.init.found import Found
from pytest_frank.outcome.observation import Unseen
from pytest_frank.outcome.verdict import Failure, Skip
from pytest_frank.runtime.target import Target

READINGS = 3  # perf readings, each the perf claim's own (three streamed answers, the median)
TTFT_SLACK_S = 0.25  # a ttft bound never closer than this to the slowest reading
# A machine whose load average, taken while the server is idle, is at least this share of its
# cores was busy with other work as init measured: the readings may sit low.
BUSY_SHARE = 0.5
# The load ladder init writes: bursts per level (each request of the pool is asked alone once
# at level 1, and a pool holds up to five kinds), so a 2-slot ladder sends 15 requests.
LOAD_BURSTS = 5
# Each request's budget where the pool holds plain questions alone (no tools, thinking or image
# asked): the claim's default 256 is room for a forced call after thinking, and a model that
# answers at length (SmolLM2 on a busy CPU, a few tok/s) spends it all on each of them.
PLAIN_LOAD_TOKENS = 64


def perf(target: Target, found, margin: float) -> None:
    """Bounds from the slowest of READINGS readings and a margin; the comment gives each
    reading, and a note says where this machine was busy while they were taken."""
    from pytest_frank.claims.perf import speed

    others = busy_now() if is_local(host_of(target.endpoint.url)) else None
    firsts, rates, answers = [], [], 0
    for _ in range(READINGS):
        runs = speed(target).runs
        ttfts = [r.first_token_s for r in runs if r.ok and r.first_token_s is not None]
        speeds = [rate for r in runs if r.ok and (rate := r.decode_rate())]
        if not runs or len(ttfts) < len(runs) or len(speeds) < len(runs):
            return  # nothing to derive a bound from; the battery's perf would say why
        firsts.append(statistics.median(ttfts))
        rates.append(statistics.median(speeds))
        answers = len(runs)
    ttft, rate = max(firsts), min(rates)
    # The spread each figure's readings showed widens its margin: a server that moved by that
    # much within a few seconds moves by as much again between init and the battery.
    slower, faster = max(firsts) / max(min(firsts), 1e-6), max(rates) / min(rates)
    bounds = {"max_ttft_s": round_up(max(ttft * margin * slower, ttft + TTFT_SLACK_S)),
              "min_decode_tps": round_down(rate / (margin * faster))}
    spread = (f" times each figure's spread ({slower:.2f}x, {faster:.2f}x)"
              if max(slower, faster) >= 1.005 else "")
    found.claims["perf"] = Found(bounds, (
        f"measured {time.strftime('%Y-%m-%d')}, {READINGS} readings (each the median of "
        f"{answers} streamed answers): time to first token {_each(firsts, 3)}s, decode "
        f"{_each(rates, 1)} tok/s; bounds from the slowest, with a {margin:g}x margin"
        f"{spread}"))
    if others is not None:
        load, cores = others
        if load >= BUSY_SHARE * cores:
            found.notes["perf"] = (
                f"measured while this machine was busy: load average {load:.1f} on {cores} "
                f"core(s) with the server idle, so the readings may sit low and the bounds "
                f"with them; run frank init again when it is quiet, or raise them by hand")


def busy_now() -> tuple[float, int] | None:
    """(the 1-minute load average, the cores): how much other work this machine runs."""
    try:
        return os.getloadavg()[0], os.cpu_count() or 1
    except OSError:  # no load average on this platform
        return None


def _each(values: list[float], digits: int) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def load(target: Target, target_for, found) -> None:
    """The load claim on a server of more than one slot: its ladder (LOAD_BURSTS bursts a level,
    the requests of the claims found so far) run once here, written where it passes; a server
    of one slot has no ladder to climb, and a comment says so. `target_for(expect)`: a target
    on the same server asking `expect`."""
    from pytest_frank.claims import load as claim
    from pytest_frank.claims.checks import Context
    from pytest_frank.runtime.probes import slot_shape

    shape = target.need(slot_shape)
    count = None if isinstance(shape, Unseen) else shape.count
    if not count or count < 2:
        said = f"{count} slot" if count else "no slot count"
        found.notes["load"] = (f"not written: the server reports {said}, so a ladder of "
                               "requests in flight together has no level to climb")
        return
    assert not isinstance(shape, Unseen)  # it reported a count
    value: dict = {"requests": LOAD_BURSTS * sum(claim.widths(count))}
    kinds = {c: found.claims[c].value for c in ("tools", "reasoning", "vision")
             if c in found.claims}
    if not kinds:  # plain and streamed questions alone: a short answer shows each whole
        value["max_tokens"] = PLAIN_LOAD_TOKENS
    laddered = target_for({**kinds, "load": value})
    try:
        started = time.monotonic()
        seen = laddered.need(claim.ladder)
        try:
            if isinstance(seen, Unseen) or seen.failure:
                raise Failure(seen.failure or "the ladder's probe broke")
            claim.judge(seen, Context(laddered.endpoint, laddered.driver,
                                      claim.Options.on(laddered.endpoint)))
        except Failure as failed:
            found.notes["load"] = f"not written: test_load fails here: {_line(failed.message())}"
            return
        except Skip as skipped:
            found.notes["load"] = f"not written: test_load here: {_line(skipped.line)}"
            return
        levels = ", ".join(str(level.width) for level in seen.levels)
        sent = sum(len(level.sent) for level in seen.levels)
        found.claims["load"] = Found(value, (
            f"{count} slots ({shape.source}); the ladder passed here: {levels} in flight, "
            f"{sent} replies in {time.monotonic() - started:.1f}s"))
    finally:
        laddered.close()


def _line(text: str) -> str:
    return " ".join(text.split())


def round_up(value: float) -> float:
    """Two significant figures, rounded up: 0.2634 -> 0.27 (a sum's float error, 0.03 + 0.25
    read as 0.28000000000000003, is not a figure to round up)."""
    from math import ceil, floor, log10

    scale = 10 ** (floor(log10(value)) - 1)
    return round(ceil(round(value / scale, 9)) * scale, 10)


def round_down(value: float) -> float:
    from math import floor, log10

    if value <= 0:
        return 0.0
    scale = 10 ** (floor(log10(value)) - 1)
    return round(floor(value / scale) * scale, 10)
