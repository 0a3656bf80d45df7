"""Which engine an endpoint really is, from what it says of itself (/v1/models owned_by, its
/metrics prefix), so a failure on a mislabelled endpoint says that first: advice for the
engine fleet.yaml names cannot apply to another one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_frank.base import redact
from pytest_frank.outcome.observation import Observation, Unseen

if TYPE_CHECKING:
    from pytest_frank.runtime.target import Target


@dataclass(kw_only=True)
class Seen(Observation):
    engine: str | None = None  # a driver name, where the endpoint gives itself away
    sign: str = ""  # what gave it away, for the message


def engine(target: Target) -> Seen:
    from pytest_frank.drivers import DRIVERS

    known = [d for d in DRIVERS.values() if d.owned_by]
    models = target.get(target.driver.models_path)
    body = models.json() if models.ok else None
    cards = body.get("data") if isinstance(body, dict) else None
    owners = {c.get("owned_by") for c in cards if isinstance(c, dict)} if isinstance(cards, list) \
        else set()
    for driver in known:
        if driver.owned_by in owners:
            return Seen(engine=driver.name, sign=f"/v1/models owned_by {driver.owned_by!r}")
    scraped = target.get(target.driver.metrics.path)
    for driver in known:
        if scraped.ok and f"\n{driver.metrics_prefix}" in f"\n{scraped.body}":
            return Seen(engine=driver.name, sign=f"/metrics series {driver.metrics_prefix}*")
    return Seen()


def recognise(target: Target) -> Seen:
    """The engine by every sign it gives: owned_by and /metrics first, then the route where an
    engine says its build (a proxy may rewrite the model list but pass /props through)."""
    from pytest_frank.drivers import DRIVERS

    seen = engine(target)
    if seen.engine:
        return seen
    for driver in DRIVERS.values():
        if driver.owned_by and driver.build_route:
            route, key = driver.build_route
            said = target.get(route)
            body = said.json() if said.ok else None
            if isinstance(body, dict) and isinstance(body.get(key), (str, int)):
                return Seen(engine=driver.name, sign=f"{route} carries {key}")
    return seen


@dataclass(kw_only=True)
class Identity(Observation):
    """What the reports' header says of an endpoint: its build and the models it serves."""

    build: str | None = None
    models: list[str] = field(default_factory=list)


def identity(target: Target) -> Identity:
    from pytest_frank.runtime.probes import served

    seen = target.need(served)
    found = Identity(models=[] if isinstance(seen, Unseen) else seen.ids[:8])  # of hundreds
    route = target.driver.build_route
    if route:
        said = target.get(route[0])
        body = said.json() if said.ok else None
        value = body.get(route[1]) if isinstance(body, dict) else None
        found.build = redact.cut(str(value), 120, "") if isinstance(value, (str, int, float)) else None
        if found.build is not None and found.build == target.driver.unversioned_build:
            # Said alone it reads as a broken build; the package behind a launched one is known.
            launched = target.launched.build
            found.build = (f"{launched} ({found.build})" if launched
                           else f"{found.build} (built without its version)")
    return found


def contradiction(seen: Seen | Unseen, target: Target) -> str | None:
    """"this answers like X; fleet.yaml says Y", where fleet.yaml names another engine."""
    from pytest_frank.drivers import DRIVERS

    said = target.driver
    # An engine probe that broke on what the endpoint sent comes back as a bare Observation
    # (Target._run): it recognised nothing, and the failure being diagnosed stands as it is.
    if not isinstance(seen, Seen) or not seen.engine or not said.owned_by or seen.engine == said.name:
        return None
    like = DRIVERS[seen.engine].label
    return (f"this answers like a {like} ({seen.sign}); fleet.yaml says engine: {said.name}, so "
            f"the diagnosis below assumes the wrong engine: set engine: {seen.engine} first")
