"""alias: the name clients ask for is among the models the endpoint serves."""

from __future__ import annotations

from pytest_frank.checks import Check, Context
from pytest_frank.claims import Options
from pytest_frank.probes import Served, served
from pytest_frank.verdict import fail


def judge(served: Served, ctx: Context[Options]) -> None:
    """The fleet's alias is among the served model names."""
    wanted = ctx.endpoint.alias
    if wanted is None:  # asked only of an endpoint with an alias
        fail("fleet.yaml sets no alias for this endpoint to look for")
    if wanted not in served.ids:
        listed = ", ".join(repr(i) for i in served.ids) or "no models at all"
        fail(f"alias {wanted!r} is not served by {served.url}; it serves {listed}",
             ctx.driver.alias_fix(wanted, served.ids))


ALIAS = Check("test_alias", "alias", served, judge)
