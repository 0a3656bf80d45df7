"""Ctrl-C and SIGTERM while a fleet is verified. The first stops the run where it is: no request
is sent, the ones in flight are cut, the tests judge what was measured and the rest read
`interrupted`, every report is written, and pytest exits 2. The second ends the process at once."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any, Callable

from pytest_frank.transport.http import Stop

# What signal.signal hands back: the handler a signal had before.
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

SIGNALS = (signal.SIGINT, signal.SIGTERM)  # a CI job's timeout sends SIGTERM


class Interrupts:
    def __init__(self, stop: Stop):
        self.stop = stop
        self._previous: dict[int, Handler] = {}

    def install(self) -> None:
        """From the probe phase to the end of the reports; only the main thread may."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._hit)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _hit(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self.stop.why is not None:  # the operator means it: no reports, no waiting
            _say(f"pytest-frank: {name} again: ending now, without reports")
            os._exit(128 + signum)
        _say(f"pytest-frank: {name}: stopping the probes, writing the reports with what was "
             f"measured (once more ends at once)")
        self.stop.set(f"interrupted by {name}")


def _say(line: str) -> None:
    # os.write: a handler that ran in the middle of a print must not print through the same
    # buffered stream (a reentrant write raises).
    try:
        os.write(2, f"\n{line}\n".encode())
    except OSError:
        pass
