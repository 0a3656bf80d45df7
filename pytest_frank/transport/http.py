"""The one HTTP stack every byte from an endpoint comes through.

httpx2 (the stack the openai and anthropic clients run on) with one transport, `Recorder`, under
raw requests and the official clients alike. For each request it waits its turn at the endpoint's
`Limiter`, keeps an `Exchange` as evidence, reads the answer through a cap on decoded bytes and a
wall-clock deadline, and hands streams on as they arrive so token clocks stay true.
"""

from __future__ import annotations

import contextvars
import functools
import json
import re
import shlex
import socket
import ssl
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx2

from pytest_frank.base import redact

MAX_BODY = 4 * 1024 * 1024  # decoded bytes: a hostile endpoint must not make us read forever
CONNECT_TIMEOUT = 5.0
DEADLINE_FACTOR = 4  # an answer with no token budget may take this many read timeouts
MIN_TOKENS_PER_S = 5.0  # the slowest decode a generation is waited for: its budget over this
FLOOR_FROM = "min_tokens_per_s"  # the setting that floor is, where nothing else names it
STREAM_ENDS = (b"data: [DONE]", b"data:[DONE]", b"event: message_stop")  # OpenAI, Anthropic
EVENT_SLACK = 64  # a stream's events beside its tokens: role, finish, usage, block starts and ends
# Past its tokens' events and the slack a stream has ended on every engine; it is given as many
# again to end (or `timeout`, whichever comes first), not `timeout` at any pace: an endless
# stream of 20 events a second had run 10 s more than that for each one cut.
PAST_CAP = EVENT_SLACK
EVIDENCE_HEAD = 64 * 1024  # what an exchange keeps of a body that was cut: enough to show
KEY_HEADERS = ("authorization", "x-api-key")
# The kinds of transport fault (Exchange.fault), each as the failure names it.
RESET = "connection reset"  # a TCP reset: a crashed worker, a proxy or a firewall cut it
CLOSED = "connection closed early"  # before the answer was whole: a body cut short, no answer
PROTOCOL = "not HTTP"  # bytes that are no HTTP/1.1 answer (an illegal status line or header)
TLS = "TLS handshake failed"  # a certificate refused, a plain-HTTP port asked for https
OVER_CAP = "answer past the cap"  # decoded past MAX_BODY: a compression bomb, an endless body
CORRUPT = "corrupt compression"  # a compressed body that does not decode
ENCODING = "encoding refused"  # stacked or unknown content encodings
FAULTS = (RESET, CLOSED, PROTOCOL, TLS, OVER_CAP, CORRUPT, ENCODING)
NO_KEY = "frank-no-key"  # the SDKs insist on a key; a server without one ignores it
# Sent but left out of a curl line: curl writes Host and Content-Length itself (from the URL and
# -d); Connection is the transport's; Accept-Encoding is this reader's "identity", and curl asks
# for no encoding either; User-Agent names httpx or the SDK's version, which a server seldom
# answers differently, and curl's own is the truth about the reproduction; the SDKs'
# x-stainless-* describe their client (OS, runtime, retry count).
NOT_REPRODUCED = re.compile(r"host|content-length|connection|accept-encoding|user-agent|"
                            r"x-stainless-.*", re.I)


@dataclass
class Exchange:
    method: str
    url: str
    request_json: Any = None
    status: int | None = None
    body: str = ""
    elapsed: float = 0.0
    started: float = 0.0  # time.monotonic() when the request went out
    error: str | None = None  # one line: why no (whole) answer came back
    truncated: bool = False
    late: bool = False  # cut by a timeout or a deadline: the endpoint answers too slowly
    interrupted: bool = False  # cut or not sent because the run was stopped
    progress: int = 0  # a stream cut short: the events with data it had sent (tokens produced)
    refused: bool = False  # an encoding this reader will not decode
    # The transport fault that cut it (one of FAULTS): not a slow answer, not a stop,
    # but bytes no whole answer is made of. The same kind again is the same root cause.
    fault: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # The headers sent, as curl -H words with secrets as $VARIABLEs (never the values).
    curl_headers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def costly(self) -> bool:
        """Cut for what the route itself does (it drips, hangs, runs past the cap or sends an
        encoding refused): asking it again would cost as much and end the same."""
        return not self.interrupted and (self.late or self.truncated or self.refused)

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    def snippet(self, limit: int = 300) -> str:
        text = redact.squeeze(redact.scrub(self.body), limit)
        return redact.inert(redact.cut(text, limit), limit + 3)  # masked before the cut

    def summary(self) -> str:
        if self.error and self.status is None:
            return f"{self.method} {self.url}: {self.error}"
        cut = f" [{self.error}]" if self.error else ""
        return (f"{self.method} {self.url} -> {self.status} in {self.elapsed:.2f}s: "
                f"{self.snippet(200)}{cut}")

    def curl(self) -> str:
        """A command that sends the request again, every header as sent (through a proxy too);
        secrets stay in environment variables: the key in $API_KEY (see `curl_headers`)."""
        words = ["curl", "-sS", "-X", shlex.quote(self.method), shlex.quote(self.url)]
        for header in self.curl_headers:
            words += ["-H", header]
        if self.request_json is not None:
            words += ["-d", shlex.quote(json.dumps(self.request_json))]
        return redact.scrub(" ".join(words))

    def settle(self) -> None:
        """Its reader is done with it: keep the head an evidence shows, masked before the cut
        (twenty answers of 4 MiB would otherwise stay in memory as evidence until the run
        ends)."""
        if len(self.body) > EVIDENCE_HEAD:
            self.body = redact.cut(self.body, EVIDENCE_HEAD, "")

    def record(self) -> dict:
        return {
            "request": f"{self.method} {self.url}",
            "sent": self.request_json,
            "status": self.status,
            "error": self.error,
            "elapsed_s": round(self.elapsed, 3),
            "body": self.snippet(2000),
        }


