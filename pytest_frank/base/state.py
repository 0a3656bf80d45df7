"""What one run registers and learns, kept per run rather than per process: the claims a
conftest.py adds, the secrets every output masks, the values a reproduce line names by variable.
Two pytest runs in one process (pytester's in-process runs inside the suite's own) each see
their own, and nothing of one outlives it.

The state in use is the innermost pytest run's, from its configure to its unconfigure (the
plugin's `begin` and `end`, the state kept on its config's stash); outside any run (the `frank`
command, a plain import) the process's own. Each module keeps its part as a class of its own,
`current().part(Kind)`, made empty on a run's first use.

Tests start clean with `fresh()`: a state of their own for the block, the previous one back
after it."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, TypeVar

T = TypeVar("T")


class RunState:
    def __init__(self) -> None:
        self._parts: dict[type, Any] = {}
        self._lock = threading.Lock()  # probe threads may ask for a part at once

    def part(self, kind: type[T]) -> T:
        """This run's `kind()`, made on first use."""
        found = self._parts.get(kind)
        if found is None:
            with self._lock:
                found = self._parts.setdefault(kind, kind())
        return found


_OUTSIDE = RunState()  # no pytest run under way
_RUNS: list[RunState] = []  # the runs under way, innermost last


def current() -> RunState:
    return _RUNS[-1] if _RUNS else _OUTSIDE


def begin() -> RunState:
    """A new, empty state, current until `end`."""
    state = RunState()
    _RUNS.append(state)
    return state


def end(state: RunState | None) -> None:
    """The run is over: the state before it is current again."""
    if state is not None and state in _RUNS:
        _RUNS.remove(state)


@contextmanager
def fresh() -> Iterator[RunState]:
    """A state of its own for the block (nothing registered, nothing masked); the one before it
    is current again after: how a test starts clean and leaves nothing behind."""
    state = begin()
    try:
        yield state
    finally:
        end(state)
