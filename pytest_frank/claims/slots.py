"""slots: the live slot shape (how many conversations, how much context each) is the intended one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_frank.checks import Check, Context
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.drivers.base import Driver
from pytest_frank.probes import SlotShape
from pytest_frank.probes import slot_shape as shape
from pytest_frank.verdict import Alt, Phrase, Text, fail


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
                 slots_fix(driver, want_count, ctx.options.ctx_per_slot or shape.ctx_per_slot))
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
             ctx_train_fix(got, want))  # got == shape.ctx_train
    if count and count > 1 and got * count == want:
        fail(Phrase(f"each slot gets {got} tokens of context, 1/{count} of the intended {want}: ",
                    driver.flags["parallel"](count), " divides the context among the slots"),
             Phrase(Alt(unify_hint(driver), ", or "), f"multiply the context size by {count}"))
    fail(f"each slot gets {got} tokens of context, {want} intended ({shape.source})",
         "set the context size so each slot gets the intended context")


SLOTS = Check("test_slots", "slots", shape, judge)


# -- advice: the slot settings by engine, named by the driver's flags ---------------------------
def slots_fix(driver: Driver, count: int, per_slot: int | None) -> Text:
    """How to serve `count` conversations at once, each keeping `per_slot` of context."""
    return advise(driver, lambda d: Phrase("set ", d.flags["parallel"](count)),
                  llamacpp=lambda d: _llamacpp_slots(d, count, per_slot))


def _llamacpp_slots(d: Driver, count: int, per_slot: int | None) -> Text:
    parallel, ctx = d.flags["parallel"], d.flags["ctx"]
    if not per_slot:
        return Phrase(parallel(count))
    # --ctx-size is the total, divided among the slots unless --kv-unified: with a unified
    # cache (or the total already set) the slot count alone is the fix.
    return Phrase(parallel(count), Alt(
        " ", ctx(count * per_slot), f" (each of the {count} slots keeps {per_slot} "
        "tokens; or ", parallel(count), " ", d.flags["kv_unified"], ")"))


def more_context_fix(driver: Driver, per_slot: int, count: int | None) -> Text:
    """How to give each of `count` conversations `per_slot` tokens of context."""
    # vLLM: max_model_len bounds every request, prompt plus max_tokens; the KV cache is shared.
    return advise(driver, lambda d: slots_fix(d, count or 1, per_slot),
                  vllm=lambda d: Phrase("serve with ", d.flags["ctx"](per_slot),
                                        " (the model must hold it; the KV cache must fit it)"))


def unify_hint(driver: Driver) -> Text:
    """How every slot gets the whole context rather than a share of it."""
    return advise(driver, "give each sequence the whole context",
                  llamacpp=lambda d: Phrase("add ", d.flags["kv_unified"], " (every slot then "
                                            "sees the whole ", d.flags["ctx"], ")"),
                  vllm=lambda d: f"raise {d.flags['ctx'].flag}")


def ctx_train_fix(ctx_train: int, want: int) -> Text:
    return (f"serve a model trained on at least {want} tokens, or set "
            f"expect.slots.ctx_per_slot to {ctx_train} (what this model holds)")
