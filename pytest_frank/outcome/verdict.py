"""How a check ends: its verdict, and the typed outcomes a test raises. A `Failure` carries one
diagnosis, the usual fix and the figures measured; a `Skip` why there is no verdict on the claim,
its subclass saying which (`Inconclusive`, `NotAsked`, `NotApplicable`, `Blocked`,
`Interrupted`). They are
pytest's own fail and skip, so a test fails or skips with the same line and no Python frames, and
a report's row is built from the exception pytest recorded (`pytest_frank.plugin.rows`), never from its
text.

Advice names server settings as `Setting`s inside a `Phrase`, so it is spelt when it is
rendered, as the launcher the endpoint was started with takes it (a `Spelling`: the engine's own
server flags, fleet.yaml `launch:` keys, or a launch command such as `frank launch`; the driver
says which launchers its engine has), and a fix never asks for what is already in effect
(`Phrase.unsettled`): an alternative (`Alt`) naming a setting already made is left out, and a
fix whose own request is already made is dropped."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn, Union

import pytest

from pytest_frank.base import redact


class Verdict(str, enum.Enum):
    """A test's verdict; the value is the word every report prints."""

    NOT_ASKED = "not asked"
    NOT_APPLICABLE = "not applicable"  # asked, but this machine cannot show it (no GPU reading)
    SKIPPED = "skipped"
    PASS = "pass"
    INTERRUPTED = "interrupted"  # never measured: the run was stopped first
    INCONCLUSIVE = "inconclusive"
    BLOCKED = "blocked"
    FAIL = "FAIL"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class Setting:
    """A server flag with its value, and the fleet.yaml `launch:` key that sets it (a key with
    its own value, "launch.jinja: true", takes none; None where `launch:` has no such key)."""

    flag: str
    key: str | None = None
    value: str | None = None
    switch: bool = False  # a flag that takes no value (--kv-unified): naming it asks for it
    # A value of several names (aliases): each launcher lists them its own way (llama-server
    # joins them with commas, `launch:` takes a YAML list, `frank launch` repeats the flag);
    # `value` holds them as the server's flag does, joined.
    items: tuple[str, ...] = ()

    def __call__(self, value: object) -> Setting:
        if isinstance(value, (list, tuple)):
            items = tuple(str(v) for v in value)
            return Setting(self.flag, self.key, ",".join(items), self.switch, items)
        return Setting(self.flag, self.key, str(value), self.switch)

    @property
    def asks(self) -> bool:
        """A request for a state (a value, a switch on), not a mention of the flag."""
        return self.value is not None or self.switch

    @property
    def launch_key(self) -> str | None:
        """The `launch:` key alone ("jinja" of "launch.jinja: true")."""
        return self.key.removeprefix("launch.").split(":")[0] if self.key else None

    def in_effect(self, settings: InEffect) -> bool:
        """Already set to what it asks: `settings` maps each flag in effect to its value
        (None for a switch that is on)."""
        if not self.asks or self.flag not in settings:
            return False
        return self.value is None or settings[self.flag] == self.value

    def render(self, spelling: Spelling | None = None) -> str:
        return (spelling or SERVER).setting(self)

    def __str__(self) -> str:
        return self.render()


class Spelling:
    """How a launcher takes a server setting: the engine's own server flags (`--alias a,b`), the
    base of every other. `name` says the launcher in a fix; `start`, where set, the words that
    ask for a setting there, in place of the driver's own ("start frank launch with ")."""

    fleet = False  # fleet.yaml keys: advice about the fleet file reads as an edit of it
    start: str | None = None

    def __init__(self, name: str):
        self.name = name

    def setting(self, s: Setting) -> str:
        return s.flag if s.value is None else f"{s.flag} {s.value}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class FleetKeys(Spelling):
    """fleet.yaml `launch:` keys, for a server the battery launches: `launch.alias: [a, b]`."""

    fleet = True

    def setting(self, s: Setting) -> str:
        if s.key is None:  # no launch key for it: the server's flag is all there is to say
            return super().setting(s)
        if s.value is None or ":" in s.key:
            return s.key
        value = f"[{', '.join(s.items)}]" if s.items else s.value
        return f"{s.key}: {value}"


