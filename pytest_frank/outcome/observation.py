"""What a probe saw of one endpoint: the one shape every claim's observation extends.

Below an Observation, each reading it is made of (a chat `Reply`, a `/metrics` `Scrape`, the
`Health` poll, a GPU memory reading) says why it failed in one field, `problem` (None: it did
not), and, where more than "read or not" matters, in one structured `state` (health's
ready | loading | down; a GPU reading's read | unavailable | failed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from pytest_frank.outcome.verdict import Text
from pytest_frank.transport.http import Exchange


@dataclass(kw_only=True)
class Observation:
    """A probe's result. `failure` is set when the probe could not see what its claim is about
    (the endpoint refused, answered an error, sent something unreadable); the check then fails
    with it, and `fix` where one is known, before any judging. `inconclusive` says why there is
    nothing to judge here (too few draft tokens): the check is inconclusive; `not_applicable` why
the claim cannot exist where the battery runs (a GPU memory reading of a server on this machine,
which has no GPU): the check is not applicable, which no report counts against the fleet."""

    exchanges: list[Exchange] = field(default_factory=list)
    failure: str | None = None
    fix: Text | None = None
    inconclusive: str | None = None
    not_applicable: str | None = None  # why the claim cannot be shown where the battery runs
    # the route the judgement reads, where the probe asks several (its reproduce line's)
    route: str | None = None

    @property
    def seen(self) -> bool:
        return self.failure is None


Obs = TypeVar("Obs", bound=Observation)  # one probe's own observation type


@dataclass(kw_only=True)
class Unseen(Observation):
    """What `Target.need` gives instead of a probe's own observation when the probe raised on
    what the endpoint sent, or a stop cut it: nothing was seen (`seen` is false), only `failure`
    is set, none of the probe's fields. Typed apart so a caller must handle it before reading
    them. (Named apart from verdict.Failure, the check's failing verdict, too.)"""

    failure: str


def __getattr__(name: str) -> type[Unseen]:
    """`Failed`, the old name of `Unseen`, still imports, with a warning."""
    if name == "Failed":
        import warnings

        warnings.warn("pytest_frank.outcome.observation.Failed is now "
                      "pytest_frank.outcome.observation.Unseen", DeprecationWarning, stacklevel=2)
        return Unseen
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
