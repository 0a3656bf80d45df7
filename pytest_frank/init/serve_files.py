"""`--serve FILE...`: which server each serve file starts, matched to a URL by port.

A `.service` file is a systemd unit, a `.env` file an env file, anything else a serve script;
files of the same name are one server's (frank-large.service, frank-large.env, frank-large.sh).
The port is the one the command sets, or the engine's default."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit


def specs(files: list[str]) -> list[dict[str, str]]:
    """One serve: mapping per name: frank-large.service, .env and .sh are one server's files."""
    groups: dict[str, dict[str, str]] = {}
    for file in files:
        path = Path(file).resolve()
        kind = {".service": "unit", ".env": "env"}.get(path.suffix, "script")
        groups.setdefault(path.stem, {})[kind] = str(path)
    return [spec if "unit" in spec or "script" in spec else
            {**spec, "unmatched": "an env file with no unit or script of its name"}
            for spec in groups.values()]


def command(spec: dict[str, str], engine: str):
    """The engine's command line the files start (serve.flags.Parsed); None where they cannot
    be read as its command."""
    from pytest_frank.drivers import driver_for
    from pytest_frank.serve.command import ServeError, read
    from pytest_frank.serve.flags import parse

    table = driver_for(engine).launch.serve_flags
    if table is None or "unmatched" in spec:
        return None
    try:
        served = read(spec, is_server=lambda argv: table.start(argv) is not None)
    except (ServeError, OSError):
        return None
    parsed = parse(served, table)
    return parsed if parsed.launched else None


def match(spec_list: list[dict[str, str]], url: str, engine: str,
          out_dir: Path) -> dict | None:
    """The serve: mapping for the server at `url` (paths relative to the fleet file), with
    the command it starts (`parsed`)."""
    parts = urlsplit(url)
    want = str(parts.port or (443 if parts.scheme == "https" else 80))
    for spec in spec_list:
        parsed = command(spec, engine)
        if parsed is not None and parsed.text("port") == want:
            spec_list.remove(spec)
            files = {k: os.path.relpath(spec[k], out_dir) for k in ("unit", "env", "script")
                     if k in spec}
            return {"files": files, "why": f"--serve: its command listens on port {want}",
                    "parsed": parsed}
    return None
