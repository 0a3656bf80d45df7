"""health: the engine's health route answers ready; a model still loading is waited for."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pytest_frank.http import Exchange
from pytest_frank.verdict import fail

POLL_FIRST, POLL_MAX = 0.25, 2.0


@dataclass
class Health:
    state: str  # ready | loading | down
    detail: str
    url: str
    waited: float = 0.0
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def line(self) -> str:
        return f"{self.url}: {self.detail}"


def probe(target) -> Health:
    target.start()
    url = target.url(target.driver.health_path)
    if target.launch_error:
        return Health("down", f"the local server could not be launched: {target.launch_error}", url)
    deadline = time.monotonic() + target.endpoint.ready_timeout
    start, pause, seen = time.monotonic(), POLL_FIRST, []
    while True:
        ex = target.get(target.driver.health_path)
        seen = (seen + [ex])[-3:]
        state = target.driver.readiness(ex)
        if state.state != "loading" or time.monotonic() + pause > deadline:
            return Health(state.state, state.detail, url, time.monotonic() - start, seen)
        time.sleep(pause)
        pause = min(pause * 2, POLL_MAX)


def judge(health: Health, ready_timeout: float) -> None:
    if health.state == "loading":
        fail(f"{health.url} is still loading after {health.waited:.0f}s "
             f"(ready_timeout {ready_timeout:g}s); last answer: {health.detail}",
             "wait for the model to finish loading, or raise ready_timeout in fleet.yaml")
    if health.state == "down":
        fail(f"{health.line()}")
