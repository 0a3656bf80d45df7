"""clients: each coding client's own first request, on its own route, gets a usable answer,
and so does its next request carrying a tool's result.

Where the other claims send the battery's small requests, a profile sends what the client
sends (pytest_frank.claims.clients.<client>): its system layout, content as arrays, its tool
set's size and schema keywords, its output budget, headers and extra fields, no sampling fields
where the client sends none, at the client's typical size (generated prose, `request_kb`). One
test per client: `test_client[NAME-claude_code]`."""

from __future__ import annotations

from pytest_frank.claims import Claim
from pytest_frank.claims.checks import Check
from pytest_frank.claims.clients.judge import judge
from pytest_frank.claims.clients.options import CHOICES, Options
from pytest_frank.claims.clients.play import play
from pytest_frank.drivers.base import Driver

__all__ = ["CHOICES", "CLAIM", "CLIENT", "Options", "names"]

CLAIM = Claim("clients",
              "each coding client's own requests (Claude Code, Codex, pi, opencode, Open WebUI) "
              "are answered", Options, order=80,
              asks="`true` asks every client, a list (each name also a mapping of options) "
                   "some; `false` turns it off.",
              tests=("test_client",))


def names(options: Options, driver: Driver) -> list[str]:
    return [name for name, _ in options.clients]


CLIENT = Check("test_client", "clients", play, judge, cases=names,
               per="CLIENT",
               when="one per client: `claude_code`, `codex`, `pi`, `opencode`, `openwebui`")
