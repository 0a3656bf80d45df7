"""health: the engine's health route answers ready; a model still loading is waited for."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pytest_frank.checks import Check, Context
from pytest_frank.observation import Observation
from pytest_frank.verdict import fail

POLL_FIRST, POLL_MAX = 0.25, 2.0


@dataclass(kw_only=True)
class Health(Observation):
    state: str  # ready | loading | down
    detail: str
    url: str
    waited: float = 0.0

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def line(self) -> str:
        return f"{self.url}: {self.detail}"


def probe(target) -> Health:
    target.start()
    url = target.url(target.driver.health_path)
    if target.launch_error:
        return Health(state="down", url=url,
                      detail=f"the local server could not be launched: {target.launch_error}")
    deadline = time.monotonic() + target.endpoint.ready_timeout
    start, pause = time.monotonic(), POLL_FIRST
    while True:
        ex = target.get(target.driver.health_path)
        state = target.driver.readiness(ex)
        left = deadline - time.monotonic()
        if state.state != "loading" or left <= 0:
            fix = target.driver.known_fix(target.driver.error_message(ex), ex.status)
            return Health(state=state.state, detail=state.detail, url=url,
                          waited=time.monotonic() - start, fix=fix if state.state == "down" else None)
        # The last poll lands on the deadline, not before it; an interrupt ends the wait.
        if target.stop.wait(min(pause, left)):
            return Health(state="loading", detail=f"not measured: {target.stop.why}", url=url,
                          waited=time.monotonic() - start)
        pause = min(pause * 2, POLL_MAX)


def judge(health: Health, ctx: Context) -> None:
    """The health route answers ready."""
    if health.state == "loading":
        # Polled until the deadline, so the wait is the configured one (a loaded machine may
        # add a fraction of a second that would only confuse the line).
        fail(f"{health.url} is still loading after {ctx.endpoint.ready_timeout:g}s "
             f"(ready_timeout {ctx.endpoint.ready_timeout:g}s); last answer: {health.detail}",
             "wait for the model to finish loading, or raise ready_timeout in fleet.yaml")
    if health.state == "down":
        fail(health.line(), health.fix)


HEALTH = Check("test_health", "health", probe, judge)