class LaunchCommand(Spelling):
    """A command that starts the server from `launch:` keys: some keys its own flags (`flags`,
    launch key -> flag; a list repeats the flag per name), any other through `--set KEY=VALUE`
    (`other`); a setting with no launch key keeps the server's flag, which it cannot take."""

    def __init__(self, name: str, flags: Mapping[str, str], other: str = "--set {key}={value}"):
        super().__init__(name)
        self.flags, self.other = dict(flags), other
        self.start = f"start {name} with "

    def setting(self, s: Setting) -> str:
        key = s.launch_key
        if key is None:
            return super().setting(s)
        own = self.flags.get(key)
        if not s.asks:  # named, not asked for: the flag, or the key --set takes
            return own or self.other.split()[0] + f" {key}"
        if own is not None:
            return " ".join(f"{own} {v}" for v in s.items or (s.value or "",)) \
                if not s.switch else own
        value = "true" if s.value is None else (f"[{','.join(s.items)}]" if s.items else s.value)
        return self.other.format(key=key, value=value)


SERVER = Spelling("the server")  # the engine's own flags: what advice says where nothing else
FLEET = FleetKeys("fleet.yaml launch:")


@dataclass(frozen=True)
class Wording:
    """Words that differ by audience: "start llama-server with" / "set in fleet.yaml"; a launch
    command's own words where it has them."""

    server: str
    fleet: str

    def render(self, spelling: Spelling | None = None) -> str:
        spelling = spelling or SERVER
        if spelling.fleet:
            return self.fleet
        return spelling.start if spelling.start is not None else self.server


InEffect = Mapping[str, Union[str, None]]  # server flag -> its value (None: a switch, on)


class Alt:
    """One alternative in a fix ("...; or --parallel 4 --kv-unified"): left out when a setting
    it names is already in effect."""

    def __init__(self, *parts: Union[str, Setting, Wording, Phrase]):
        self.parts: tuple[Part, ...] = tuple(
            q for p in parts for q in (p.parts if isinstance(p, Phrase) else (p,)))

    def render(self, spelling: Spelling | None = None) -> str:
        return "".join(p if isinstance(p, str) else p.render(spelling) for p in self.parts)

    def settings(self) -> list[Setting]:
        return [p for p in self.parts if isinstance(p, Setting)]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Alt) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Alt{self.parts!r}"


Part = Union[str, Setting, Wording, Alt]


class Phrase:
    """Text with settings in it, rendered in a launcher's spelling (`Spelling`)."""

    def __init__(self, *parts: Part):
        self.parts: tuple[Part, ...] = parts

    def render(self, spelling: Spelling | None = None) -> str:
        return "".join(p if isinstance(p, str) else p.render(spelling) for p in self.parts)

    def unsettled(self, settings: InEffect) -> Phrase | None:
        """This fix without what is already in effect: alternatives naming a setting already
        made are left out; None when the fix's own request is already made."""
        if any(isinstance(p, Setting) and p.in_effect(settings) for p in self.parts):
            return None
        return Phrase(*(p for p in self.parts if not (
            isinstance(p, Alt) and any(s.in_effect(settings) for s in p.settings()))))

    def __str__(self) -> str:
        return self.render()

    def __add__(self, other: Text) -> Phrase:
        return Phrase(*self.parts, *(other.parts if isinstance(other, Phrase) else (other,)))

    def __radd__(self, other: str) -> Phrase:
        return Phrase(other, *self.parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Phrase) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Phrase{self.parts!r}"


Text = Union[str, Phrase]  # a failure's line or fix: plain, or with settings in it


