"""What an engine's command line means: the tables drivers fill (`ServeFlags`), and an argv read
against one of them into values by role ("model", "ctx", "alias", ...), each with its file:line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_frank.serve.command import Arg, ServeCommand


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]              # every spelling; the first is the one fixes name
    takes: str = "one"                  # "none" (a switch), "one" value, "many" (vLLM's nargs=+)
    off: tuple[str, ...] = ()           # the spellings that turn it off (--no-jinja)

    @property
    def name(self) -> str:
        return self.names[0]


@dataclass(frozen=True)
class Need:
    """A flag a claim needs: `role` present, not turned off, and its value not in `bad`."""

    role: str
    why: str
    fix: str
    bad: tuple[str, ...] = ()
    # Where the engine's default already serves the claim: an absent flag is a note saying so
    # (the fix then pins it), not a failure.
    default_serves: str | None = None
    required: bool = True  # False: an absent flag is fine (only a bad value is a finding)


@dataclass(frozen=True)
class ServeFlags:
    programs: tuple[tuple[str, ...], ...]          # how a launch starts: ("llama-server",),
    flags: Mapping[str, Flag]                      # ("vllm", "serve"), ("-m", "module")
    needs: Mapping[str, tuple[Need, ...]] = field(default_factory=dict)  # claim -> its flags
    positional: str | None = None                  # role of a bare argument (vLLM's model)
    defaults: Mapping[str, str] = field(default_factory=dict)  # role -> the engine's default
    files: tuple[str, ...] = ()                    # roles naming files that must exist
    gguf: tuple[str, ...] = ()                     # ...and be GGUF
    alias_separator: str | None = None             # llama.cpp: --alias a,b
    slots_split_ctx: bool = False                  # --parallel divides --ctx-size
    quantized_kv_build: str | None = None          # the build option a quantized KV cache needs
    mtp_spec_values: tuple[str, ...] = ()          # spec types that draft from the model's head
    removed: Mapping[str, str] = field(default_factory=dict)  # spelling -> what replaced it
    native_binary: bool = False                    # a CUDA binary: LimitMEMLOCK matters
    example: str = ""                              # the program, for messages

    def role_of(self, name: str) -> tuple[str, bool] | None:
        """(role, on) for a spelling; on is False for its off form."""
        for role, flag in self.flags.items():
            if name in flag.names:
                return role, True
            if name in flag.off:
                return role, False
        return None

    def start(self, argv: list[str]) -> int | None:
        """Index of the first argument after the server program, or None if none launches."""
        for i, word in enumerate(argv):
            for prog in self.programs:
                first = Path(word).name if not prog[0].startswith("-") else word
                if first == prog[0] and argv[i + 1:i + len(prog)] == list(prog[1:]):
                    return i + len(prog)
        return None


@dataclass(frozen=True)
class Value:
    text: str | None                    # None for a switch
    on: bool
    flag: Arg                           # the flag word (or the positional argument)
    arg: Arg | None = None              # the value word

    @property
    def where(self):
        return (self.arg or self.flag).where


@dataclass
class Parsed:
    """An argv read against a table: what each role was set to, the last setting winning."""

    table: ServeFlags
    command: ServeCommand
    launched: bool
    values: dict[str, list[Value]] = field(default_factory=dict)
    unknown: list[Arg] = field(default_factory=list)

    def get(self, role: str) -> Value | None:
        found = self.values.get(role)
        return found[-1] if found else None

    def on(self, role: str) -> bool:
        v = self.get(role)
        return bool(v and v.on)

    def text(self, role: str, default: str | None = None) -> str | None:
        v = self.get(role)
        if v is None or not v.on:
            return self.table.defaults.get(role, default)
        return v.text

    def number(self, role: str) -> int | None:
        text = self.text(role)
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    def items(self, role: str) -> list[str]:
        """A list-valued setting: vLLM's space-separated names, llama.cpp's comma list."""
        found = [v for v in self.values.get(role, []) if v.on and v.text is not None]
        if not found:
            return []
        sep = self.table.alias_separator
        last = found[-1].text
        if self.table.flags[role].takes == "many":
            return last.split("\0")
        return [p.strip() for p in last.split(sep)] if sep else [last]

    def where(self, role: str):
        v = self.get(role)
        return v.where if v else self.command.where


def parse(command: ServeCommand, table: ServeFlags) -> Parsed:
    argv = command.argv
    start = table.start([a.text for a in argv])
    parsed = Parsed(table, command, start is not None)
    i = start if start is not None else len(argv)
    while i < len(argv):
        word = argv[i]
        name, eq, inline = word.text.partition("=") if word.text.startswith("--") else \
            (word.text, "", "")
        found = table.role_of(name) if word.text.startswith("-") else None
        if found is None:
            if not word.text.startswith("-") and table.positional and \
                    table.positional not in parsed.values:
                parsed.values[table.positional] = [Value(word.text, True, word, word)]
            elif word.text.startswith("-"):
                parsed.unknown.append(word)
                if not eq and i + 1 < len(argv) and not _looks_like_flag(argv[i + 1].text):
                    i += 1  # an unknown flag's value: skip it with the flag
            i += 1
            continue
        role, on = found
        takes = table.flags[role].takes if on else "none"
        value, i = _value(argv, i, takes, inline if eq else None)
        parsed.values.setdefault(role, []).append(
            Value(value.text if isinstance(value, Arg) else value, on, word,
                  value if isinstance(value, Arg) else None))
    return parsed


def _looks_like_flag(text: str) -> bool:
    return text.startswith("-") and not text.lstrip("-").replace(".", "").isdigit()


def _value(argv: list[Arg], i: int, takes: str, inline: str | None):
    """(the value, the next index) for the flag at argv[i]."""
    if takes == "none":
        return None, i + 1
    if inline is not None:
        return Arg(inline, argv[i].where, argv[i].vars), i + 1
    if takes == "one":
        if i + 1 < len(argv):
            return argv[i + 1], i + 2
        return None, i + 1
    j = i + 1
    while j < len(argv) and not _looks_like_flag(argv[j].text):
        j += 1
    if j == i + 1:
        return None, j
    first = argv[i + 1]
    return Arg("\0".join(a.text for a in argv[i + 1:j]), first.where, first.vars), j
