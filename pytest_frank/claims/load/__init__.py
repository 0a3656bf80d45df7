"""load: many clients at once. Each reply is whole and its own, errors and reasoning alone stay
within their floors, and speed holds, at every level of a ladder of requests in flight together.

The ladder climbs 1, 2, 4 ... up to the slots the endpoint reports (llama.cpp /props
total_slots), expect.load.concurrency, or the fleet entry's `concurrency` where it is set
above 1, whichever is least. Each level sends bursts of `level` requests at once, drawn from a
small pool of the battery's own requests (plain, streamed, tool-forced, thinking, and an
image where vision is asked), each made distinct twice: by its length, so that its usage
counts its own prompt, and by the word its answer is asked to open with (a marker word, or the
colour of its image), so that a model that follows it gives each request its own answer; level
1 asks every one of them alone, and that reply is its solo twin. A reply under load is judged
as its twin is (an answer, valid calls, a finish_reason that matches the body, the colour
named) and against it: a prompt-token count or, at temperature 0, an answer that is another
request's is cross-talk. The ladder holds the endpoint alone while it runs (nothing else of the
battery shares its bursts) and stops climbing at the first level that fails, or at its
deadline.

Faults it is about, reported in the field with /health green and every sequential check
passing: answers served to the wrong request from a shared prefix cache (vLLM PR 36708, LMCache
4086), replies of reasoning alone under concurrent load with MTP (vLLM PR 41467), slots that
run out (503s) and decode speed that collapses as load grows.
"""

from __future__ import annotations

import math
import random
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from pytest_frank.base.figures import FIGURES, number
from pytest_frank.claims import Claim, chat, option, reasoning, tools, vision
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.diagnosis import Counts, Diagnosis, Evidence, diagnose
from pytest_frank.claims.perf import slow_cpu_hint, slow_gpu_hint
from pytest_frank.claims.replies import one_line, reasoning_only, reasoning_only_fix
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.protocols import Facts, Wire
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Phrase, Text, fail, inconclusive
from pytest_frank.runtime.chat import Reply, Request, send
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.runtime.probes import slot_shape
from pytest_frank.runtime.target import TooSlow
from pytest_frank.transport import http

SHOWN = 3  # replies with a fault kept as the evidence's exchanges
UNKNOWN_TOP = 4  # the ladder's top where neither the endpoint nor fleet.yaml says
CONFIDENCE = 0.95
# The battery's own requests, in the order a pool of them takes them (each kind asked only where
# the claim it comes from is asked: a model without tools is not sent tool_choice "required").
KINDS = ("plain", "streamed", "tools", "thinking", "vision")
ERROR, CROSS, ONLY, WRONG = "error", "cross-talk", "reasoning only", "not whole"
# Each kind's question. Two requests of one question may be answered alike (and, batched, a
# greedy answer may move a little): an answer is another request's across questions, or within
# one by the marker word (or colour) it names.
QUESTIONS = {"plain": chat.PROMPT, "streamed": reasoning.PROMPT,
             "tools": tools.PROMPTS["required"], "thinking": reasoning.PROMPT,
             "vision": vision.PROMPT}
# The words a text request asks its answer to open with, one per request of the pool in turn:
# plain words no prompt or template of the battery holds, so a model that follows the ask
# answers each request its own way (the self-test model `echo` does, by attention).
MARKERS = ("apricot", "banana", "cherry", "damson", "lychee", "mango", "papaya", "quince")


