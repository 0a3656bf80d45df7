"""alias: the name clients ask for is among the models the endpoint serves."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank.http import Exchange
from pytest_frank.verdict import fail


@dataclass
class Served:
    url: str
    ids: list[str] | None
    problem: str | None
    exchanges: list[Exchange] = field(default_factory=list)


def probe(target) -> Served:
    ex = target.get(target.driver.models_path)
    url = ex.url
    if ex.error:
        return Served(url, None, ex.error, [ex])
    if ex.status != 200:
        reason = target.driver.error_message(ex) or ex.snippet(200)
        return Served(url, None, f"answered {ex.status}: {reason}", [ex])
    try:
        ids = target.driver.served_ids(ex.json())
    except (ValueError, KeyError, TypeError) as exc:
        return Served(url, None, f"not a model list ({exc}): {ex.snippet(200)}", [ex])
    return Served(url, ids, None, [ex])


def judge(served: Served, alias: str, fix: str) -> None:
    if served.problem:
        fail(f"{served.url} {served.problem}")
    if alias not in served.ids:
        listed = ", ".join(repr(i) for i in served.ids) or "no models at all"
        fail(f"alias {alias!r} is not served by {served.url}; it serves {listed}", fix)
