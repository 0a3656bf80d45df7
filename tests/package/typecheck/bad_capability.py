"""Read by tests/package/test_types.py, never run: a claim's helper typed against one driver capability
reading a member of another (a metrics reader asking for a server flag, a fix reading the wire),
and a fix keyed by an engine's name where its driver class belongs. The type checker must reject
each."""

from __future__ import annotations

from pytest_frank.claims.advice import advise
from pytest_frank.drivers.protocols import Facts, Metrics
from pytest_frank.outcome.verdict import Text


def drafted(driver: Metrics) -> str:
    return str(driver.flags["spec_type"])


def fix(driver: Facts) -> str:
    return str(driver.sampling({}))


def by_name(driver: Facts) -> Text:
    return advise(driver, "update the engine", {"llamacpp": "update llama.cpp"})
