"""The clients claim's options: which client profiles to play, each with its own choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims import key_schemas
from pytest_frank.claims.clients.profile import Choices
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.fleet import Endpoint, OptionError

CHOICES = tuple(key_schemas(Choices))


@dataclass(frozen=True)
class Options(ClaimOptions):
    # (client, its options) in the order listed; `true` lists every profile
    clients: tuple[tuple[str, Choices], ...] = tuple((name, Choices()) for name in PROFILES)

    @classmethod
    def from_fleet(cls, value: Any, endpoint: Endpoint | None = None) -> Options:
        """`expect.clients`: true, or a list of names, each also a one-key mapping
        `{claude_code: {request_kb: 8}}`; raises OptionError naming the entry."""
        if not isinstance(value, list):
            return cls()
        found = []
        for entry in value:
            name, given = (entry, {}) if isinstance(entry, str) else next(iter(entry.items()))
            if name not in PROFILES:
                raise OptionError("", f"unknown client {name!r} (known: "
                                      f"{', '.join(PROFILES)})")
            unknown = sorted(set(given or {}) - set(CHOICES))
            if unknown:
                raise OptionError(f"{name}.{unknown[0]}",
                                  f"unknown option (known: {', '.join(CHOICES)})")
            found.append((name, Choices(**(given or {}))))
        return cls(clients=tuple(found))

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """`true`, or a list of client names, each also a one-key mapping of its choices."""
        names = list(PROFILES)
        choices = {"type": ["object", "null"], "additionalProperties": False,
                   "properties": key_schemas(Choices)}
        return {"type": ["boolean", "array"], "items": {
            "if": {"type": "string"}, "then": {"enum": names},
            "else": {"type": "object", "minProperties": 1, "maxProperties": 1,
                     "propertyNames": {"enum": names}, "additionalProperties": choices}}}

    def of(self, name: str) -> Choices:
        return dict(self.clients)[name]
