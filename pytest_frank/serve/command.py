"""How an endpoint is started, read from fleet.yaml's `serve:` files into one ServeCommand."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_frank.base import redact
from pytest_frank.serve import script, systemd
from pytest_frank.serve.script import Located, Scope, Site
from pytest_frank.serve.shell import ShellSyntaxError, stream

KEYS = ("unit", "env", "script", "command")
MAX_FILE_BYTES = 1 << 20  # a unit, env file or script is a few KB; anything larger is a mistake


class ServeError(Exception):
    """A serve file that cannot be read at all; the message names the file, line and reason."""


@dataclass(frozen=True)
class Arg:
    text: str
    where: Site  # where its value is set: the command line, or the line defining its variable
    vars: tuple[str, ...] = ()


@dataclass
class ServeCommand:
    argv: list[Arg]                     # the program first
    env: dict[str, str]                 # the environment the server starts with (what we know)
    env_sites: dict[str, Site]
    where: Site                         # where the command itself starts
    kind: str                           # "unit", "script" or "command": who asks, for messages
    unit: systemd.Unit | None = None
    unresolved: list[str] = field(default_factory=list)

    @property
    def program(self) -> str:
        return self.argv[0].text if self.argv else ""

    @property
    def service(self) -> str | None:
        """The unit name to restart, when a unit starts the server."""
        return self.unit.name if self.unit else None


def read(spec: Mapping[str, str], base_dir: str | Path | None = None, *,
         is_server: Callable[[list[str]], bool] | None = None) -> ServeCommand:
    """Read a `serve:` mapping. `is_server(argv)` tells a server launch from a wrapper script
    (a unit whose ExecStart runs a script); without it any program counts.
    Raises ServeError for a file that is missing or does not parse."""
    paths = {k: _path(spec[k], base_dir) for k in ("unit", "env", "script") if spec.get(k)}
    scope, unit = Scope(), None
    if "unit" in paths:
        unit = _unit(paths["unit"])
        _unit_env(unit, scope, paths.get("env"))
    if "env" in paths:
        _shell_env(paths["env"], scope)
    if "script" in paths:
        return _from_script(paths["script"], scope, unit)
    if unit is not None:
        return _from_unit(unit, scope, is_server)
    if spec.get("command"):
        return _from_words(_words(spec["command"], "serve.command", scope), scope, "command")
    raise ServeError(f"serve: needs one of {', '.join(KEYS)}")


def _path(value: str, base_dir) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() or base_dir is None else Path(base_dir) / path


def _text(path: Path) -> str:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ServeError(f"{path}: no such file") from None
    except OSError as exc:
        raise ServeError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ServeError(f"{path}: larger than {MAX_FILE_BYTES >> 10} KiB: not a serve file")
    return data.decode("utf-8", errors="replace")


def _unit(path: Path) -> systemd.Unit:
    try:
        return systemd.parse_unit(_text(path), str(path))
    except systemd.UnitError as exc:
        raise ServeError(f"{path}:{exc.line}: {exc.why}") from None


def _unit_env(unit: systemd.Unit, scope: Scope, extra_env: Path | None) -> None:
    """Environment= first, then each EnvironmentFile= in order: later assignments win."""
    for e in unit.all("Service", "Environment"):
        try:
            pairs = systemd.assignments(e.value, e.line)
        except systemd.UnitError as exc:
            raise ServeError(f"{unit.path}:{exc.line}: {exc.why}") from None
        for name, value in pairs:
            scope.assign(name, value, Site(unit.path, e.line))
    for e in unit.all("Service", "EnvironmentFile"):
        optional, name = e.value.startswith("-"), e.value.lstrip("-").strip()
        if extra_env is not None and Path(name).name == extra_env.name:
            continue  # serve.env is this file's copy; it is read next
        path = Path(name)
        if not path.is_file():
            if not optional:
                scope.unresolved.append(
                    f"{unit.path}:{e.line}: EnvironmentFile={name} is not on this machine (set "
                    "serve.env to its copy; without it systemd refuses to start the unit)")
            continue
        _env_file(path, scope)


def _env_file(path: Path, scope: Scope) -> None:
    try:
        lines, problems = systemd.parse_env_file(_text(path))
    except systemd.UnitError as exc:
        raise ServeError(f"{path}:{exc.line}: {exc.why}") from None
    for item in lines:
        scope.assign(item.name, item.value, Site(str(path), item.line))
    scope.unresolved += [f"{path}:{line}: {what}" for line, what in problems]


def _shell_env(path: Path, scope: Scope) -> None:
    """serve.env as the serve script sees it: sourced, so variables do expand. It sets
    variables; a line that runs a program means the file is something else."""
    try:
        runs = script.run(_text(path), str(path), scope)
    except ShellSyntaxError as exc:
        raise ServeError(f"{path}:{exc.line}: {exc.why}") from None
    if runs:
        raise ServeError(f"{runs[0].at or runs[0].site}: the line runs a command, not NAME=value: "
                         "expected an env file (assignments, `export`, comments)")


def _from_unit(unit: systemd.Unit, scope: Scope, is_server) -> ServeCommand:
    entry = unit.last("Service", "ExecStart")
    if entry is None:
        raise ServeError(f"{unit.path}: no ExecStart= in [Service]")
    unresolved: list[tuple[int, str]] = []
    value = systemd.specifiers(entry.value.lstrip(systemd.EXEC_PREFIXES), unit, entry.line,
                               unresolved)
    words = _words(value, unit.path, scope, mode="systemd", first_line=entry.line)
    scope.unresolved += [f"{unit.path}:{line}: {what}" for line, what in unresolved]
    target = Path(words[0].text) if words else None
    if target and is_server and not is_server([w.text for w in words]) and target.is_file():
        return _from_script(target, scope, unit)  # ExecStart runs a serve script: read it
    return _from_words(words, scope, "unit", unit)


def _from_script(path: Path, scope: Scope, unit) -> ServeCommand:
    try:
        last = script.run(_text(path), str(path), scope)
    except ShellSyntaxError as exc:
        raise ServeError(f"{path}:{exc.line}: {exc.why}") from None
    if not last:
        raise ServeError(f"{path}: no command in the script starts a server")
    return _from_words(last, scope, "script", unit)


def _words(text: str, label: str, scope: Scope, mode="shell", first_line: int = 1
           ) -> list[Located]:
    tokens, unresolved = stream(text, scope.values, mode)
    try:
        found = [t for t in tokens if not t.sep]
    except ShellSyntaxError as exc:
        raise ServeError(f"{label}:{exc.line + first_line - 1}: {exc.why}") from None
    scope.unresolved += [f"{label}:{line + first_line - 1}: {what}" for line, what in unresolved]
    out = []
    for t in found:
        at = Site(label, t.line + first_line - 1)
        out.append(Located(t.text, script._site(t, label, scope) if t.vars else at,
                           list(t.vars), at))
    return out


def _credential_flags(words: list[Located]) -> None:
    """`--api-key sk-...`, `--hf-token=...`: the value is a secret in every report from now on."""
    for i, word in enumerate(words):
        name, eq, inline = word.text.partition("=")
        if not name.startswith("-") or not redact.is_credential_name(name):
            continue
        if eq:
            redact.register_credential(inline)
        elif i + 1 < len(words) and not words[i + 1].text.startswith("-"):
            redact.register_credential(words[i + 1].text)


def _from_words(words: list[Located], scope: Scope, kind: str, unit=None) -> ServeCommand:
    if not words:
        raise ServeError(f"{kind}: the command is empty")
    _credential_flags(words)
    env = {k: v if isinstance(v, str) else " ".join(v) for k, v in scope.values.items()}
    where = words[0].at or words[0].site
    return ServeCommand(
        argv=[Arg(w.text, w.site, tuple(w.vars)) for w in words], env=env,
        env_sites=dict(scope.sites), where=where, kind=kind, unit=unit,
        unresolved=list(dict.fromkeys(scope.unresolved)))
