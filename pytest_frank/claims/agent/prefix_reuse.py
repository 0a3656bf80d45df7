"""A conversation's next turn is served from the prefix cache for what it shares with the turn
before: the agent loop's turn 2 sends turn 1's prompt again with the call and its result
appended, so a server that keeps its cache computes only the new part. Judged on the turns the
agent claim already plays (no request of its own), by the server's own counts (llama.cpp
`timings.cache_n`, `usage.prompt_tokens_details.cached_tokens` where an engine sends it).

Repeating one prompt is reused by servers that re-process every growing conversation: a hybrid
(recurrent) or sliding-window model in llama.cpp can only go back to a saved checkpoint, and
without one it "forces full prompt re-processing"; vLLM caches a hybrid model's prefix in whole
attention blocks of hundreds of tokens or more, and SGLang's radix cache can be turned off. Each
turn of an agent then costs the whole history's prefill."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_frank.base.figures import COUNT, number
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Context
from pytest_frank.claims.perf import cache_count_hint
from pytest_frank.drivers import LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts, Parts
from pytest_frank.outcome.verdict import Phrase, Text, fail
from pytest_frank.transport.wire import Reply

# Of the turn before's prompt: turn 2 shares all of it but the few tokens that open the reply
# (llama.cpp reused 1069 of 1068 on the self-test model, 1064 on its hybrid), and a server that
# re-processes reuses none of it (or the one token that starts every prompt).
REUSED_SHARE = 0.5


@dataclass(frozen=True)
class Reuse:
    """One turn against the turn before it, by the server's counts."""
    turn: int  # the later turn's number in its conversation (2 for the agent loop's answer)
    before: int  # the turn before's prompt tokens: the prefix the two share
    cached: int  # the later turn's prompt tokens served from the cache
    prompt: int  # the later turn's prompt tokens
    source: str

    @property
    def share(self) -> float:
        return min(self.cached / self.before, 1.0) if self.before else 0.0

    def __str__(self) -> str:
        return (f"turn {self.turn} took {number(self.cached, COUNT)} of its "
                f"{number(self.prompt, COUNT)} prompt tokens from the cache, of the "
                f"{number(self.before, COUNT)} turn {self.turn - 1} had sent")


def reuses(replies: list, driver: Parts) -> list[Reuse | None]:
    """Each answered turn after an answered one, by the server's counts (None where it sent
    none)."""
    found: list[Reuse | None] = []
    for n, (before, after) in enumerate(zip(replies, replies[1:]), 2):
        if not (before.ok and after.ok):
            continue
        earlier, later = driver.metrics.cached_prompt(before), driver.metrics.cached_prompt(after)
        sent = earlier[1] if earlier else before.prompt_tokens
        if later is None or not sent:
            found.append(None)
            continue
        found.append(Reuse(n, sent, later[0], later[1], later[2]))
    return found


def require_prefix_reused(conversations: list[list[Reply]], driver: Driver, ctx: Context[Any],
                          doing: str) -> None:
    """A later turn of some conversation took the prefix it shares with the turn before from
    the cache. The best turn is judged: one a neighbour's request pushed out of a slot is the
    load, every turn re-processed is the server."""
    found = [r for replies in conversations for r in reuses(replies, driver)]
    if not found:
        return
    counted = [r for r in found if r is not None]
    if len(counted) < len(found):
        ctx.note(f"{doing}: the next turn's reuse of the prefix cache is not judged: "
                 f"{cache_count_hint(driver)}")
        return
    best = max(counted, key=lambda r: r.share)
    seen = f"{best} [source: {best.source}]"
    if best.share >= REUSED_SHARE:
        ctx.note(f"{doing}: the next turn came from the prefix cache: {seen}")
        return
    also = f" (the best of {len(counted)})" if len(counted) > 1 else ""
    fail(f"{doing}: {seen}{also}: the server re-processed the conversation it had just "
         f"served, so each turn of an agent costs the whole history's prefill", reuse_fix(driver))


def reuse_fix(driver: Facts) -> Text:
    return advise(
        driver, "keep the server's prefix cache on, and on a hybrid (recurrent) or "
                "sliding-window model the engine's setting that keeps the states a growing "
                "conversation continues from; check that no proxy rewrites the start of the "
                "history between turns",
        {LlamaCppDriver: lambda d: Phrase(
                    "llama.cpp continues a hybrid (recurrent) or sliding-window model's conversation "
                    "only from a saved checkpoint, else it forces full prompt re-processing: keep ",
                    d.flags["ctx_checkpoints"], " above 0 (32 by default), or ", d.flags["swa_full"],
                    " for a sliding-window model (its whole KV, more memory); where slots serve other "
                    "requests between turns, ", d.flags["cache_ram"], " above 0 keeps their prompts; "
                    "and no client or proxy may send \"cache_prompt\": false (nor --no-cache-prompt)"),
         VllmDriver: "pass --enable-prefix-caching (opt-in for hybrid models); on a hybrid (Mamba, "
                     "Gated DeltaNet) model vLLM caches whole attention blocks, sized to the state "
                     "(hundreds of tokens or more, in its start log), so a shared prefix shorter than "
                     "one block is never a hit",
         SglangDriver: "remove --disable-radix-cache (the radix cache is SGLang's prefix cache)"})
