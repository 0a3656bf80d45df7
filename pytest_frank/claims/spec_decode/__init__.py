"""spec_decode: speculative decoding (MTP or a draft model) really drafts, with a sane acceptance.

The probe scrapes /metrics, runs one generation long enough to draft, and scrapes again; the
judge reads the growth of the engine's counters (or SGLang's gauges, or, on llama.cpp builds
without the counters, the reply's own `timings`). Series names live in the drivers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pytest_frank.base.figures import COUNT, number
from pytest_frank.claims import Claim, option, slots
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context, Note
from pytest_frank.drivers import Driver, LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.protocols import Facts, Parts
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Phrase, Text, fail, inconclusive
from pytest_frank.runtime.chat import Reply, Request, send
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.runtime.target import first_and_alone
from pytest_frank.transport import metrics

if TYPE_CHECKING:
    from pytest_frank.runtime.target import Target


class Drafts(Facts, Parts, Protocol):
    """What the acceptance is measured and advised from: the drafting counters and the facts a
    fix names."""


PROMPT = "Count from 1 to 300 in words, one number per line, and nothing else."


@dataclass(frozen=True)
class Options(ClaimOptions):
    min_acceptance: float | None = option(None, minimum=0, maximum=1, about=(
        "Lowest acceptable rate, 0-1 (healthy MTP: about 0.6)."))
    max_acceptance: float | None = option(None, minimum=0, maximum=1, about=(
        "Highest believable rate, 0-1 (about 0.95; near 1 means the draft is the model itself)."))
    # per generation: enough drafting steps, cheap on any endpoint
    max_tokens: int = option(128, "The longest probe generation (default 128).", minimum=8)
    min_draft_tokens: int = option(64, minimum=1, about=(
        "Fewest draft tokens a rate is judged on (default 64); fewer is \"inconclusive (N draft "
        "tokens)\", a skip, not a rate from a handful."))
    reference: str | None = option(None, minLength=1, about=(
        "a non-drafting twin in the fleet (its endpoint name): test_spec_decode_lossless compares "
        "the greedy answers"))


CLAIM = Claim("spec_decode",
              "speculative decoding is engaged with a sane acceptance rate", Options,
              order=90,
              tests=("test_spec_decode", "test_spec_decode_lossless"))


ASKS = 4  # generations at most, to gather min_draft_tokens from a model that answers briefly
COUNTER_LAG = 1.0  # seconds to wait once for counters that trail the reply
# Counted draft tokens past the probe's own that still read as its own window: what a counter
# read a moment early or late may hold.
OTHERS_SLACK, OTHERS_SHARE = 8, 0.1
OWN = "the replies' own timings.draft_n / draft_n_accepted"


@dataclass(kw_only=True)
class Drafting(Observation):
    before: metrics.Scrape
    replies: list[Reply] = field(default_factory=list)
    after: metrics.Scrape | None = None
    max_tokens: int
    configured: bool | None = None  # what the engine says of its own drafting (/slots, ...)

    @property
    def reply(self) -> Reply | None:
        return self.replies[-1] if self.replies else None

    @property
    def latest(self) -> metrics.Scrape:
        """The last scrape: after the replies, or before them where none followed."""
        return self.after if self.after is not None else self.before


@dataclass
class Acceptance:
    """How many draft tokens were proposed and accepted in the probe's window, and from where."""

    source: str
    draft_tokens: float | None = None
    accepted: float | None = None
    drafts: float | None = None
    rate: float | None = None
    mean_length: float | None = None
    per_position: dict[int, float] = field(default_factory=dict)

    def line(self) -> str:
        parts = [f"acceptance {_fmt(self.rate)}"]
        if self.draft_tokens is not None:
            accepted, drafted = number(self.accepted or 0, COUNT), number(self.draft_tokens, COUNT)
            parts[0] += f" ({accepted} of {drafted} draft tokens accepted)"
        if self.mean_length is not None:
            parts.append(f"mean acceptance length {self.mean_length:.2f}")
        if self.per_position:
            rates = ", ".join(f"{p}: {r:.2f}" for p, r in sorted(self.per_position.items()))
            parts.append(f"per position {{{rates}}}")
        return "; ".join(parts) + f" [source: {self.source}]"


