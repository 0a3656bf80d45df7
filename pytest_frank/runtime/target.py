"""One endpoint under verification: its fleet entry, driver, HTTP client, request limiter, local
server and the observations of the probes already run (each probe runs once per session)."""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as NotYet
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from pytest_frank.drivers import Driver, driver_for
from pytest_frank.fleet import DEFAULT_TIMEOUT, Endpoint
from pytest_frank.outcome.observation import Obs, Observation, Unseen
from pytest_frank.outcome.verdict import Text
from pytest_frank.runtime.broken import Breakage, Broken, Key, NotSent, route_named
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.transport import http

if TYPE_CHECKING:
    from pytest_frank.record.results import Row

STRAGGLER_WAIT = 1.0  # after a stop, how long a probe still running is waited for
BOUND_SLACK = 5.0  # after an answer too slow to wait for: the endpoint's quick probes
Probe = Callable[..., Observation]  # probe(target) or, for a cased check, probe(target, case)
# The probes running in this thread, outermost first (a probe may need another).
_PROBING: contextvars.ContextVar[tuple[Key, ...]] = contextvars.ContextVar("frank_probing",
                                                                          default=())


class DecodeFloor(Protocol):
    """What the runtime reads of the perf claim's options (pytest_frank.claims.perf.Options),
    which this layer cannot import: the decode speed an answer is waited for."""

    @property
    def min_decode_tps(self) -> float | None: ...


class TooSlow(Exception):
    """A generation not sent: an earlier answer of this endpoint was cut as too slow."""


class KeyRefused(Exception):
    """A request not sent: the endpoint already refused the key the fleet gives (or its lack)."""


@dataclass
class Spend:
    """What the battery cost an endpoint: the generations it sent, the tokens they made, the
    wall time from its first generation going out to its last answer, and the plan's minimum:
    each distinct request generated once, at the budget it needed."""

    generations: int = 0
    tokens: int = 0
    started: float | None = None  # monotonic: the first generation went out
    ended: float | None = None  # and the last answer came back
    # request (less its budget) -> (the largest budget it was asked with, the tokens made at
    # it): a cut ask asked again with more room needed only the larger ask
    needed: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return (self.ended - self.started) if self.started is not None and self.ended else 0.0

    @property
    def min_tokens(self) -> int:
        return sum(made for _, made in self.needed.values())

    def record(self) -> dict:
        return {"generations": self.generations, "tokens": self.tokens,
                "time_to_verdict_s": round(self.seconds, 3), "min_tokens": self.min_tokens}


@dataclass
class Slow:
    """The first answer of an endpoint that a timeout or a deadline cut, and which probe saw it;
    `busy` says so where the server was saturated then."""

    key: Key
    line: str
    busy: str | None = None
    fix: str | None = None


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


def _plain(error: str) -> str:
    """A cut request's line without its guess at the cause, which the server's load replaces."""
    return error.removesuffix(http.HANGS).removesuffix(http.SILENT)


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


