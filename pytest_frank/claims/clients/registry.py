"""The client profiles by their expect.clients name, in the order the battery plays them."""

from __future__ import annotations

from pytest_frank.claims.clients import claude_code, codex, opencode, openwebui, pi
from pytest_frank.claims.clients.profile import Profile

PROFILES: dict[str, Profile] = {p.name: p for p in (
    claude_code.PROFILE, codex.PROFILE, pi.PROFILE, opencode.PROFILE, openwebui.PROFILE)}
