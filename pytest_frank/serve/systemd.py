"""A systemd unit as systemd reads it: sections, keys in order, `\\` continuations, specifiers,
Environment= assignments and EnvironmentFile= files (`-` makes a missing file optional).

A line that does not parse is named by its number and what was expected, never quoted: fleet.yaml
may point serve.unit at any file, and the report may go to a wiki."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_frank.serve.shell import ShellSyntaxError, commands, lex

EXEC_PREFIXES = "-@+!:|"  # ExecStart=-/bin/x: flags for how systemd runs it, not part of the path


class UnitError(ValueError):
    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line, self.why = line, why


@dataclass(frozen=True)
class Entry:
    section: str
    key: str
    value: str  # raw, continuations kept as backslash-newline so the lexer counts lines
    line: int


@dataclass
class Unit:
    path: str
    entries: list[Entry]

    @property
    def name(self) -> str:
        return Path(self.path).name

    def all(self, section: str, key: str) -> list[Entry]:
        """Every value of a key, an empty assignment resetting the list as in drop-ins."""
        found: list[Entry] = []
        for e in self.entries:
            if e.section == section and e.key == key:
                found = [] if not e.value.strip() else found + [e]
        return found

    def last(self, section: str, key: str) -> Entry | None:
        found = self.all(section, key)
        return found[-1] if found else None


def parse_unit(text: str, path: str) -> Unit:
    entries, section, lines = [], "", text.splitlines()
    n = 0
    while n < len(lines):
        start, line = n + 1, lines[n].strip()
        n += 1
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise UnitError(start, "a [Section] header is not closed with ]")
            section = line[1:-1]
            continue
        if "=" not in line:
            raise UnitError(start, "the line is not a Key=value assignment, a [Section] header "
                                   "or a comment: expected a systemd unit")
        parts = [line]
        while parts[-1].endswith("\\") and n < len(lines):
            nxt = lines[n].strip()
            n += 1
            parts.append("\\" if nxt[:1] in ("#", ";") else nxt)  # comments inside are skipped
        key, value = "\n".join(parts).split("=", 1)
        entries.append(Entry(section, key.strip(), value.strip(), start))
    return Unit(path, entries)


def specifiers(text: str, unit: Unit, line: int, unresolved: list[tuple[int, str]]) -> str:
    """%n, %N, %p and %% as systemd fills them; others need the host and are named unresolved."""
    stem = unit.name.rsplit(".", 1)[0]
    known = {"n": unit.name, "N": stem, "p": stem.split("@")[0], "%": "%"}
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and i + 1 < len(text):
            spec = text[i + 1]
            if spec in known:
                out.append(known[spec])
            else:
                unresolved.append((line, f"the specifier %{spec} depends on the host"))
                out.append("%" + spec)
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def assignments(value: str, line: int) -> list[tuple[str, str]]:
    """Environment="A=1" "B=2 3": quoted words, each one NAME=value."""
    try:
        words = lex(value, mode="literal").tokens
    except ShellSyntaxError as exc:
        raise UnitError(line, f"Environment=: {exc.why}") from None
    pairs = []
    for w in words:
        if w.sep:
            continue
        name, eq, val = w.text.partition("=")
        if not eq or not name.isidentifier():
            raise UnitError(line + w.line - 1, "an Environment= item is not NAME=value")
        pairs.append((name, val))
    return pairs


@dataclass(frozen=True)
class EnvLine:
    name: str
    value: str
    line: int


def parse_env_file(text: str) -> tuple[list[EnvLine], list[tuple[int, str]]]:
    """KEY=value lines as systemd's EnvironmentFile= reads them: quotes removed, no variable
    expansion (a `$` stays literal, which is named), `export ` tolerated."""
    try:
        tokens = lex(text, mode="literal").tokens
    except ShellSyntaxError as exc:
        raise UnitError(exc.line, exc.why) from None
    found, problems = [], []
    for cmd in commands(tokens):
        words = cmd[1:] if cmd[0].text == "export" else cmd
        for w in words:
            name, eq, val = w.text.partition("=")
            if not eq or not name.isidentifier():
                raise UnitError(w.line, "the line is not KEY=value: expected an environment "
                                "file (KEY=value lines and comments)")
            if "$" in val:
                problems.append((w.line, f"{name}: systemd does not expand variables in an "
                                 "EnvironmentFile=, the server gets the `$` literally"))
            found.append(EnvLine(name, val, w.line))
    return found, problems
