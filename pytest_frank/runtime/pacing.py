"""How an endpoint's answers are paced: how long one is waited for (the endpoint's timeout and
the slowest decode it is waited at), what the battery spent on it, and the first answer cut as
too slow, which stops its generations (each would take as long), with what the server's load
then says of it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.observation import Unseen
from pytest_frank.runtime.broken import Key, NotSent
from pytest_frank.transport import http

if TYPE_CHECKING:
    from pytest_frank.runtime.probes import ServerLoad

BOUND_SLACK = 5.0  # after an answer too slow to wait for: the endpoint's quick probes


@runtime_checkable
class DecodeFloor(Protocol):
    """What the runtime reads of the perf claim's options (pytest_frank.claims.perf.Options),
    which this layer cannot import: the decode speed an answer is waited for."""

    @property
    def min_decode_tps(self) -> float | None: ...


def decode_floor(endpoint: Endpoint) -> tuple[float, str]:
    """The slowest decode (tokens/s) an answer is waited for, and the setting it comes from as
    a message names it: fleet.yaml's min_tokens_per_s, else the decode speed perf asserts, else
    the reader's default."""
    if endpoint.min_tokens_per_s:
        return float(endpoint.min_tokens_per_s), "min_tokens_per_s"
    # an entry read without its claims (a library caller's) asserts no decode speed
    perf = endpoint.claims.parsed.get("perf") if endpoint.claims is not None else None
    claimed = perf.min_decode_tps if isinstance(perf, DecodeFloor) else None
    if claimed:
        return float(claimed), "expect.perf.min_decode_tps"
    return http.MIN_TOKENS_PER_S, "the default min_tokens_per_s"


class TooSlow(Exception):
    """A generation not sent: an earlier answer of this endpoint was cut as too slow."""


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

    def record(self) -> dict[str, Any]:
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


def _plain(error: str) -> str:
    """A cut request's line without its guess at the cause, which the server's load replaces."""
    return error.removesuffix(http.HANGS).removesuffix(http.SILENT)


class Pacing:
    """One endpoint's pace: its waits, its spend, its longest thinking answer, and the first
    answer cut as too slow (`slow`), after which its probes' generations are held."""

    __slots__ = ("endpoint", "timeout", "floor", "floor_from", "deadline", "limiter", "stop",
                 "slow", "held", "generating", "spend", "thought", "_lock")

    def __init__(self, endpoint: Endpoint, timeout: float, limiter: http.Limiter,
                 stop: http.Stop):
        self.endpoint = endpoint
        self.timeout = timeout
        self.floor, self.floor_from = decode_floor(endpoint)
        self.deadline = http.Deadline()
        self.limiter = limiter
        self.stop = stop
        self.slow: Slow | None = None
        self.held: set[Key] = set()  # probes whose generations were not sent after `slow`
        self.generating = 0  # generations of this battery's in flight on the endpoint now
        self.spend = Spend()
        self.thought: int | None = None  # the longest thinking answer yet (tokens, all of it)
        self._lock = threading.Lock()

    def check(self) -> None:
        """Before a generation: none goes out after an answer was cut as too slow."""
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

    def answered_late(self, ex: http.Exchange, blamed: Key,
                      load: Callable[[], ServerLoad]) -> Slow:
        """The first answer cut as too slow stops the endpoint's generations (the probe
        `blamed` saw it); the server's load (`load`) then says whether it is saturated."""
        said = f"{ex.method} {ex.url.removeprefix(self.endpoint.root)}: "
        with self._lock:
            first = self.slow is None
            slow = self.slow = self.slow or Slow(blamed, said + (ex.error or ""))
            if first:
                self.deadline.bound(BOUND_SLACK, f"the endpoint's last {BOUND_SLACK:g}s after "
                                                 "an answer too slow to wait for")
        if first and not self.stop.why:
            self._saturation(slow, said, ex, load)
        return slow

    def not_sent(self, probing: tuple[Key, ...]) -> Unseen:
        """A generation not sent: its probe is held, and so is every probe running it (one
        that needs another's observation waits on the same unsent answer)."""
        assert self.slow is not None
        self.held.update(key for key in probing if key != self.slow.key)
        return Unseen(failure=self.slow.line, fix=self.slow.fix)

    def _saturation(self, slow: Slow, said: str, ex: http.Exchange,
                    load: Callable[[], ServerLoad]) -> None:
        """The server's load after the cut, read against the battery's own requests: the cut one
        (the engine may not have dropped it yet) and any others still in flight."""
        with self._lock:
            others = self.generating
        try:
            with http.recording(propagate=False):  # the cut request stays the evidence's last
                seen = load()
        except NotSent:  # its routes broke alike: the load is not known, nor said
            return
        error = ex.error or ""
        slow.fix = self._slower_fix(ex.progress > 0 or bool(seen.decoded), error)
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

    def _slower_fix(self, producing: bool, error: str = "") -> str:
        """More time for a server that is slow: the settings that bound the wait, as set now;
        conditional where nothing showed it generating. Where a deadline cut the answer, that
        deadline is the setting: the per-answer ones did not end it."""
        label = self.deadline.label
        if label and error.startswith(label):
            where = ("`--frank-deadline`" if label.startswith("the run's")
                     else "`deadline` for this endpoint in fleet.yaml")
            more = f"give the run more time: raise {where}"
            if producing:
                return f"the server is slow, not broken, and {label} ended its answer: {more}"
            return (f"{label} ended this answer before any of it came: if the server is only "
                    f"slow (its log shows this request's tokens being generated), {more}; if it "
                    f"generated nothing, read its log for a stuck request")
        more = (f"give its answers more time: lower `min_tokens_per_s` (now {self.floor:g} "
                f"tok/s, {self.floor_from}) below the speed it decodes at under the battery's "
                f"load, or raise `timeout` (now {self.timeout:g} s) for this endpoint in "
                f"fleet.yaml")
        if producing:
            return f"the server is slow, not broken: {more}"
        return (f"if the server is only slow (its log shows this request's tokens being "
                f"generated), {more}; if it generated nothing, read its log for a stuck request")
