"""slots: the live slot shape (how many conversations, how much context each) is the intended one."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank.http import Exchange
from pytest_frank.verdict import fail


@dataclass
class SlotShape:
    count: int | None
    ctx_per_slot: int | None
    source: str
    problem: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    payloads: dict = field(default_factory=dict)  # route -> JSON, for checks that read more


def probe(target) -> SlotShape:
    payloads, exchanges = {}, []
    for route in target.driver.slot_routes:
        ex = target.get(route)
        exchanges.append(ex)
        if ex.ok:
            payloads[route] = ex.json()
    if not payloads:
        last = exchanges[-1]
        said = target.driver.error_message(last) or last.snippet(120)
        reason = last.error or f"answered {last.status}: {said}"
        return SlotShape(None, None, "", f"{last.url} {reason}", exchanges)
    count, ctx, source = target.driver.slot_shape(payloads)
    return SlotShape(count, ctx, source, None, exchanges, payloads)


def judge(shape: SlotShape, expected: dict, driver) -> None:
    if shape.problem:
        fail(f"the slot shape could not be read: {shape.problem}")
    want_count, want_ctx = expected.get("count"), expected.get("ctx_per_slot")
    if want_count is not None:
        if shape.count is None:
            fail(f"the endpoint does not report its slot count ({shape.source}); "
                 f"remove `count` from expect.slots for it")
        if shape.count != want_count:
            fail(f"{shape.count} slot(s) are served, {want_count} intended ({shape.source})",
                 f"set {driver.parallel_flag} {want_count}")
    if want_ctx is not None:
        _judge_ctx(shape, want_ctx, want_count or shape.count, driver)


def _judge_ctx(shape: SlotShape, want: int, count: int | None, driver) -> None:
    got = shape.ctx_per_slot
    if got is None:
        fail(f"the endpoint does not report its context per slot ({shape.source})")
    if got == want:
        return
    if count and count > 1 and got * count == want:
        fail(f"each slot gets {got} tokens of context, 1/{count} of the intended {want}: "
             f"{driver.parallel_flag} {count} divides the context among the slots",
             f"{driver.unify_hint}, or multiply the context size by {count}")
    fail(f"each slot gets {got} tokens of context, {want} intended ({shape.source})",
         "set the context size so each slot gets the intended context")