@first_and_alone
def drafting(target: Target) -> Drafting:
    """Scrape, generate, scrape, with nothing else in flight (the counters are server-wide),
    and generate again while fewer than min_draft_tokens were drafted. The model writes of its
    own accord: forcing it past its end (ignore_eos) would make a perfect draft look broken, as
    the draft keeps proposing the end token the target may not take."""
    opts, driver = Options.on(target.endpoint), target.driver
    target.model_name()  # any probe it needs runs before the endpoint is held
    shape = target.need(slots.shape)
    with target.exclusive():
        obs = Drafting(before=metrics.scrape(target, driver.metrics.path),
                       max_tokens=opts.max_tokens,
                       configured=None if isinstance(shape, Unseen) or not shape.seen
                       else driver.metrics.speculative_live(shape.payloads))
        for _ in range(ASKS):
            reply = send(target, Request(PROMPT, opts.max_tokens))
            obs.replies.append(reply)
            if obs.before.ok:
                obs.after = metrics.scrape(target, driver.metrics.path)
            drafted = _drafted(obs, driver)
            if drafted == 0 and reply.ok and obs.before.ok:
                # Counters may trail the reply (vLLM publishes them from its engine loop).
                time.sleep(COUNTER_LAG)
                obs.after = metrics.scrape(target, driver.metrics.path)
                drafted = _drafted(obs, driver)
            if not reply.ok or not drafted or drafted >= opts.min_draft_tokens:
                break  # failed, not drafting at all (asking again changes nothing), or enough
    return obs


def _drafted(obs: Drafting, driver: Parts) -> float | None:
    """Draft tokens so far, from the counters or the replies' own timings; None if unknown.
    Gauges count no tokens: the tokens written stand in, so a brief answer is asked again."""
    if obs.after is not None and obs.after.ok:
        for series in driver.metrics.spec_series:
            if series.counters and series.draft_tokens in obs.after.names():
                return metrics.delta(obs.before, obs.after, series.draft_tokens)
            if not series.counters and series.rate_gauge in obs.after.names():
                return _written(obs)
    counts = [driver.metrics.draft_counts(r.engine) for r in obs.replies]
    return sum(c[0] for c in counts if c) if any(counts) else None


def judge(obs: Drafting, ctx: Context[Options]) -> None:
    """Drafts are made and accepted, at an acceptance inside the fleet's band."""
    driver, note = ctx.driver, ctx.note
    _require_metrics(obs, driver)
    for reply in obs.replies:
        _require_reply(reply, driver)
    timings = _timings(obs, driver)
    measured = measure(obs, driver, timings)
    asked = (f"{len(obs.replies)} generation(s) of up to {obs.max_tokens} tokens, "
             f"{_written(obs)} written")
    note(f"{measured.line()}; {asked}")
    if measured.rate is not None:
        ctx.figure("acceptance", measured.rate, "", *_band(ctx.options))
    if measured.source.endswith("counters"):
        note("counters are server-wide: on a shared endpoint the delta may include other requests")
    if timings is not None and measured.source.endswith("counters"):
        note(f"cross-check, this reply's timings: draft_n {timings[0]}, draft_n_accepted "
             f"{timings[1]} (acceptance {_fmt(_ratio(timings[1], timings[0]))})")
        measured = _own_window(measured, timings, note)
        if measured.source == OWN:
            ctx.figure("acceptance", measured.rate or 0.0, "", *_band(ctx.options))
    least = ctx.options.min_draft_tokens
    if measured.draft_tokens is None:
        _judge_gauges(measured, obs, driver, least, asked)
    _judge_engaged(measured, obs, driver)
    if measured.draft_tokens is not None and measured.draft_tokens < least:
        inconclusive(f"inconclusive ({number(measured.draft_tokens, COUNT)} draft tokens, fewer than "
                     f"min_draft_tokens {least}, over {asked}): {measured.line()}")
    _judge_band(measured, ctx.options, driver)


