"""Differential diagnosis: which cause the evidence shows for a fault a check found, and which
evidence shows it. Every claim whose fault could lie in more than one place (the engine's
template and parser, the stream path, a gateway in front, chance, load) asks here, with what its
probe gathered as typed evidence, instead of naming its usual suspect:

- a gateway, where the engine's own facts (/v1/models, /props, the engine's own counts inside
  the reply) disagree with what the reply claims;
- intermittent, where the same request asked again came back right, or where the counts per
  concurrency level cannot tie the fault to load (Fisher's exact test, Wilson intervals);
- load, where they can;
- the stream path, where the same request unstreamed came back right and streamed wrong;
- the template (and the parser it selects), where the engine's own render shows the fault, or
  the unstreamed request fails alike again and nothing in front rewrote the reply;
- unknown, saying what was seen, where none of that is shown.

Pure: the evidence is asked in the probe phase (pytest_frank.claims.evidence), only once a
check's pre-judgement has found a fault, so a healthy endpoint spends nothing on it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from pytest_frank.claims.advice import advise
from pytest_frank.drivers import LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.verdict import Text

TEMPLATE, MODEL, STREAM, GATEWAY, INTERMITTENT, LOAD, UNKNOWN, CROSSED = (
    "template", "model", "stream path", "gateway", "intermittent", "load", "unknown", "crossed")
# How each cause reads in a failure's line.
NAMES = {TEMPLATE: "the engine's chat template and the parser it selects",
         MODEL: "the model itself",
         STREAM: "the stream path (the engine's streaming parser, or what re-chunks the stream "
                 "in front of it)",
         GATEWAY: "a gateway in front of the engine", INTERMITTENT: "intermittent",
         CROSSED: "answers crossed between requests in flight",
         LOAD: "load", UNKNOWN: "unknown"}
# The stream rules' words for a stream that stopped before its end (claims.stream_rules)
ENDED_EARLY = re.compile(r"ended without its|the stream ends with|never closed|no message_delta "
                         r"carried")
SIGNIFICANCE = 0.05  # Fisher's exact test: a level's rate apart from the solo rate below this
WILSON_Z = 1.96  # 95% Wilson score intervals, shown beside the test


@dataclass(frozen=True)
class Twin:
    """The same request unstreamed, judged as the faulty one was: `wrong` is what is wrong with
    it (None: it is right), `said` what it came back as."""
    wrong: str | None
    said: str


@dataclass(frozen=True)
class Again:
    """The same request asked once more, judged alike."""
    wrong: str | None
    said: str


@dataclass(frozen=True)
class Render:
    """The engine's own render of the request with its template (llama.cpp /apply-template, or
    the prompt's token counts with and without the part): whether the part reached the prompt."""
    carries: bool
    said: str


@dataclass(frozen=True)
class Disagreement:
    """One of the engine's own facts against what the reply claims of the same thing."""
    engine: str  # "/v1/models serves 'frank'"
    reply: str  # "the reply names 'gw/frank'"

    def __str__(self) -> str:
        return f"{self.engine}, {self.reply}"


@dataclass(frozen=True)
class Counts:
    """Faulty replies of all at one concurrency level."""
    width: int
    faulty: int
    total: int

    def __str__(self) -> str:
        low, high = wilson(self.faulty, self.total)
        return (f"{self.faulty} of {self.total} at {self.width} in flight "
                f"({100 * low:.0f}-{100 * high:.0f}%)")