# -- how long a first answer may take, where a client waits longer than the endpoint's timeout ---
_FIRST: contextvars.ContextVar[float | None] = contextvars.ContextVar("frank_first", default=None)


# The battery's own bound on a long first-answer wait, whatever a client or a prompt asks.
FIRST_ANSWER_MAX_S = 600.0


def first_answer_wait(timeout: float, wanted: float) -> float:
    """How long a first answer is waited for where `wanted` seconds are asked (a client's own
    wait, a long prompt's processing): never less than the endpoint's `timeout`, never more than
    the battery's bound, FIRST_ANSWER_MAX_S (the deadline left bounds it again per request)."""
    return min(max(timeout, wanted), FIRST_ANSWER_MAX_S)


@contextmanager
def first_answer_within(seconds: float) -> Iterator[None]:
    """Requests made inside the block wait up to `seconds` for their answer to begin (a long
    prompt's processing before a stream's first event), as a client that waits that long does;
    once it began, the endpoint's own timeout paces it again. The endpoint's deadline still
    bounds the wait."""
    token = _FIRST.set(seconds)
    try:
        yield
    finally:
        _FIRST.reset(token)


# -- where exchanges go: the probe (or test) running in this thread ------------------------------
_SINK: contextvars.ContextVar[list[Exchange] | None] = contextvars.ContextVar("frank_sink",
                                                                              default=None)


@contextmanager
def recording(propagate: bool = True) -> Iterator[list[Exchange]]:
    """Collect the exchanges made inside the block; with `propagate` they also reach any
    enclosing recording (a probe's own exchanges do not: they are its observation's)."""
    mine: list[Exchange] = []
    outer = _SINK.get()
    token = _SINK.set(mine)
    try:
        yield mine
    finally:
        _SINK.reset(token)
        if outer is not None and propagate:
            outer.extend(mine)


def _record(ex: Exchange) -> None:
    sink = _SINK.get()
    if sink is not None:
        sink.append(ex)


def shared(ex: Exchange) -> Exchange:
    """An exchange made earlier, given again as the answer to the same request (one route read
    once, one request two checks share): recorded as this block's evidence too, with no request
    sent."""
    _record(ex)
    return ex