def _own_window(m: Acceptance, own: tuple[int, int], note: Note) -> Acceptance:
    """The counters' growth against what the probe's own replies drafted. Where other requests
    drafted too, the counters' rate is a mix: the replies' own counts are judged instead; where
    others drafted as much as the probe or more, nothing is judged (inconclusive, both counts)."""
    seen, drafted = m.draft_tokens or 0.0, own[0]
    others = seen - drafted
    if others <= max(OTHERS_SLACK, OTHERS_SHARE * drafted):
        return m
    counted = (f"the counters saw {number(seen, COUNT)} draft tokens over the probe's window, "
               f"{number(others, COUNT)} more than its own replies drafted ({drafted}, "
               f"timings.draft_n)")
    mine = Acceptance(OWN, drafted, own[1], rate=_ratio(own[1], drafted))
    if others >= drafted:
        inconclusive(f"inconclusive ({counted}: other requests drafted at least as much in the "
                     f"same window, so the counters' rate is not this endpoint's own): "
                     f"{m.line()}; the probe's own replies: {mine.line()}")
    note(f"{counted}: other requests drafted beside the probe, so its own replies are judged, "
         f"not the counters' {m.line()}")
    return mine


def _written(obs: Drafting) -> int:
    return sum(r.generated for r in obs.replies)


def _judge_gauges(m: Acceptance, obs: Drafting, driver: Parts, least: int, asked: str) -> None:
    """Gauges hold the engine's latest logging window, not this probe's: too little written, or
    a window that was not refreshed, says nothing about the draft."""
    if _written(obs) < least:
        inconclusive(f"inconclusive ({_written(obs)} tokens written, fewer than min_draft_tokens "
                     f"{least}, over {asked}; the gauges count no draft tokens): {m.line()}")
    series = next(s for s in driver.metrics.spec_series
                  if not s.counters and s.rate_gauge in obs.latest.names())
    before = (obs.before.total(series.rate_gauge), obs.before.total(series.length_gauge))
    if m.rate and before == (m.rate, m.mean_length):
        inconclusive(f"inconclusive (the gauges did not move over {asked}: they still hold an earlier "
                     f"window, not this probe's): {m.line()}")


def _timings(obs: Drafting, driver: Parts) -> tuple[int, int] | None:
    """The replies' own draft counts, summed; None where the engine reports none."""
    counts = [c for c in (driver.metrics.draft_counts(r.engine) for r in obs.replies) if c]
    return (sum(c[0] for c in counts), sum(c[1] for c in counts)) if counts else None


def measure(obs: Drafting, driver: Drafts, timings: tuple[int, int] | None) -> Acceptance:
    after, before = obs.latest, obs.before
    names = after.names()
    for series in driver.metrics.spec_series:
        if series.counters and series.draft_tokens in names:
            return _from_counters(series, before, after)
        if not series.counters and series.rate_gauge in names:
            return Acceptance(series.source, rate=after.total(series.rate_gauge),
                            mean_length=after.total(series.length_gauge))
    if timings is not None:
        return Acceptance("the reply's timings.draft_n / draft_n_accepted (this build has no "
                        "spec_decode counters in /metrics)", timings[0], timings[1],
                        rate=_ratio(timings[1], timings[0]))
    wanted = ", ".join(s.draft_tokens or s.rate_gauge for s in driver.metrics.spec_series)
    seen = f"{after.exchange.url} has no {wanted} and the replies carry no draft counts"
    if obs.configured is False:
        fail(f"speculative decoding is off: {driver.metrics.speculative_source} is false and {seen}",
             spec_engage_fix(driver))
    if obs.configured:
        fail(f"speculative decoding is configured ({driver.metrics.speculative_source}) but not "
             f"engaged: {seen}", spec_engage_fix(driver))
    fail(f"speculative decoding is not engaged: {seen} (not configured, or configured but not "
         f"engaged)", spec_engage_fix(driver))


def _from_counters(series: metrics.SpecSeries, before: metrics.Scrape,
                   after: metrics.Scrape) -> Acceptance:
    # A series the engine does not name counts as missing from the scrape: nothing grew.
    tokens = (metrics.delta(before, after, series.draft_tokens) if series.draft_tokens else None) or 0.0
    accepted = (metrics.delta(before, after, series.accepted) if series.accepted else None) or 0.0
    drafts = metrics.delta(before, after, series.drafts) if series.drafts else None
    per_pos = (metrics.label_deltas(before, after, series.per_position, "position")
               if series.per_position else {})
    m = Acceptance(series.source, tokens, accepted, drafts, rate=_ratio(accepted, tokens))
    if drafts:
        m.mean_length = 1 + accepted / drafts
        # isdigit() also takes "²", which int() refuses; a position is a few decimal digits.
        m.per_position = {int(p): v / drafts for p, v in per_pos.items()
                          if p.isdecimal() and len(p) < 10}
    return m


