"""slots: the live slot shape (how many conversations, how much context each) is the intended one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_frank.checks import Check, Context
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.probes import SlotShape
from pytest_frank.probes import slot_shape as shape
from pytest_frank.verdict import Alt, Phrase, fail


@dataclass(frozen=True)
class Options(ClaimOptions):
    count: int | None = None
    ctx_per_slot: int | None = None


if TYPE_CHECKING:  # the config gate reads these options too: the type checker keeps them in step
    from pytest_frank.serve import gate

    _GATE: type[gate.SlotsWant] = Options


def judge(shape: SlotShape, ctx: Context[Options]) -> None:
    """The live slot count and context per slot are the fleet's."""
    want_count, want_ctx, driver = ctx.options.count, ctx.options.ctx_per_slot, ctx.driver
    if want_count is not None:
        if shape.count is None:
            fail(f"the endpoint does not report its slot count ({shape.source}); "
                 f"remove `count` from expect.slots for it")
        if shape.count != want_count:
            fail(f"{shape.count} slot(s) are served, {want_count} intended ({shape.source})",
                 driver.slots_fix(want_count, ctx.options.ctx_per_slot or shape.ctx_per_slot))
    if want_ctx is not None:
        _judge_ctx(shape, want_ctx, want_count or shape.count, driver)


def _judge_ctx(shape: SlotShape, want: int, count: int | None, driver) -> None:
    got = shape.ctx_per_slot
    if got is None:
        fail(f"the endpoint does not report its context per slot ({shape.source})")
    if got == want:
        return
    capped = shape.ctx_train and driver.ctx_train_cap and got == shape.ctx_train < want
    if capped:  # no slot setting helps: the model's own limit
        fail(f"each slot gets {got} tokens of context, {want} intended: the model was trained "
             f"on {shape.ctx_train} and {driver.ctx_train_cap} ({shape.source})",
             driver.ctx_train_fix(shape.ctx_train, want))
    if count and count > 1 and got * count == want:
        fail(Phrase(f"each slot gets {got} tokens of context, 1/{count} of the intended {want}: ",
                    driver.parallel_flag(count), " divides the context among the slots"),
             Phrase(Alt(driver.unify_hint, ", or "), f"multiply the context size by {count}"))
    fail(f"each slot gets {got} tokens of context, {want} intended ({shape.source})",
         "set the context size so each slot gets the intended context")


SLOTS = Check("test_slots", "slots", shape, judge)
