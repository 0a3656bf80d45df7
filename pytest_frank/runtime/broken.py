"""A transport that breaks alike again and again is one root cause, as a dead server or a
refused key is: the connection reset, the body cut short, a compression bomb, bytes that are no
HTTP, a failed TLS handshake. Each answer a probe's request met is told here (`Breakage.heard`):
where a route's first requests all broke the same way, or the first request of every route tried
did, the route (or the endpoint) is broken, no further request of the probes goes to it, and one
test fails with the fault and its evidence while the others that met it are blocked, pointing
there. A route that answered whole once is sound: a later fault on it is its own test's failure,
and one request that broke alone never blocks anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from pytest_frank.transport import http

if TYPE_CHECKING:
    from pytest_frank.drivers import Driver
    from pytest_frank.fleet import Endpoint

Key = tuple[str, "str | None"]  # a probe's name and case: what runs once per session (Target)

REPEATS = 2  # a route's first requests that must break alike before the route is broken
STREAMED = " (streamed)"  # a route's streamed requests are a route of their own

# What usually explains each fault, from what the evidence shows: it names what was seen and
# where to look, since the reader cannot tell which hop (the engine, a proxy) did it.
FIXES = {
    http.RESET: "something resets the connection on {route}: the engine's HTTP layer (a "
                "crashed worker) or a proxy, load balancer or firewall in front of it; run the "
                "curl line to see it, and read their logs for that request",
    http.CLOSED: "the connection closes before the answer is whole on {route}: the engine or a "
                 "proxy in front of it ends the answer early (a crashed worker, a body-size or "
                 "idle-time limit); run the curl line to see it, and read their logs",
    http.PROTOCOL: "what answers on {route} does not speak HTTP/1.1 as expected: check `url` "
                   "in fleet.yaml (scheme, host and port: an https port asked over http, or "
                   "another service there) and any proxy in front",
    http.TLS: "the TLS handshake fails: check `url`'s scheme and port in fleet.yaml, and the "
              "server's certificate (SSL_CERT_FILE names a private CA's bundle)",
    http.OVER_CAP: f"the answer decodes past {http.MAX_BODY} bytes (a compression bomb, or a "
                   "body that never ends), though plain bytes were asked for (Accept-Encoding: "
                   "identity): whatever serves {route} sends it, the engine or a proxy that "
                   "compresses; run the curl line to see it",
    http.CORRUPT: "the compressed answer does not decode, though plain bytes were asked for "
                  "(Accept-Encoding: identity): a proxy that compresses, or a server that labels "
                  "its encoding wrongly, sends it; run the curl line to see it",
    http.ENCODING: "the answer comes in an encoding this reader refuses, though plain bytes were "
                   "asked for (Accept-Encoding: identity): turn off the compression of whatever "
                   "serves {route} (a proxy's, usually)",
}


def route_named(method: str, path: str, body: Any = None) -> str:
    """A route as this module keys and names it, from a request's method, path and body:
    "POST /v1/chat/completions (streamed)"."""
    streamed = isinstance(body, dict) and body.get("stream") is True
    return f"{method} {path.split('?')[0]}{STREAMED if streamed else ''}"


class NotSent(Exception):
    """A probe's request not sent: its route (or every route) already broke alike."""

    def __init__(self, broken: Broken):
        super().__init__(broken.line)
        self.broken = broken


@dataclass
class Route:
    """One route's answers so far, as the transport delivered them."""

    faults: list[str] = field(default_factory=list)  # its first reads' faults, while alike
    sent: list[http.Exchange] = field(default_factory=list)  # the requests behind them
    blamed: Key | None = None  # the probe that met its first fault
    met: list[Key] = field(default_factory=list)  # every probe that met one of them
    whole: bool = False  # an answer came whole (any status): its transport works
    ok: bool = False  # a 2xx answer came whole

    def told(self) -> str:
        """Its faulted requests, as the failure counts them."""
        said = f"its first {len(self.sent)} requests" if len(self.sent) > 1 else \
            "its first request"
        shared = len(self.faults) > len(self.sent)
        return said + (", which every later read of it shares" if shared else "")