def _require_metrics(obs: Drafting, driver: Driver) -> None:
    scrape = obs.before if not obs.before.ok else obs.after
    if scrape is None or scrape.ok:
        return
    ex = scrape.exchange
    drafted = driver.metrics.draft_counts(obs.reply.engine) if obs.reply and obs.reply.ok else None
    seen = (f"; the reply's own timings show draft_n {drafted[0]}, accepted {drafted[1]}"
            if drafted else "")
    if ex.status in driver.metrics.off_statuses:
        fail(f"{ex.url} answered {ex.status}: metrics are switched off, so drafting cannot be "
             f"measured{seen}", metrics_fix(driver))
    fail(f"{ex.url} {scrape.problem}{seen}", metrics_fix(driver))


def _require_reply(reply: Reply, driver: Driver) -> None:
    if reply.ok:
        return
    fail(f"the generation request to {reply.url} failed: {reply.problem_line}",
         reply.fix or known_fix(driver, reply.problem, reply.status))


def _judge_engaged(m: Acceptance, obs: Drafting, driver: Drafts) -> None:
    if m.draft_tokens is None:  # gauges
        if not m.rate or not m.mean_length:
            fail(f"speculative decoding is configured but not engaged: {m.line()} after a "
                 f"{obs.max_tokens}-token generation", spec_engage_fix(driver))
        return
    if not m.draft_tokens or m.drafts == 0:
        if obs.configured is False:
            fail(f"speculative decoding is off: {driver.metrics.speculative_source} is false, 0 draft "
                 f"tokens over {len(obs.replies)} generation(s) [source: {m.source}]",
                 spec_engage_fix(driver))
        fail(f"speculative decoding is configured but not engaged: 0 draft tokens over "
             f"{len(obs.replies)} generation(s) [source: {m.source}]", spec_engage_fix(driver))
    if not m.accepted:
        fail(f"speculative decoding drafts but nothing is accepted: {m.line()}",
             spec_low_fix(driver))


def _band(options: Options) -> tuple[float | None, float | None]:
    """The acceptance band fleet.yaml set: what the figure is judged against."""
    return options.min_acceptance, options.max_acceptance


def _judge_band(m: Acceptance, options: Options, driver: Facts) -> None:
    low, high = options.min_acceptance, options.max_acceptance
    if m.rate is None:
        return  # nothing accepted or drafted to rate: _judge_engaged has said so
    if low is not None and m.rate < low:
        fail(f"acceptance {m.rate:.2f} is below min_acceptance {low:g}: {m.line()}",
             spec_low_fix(driver))
    if high is not None and m.rate > high:
        fail(f"acceptance {m.rate:.2f} is above max_acceptance {high:g}: {m.line()}",
             spec_high_fix(driver))


def _ratio(num: float, den: float | None) -> float | None:
    return num / den if den else None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


SPEC_DECODE = Check("test_spec_decode", "spec_decode", drafting, judge)


# -- lossless: drafting at temperature 0 changes no answer ---------------------------------
LOSSLESS_TOKENS = 64


@dataclass(kw_only=True)
class Twins(Observation):
    """The greedy answer with drafting, and the non-drafting twin's to the same request."""
    drafted: Reply | None = None
    reference: Reply | None = None


def greedy(target: Target) -> Twins:
    """The lossless prompt answered greedy (the fleet's sampling), thinking off."""
    req = Request(PROMPT, LOSSLESS_TOKENS, extra=target.driver.wire.thinking_off())
    return Twins(drafted=send(target, req))


def lossless(target: Target) -> Twins:
    name = Options.on(target.endpoint).reference
    twin = target.peer(name)
    if twin is None:
        return Twins(failure=f"expect.spec_decode.reference names {name!r}, which is no "
                             f"endpoint of this fleet", fix="name a non-drafting twin's entry")
    mine, theirs = target.need(greedy), twin.need(greedy)
    for side, obs in ((target.name, mine), (name, theirs)):
        if isinstance(obs, Unseen):
            return Twins(failure=f"{side}: {obs.failure}")
    assert isinstance(mine, Twins) and isinstance(theirs, Twins)
    return Twins(drafted=mine.drafted, reference=theirs.drafted)


