"""spec_decode: speculative decoding (MTP or a draft model) really drafts, with a sane acceptance.

The probe scrapes /metrics, runs one generation long enough to draft, and scrapes again; the
judge reads the growth of the engine's counters (or SGLang's gauges, or, on llama.cpp builds
without the counters, the reply's own `timings`). Series names live in the drivers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank import metrics
from pytest_frank.chat import Reply, Request
from pytest_frank.checks import Check, Context
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.observation import Observation
from pytest_frank.verdict import fail

PROMPT = "Count from 1 to 300 in words, one number per line, and nothing else."


@dataclass(frozen=True)
class Options(ClaimOptions):
    min_acceptance: float | None = None
    max_acceptance: float | None = None
    max_tokens: int = 128  # enough drafting steps for a stable rate, cheap on any endpoint


@dataclass(kw_only=True)
class Drafting(Observation):
    before: metrics.Scrape
    reply: Reply | None = None
    after: metrics.Scrape | None = None
    max_tokens: int


@dataclass
class Measured:
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
            parts[0] += f" ({self.accepted:g} of {self.draft_tokens:g} draft tokens accepted)"
        if self.mean_length is not None:
            parts.append(f"mean acceptance length {self.mean_length:.2f}")
        if self.per_position:
            rates = ", ".join(f"{p}: {r:.2f}" for p, r in sorted(self.per_position.items()))
            parts.append(f"per position {{{rates}}}")
        return "; ".join(parts) + f" [source: {self.source}]"


def drafting(target) -> Drafting:
    """Scrape, generate, scrape, with nothing else in flight: the counters are server-wide."""
    max_tokens, path = target.endpoint.options("spec_decode").max_tokens, target.driver.metrics_path
    target.model_name()  # any probe it needs runs before the endpoint is held
    with target.exclusive():
        obs = Drafting(before=metrics.scrape(target, path), max_tokens=max_tokens)
        obs.reply = target.chat(Request(PROMPT, max_tokens, extra=target.driver.keep_generating))
        if obs.before.ok:
            obs.after = metrics.scrape(target, path)
    return obs


def judge(obs: Drafting, ctx: Context) -> None:
    """Drafts are made and accepted, at an acceptance inside the fleet's band."""
    driver, note = ctx.driver, ctx.note
    _require_metrics(obs, driver)
    _require_reply(obs.reply, driver)
    timings = driver.draft_counts(obs.reply.engine)
    measured = measure(obs, driver, timings)
    note(f"{measured.line()}; the generation asked for {obs.max_tokens} tokens")
    if measured.source.endswith("counters"):
        note("counters are server-wide: on a shared endpoint the delta may include other requests")
    if timings is not None and measured.source.endswith("counters"):
        note(f"cross-check, this reply's timings: draft_n {timings[0]}, draft_n_accepted "
             f"{timings[1]} (acceptance {_fmt(_ratio(timings[1], timings[0]))})")
    _judge_engaged(measured, obs, driver)
    _judge_band(measured, ctx.options, driver)


def measure(obs: Drafting, driver, timings) -> Measured:
    after, before = obs.after, obs.before
    names = after.names()
    for series in driver.spec_series:
        if series.counters and series.draft_tokens in names:
            return _from_counters(series, before, after)
        if not series.counters and series.rate_gauge in names:
            return Measured(series.source, rate=after.total(series.rate_gauge),
                            mean_length=after.total(series.length_gauge))
    if timings is not None:
        return Measured("the reply's timings.draft_n / draft_n_accepted (this build has no "
                        "spec_decode counters in /metrics)", timings[0], timings[1],
                        rate=_ratio(timings[1], timings[0]))
    wanted = ", ".join(s.draft_tokens or s.rate_gauge for s in driver.spec_series)
    fail(f"speculative decoding is not engaged: {after.exchange.url} has no {wanted} and the "
         f"reply carries no draft counts (not configured, or configured but not engaged)",
         driver.spec_engage_fix)


def _from_counters(series, before, after) -> Measured:
    tokens = metrics.delta(before, after, series.draft_tokens) or 0.0
    accepted = metrics.delta(before, after, series.accepted) or 0.0
    drafts = metrics.delta(before, after, series.drafts) if series.drafts else None
    per_pos = metrics.label_deltas(before, after, series.per_position, "position")
    m = Measured(series.source, tokens, accepted, drafts, rate=_ratio(accepted, tokens))
    if drafts:
        m.mean_length = 1 + accepted / drafts
        m.per_position = {int(p): v / drafts for p, v in per_pos.items() if p.isdigit()}
    return m


def _require_metrics(obs: Drafting, driver) -> None:
    scrape = obs.before if not obs.before.ok else obs.after
    if scrape is None or scrape.ok:
        return
    ex = scrape.exchange
    drafted = driver.draft_counts(obs.reply.engine) if obs.reply and obs.reply.ok else None
    seen = (f"; the reply's own timings show draft_n {drafted[0]}, accepted {drafted[1]}"
            if drafted else "")
    if ex.status in driver.metrics_off_statuses:
        fail(f"{ex.url} answered {ex.status}: metrics are switched off, so drafting cannot be "
             f"measured{seen}", driver.metrics_fix)
    fail(f"{ex.url} {scrape.problem}{seen}", driver.metrics_fix)


def _require_reply(reply: Reply, driver) -> None:
    if reply.ok:
        return
    url = reply.exchange.url if reply.exchange else "the endpoint"
    said = reply.error if reply.status is None else f"answered {reply.status}: {reply.error}"
    fail(f"the generation request to {url} failed: {said}", driver.known_fix(reply.error))


def _judge_engaged(m: Measured, obs: Drafting, driver) -> None:
    if m.draft_tokens is None:  # gauges
        if not m.rate or not m.mean_length:
            fail(f"speculative decoding is configured but not engaged: {m.line()} after a "
                 f"{obs.max_tokens}-token generation", driver.spec_engage_fix)
        return
    if not m.draft_tokens or m.drafts == 0:
        fail(f"speculative decoding is configured but not engaged: 0 draft tokens over a "
             f"{obs.max_tokens}-token generation [source: {m.source}]", driver.spec_engage_fix)
    if not m.accepted:
        fail(f"speculative decoding drafts but nothing is accepted: {m.line()}",
             driver.spec_low_fix)


def _judge_band(m: Measured, options: Options, driver) -> None:
    low, high = options.min_acceptance, options.max_acceptance
    if low is not None and m.rate < low:
        fail(f"acceptance {m.rate:.2f} is below min_acceptance {low:g}: {m.line()}",
             driver.spec_low_fix)
    if high is not None and m.rate > high:
        fail(f"acceptance {m.rate:.2f} is above max_acceptance {high:g}: {m.line()}",
             driver.spec_high_fix)


def _ratio(num, den) -> float | None:
    return num / den if den else None


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


SPEC_DECODE = Check("test_spec_decode", "spec_decode", drafting, judge)
