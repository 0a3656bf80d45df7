"""One endpoint under test: its fleet entry, driver, HTTP client and the probes already run."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable

from pytest_frank import http
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

DEFAULT_TIMEOUT = 30.0


class Target:
    def __init__(self, endpoint: Endpoint, timeout: float = DEFAULT_TIMEOUT):
        self.endpoint = endpoint
        self.name = endpoint.name
        self.driver = driver_for(endpoint.engine)
        self.timeout = float(endpoint.timeout or timeout)
        self.launch_error: str | None = None
        self._server = None
        self._http = None
        self._lock = threading.Lock()
        self._probes: dict[str, Future] = {}

    # -- network --------------------------------------------------------------------------
    def url(self, path: str) -> str:
        return self.endpoint.root + path

    def headers(self) -> dict[str, str]:
        return {**self.endpoint.headers, **self.driver.auth_headers(self.endpoint.api_key)}

    def request(self, method: str, path: str, json_body=None, timeout: float | None = None):
        return http.send(self.client(), method, self.url(path), headers=self.headers(),
                         json_body=json_body, timeout=timeout or self.timeout)

    def get(self, path: str, timeout: float | None = None) -> http.Exchange:
        return self.request("GET", path, timeout=timeout)

    def post(self, path: str, body: Any, timeout: float | None = None) -> http.Exchange:
        return self.request("POST", path, json_body=body, timeout=timeout)

    def model_name(self) -> str:
        """The name requests ask for: the fleet's alias, else the first model the server lists."""
        if self.endpoint.alias:
            return self.endpoint.alias
        from pytest_frank.claims import alias

        served = self.probe(alias.probe)
        return served.ids[0] if served.ids else "default"

    def client(self):
        with self._lock:
            if self._http is None:
                self._http = http.client(self.timeout)
            return self._http

    # -- probes: each runs once per session, its result shared by every check ---------------
    def probe(self, fn: Callable[["Target"], Any]) -> Any:
        key = f"{fn.__module__}.{fn.__qualname__}"
        with self._lock:
            future = self._probes.get(key)
            owner = future is None
            if owner:
                future = self._probes[key] = Future()
        if owner:
            try:
                future.set_result(fn(self))
            except BaseException as exc:
                future.set_exception(exc)
        return future.result()

    # -- a local server started for the session (fleet.yaml `launch:`) ------------------------
    def start(self) -> None:
        spec = self.endpoint.launch
        if not spec or self._server is not None or self.launch_error:
            return
        from pytest_frank.launch import LaunchError, launch

        try:
            self._server = launch(spec)
        except LaunchError as exc:
            self.launch_error = str(exc)
            return
        self.endpoint.url = self._server.url

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
