"""Probes the runtime itself relies on, whatever the fleet asks: whether the endpoint is up
(health), which models it serves (the model list), how its slots are shaped, and how busy it is
now (`server_load`, read after an answer too slow to wait for). The health and slots claims judge
the first and the third; the session, the target, the fingerprint, `frank init` and the claims
that size their requests by the slots use them too."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from pytest_frank.drivers import Driver
from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.observation import Observation
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.runtime.launched import Launched
from pytest_frank.transport import http, metrics

POLL_FIRST, POLL_MAX = 0.25, 2.0
BROKEN_RETRIES = 2  # health asks a connection broken with no answer again this many times


class Reads(Protocol):
    """What these probes read of the endpoint under test: runtime.target.Target, which runs
    three of them itself (the model list, the slots, the load), so this module cannot name it."""

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def driver(self) -> Driver: ...

    @property
    def stop(self) -> http.Stop: ...

    @property
    def launched(self) -> Launched: ...

    def url(self, path: str) -> str: ...

    def get(self, path: str) -> http.Exchange: ...

    def start(self) -> None: ...

    def launch_log(self) -> str | None: ...


@dataclass(kw_only=True)
class Health(Observation):
    state: str  # ready | loading | down
    problem: str | None  # why it is not ready: the last answer, or why none came
    url: str
    waited: float = 0.0
    status: int | None = None  # the last answer's HTTP status; None where none came
    launched: bool = False  # a `launch:` server that could not start

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def line(self) -> str:
        return f"{self.url}: {self.problem or 'ready'}"


def health(target: Reads) -> Health:
    """Poll the health route until it answers ready, the endpoint's ready_timeout passes or the
    run is interrupted; a launched server is started first."""
    target.start()
    url = target.url(target.driver.health_path)
    if target.launched.error:
        return _not_launched(target, url)
    deadline = time.monotonic() + target.endpoint.ready_timeout
    start, pause, broken = time.monotonic(), POLL_FIRST, 0
    while True:
        ex = target.get(target.driver.health_path)
        state = target.driver.readiness(ex)
        left = deadline - time.monotonic()
        # A connection taken and closed with no answer at all is asked again, twice at most:
        # a busy server's HTTP layer may drop one, and the endpoint is judged on its answer.
        again = (state.state == "down" and ex.status is None and broken < BROKEN_RETRIES
                 and (ex.error or "").startswith(http.BROKE))
        broken += again
        if (state.state != "loading" and not again) or left <= 0:
            fix = known_fix(target.driver, target.driver.error_message(ex), ex.status)
            return Health(state=state.state, problem=state.problem, url=url,
                          waited=time.monotonic() - start, status=ex.status,
                          fix=fix if state.state == "down" else None)
        # The last poll lands on the deadline, not before it; an interrupt ends the wait.
        if target.stop.wait(min(pause, left)):
            return Health(state="loading", problem=f"not measured: {target.stop.why}", url=url,
                          waited=time.monotonic() - start)
        pause = min(pause * 2, POLL_MAX)


def _not_launched(target: Reads, url: str) -> Health:
    """A `launch:` that failed: llama.cpp's own error lines, and what its log means where the
    driver knows the words, with their usual fix."""
    log = target.launch_log() or ""
    problem = f"the local server could not be launched: {target.launched.error}"
    cause = target.driver.launch.start_failure(log)
    return Health(state="down", url=url, problem=f"{problem}; {cause}" if cause else problem,
                  fix=known_fix(target.driver, log) if cause else None, launched=True)


@dataclass(kw_only=True)
class Served(Observation):
    url: str
    ids: list[str]


def served(target: Reads) -> Served:
    ex = target.get(target.driver.models_path)
    if not ex.ok:
        return Served(url=ex.url, ids=[], failure=f"{ex.url} {target.driver.reason(ex)}",
                      fix=known_fix(target.driver, target.driver.error_message(ex), ex.status))
    if ex.json() is None:
        return Served(url=ex.url, ids=[],
                      failure=f"{ex.url} not a model list (not JSON): {ex.snippet(200)}")
    wrong = target.driver.shape_problem(target.driver.models_path, ex.json())
    if wrong:
        return Served(url=ex.url, ids=[], failure=f"{ex.url} not a model list: {wrong}")
    try:
        ids = target.driver.served_ids(ex.json())
    except (ValueError, KeyError, TypeError) as exc:
        return Served(url=ex.url, ids=[],
                      failure=f"{ex.url} not a model list ({exc}): {ex.snippet(200)}")
    return Served(url=ex.url, ids=ids)


@dataclass(kw_only=True)
class SlotShape(Observation):
    count: int | None = None
    ctx_per_slot: int | None = None
    source: str = ""
    ctx_train: int | None = None  # the model's training context, where the engine says
    payloads: dict = field(default_factory=dict)  # route -> JSON, for checks that read more


def slot_shape(target: Reads) -> SlotShape:
    payloads, last = {}, None
    for route in target.driver.slot_routes:
        last = target.get(route)
        if last.ok:
            wrong = target.driver.shape_problem(route, last.json())
            if wrong:
                return SlotShape(failure=f"the slot shape could not be read: {wrong}")
            payloads[route] = last.json()
    if last is None:
        return SlotShape(failure=f"a {target.driver.label} reports no slot shape")
    if not payloads:
        return SlotShape(failure=f"the slot shape could not be read: {last.url} "
                                 f"{target.driver.reason(last)}",
                         fix=known_fix(target.driver, target.driver.error_message(last),
                                                     last.status))
    count, ctx, source = target.driver.slot_shape(payloads)
    return SlotShape(count=count, ctx_per_slot=ctx, source=source, payloads=payloads,
                     ctx_train=target.driver.ctx_train(payloads),
                     route=source.split()[0] if source.startswith("/") else None)


@dataclass
class ServerLoad:
    """How busy the server is now, where it says: its slots, its running and queued requests."""

    busy: int | None = None
    slots: int | None = None
    running: float | None = None
    waiting: float | None = None
    decoded: int | None = None  # tokens the busy slots have generated so far, where said

    @property
    def saturated(self) -> bool:
        full = self.slots is not None and self.busy is not None and self.busy >= self.slots
        return full or bool(self.waiting)

    def held(self) -> float:
        """Requests the server holds: running (busy slots) and waiting."""
        running = self.busy if self.busy is not None else (self.running or 0)
        return running + (self.waiting or 0)

    def line(self) -> str:
        parts = []
        if self.slots is not None:
            parts.append(f"{self.busy} of {self.slots} slots busy")
        elif self.running is not None:
            parts.append(f"{self.running:g} running")
        if self.waiting is not None:
            parts.append(f"{self.waiting:g} waiting")
        return ", ".join(parts)


def server_load(target: Reads) -> ServerLoad:
    """A reading of the server's load (not kept: it is of the moment)."""
    driver, seen = target.driver, ServerLoad()
    if driver.load_slots_route:
        ex = target.get(driver.load_slots_route)
        counted = driver.busy_slots(ex.json()) if ex.ok else None
        if counted is not None:
            seen.busy, seen.slots = counted
            seen.decoded = driver.decoded_tokens(ex.json())
    if driver.metrics.load_series:
        scrape = metrics.scrape(target, driver.metrics.path)
        if scrape.ok:
            seen.running, seen.waiting = (scrape.total(name) for name in driver.metrics.load_series)
    return seen
