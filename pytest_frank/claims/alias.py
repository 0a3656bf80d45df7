"""alias: the name clients ask for is among the models the endpoint serves."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_frank.checks import Check, Context
from pytest_frank.observation import Observation
from pytest_frank.verdict import fail


@dataclass(kw_only=True)
class Served(Observation):
    url: str
    ids: list[str]


def served(target) -> Served:
    ex = target.get(target.driver.models_path)
    if not ex.ok:
        return Served(url=ex.url, ids=[], failure=f"{ex.url} {target.driver.reason(ex)}",
                      fix=target.driver.known_fix(target.driver.error_message(ex), ex.status))
    if ex.json() is None:
        return Served(url=ex.url, ids=[],
                      failure=f"{ex.url} not a model list (not JSON): {ex.snippet(200)}")
    wrong = target.driver.shape_problem(target.driver.models_path, ex.json())
    if wrong:
        return Served(url=ex.url, ids=[], failure=f"{ex.url} not a model list: {wrong}")
    try:
        ids = target.driver.served_ids(ex.json())
    except (ValueError, KeyError, TypeError) as exc:
        return Served(url=ex.url, ids=[],
                      failure=f"{ex.url} not a model list ({exc}): {ex.snippet(200)}")
    return Served(url=ex.url, ids=ids)


def judge(served: Served, ctx: Context) -> None:
    """The fleet's alias is among the served model names."""
    wanted = ctx.endpoint.alias
    if wanted not in served.ids:
        listed = ", ".join(repr(i) for i in served.ids) or "no models at all"
        fail(f"alias {wanted!r} is not served by {served.url}; it serves {listed}",
             ctx.driver.alias_fix(wanted, served.ids))


ALIAS = Check("test_alias", "alias", served, judge)
