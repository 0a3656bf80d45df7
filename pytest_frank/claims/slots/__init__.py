"""slots: the live slot shape (how many conversations, how much context each) is the intended one,
and a slot takes a prompt that nearly fills the context it claims (test_slots_context): whole,
counted as the server's tokenizer counts it, or refused with the cap the server really holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_frank.base.figures import COUNT, number
from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line, require_answer
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Alt, Phrase, Text, fail, inconclusive
from pytest_frank.runtime import sizing
from pytest_frank.runtime.chat import Reply, Request, send
from pytest_frank.runtime.probes import SlotShape
from pytest_frank.runtime.probes import slot_shape as shape
from pytest_frank.transport import http
from pytest_frank.runtime.target import Target

SHARE = 0.9  # of the slot's context the long prompt fills: near the edge, room for the reply
TEMPLATE_TOKENS = 64  # the chat template around the prompt's text, kept out of its share
REPLY_TOKENS = 4  # the answer is not judged: the prompt is
ROUNDS = 3  # counts of the text at most, to bring it to its share
# The slowest prompt processing waited for: a near-full context is one long prefill (118k tokens
# for a 131k slot; seconds on a GPU, minutes for a large model on a CPU), which a client waits
# through; the check is of what the slot holds, not of its speed (that is perf's).
PREFILL_FLOOR_TPS = 25
FILLER = ("The archivist read the ledger aloud, page after page, naming each ship, its cargo "
          "and the harbour it sailed for. ")


@dataclass(frozen=True)
class Options(ClaimOptions):
    count: int | None = option(None, minimum=1, about=(
        "Slots: conversations served at once (llama.cpp `/props` `total_slots`)."))
    ctx_per_slot: int | None = option(None, minimum=1, about=(
        "Tokens of context each slot gets (llama.cpp `/props` "
        "`default_generation_settings.n_ctx`, vLLM `max_model_len`)."))

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """A mapping of at least one key: the claim has no defaults to ask with `true`."""
        return {**super().schema(), "type": "object", "minProperties": 1}


CLAIM = Claim("slots",
              "the live slot shape matches the intended one", Options,
              order=160, asks="A mapping of `count`, `ctx_per_slot` or both asks it.",
              tests=("test_slots", "test_slots_context"))


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


def _judge_ctx(shape: SlotShape, want: int, count: int | None, driver: Driver) -> None:
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


# -- the context a slot really serves: a prompt at 0.9 of it, sent --------------------------------
@dataclass(kw_only=True)
class Filled(Observation):
    claimed: int | None = None  # tokens of context per slot, as claimed
    claimed_by: str = ""
    ctx_train: int | None = None  # the model's training context, where the engine says
    tokens: int | None = None  # the prompt's text in tokens
    counted_by: str = ""
    wait: float | None = None  # seconds the answer was waited for
    reply: Reply | None = None


def filled(target: Target) -> Filled:
    """A prompt whose text is 0.9 of the claimed slot context (expect.slots.ctx_per_slot, else
    the context the endpoint reports per slot), less the template's room, by the server's own
    count where it has one; a few tokens of answer."""
    opts, seen = Options.on(target.endpoint), target.need(shape)
    reported = None if isinstance(seen, Unseen) else seen
    out = Filled(ctx_train=reported.ctx_train if reported else None)
    if opts.ctx_per_slot:
        out.claimed, out.claimed_by = opts.ctx_per_slot, "expect.slots.ctx_per_slot"
    elif reported and reported.ctx_per_slot:
        out.claimed, out.claimed_by = reported.ctx_per_slot, reported.source
    else:
        out.inconclusive = ("no context per slot to fill: expect.slots has no ctx_per_slot and "
                            "the endpoint reports none")
        return out
    want = int(out.claimed * SHARE) - TEMPLATE_TOKENS
    words = max(1, want // 4)  # re-sized by the count below: a word is a few tokens
    for _ in range(ROUNDS):
        out.tokens, out.counted_by = sizing.count(target, _text(words))
        if want * 0.97 <= out.tokens <= want:
            break
        words = max(1, int(words * want / max(out.tokens, 1) * 0.99))
    else:
        out.tokens, out.counted_by = sizing.count(target, _text(words))
    out.wait = http.first_answer_wait(target.timeout, out.tokens / PREFILL_FLOOR_TPS)
    with http.first_answer_within(out.wait):
        out.reply = send(target, Request(_text(words), REPLY_TOKENS))
    return out


def _text(words: int) -> str:
    filler = FILLER.split()
    return " ".join(filler[i % len(filler)] for i in range(words)) + "\nName the last ship."


def judge_filled(obs: Filled, ctx: Context[Options]) -> None:
    """A prompt at 0.9 of the claimed slot context is taken whole and counted right, or the
    refusal names the context the server really holds."""
    reply, driver, claimed = obs.reply, ctx.driver, obs.claimed
    if reply is None or claimed is None or obs.tokens is None:
        fail("the long prompt was not sent")
    sent = (f"a prompt of {number(obs.tokens, COUNT)} tokens by {obs.counted_by} (0.9 of the "
            f"{number(claimed, COUNT)}-token slot context of {obs.claimed_by})")
    if reply.status is None and obs.wait is not None and (reply.problem or "").startswith(
            "no answer"):
        inconclusive(f"inconclusive: {sent} got no answer in the {number(obs.wait)} s waited "
                     f"for its processing: too slow to show what the slot holds (perf judges "
                     f"speed)")
    if not reply.ok:
        cap = driver.context_cap(reply.problem)
        if cap is None:  # refused in other words, or not answered: the server's own message
            require_answer(reply, driver, sent)
            fail(f"{sent} was not answered whole: {one_line(reply.problem_line, 200)}")
        said = one_line(reply.problem, 200)
        trained = obs.ctx_train
        if cap is not None and trained and driver.ctx_train_cap and cap == trained < claimed:
            fail(f"{sent} was refused: the slot holds {number(cap, COUNT)} tokens, the model's "
                 f"training context, and {driver.ctx_train_cap} ({reply.status}: {said})",
                 past_training_fix(driver, claimed, trained))
        fail(f"{sent} was refused: the slot holds {number(cap, COUNT)} tokens, not "
             f"{number(claimed, COUNT)} ({reply.status}: {said})",
             more_context_fix(driver, claimed, ctx.options.count))
    counted = reply.prompt_tokens
    if counted is None:
        inconclusive(f"inconclusive: {sent} was answered, but without usage.prompt_tokens: "
                     f"nothing says it was taken whole")
    ctx.note(f"{sent}: answered {reply.status}, usage.prompt_tokens {number(counted, COUNT)}")
    if counted < obs.tokens and obs.counted_by.startswith("the server's"):
        fail(f"{sent} was answered, but usage counts {number(counted, COUNT)} prompt tokens, "
             f"fewer than its text alone: the prompt was cut to fit a smaller context, and the "
             f"client was not told", truncated_fix(driver, claimed))


FILLED = Check("test_slots_context", "slots", filled, judge_filled)


# -- advice: the slot settings by engine, named by the driver's flags ---------------------------
def slots_fix(driver: Facts, count: int, per_slot: int | None) -> Text:
    """How to serve `count` conversations at once, each keeping `per_slot` of context."""
    return advise(driver, lambda d: Phrase("set ", d.flags["parallel"](count)),
                  {LlamaCppDriver: lambda d: _llamacpp_slots(d, count, per_slot)})


def _llamacpp_slots(d: Facts, count: int, per_slot: int | None) -> Text:
    parallel, ctx = d.flags["parallel"], d.flags["ctx"]
    if not per_slot:
        return Phrase(parallel(count))
    # --ctx-size is the total, divided among the slots unless --kv-unified: with a unified
    # cache (or the total already set) the slot count alone is the fix.
    return Phrase(parallel(count), Alt(
        " ", ctx(count * per_slot), f" (each of the {count} slots keeps {per_slot} "
        "tokens; or ", parallel(count), " ", d.flags["kv_unified"], ")"))


def more_context_fix(driver: Facts, per_slot: int, count: int | None) -> Text:
    """How to give each of `count` conversations `per_slot` tokens of context."""
    # vLLM: max_model_len bounds every request, prompt plus max_tokens; the KV cache is shared.
    return advise(driver, lambda d: slots_fix(d, count or 1, per_slot),
                  {VllmDriver: lambda d: Phrase("serve with ", d.flags["ctx"](per_slot),
                                                " (the model must hold it; the KV cache must fit it)")})


def unify_hint(driver: Facts) -> Text:
    """How every slot gets the whole context rather than a share of it."""
    return advise(driver, "give each sequence the whole context",
                  {LlamaCppDriver: lambda d: Phrase("add ", d.flags["kv_unified"], " (every slot then "
                                                    "sees the whole ", d.flags["ctx"], ")"),
                   VllmDriver: lambda d: f"raise {d.flags['ctx'].flag}"})


def ctx_train_fix(ctx_train: int, want: int) -> Text:
    return (f"serve a model trained on at least {want} tokens, or set "
            f"expect.slots.ctx_per_slot to {ctx_train} (what this model holds)")


def past_training_fix(driver: Facts, want: int, trained: int) -> Text:
    """How a slot gets more context than the model was trained on."""
    scale = -(-want // trained)  # the whole factor that covers the claim
    return advise(
        driver, f"serve a model trained on at least {want} tokens, or stretch this one with "
                f"RoPE (YaRN) scaling by {scale}",
        {LlamaCppDriver: lambda d: Phrase(
                    "stretch the model with YaRN: ", d.flags["rope_scaling"]("yarn"), " ",
                    d.flags["rope_scale"](scale), f" (newer llama.cpp builds raise the "
                    f"training context with it; older ones also need --override-kv "
                    f"<arch>.context_length=int:{trained * scale}); or serve a model trained on "
                    f"{want} tokens, or claim expect.slots.ctx_per_slot {trained}")})


def truncated_fix(driver: Facts, want: int) -> Text:
    return advise(
        driver, f"serve each slot the {want} tokens claimed, and let the server (and any proxy "
                "in front) refuse a prompt it cannot hold rather than cut it: a client cut "
                "short loses the start of its history without a word",
        {VllmDriver: f"serve with --max-model-len {want}, and check that no client or proxy sets "
                     "truncate_prompt_tokens (vLLM then keeps the prompt's last tokens only)"})
