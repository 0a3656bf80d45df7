"""alias: the name clients ask for is among the models the endpoint serves."""

from __future__ import annotations

from pytest_frank.claims import Claim, Options
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.drivers import AnthropicDriver, LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.verdict import Phrase, Text, fail
from pytest_frank.runtime.probes import Served, served

CLAIM = Claim("alias",
              "the intended alias is served by /v1/models",
              order=20, asked_by="alias", expect_key=False)


def judge(served: Served, ctx: Context[Options]) -> None:
    """The fleet's alias is among the served model names."""
    wanted = ctx.endpoint.alias
    if wanted is None:  # asked only of an endpoint with an alias
        fail("fleet.yaml sets no alias for this endpoint to look for")
    if wanted not in served.ids:
        listed = ", ".join(repr(i) for i in served.ids) or "no models at all"
        fail(f"alias {wanted!r} is not served by {served.url}; it serves {listed}",
             alias_fix(ctx.driver, wanted, served.ids))


ALIAS = Check("test_alias", "alias", served, judge)


def alias_fix(driver: Facts, alias: str, served: list[str]) -> Text:
    """Serve `alias` beside the names served now (clients may use those too)."""
    names = list(dict.fromkeys([*served, alias]))
    return advise(
        driver, f"serve it under that name (the server's model name setting {alias})",
        {LlamaCppDriver: lambda d: Phrase("add it to ", d.flags["alias"], ", keeping the names served "
                                          "now: ", d.flags["alias"](",".join(names))),
         VllmDriver: ("add it to --served-model-name, keeping the names served now: "
                      f"--served-model-name {' '.join(names)}"),
         SglangDriver: f"serve it under that name: --served-model-name {alias}",
         AnthropicDriver: f"map the model name {alias!r} in the proxy's model list"})
