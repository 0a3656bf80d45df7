"""How an engine is started, as a part every driver holds (`driver.launch`): its serve command's
flags (serve.flags.ServeFlags), the fleet.yaml `launch:` keys it takes, the settings in effect
from either, which launcher a fix spells a setting for, and what a start's log says. The base
part's readers say "unknown" (no serve command read, no launch keys, nothing read from a log):
an engine not started here has this one, and every reader asks it alike."""

from __future__ import annotations

from typing import Any

from pytest_frank.outcome.verdict import FLEET, SERVER, InEffect, Setting, Spelling
from pytest_frank.serve.flags import ServeFlags


class Launch:
    """An engine this package does not start: no serve command table, no launch keys."""

    # The serve command line as the engine reads it (pytest_frank.serve); None where the engine
    # is not started here.
    serve_flags: ServeFlags | None = None
    # fleet.yaml `launch:` keys as the server settings they make, with launch's defaults:
    # what a launched endpoint has in effect, so no fix asks for it again.
    launch_settings: dict[str, Setting] = {}
    launch_defaults: dict[str, Any] = {}

    def started_by(self, endpoint: Any) -> Spelling:
        """The launcher the endpoint was started with, so a fix spells a setting as that
        launcher takes it: a fleet's `launch:` keys for a server the battery launches, else the
        engine's own server flags (an engine with launchers of its own says which)."""
        return FLEET if getattr(endpoint, "launch", None) else SERVER

    def settings_in_effect(self, launch: dict | None, parsed: Any = None) -> InEffect:
        """Server flag -> value in effect (None for a switch that is on), from a `launch:`
        block and a parsed serve command (serve.flags.Parsed)."""
        found: dict[str, str | None] = {}
        for key, setting in self.launch_settings.items() if launch else ():
            value = (launch or {}).get(key, self.launch_defaults.get(key))
            if value is None or value is False:
                continue
            value = ",".join(map(str, value)) if isinstance(value, list) else value
            found[setting.flag] = None if setting.switch else str(value)
        for role in parsed.values if parsed is not None else ():
            v, flag = parsed.get(role), parsed.table.flags[role]
            if v is not None and v.on:
                found.update(dict.fromkeys(flag.names, None if flag.takes == "none" else v.text))
        return found

    def start_failure(self, log: str) -> str | None:
        """What a failed start's log means, where the engine's words name a cause this driver
        knows (its own error lines often say only what failed, not why); None otherwise."""
        return None

    def backend(self, payloads: dict, log: str) -> tuple[str, str] | None:
        """("cpu" or "gpu", where read) from the slot routes' payloads or the server's log;
        None where neither says."""
        return None
