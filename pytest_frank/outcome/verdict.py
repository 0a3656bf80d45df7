"""How a check ends: its verdict, and the typed outcomes a test raises. A `Failure` carries one
diagnosis, the usual fix and the figures measured; a `Skip` why there is no verdict on the claim,
its subclass saying which (`Inconclusive`, `NotAsked`, `NotApplicable`, `Blocked`,
`Interrupted`). They are
pytest's own fail and skip, so a test fails or skips with the same line and no Python frames, and
a report's row is built from the exception pytest recorded (`pytest_frank.plugin.rows`), never from its
text.

Advice names server settings as `Setting`s inside a `Phrase`, so whether it reads in the
server's flags or in fleet.yaml `launch:` keys is chosen when it is rendered, and a fix never
asks for what is already in effect (`Phrase.unsettled`): an alternative (`Alt`) naming a setting
already made is left out, and a fix whose own request is already made is dropped."""

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

    def __call__(self, value: object) -> Setting:
        return Setting(self.flag, self.key, str(value), self.switch)

    @property
    def asks(self) -> bool:
        """A request for a state (a value, a switch on), not a mention of the flag."""
        return self.value is not None or self.switch

    def in_effect(self, settings: InEffect) -> bool:
        """Already set to what it asks: `settings` maps each flag in effect to its value
        (None for a switch that is on)."""
        if not self.asks or self.flag not in settings:
            return False
        return self.value is None or settings[self.flag] == self.value

    def render(self, fleet: bool) -> str:
        if fleet and self.key is not None:
            own = self.value is not None and ":" not in self.key
            return f"{self.key}: {self.value}" if own else self.key
        return self.flag if self.value is None else f"{self.flag} {self.value}"

    def __str__(self) -> str:
        return self.render(False)


@dataclass(frozen=True)
class Wording:
    """Words that differ by audience: "start llama-server with" / "set in fleet.yaml"."""

    server: str
    fleet: str

    def render(self, fleet: bool) -> str:
        return self.fleet if fleet else self.server


InEffect = Mapping[str, Union[str, None]]  # server flag -> its value (None: a switch, on)


class Alt:
    """One alternative in a fix ("...; or --parallel 4 --kv-unified"): left out when a setting
    it names is already in effect."""

    def __init__(self, *parts: Union[str, Setting, Wording, Phrase]):
        self.parts: tuple[Part, ...] = tuple(
            q for p in parts for q in (p.parts if isinstance(p, Phrase) else (p,)))

    def render(self, fleet: bool) -> str:
        return "".join(p if isinstance(p, str) else p.render(fleet) for p in self.parts)

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
    """Text with settings in it, rendered in server flags or in fleet.yaml keys."""

    def __init__(self, *parts: Part):
        self.parts: tuple[Part, ...] = parts

    def render(self, fleet: bool = False) -> str:
        return "".join(p if isinstance(p, str) else p.render(fleet) for p in self.parts)

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


def render(text: Text, fleet: bool = False) -> str:
    return text.render(fleet) if isinstance(text, Phrase) else text


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

    def rendered(self, fleet: bool = False, first: str | None = None,
                 settings: InEffect | None = None) -> Failure:
        """This failure as the operator reads it: plain text, `first` above the diagnosis, in
        fleet.yaml keys where `fleet`, without a fix that asks only for what `settings` hold."""
        line, fix = self._texts(fleet, first, settings)
        return Failure(line, fix, self.figures)

    def message(self, fleet: bool = False, first: str | None = None,
                settings: InEffect | None = None) -> str:
        """The test's failure message: the diagnosis (as `rendered`), then "  fix: ..."."""
        line, fix = self._texts(fleet, first, settings)
        return redact.inert(line if fix is None else f"{line}\n  fix: {fix}")

    def _texts(self, fleet: bool, first: str | None,
               settings: InEffect | None) -> tuple[str, str | None]:
        line = render(self.line, fleet)
        fix = unsettled(self.fix, settings)
        return (f"{first}\n{line}" if first else line), (render(fix, fleet) if fix else None)


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
