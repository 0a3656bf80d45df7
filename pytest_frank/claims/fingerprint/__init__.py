"""fingerprint: the endpoint still computes the same model. Not the engine's fingerprint (which
engine answers, pytest_frank.runtime.identify), but the answers' own: a few fixed prompts asked
greedy, their first tokens and those tokens' logprobs recorded into the run record. A later run
with `--frank-baseline` compares them (pytest_frank.reports.baseline): a quantized KV cache, a rope
setting, another GGUF under the same alias or a template edit keeps every form and changes
these. The comparison itself (agreement, drift, the first divergence) lives here too, so the
baseline and the same-run comparisons read one definition.

Like is compared with like: each request is greedy, alone on the endpoint and off any cached
prefix (the driver's `uncached`), so a repeat is computed as the first one was; a replica
(`same_as`) and a later run ask the long prompt its original or the baseline asked, not one
sized to their own slot; tokens a drafting server sends unmeasured are not judged for drift."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_frank.base import redact
from pytest_frank.base.figures import TOLERANCES
from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import fail, inconclusive
from pytest_frank.drivers.base import Driver
from pytest_frank.runtime import sizing
from pytest_frank.runtime.chat import Reply, Request, combine, send
from pytest_frank.runtime.target import Target

if TYPE_CHECKING:
    pass

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
    tokens: int = option(32, minimum=1, maximum=512, about=(
        "the first N generated tokens recorded (default 32)"))
    context_share: float = option(0.5, exclusiveMinimum=0, maximum=0.95, about=(
        "the long prompt fills this share of the served context (default 0.5)"))


CLAIM = Claim("fingerprint",
              "greedy answers to fixed prompts are the baseline's: the same model computes",
              Options, order=130,
              tests=("test_fingerprint",))

# the least share of tokens before a divergence (greedy repeats itself), and the most mean
# absolute logprob difference on the common prefix: the fleet's `regression:` defaults
AGREEMENT = TOLERANCES["fingerprint_agreement"].default
DRIFT = TOLERANCES["logprob_drift"].default
# Two tokens this close in a server's own logprobs are a tie that arithmetic breaks: batches of
# other shapes (a drafting server verifies its drafts in batches) move SmolLM2's logprobs by up
# to 0.18, and its greedy path flipped at a gap of 0.099. A divergence there is no regression.
TIE = 0.25
TOP = 3  # alternatives asked per token: the ones a divergence is weighed against


@dataclass(frozen=True)
class Long:
    """The long prompt: its filler words, its size in the server's tokens where counted, and
    whose prompt it is ("" where it was sized to this endpoint's own slot)."""
    words: int
    tokens: int | None = None
    source: str = ""


@dataclass(kw_only=True)
class Asked(Observation):
    """The fixed prompts' greedy replies, by prompt name, and each prompt's digest; with
    `same_as`, the original's observation too."""
    replies: dict[str, Reply] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    context: int | None = None  # the served context per slot
    long: Long | None = None
    said: list[str] = field(default_factory=list)  # about the prompts' choice, for the notes
    unfit: str | None = None  # a recorded long prompt that no longer fits the slot: why
    before: dict[str, Any] | None = None  # the --frank-baseline run's record of this endpoint
    original: Asked | None = None
    builds: tuple[str | None, str | None] = (None, None)  # this one's and the original's


def long_prompt(words: int) -> str:
    return (f"The code word is {CODE}. Remember it." + FILLER * words
            + " What was the code word?")


def digest(prompt: Any) -> str:
    """What a prompt's record carries, so that only records of one prompt are compared."""
    text = json.dumps(prompt, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def greedy(driver: Driver) -> dict[str, Any]:
    """Greedy, thinking off, off any cached prefix (the driver's switch: a repeat is computed
    as the first one was), and logprobs with one alternative where the API shape has them (a
    token that comes without one was not measured: Driver.unmeasured)."""
    wire = driver.wire
    parts = [wire.sampling({"temperature": 0.0}), wire.thinking_off(), driver.uncached()]
    if "logprobs" in wire.shape_params:
        parts.append(wire.logprobs(TOP))
    return combine(*parts)


def requests(target: Target, opts: Options, long: Long | None) -> dict[str, Request]:
    driver = target.driver
    reqs = {"short": Request(SHORT, opts.tokens, extra=greedy(driver)),
            "multi-turn": Request("", opts.tokens, extra=greedy(driver), messages=TURNS)}
    if long is not None:
        reqs["long"] = Request(long_prompt(long.words), opts.tokens, extra=greedy(driver))
    return reqs


def sized(target: Target, opts: Options, context: int | None) -> Long | None:
    """A long prompt sized to this slot: the claim's share of its context, counted by the
    server (its /tokenize, else a one-token answer's usage); None where the context is unsaid."""
    if not context:
        return None
    # Every filler word is a token at least, so this many words overfill the share; sizing
    # shrinks them by the server's own count.
    fitted = sizing.fit(target, long_prompt, int(context * opts.context_share),
                        reserve=opts.tokens + ROOM, least=ROOM, share=opts.context_share,
                        by_usage=True)
    return None if fitted.too_small else Long(fitted.words, fitted.tokens)


def from_baseline(before: dict[str, Any] | None) -> tuple[Long | None, str | None]:
    """The baseline's long prompt, to be asked again; else None and, where it had one that
    cannot be rebuilt, why."""
    rec = (before or {}).get("long")
    if not isinstance(rec, dict):
        return None, None
    words, tokens = rec.get("words"), rec.get("prompt_tokens")
    if not isinstance(words, int) or words < 1:
        return None, ("the baseline does not record its long prompt's size (an older "
                      "pytest-frank wrote it): this one is sized to the slot anew, and 'long' "
                      "is compared only if it comes out the same")
    if rec.get("prompt") not in (None, digest(long_prompt(words))):
        return None, ("the baseline's long prompt is not this pytest-frank's (its text "
                      "changed): this one is sized anew, and 'long' is not compared")
    return Long(words, tokens if isinstance(tokens, int) else None, "the baseline's"), None


def unfit(target: Target, long: Long, context: int | None, opts: Options) -> str | None:
    """Why a recorded long prompt cannot be asked of this slot; None where it fits."""
    if not context:
        return None
    tokens = long.tokens or sizing.count(target, long_prompt(long.words))[0]
    if tokens + opts.tokens <= context:
        return None
    return (f"the long prompt is {long.source} ({tokens} tokens), and this server's slot of "
            f"{context} tokens no longer holds it with the {opts.tokens} tokens answered: not "
            f"sent, so 'long' is not compared; give this server the slot size it had "
            f"(context / parallel), or take a new baseline with --frank-json")


def root(target: Target) -> Target | str:
    """The endpoint at the end of this one's same_as chain (itself where it names none), or
    why there is none."""
    chain, here = [target.name], target
    while here.endpoint.same_as:
        name = here.endpoint.same_as
        there = here.peer(name)
        if there is None:
            return f"same_as names {name!r}, which is no endpoint of this fleet"
        if there.name in chain:
            return f"same_as goes round in a circle: {' -> '.join([*chain, there.name])}"
        chain.append(there.name)
        here = there
    return here


def answers(target: Target) -> Asked:
    """The fixed prompts, asked greedy and alone. The long one is the replica original's where
    this endpoint is `same_as` another, else the baseline's, else sized to this slot: a
    replica or a later run asks what the first one asked, whatever its own slot."""
    opts = Options.on(target.endpoint)
    first = root(target)
    if isinstance(first, str):
        return Asked(failure=first, fix="name the entry this endpoint is a replica of")
    before, said = recorded(target), []
    if first is not target:
        theirs = first.need(answers)
        if not isinstance(theirs, Asked) or theirs.failure:
            return Asked(failure=f"the replica's original {first.name}: {theirs.failure}")
        sent = theirs.replies.get("long")
        fixed = theirs.long and replace(theirs.long, source=f"{first.name}'s, its original",
                                        tokens=sent and sent.prompt_tokens or theirs.long.tokens)
    else:
        fixed, why = from_baseline(before)
        said += [why] if why else []
    context, problem = target.served_context(), None
    if fixed is not None:
        problem = unfit(target, fixed, context, opts)
        long = None if problem else fixed
    else:
        long = sized(target, opts, context) if first is target else None
    reqs = requests(target, opts, long)
    target.model_name()  # before the block: a probe waited for inside it would wait on it
    with target.exclusive():  # alone: a batch shared with other requests moves the numbers
        replies = {name: greedy_answer(target, req) for name, req in reqs.items()}
    return Asked(replies=replies, context=context, long=long, said=said, unfit=problem,
                 before=before, digests={n: digest(r.messages or r.content)
                                         for n, r in reqs.items()})


def greedy_answer(target: Target, req: Request) -> Reply:
    """The answer, asked again without logprobs where the route refuses them (llama.cpp's
    /v1/responses answers 400 to top_logprobs): then the record is the answer's characters;
    the refusal itself is test_params_logprobs' to judge. The refused reply is kept in
    `first`."""
    reply = send(target, req)
    wire = target.driver.wire
    asked = wire.logprobs(TOP) if "logprobs" in wire.shape_params else {}
    plain = {k: v for k, v in req.extra.items() if k not in asked}
    if reply.status != 400 or plain == req.extra:
        return reply
    again = send(target, replace(req, extra=plain))
    again.first = reply
    return again


def recorded(target: Target) -> dict[str, Any] | None:
    """This endpoint's fingerprint in the --frank-baseline run, where there is one."""
    return next((found for row in target.baseline if row.claim == "fingerprint"
                 for found in [read(row.attachments)] if found), None)


def asked(target: Target) -> Asked:
    """This endpoint's answers and, where it is `same_as` another, that one's (its own probe,
    shared with that endpoint's own test)."""
    mine = target.need(answers)
    name = target.endpoint.same_as
    if isinstance(mine, Unseen):  # the same failure, as this probe's own observation
        return Asked(failure=mine.failure, fix=mine.fix)
    if mine.failure or not name:
        return mine
    twin = target.peer(name)
    assert twin is not None  # there is one: answers followed the chain
    theirs = twin.need(answers)
    if isinstance(theirs, Unseen) or theirs.failure:
        return Asked(failure=f"the replica's original {name}: {theirs.failure}")
    return replace(mine, original=theirs, builds=(_build(target), _build(twin)))


def _build(target: Target) -> str | None:
    from pytest_frank.runtime.identify import identity

    build = getattr(target.need(identity), "build", None)  # a Unseen has none
    return build if isinstance(build, str) else None


# -- what is recorded, and how two records compare ----------------------------------------
def record(reply: Reply, n: int, driver: Driver, prompt: str | None = None,
           long: Long | None = None) -> dict[str, Any]:
    """The first n tokens, their logprobs (None for a token the server did not measure) and
    their alternatives; without logprobs, the answer's characters. With the prompt's digest
    and size."""
    rec: dict[str, Any]
    if reply.logprobs:
        picked = reply.logprobs[:n]
        rec = {"unit": "token", "tokens": [t.token for t in picked],
               "logprobs": [None if driver.unmeasured(t) else t.logprob for t in picked],
               "top": [[list(a) for a in t.alternatives] for t in picked]}
    else:
        text = reply.content or reply.reasoning
        rec = {"unit": "character", "tokens": list(text[:4 * n]), "logprobs": []}
    if prompt:
        rec["prompt"] = prompt
    if reply.prompt_tokens:
        rec["prompt_tokens"] = reply.prompt_tokens
    if long is not None:
        rec["words"] = long.words
    return rec


def records(obs: Asked, n: int, driver: Driver) -> dict[str, dict[str, Any]]:
    return {name: record(r, n, driver, obs.digests.get(name),
                         obs.long if name == "long" else None)
            for name, r in obs.replies.items() if r.ok}


def shown(text: str, limit: int) -> str:
    """Quoted with escapes: a newline and a space must not look alike."""
    return repr(redact.cut(text, limit))


@dataclass(frozen=True)
class Difference:
    """Two records of one prompt compared: `agreement` is the share of tokens before the first
    divergence, `drift` the mean absolute logprob difference on that common prefix (over the
    tokens measured on both sides; `unjudged` counts the others)."""
    agreement: float
    drift: float | None
    diverges: int | None  # the first position that differs (0-based), None where none does
    before: str  # the texts from the divergence on
    now: str
    compared: int  # tokens compared
    worst: tuple[int, str, float, float] | None = None  # (position, token, before, now)
    unjudged: int = 0
    tie: float | None = None  # the divergence is a near tie: the two tokens' gap

    def regressed(self, agreement: float) -> bool:
        """Too few tokens before a divergence that is no near tie."""
        return self.agreement < agreement and self.tie is None

    def drifted(self, prompt: str) -> str:
        """The drift, with the token whose logprob moved most."""
        text = f"{prompt!r}: logprob drift {self.drift or 0:.4f} on the common prefix"
        if self.worst is None:
            return text
        at, token, before, now = self.worst
        return (f"{text}, most at token {at} ({shown(token, 20)}): before {before:.3f}, "
                f"now {now:.3f}")

    def says(self, prompt: str) -> str:
        if self.diverges is None:
            return f"{prompt!r}: the same {self.compared} tokens"
        tie = "" if self.tie is None else (f" at a near tie (the two tokens {self.tie:.3f} "
                                           f"apart in one server's own logprobs)")
        return (f"{prompt!r} diverges at token {self.diverges} of {self.compared}{tie}: before "
                f"{shown(self.before, 60)}, now {shown(self.now, 60)}")

    def figures(self) -> str:
        drift = "" if self.drift is None else f", drift {self.drift:.4f}"
        tie = "" if self.tie is None else (f" (diverges at token {self.diverges} at a near "
                                           f"tie, {self.tie:.3f} apart: compared up to there)")
        return f"agreement {self.agreement:.2f}{drift}{tie}"


def comparable(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether two records answer one prompt (a record without a digest is taken at its word)."""
    a, b = before.get("prompt"), now.get("prompt")
    return a is None or b is None or a == b


def compare(before: dict[str, Any], now: dict[str, Any]) -> Difference:
    old, new = list(before.get("tokens") or []), list(now.get("tokens") or [])
    n = min(len(old), len(new)) or max(len(old), len(new))
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    diverges = None if same == n and len(old) == len(new) else same
    both = list(zip(before.get("logprobs") or [], now.get("logprobs") or []))[:same]
    pairs = [(i, a, b) for i, (a, b) in enumerate(both) if _number(a) and _number(b)]
    drift = sum(abs(a - b) for _, a, b in pairs) / len(pairs) if pairs else None
    at = max(pairs, key=lambda p: abs(p[1] - p[2]), default=None)
    return Difference(agreement=same / n if n else 1.0, drift=drift, diverges=diverges,
                      before="".join(map(str, old[same:])), now="".join(map(str, new[same:])),
                      compared=n, worst=(at[0], str(old[at[0]]), at[1], at[2]) if at else None,
                      unjudged=len(both) - len(pairs), tie=_tie(before, now, same))


def _tie(before: dict[str, Any], now: dict[str, Any], at: int) -> float | None:
    """Where two records part at `at`: the gap between the two tokens in either server's own
    logprobs, where one of them measured both and it is within TIE."""
    tokens = (before.get("tokens") or [])[at:at + 1], (now.get("tokens") or [])[at:at + 1]
    if not (tokens[0] and tokens[1]):
        return None
    gaps = [g for rec, other in ((before, tokens[1][0]), (now, tokens[0][0]))
            for g in [_gap(rec, at, other)] if g is not None]
    return min(gaps) if gaps and min(gaps) <= TIE else None


def _gap(rec: dict[str, Any], at: int, other: str) -> float | None:
    """How far below its own choice at `at` a record's server put the `other` token."""
    chosen = (rec.get("logprobs") or [])[at:at + 1]
    top = (rec.get("top") or [])[at:at + 1]
    if not (chosen and top and _number(chosen[0])):
        return None
    found = [lp for pair in top[0] if isinstance(pair, list) and len(pair) == 2
             for t, lp in [pair] if t == other and _number(lp)]
    return chosen[0] - found[0] if found else None


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


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
def judge_fingerprint(obs: Asked, ctx: Context[Options]) -> None:
    """The fixed greedy prompts (short, multi-turn with a system message, long) answer; their
    first tokens and logprobs are recorded for `--frank-baseline` to compare."""
    opts: Options = ctx.options
    for name, r in obs.replies.items():
        if not r.ok:
            fail(f"the {name} fingerprint prompt got no answer: {r.problem_line}")
        if not (r.logprobs or r.content or r.reasoning):
            fail(f"the {name} fingerprint prompt answered nothing (finish {r.finish!r})")
    recorded = records(obs, opts.tokens, ctx.driver)
    ctx.attach(ATTACHMENT, "application/json", json.dumps(recorded, ensure_ascii=False))
    units = {rec["unit"] for rec in recorded.values()}
    ctx.note(f"recorded the first {opts.tokens} {'/'.join(sorted(units))}s of "
             f"{', '.join(recorded)}; --frank-baseline PREV.json compares them")
    _about_prompts(obs, ctx)
    unmeasured = sum(rec["logprobs"].count(None) for rec in recorded.values())
    if unmeasured:
        ctx.note(f"{unmeasured} tokens came with logprob 0.0 and no alternatives (taken from "
                 f"a draft): not judged for drift; test_spec_decode_lossless judges drafting")
    if obs.before:
        ctx.note(f"against the baseline: {against(obs.before, recorded, ctx)}")
    if obs.original:
        same_as(obs.original, obs.builds, recorded, ctx)
    if obs.unfit:
        inconclusive(obs.unfit)


def _about_prompts(obs: Asked, ctx: Context[Options]) -> None:
    if not obs.long:
        if not obs.unfit:
            ctx.note("the endpoint does not say its context, so no long prompt was sent")
    else:
        r = obs.replies["long"]
        whose = f" ({obs.long.source})" if obs.long.source else ""
        ctx.note(f"the long prompt: {obs.long.words} filler words, {r.prompt_tokens} prompt "
                 f"tokens of a {obs.context}-token context{whose}")
    for line in obs.said:
        ctx.note(line)
    refused = next((r.first for r in obs.replies.values() if r.first is not None), None)
    if refused is not None:
        ctx.note(f"logprobs were refused ({one_line(refused.problem_line, 120)}): asked "
                 f"without them")
    if not any(r.logprobs for r in obs.replies.values()):
        ctx.note("no logprobs came back: the record is the answers' characters, and only "
                 "agreement is compared")


def tolerances(ctx: Context[Options]) -> tuple[float, float]:
    """fleet.yaml's `regression:` fingerprint_agreement and logprob_drift, else the defaults."""
    tol = ctx.endpoint.regression or {}
    return tol.get("fingerprint_agreement", AGREEMENT), tol.get("logprob_drift", DRIFT)


def against(before: dict[str, Any], recorded: dict[str, dict[str, Any]], ctx: Context[Options]) -> str:
    """Each prompt's figures against an earlier record, and the tolerances they are held to."""
    agreement, drift = tolerances(ctx)
    parts = []
    for prompt, rec in recorded.items():
        old = before.get(prompt)
        if not isinstance(old, dict):
            continue
        parts.append(f"{prompt!r} {compare(old, rec).figures()}" if comparable(old, rec)
                     else f"{prompt!r} not compared (another prompt)")
    return (f"{'; '.join(parts) or 'no prompt in common'} (tolerance: agreement at least "
            f"{agreement:g}, drift at most {drift:g})")


def same_as(original: Asked, builds: tuple[str | None, str | None],
            recorded: dict[str, dict[str, Any]], ctx: Context[Options]) -> None:
    """A replica answers as the endpoint it is `same_as`, within fleet.yaml's `regression:`
    tolerances (the same that a baseline is held to)."""
    name = ctx.endpoint.same_as
    agreement, drift = tolerances(ctx)
    differ = f" (builds: {builds[1]} there, {builds[0]} here)" if builds[0] != builds[1] else ""
    fix = (f"a replica serves another model, template, cache type or build than {name}: "
           f"compare their serve configs{differ}")
    theirs = records(original, ctx.options.tokens, ctx.driver)
    for prompt, rec in theirs.items():
        if prompt not in recorded or not comparable(rec, recorded[prompt]):
            continue
        diff = compare(rec, recorded[prompt])
        if diff.regressed(agreement):
            fail(f"not the same answers as {name}: {diff.says(prompt)} (before: {name}, now: "
                 f"this replica; agreement {diff.agreement:.2f}, tolerance {agreement:g})", fix)
        if diff.drift is not None and diff.drift > drift:
            fail(f"not the same model as {name}: {diff.drifted(prompt)} (before: {name}, now: "
                 f"this replica; tolerance {drift:g})", fix)
    ctx.note(f"the same answers as {name}, its replica original: "
             f"{against(theirs, recorded, ctx)}")


FINGERPRINT = Check("test_fingerprint", "fingerprint", asked, judge_fingerprint)
