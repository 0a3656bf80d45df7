"""A local server started for the session (fleet.yaml `launch:`): the server, why it could not
be started, and its llama.cpp log, kept after it stops."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pytest_frank.fleet import Endpoint

if TYPE_CHECKING:
    from pytest_frank.local.launch import LaunchedServer
    from pytest_frank.local.llama_log import ServerLog


class Launched:
    """An endpoint's `launch:` server, started once (`start`), at most; none without `launch:`."""

    __slots__ = ("spec", "server", "error", "log", "_lock")

    def __init__(self, spec: dict[str, Any] | None):
        self.spec = spec
        self.server: LaunchedServer | None = None
        self.error: str | None = None  # why it could not be started
        self.log: ServerLog | None = None  # its llama.cpp log, kept after it stops
        self._lock = threading.Lock()

    def pending(self) -> bool:
        """A `launch:` server not started (nor failed to start) yet."""
        return bool(self.spec) and self.server is None and not self.error

    def start(self, endpoint: Endpoint) -> None:
        """Start the server, once; the endpoint's URL becomes the server's."""
        with self._lock:
            if not self.pending():
                return
            from pytest_frank.local.launch import LaunchError, launch

            assert self.spec is not None
            try:
                # a process of its own: its own llama.cpp log, for its own endpoint's report
                self.server = launch(self.spec, own_process=True)
            except LaunchError as exc:
                self.error, self.log = str(exc), exc.log
                return
            endpoint.url, self.log = self.server.url, self.server.log

    @property
    def build(self) -> str | None:
        """The package that serves it (its llama.cpp has no build number)."""
        return self.server.build if self.server is not None else None

    def log_tail(self) -> str | None:
        """The end of its llama.cpp log (its start, its warnings, why it failed), masked and
        inert for a report; None when nothing was launched or the log stayed on stderr."""
        return self.log.tail() if self.log is not None else None

    def log_text(self) -> str:
        return self.log.text() if self.log is not None else ""

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