@dataclass(frozen=True)
class Options(ClaimOptions):
    concurrency: int | None = option(None, minimum=1, maximum=64, about=(
        "The ladder's top: the most requests in flight at once (default: the slots the endpoint "
        "reports, llama.cpp /props total_slots, else 4); never above the entry's `concurrency` "
        "where that is set above 1."))
    requests: int = option(120, minimum=1, maximum=5000, about=(
        "Requests of the whole ladder, shared so each level sends as many bursts (default 120: an "
        "8-slot endpoint at 50 tok/s climbs 1, 2, 4, 8 in about a minute); level 1 asks each "
        "request of the pool alone at least once."))
    max_tokens: int = option(256, minimum=16, about=(
        "Token budget of each request (default 256; tool-forced requests need room for the call)."))
    deadline_s: float = option(300.0, exclusiveMinimum=0, about=(
        "Seconds the ladder may take; past it no new burst is sent and the claim is inconclusive "
        "at the level reached (default 300)."))
    max_error_rate: float = option(0.0, minimum=0, maximum=1, about=(
        "The highest share (0-1) of a level's requests that may fail (an error status, a refused "
        "or dropped connection, a timeout; default 0)."))
    max_reasoning_only_rate: float = option(0.0, minimum=0, maximum=1, about=(
        "The highest share (0-1) of a level's replies that may carry reasoning only, with no "
        "content and no tool call (default 0)."))
    max_ttft_p90_s: float | None = option(None, exclusiveMinimum=0, about=(
        "Highest 90th-percentile time to first token of a level's streamed requests, seconds "
        "(default: none)."))
    min_decode_tps: float | None = option(None, exclusiveMinimum=0, about=(
        "Lowest median per-request decode speed of a level's streamed requests, tokens/s "
        "(default: none)."))


CLAIM = Claim("load",
              "with many requests in flight at once, each reply is whole and its own, and errors "
              "and speed stay within the floors", Options,
              order=150,
              tests=("test_load",))


@dataclass
class Sent:
    """One request of the ladder and what came back."""

    index: int  # its place in the pool: #index names it in a message
    kind: str
    reply: Reply


@dataclass
class Level:
    """One rung: `width` requests in flight at once, burst after burst."""

    width: int
    sent: list[Sent] = field(default_factory=list)
    wall_s: float = 0.0  # the bursts' time, from the first request out to the last answer in


@dataclass(kw_only=True)
class Ladder(Observation):
    top: int = 1
    top_from: str = ""
    slots: int | None = None  # what the endpoint reports, where it does
    kinds: list[str] = field(default_factory=list)  # the pool's requests' kinds, by index
    prompts: list[str] = field(default_factory=list)
    # The word each request's answer should name: its marker, or its image's colour.
    marks: list[str] = field(default_factory=list)
    form: str = ""  # how an image travels, where the pool holds one
    levels: list[Level] = field(default_factory=list)
    stopped: str = ""  # why the ladder ended below its top without a failing level


def pool_kinds(target) -> list[str]:
    """The kinds of request this endpoint is sent: plain and streamed always, tool-forced where
    fleet.yaml asks tools, thinking where it asks reasoning, an image where it asks vision."""
    asked = {"tools": "tools", "thinking": "reasoning", "vision": "vision"}
    return [k for k in KINDS if k not in asked or target.endpoint.asks(asked[k])]


def marks(pool: list[str]) -> list[str]:
    """What each request of the pool asks its answer to name: the markers in turn, and for an
    image a colour, drawn now (as the vision claim draws its own) and distinct while they last."""
    colours = random.SystemRandom().sample(sorted(vision.COLOURS), len(vision.COLOURS))
    seen = 0
    out = []
    for i, kind in enumerate(pool):
        if kind == "vision":
            out.append(colours[seen % len(colours)])
            seen += 1
        else:
            out.append(MARKERS[i % len(MARKERS)])
    return out


def prompt(index: int, kind: str) -> str:
    """The pool's request `index`: the battery's prompt of its kind, after `index` short
    sentences, so no two requests of one burst count the same prompt tokens; a text request
    then asks its answer to open with its marker, so no two are answered alike by a model that
    follows it (an image's colour does that for a vision request)."""
    text = "Once more. " * index + QUESTIONS[kind]
    if kind == "vision":
        return text
    return f"{text} Begin your answer with the word {MARKERS[index % len(MARKERS)]}."


def request(out: Ladder, index: int, wire: Wire, max_tokens: int) -> Request:
    """The pool's request `index` as it is sent."""
    text, kind = out.prompts[index], out.kinds[index]
    if kind == "tools":
        return Request(text, max_tokens, tools=tools.TOOLS, tool_choice="required")
    if kind == "vision":
        image = wire.image_part(vision.png(out.marks[index]), "image/png", out.form)
        return Request([{"type": "text", "text": text}, image], max_tokens)
    return Request(text, max_tokens, stream=kind in ("streamed", "thinking"),
                   think=kind == "thinking")


