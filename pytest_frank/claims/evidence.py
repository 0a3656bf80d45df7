"""The probe phase of a differential diagnosis (pytest_frank.claims.diagnosis): once a probe's
own pre-judgement finds a fault in a reply, it asks for what tells the causes apart: the same
request unstreamed (its twin) and once more, and the engine's own facts against what the reply
claims. Nothing here runs for a reply without a fault, so a healthy endpoint spends no
generation on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pytest_frank.claims import reply_contract as rc
from pytest_frank.claims.diagnosis import Again, Disagreement, Evidence, Twin
from pytest_frank.claims.replies import one_line
from pytest_frank.outcome.observation import Unseen
from pytest_frank.runtime.chat import Reply, Request, shared, think_through
from pytest_frank.runtime.probes import slot_shape
from pytest_frank.runtime.target import Target

Wrong = Callable[[Reply], "str | None"]  # what is wrong with a reply, judged as the check does


def gather(target: Target, req: Request, reply: Reply, wrong: Wrong, *,
           twin: Reply | None = None) -> Evidence:
    """The evidence about `reply`, the answer to `req` that `wrong` found a fault in. `twin`:
    the same request unstreamed where the check already has it (else asked, through the probe
    cache, so a check that asked it too shares it)."""
    seen = wrong(reply) or "a fault"
    found = Evidence(seen=seen, streamed=req.stream)
    if req.stream:
        twin = twin if twin is not None else shared(target, replace(req, stream=False))
        if twin.ok:
            found = replace(found, twin=Twin(wrong(twin), said(twin)))
    again = think_through(target, req)
    if again.ok:
        found = replace(found, again=Again(wrong(again), said(again)))
    return replace(found, **facts(target, reply), **contract_read(target, reply, req.stream))


# Breaches no template or parser makes: a published type broken, an id emptied, a stream's
# event rules broken (the parser decides what a reply says, its writer how)
WRITTEN = ("schema", "ids", "stream")


def contract_read(target: Target, reply: Reply, streamed: bool) -> dict:
    """What the contract claim read of the reply as it came (target.digests, kept while its
    body was whole): its first breach no template makes (Evidence's `broken`), and where its id
    is one another request's answer gave itself first, that answer (`crossed`)."""
    ex = reply.exchange
    if ex is None:
        return {}
    own = rc.reply_id(target.driver.api, ex.body, streamed)
    if own is None:
        return {}
    with target.lock():
        same = [d for d in target.digests if getattr(d, "reply_id", None) == own]
    if not same:
        return {}
    mine, first = same[-1], same[0]
    out = {}
    written = [b for b in mine.breaches if b.kind in WRITTEN]
    if written:
        out["broken"] = f"{written[0].where}: {written[0].said}"
    if first is not mine and not (first.twin_key is not None and first.twin_key == mine.twin_key):
        out["crossed"] = (f"its id {one_line(own, 40)!r} is the id of {first.probe}'s "
                          f"{'streamed' if first.streamed else 'plain'} reply to another request")
    return out


def facts(target: Target, reply: Reply) -> dict:
    """The engine's own facts (read once per session, with the slot shape) that the reply
    contradicts, and which were compared: Evidence's `disagree` and `facts`."""
    shape = target.need(slot_shape)
    if reply.exchange is None or isinstance(shape, Unseen) or shape.failure is not None:
        return {}
    found, compared = target.driver.reply_disagrees(reply.exchange.body, shape.payloads)
    return {"disagree": tuple(Disagreement(e, r) for e, r in found),
            "facts": "; ".join(compared)}


def said(reply: Reply) -> str:
    """A reply in a few words: its calls, else its text, and its finish."""
    if reply.calls:
        shown = ", ".join(f"{c.name} {one_line(str(c.arguments), 40)}" for c in reply.calls)
        return f"called {shown}, finish_reason {reply.finish!r}"
    if reply.content.strip():
        return f"answered {one_line(reply.content, 60)!r}, finish_reason {reply.finish!r}"
    return f"empty content, no call, finish_reason {reply.finish!r}"
