"""A claim's fix by engine: the claim writes its advice, the driver lends the facts.

A fix is a sentence for every engine (the generic one) and, where an engine needs its own words,
that engine's: plain text, or a function of its driver that names the engine's flags
(`driver.flags`) and how it is started (`driver.start`). A route's wire (fleet.yaml `api:`) has
the last word where the route changes what the fix asks for."""

from __future__ import annotations

from typing import Callable, Mapping, Union

from pytest_frank.drivers.protocols import Facts
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.verdict import Text

Advice = Union[Text, Callable[[Facts], Text]]


def advise(driver: Facts | None, generic: Advice, *, api: Mapping[str, Advice] | None = None,
           **engines: Advice) -> Text:
    """The fix for `driver`: its route's, else its engine's (by driver name), else the generic
    one (also where no driver is known: the generic shape's)."""
    d = driver or OpenAIDriver()
    said = (api or {}).get(d.api) or engines.get(d.name, generic)
    return said(d) if callable(said) else said
