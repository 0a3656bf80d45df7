"""A claim's fix by engine: the claim writes its advice, the driver lends the facts.

A fix is a sentence for every engine (the generic one) and, where an engine needs its own words,
that engine's, keyed by its driver class (`{LlamaCppDriver: ...}`, so the type checker flags an
engine misspelt, removed or named by a string): plain text, or a function of its driver's facts
that names the engine's flags (`driver.flags`) and how it is started (`driver.start`). A route's
wire (fleet.yaml `api:`) has the last word where the route changes what the fix asks for."""

from __future__ import annotations

from typing import Callable, Mapping, Union

from pytest_frank.drivers import DRIVERS, Driver
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.verdict import Text

Advice = Union[Text, Callable[[Facts], Text]]
ByEngine = Mapping[type[Driver], Advice]


def advise(driver: Facts | None, generic: Advice, engines: ByEngine | None = None, *,
           api: Mapping[str, Advice] | None = None) -> Text:
    """The fix for `driver`: its route's, else its engine's (the entry of its engine's driver
    class, pytest_frank.drivers.DRIVERS; an engine's driver on another route is still that
    engine), else the generic one (also where no driver is known: the generic shape's)."""
    d = driver or OpenAIDriver()
    engine = DRIVERS.get(d.name)
    said = (api or {}).get(d.api)
    if said is None and engine is not None:
        said = (engines or {}).get(engine)
    if said is None:
        said = generic
    return said(d) if callable(said) else said