def judge_lossless(obs: Twins, ctx: Context[Options]) -> None:
    """At temperature 0 the drafted answer equals the non-drafting twin's, token for token:
    speculative decoding may only make it faster."""
    drafted, twin = obs.drafted, obs.reference
    name = ctx.options.reference
    if drafted is None or twin is None:
        fail(f"no greedy answers came to compare with {name}'s")
    for side, r in ((ctx.endpoint.name, drafted), (name, twin)):
        if not r.ok:
            fail(f"{side} got no greedy answer to compare: {r.problem_line}")
    mine, theirs = _said(drafted), _said(twin)
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b),
              None if len(mine) == len(theirs) else min(len(mine), len(theirs)))
    if at is not None:
        fail(f"the greedy answer with drafting differs from {name}'s without it at character "
             f"{at}: drafted {_from(mine, at)!r}, {name} {_from(theirs, at)!r}",
             "the draft or MTP patch changes outputs: try without it (drafting at temperature "
             "0 must be lossless); check that both serve the same model and template")
    ctx.note(f"the same {len(mine)} characters as {name} ({drafted.generated} tokens)")


def _said(r: Reply) -> str:
    return r.reasoning + r.content


def _from(text: str, at: int, width: int = 60) -> str:
    cut = text[at:at + width]
    return cut + ("..." if len(text) > at + width else "")


def _referenced(opts: Options) -> bool:
    """Asked where a non-drafting twin is named: no engine here turns drafting off per request
    (llama.cpp accepts speculative.n_max 0 and still drafts)."""
    return bool(opts.reference)


LOSSLESS = Check("test_spec_decode_lossless", "spec_decode", lossless, judge_lossless,
                 asked=_referenced,
                 when="with `reference`")


# -- advice: drafting and /metrics by engine, named by the driver's flags -----------------------
def metrics_fix(driver: Facts) -> Text:
    return advise(
        driver, "turn on the server's Prometheus /metrics endpoint",
        {LlamaCppDriver: lambda d: Phrase(d.start or "", d.flags["metrics"],
                                          " (and send the API key, if one is set)"),
         VllmDriver: "let /metrics through to the vLLM server (it is on by default)",
         SglangDriver: lambda d: f"{d.start}--enable-metrics"})


def spec_engage_fix(driver: Facts) -> Text:
    return advise(
        driver, "turn speculative decoding on in the server's configuration",
        {LlamaCppDriver: lambda d: Phrase(d.start or "", d.flags["spec_type"], ": draft-mtp for an -mtp "
                                          "GGUF (no ", d.flags["draft_model"], "), draft-simple with ",
                                          d.flags["draft_model"]("FILE"), "; a draft model without ",
                                          d.flags["spec_type"], " is loaded but never used (/slots: "
                                          "speculative false)"),
         VllmDriver: "pass --speculative-config, e.g. '{\"method\": \"mtp\", "
                     "\"num_speculative_tokens\": 2}'",
         SglangDriver: lambda d: f"{d.start}--speculative-algorithm (EAGLE, EAGLE3, NEXTN) and "
                                 "--speculative-num-draft-tokens"})


def spec_low_fix(driver: Facts) -> Text:
    return advise(
        driver, "the draft does not fit the served model (a head or draft model from another "
                "quant or finetune, another tokenizer), or drafts run too long; check the draft "
                "file and lower the draft length",
        {LlamaCppDriver: lambda d: Phrase("the draft does not fit the model (an MTP head or draft from "
                                          "another quant or finetune); lower ", d.flags["draft_max"],
                                          " or raise --spec-draft-p-min"),
         VllmDriver: "the draft does not fit the model, or num_speculative_tokens is too high for it; "
                     "lower num_speculative_tokens in --speculative-config",
         SglangDriver: "the draft does not fit the model; lower --speculative-num-steps / "
                       "--speculative-num-draft-tokens"})


def spec_high_fix(driver: Facts) -> Text:
    return advise(
        driver, "acceptance this close to 1 means the draft is the model itself: point the "
                "draft at a real draft/MTP head, not at the served weights",
        {LlamaCppDriver: lambda d: Phrase("acceptance this close to 1 means the draft is the model "
                                          "itself, loaded a second time: for an -mtp GGUF drop ",
                                          d.flags["draft_model"], " and use ",
                                          d.flags["spec_type"]("draft-mtp"), " alone; for a model "
                                          "without an MTP head, point ", d.flags["draft_model"],
                                          " at a small draft of the same family"),
         VllmDriver: "acceptance this close to 1 means the draft is the model itself: check the draft "
                     "model in --speculative-config"})
