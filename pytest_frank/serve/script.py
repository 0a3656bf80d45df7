"""Run a serve script on paper: follow its assignments, `export`s, arrays and `source`d env files
in order, and keep the last command that starts something. Nothing is executed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_frank.base import redact
from pytest_frank.serve.shell import Token, Values, stream

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
DECLARES = {"export", "readonly", "declare", "local", "typeset"}
WRAPPERS = {"exec", "nohup", "command", "time", "env", "stdbuf", "setsid"}
NOT_A_SERVER = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "{", "}", "[", "[[", "test", "!", "return", "exit", "true", "false", ":", "wait",
    "trap", "echo", "printf", "sleep", "shift", "unset", "set", "cd", "pushd", "popd", "umask",
    "mkdir", "rm", "cp", "mv", "ln", "chmod", "chown", "touch", "cat", "grep", "sed", "awk", "ss",
    "logger", "ulimit", "source", ".", "eval", "alias", "shopt", "read", "nvidia-smi", "sync",
}
MAX_SOURCE_DEPTH = 4


@dataclass(frozen=True)
class Site:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Located:
    text: str
    site: Site                          # where its value is set
    vars: list[str] = field(default_factory=list)
    at: Site | None = None              # where it sits in the command, when that differs


@dataclass
class Scope:
    """What a script (or the files before it) has set so far, and where."""

    values: Values = field(default_factory=dict)
    sites: dict[str, Site] = field(default_factory=dict)
    elements: dict[str, list[Site]] = field(default_factory=dict)  # per item of an array
    unresolved: list[str] = field(default_factory=list)

    def assign(self, name: str, value: str | list[str], site: Site, append: bool = False) -> None:
        if redact.is_credential_name(name):  # HF_TOKEN=...: masked in every report from now on
            for item in value if isinstance(value, list) else [value]:
                redact.register_credential(item)
        old = self.values.get(name)
        if append and isinstance(old, list):
            value = old + (value if isinstance(value, list) else [value])
        elif append and isinstance(old, str) and isinstance(value, str):
            value = old + value
        self.values[name] = value
        self.sites[name] = site
        if not isinstance(value, list):
            self.elements.pop(name, None)


def _groups(tokens, label: str):
    """Commands as lists of tokens; `NAME=( ... )` arrays come back whole, newlines and all."""
    cmd: list[Token] = []
    for t in tokens:
        assign = _ASSIGN.match(cmd[-1].text) if cmd and cmd[-1].text.endswith("=") else None
        if t.sep and t.text == "(" and assign:
            items = []
            for u in tokens:
                if u.sep and u.text == ")":
                    break
                if not u.sep:
                    items.append(u)
            yield cmd[:-1], (cmd[-1], assign, items)
            cmd = []
        elif t.sep:
            if cmd:
                yield cmd, None
            cmd = []
        else:
            cmd.append(t)
    if cmd:
        yield cmd, None


def run(text: str, label: str, scope: Scope, depth: int = 0) -> list[Located] | None:
    """Interpret a script into `scope`; return the last command that could start a server."""
    tokens, lexer_unresolved = stream(text, scope.values)
    last = None
    for cmd, array in _groups(tokens, label):
        if array:
            head, assign, items = array
            name, append, _ = assign.groups()
            sites = [_site(i, label, scope) for i in items]
            scope.assign(name, [i.text for i in items], Site(label, head.line), bool(append))
            scope.elements[name] = (scope.elements.get(name, []) if append else []) + sites
            continue
        found = _one(cmd, label, scope, depth)
        last = found or last
    scope.unresolved += [f"{label}:{line}: {what}" for line, what in lexer_unresolved]
    return last


def _one(cmd: list[Token], label: str, scope: Scope, depth: int) -> list[Located] | None:
    words = list(cmd)
    if words[0].text == "for" and len(words) > 2 and words[2].text == "in":
        items = [w.text for w in words[3:]]  # the loop variable is set for the body
        scope.assign(words[1].text, items[-1] if items else "", Site(label, words[0].line))
        return None
    if words[0].text in DECLARES:
        words = [w for w in words[1:] if not w.text.startswith("-")]
        for w in words:
            _assign_word(w, label, scope)
        return None
    while words and _ASSIGN.match(words[0].text):
        _assign_word(words.pop(0), label, scope)  # a prefix assignment: close enough for us
    if not words:
        return None
    if words[0].text in (".", "source") and len(words) > 1:
        _source(words[1], label, scope, depth)
        return None
    while words and Path(words[0].text).name in WRAPPERS:
        words.pop(0)  # exec, env, nohup...: the server is the command they run
        while words and (words[0].text.startswith("-") or _ASSIGN.match(words[0].text)):
            words.pop(0)
    if not words or Path(words[0].text).name in NOT_A_SERVER:
        return None
    return [Located(w.text, _site(w, label, scope), list(w.vars), Site(label, w.line))
            for w in words]


def _site(w: Token, label: str, scope: Scope) -> Site:
    """A word made of exactly one variable points at where that variable was set."""
    if len(set(w.vars)) == 1 and w.vars[0] in scope.sites:
        name = w.vars[0]
        value = scope.values.get(name)
        if isinstance(value, list) and w.text in value and name in scope.elements:
            return scope.elements[name][value.index(w.text)]
        if value == w.text:
            return scope.sites[name]
    return Site(label, w.line)


def _assign_word(w: Token, label: str, scope: Scope) -> None:
    m = _ASSIGN.match(w.text)
    if m:
        scope.assign(m.group(1), m.group(3), Site(label, w.line), bool(m.group(2)))


def _source(word: Token, label: str, scope: Scope, depth: int) -> None:
    path = Path(word.text).expanduser()
    if not path.is_absolute():
        path = Path(label).parent / path
    if depth >= MAX_SOURCE_DEPTH or not path.is_file():
        scope.unresolved.append(f"{label}:{word.line}: sources {word.text}, which is not "
                                "readable here (its variables are unknown)")
        return
    run(path.read_text(encoding="utf-8", errors="replace"), str(path), scope, depth + 1)