class Target:
    def __init__(self, endpoint: Endpoint, timeout: float = DEFAULT_TIMEOUT):
        self.endpoint = endpoint
        self.name = endpoint.name
        self.driver = driver_for(endpoint.engine).with_api(endpoint.api)
        self.timeout = float(endpoint.timeout or timeout)
        self.limiter = http.Limiter(endpoint.concurrency)
        self.deadline = http.Deadline()
        self.stop = http.Stop()  # the session's, shared by every endpoint
        self.slow: Slow | None = None
        self.spend = Spend()
        self.thought: int | None = None  # the longest thinking answer yet (tokens, all of it)
        self.asking: dict[str, Any] = {}  # a shared request's key -> (the request, how to ask)
        self.generating = 0  # generations of this battery's in flight on the endpoint now
        self.held: set[Key] = set()  # probes whose generations were not sent after `slow`
        self.refusal: Refusal | None = None
        self.refused: set[Key] = set()  # probes that met `refusal`: saw it, or were not sent
        self._keyed = False  # the model list or a generation answered: the key is accepted
        self.breakage = Breakage(endpoint, self.driver)  # transport faults, by route
        self.cut: set[Key] = set()  # probes a stop cut short: nothing to judge
        self.judged: dict[Key, str] = {}  # the selected tests' probes: the first test of each
        self.offline = False  # the config gate: probes read fleet.yaml and files, no endpoint
        self.launch_error: str | None = None
        self._server: Any = None  # launch.LaunchedServer
        self._launch_log: Any = None  # llama_log.ServerLog of a launched server, kept after it stops
        self._http: Any = None
        self._sdks: dict[str, Any] = {}  # the official client of each route asked on
        self._drivers: dict[str, Driver] = {}
        self._lock = threading.RLock()
        self._observed: dict[Key, Future[Any]] = {}
        self.took: dict[Key, float] = {}  # each probe's wall seconds, for the tests' durations
        self._shared: dict[str, http.Exchange] = {}  # per GET route: what every later read gets
        self.peers: dict[str, Target] = {}  # the fleet's targets, for claims that compare twins
        self.baseline: list[Row] = []  # this endpoint's rows in the --frank-baseline run
        self.digester: Digester | None = None
        self.digests: list[Any] = []  # what `digester` kept of every generation, in order

    def lock(self) -> AbstractContextManager[Any]:
        return self._lock

    def peer(self, name: str | None) -> Target | None:
        """Another endpoint of the fleet, by name (a twin or replica to compare with); a
        `launch:` one is started here if its own checks did not start it."""
        twin = self.peers.get(name) if name else None
        if twin is not None:
            twin.start()
        return twin

    # -- requests: every one goes through the endpoint's limiter and is recorded ----------------
    def url(self, path: str) -> str:
        return self.endpoint.root + path

    def headers(self) -> dict[str, str]:
        return {**self.endpoint.headers, **self.driver.auth_headers(self.endpoint.api_key)}

    def get(self, path: str) -> http.Exchange:
        """A GET of `path`. A route cut for what it does (a drip, a hang, an answer past the
        cap) is asked once a session, and so is a model list read whole: every later read gets
        that exchange at once. (One in flight is not waited for: its reader may be waiting for
        this thread's `exclusive()` block.)"""
        with self._lock:
            earlier = self._shared.get(path)
        if earlier is not None:
            self.heard(earlier)  # a cut read shared is that fault met again
            return http.shared(earlier)
        self._admit(route_named("GET", path))
        ex = http.send(self.client(), "GET", self.url(path), headers=self.headers())
        self.heard(ex)
        if self._once(path, ex):
            with self._lock:
                self._shared.setdefault(path, ex)
        return ex

    def _once(self, path: str, ex: http.Exchange) -> bool:
        """Whether this read stands for the session: a costly cut, or the model list."""
        return ex.costly or (path == self.driver.models_path and ex.ok)

    def post(self, path: str, body: Any) -> http.Exchange:
        self._admit(route_named("POST", path, body))
        ex = http.send(self.client(), "POST", self.url(path), headers=self.headers(),
                       json_body=body)
        self.heard(ex)
        return ex

    def exclusive(self) -> AbstractContextManager[None]:
        """Nothing else in flight on this endpoint inside the block (server-wide counters).
        Run any probe the block needs (`model_name()`) first: one waiting outside would wait
        for the block to end."""
        return self.limiter.exclusive()

    def at_once(self, calls: list[Callable[[], Any]]) -> list[Any]:
        """Run `calls` together, each in its own thread, inside this thread's `exclusive()`
        block: their requests are in flight at once and nothing else of the battery's is. Each
        runs in a copy of this thread's context (the probe it serves, its evidence); their
        results come back in order, and the first one that raised raises here."""
        holder = threading.get_ident()

        def helped(call: Callable[[], Any]) -> Any:
            with self.limiter.helping(holder):
                return call()

        futures: list[Future[Any]] = []
        for call in calls:
            future: Future[Any] = Future()
            context = contextvars.copy_context()

            def run(future=future, call=call, context=context) -> None:
                try:
                    future.set_result(context.run(helped, call))
                except BaseException as exc:  # handed to the caller's thread
                    future.set_exception(exc)

            threading.Thread(target=run, daemon=True, name=f"frank-{self.name}").start()
            futures.append(future)
        return [future.result() for future in futures]

    @property
    def floor(self) -> float:
        """The slowest decode (tokens/s) an answer is waited for: fleet.yaml's min_tokens_per_s,
        else the decode speed perf asserts, else the reader's default."""
        return self._floor()[0]

    @property
    def floor_from(self) -> str:
        """The setting `floor` comes from, as a message names it."""
        return self._floor()[1]

    def _floor(self) -> tuple[float, str]:
        claimed = self._claimed_decode()
        if self.endpoint.min_tokens_per_s:
            return float(self.endpoint.min_tokens_per_s), "min_tokens_per_s"
        if claimed:
            return float(claimed), "expect.perf.min_decode_tps"
        return http.MIN_TOKENS_PER_S, "the default min_tokens_per_s"

    def _claimed_decode(self) -> float | None:
        """The decode speed the perf claim asserts, from its parsed options."""
        try:
            perf: DecodeFloor = self.endpoint.options("perf")
        except LookupError:  # an entry read without its claims (a library caller's): none
            return None
        return perf.min_decode_tps

    def client(self):
        with self._lock:
            if self._http is None:
                self._http = http.client(self.timeout, self.limiter, self.deadline, stop=self.stop,
                                         floor=self.floor, quiet=self.driver.abandon_quiet_s,
                                         floor_from=self.floor_from)
            return self._http

    def driver_on(self, api: str | None = None) -> Driver:
        """The driver generating on `api`'s route (None: the endpoint's own)."""
        if api is None:
            return self.driver
        with self._lock:
            return self._drivers.setdefault(api, self.driver.with_api(api))

    def sdk(self, api: str | None = None):
        """The official client of `api`'s route (None: the endpoint's own), on the same
        recorded HTTP client."""
        driver = self.driver_on(api)
        with self._lock:
            if driver.api not in self._sdks:
                self._sdks[driver.api] = driver.wire.sdk_client(self.endpoint, self.client(),
                                                           self.timeout)
            return self._sdks[driver.api]

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
                if key in self.refused:
                    self.refused.update(_PROBING.get())
                broken = self.breakage.met.get(key)  # and by a broken route, alike
                if broken is not None:
                    self.breakage.meet(broken, _PROBING.get())
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
                    obs = self._not_sent()
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
        with self._lock:
            kept = {id(ex) for ex in self._shared.values()}
        for ex in seen:
            if id(ex) not in kept:
                ex.settle()

    def recorded(self, api: str, ex: http.Exchange) -> None:
        """A generation's exchange on `api`'s route, its body still whole: the digester keeps
        what it judges of it later (the probes settle each body to its head once read)."""
        if self.digester is None:
            return
        probing = _PROBING.get()
        found = self.digester(api, ex, probing[-1] if probing else ("", None),
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
        self._admit(self.breakage.generation(self.driver_on(api).api, stream))
        slow = self.slow
        if slow is not None:
            raise TooSlow(slow.line)

    def sending(self, delta: int) -> None:
        """A generation goes out (+1) or is done (-1): the battery's own share of the load."""
        with self._lock:
            self.generating += delta

    def spent(self, tokens: int, asked: str = "", budget: int | None = None,
              started: float | None = None, ended: float | None = None) -> None:
        """One generation went out; it made `tokens` tokens (the server's count, else pieces).
        `asked` names the request less its budget: asked again with a larger budget, only the
        larger ask counts toward the plan's minimum; asked again alike, each does."""
        with self._lock:
            spend = self.spend
            spend.generations += 1
            spend.tokens += tokens
            had, made = spend.needed.get(asked, (-1, 0))
            size = budget if budget is not None else 0
            if size >= had:
                spend.needed[asked] = (size, made + tokens if size == had else tokens)
            if started is not None:
                spend.started = started if spend.started is None else min(spend.started, started)
            if ended is not None:
                spend.ended = ended if spend.ended is None else max(spend.ended, ended)

    def learn(self, thought: int) -> None:
        """An answer that thought, and ended, after `thought` tokens: later asks of this
        endpoint start from it (chat.learned_budget)."""
        with self._lock:
            self.thought = max(self.thought or 0, thought)

    def answered_late(self, ex: http.Exchange) -> Slow:
        """The first answer cut as too slow stops the endpoint's generations; the server's load
        then says whether it is saturated (slow, not hung)."""
        said = f"{ex.method} {ex.url.removeprefix(self.endpoint.root)}: "
        with self._lock:
            first = self.slow is None
            slow = self.slow = self.slow or Slow(self._blamed(), said + (ex.error or ""))
            if first:
                self.deadline.bound(BOUND_SLACK, f"the endpoint's last {BOUND_SLACK:g}s after "
                                                 "an answer too slow to wait for")
        if first and not self.stop.why:
            self._saturation(slow, said, ex)
        return slow

    def _saturation(self, slow: Slow, said: str, ex: http.Exchange) -> None:
        """The server's load after the cut, read against the battery's own requests: the cut one
        (the engine may not have dropped it yet) and any others still in flight."""
        from pytest_frank.runtime.probes import server_load

        with self._lock:
            others = self.generating
        try:
            with http.recording(propagate=False):  # the cut request stays the evidence's last
                seen = server_load(self)
        except NotSent:  # its routes broke alike: the load is not known, nor said
            return
        error = ex.error or ""
        slow.fix = self._slower_fix(ex.progress > 0 or bool(seen.decoded))
        if not seen.saturated:
            return
        if others == 0 and seen.held() <= 1:  # the one busy slot may be the cut request's own
            running = (f", {seen.decoded} tokens decoded" if seen.decoded is not None else "")
            key, budget = http.budget_of(ex.request_json)
            if seen.decoded is not None and budget is not None and seen.decoded > budget:
                slow.busy = (f"the one request the server was running is this one "
                             f"({seen.line()}{running} of a request capped at {key}={budget}): "
                             f"the cap is not applied, so the answer runs on")
                slow.fix = (f"update the engine ({key} must cap the answer); a proxy in front "
                            f"must pass {key} through")
                ex.error = f"{_plain(error)}: {slow.busy}"
                slow.line = said + ex.error
                return
            slow.busy = (f"the one request the server was running is this one "
                         f"({seen.line()}{running}; nothing else of the battery's in flight): "
                         f"slow, not hung, and not busy with others")
            ex.error = f"{_plain(error)}: {slow.busy}"
            slow.line = said + ex.error
            return
        slow.busy = f"the server is saturated ({seen.line()}): slow, not hung"
        ex.error = f"{_plain(error)}: {slow.busy}"
        slow.line = said + ex.error
        lower = (f"lower `concurrency` for this endpoint in fleet.yaml (now "
                 f"{self.limiter.limit}) or " if self.limiter.limit > 1 else "")
        slow.fix = (f"the server is busy, not broken: {lower}run the battery at a quieter time "
                    "(or give the server more slots); restarting it would only drop the "
                    "requests in flight")

    def _slower_fix(self, producing: bool) -> str:
        """More time for a server that is slow: the settings that bound the wait, as set now;
        conditional where nothing showed it generating."""
        more = (f"give its answers more time: lower `min_tokens_per_s` (now {self.floor:g} "
                f"tok/s, {self.floor_from}) below the speed it decodes at under the battery's "
                f"load, or raise `timeout` (now {self.timeout:g} s) for this endpoint in "
                f"fleet.yaml")
        if producing:
            return f"the server is slow, not broken: {more}"
        return (f"if the server is only slow (its log shows this request's tokens being "
                f"generated), {more}; if it generated nothing, read its log for a stuck request")

    def _blamed(self) -> Key:
        # The innermost running probe that a test judges (one probe may need another's
        # observation, whose own test may not be selected).
        probing = _PROBING.get() or (("", None),)
        return next((key for key in reversed(probing) if key in self.judged), probing[-1])

    def _not_sent(self) -> Unseen:
        """A generation not sent: its probe is held, and so is every probe running it (one
        that needs another's observation waits on the same unsent answer)."""
        assert self.slow is not None
        self.held.update(key for key in _PROBING.get() if key != self.slow.key)
        return Unseen(failure=self.slow.line, fix=self.slow.fix)

    # -- one refused key, or one broken transport, stops the endpoint's requests ---------------
    def _admit(self, route: str | None = None) -> None:
        """Before a probe's request on `route` (None: one not known yet): none goes out once
        the endpoint refused the key, since it would carry the same one, nor once that route
        (or every route) broke alike on every request (runtime.broken). Only the probes are
        held: a test of your own that asks in the test phase (`endpoint.get`) is sent,
        whatever the probes met."""
        if not _PROBING.get():
            return
        if self.refusal is not None:
            raise KeyRefused(self.refusal.line)
        with self._lock:
            broken = self.breakage.closed(route)
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
                self.breakage.heard(ex, probing, self._blamed(), api)
        if not probing or ex.status is None or path == self.driver.health_path:
            return
        accepts = path == self.driver.models_path or ex.method == "POST"
        with self._lock:
            if 200 <= ex.status < 300 and accepts:
                self._keyed = True
            if ex.status not in REFUSALS or self._keyed:
                return
            self.refused.update(probing)
            if self.refusal is None:
                said = self.driver.reason(ex)
                self.refusal = Refusal(
                    self._blamed(), ex, f"{ex.method} {path} {said}", f"{ex.url} {said}",
                    known_fix(self.driver, self.driver.error_message(ex), ex.status))

    def refused_by(self, key: Key) -> Refusal | None:
        """The refusal the probe `key` met (it saw it, or was not sent after it), if any. Where
        the probe that saw it is judged by no selected test (a probe another one needs), the
        first test that asks fails with it instead, so a refused key is always one failure."""
        with self._lock:
            refusal = self.refusal
            if refusal is None or key not in self.refused:
                return None
            if refusal.key not in self.judged:
                refusal.key = key
            return refusal

    def broken_by(self, key: Key) -> Broken | None:
        """The breakage the probe `key` met (it saw it, or was not sent after it), if any. As
        for a refused key, where the probe that saw it is judged by no selected test, the first
        test that asks fails with it instead: a broken transport is always one failure."""
        with self._lock:
            broken = self.breakage.met.get(key)
            if broken is not None and broken.key not in self.judged:
                broken.key = key
            return broken

    def _not_carried(self, broken: Broken) -> Unseen:
        """A request not sent after its route broke alike on every request: its probe met the
        breakage, and so did every probe running it."""
        with self._lock:
            self.breakage.meet(broken, _PROBING.get())
        return Unseen(failure=broken.failure, fix=broken.fix)

    def _not_admitted(self) -> Unseen:
        """A request not sent after the key was refused: its probe met the refusal, and so did
        every probe running it."""
        assert self.refusal is not None
        with self._lock:
            self.refused.update(_PROBING.get())
        return Unseen(failure=self.refusal.failure, fix=self.refusal.fix)

    # -- a local server started for the session (fleet.yaml `launch:`) ------------------------
    def to_launch(self) -> bool:
        """A `launch:` endpoint whose server has not been started (or failed to) yet."""
        return bool(self.endpoint.launch) and self._server is None and not self.launch_error

    def start(self) -> None:
        spec = self.endpoint.launch
        with self._lock:
            if not spec or self._server is not None or self.launch_error:
                return
            from pytest_frank.local.launch import LaunchError, launch

            try:
                # a process of its own: its own llama.cpp log, for its own endpoint's report
                self._server = launch(spec, own_process=True)
            except LaunchError as exc:
                self.launch_error, self._launch_log = str(exc), exc.log
                return
            self.endpoint.url, self._launch_log = self._server.url, self._server.log

    def launched_build(self) -> str | None:
        """The package that serves a `launch:` endpoint (its llama.cpp has no build number)."""
        return self._server.build if self._server is not None else None

    def backend(self) -> tuple[str, str] | None:
        """("cpu" or "gpu", where read) for the server the model runs on, where known: a
        launched server's devices, else what the driver reads in the slot routes or the log."""
        if self._server is not None and self._server.backend is not None:
            return self._server.backend
        from pytest_frank.runtime.probes import slot_shape

        shape = self.need(slot_shape)
        log = self._launch_log.text() if self._launch_log is not None else ""
        return self.driver.launch.backend(getattr(shape, "payloads", {}), log)

    def launch_log(self) -> str | None:
        """The end of llama.cpp's log for a `launch:` endpoint (its start, its warnings, why it
        failed), masked and inert for a report; None when nothing was launched here or the log
        stayed on stderr. Still there after the server stopped."""
        return self._launch_log.tail() if self._launch_log is not None else None

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
