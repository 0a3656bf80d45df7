"""Read by tests/package/test_types.py, never run: a claim's options read with a misspelt name, by a
probe, by a judge and by a check's `applies`. The type checker must reject each."""

from __future__ import annotations

from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims import perf
from pytest_frank.runtime.target import Target


def runs_asked(target: Target) -> int:
    return perf.Options.on(target.endpoint).run


def judge(runs: perf.Runs, ctx: Context[perf.Options]) -> None:
    print(ctx.options.min_decode_tp)


CHECK = Check("test_perf_typo", "perf", perf.speed, judge,
              applies=lambda opts, driver: None if opts.max_ttft else "not asked")
