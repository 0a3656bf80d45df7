"""Read by tests/test_types.py, never run: a claim's helper typed against one driver capability
reading a member of another (a metrics reader asking for a server flag, a fix reading the wire).
The type checker must reject each."""

from __future__ import annotations

from pytest_frank.drivers.protocols import Facts, Metrics


def drafted(driver: Metrics) -> str:
    return str(driver.flags["spec_type"])


def fix(driver: Facts) -> str:
    return str(driver.sampling({}))
