"""How a check fails: one diagnosis, the usual fix, no Python frames."""

from __future__ import annotations

import pytest

from pytest_frank import redact


def fail(what: str, fix: str | None = None) -> None:
    message = what if not fix else f"{what}\n  fix: {fix}"
    pytest.fail(redact.inert(message), pytrace=False)


def skip(why: str) -> None:
    pytest.skip(redact.inert(why))