def render(text: Text, spelling: Spelling | None = None) -> str:
    return text.render(spelling) if isinstance(text, Phrase) else text


def unsettled(fix: Text | None, settings: InEffect | None) -> Text | None:
    """`fix` as it may be given where `settings` are in effect (see Phrase.unsettled)."""
    if not isinstance(fix, Phrase) or not settings:
        return fix
    return fix.unsettled(settings)


Figures = Mapping[str, tuple[float, str]]  # name -> (value, unit): what a failure measured


class Failure(pytest.fail.Exception):  # type: ignore[name-defined]
    """The check fails: `line` is the diagnosis, `fix` the usual remedy (None: none known),
    `figures` what was measured, for a later run's baseline."""

    # Printed as pytest prints its own fail ("Failed: ..."): the terminal, JUnit XML and the
    # page read as they do for pytest.fail.
    __module__, __qualname__ = "builtins", "Failed"
    verdict = Verdict.FAIL

    def __init__(self, line: Text, fix: Text | None = None, figures: Figures | None = None):
        self.line, self.fix = line, fix
        self.figures: dict[str, tuple[float, str]] = dict(figures or {})
        super().__init__(self.message(), pytrace=False)

    def rendered(self, spelling: Spelling | None = None, first: str | None = None,
                 settings: InEffect | None = None) -> Failure:
        """This failure as the operator reads it: plain text, `first` above the diagnosis, in
        the `spelling` of the launcher the endpoint was started with (the server's flags where
        None), without a fix that asks only for what `settings` hold."""
        line, fix = self._texts(spelling, first, settings)
        return Failure(line, fix, self.figures)

    def message(self, spelling: Spelling | None = None, first: str | None = None,
                settings: InEffect | None = None) -> str:
        """The test's failure message: the diagnosis (as `rendered`), then "  fix: ..."."""
        line, fix = self._texts(spelling, first, settings)
        return redact.inert(line if fix is None else f"{line}\n  fix: {fix}")

    def _texts(self, spelling: Spelling | None, first: str | None,
               settings: InEffect | None) -> tuple[str, str | None]:
        line = render(self.line, spelling)
        fix = unsettled(self.fix, settings)
        return (f"{first}\n{line}" if first else line), (render(fix, spelling) if fix else None)


class Skip(pytest.skip.Exception):  # type: ignore[name-defined]
    """No verdict on the claim: `line` is the whole reason as the reports show it, and the
    class says which verdict it reads as."""

    __module__, __qualname__ = "builtins", "Skipped"  # as pytest.skip's (see Failure)
    verdict = Verdict.SKIPPED

    def __init__(self, line: str):
        self.line = line
        super().__init__(redact.inert(line))


class Inconclusive(Skip):
    """Nothing to judge here (no GPU reading, too few tokens to rate)."""

    verdict = Verdict.INCONCLUSIVE


class NotAsked(Skip):
    """A part of the claim that does not apply to this endpoint (Check.applies)."""

    verdict = Verdict.NOT_ASKED


class NotApplicable(Skip):
    """Asked, but nothing of the claim exists where the battery runs: a GPU memory check of a
    server on this machine, which has no GPU to read. Not a failure and not missing evidence."""

    verdict = Verdict.NOT_APPLICABLE


class Blocked(Skip):
    """Not measured because of another test's verdict: the endpoint is not healthy, refused
    the key, or its first answer was too slow."""

    verdict = Verdict.BLOCKED


class Interrupted(Skip):
    """Never measured: the run was stopped first."""

    verdict = Verdict.INTERRUPTED


def fail(what: Text, fix: Text | None = None, figures: Figures | None = None) -> NoReturn:
    raise Failure(what, fix, figures)


def inconclusive(line: str) -> NoReturn:
    raise Inconclusive(line)


def not_applicable(line: str) -> NoReturn:
    raise NotApplicable(line)


def skip(why: str) -> NoReturn:
    raise Skip(why)
