"""reasoning_effort, the trend: a higher level thinks longer. Each distinct value the fleet's map
sends is asked once with the same question (a full answer per level: asked only with
`expect.reasoning_effort.trend: true`), least to most, and the thinking is measured in tokens
(the server's reasoning count where it gives one, else the reply's tokens shared by length). A
level cut while thinking thought at least its budget. The tolerance is a sampling model's: the
highest level must think a quarter longer than the lowest, and no level may think less than half
of what a lower one did; a server whose levels all think alike (the effort dropped on the way, or
a template that never reads it) fails."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.reasoning_effort.effort_map import LEVELS
from pytest_frank.claims.reasoning_effort import Options, map_fix, supported, template_message
from pytest_frank.claims.replies import one_line, require_answer
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import fail, inconclusive
from pytest_frank.runtime.chat import Reply, Request, send
from pytest_frank.runtime.target import Target

PROMPT = ("How many of the whole numbers from 1 to 30 are prime? Think it through, then answer "
          "with the number.")
RISE = 1.25  # the highest level thinks at least this much longer than the lowest (and 1 token)
DROP = 0.5  # a level thinking less than this share of a lower level's thinking is inverted


@dataclass(kw_only=True)
class Trend(Observation):
    levels: list[tuple[str, str, Reply]]  # (client level, value sent, answer), least to most
    max_tokens: int
    reads: tuple[bool, str] | None = None  # whether the served template reads the effort


def ordered(mapping: dict[str, str]) -> list[tuple[str, str]]:
    """(lowest client level sending it, value) for each distinct value, least to most."""
    rank = {lv: i for i, lv in enumerate(LEVELS)}
    seen: dict[str, str] = {}
    for lv in sorted(mapping, key=lambda lv: rank.get(lv, len(LEVELS))):
        seen.setdefault(mapping[lv], lv)
    return [(lv, value) for value, lv in seen.items()]


def trend(target: Target) -> Trend:
    """Every distinct mapped value asked once with the same question, least to most."""
    from pytest_frank.runtime.probes import slot_shape

    opts, driver = Options.on(target.endpoint), target.driver
    levels = [(lv, value, send(target, Request(PROMPT, opts.max_tokens,
                                               extra=driver.wire.effort(value))))
              for lv, value in ordered(opts.map)]
    found = Trend(levels=levels, max_tokens=opts.max_tokens)
    shape = target.need(slot_shape)
    if not isinstance(shape, Unseen) and shape.failure is None:
        found.reads = driver.template.caps(shape.payloads).get("reasoning_effort")
    return found


def thought(reply: Reply) -> int:
    return reply.thinking_tokens


def judge(found: Trend, ctx: Context[Options]) -> None:
    """Higher mapped levels think longer: the highest a quarter longer than the lowest, none
    less than half of a lower one (a sampling model's spread)."""
    if len(found.levels) < 2:
        inconclusive("the reasoning_effort map sends one value for every level: there is no "
                     "trend to measure")
    for lv, value, reply in found.levels:
        _require_level(lv, value, reply, ctx)
        ctx.note(f"{lv} (sent as {value!r}): {_said(reply)}")
    (lo, lo_value, low), (hi, hi_value, high) = found.levels[0], found.levels[-1]
    if low.thinking_cut and high.thinking_cut:
        inconclusive(f"both {lo} and {hi} were cut while thinking at max_tokens "
                     f"{found.max_tokens}: raise expect.reasoning_effort.max_tokens to see "
                     f"where each ends")
    if thought(high) < thought(low) * RISE + 1:
        if high.thinking_cut:
            inconclusive(f"{hi} was cut while thinking at max_tokens {found.max_tokens}, "
                         f"{lo} thought {_said(low)}: raise expect.reasoning_effort.max_tokens "
                         f"to see where {hi} ends")
        fail(f"reasoning_effort has no effect: {lo} (sent as {lo_value!r}) thought "
             f"{_said(low)}, {hi} (sent as {hi_value!r}) {_said(high)}; the highest level must "
             f"think at least {RISE:g}x as long as the lowest", _no_effect_fix(found))
    for (a, _, ra), (b, _, rb) in zip(found.levels, found.levels[1:]):
        if not rb.thinking_cut and thought(rb) < thought(ra) * DROP:
            fail(f"reasoning_effort is not monotone: {b} thought {_said(rb)}, less than half "
                 f"of {a}'s {_said(ra)}", "check the client's effort map: a level mapped to a "
                                          "value the model reads as less effort")


def _require_level(lv: str, value: str, reply: Reply, ctx: Context[Options]) -> None:
    if reply.problem and reply.status is not None and reply.status >= 400:
        said = template_message(reply.problem)
        if said:
            fail(f"reasoning_effort {lv!r} (sent as {value!r}) answered {reply.status}: the chat "
                 f"template rejects it: {said}", map_fix([lv], supported(reply.problem)))
    require_answer(reply, ctx.driver, f"reasoning_effort {lv!r} (sent as {value!r})")


def _said(reply: Reply) -> str:
    n = thought(reply)
    if reply.thinking_cut:
        return f"at least {n} tokens of thinking (cut at max_tokens {reply.max_tokens})"
    return f"{n} tokens of thinking" + ("" if reply.reasoning.strip() else
                                        f" (answered {one_line(reply.content, 40)!r} at once)")


def _no_effect_fix(found: Trend) -> str:
    forward = ("a proxy or gateway in front must forward the effort as sent (reasoning_effort, "
               "reasoning.effort, output_config.effort, chat_template_kwargs)")
    if found.reads is None:
        return f"{forward}; the served template must read it"
    reads, where = found.reads
    if not reads:
        return (f"the served template never reads the effort ({where}): only what the engine "
                f"maps itself (llama.cpp: `none` switches thinking off) can differ; map the "
                f"levels to values the model distinguishes, or serve a template that reads "
                f"reasoning_effort; and {forward}")
    return (f"the served template reads the effort ({where}), so it was lost before it or the "
            f"model ignores it: {forward}")


TREND = Check("test_reasoning_effort_trend", "reasoning_effort", trend, judge,
              asked=lambda opts: opts.trend,
              when="with `trend: true`")
