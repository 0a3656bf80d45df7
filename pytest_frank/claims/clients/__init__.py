"""clients: each coding client's own first request, on its own route, gets a usable answer,
and so does its next request carrying a tool's result.

Where the other claims send the battery's small requests, a profile sends what the client
sends (pytest_frank.claims.clients.<client>): its system layout, content as arrays, its tool
set's size and schema keywords, its output budget, headers and extra fields, no sampling fields
where the client sends none, at the client's typical size (generated prose, `request_kb`). One
test per client: `test_client[NAME-claude_code]`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_frank.checks import Check
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.clients.judge import judge
from pytest_frank.claims.clients.play import play
from pytest_frank.claims.clients.profile import Choices
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.fleet import OptionError

CHOICES = ("request_kb", "model", "max_tokens")


@dataclass(frozen=True)
class Options(ClaimOptions):
    # (client, its options) in the order listed; `true` lists every profile
    clients: tuple[tuple[str, Choices], ...] = tuple((name, Choices()) for name in PROFILES)

    @classmethod
    def from_fleet(cls, value: Any, endpoint=None) -> Options:
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

    def of(self, name: str) -> Choices:
        return dict(self.clients)[name]


def names(options: Options, driver) -> list[str]:
    return [name for name, _ in options.clients]


CLIENT = Check("test_client", "clients", play, judge, cases=names)
