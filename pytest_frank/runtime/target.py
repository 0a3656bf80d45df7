"""One endpoint under verification, built whole from its fleet entry and what the session's
endpoints share: its driver, its parts (HTTP, `client`; pace, `pacing`; local server,
`launched`), the refusals and broken routes that stop its probes, and the observations of the
probes already run (each probe runs once per session)."""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as NotYet
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from pytest_frank.drivers import Driver, driver_for
from pytest_frank.fleet import DEFAULT_TIMEOUT, Endpoint
from pytest_frank.outcome.observation import Obs, Observation, Unseen
from pytest_frank.outcome.verdict import Text
from pytest_frank.runtime.broken import Breakage, Broken, Key, NotSent, route_named
from pytest_frank.runtime.client import EndpointClient
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.runtime.launched import Launched
from pytest_frank.runtime.pacing import BOUND_SLACK, DecodeFloor, Pacing, Slow, Spend, TooSlow
from pytest_frank.transport import http

if TYPE_CHECKING:
    import httpx2

    from pytest_frank.record.results import Row, Run

# Where they were defined before the target's parts had modules of their own.
__all__ = ["BOUND_SLACK", "DecodeFloor", "Slow", "Spend", "TooSlow"]

STRAGGLER_WAIT = 1.0  # after a stop, how long a probe still running is waited for
Probe = Callable[..., Observation]  # probe(target) or, for a cased check, probe(target, case)
# The probes running in this thread, outermost first (a probe may need another).
_PROBING: contextvars.ContextVar[tuple[Key, ...]] = contextvars.ContextVar("frank_probing",
                                                                          default=())


class KeyRefused(Exception):
    """A request not sent: the endpoint already refused the key the fleet gives (or its lack)."""


REFUSALS = (401, 403)  # the answers of a server that wants another key than the one sent


@dataclass
class Refusal:
    """The first answer of an endpoint that refused the fleet's key (or its lack), and which
    probe saw it. Every later request would carry the same key, so, as for a dead server, none
    is sent: that probe's test fails with the answer and the others are blocked, pointing at it."""

    key: Key
    ex: http.Exchange
    line: str  # "GET /v1/models answered 401: Invalid API Key", for the blocked tests' pointer
    failure: str  # the same with the full URL, for the test that fails
    fix: Text | None


def key_of(probe: Probe, case: str | None = None) -> Key:
    return f"{probe.__module__}.{probe.__qualname__}", case


def first_and_alone(probe: Callable[..., Obs]) -> Callable[..., Obs]:
    """Mark a probe that measures through server-wide counters or gauges: it runs before the
    endpoint's other probes, one at a time, so none of their requests (a grammar-bound tool
    call, one given up on and still generating) shares its window. The mark is the function's
    own, not a registry's: it is what the probe is, in every run."""
    probe.frank_first = True  # type: ignore[attr-defined]
    return probe


def runs_first(probe: Probe) -> bool:
    return getattr(probe, "frank_first", False) is True


# What a check that judges every reply keeps of one generation's exchange, while its body is
# whole: digest(api, exchange, the probe that sent it, driver) -> what it keeps, or None.
Digester = Callable[[str, "http.Exchange", Key, Driver], Any]


def after_all(digester: Digester) -> Callable[[Callable[..., Obs]], Callable[..., Obs]]:
    """Mark a probe that reads what the endpoint's other probes received: `digester` keeps
    what it needs of every generation as it comes (`Target.recorded`), and the probe runs once
    the others have all ended, sending nothing itself. The mark is the function's own, so the
    runtime needs no claim to know it."""
    def mark(probe: Callable[..., Obs]) -> Callable[..., Obs]:
        probe.frank_digester = digester  # type: ignore[attr-defined]
        return probe
    return mark


def digester_of(probe: Probe) -> Digester | None:
    return getattr(probe, "frank_digester", None)


