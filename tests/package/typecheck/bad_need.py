"""Read by tests/package/test_types.py, never run: a probe's observation read without handling the
`Unseen` that `Target.need` may give instead. The type checker must reject it."""

from __future__ import annotations

from pytest_frank.runtime import identify
from pytest_frank.runtime.target import Target


def engine_named(target: Target) -> str | None:
    return target.need(identify.engine).engine
