"""health: the engine's health route answers ready; a model still loading is waited for."""

from __future__ import annotations

from pytest_frank.claims import Claim, Options
from pytest_frank.claims.checks import Check, Context
from pytest_frank.outcome.verdict import fail
from pytest_frank.runtime.probes import Health
from pytest_frank.runtime.probes import health as probe

CLAIM = Claim("health", "the health route answers ready", order=10, always=True)


def judge(health: Health, ctx: Context[Options]) -> None:
    """The health route answers ready."""
    if health.state == "loading":
        # Polled until the deadline, so the wait is the configured one (a loaded machine may
        # add a fraction of a second that would only confuse the line).
        fail(f"{health.url} is still loading after {ctx.endpoint.ready_timeout:g}s "
             f"(ready_timeout {ctx.endpoint.ready_timeout:g}s); last answer: {health.problem}",
             "wait for the model to finish loading, or raise ready_timeout in fleet.yaml")
    if health.state == "down":
        fail(health.line(), health.fix)


HEALTH = Check("test_health", "health", probe, judge)