# -- how many requests one endpoint has in flight ------------------------------------------------
class Limiter:
    """At most `limit` requests in flight on one endpoint; `exclusive()` holds it alone, for
    probes that read server-wide counters. Counts the peak, so a benchmark can prove the limit."""

    def __init__(self, limit: int = 1):
        self.limit = max(1, limit)
        self.peak = 0
        self._in_flight = 0
        self._owner: int | None = None
        self._helpers: dict[int, int] = {}  # a worker thread -> the holder it sends for
        self._cond = threading.Condition()
        self._quiet_until = 0.0

    def hush(self, seconds: float) -> None:
        """Send nothing for `seconds`: a generation given up on runs on in the server until it
        notices the closed connection, which an engine may only look for when left alone."""
        if seconds > 0:
            with self._cond:
                self._quiet_until = max(self._quiet_until, time.monotonic() + seconds)

    def quiet_left(self) -> float:
        return self._quiet_until - time.monotonic()

    def _holds(self, me: int) -> bool:
        """Whether `me` holds the limiter alone, or sends for the thread that does."""
        return self._owner is not None and self._owner in (me, self._helpers.get(me))

    def enter(self) -> None:
        me = threading.get_ident()
        with self._cond:
            self._cond.wait_for(lambda: self._holds(me) or (
                self._owner is None and self._in_flight < self.limit))
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)

    def leave(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._holds(me):  # already held by this thread (a probe inside a probe) or its holder
            yield
            return
        with self._cond:
            self._cond.wait_for(lambda: self._owner is None)
            self._owner = me
            self._cond.wait_for(lambda: self._in_flight == 0)
        try:
            yield
        finally:
            with self._cond:
                self._owner = None
                self._cond.notify_all()

    @contextmanager
    def helping(self, holder: int) -> Iterator[None]:
        """In a worker thread of `holder`, which holds the limiter alone (`exclusive()`): the
        worker's requests are the holder's, so a probe sends a burst of them at once with
        nothing else of the battery in flight (the load claim's ladder)."""
        me = threading.get_ident()
        with self._cond:
            self._helpers[me] = holder
        try:
            yield
        finally:
            with self._cond:
                self._helpers.pop(me, None)
                self._cond.notify_all()


# -- the transport ---------------------------------------------------------------------------------
class Deadline:
    """The wall-clock moment past which an endpoint gets no more requests and no more time to
    answer: the earliest of its own deadline and the run's, each named for the message."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.label = ""

    def bound(self, seconds: float, label: str) -> None:
        at = time.monotonic() + seconds
        if self.at is None or at < self.at:
            self.at, self.label = at, label

    def left(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()


class Stop:
    """The run's stop switch, shared by every endpoint: once set (an interrupt), no request is
    sent and each one in flight is cut. Its sockets are shut down from whatever thread sets it,
    which wakes a read blocked on a silent or dripping server at once."""

    def __init__(self) -> None:
        self.why: str | None = None
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._open: dict[int, list[socket.socket]] = {}  # per request in flight: its sockets
        self._cut: set[int] = set()  # requests in flight whose clock ran out (`cut`)

    def set(self, why: str) -> None:
        with self._lock:
            if self.why is not None:
                return
            self.why = why
            self._set.set()
            socks = [s for held in self._open.values() for s in held]
        for sock in socks:
            _shut(sock)

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if the run is stopped meanwhile; whether it is."""
        return self._set.wait(seconds)

    def cut(self, key: int) -> None:
        """Shut one request's sockets (its clock ran out, `_Clock`); one connected later is
        shut as it connects."""
        with self._lock:
            self._cut.add(key)
            socks = list(self._open.get(key, ()))
        for sock in socks:
            _shut(sock)

    def tracer(self, key: int, outer=None):
        """An httpcore `trace` callback that keeps the request's socket, to be cut on a stop
        (and calls on to any `outer` callback the request already had)."""
        def trace(event: str, info: dict) -> None:
            if outer is not None:
                outer(event, info)
            if not event.endswith(("connect_tcp.complete", "connect_unix_socket.complete",
                                   "start_tls.complete")):
                return
            sock = info["return_value"].get_extra_info("socket")
            if sock is None:
                return
            with self._lock:
                self._open.setdefault(key, []).append(sock)
                stopped = self.why is not None or key in self._cut
            if stopped:  # connected just as the run stopped, or as its clock ran out
                _shut(sock)
        return trace

    def forget(self, key: int) -> None:
        _CLOCK.disarm(key)
        with self._lock:
            self._open.pop(key, None)
            self._cut.discard(key)


class _Due:
    """A request's wall-clock limit before its answer began: the wait for its first byte (and
    the connection), or the deadline, whichever comes first."""

    def __init__(self, at: float, why: str):
        self.at, self.why = at, why

    def due(self) -> float:
        return self.at

    def overdue(self, now: float) -> str | None:
        return self.why if now >= self.at else None


class _Clock:
    """Cuts each request in flight at the moment its pace allows, whatever its socket does: a
    read timeout restarts at every byte, so a server that drips (its headers, or a body's
    bytes a little within each read's timeout) would hold a request well past it, and a
    limit checked as bytes arrive is only checked when they do. One thread for every request
    of the process; it sleeps until the earliest one is due and asks each again then (a
    stream's limit moves with its tokens), and a request's own reader still cuts it at its
    next bytes, naming the rule, where those come first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[Any, Exchange, Stop]] = {}
        self._thread: threading.Thread | None = None

    def arm(self, key: int, limit: Any, ex: Exchange, stop: Stop) -> None:
        """Watch the request `key` against `limit` (`due()`, `overdue(now)`) until it is
        disarmed; its exchange says why where it is cut."""
        with self._cond:
            self._armed[key] = (limit, ex, stop)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="frank-clock",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def disarm(self, key: int) -> None:
        with self._cond:
            self._armed.pop(key, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                now, cut, wake = time.monotonic(), [], None
                for key, (limit, ex, stop) in list(self._armed.items()):
                    why = limit.overdue(now)
                    if why is None:
                        at = limit.due()
                        wake = at if wake is None else min(wake, at)
                    elif ex.error is None:  # its reader did not end it first
                        ex.error, ex.late = why, True
                        ex.progress = getattr(limit, "events", 0)  # a stream's tokens so far
                        del self._armed[key]
                        cut.append((key, stop))
                if not cut:
                    self._cond.wait(None if wake is None else max(0.005, wake - now + 0.005))
            for key, stop in cut:
                stop.cut(key)


_CLOCK = _Clock()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by its reader
        pass


class Refused(Exception):
    """An answer this reader will not decode (stacked or unknown content encodings)."""


def client(timeout: float, limiter: Limiter | None = None, deadline: Deadline | None = None, *,
           max_body: int = MAX_BODY, follow_redirects: bool = False,
           stop: Stop | None = None, floor: float = MIN_TOKENS_PER_S,
           quiet: float = 0.0, floor_from: str = FLOOR_FROM) -> httpx2.Client:
    """An httpx2 client whose every request goes through `Recorder`. Redirects are not followed
    for endpoints (a key must never travel to a host the fleet did not name); a model file's
    URL, which carries no key, may follow them to its CDN. `quiet`: the seconds the limiter stays
    silent after a generation is given up on (the driver's abandon_quiet_s); `floor_from`: the
    setting the floor rate comes from, for the messages that explain a wait."""
    recorder = Recorder(limiter or Limiter(), timeout, deadline or Deadline(), max_body, stop, floor,
                        quiet, floor_from)
    return httpx2.Client(transport=recorder,
                         timeout=httpx2.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)),
                         follow_redirects=follow_redirects)


@functools.cache
def tls() -> ssl.SSLContext:
    # httpx2's default verification (the trust store, SSL_CERT_FILE), built once: loading the CA
    # bundle costs some 40 ms of CPU under the GIL, which a fleet would pay per endpoint. An
    # SSLContext is made to be shared by many connections.
    return httpx2.create_ssl_context()


def _fresh_connections() -> httpx2.HTTPTransport:
    # A connection per request: a kept-alive one the server has since closed (llama.cpp's
    # server closes idle and much-used ones) would fail a request that never reached it.
    return httpx2.HTTPTransport(verify=tls(), limits=httpx2.Limits(max_keepalive_connections=0))


@dataclass(frozen=True)
class Pace:
    """How long one answer may take, from what the request asks. A generation gets `timeout`
    for its first byte plus its token budget at the floor rate, so a long thinker is waited for
    however long its answer; a stream must show a token every `timeout` (keep-alive comments
    are no progress), and a whole answer, once its first byte came, must finish within
    `timeout`: a healthy server sends it at once, a drip is cut."""

    timeout: float
    limit: float  # seconds for the whole answer
    stream: bool = False
    budget: int | None = None  # the request's token budget, where it names one
    floor: float = MIN_TOKENS_PER_S
    floor_from: str = FLOOR_FROM
    first: float | None = None  # a longer wait for the first answer (first_answer_within)

    @classmethod
    def of(cls, body: Any, timeout: float, floor: float, floor_from: str = FLOOR_FROM,
           first: float | None = None) -> Pace:
        budget = _budget(body)
        stream = isinstance(body, dict) and body.get("stream") is True
        first = first if first is not None and first > timeout else None
        longer = first - timeout if first is not None else 0.0
        if budget is None:
            return cls(timeout, DEADLINE_FACTOR * timeout + longer, stream, None, floor,
                       floor_from, first)
        return cls(timeout, timeout + longer + budget / floor, stream, budget, floor, floor_from,
                   first)

    @property
    def why(self) -> str:
        """Where `limit` comes from, in the settings that make it."""
        wait = (f"a first answer waited for {self.first:g} s" if self.first is not None
                else f"timeout {self.timeout:g} s")
        if self.budget is None:
            more = f" + {self.first - self.timeout:g} s" if self.first is not None else ""
            return f"{DEADLINE_FACTOR} x timeout {self.timeout:g} s{more}"
        return f"{wait} + {self.budget} tokens at {self.floor_from} {self.floor:g} tok/s"

    @property
    def first_byte(self) -> float:
        """The wait for the answer to begin: a whole answer starts when it is all generated;
        a stream's first bytes within `first` where a client waits that long, else `timeout`."""
        if self.budget is not None and not self.stream:
            return self.limit
        return self.first if self.first is not None else self.timeout


def event_budget(budget: int) -> int:
    """The events a stream of `budget` tokens may send: a token costs about one event; a
    stream far past that never ends by itself."""
    return 4 * budget + EVENT_SLACK


def _budget(body: Any) -> int | None:
    return budget_of(body)[1]


def budget_of(body: Any) -> tuple[str, int | None]:
    """The request's token budget and the field that sets it (max_tokens where none does):
    the chat route's two, and the Responses route's max_output_tokens."""
    if not isinstance(body, dict):
        return "max_tokens", None
    for key in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return key, value
    return "max_tokens", None


class Recorder(httpx2.BaseTransport):
    def __init__(self, limiter: Limiter, timeout: float, deadline: Deadline | None = None,
                 max_body: int = MAX_BODY, stop: Stop | None = None,
                 floor: float = MIN_TOKENS_PER_S, quiet: float = 0.0,
                 floor_from: str = FLOOR_FROM):
        self.inner = _fresh_connections()
        self.limiter, self.timeout, self.floor, self.quiet = limiter, timeout, floor, quiet
        self.floor_from = floor_from
        self.deadline, self.max_body = deadline or Deadline(), max_body
        self.stop = stop or Stop()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        # Plain bytes only: a compressed answer could not be capped by what it decodes to.
        request.headers["accept-encoding"] = "identity"
        ex = Exchange(request.method, str(request.url), request_json=_json(request.read()))
        ex.curl_headers = _curl_headers(request.headers)
        _record(ex)
        left = self.deadline.left()
        if left is not None and left <= 0:
            ex.error = f"not sent: {self.deadline.label} ran out"
            raise httpx2.ConnectTimeout(ex.error, request=request)
        self.stop.wait(max(0.0, self.limiter.quiet_left()))  # a request given up on is dropping
        self.limiter.enter()
        if self.stop.why:  # checked after the wait for a turn, which may have been long
            self.limiter.leave()
            ex.error, ex.interrupted = f"not sent: {self.stop.why}", True
            raise httpx2.ConnectTimeout(ex.error, request=request)
        key = id(ex)
        first = _FIRST.get()
        if first is not None and left is not None:
            first = min(first, left)  # the battery's own bound: the deadline left
        pace = Pace.of(ex.request_json, self.timeout, self.floor, self.floor_from, first)
        waits = {**(request.extensions.get("timeout") or {}), "read": pace.first_byte}
        request.extensions = {**request.extensions, "timeout": waits,
                              "trace": self.stop.tracer(key, request.extensions.get("trace"))}
        start, resp = time.monotonic(), None
        ex.started = start
        _CLOCK.arm(key, _head_due(pace, start, self.deadline), ex, self.stop)
        try:
            resp = self.inner.handle_request(request)
            ex.status, ex.headers = resp.status_code, dict(resp.headers)
            decode = _decoder(resp.headers.get("content-encoding", ""))
        except Exception as exc:  # every transport failure becomes one line of evidence
            clocked = ex.late  # its clock cut it (_Clock), and said why
            _cut(ex, exc, pace.first_byte, self.stop)
            if ex.late and pace.budget is not None and not clocked:
                ex.error = _nothing_came(pace)
            ex.elapsed = time.monotonic() - start
            self.stop.forget(key)
            if pace.budget is not None and _given_up(ex) and not isinstance(
                    exc, (httpx2.ConnectError, httpx2.ConnectTimeout)):
                self.limiter.hush(self.quiet)  # sent, and given up on: the server may still run it
            self.limiter.leave()
            if resp is not None:
                resp.close()
            if isinstance(exc, Refused):
                ex.refused, ex.fault = True, ENCODING
                raise httpx2.DecodingError(ex.error or str(exc), request=request) from None
            raise

        def release(abandoned: bool) -> None:
            self.stop.forget(key)
            if abandoned and pace.budget is not None and _given_up(ex):
                self.limiter.hush(self.quiet)
            self.limiter.leave()

        body = _Body(resp, ex, decode, start, pace, release, self.deadline, self.max_body,
                     self.stop)
        _CLOCK.arm(key, body, ex, self.stop)  # from here the body's own limits
        # A decoded body no longer has the length or encoding the server sent; a plain one does.
        encoded = resp.headers.get("content-encoding", "identity").strip().lower() != "identity"
        dropped = ("content-encoding", "content-length") if encoded else ()
        headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in dropped]
        return httpx2.Response(resp.status_code, headers=headers, stream=body, request=request,
                               extensions=resp.extensions)

    def close(self) -> None:
        self.inner.close()


class _Body(httpx2.SyncByteStream):
    """The answer's bytes, decoded, capped, deadline-bound, and kept in the exchange."""

    def __init__(self, resp, ex: Exchange, decode, start: float, pace: Pace, release,
                 bound: Deadline, max_body: int = MAX_BODY, stop: Stop | None = None):
        self.resp, self.ex, self.decode, self.start = resp, ex, decode, start
        self.max_body, self.stop, self.pace = max_body, stop or Stop(), pace
        self.deadline, self.why = start + pace.limit, None
        if bound.at is not None and bound.at < self.deadline:
            self.deadline, self.why = bound.at, bound.label
        self.kept = bytearray()
        self.begun = time.monotonic()  # its headers came
        self._release = release
        self.ended = False  # read to its end: nothing of it runs on in the server
        self.progress_at = start  # the last token of a stream (a completed `data:` line)
        self.events = 0  # a stream's `data:` events so far: the tokens it was producing
        self.over_at = 0.0  # when the stream passed the events its budget can take
        self._line = b""  # the start of the stream's current line, enough to know its kind

    def __iter__(self) -> Iterator[bytes]:
        try:
            for raw in self.resp.stream:
                try:
                    chunk = self.decode(raw, self.max_body - len(self.kept) + 1)
                except zlib.error as exc:
                    self.ex.fault = CORRUPT
                    self._fail(f"the answer's compressed body is corrupt ({exc})")
                self.kept += chunk
                if len(self.kept) > self.max_body:
                    self.ex.truncated, self.ex.fault = True, OVER_CAP
                    self._fail(f"the answer ran past {self.max_body} bytes; read no further")
                if self.stop.why:
                    self.ex.interrupted = True
                    self._fail(f"{self.stop.why} during the answer ({len(self.kept)} bytes came)")
                now = time.monotonic()
                self._heard(chunk, now)
                late = self.overdue(now)
                if late:
                    self.ex.late = True
                    self._fail(late)
                yield chunk
            if self.ex.late:  # its clock shut the socket: the end came from this side
                raise httpx2.ReadError(self.ex.error or "")
            self.ended = True
        except httpx2.HTTPError as exc:
            if self.ex.error is None:
                _cut(self.ex, exc, self.deadline - self.start, self.stop)
                if self.ex.late:  # a read timeout after the answer began: a stall, not a hang
                    self.ex.error = (f"the answer stopped: nothing more came for "
                                     f"{self.pace.first_byte:g}s after {len(self.kept)} bytes")
            raise
        finally:
            self.close()

    def _heard(self, chunk: bytes, now: float) -> None:
        """A generation's progress: a whole answer's first bytes, a stream's tokens; a stream
        PAST_CAP events past what its budget can take (`event_budget` where that is less) is
        cut at once."""
        pace = self.pace
        if pace.budget is None:
            return
        if not pace.stream:
            if len(self.kept) == len(chunk):  # its first bytes: the rest comes at once
                self.progress_at = now
            return
        if not self._tokens(chunk):
            return
        self.progress_at = now
        if self.ended or self.events <= pace.budget + EVENT_SLACK:
            return
        self.over_at = self.over_at or now
        past = min(event_budget(pace.budget), pace.budget + EVENT_SLACK + PAST_CAP)
        if self.events > past:
            self.ex.late = True
            self._fail(f"the stream ran past {past} events for {pace.budget} max_tokens "
                       f"without ending ({self._came(now)}): the server does not stop at the "
                       "cap")

    def due(self) -> float:
        """When the answer is next past a limit, as its bytes stand now (`overdue`)."""
        pace, at = self.pace, self.deadline
        if pace.budget is None:
            # A model list, /metrics, a file's header: once begun it comes at once.
            return at if pace.stream else min(at, self.begun + pace.timeout)
        if not pace.stream:
            return min(at, self.progress_at + pace.timeout) if self.kept else at
        if self.over_at and not self.ended:
            at = min(at, self.over_at + pace.timeout)
        return min(at, self.progress_at + (pace.timeout if self.events else pace.first_byte))

    def overdue(self, now: float) -> str | None:
        """Why the answer is cut at `now`, where a limit has passed: an answer with no token
        budget still arriving `timeout` after it began, a whole generation still arriving
        `timeout` after its first byte, a stream with no token for `timeout`, or past the
        events its budget can take and not ended `timeout` later; else the whole answer's
        limit or the deadline. None while it is within them all."""
        pace = self.pace
        if now <= self.due():
            return None
        if pace.budget is None and not pace.stream and now - self.begun > pace.timeout:
            return self._drips()
        if pace.budget is not None and not pace.stream and self.kept and \
                now - self.progress_at > pace.timeout:
            return self._drips()
        if pace.budget is not None and pace.stream:
            if self.over_at and not self.ended and now - self.over_at > pace.timeout:
                return (f"the stream ran past {pace.budget + EVENT_SLACK} events for "
                        f"{pace.budget} max_tokens without ending {pace.timeout:g}s after that "
                        f"({self._came(now)}): the server does not stop at the cap")
            wait = pace.timeout if self.events else pace.first_byte
            if now - self.progress_at > wait:
                return (f"the stream carried no token for {wait:g}s ({len(self.kept)} "
                        "bytes came, none of them an event with data): the server drips or "
                        "only keeps the connection alive")
        return (f"{self.why} ran out during the answer ({self._came(now)})" if self.why
                else self._unfinished(now))

    def _drips(self) -> str:
        return (f"the answer began but was still arriving {self.pace.timeout:g}s later "
                f"({len(self.kept)} bytes came): the server drips it")

    def _tokens(self, chunk: bytes) -> bool:
        """Whether `chunk` completes a `data:` line (an SSE event that carries something). A
        stream's last event ends it for the server too, though a client may stop reading there."""
        found = False
        for piece in re.split(rb"(\n)", chunk):
            if piece == b"\n":
                line = self._line.lstrip()
                self.events += line.startswith(b"data:")
                found = found or line.startswith(b"data:")
                self.ended = self.ended or line.startswith(STREAM_ENDS)
                self._line = b""
            elif len(self._line) < 24:
                self._line = (self._line + piece)[:24]
        return found

    def _came(self, now: float) -> str:
        """What an answer cut short had sent: a stream's events and their rate, else bytes."""
        if self.pace.stream and self.events:
            span = now - self.start
            return (f"{self.events} events with data in {span:.1f}s, about "
                    f"{self.events / span:.0f} a second, the last one "
                    f"{now - self.progress_at:.1f}s before the cut")
        return f"{len(self.kept)} bytes came"

    def _unfinished(self, now: float) -> str:
        """A deadline cut: a stream still producing tokens is slow, not hung."""
        limit = f"{self.deadline - self.start:g}s ({self.pace.why})"
        if self.pace.stream and self.events and now - self.progress_at <= self.pace.timeout:
            return (f"the stream was still producing tokens when its {limit} ran out "
                    f"({self._came(now)}): slower than {self.pace.floor_from} "
                    f"{self.pace.floor:g} tok/s, not hung")
        return f"the answer did not finish within {limit}: {self._came(now)}"

    def _fail(self, why: str) -> None:
        self.ex.error, self.ex.progress = why, self.events
        raise httpx2.ReadError(why)

    def close(self) -> None:
        if self._release is None:
            return
        release, self._release = self._release, None
        # A whole body is kept to be read; of a cut one, only a head to show (twenty cut
        # answers of 4 MiB would otherwise stay in memory as evidence until the run ends).
        head = len(self.kept) if self.ex.error is None else EVIDENCE_HEAD
        with memoryview(self.kept) as kept:
            self.ex.body = str(kept[:min(head, MAX_BODY)], "utf-8", "replace")
        self.kept = bytearray()
        self.ex.elapsed = time.monotonic() - self.start
        try:
            self.resp.close()  # an answer not read to its end: closing it tells the server
        finally:
            release(not self.ended)


def _head_due(pace: Pace, start: float, bound: Deadline) -> _Due:
    """When a request is cut if its answer has not begun: its first byte's wait after the
    connection's (a read timeout cuts a silent server then; this cuts one that drips its
    headers), or the deadline."""
    at = start + min(CONNECT_TIMEOUT, pace.timeout) + pace.first_byte
    if bound.at is not None and bound.at < at:
        return _Due(bound.at, f"{bound.label} ran out before the answer began")
    return _Due(at, f"no whole answer head within {at - start:g}s of the request: the server "
                    "drips its headers or hangs")


def _given_up(ex: Exchange) -> bool:
    """Whether this reader ended the answer (a timeout, the cap, a stop), so the server may still
    be generating it; a connection the server reset or closed it ended itself, and nothing of
    it runs on there to wait out."""
    return ex.fault not in (RESET, CLOSED, PROTOCOL)


def _cut(ex: Exchange, exc: BaseException, timeout: float, stop: Stop) -> None:
    """Why a request failed, in its exchange: a stop's shut socket reads as the interrupt it
    was; a timeout marks the endpoint as too slow, and so does its clock's cut (`_Clock`),
    which said why already."""
    if ex.late and ex.error is not None:
        return
    if stop.why:
        ex.error, ex.interrupted = f"{stop.why} during the request", True
        return
    ex.error = describe(exc, timeout)
    ex.late = isinstance(exc, httpx2.TimeoutException) and not isinstance(exc, httpx2.ConnectTimeout)
    ex.fault = fault_of(exc)


def fault_of(exc: BaseException) -> str | None:
    """The kind of transport fault `exc` is, where it is one (FAULTS); None for a timeout, a
    refused connection (nothing listens: the health check says so) or a name not found."""
    text = " ".join(str(exc).split()).lower()
    if isinstance(exc, httpx2.ConnectError):
        return TLS if any(s in text for s in ("ssl", "tls", "certificate")) else None
    if not isinstance(exc, (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError)):
        return None
    if "reset" in text or "broken pipe" in text:
        return RESET
    if isinstance(exc, httpx2.RemoteProtocolError) and not any(
            s in text for s in ("peer closed", "disconnected", "incomplete")):
        return PROTOCOL
    return CLOSED


def _decoder(encoding: str):
    """A bounded decoder for the answer's content encoding: identity, or one gzip / deflate."""
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return lambda raw, _limit: raw
    if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
        raise Refused(f"refused an answer with content-encoding {encoding!r} (asked for identity; "
                      "only a single gzip or deflate layer is decoded, and within the cap)")
    wbits = 16 + zlib.MAX_WBITS if "gzip" in codings[0] else zlib.MAX_WBITS
    inflate = zlib.decompressobj(wbits)
    return lambda raw, limit: inflate.decompress(raw, max(1, limit))


def _curl_headers(headers: httpx2.Headers) -> list[str]:
    sent = [(k.decode(headers.encoding), v.decode(headers.encoding)) for k, v in headers.raw]
    return [word for word in (_curl_header(k, v) for k, v in sent) if word]


def _curl_header(name: str, value: str) -> str | None:
    """One sent header as a curl -H word, its secrets as $VARIABLEs; None for noise."""
    if NOT_REPRODUCED.fullmatch(name) or (name.lower() == "accept" and value == "*/*"):
        return None  # (*/* is what curl sends by itself)
    if name.lower() in KEY_HEADERS and value.endswith(NO_KEY):
        return None  # the SDK's stand-in for an endpoint that takes no key
    parts = redact.named_parts(value)
    if redact.SECRET_HEADER.search(name) and not any(named for _, named in parts):
        # A credential fleet.yaml wrote out (or a key too short to name): its own variable.
        parts = [(re.sub(r"\W", "_", name).upper(), True)]
    return _shell_word([(f"{name}: ", False), *parts])


def _shell_word(parts: list[tuple[str, bool]]) -> str:
    """Literal text and variable names (True) as one shell word that expands the variables:
    all in double quotes where the literal text needs no escaping there (the readable form),
    else each literal single-quoted beside its "$VAR"."""
    if not any(named for _, named in parts):
        return shlex.quote("".join(text for text, _ in parts))
    if any(re.search(r'["\\$`!]', text) for text, named in parts if not named):
        return "".join(f'"${text}"' if named else shlex.quote(text) for text, named in parts)
    word = ""
    for i, (text, named) in enumerate(parts):
        after = parts[i + 1][0][:1] if i + 1 < len(parts) and not parts[i + 1][1] else ""
        word += (f"${{{text}}}" if re.match(r"\w", after) else f"${text}") if named else text
    return f'"{word}"'


def send(http, method: str, url: str, *, headers=None, json_body=None) -> Exchange:
    """One request through a `client()`; the exchange, with the answer read in full (capped)."""
    with recording() as seen:
        try:
            with http.stream(method, url, headers=headers, json=json_body) as resp:
                resp.read()
        except httpx2.HTTPError:
            pass  # the exchange says what went wrong
    return seen[-1]


HANGS = " (the server accepted the connection but hangs)"
# A whole answer's first byte is its last token: silence until then is no sign of a hang.
SILENT = ": a whole answer comes only once it is all generated, so the server is slower than " \
         "that or hangs"


def _nothing_came(pace: Pace) -> str:
    """A generation's first byte did not come in time: the wait, and where it comes from."""
    if pace.stream and pace.first is not None:
        return (f"no answer within {pace.first_byte:g}s, the wait for a first answer (as long "
                f"as the client waits, within the endpoint's deadline){HANGS}")
    if pace.stream:
        return f"no answer within {pace.first_byte:g}s, the stream's timeout{HANGS}"
    return f"no answer within {pace.first_byte:g}s ({pace.why}){SILENT}"


BROKE = "the server broke the connection"  # it took the request and closed without an answer


def describe(exc: BaseException, timeout: float | None) -> str:
    """The cause of a failed request in the words an operator searches for."""
    text = " ".join((str(exc) or type(exc).__name__).split())
    lower = text.lower()
    if isinstance(exc, Refused) or text.startswith("not sent: "):
        return text
    if isinstance(exc, httpx2.ConnectTimeout):
        return "connection timed out (host unreachable or a firewall drops packets)"
    if isinstance(exc, httpx2.TimeoutException):
        return f"no answer within {timeout:g}s{HANGS}"
    if isinstance(exc, httpx2.ConnectError):
        if "refused" in lower:
            return "connection refused (nothing listens on that port: is the server running?)"
        if any(s in lower for s in ("name or service", "nodename", "getaddrinfo", "name resolution")):
            return "DNS lookup failed (unknown host name)"
        return f"cannot connect: {text}"
    if fault_of(exc) == PROTOCOL:
        return f"the answer is not HTTP: {text}"
    if isinstance(exc, (httpx2.RemoteProtocolError, httpx2.ReadError)):
        return f"{BROKE}: {text}"
    if isinstance(exc, httpx2.UnsupportedProtocol):
        return f"unsupported URL: {text}"
    return f"{type(exc).__name__}: {text}"


def _json(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        return None
