"""An endpoint's HTTP: its one recorded client (capped, paced, stoppable), the official client
of each route asked on over it, the driver of each route, and the GET reads that stand for the
session (every later read gets that exchange)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pytest_frank.drivers import Driver
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.pacing import Pacing
from pytest_frank.transport import http

if TYPE_CHECKING:
    import httpx2


class EndpointClient:
    """The requests of one endpoint, all through one client built on first use."""

    __slots__ = ("endpoint", "driver", "pacing", "_http", "_sdks", "_drivers", "_shared",
                 "_lock")

    def __init__(self, endpoint: Endpoint, driver: Driver, pacing: Pacing):
        self.endpoint = endpoint
        self.driver = driver
        self.pacing = pacing  # its waits, deadline and stop bound every request
        self._http: httpx2.Client | None = None
        self._sdks: dict[str, Any] = {}  # the official client of each route asked on
        self._drivers: dict[str, Driver] = {}
        self._shared: dict[str, http.Exchange] = {}  # per GET route: what every later read gets
        self._lock = threading.RLock()

    def url(self, path: str) -> str:
        return self.endpoint.root + path

    def headers(self) -> dict[str, str]:
        return {**self.endpoint.headers, **self.driver.auth_headers(self.endpoint.api_key)}

    def client(self) -> httpx2.Client:
        with self._lock:
            if self._http is None:
                pace = self.pacing
                self._http = http.client(pace.timeout, pace.limiter, pace.deadline,
                                         stop=pace.stop, floor=pace.floor,
                                         quiet=self.driver.abandon_quiet_s,
                                         floor_from=pace.floor_from)
            return self._http

    def send(self, method: str, path: str, body: Any = None) -> http.Exchange:
        return http.send(self.client(), method, self.url(path), headers=self.headers(),
                         json_body=body)

    def driver_on(self, api: str | None = None) -> Driver:
        """The driver generating on `api`'s route (None: the endpoint's own)."""
        if api is None:
            return self.driver
        with self._lock:
            return self._drivers.setdefault(api, self.driver.with_api(api))

    def sdk(self, api: str | None = None) -> Any:
        """The official client of `api`'s route (None: the endpoint's own), on the same
        recorded HTTP client."""
        driver = self.driver_on(api)
        with self._lock:
            if driver.api not in self._sdks:
                self._sdks[driver.api] = driver.wire.sdk_client(self.endpoint, self.client(),
                                                                self.pacing.timeout)
            return self._sdks[driver.api]

    def shared(self, path: str) -> http.Exchange | None:
        """The read of `path` that stands for the session, if one was made."""
        with self._lock:
            return self._shared.get(path)

    def keep(self, path: str, ex: http.Exchange) -> None:
        """Keep a GET's exchange for every later read where it stands for the session: a costly
        cut, or the model list read whole."""
        if ex.costly or (path == self.driver.models_path and ex.ok):
            with self._lock:
                self._shared.setdefault(path, ex)

    def kept(self) -> set[int]:
        """The ids of the exchanges kept for later reads (they keep their bodies whole)."""
        with self._lock:
            return {id(ex) for ex in self._shared.values()}

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
