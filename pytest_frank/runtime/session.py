"""The fleet for one pytest session: a Target per endpoint, and the probe phase that runs the
selected checks' probes for every endpoint at once before any check judges."""

from __future__ import annotations

import functools
import importlib
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable

from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.target import (
    STRAGGLER_WAIT,
    Fleetwide,
    Probe,
    Target,
    digester_of,
    runs_first,
)
from pytest_frank.transport import http
from pytest_frank.transport.interrupt import Interrupts

if TYPE_CHECKING:
    from pytest_frank.record.results import Run
    from pytest_frank.runtime.probes import Health

Work = list[tuple[Probe, "str | None"]]  # the probes (and cases) one endpoint's checks need
# Imported by the probes on first use, beside each route's SDK (Wire.sdk_modules).
PROBE_MODULES = ("prometheus_client.parser",)


class FrankSession:
    def __init__(self, fleet: dict[str, Endpoint], timeout: float, offline: bool = False,
                 baseline: Run | None = None):
        self.targets: dict[str, Target] = {}
        # what every endpoint shares, the targets themselves included as each one's peers
        self.fleetwide = Fleetwide.of(fleet, self.targets, offline, baseline)
        self.stop = self.fleetwide.stop  # an interrupt's: no more requests, none in flight
        self.interrupts = Interrupts(self.stop)
        self.targets.update({name: Target(ep, timeout, self.fleetwide)
                             for name, ep in fleet.items()})
        self.plan: dict[str, Work] = {}
        self._probed: set[str] = set()
        self._warming: threading.Thread | None = None

    def warm(self) -> None:
        """Import the client libraries the probes will use, and build the shared TLS context, in
        the background: an SDK takes a second or more of CPU to import, which otherwise the first
        generation waits for. Started when the fleet is loaded, it overlaps collection and any
        `launch:` server's load."""
        sdks = {m: None for t in self.targets.values() for m in t.driver.wire.sdk_modules}
        self._warming = threading.Thread(target=_warm, args=([*sdks, *PROBE_MODULES],),
                                         name="frank-warm", daemon=True)
        self._warming.start()

    def warmed(self) -> None:
        """Wait for `warm` to end. The probes import the same modules, and two threads entering
        a package's circular imports at different points can see a half-initialised module; nor
        may the process exit with an import under way."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None

    def health(self, name: str) -> Health:
        from pytest_frank.runtime import probes

        target = self.targets[name]
        seen = target.need(probes.health)
        if isinstance(seen, probes.Health):
            return seen
        # the probe itself broke on what the endpoint sent: that endpoint is down, no more
        return probes.Health(state="down", problem=seen.failure or "no health answer",
                             url=target.url(target.driver.health_path))

    def probe_all(self, names: list[str]) -> None:
        """Probe the named endpoints side by side; each one's probes share its limiter."""
        names = [n for n in names if n not in self._probed]
        self._probed.update(names)
        # Launches first, one after another: local servers share the machine's cores. Each
        # runs in a process of its own, started ahead, so their Python starts overlap.
        launched = [n for n in names if self.targets[n].launched.pending()]
        if len(launched) > 1:
            from pytest_frank.local import launch

            launch.prestart(len(launched))
        for name in names:
            self.targets[name].start()
        if len(launched) > 1:
            launch.end_spares()  # none left where every launch took one
        self.warmed()
        # The deadlines start now: waiting for our own imports is no endpoint's slowness.
        for name in names:
            self._bound(name)
        if not names:
            return
        _each(self._probe_endpoint, names, len(names), self.stop)

    def _bound(self, name: str) -> None:
        """fleet.yaml's deadline for the endpoint, where it sets one. Without it a healthy slow
        endpoint takes the time its answers need, and a dripping one is bounded all the same:
        its first answer cut as too slow stops its generations and leaves it BOUND_SLACK for
        its quick probes (Target.answered_late), ready_timeout + 4 x timeout + 5 s at most."""
        target = self.targets[name]
        seconds = target.endpoint.deadline
        if seconds:
            target.pacing.deadline.bound(seconds, f"the endpoint's deadline ({seconds:g}s, fleet.yaml "
                                           f"deadline)")

    def bound_run(self, seconds: float) -> None:
        for target in self.targets.values():
            target.pacing.deadline.bound(seconds, f"the run's deadline (--frank-deadline {seconds:g}s)")

    def _probe_endpoint(self, name: str) -> None:
        target = self.targets[name]
        if not self.health(name).ready:
            return  # its checks are skipped as blocked; nothing more to ask of it
        from pytest_frank.runtime import identify, probes

        work = self.plan.get(name, [])
        if work and target.driver.owned_by:  # which engine it is, for any failure's first line
            work = [*work, (identify.engine, None)]
        work = [*work, (identify.identity, None)]  # which build serves what, for the reports
        # A probe that judges every reply: its digester keeps what it needs of each generation
        # from the first one on, and it runs after all the others.
        last = [job for job in work if digester_of(job[0]) is not None]
        for probe, _ in last:
            digester = digester_of(probe)
            if digester is not None:
                target.collect(digester)
        # The model list, where a check reads it, before anything else: the cheapest request
        # that needs the key, so a refused key is met there, at the first check a report lists,
        # and costs one request (Target.heard). A finished GET leaves no counter moving for the
        # probes that measure through them.
        listed = [job for job in work if job == (probes.served, None)]
        first = [*listed, *(job for job in work if runs_first(job[0]))]
        for job in first:  # before any other traffic of the endpoint's, one at a time
            if self.stop.why:
                return
            target.need(*job)
        rest = [job for job in work if job not in first and job not in last]
        _each(lambda job: target.need(*job), rest, target.pacing.limiter.limit, self.stop)
        for job in last:  # they read what every other probe received
            if self.stop.why:
                return
            target.need(*job)

    def close(self) -> None:
        for target in self.targets.values():
            target.close()


def _each(fn: Callable, items: Iterable, workers: int, stop: http.Stop) -> None:
    """`fn(item)` for every item on up to `workers` threads; returns when all are done, or
    shortly after a stop. The threads wait in a loop with a timeout, so the main thread stays
    free to take a signal; they are daemons, so one stuck where a stop cannot reach (a DNS
    lookup, a connect to a host that drops packets) does not hold the process's exit."""
    queue, failed, lock = list(items), [], threading.Lock()

    def work() -> None:
        while not stop.why:
            with lock:
                if not queue:
                    return
                item = queue.pop(0)
            try:
                fn(item)
            except BaseException as exc:  # raised again in the caller's thread
                failed.append(exc)
                return

    threads = [threading.Thread(target=work, name="frank-probe", daemon=True)
               for _ in range(max(1, min(workers, len(queue))))]
    for thread in threads:
        thread.start()
    stopped = None
    for thread in threads:
        while thread.is_alive():
            thread.join(0.1)
            if stop.why:
                stopped = stopped or time.monotonic()
                if time.monotonic() - stopped > STRAGGLER_WAIT:
                    return
    if failed:
        raise failed[0]


def _warm(modules: list[str]) -> None:
    steps: list[Callable[[], object]] = [
        http.tls, *(functools.partial(importlib.import_module, m) for m in modules)]
    for step in steps:
        try:
            step()
        except Exception:  # what fails here fails again where it is needed, and says so there
            pass