@dataclass(frozen=True)
class Evidence:
    """What a probe gathered about one faulty reply. `streamed`: the faulty reply came as a
    stream; `seen`: the fault itself, in a few words (the unknown cause says it)."""
    seen: str
    streamed: bool = False
    twin: Twin | None = None
    again: Again | None = None
    render: Render | None = None
    disagree: tuple[Disagreement, ...] = ()
    facts: str = ""  # which of the engine's facts were compared with the reply ("": none)
    # the reply against its API's contract, as the contract claim read it: a published type
    # broken or an id emptied ("": kept, or not read), and an id another request's answer gave
    # itself first ("": none)
    broken: str = ""
    crossed: str = ""
    levels: tuple[Counts, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Diagnosis:
    cause: str  # TEMPLATE, MODEL, STREAM, GATEWAY, INTERMITTENT, LOAD or UNKNOWN
    evidence: str  # which evidence shows it, in words
    fix: Text

    @property
    def line(self) -> str:
        """The cause and its evidence, for the failure's line."""
        if self.cause == UNKNOWN:
            return f"cause unknown ({self.evidence})"
        return f"cause: {NAMES[self.cause]} ({self.evidence})"


def diagnose(seen: Evidence, driver: Facts | None, *, own: tuple[str, Text] | None = None,
             load: Text | None = None) -> Diagnosis:
    """The cause `seen` shows. `own`: the claim's usual cause (TEMPLATE, or MODEL) and its fix,
    given where the engine's own path fails alike and again with nothing in front rewriting
    the reply; `load`: the claim's fix where the rate grows with load."""
    if seen.disagree:
        said = "; ".join(map(str, seen.disagree))
        return Diagnosis(GATEWAY, f"the engine's own facts disagree with the reply: {said}",
                         "something in front of the engine rewrites its replies (a gateway or "
                         "proxy): fix it or pass replies through unchanged, and point a run at "
                         "the engine itself to confirm the engine is right")
    if seen.crossed:
        return Diagnosis(CROSSED, f"the reply is another request's answer: {seen.crossed}",
                         "answers crossed between requests in flight: a gateway, cache or load "
                         "balancer in front hands one request's answer to another, or the "
                         "engine mixes up its slots; point a run at the engine itself to tell "
                         "which, and fix what mixes them")
    if seen.broken:
        said = (f"the reply breaks its API's published contract ({seen.broken}): a chat "
                f"template and its parser decide what a reply says, never a field's type or an "
                f"empty id")
        if seen.streamed and ENDED_EARLY.search(seen.broken):
            return Diagnosis(STREAM, f"{said}; the stream ended before its end event",
                             "the stream ended early: a proxy or load balancer in front that "
                             "cuts streams short (an idle or total timeout), or the engine's "
                             "stream writer; raise the timeouts in front, and compare the "
                             "engine's own stream without what is in front")
        if seen.streamed:
            return Diagnosis(STREAM, f"{said}; it came as a stream",
                             "the stream path writes or rewrites the stream's events: a proxy in "
                             "front that rewrites or re-chunks streams, or the engine's stream "
                             "writer; compare the engine's own stream without what is in front, "
                             "and update the engine")
        return Diagnosis(GATEWAY, said,
                         "what wrote the reply is at fault, not the template: a gateway or "
                         "proxy in front that rewrites replies, or the engine's reply writer; "
                         "compare the engine's own reply without what is in front, pass replies "
                         "through unchanged, and update the engine")
    if seen.again is not None and seen.again.wrong is None:
        return Diagnosis(INTERMITTENT, f"the same request asked again came back right "
                                       f"({seen.again.said})", _intermittent())
    if len(seen.levels) >= 2:
        return _by_load(seen.levels, load)
    if seen.streamed and seen.twin is not None and seen.twin.wrong is None:
        return Diagnosis(STREAM, f"the same request unstreamed came back right "
                                 f"({seen.twin.said}); streamed it did not",
                         stream_assembly_fix(driver))
    if own is None:
        return _unknown(seen)
    cause, fix = own
    if cause == TEMPLATE and seen.render is not None and not seen.render.carries:
        return Diagnosis(TEMPLATE, f"the engine's own render: {seen.render.said}", fix)
    plain_wrong = not seen.streamed or (seen.twin is not None and seen.twin.wrong is not None)
    repeated = seen.again is not None and seen.again.wrong is not None
    if plain_wrong and repeated and seen.facts:
        shown = [f"the same request unstreamed fails alike ({seen.twin.wrong})"
                 if seen.streamed and seen.twin is not None
                 else "the unstreamed request fails", "again when asked once more",
                 f"and the engine's own facts agree with the reply ({seen.facts})"]
        if seen.render is not None:
            shown.append(f"its render: {seen.render.said}")
        return Diagnosis(cause, ", ".join(shown), fix)
    return _unknown(seen)


def _intermittent() -> str:
    return ("an intermittent fault: the same request is answered right at other times; run the "
            "check with more trials (expect.<claim>.trials) to measure its rate, and look for "
            "what differs between requests (a gateway's replicas, a load balancer's backends)")


def _by_load(levels: tuple[Counts, ...], load: Text | None) -> Diagnosis:
    """Whether the fault's rate grows with load: the solo level against the worst one."""
    alone, worst = levels[0], max(levels[1:], key=lambda c: c.faulty / (c.total or 1))
    p = fisher(alone.faulty, alone.total, worst.faulty, worst.total)
    counted = f"{alone}; {worst}; Fisher's exact test p={p:.2g}"
    if p < SIGNIFICANCE and worst.faulty / (worst.total or 1) > alone.faulty / (alone.total or 1) \
            and load is not None:
        return Diagnosis(LOAD, f"the rate grows with requests in flight: {counted}", load)
    return Diagnosis(INTERMITTENT, f"the counts cannot tie it to load: {counted}, the rates' "
                                   f"95% intervals overlap" if _overlap(alone, worst) else
                     f"the counts cannot tie it to load: {counted}",
                     "an intermittent fault, not tied to load: it comes at one request in "
                     "flight as it may at more; ask more requests (expect.load.requests) to "
                     "measure its rate, and look for what differs between requests (a "
                     "gateway's replicas, a load balancer's backends)")


def _overlap(a: Counts, b: Counts) -> bool:
    (a_low, a_high), (b_low, b_high) = wilson(a.faulty, a.total), wilson(b.faulty, b.total)
    return a_low <= b_high and b_low <= a_high


def _unknown(seen: Evidence) -> Diagnosis:
    return Diagnosis(UNKNOWN, _seen(seen),
                     "the evidence here does not tell where the fault lies: ask the engine "
                     "itself (not through anything in front) with the request shown, "
                     "unstreamed and streamed, and compare")


def _seen(seen: Evidence) -> str:
    parts = [f"seen: {seen.seen}"]
    if seen.twin is not None:
        parts.append(f"unstreamed: {seen.twin.wrong or 'right'} ({seen.twin.said})")
    if seen.again is not None:
        parts.append(f"asked again: {seen.again.wrong or 'right'} ({seen.again.said})")
    if seen.render is not None:
        parts.append(f"rendered: {seen.render.said}")
    parts.append(f"engine facts compared: {seen.facts}" if seen.facts
                 else "no engine facts to compare with the reply")
    return "; ".join(parts)


def wilson(k: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """The Wilson score interval of a rate seen k times in n."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def fisher(a: int, n: int, b: int, m: int) -> float:
    """Two-sided Fisher's exact test of a in n against b in m: the chance of tables at least as
    far from even as this one, with the margins held."""
    total, faulty = n + m, a + b
    if total == 0:
        return 1.0

    def chance(x: int) -> float:
        return math.exp(_log_choose(faulty, x) + _log_choose(total - faulty, n - x)
                        - _log_choose(total, n))

    seen = chance(a)
    low, high = max(0, faulty - m), min(faulty, n)
    return min(1.0, sum(c for x in range(low, high + 1)
                        if (c := chance(x)) <= seen * (1 + 1e-9)))


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def stream_assembly_fix(driver: Facts | None) -> Text:
    """What makes a stream add up to another answer than the plain reply."""
    return advise(
        driver, "the server's stream assembly is at fault (its streaming reasoning or "
                "tool-call parser, or a proxy that re-chunks the stream): update the engine, "
                "drop the tool-call parser where the endpoint serves no tools, and pass the "
                "stream through any proxy unchanged",
        {LlamaCppDriver: "llama.cpp's streaming parser (the chat format's partial parse) sent deltas "
                         "that do not add up to its whole answer: update llama.cpp, and pass the "
                         "stream through any proxy in front unchanged",
         VllmDriver: "vLLM's streaming path (the tool parser's or the reasoning parser's) sent "
                     "deltas that do not add up to its whole answer (with a tool parser on, vLLM once "
                     "sent each content delta of a request without tools twice: PR 46183): update "
                     "vLLM, or start it without --enable-auto-tool-choice / --tool-call-parser where "
                     "the endpoint serves no tools",
         SglangDriver: "SGLang's streaming parser (tool or reasoning) sent deltas that do not add up "
                       "to its whole answer: update SGLang, or drop --tool-call-parser where the "
                       "endpoint serves no tools"})
