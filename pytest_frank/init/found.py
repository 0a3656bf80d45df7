"""What the survey finds of one claim, and the error that writes nothing: the survey's parts
(the chat gate, the client offer) build them without importing the survey."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class InitError(Exception):
    """A URL that cannot be written down: one line naming it and why."""


@dataclass
class Found:
    """One claim to ask: its fleet.yaml value and why (a YAML comment)."""

    value: Any
    why: str
