"""fingerprint: the endpoint still computes the same model. Not the engine's fingerprint (which
engine answers, pytest_frank.fingerprint), but the answers' own: a few fixed prompts asked
greedy, their first tokens and those tokens' logprobs recorded into the run record. A later run
with `--frank-baseline` compares them (pytest_frank.baseline): a quantized KV cache, a rope
setting, another GGUF under the same alias or a template edit keeps every form and changes
these. The comparison itself (agreement, drift, the first divergence) lives here too, so the
baseline and the same-run comparisons read one definition."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pytest_frank import sizing
from pytest_frank.chat import Reply, Request
from pytest_frank.checks import Check, Context
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.replies import one_line
from pytest_frank.observation import Observation
from pytest_frank.verdict import fail

ATTACHMENT = "fingerprint"  # the attachment's name in the run record; the baseline reads it
SHORT = "Say hello."
SYSTEM = "You are a terse assistant. Answer in one short sentence."
TURNS = [{"role": "system", "content": SYSTEM},
         {"role": "user", "content": "Name a colour."},
         {"role": "assistant", "content": "Blue."},
         {"role": "user", "content": "Name another one."}]
CODE = "heron"  # what the long prompt asks for, from its start
FILLER = " hello"
ROOM = 64  # tokens of the long prompt's share left for the answer


@dataclass(frozen=True)
class Options(ClaimOptions):
    tokens: int = 32  # the first N generated tokens recorded
    context_share: float = 0.5  # the long prompt fills this share of the served context


AGREEMENT = 1.0  # the least share of tokens before a divergence: greedy repeats itself
DRIFT = 0.05  # the most mean absolute logprob difference on the common prefix


@dataclass(kw_only=True)
class Asked(Observation):
    """The fixed prompts' greedy replies, by prompt name; with `same_as`, the replica's too."""
    replies: dict[str, Reply] = field(default_factory=dict)
    context: int | None = None  # the served context the long prompt was sized from
    long_words: int = 0
    replica: dict[str, Reply] = field(default_factory=dict)
    builds: tuple[str | None, str | None] = (None, None)  # this one's and the replica's


def long_prompt(words: int) -> str:
    return (f"The code word is {CODE}. Remember it." + FILLER * words
            + " What was the code word?")


def prompts(target, opts: Options) -> tuple[dict[str, Request], int | None, int]:
    """The fixed greedy requests: thinking off, logprobs asked where the API shape has them."""
    driver = target.driver
    extra = dict(driver.thinking_off())
    if "logprobs" in driver.shape_params:
        extra["logprobs"] = True
    reqs = {"short": Request(SHORT, opts.tokens, extra=extra),
            "multi-turn": Request("", opts.tokens, extra=extra, messages=TURNS)}
    context = target.served_context()
    words = 0
    if context:
        # Every filler word is a token at least, so this many words overfill the share; sizing
        # shrinks them by the server's own count (its /tokenize, else a one-token answer's usage).
        fitted = sizing.fit(target, long_prompt, int(context * opts.context_share),
                            reserve=opts.tokens + ROOM, least=ROOM, share=opts.context_share,
                            by_usage=True)
        words = 0 if fitted.too_small else fitted.words
    if words > 0:
        reqs["long"] = Request(long_prompt(words), opts.tokens, extra=extra)
    return reqs, context, words


def answers(target) -> Asked:
    opts = target.endpoint.options("fingerprint")
    reqs, context, words = prompts(target, opts)
    return Asked(replies={name: target.chat(req) for name, req in reqs.items()},
                 context=context, long_words=words)


def asked(target) -> Asked:
    """This endpoint's answers and, where it is `same_as` another, that one's (its own probe,
    shared with that endpoint's own test)."""
    mine = target.need(answers)
    name = target.endpoint.same_as
    if mine.failure or not name:
        return mine
    twin = target.peer(name)
    if twin is None:
        return Asked(failure=f"same_as names {name!r}, which is no endpoint of this fleet",
                     fix="name the entry this endpoint is a replica of")
    theirs = twin.need(answers)
    if theirs.failure:
        return Asked(failure=f"the replica's original {name}: {theirs.failure}")
    return Asked(replies=mine.replies, context=mine.context, long_words=mine.long_words,
                 replica=theirs.replies, builds=(_build(target), _build(twin)),
                 exchanges=mine.exchanges)


def _build(target) -> str | None:
    from pytest_frank.fingerprint import identity

    build = getattr(target.need(identity), "build", None)  # a Failed has none
    return build if isinstance(build, str) else None


# -- what is recorded, and how two records compare ----------------------------------------
def record(reply: Reply, n: int) -> dict[str, Any]:
    """The first n tokens and their logprobs; without logprobs, the answer's characters."""
    if reply.logprobs:
        picked = reply.logprobs[:n]
        return {"unit": "token", "tokens": [t.token for t in picked],
                "logprobs": [t.logprob for t in picked]}
    text = reply.content or reply.reasoning
    return {"unit": "character", "tokens": list(text[:4 * n]), "logprobs": []}


@dataclass(frozen=True)
class Difference:
    """Two records of one prompt compared: `agreement` is the share of tokens before the first
    divergence, `drift` the mean absolute logprob difference on that common prefix."""
    agreement: float
    drift: float | None
    diverges: int | None  # the first position that differs (0-based), None where none does
    before: str  # the texts from the divergence on
    now: str
    compared: int  # tokens compared
    worst: tuple[int, str, float, float] | None = None  # (position, token, before, now)

    def drifted(self, prompt: str) -> str:
        """The drift, with the token whose logprob moved most."""
        text = f"{prompt!r}: logprob drift {self.drift or 0:.4f} on the common prefix"
        if self.worst is None:
            return text
        at, token, before, now = self.worst
        return (f"{text}, most at token {at} ({one_line(token, 20)!r}): before {before:.3f}, "
                f"now {now:.3f}")

    def says(self, prompt: str) -> str:
        if self.diverges is None:
            return f"{prompt!r}: the same {self.compared} tokens"
        return (f"{prompt!r} diverges at token {self.diverges} of {self.compared}: before "
                f"{one_line(self.before, 60)!r}, now {one_line(self.now, 60)!r}")


def compare(before: dict[str, Any], now: dict[str, Any]) -> Difference:
    old, new = list(before.get("tokens") or []), list(now.get("tokens") or [])
    n = min(len(old), len(new)) or max(len(old), len(new))
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    diverges = None if same == n and len(old) == len(new) else same
    lp_old, lp_new = before.get("logprobs") or [], now.get("logprobs") or []
    pairs = [(a, b) for a, b in zip(lp_old[:same], lp_new[:same])
             if isinstance(a, (int, float)) and isinstance(b, (int, float))]
    drift = sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else None
    at = max(range(len(pairs)), key=lambda i: abs(pairs[i][0] - pairs[i][1]), default=None)
    worst = (at, str(old[at]), *pairs[at]) if at is not None else None
    return Difference(agreement=same / n if n else 1.0, drift=drift, diverges=diverges,
                      before="".join(map(str, old[same:])), now="".join(map(str, new[same:])),
                      compared=n, worst=worst)


def read(attachments: list[dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """The recorded fingerprint of a row, from its attachments; None where it has none."""
    for a in attachments:
        if a.get("name") == ATTACHMENT:
            try:
                data = json.loads(a.get("data") or "")
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


# -- judge --------------------------------------------------------------------------------
def judge_fingerprint(obs: Asked, ctx: Context) -> None:
    """The fixed greedy prompts (short, multi-turn with a system message, long) answer; their
    first tokens and logprobs are recorded for `--frank-baseline` to compare."""
    opts: Options = ctx.options
    for name, r in obs.replies.items():
        if not r.ok:
            fail(f"the {name} fingerprint prompt got no answer: {r.problem_line}")
        if not (r.logprobs or r.content or r.reasoning):
            fail(f"the {name} fingerprint prompt answered nothing (finish {r.finish!r})")
    recorded = {name: record(r, opts.tokens) for name, r in obs.replies.items()}
    ctx.attach(ATTACHMENT, "application/json", json.dumps(recorded, ensure_ascii=False))
    units = {rec["unit"] for rec in recorded.values()}
    ctx.note(f"recorded the first {opts.tokens} {'/'.join(sorted(units))}s of "
             f"{', '.join(recorded)}; --frank-baseline PREV.json compares them")
    if "long" not in obs.replies:
        ctx.note("the endpoint does not say its context, so no long prompt was sent")
    else:
        r = obs.replies["long"]
        ctx.note(f"the long prompt: {obs.long_words} filler words, {r.prompt_tokens} prompt "
                 f"tokens of a {obs.context}-token context")
    if not any(r.logprobs for r in obs.replies.values()):
        ctx.note("no logprobs came back: the record is the answers' characters, and only "
                 "agreement is compared")
    if obs.replica:
        same_as(obs, recorded, ctx)


def same_as(obs: Asked, recorded: dict[str, dict[str, Any]], ctx: Context) -> None:
    """A replica answers as the endpoint it is `same_as`, within fleet.yaml's `regression:`
    tolerances (the same that a baseline is held to)."""
    name, tol = ctx.endpoint.same_as, ctx.endpoint.regression or {}
    agreement = tol.get("fingerprint_agreement", AGREEMENT)
    drift = tol.get("logprob_drift", DRIFT)
    builds = (f" (builds: {obs.builds[1]} there, {obs.builds[0]} here)"
              if obs.builds[0] != obs.builds[1] else "")
    fix = (f"a replica serves another model, template, cache type or build than {name}: "
           f"compare their serve configs{builds}")
    for prompt, r in obs.replica.items():
        if prompt not in recorded or not r.ok:
            continue
        diff = compare(record(r, ctx.options.tokens), recorded[prompt])
        if diff.agreement < agreement:
            fail(f"not the same answers as {name}: {diff.says(prompt)} (before: {name}, now: "
                 f"this replica; agreement {diff.agreement:.2f}, tolerance {agreement:g})", fix)
        if diff.drift is not None and diff.drift > drift:
            fail(f"not the same model as {name}: {diff.drifted(prompt)} (before: {name}, now: "
                 f"this replica; tolerance {drift:g})", fix)
    ctx.note(f"the same answers as {name}, its replica original")


FINGERPRINT = Check("test_fingerprint", "fingerprint", asked, judge_fingerprint)
