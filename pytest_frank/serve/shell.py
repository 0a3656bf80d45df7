"""Words of a shell script, an env file or a systemd command line, with the line each word began on.

One small lexer serves all three, because they quote alike ('single', "double", backslash) and
differ only in how a variable expands: the shell splits an unquoted `$VAR` or `${VAR}` into several
words; systemd splits a `$VAR` that stands alone as a word and inserts `${VAR}` as one piece.
Command substitution (`$(...)`, backticks) is never run: the word keeps its text and the reader is
told it could not be resolved.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["shell", "systemd", "literal"]
Values = dict[str, "str | list[str]"]  # a list is a bash array

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(\[[@*]\])?(?:(:?[-=+])([^}]*))?\}")
SEPARATORS = ("&&", "||", ";;", ";", "|", "&", "(", ")", "\n")


class ShellSyntaxError(ValueError):
    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line, self.why = line, why


@dataclass
class Word:
    text: str
    line: int
    vars: list[str] = field(default_factory=list)  # variables expanded into it, in order
    quoted: bool = False  # any part was quoted (an empty quoted word is still a word)


@dataclass
class Token:
    """A word, or a command separator (`text` one of SEPARATORS, `sep` True)."""

    text: str
    line: int
    sep: bool = False
    vars: list[str] = field(default_factory=list)


@dataclass
class Lexed:
    tokens: list[Token]
    unresolved: list[tuple[int, str]]  # (line, what could not be resolved)


class _Lexer:
    def __init__(self, text: str, values: Values, mode: Mode):
        self.s, self.values, self.mode = text, values, mode
        self.i, self.line = 0, 1
        self.tokens: list[Token] = []
        self.unresolved: list[tuple[int, str]] = []
        self.word: Word | None = None

    # -- words -----------------------------------------------------------------------------
    def _piece(self, text: str, quoted: bool = False) -> Word:
        if self.word is None:
            self.word = Word("", self.line)
        self.word.text += text
        self.word.quoted |= quoted
        return self.word

    def _end_word(self) -> None:
        if self.word is not None and (self.word.text or self.word.quoted):
            self.tokens.append(Token(self.word.text, self.word.line, vars=self.word.vars))
        self.word = None

    def _split_in(self, value: str | list[str], name: str) -> None:
        """An unquoted expansion: its first field joins the current word, the rest are words."""
        fields = value if isinstance(value, list) else value.split()
        for n, part in enumerate(fields):
            if n:
                self._end_word()
            self._piece(part).vars.append(name)

    # -- the scan ----------------------------------------------------------------------------
    def run(self) -> Iterator[Token]:
        """Tokens one at a time: what follows a separator is expanded only when asked for, so a
        script's assignments can change `values` between its commands."""
        s = self.s
        while self.i < len(s):
            while self.tokens:
                yield self.tokens.pop(0)
            c = s[self.i]
            if c == "\\" and s.startswith("\n", self.i + 1):
                self.i += 2
                self.line += 1
            elif c == "\\" and self.i + 1 < len(s):
                self._piece(s[self.i + 1], quoted=True)
                self.i += 2
            elif c == "'":
                self._single()
            elif c == '"':
                self._double()
            elif c == "$" and self.mode != "literal":
                self._dollar(quoted=False)
            elif c == "`" and self.mode == "shell":
                self._unresolvable_backtick()
            elif c == "#" and self.word is None:
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c in " \t\r":
                self._end_word()
                self.i += 1
            elif self._separator():
                pass
            else:
                self._piece(c)
                self.i += 1
        self._end_word()
        yield from self.tokens
        self.tokens.clear()

    def _separator(self) -> bool:
        for sep in SEPARATORS:
            if self.s.startswith(sep, self.i):
                self._end_word()
                self.tokens.append(Token(sep, self.line, sep=True))
                self.i += len(sep)
                self.line += sep == "\n"
                return True
        return False

    def _single(self) -> None:
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise ShellSyntaxError(self.line, "a single quote is never closed")
        text = self.s[self.i + 1:end]
        self._piece(text, quoted=True)
        self.line += text.count("\n")
        self.i = end + 1

    def _double(self) -> None:
        start, s = self.line, self.s
        self.i += 1
        self._piece("", quoted=True)
        while self.i < len(s) and s[self.i] != '"':
            c = s[self.i]
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '"\\$`\n':
                if s[self.i + 1] == "\n":
                    self.line += 1
                else:
                    self._piece(s[self.i + 1], quoted=True)
                self.i += 2
            elif c == "$" and self.mode != "literal":
                self._dollar(quoted=True)
            else:
                self.line += c == "\n"
                self._piece(c, quoted=True)
                self.i += 1
        if self.i >= len(s):
            raise ShellSyntaxError(start, "a double quote is never closed")
        self.i += 1

    def _unresolvable_backtick(self) -> None:
        end = self.s.find("`", self.i + 1)
        end = len(self.s) - 1 if end < 0 else end
        text = self.s[self.i:end + 1]
        self.unresolved.append((self.line, f"{text} is a command substitution (not run here)"))
        self._piece(text)
        self.i = end + 1

    def _dollar(self, quoted: bool) -> None:
        s, at = self.s, self.i + 1
        if s.startswith("$", at) and self.mode == "systemd":  # systemd's escaped dollar
            self._piece("$", quoted)
            self.i = at + 1
            return
        if s.startswith("(", at):
            self._substitution(quoted)
            return
        braced = _BRACED.match(s, at)
        if braced:
            self.i = braced.end()
            name, array, op, arg = braced.groups()
            self._expand(name, quoted, braced=True, array=bool(array), op=op, arg=arg or "")
            return
        bare = _NAME.match(s, at)
        if bare:
            self.i = bare.end()
            self._expand(bare.group(), quoted, braced=False)
            return
        special = s[at:at + 1]
        if special and (special.isdigit() or special in "@*#?!$-"):
            self.unresolved.append((self.line, f"${special} is set only when the script runs"))
            self._piece("$" + special, quoted)
            self.i = at + 1
            return
        self._piece("$", quoted)
        self.i = at

    def _substitution(self, quoted: bool) -> None:
        depth, j = 0, self.i + 1
        while j < len(self.s):
            depth += {"(": 1, ")": -1}.get(self.s[j], 0)
            if depth == 0:
                break
            j += 1
        text = self.s[self.i:j + 1]
        self.unresolved.append((self.line, f"{text} is a command substitution (not run here)"))
        self._piece(text, quoted)
        self.line += text.count("\n")
        self.i = j + 1

    def _expand(self, name: str, quoted: bool, *, braced: bool, array: bool = False,
                op: str | None = None, arg: str = "") -> None:
        value = self.values.get(name)
        unset = value is None or (op is not None and op.startswith(":") and value == "")
        if op in ("-", ":-", "=", ":=") and unset:
            value = arg
            if op.endswith("="):
                self.values[name] = arg
        elif op in ("+", ":+"):
            value = "" if unset else arg
        elif value is None:
            shown = "${" + name + "}" if braced else "$" + name
            self.unresolved.append((self.line, f"{shown} is not set"))
            value = ""
        if isinstance(value, list) and not array:
            value = value[0] if value else ""  # "$ARR" is its first element, as in bash
        if self.word is None:
            self.word = Word("", self.line)
        if isinstance(value, list) and quoted:  # "${ARR[@]}": one word per element
            self._split_in(value, name)
        elif quoted or (self.mode == "systemd" and braced):
            self._piece(value if isinstance(value, str) else " ".join(value), quoted=True)
            self.word.vars.append(name)
        else:
            self._split_in(value, name)


def lex(text: str, values: Values | None = None, mode: Mode = "shell") -> Lexed:
    """Split text into words and separators, expanding variables from `values` (which
    `${VAR:=x}` may change). Raises ShellSyntaxError on an unclosed quote."""
    lexer = _Lexer(text, {} if values is None else values, mode)
    return Lexed(list(lexer.run()), lexer.unresolved)


def stream(text: str, values: Values, mode: Mode = "shell") -> tuple[Iterator[Token], list]:
    """Tokens expanded lazily against `values`, and the list that collects what was unresolved."""
    lexer = _Lexer(text, values, mode)
    return lexer.run(), lexer.unresolved


def commands(tokens: list[Token]) -> list[list[Token]]:
    """Simple commands: the words between separators."""
    out: list[list[Token]] = [[]]
    for t in tokens:
        if t.sep:
            if out[-1]:
                out.append([])
        else:
            out[-1].append(t)
    return [c for c in out if c]