@dataclass(frozen=True)
class Fleetwide:
    """What a session's endpoints share, handed to each Target as it is built: the run's stop
    switch, whether the run sends nothing (the config gate: probes read fleet.yaml and files),
    the fleet's targets by name (filled as the session builds them), the --frank-baseline run,
    and one limiter per server."""

    stop: http.Stop = field(default_factory=http.Stop)
    offline: bool = False
    peers: Mapping[str, Target] = field(default_factory=dict)
    baseline: Run | None = None
    # Names for one server (its routes, its replicas' names) share its limiter: its counters
    # and slots are one, so a measurement holds all of them. By server ("host:port").
    limiters: Mapping[str, http.Limiter] = field(default_factory=dict)

    @classmethod
    def of(cls, fleet: Mapping[str, Endpoint], peers: Mapping[str, Target],
           offline: bool = False, baseline: Run | None = None) -> Fleetwide:
        """The session's share for `fleet`: a server's limiter admits the fewest requests any
        of its names' `concurrency` allows."""
        limits: dict[str, int] = {}
        for ep in fleet.values():
            if ep.server:
                limits[ep.server] = min(limits.get(ep.server, ep.concurrency), ep.concurrency)
        return cls(http.Stop(), offline, peers, baseline,
                   {server: http.Limiter(limit) for server, limit in limits.items()})

    def limiter(self, endpoint: Endpoint) -> http.Limiter:
        shared = self.limiters.get(endpoint.server) if endpoint.server else None
        return shared or http.Limiter(endpoint.concurrency)

    def baseline_of(self, name: str) -> list[Row]:
        """The endpoint's rows in the --frank-baseline run."""
        return [r for r in self.baseline.rows if r.endpoint == name] \
            if self.baseline is not None else []