def reported_slots(target) -> tuple[int | None, str]:
    """The slots the endpoint says it serves at once, and where it says so."""
    shape = target.need(slot_shape)
    if isinstance(shape, Unseen) or not shape.count:
        return None, ""
    return shape.count, shape.source


def ladder_top(target, opts: Options) -> tuple[int, str]:
    """How far the ladder climbs, and what says so."""
    count, source = reported_slots(target)
    if opts.concurrency is not None:
        top, said = opts.concurrency, f"expect.load.concurrency {opts.concurrency}"
    else:
        if count:
            top, said = count, f"the endpoint's {count} slots ({source})"
        else:
            top, said = UNKNOWN_TOP, (f"{UNKNOWN_TOP}: the endpoint reports no slot count "
                                      f"(set expect.load.concurrency)")
    ceiling = target.endpoint.concurrency
    if 1 < ceiling < top:
        top, said = ceiling, f"the fleet entry's concurrency {ceiling} ({said} would be more)"
    return top, said


def widths(top: int) -> list[int]:
    """1, 2, 4 ... below `top`, then `top`."""
    out, width = [], 1
    while width < top:
        out.append(width)
        width *= 2
    return [*out, top]


def bursts(requests: int, levels: list[int], pool: int) -> dict[int, int]:
    """How many bursts each level sends: as many at each level above 1, and level 1 the rest,
    so the ladder sends exactly `requests`; more only where that is too few for its floor (each
    of the pool's requests alone once, a burst at every other level)."""
    above = sum(levels[1:])
    rounds = max(1, requests // sum(levels))
    return {1: max(pool, requests - rounds * above),
            **{width: rounds for width in levels[1:]}}


def asked_line(requests: int, sent: int, pool: int, levels: list[int]) -> str:
    """The count sent against the count asked, and why they differ where they do."""
    said = f"requests: {sent} sent of expect.load.requests {requests}"
    if sent > requests:
        return (f"{said}: the ladder's floor is more (each of the pool's {pool} requests alone "
                f"once, and one burst at each of {', '.join(map(str, levels[1:]))} in flight)")
    return said


def ladder(target) -> Ladder:
    """The ladder: level after level of bursts, until a level fails, the top or the deadline."""
    opts = Options.on(target.endpoint)
    target.model_name()  # any probe it needs runs before the endpoint is held
    top, top_from = ladder_top(target, opts)
    kinds = pool_kinds(target)
    # every kind at least once, however low the top: a pool of one slot still asks them all
    pool = [kinds[i % len(kinds)] for i in range(max(top, len(kinds)))]
    out = Ladder(top=top, top_from=top_from, slots=reported_slots(target)[0], kinds=pool,
                 prompts=[prompt(i, k) for i, k in enumerate(pool)], marks=marks(pool),
                 form=vision.forms(vision.Options.on(target.endpoint), target.driver)[0]
                 if "vision" in pool else "")
    levels = widths(top)
    plan = bursts(opts.requests, levels, len(pool))
    began = time.monotonic()
    with target.exclusive():
        for width in levels:
            level = Level(width)
            out.levels.append(level)
            for burst in range(plan[width]):
                if time.monotonic() - began > opts.deadline_s:
                    out.stopped = (f"expect.load.deadline_s ({opts.deadline_s:g} s) ran out at "
                                   f"{width} in flight")
                    return _evidence(out, target.endpoint.greedy)
                picked = [(burst * width + k) % len(pool) for k in range(width)]
                start = time.monotonic()
                got = target.at_once([_asker(target, out, i, opts.max_tokens) for i in picked])
                level.wall_s += time.monotonic() - start
                level.sent.extend(s for s in got if s is not None)
                if any(s is None for s in got):
                    out.stopped = (f"an answer too slow to wait for stopped the endpoint's "
                                   f"requests at {width} in flight")
                    return _evidence(out, target.endpoint.greedy)
            if level_faults(out, level, target.endpoint.greedy, opts):
                break
    return _evidence(out, target.endpoint.greedy)


def _evidence(out: Ladder, greedy: bool) -> Ladder:
    """The exchanges a report shows: the first few replies with a fault, else the last one
    (every exchange of the ladder would bury them)."""
    shown = [s for level in out.levels for s, _ in _faulty(out, level, greedy)][:SHOWN] or \
        [s for level in out.levels for s in level.sent][-1:]
    out.exchanges = [s.reply.exchange for s in shown if s.reply.exchange is not None]
    return out


def _asker(target, out: Ladder, index: int, max_tokens: int) -> Callable[[], Sent | None]:
    def ask() -> Sent | None:
        kind = out.kinds[index]
        # Recorded apart from the probe's evidence, which keeps the replies with a fault only.
        with http.recording(propagate=False) as seen:
            try:
                reply = send(target, request(out, index, target.driver.wire, max_tokens))
            except TooSlow:  # an earlier answer was cut as too slow: none goes out
                return None
        for ex in seen:
            ex.settle()
        return Sent(index, kind, reply)
    return ask


# -- judging: each reply as its solo twin, then the rates and the figures per level ---------------
def solos(seen: Ladder) -> dict[int, Reply]:
    """Each pool request's first reply at 1 in flight: what it gets alone."""
    found: dict[int, Reply] = {}
    for sent in seen.levels[0].sent if seen.levels else []:
        if sent.reply.ok:
            found.setdefault(sent.index, sent.reply)
    return found


def fault(sent: Sent, twins: dict[int, Reply], seen: Ladder,
          greedy: bool) -> tuple[str, str] | None:
    """(kind of fault, what is wrong) for one reply, or None where it is whole and its own."""
    r, me = sent.reply, f"request #{sent.index} ({sent.kind})"
    kinds = dict(enumerate(seen.kinds))
    if not r.ok:
        return ERROR, f"{me}: {one_line(r.problem_line, 200)}"
    twin = twins.get(sent.index)
    if twin is not None and twin is not r:
        if (r.prompt_tokens is not None and twin.prompt_tokens is not None
                and r.prompt_tokens != twin.prompt_tokens):
            whose = [i for i, t in twins.items() if i != sent.index
                     and t.prompt_tokens == r.prompt_tokens]
            of = (f"the count of request #{whose[0]} ({kinds[whose[0]]}): it got that request's "
                  f"answer" if whose else "another prompt's count: it got another request's "
                                          "answer")
            return CROSS, (f"{me} came back counting {r.prompt_tokens} prompt tokens where alone "
                           f"it counted {twin.prompt_tokens}, {of}")
        if greedy and r.content.strip() and r.content != twin.content:
            whose = [i for i, t in twins.items() if i != sent.index and t.content == r.content
                     and _another(seen, sent.index, i, t.content)]
            if whose:
                return CROSS, (f"{me} got the answer of request #{whose[0]} "
                               f"({kinds[whose[0]]}), {one_line(r.content, 60)!r}, where alone "
                               f"it answered {one_line(twin.content, 60)!r}")
    if reasoning_only(r):
        return ONLY, (f"{me}: reasoning only, no content and no tool call (finish_reason "
                      f"{r.finish!r}, reasoning {one_line(r.reasoning, 60)!r})")
    if sent.kind == "tools":
        found = tools.call_reply_problems(r)
        return (WRONG, f"{me}: {found[0]}") if found else None
    if sent.kind == "vision" and not r.cut and sent.index < len(seen.marks):
        colour = seen.marks[sent.index]
        named = _colours(r.content)
        if named != [colour]:
            said = f"{me}: shown a solid {colour} image, it answered {one_line(r.content, 60)!r}"
            if len(named) == 1 and twin is not None and twin is not r \
                    and _colours(twin.content) == [colour]:
                # alone it named its own: another image's colour is another image's answer
                return CROSS, (f"{said}, another image's colour, where alone it answered "
                               f"{one_line(twin.content, 60)!r}")
            return WRONG, f"{said} (names {', '.join(named) or 'no colour'})"
    leaked = chat.markup(r.content)
    if leaked:
        return WRONG, f"{me}: template markup {leaked[0]!r} in the answer"
    if r.calls or r.tool_finish:
        return WRONG, (f"{me}: finish_reason {r.finish!r} with {len(r.calls)} tool call(s), "
                       f"asked without tools")
    if not r.cut and not (r.content.strip() or r.reasoning.strip()):
        return WRONG, f"{me}: an empty answer (finish_reason {r.finish!r})"
    return None


def _another(seen: Ladder, mine: int, theirs: int, answer: str) -> bool:
    """Whether `answer`, request `theirs`'s solo answer, is another request's and not one that
    `mine` may give too: it answers another question, or it names its own request's word
    (marker or colour) and not mine's. Two requests of one question may be answered alike
    where the model does not follow the word, and a batched greedy answer may move a little:
    such answers are never compared."""
    if seen.kinds[mine] == "vision" and seen.kinds[theirs] != "vision":
        return False  # a reply that lost its image answers as text does: not another's answer
    if QUESTIONS[seen.kinds[theirs]] != QUESTIONS[seen.kinds[mine]]:
        return True
    if max(mine, theirs) >= len(seen.marks) or seen.marks[mine] == seen.marks[theirs]:
        return False
    return _names(seen.marks[theirs], answer) and not _names(seen.marks[mine], answer)


def _colours(text: str) -> list[str]:
    return [c for c in vision.COLOURS if _names(c, text)]


def _names(word: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE) is not None


def faults(seen: Ladder, level: Level, greedy: bool) -> list[tuple[str, str]]:
    """The faults of the level's replies, each judged against its solo twin."""
    return [found for _, found in _faulty(seen, level, greedy)]


def _faulty(seen: Ladder, level: Level, greedy: bool) -> list[tuple[Sent, tuple[str, str]]]:
    twins = solos(seen)
    return [(s, found) for s in level.sent
            if (found := fault(s, twins, seen, greedy)) is not None]


def level_faults(seen: Ladder, level: Level, greedy: bool, opts: Options) -> list[str]:
    """What fails a level: its faults past their floors, its figures past theirs. Pure: the
    probe asks it to stop climbing, the judge to name the level."""
    found = faults(seen, level, greedy)
    n = len(level.sent) or 1
    out = []
    for kind, floor in ((CROSS, 0.0), (WRONG, 0.0), (ERROR, opts.max_error_rate),
                        (ONLY, opts.max_reasoning_only_rate)):
        if sum(k == kind for k, _ in found) / n > floor:
            out.append(kind)
    figures = Figures.of(level)
    if opts.max_ttft_p90_s is not None and figures.ttft_p90 is not None \
            and figures.ttft_p90 > opts.max_ttft_p90_s:
        out.append("ttft")
    if opts.min_decode_tps is not None and figures.decode is not None \
            and figures.decode < opts.min_decode_tps:
        out.append("decode")
    return out


@dataclass
class Figures:
    """One level's speed: first tokens and decode rates of its streamed replies, and the tokens
    all of its replies made over its wall time."""

    ttft_p50: float | None
    ttft_p90: float | None
    decode: float | None  # per request, the median
    together: float | None  # tok/s of the level's replies together

    @classmethod
    def of(cls, level: Level) -> Figures:
        ok = [s.reply for s in level.sent if s.reply.ok]
        firsts = sorted(r.first_token_s for r in ok if r.first_token_s is not None)
        rates = [rate for r in ok if (rate := r.decode_rate()) is not None]
        made = sum(r.generated for r in ok)
        return cls(percentile(firsts, 0.5), percentile(firsts, 0.9),
                   statistics.median(rates) if rates else None,
                   made / level.wall_s if level.wall_s > 0 and made else None)

    def line(self) -> str:
        parts = []
        if self.ttft_p50 is not None and self.ttft_p90 is not None:
            parts.append(f"first token P50 {number(self.ttft_p50)} s, P90 "
                         f"{number(self.ttft_p90)} s")
        if self.decode is not None:
            parts.append(f"decode {number(self.decode)} tok/s per request (median)")
        if self.together is not None:
            parts.append(f"{number(self.together)} tok/s together")
        return ", ".join(parts)


def percentile(ordered: list[float], share: float) -> float | None:
    """The nearest-rank percentile of sorted values (P90 of 10 is the 9th)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def upper_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided upper bound of a rate seen k times in n (Clopper-Pearson): 0 of 200 is
    under 1.5% at 95%."""
    if n <= 0 or k >= n:
        return 1.0
    alpha, low, high = 1 - confidence, k / n, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if _at_most(k, n, mid) > alpha:
            low = mid
        else:
            high = mid
    return high


def _at_most(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in logs (n in the thousands stays finite)."""
    if p >= 1:
        return 0.0 if k < n else 1.0
    lp, lq = math.log(p) if p > 0 else -math.inf, math.log1p(-p)
    return sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                        + (i * lp if i else 0.0) + (n - i) * lq) for i in range(k + 1))


def rate(k: int, n: int) -> str:
    """'0 of 200: under 1.5% at 95%', '3 of 48 (6.2%, under 16% at 95%)'."""
    bound = f"under {number(100 * upper_bound(k, n), 2)}% at {CONFIDENCE:.0%}"
    if k == 0:
        return f"0 of {n}: {bound}"
    return f"{k} of {n} ({number(100 * k / n, 2)}%, {bound})"


def judge(seen: Ladder, ctx: Context[Options]) -> None:
    """Every reply under load is whole and its own at each level of the ladder, errors and
    replies of reasoning alone stay within their floors, and speed holds."""
    if not seen.levels or not seen.levels[0].sent:
        inconclusive(f"inconclusive: nothing was measured ({seen.stopped or 'no level ran'})")
    opts = ctx.options
    ctx.note(f"ladder: {', '.join(str(lv.width) for lv in seen.levels)} in flight (top "
             f"{seen.top}: {seen.top_from}); requests {', '.join(sorted(set(seen.kinds)))}")
    twins = solos(seen)
    distinct = len({t.content for t in twins.values() if t.content.strip()})
    ctx.note(f"solo answers: {distinct} distinct of {len(twins)}" + (
        " (at temperature 0 an answer another request got is judged by its words too)"
        if ctx.endpoint.greedy else " (sampled: answers are not compared, prompt counts are)"))
    so_far: list[tuple[str, str]] = []
    total = 0
    for level in seen.levels:
        found = faults(seen, level, ctx.endpoint.greedy)
        figures = Figures.of(level)
        total += len(level.sent)
        so_far += found
        _figures(level, figures, ctx)
        ctx.note(f"at {level.width} in flight: {len(level.sent)} replies in "
                 f"{number(level.wall_s)} s, {len(found)} with a fault; {figures.line()}")
        failing = level_faults(seen, level, ctx.endpoint.greedy, opts)
        if failing:
            _fail(seen, level, found, figures, failing[0], ctx)
    errors = sum(k == ERROR for k, _ in so_far)
    only = sum(k == ONLY for k, _ in so_far)
    ctx.figure("error_rate", errors / total if total else 0.0, "", high=opts.max_error_rate)
    ctx.figure("reasoning_only_rate", only / total if total else 0.0, "",
               high=opts.max_reasoning_only_rate)
    ctx.note(f"errors {rate(errors, total)}; reasoning only {rate(only, total)}; "
             f"cross-talk {rate(sum(k == CROSS for k, _ in so_far), total)}")
    for kind, line in so_far:  # within their floors: named, not failed
        ctx.note(f"{kind}: {line}")
    if not seen.stopped:  # a ladder cut short says where, below
        ctx.note(asked_line(opts.requests, total, len(seen.kinds), widths(seen.top)))
    cut = [s.reply for lv in seen.levels for s in lv.sent if s.reply.ok and s.reply.cut]
    if cut:  # an answer cut short shows neither reasoning alone nor a whole answer
        thinking = sum(r.thinking_cut for r in cut)
        ctx.note(f"{len(cut)} of {total} replies were cut at max_tokens={cut[0].max_tokens} "
                 f"({thinking} of them while thinking) and judged only as far as they went: "
                 f"raise expect.load.max_tokens for them to end by themselves")
    if seen.stopped:
        inconclusive(f"inconclusive: the ladder reached {seen.levels[-1].width} of {seen.top} "
                     f"in flight, every level whole: {seen.stopped}")
    if seen.top < 2:
        inconclusive(f"inconclusive: the ladder cannot climb: its top is 1 in flight "
                     f"({seen.top_from}), so no two requests were in flight together; every "
                     f"reply alone was whole. Set expect.load.concurrency to 2 or more to send "
                     f"them together all the same (they wait for the slot), or give the server "
                     f"more slots")


def _figures(level: Level, figures: Figures, ctx: Context[Options]) -> None:
    """The level's figures under their names in figures.FIGURES (`decode_tps_at_4`)."""
    def record(name: str, value: float, low: float | None = None,
               high: float | None = None) -> None:
        kind = FIGURES[name]
        ctx.figure(kind.at(level.width), value, kind.unit, low=low, high=high)

    if figures.ttft_p50 is not None and figures.ttft_p90 is not None:
        record("ttft_p50_s", figures.ttft_p50)
        record("ttft_p90_s", figures.ttft_p90, high=ctx.options.max_ttft_p90_s)
    if figures.decode is not None:
        record("decode_tps", figures.decode, low=ctx.options.min_decode_tps)
    if figures.together is not None:
        record("aggregate_tps", figures.together)


def _fail(seen: Ladder, level: Level, found: list[tuple[str, str]], figures: Figures,
          what: str, ctx: Context[Options]) -> None:
    width, n, opts = level.width, len(level.sent), ctx.options
    at = f"at {width} in flight"
    below = [lv.width for lv in seen.levels if lv.width < width]
    whole = (f"; {' and '.join(map(str, below))} in flight passed" if below else
             ": it fails with one request at a time too, so the battery's own checks of that "
             "request say more")
    lines = [line for kind, line in found if kind == what]
    if what in (CROSS, WRONG, ERROR, ONLY):
        shown = "; ".join(lines[:2]) + (f" (and {len(lines) - 2} more)" if len(lines) > 2 else "")
        counted = rate(len(lines), n)
        if what == CROSS:
            fail(f"{at}, replies went to the wrong request: {shown}; cross-talk in {counted} "
                 f"replies{whole}", cross_talk_fix(ctx.driver))
        if what == WRONG:
            if not below:
                fail(f"{at}, replies were not whole: {shown}; {counted} replies{whole}",
                     "the battery's own checks of these requests (chat, tools, reasoning, "
                     "vision) name the fix: run them, and fix what they find before the load")
            found_by = by_load(seen, level, WRONG, ctx.endpoint.greedy, ctx.driver,
                               f"the engine breaks answers under concurrent load that it "
                               f"answers whole alone: update it, and report the request with "
                               f"its batch; meanwhile {_carry(seen, level)}")
            fail(f"{at}, replies were not whole: {shown}; {counted} replies{whole}; "
                 f"{found_by.line}", found_by.fix)
        if what == ERROR:
            alone = next(s.reply for s in level.sent if not s.reply.ok)
            fail(f"{at}, requests failed: {shown}; errors in {counted} replies, over "
                 f"max_error_rate {opts.max_error_rate:g}{whole}: errors began at "
                 f"{_began(seen, ERROR, ctx.endpoint.greedy)} in flight",
                 slots_fix(ctx.driver, seen, level) if below else
                 known_fix(ctx.driver, alone.problem, alone.status) or alone.fix)
        if not below:
            fail(f"{at}, replies carried reasoning only: {shown}; {counted} replies, over "
                 f"max_reasoning_only_rate {opts.max_reasoning_only_rate:g}{whole}",
                 reasoning_only_fix(ctx.driver))
        found_by = by_load(seen, level, ONLY, ctx.endpoint.greedy, ctx.driver,
                           reasoning_only_fix(ctx.driver))
        fail(f"{at}, replies carried reasoning only: {shown}; {counted} replies, over "
             f"max_reasoning_only_rate {opts.max_reasoning_only_rate:g}{whole}; "
             f"{found_by.line}", found_by.fix)
    if what == "ttft":
        fail(f"{at}, the first token's P90 is {number(figures.ttft_p90 or 0)} s, over "
             f"max_ttft_p90_s {opts.max_ttft_p90_s:g}{whole}",
             f"requests wait for a slot or for each other's prefill: {_carry(seen, level)}, or "
             f"give the server more prefill room (a larger batch); or relax "
             f"expect.load.max_ttft_p90_s")
    fail(f"{at}, decode runs at {number(figures.decode or 0)} tok/s per request (median), under "
         f"min_decode_tps {opts.min_decode_tps:g}{_speeds(seen, level)}",
         f"the load shares the hardware between the requests: {_carry(seen, level)}; on a GPU, "
         f"check {slow_gpu_hint(ctx.driver)}; if it runs on the CPU, "
         + slow_cpu_hint(ctx.driver) + "; or relax expect.load.min_decode_tps")


def by_load(seen: Ladder, level: Level, kind: str, greedy: bool, driver: Facts,
            fix: Text) -> Diagnosis:
    """Whether a fault of `kind` is tied to load: its count at each level up to `level`
    against the solo one (claims.diagnosis: Fisher's exact test), `fix` where it is."""
    counts = tuple(Counts(lv.width, sum(k == kind for k, _ in faults(seen, lv, greedy)),
                          len(lv.sent)) for lv in seen.levels if lv.width <= level.width)
    return diagnose(Evidence(seen=f"{kind} replies", levels=counts), driver, load=fix)


def _began(seen: Ladder, kind: str, greedy: bool) -> int:
    """The first level with a fault of `kind` (within its floor there, or not)."""
    return next(lv.width for lv in seen.levels
                if any(k == kind for k, _ in faults(seen, lv, greedy)))


def _speeds(seen: Ladder, level: Level) -> str:
    earlier = [(lv.width, f.decode) for lv in seen.levels if lv.width < level.width
               and (f := Figures.of(lv)).decode is not None]
    return ("; it decoded " + ", ".join(f"{number(d)} at {w}" for w, d in earlier)
            if earlier else "")


def _carry(seen: Ladder, level: Level) -> str:
    """What the endpoint carries: the level below the failing one."""
    below = [lv.width for lv in seen.levels if lv.width < level.width]
    if not below:
        return "serve no concurrent clients from it"
    return (f"set expect.load.concurrency to {below[-1]} and route no more than {below[-1]} "
            f"clients at once to it")


# -- advice -----------------------------------------------------------------------------------------
def cross_talk_fix(driver: Facts) -> Text:
    """What serves one request another's answer under load."""
    return advise(
        driver, "the engine mixed up requests in flight together, as a shared prefix cache or "
                "a batch that keys answers wrongly does (vLLM PR 36708, LMCache 4086): turn the "
                "prefix cache off to confirm, update the engine, and route one client at a time "
                "to it until then; a gateway in front that pools connections can do the same",
        {LlamaCppDriver: lambda d: Phrase("llama.cpp mixed up requests in flight together: update it, "
                                          "and to confirm serve with ", d.flags["parallel"](1), " or "
                                          "without prompt-cache reuse (--cache-reuse 0); a gateway in "
                                          "front that pools connections can do the same"),
         VllmDriver: lambda d: f"{d.start}--no-enable-prefix-caching to confirm (a cached prefix served "
                               "one request another's answer: vLLM PR 36708, LMCache 4086), and update "
                               "vLLM and LMCache; a gateway in front that pools connections can do the "
                               "same"})


def slots_fix(driver: Facts, seen: Ladder, level: Level) -> Text:
    """Requests refused, dropped or timed out once more are in flight than the server takes."""
    carry = _carry(seen, level)
    if seen.slots is not None and seen.slots >= level.width:
        return (f"the endpoint reports {seen.slots} slots, yet requests failed at {level.width} "
                f"in flight: something in front of it admits fewer (a gateway, a proxy, a rate "
                f"limit, a connection cap): raise its limit, or {carry}")
    return advise(
        driver, Phrase("the server refuses or drops requests past what it serves at once: give "
                       "it more slots or a queue in front (", driver.flags["parallel"], "), or "
                       f"{carry}; or raise expect.load.max_error_rate where some are expected"),
        {LlamaCppDriver: lambda d: Phrase("llama.cpp serves as many requests at once as it has slots: "
                                          "give it more (", d.flags["parallel"](level.width), ", with "
                                          "the context split between them), or ", carry),
         VllmDriver: lambda d: Phrase("vLLM queues past ", d.flags["parallel"], " and refuses once "
                                      "its KV cache is full: raise --max-num-seqs or "
                                      "--gpu-memory-utilization, or ", carry)})


LOAD = Check("test_load", "load", ladder, judge)
