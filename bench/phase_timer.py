"""A pytest plugin for the benchmarks: writes when the run's phases began and ended, as JSON,
to the file named by FRANK_PHASES. Load it with `-p phase_timer` (bench/ on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import time

import pytest

_T: dict[str, float] = {}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    _T["loop"] = time.monotonic()  # before the probe phase (it runs inside the loop's wrapper)
    try:
        return (yield)
    finally:
        _T["end"] = time.monotonic()


def pytest_runtest_setup(item):
    _T.setdefault("judging", time.monotonic())  # the probe phase is over


def pytest_unconfigure(config):
    path = os.environ.get("FRANK_PHASES")
    if path and "loop" in _T:
        start = _T["loop"]
        with open(path, "w") as out:
            json.dump({k: v - start for k, v in _T.items()}, out)
