"""The one judge contract. A claim's package declares each check as a `Check`: the probe that
gathers its observation (network and file work, run ahead for the whole fleet) and the judge that
reads it: `judge(observation, ctx)`, which fails through `pytest_frank.outcome.verdict`. The
claim's `CLAIM` names them in its `tests`, and batteries/test_<claim>.py makes each a test
(`claims.battery`, through `battery_test`). A check is typed by its observation
and by its claim's options: the judge's `ctx.options` and the `applies`, `cases` and `asked`
functions get the claim's parsed `Options`, so the type checker sees a misspelt option."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, Sequence, TypeVar

import pytest

from pytest_frank.outcome.observation import Obs

if TYPE_CHECKING:
    from pytest_frank.drivers import Driver
    from pytest_frank.fleet import Endpoint

Note = Callable[[str], None]


class Figure(Protocol):
    """figure(name, value, unit="", low=None, high=None, runs=None): a measured number that a
    later run's baseline compares, with the bounds fleet.yaml set on it (the reports' charts
    draw them) and, for a median of several runs, each run's own (its run-to-run spread, which
    the baseline reads as noise)."""

    def __call__(self, name: str, value: float, unit: str = "", low: float | None = None,
                 high: float | None = None, runs: Sequence[float] | None = None) -> None: ...


Opts = TypeVar("Opts")  # a claim's options: pytest_frank.claims.<claim>.Options


class Verifies(Protocol):
    """The `endpoint` fixture a battery test receives (plugin.under_test.EndpointUnderTest),
    named by what the test calls: the plugin imports the claims, not the other way round."""

    def verify(self, check: Check[Any, Any], case: str | None = None) -> None: ...


@dataclass
class Context(Generic[Opts]):
    """What a judge may consult besides the observation: no network, no files. A judge says
    its claim's options: `ctx: Context[Options]`."""

    endpoint: Endpoint
    driver: Driver
    options: Opts  # the claim's options, parsed from fleet.yaml's `expect.<claim>`
    case: str | None = None  # the level, form, ... of a cased check
    note: Note = field(default=lambda text: None)
    attach: Callable[[str, str, str], None] = field(default=lambda name, mime, data: None)
    figure: Figure = field(
        default=lambda name, value, unit="", low=None, high=None, runs=None: None)


@dataclass(frozen=True)
class Check(Generic[Obs, Opts]):
    """One verdict on one claim. `test` is the test's public name; `cases` splits it into one
    test per case; `applies` gives the reason a part of a claim is not asked (then it is skipped
    and its probe never runs)."""

    test: str
    claim: str
    probe: Callable[..., Obs]  # probe(target) or, for a cased check, probe(target, case)
    judge: Callable[[Obs, Context[Opts]], None]
    offline: bool = False
    cases: Callable[[Opts, Driver], list[str]] | None = None
    applies: Callable[[Opts, Driver], str | None] | None = None
    # Whether the claim's options ask this test at all: where not, it is not collected (no
    # skip row), as a claim fleet.yaml does not ask is no test of the endpoint.
    asked: Callable[[Opts], bool] | None = None
    # Or asked by the endpoint's own keys besides the claim's options (a replica's same_as).
    asked_of: Callable[[Endpoint], bool] | None = None
    # For a `launch:` endpoint, advice in server flags reads as fleet.yaml keys; a check whose
    # advice is about another file (a serve script) keeps the flags.
    fleet_terms: bool = True
    # The docs' test table (docs/claims/index.md, written by docs/gen.py): what a cased test's
    # id names after the endpoint's (`LEVEL`: `test_reasoning_effort[NAME-LEVEL]`), and when the
    # test runs beyond its claim being asked (with `rounds`).
    per: str = ""
    when: str = ""

    def options(self, endpoint: Endpoint) -> Opts:
        """The endpoint's options of this check's claim."""
        return endpoint.options(self.claim)

    def is_asked(self, endpoint: Endpoint) -> bool:
        """Whether this test is asked of the endpoint (else it is not collected)."""
        if self.asked_of is not None and self.asked_of(endpoint):
            return True
        return self.asked is None or self.asked(self.options(endpoint))

    def not_applying(self, endpoint: Endpoint, driver: Driver) -> str | None:
        return self.applies(self.options(endpoint), driver) if self.applies else None


def battery_test(check: Check[Any, Any]) -> Callable[..., None]:
    """A pytest test function for `check`, marked with its claim (and `offline`)."""
    def with_case(endpoint: Verifies, case: str) -> None:
        endpoint.verify(check, case)

    def plain(endpoint: Verifies) -> None:
        endpoint.verify(check)

    test: Callable[..., None] = with_case if check.cases else plain
    test.__name__ = test.__qualname__ = check.test
    test.__doc__ = check.judge.__doc__
    test.frank_check = check  # type: ignore[attr-defined]
    test = getattr(pytest.mark, check.claim)(test)
    return pytest.mark.offline(test) if check.offline else test


def check_of(item: pytest.Item) -> Check[Any, Any] | None:
    """The battery's check of a test; for a test of your own that calls `endpoint.verify(CHECK)`,
    the `Check` of the test's name in its module (its probe then runs in the probe phase too)."""
    found = getattr(getattr(item, "obj", None), "frank_check", None)
    if found is not None:
        return found
    module, name = getattr(item, "module", None), getattr(item, "originalname", None)
    declared = vars(module).values() if module is not None and name else ()
    return next((v for v in declared if isinstance(v, Check) and v.test == name), None)