@dataclass
class Broken:
    """One fault that repeated: where, the first exchange that met it, and the probe that saw
    it (the one whose test fails with it; the others that met it are blocked)."""

    fault: str
    key: Key
    ex: http.Exchange
    path: str  # the exchange's path, as the blocked tests' pointer names it
    said: str  # what came of it, in the driver's words (its status and body's head, the cut)
    routes: dict[str, str] = field(default_factory=dict)  # route -> its requests that broke
    everywhere: bool = False  # every route tried broke so: nothing more goes to the endpoint

    @property
    def where(self) -> str:
        """The routes it broke on, a route's plain and streamed requests named once."""
        if self.everywhere:
            return "every route tried"
        named: dict[str, list[str]] = {}
        for route in self.routes:
            named.setdefault(route.removesuffix(STREAMED), []).append(route)
        return ", ".join(f"{base} (plain and streamed)" if len(both) > 1 else both[0]
                         for base, both in named.items())

    @property
    def line(self) -> str:
        """What the blocked tests point at: the first request that broke, and how."""
        return f"{self.ex.method} {self.path}: {self.ex.error}"

    @property
    def failure(self) -> str:
        """The failing test's line: how it broke, that every request there broke so, and
        that none more is sent."""
        counts = "; ".join(f"{route}: {told}" for route, told in self.routes.items())
        there = "to the endpoint, and its other checks are" if self.everywhere else \
            "there, and the checks that need " + ("it are" if len(self.routes) == 1 else
                                                  "them are")
        return (f"{self.ex.method} {self.ex.url} {self.said}; every request on {self.where} "
                f"broke so, {self.fault} ({counts}): a fault of the connection, not of the "
                f"model; none more is sent {there} blocked")

    @property
    def fix(self) -> str:
        return FIXES[self.fault].format(route="every route" if self.everywhere else
                                        "this route")


class Breakage:
    """The transport faults of one endpoint's probes, route by route; the health route is the
    health check's (it asks a broken connection again, then blocks the rest itself)."""

    def __init__(self, endpoint: Endpoint, driver: Driver):
        self.endpoint, self.driver = endpoint, driver
        self.routes: dict[str, Route] = {}  # in the order first tried
        self.broken: dict[str, Broken] = {}  # by fault
        self.met: dict[Key, Broken] = {}  # the probes that met a breakage: saw it, or not sent
        self.paths: dict[str, str] = {}  # a generation API -> the path its requests went to

    def _path(self, ex: http.Exchange) -> str:
        # read at each answer: a `launch:` endpoint's URL is known once its server started
        return ex.url.removeprefix(self.endpoint.root).split("?")[0]

    def route_of(self, ex: http.Exchange) -> str | None:
        path = self._path(ex)
        if path == self.driver.health_path:
            return None
        return route_named(ex.method, path, ex.request_json)

    def generation(self, api: str, stream: bool) -> str | None:
        """The route a generation on `api` goes to, once one went there."""
        path = self.paths.get(api)
        return route_named("POST", path, {"stream": stream}) if path else None

    def closed(self, route: str | None) -> Broken | None:
        """The breakage a request on `route` would meet (None: a route not known yet); never
        the health route's, which the health check asks and judges itself."""
        if route == route_named("GET", self.driver.health_path):
            return None
        for broken in self.broken.values():
            if broken.everywhere or (route is not None and route in broken.routes):
                return broken
        return None

    def heard(self, ex: http.Exchange, probing: tuple[Key, ...], blamed: Key,
              api: str | None = None) -> None:
        """An answer (or none) to a probe's request, or a read that shares an earlier one;
        `probing`: the probes it was made for, `blamed`: the one a test judges; `api`: the
        generation API it went out on."""
        route = self.route_of(ex)
        if route is None or ex.interrupted or (ex.error or "").startswith("not sent: "):
            return
        if api is not None:
            self.paths.setdefault(api, self._path(ex))
        seen = self.routes.setdefault(route, Route())
        if ex.fault is None:
            if ex.error is None and ex.status is not None:
                seen.whole = True
                seen.ok = seen.ok or 200 <= ex.status < 300
            return
        known = self.closed(route)
        if known is not None:  # met after it was known (a shared read, or one in flight then)
            self.meet(known, probing)
            return
        if seen.whole or (seen.faults and seen.faults[0] != ex.fault):
            return  # a sound route, or one that breaks in more ways than one: each its own
        seen.faults.append(ex.fault)
        if not any(sent is ex for sent in seen.sent):  # a read sharing it is no request
            seen.sent.append(ex)
        seen.blamed = seen.blamed or blamed
        seen.met.extend(probing)
        alike = {r: s for r, s in self.routes.items()
                 if s.faults and s.faults[0] == ex.fault and not s.whole}
        everywhere = len(alike) >= REPEATS and not any(s.ok for s in self.routes.values())
        if len(seen.faults) < REPEATS and not everywhere:
            return
        first = next(iter(alike.values()))  # the route tried first
        assert first.blamed is not None
        cause = first.sent[0]
        broken = self.broken.setdefault(ex.fault, Broken(
            ex.fault, first.blamed, cause, self._path(cause), self.driver.reason(cause)))
        broken.everywhere = broken.everywhere or everywhere
        for r, s in alike.items():
            if everywhere or len(s.faults) >= REPEATS:
                broken.routes[r] = s.told()
                self.meet(broken, s.met)

    def meet(self, broken: Broken, probing: Iterable[Key]) -> None:
        for key in probing:
            self.met.setdefault(key, broken)
