"""The run's state on pytest's config stash, keyed here so that every glue module (the plugin,
the rows it reports) reads it without importing another."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_frank.base.state import RunState
    from pytest_frank.runtime.session import FrankSession

SESSION: pytest.StashKey[FrankSession] = pytest.StashKey()
RUN_STATE: pytest.StashKey[RunState] = pytest.StashKey()  # its claims and secrets, configure on
