"""alias: the name clients ask for is among the models the endpoint serves."""

from __future__ import annotations

import re

from pytest_frank.claims import Claim, Options
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.drivers import AnthropicDriver, LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.verdict import Phrase, Text, fail
from pytest_frank.runtime.probes import Served, served

CLAIM = Claim("alias",
              "the intended alias is served by /v1/models",
              order=20, asked_by="alias", expect_key=False,
              tests=("test_alias",))


def judge(served: Served, ctx: Context[Options]) -> None:
    """The fleet's alias is among the served model names."""
    wanted = ctx.endpoint.alias
    if wanted is None:  # asked only of an endpoint with an alias
        fail("fleet.yaml sets no alias for this endpoint to look for")
    if wanted not in served.ids:
        listed = ", ".join(repr(i) for i in served.ids) or "no models at all"
        serve = alias_fix(ctx.driver, wanted, served.ids)
        near = close_id(wanted, served.ids)
        if near is None:
            fail(f"alias {wanted!r} is not served by {served.url}; it serves {listed}", serve)
        name, how = near
        fail(f"alias {wanted!r} is not served by {served.url}; it serves {listed}, of which "
             f"{name!r} {how}: a typo in fleet.yaml is the likelier cause",
             f"set `alias: {name}` under `{ctx.endpoint.name}:` in fleet.yaml; or, where "
             f"{wanted!r} is the name clients ask for, " + serve)


ALIAS = Check("test_alias", "alias", served, judge)


def close_id(wanted: str, ids: list[str]) -> tuple[str, str] | None:
    """The served id a fleet value is a slip of, and how: the same but for case or separators,
    or the one id within an edit or two of it (one for a short name); None where none is that
    close, or two are (a name of another model, "-small" for "-large" or "8b" for "4b", is
    not)."""
    def bare(name: str) -> str:
        return re.sub(r"[-_.\s]", "", name.lower())

    for name in ids:
        if bare(name) == bare(wanted):
            return name, ("differs from it only in case" if name.lower() == wanted.lower()
                          else "differs from it only in case or separators")

    def numbered(name: str) -> str:
        return re.sub(r"\d+", "#", name)

    # A name that differs in its numbers (qwen3-8b, qwen3-4b) is another model, not a slip.
    found = sorted((edits(wanted, name), name) for name in ids
                   if numbered(name) != numbered(wanted))
    if not found or (len(found) > 1 and found[1][0] == found[0][0]):
        return None  # none close, or two as close: which one was meant is not shown
    n, name = found[0]
    if n <= max(1, min(len(wanted), len(name)) // 8):
        return name, f"is {n} edit{'s' if n > 1 else ''} away from it"
    return None


def edits(a: str, b: str) -> int:
    """Letters inserted, deleted, replaced or swapped with a neighbour to make `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (x != y)))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def alias_fix(driver: Facts, alias: str, served: list[str]) -> Text:
    """Serve `alias` beside the names served now (clients may use those too), each listed as
    the launcher the endpoint was started with takes a list of names."""
    names = list(dict.fromkeys([*served, alias]))
    return advise(
        driver, f"serve it under that name (the server's model name setting {alias})",
        {LlamaCppDriver: lambda d: Phrase(d.start or "", d.flags["alias"](names),
                                          " (the names served now kept beside it)"),
         VllmDriver: ("add it to --served-model-name, keeping the names served now: "
                      f"--served-model-name {' '.join(names)}"),
         SglangDriver: f"serve it under that name: --served-model-name {alias}",
         AnthropicDriver: f"map the model name {alias!r} in the proxy's model list"})