class Target:
    """Built whole by its one constructor: nothing is set on it afterwards. A target outside a
    session (`frank init`, a library caller) shares nothing (`Fleetwide()`)."""

    __slots__ = ("endpoint", "name", "driver", "timeout", "stop", "offline", "baseline",
                 "pacing", "client_part", "launched", "_breakage", "asking", "cut", "judged",
                 "took", "digests", "_peers", "_refusal", "_refused", "_keyed", "_lock",
                 "_observed", "_digester")

    def __init__(self, endpoint: Endpoint, timeout: float = DEFAULT_TIMEOUT,
                 fleetwide: Fleetwide | None = None):
        shared = fleetwide if fleetwide is not None else Fleetwide()
        self.endpoint = endpoint
        self.name = endpoint.name
        self.driver = driver_for(endpoint.engine).with_api(endpoint.api)
        self.timeout = float(endpoint.timeout or timeout)
        self.stop = shared.stop  # the session's, shared by every endpoint
        self.offline = shared.offline  # the config gate: probes read fleet.yaml and files
        self.baseline: list[Row] = shared.baseline_of(self.name)
        self.pacing = Pacing(endpoint, self.timeout, shared.limiter(endpoint), self.stop)
        self.client_part = EndpointClient(endpoint, self.driver, self.pacing)
        self.launched = Launched(endpoint.launch)
        self._breakage = Breakage(endpoint, self.driver)  # transport faults, by route
        self.asking: dict[str, Any] = {}  # a shared request's key -> (the request, how to ask)
        self.cut: set[Key] = set()  # probes a stop cut short: nothing to judge
        self.judged: dict[Key, str] = {}  # the selected tests' probes: the first test of each
        self.took: dict[Key, float] = {}  # each probe's wall seconds, for the tests' durations
        self.digests: list[Any] = []  # what the digester kept of every generation, in order
        self._peers = shared.peers  # the fleet's targets, for claims that compare twins
        self._refusal: Refusal | None = None
        self._refused: set[Key] = set()  # probes that met `refusal`: saw it, or were not sent
        self._keyed = False  # the model list or a generation answered: the key is accepted
        self._lock = threading.RLock()
        self._observed: dict[Key, Future[Any]] = {}
        self._digester: list[Digester] = []  # the one probe's that judges every reply, if any

    def lock(self) -> AbstractContextManager[Any]:
        return self._lock

    def peer(self, name: str | None) -> Target | None:
        """Another endpoint of the fleet, by name (a twin or replica to compare with); a
        `launch:` one is started here if its own checks did not start it."""
        twin = self._peers.get(name) if name else None
        if twin is not None:
            twin.start()
        return twin

    # -- requests: every one goes through the endpoint's limiter and is recorded ----------------
    def url(self, path: str) -> str:
        return self.client_part.url(path)

    def client(self) -> httpx2.Client:
        """The endpoint's recorded HTTP client (a check of your own may send on it)."""
        return self.client_part.client()

    def get(self, path: str) -> http.Exchange:
        """A GET of `path`. A route cut for what it does (a drip, a hang, an answer past the
        cap) is asked once a session, and so is a model list read whole: every later read gets
        that exchange at once. (One in flight is not waited for: its reader may be waiting for
        this thread's `exclusive()` block.)"""
        earlier = self.client_part.shared(path)
        if earlier is not None:
            self.heard(earlier)  # a cut read shared is that fault met again
            return http.shared(earlier)
        self._admit(route_named("GET", path))
        ex = self.client_part.send("GET", path)
        self.heard(ex)
        self.client_part.keep(path, ex)
        return ex

    def post(self, path: str, body: Any) -> http.Exchange:
        self._admit(route_named("POST", path, body))
        ex = self.client_part.send("POST", path, body)
        self.heard(ex)
        return ex

    def exclusive(self) -> AbstractContextManager[None]:
        """Nothing else in flight on this endpoint inside the block (server-wide counters).
        Run any probe the block needs (`model_name()`) first: one waiting outside would wait
        for the block to end."""
        return self.pacing.limiter.exclusive()

    def at_once(self, calls: list[Callable[[], Any]]) -> list[Any]:
        """Run `calls` together, each in its own thread, inside this thread's `exclusive()`
        block: their requests are in flight at once and nothing else of the battery's is. Each
        runs in a copy of this thread's context (the probe it serves, its evidence); their
        results come back in order, and the first one that raised raises here."""
        holder = threading.get_ident()
        limiter = self.pacing.limiter

        def helped(call: Callable[[], Any]) -> Any:
            with limiter.helping(holder):
                return call()

        futures: list[Future[Any]] = []
        for call in calls:
            future: Future[Any] = Future()
            context = contextvars.copy_context()

            def run(future: Future[Any] = future, call: Callable[[], Any] = call,
                    context: contextvars.Context = context) -> None:
                try:
                    future.set_result(context.run(helped, call))
                except BaseException as exc:  # handed to the caller's thread
                    future.set_exception(exc)

            threading.Thread(target=run, daemon=True, name=f"frank-{self.name}").start()
            futures.append(future)
        return [future.result() for future in futures]

    def driver_on(self, api: str | None = None) -> Driver:
        """The driver generating on `api`'s route (None: the endpoint's own)."""
        return self.client_part.driver_on(api)

    def sdk(self, api: str | None = None) -> Any:
        """The official client of `api`'s route (None: the endpoint's own), on the same
        recorded HTTP client."""
        return self.client_part.sdk(api)

    def model_name(self) -> str:
        """The name requests ask for: the fleet's alias, else the first model the server lists."""
        if self.endpoint.alias:
            return self.endpoint.alias
        from pytest_frank.runtime.probes import served

        seen = self.need(served)
        return seen.ids[0] if not isinstance(seen, Unseen) and seen.ids else "default"

    def served_context(self) -> int | None:
        """Tokens of context one conversation gets, where the engine says (llama.cpp /props
        n_ctx per slot, vLLM max_model_len); None where it does not."""
        from pytest_frank.runtime.probes import slot_shape

        shape = self.need(slot_shape)
        return None if isinstance(shape, Unseen) else shape.ctx_per_slot

    # -- probes: each runs once per session, its observation shared by every check -----------
    def need(self, probe: Callable[..., Obs], case: str | None = None) -> Obs | Unseen:
        """The probe's observation, run once per session; `Unseen` where the probe raised or a
        stop cut it."""
        key = key_of(probe, case)
        with self._lock:
            found = self._observed.get(key)
            owner = found is None
            future = self._observed[key] = Future() if found is None else found
        if owner:
            future.set_result(self._run(probe, case, key))
        while True:  # once stopped, a probe stuck in another thread is waited for no longer
            try:
                seen = future.result(timeout=STRAGGLER_WAIT if self.stop.why else 0.5)
            except NotYet:
                if self.stop.why:
                    self.cut.add(key)
                    return Unseen(failure=f"not measured: {self.stop.why}")
                continue
            with self._lock:  # a probe met by the key's refusal met it for those that need it
                if key in self._refused:
                    self._refused.update(_PROBING.get())
                broken = self._breakage.met.get(key)  # and by a broken route, alike
                if broken is not None:
                    self._breakage.meet(broken, _PROBING.get())
            return seen

    def measured(self, probe: Probe, case: str | None = None) -> bool:
        """Whether the probe ran to its end before any stop: its observation can be judged."""
        key = key_of(probe, case)
        future = self._observed.get(key)
        return future is not None and future.done() and key not in self.cut

    def _run(self, probe: Callable[..., Obs], case: str | None, key: Key) -> Obs | Unseen:
        token = _PROBING.set((*_PROBING.get(), key))
        began = time.monotonic()
        try:
            with http.recording(propagate=False) as seen:
                obs: Obs | Unseen
                try:
                    obs = probe(self) if case is None else probe(self, case)
                except TooSlow:
                    obs = self.pacing.not_sent(_PROBING.get())
                except KeyRefused:
                    obs = self._not_admitted()
                except NotSent as exc:
                    obs = self._not_carried(exc.broken)
                except Exception as exc:  # an endpoint's oddity is its own failure, not a crash
                    obs = Unseen(failure=f"{probe.__name__} could not read what {self.name} "
                                              f"sent: {type(exc).__name__}: {exc}")
        finally:
            _PROBING.reset(token)
            self.took[key] = time.monotonic() - began
        if self.stop.why:  # ended after the stop: whatever it saw may be the stop's doing
            self.cut.add(key)
        self._settle(seen)
        obs.exchanges = seen + [ex for ex in obs.exchanges if ex not in seen]
        return obs

    def _settle(self, seen: list[http.Exchange]) -> None:
        """The probe has read its answers: each keeps only its evidence's head, but a read
        every later one shares (`get`), which they read again."""
        kept = self.client_part.kept()
        for ex in seen:
            if id(ex) not in kept:
                ex.settle()

    def collect(self, digester: Digester) -> None:
        """Keep what `digester` keeps of every generation from now on (`recorded`): the probe
        that judges every reply runs after the others, and reads `digests`."""
        with self._lock:
            self._digester[:] = [digester]

    def recorded(self, api: str, ex: http.Exchange) -> None:
        """A generation's exchange on `api`'s route, its body still whole: the digester keeps
        what it judges of it later (the probes settle each body to its head once read)."""
        if not self._digester:
            return
        probing = _PROBING.get()
        found = self._digester[0](api, ex, probing[-1] if probing else ("", None),
                                  self.driver_on(api))
        if found is not None:
            with self._lock:
                self.digests.append(found)

    # -- one slow answer stops the endpoint's generations ------------------------------------
    def pace(self, api: str | None = None, stream: bool = False) -> None:
        """Before a generation on `api`'s route (None: the endpoint's own): none goes out after
        an answer was cut as too slow (each would take as long), nor after the key was refused
        or the route broke alike on every request. The probe that saw that answer fails with
        it; the others are held."""
        self._admit(self._breakage.generation(self.driver_on(api).api, stream))
        self.pacing.check()

    def answered_late(self, ex: http.Exchange) -> Slow:
        """The first answer cut as too slow stops the endpoint's generations; the server's load
        then says whether it is saturated (slow, not hung)."""
        from pytest_frank.runtime.probes import server_load

        return self.pacing.answered_late(ex, self._blamed(), lambda: server_load(self))

    def _blamed(self) -> Key:
        # The innermost running probe that a test judges (one probe may need another's
        # observation, whose own test may not be selected).
        probing = _PROBING.get() or (("", None),)
        return next((key for key in reversed(probing) if key in self.judged), probing[-1])

    # -- one refused key, or one broken transport, stops the endpoint's requests ---------------
    def _admit(self, route: str | None = None) -> None:
        """Before a probe's request on `route` (None: one not known yet): none goes out once
        the endpoint refused the key, since it would carry the same one, nor once that route
        (or every route) broke alike on every request (runtime.broken). Only the probes are
        held: a test of your own that asks in the test phase (`endpoint.get`) is sent,
        whatever the probes met."""
        if not _PROBING.get():
            return
        if self._refusal is not None:
            raise KeyRefused(self._refusal.line)
        with self._lock:
            broken = self._breakage.closed(route)
        if broken is not None:
            raise NotSent(broken)

    def heard(self, ex: http.Exchange, api: str | None = None) -> None:
        """An answer to a probe's request with the fleet's credentials (`get`, `post`, a
        generation): the first 401 or 403 stops the endpoint's probes, unless the model list
        or a generation was already answered, which shows the key is accepted and leaves the
        refusal to that route's own check (a proxy that forbids /metrics, say). The health
        route needs no key on the engines that have one, and a refused health check blocks
        the rest already."""
        path = ex.url.removeprefix(self.endpoint.root).split("?")[0]
        probing = _PROBING.get()
        if probing:
            with self._lock:
                self._breakage.heard(ex, probing, self._blamed(), api)
        if not probing or ex.status is None or path == self.driver.health_path:
            return
        accepts = path == self.driver.models_path or ex.method == "POST"
        with self._lock:
            if 200 <= ex.status < 300 and accepts:
                self._keyed = True
            if ex.status not in REFUSALS or self._keyed:
                return
            self._refused.update(probing)
            if self._refusal is None:
                said = self.driver.reason(ex)
                self._refusal = Refusal(
                    self._blamed(), ex, f"{ex.method} {path} {said}", f"{ex.url} {said}",
                    known_fix(self.driver, self.driver.error_message(ex), ex.status))

    def refused_by(self, key: Key) -> Refusal | None:
        """The refusal the probe `key` met (it saw it, or was not sent after it), if any. Where
        the probe that saw it is judged by no selected test (a probe another one needs), the
        first test that asks fails with it instead, so a refused key is always one failure."""
        with self._lock:
            refusal = self._refusal
            if refusal is None or key not in self._refused:
                return None
            if refusal.key not in self.judged:
                refusal.key = key
            return refusal

    def broken_by(self, key: Key) -> Broken | None:
        """The breakage the probe `key` met (it saw it, or was not sent after it), if any. As
        for a refused key, where the probe that saw it is judged by no selected test, the first
        test that asks fails with it instead: a broken transport is always one failure."""
        with self._lock:
            broken = self._breakage.met.get(key)
            if broken is not None and broken.key not in self.judged:
                broken.key = key
            return broken

    def _not_carried(self, broken: Broken) -> Unseen:
        """A request not sent after its route broke alike on every request: its probe met the
        breakage, and so did every probe running it."""
        with self._lock:
            self._breakage.meet(broken, _PROBING.get())
        return Unseen(failure=broken.failure, fix=broken.fix)

    def _not_admitted(self) -> Unseen:
        """A request not sent after the key was refused: its probe met the refusal, and so did
        every probe running it."""
        assert self._refusal is not None
        with self._lock:
            self._refused.update(_PROBING.get())
        return Unseen(failure=self._refusal.failure, fix=self._refusal.fix)

    # -- a local server started for the session (fleet.yaml `launch:`) ------------------------
    def start(self) -> None:
        """Start the endpoint's `launch:` server, once; nothing without `launch:`."""
        self.launched.start(self.endpoint)

    def backend(self) -> tuple[str, str] | None:
        """("cpu" or "gpu", where read) for the server the model runs on, where known: a
        launched server's devices, else what the driver reads in the slot routes or the log."""
        server = self.launched.server
        if server is not None and server.backend is not None:
            return server.backend
        from pytest_frank.runtime.probes import slot_shape

        shape = self.need(slot_shape)
        return self.driver.launch.backend(getattr(shape, "payloads", {}), self.launched.log_text())

    def launch_log(self) -> str | None:
        """The end of llama.cpp's log for a `launch:` endpoint (its start, its warnings, why it
        failed), masked and inert for a report; None when nothing was launched here or the log
        stayed on stderr. Still there after the server stopped."""
        return self.launched.log_tail()

    def close(self) -> None:
        self.client_part.close()
        self.launched.stop()
