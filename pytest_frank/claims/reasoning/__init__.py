"""reasoning: a chat reply carries an answer AND separate reasoning, plain and streamed, and
switching thinking off really switches it off. The answer is judged, so a reply cut while thinking
is asked again with a larger budget (chat.think_through); how long the model thought becomes the
`thinking_tokens` figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import (
    one_line,
    reasoning_parser_fix,
    require_answer,
    require_no_think_tags,
    require_stream_agrees,
    require_thinking_ended,
    thinking_spent,
)
from pytest_frank.claims.tools import forced_tools_fix
from pytest_frank.drivers import AnthropicDriver, LlamaCppDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Phrase, Text, fail
from pytest_frank.runtime.chat import Reply, Request, send, think_through
from pytest_frank.runtime.probes import slot_shape
from pytest_frank.runtime.target import Target

PROMPT = "Say hello in one short sentence."


@dataclass(frozen=True)
class Options(ClaimOptions):
    field: str | None = option(None, minLength=1, about=(
        "The response field that must carry reasoning (the driver reads `reasoning_content` then "
        "`reasoning`; vLLM the other way round; Anthropic `thinking` blocks). Default: the "
        "driver's."))
    max_tokens: int = option(512, minimum=1, about=(
        "The first budget per request; thinking counts against it. Default: 512."))
    stream: bool = option(True, "False skips `test_reasoning_streamed`. Default: true.")
    thinking_off: bool = option(True, about=(
        "False skips `test_reasoning_off` (a model that cannot switch thinking off). Default: "
        "true."))


CLAIM = Claim("reasoning", "chat returns content and reasoning", Options, order=40,
              tests=("test_reasoning", "test_reasoning_streamed", "test_reasoning_off"))


@dataclass(kw_only=True)
class Thought(Observation):
    mode: str  # "on" (the endpoint's default), "streamed", "off" (thinking switched off)
    reply: Reply
    max_tokens: int
    plain: Thought | None = None  # beside a streamed one: the plain reply, to compare fields
    # Read where a reply came without reasoning, to name the cause: whether the served template
    # thinks (the driver's reading, and where it read it), and the other path's reply to the
    # same prompt (beside a plain one: the streamed reply).
    thinks: tuple[bool, str] | None = None
    twin: Thought | None = None


def _ask(target: Target, mode: str) -> Thought:
    opts = Options.on(target.endpoint)
    req = Request(PROMPT, opts.max_tokens, stream=mode == "streamed", think=mode != "off",
                  extra=target.driver.wire.thinking_off() if mode == "off" else {},
                  reasoning_field=opts.field)
    # Thinking off must answer at once: a second, larger ask would only hide that it did not.
    reply = send(target, req) if mode == "off" else think_through(target, req)
    return Thought(mode=mode, reply=reply, max_tokens=opts.max_tokens)


def _thinks(target: Target) -> tuple[bool, str] | None:
    shape = target.need(slot_shape)
    return None if isinstance(shape, Unseen) else target.driver.template.thinks(shape.payloads)


def _streamed_alone(target: Target) -> Thought:
    return _ask(target, "streamed")


def _unthinking(thought: Thought) -> bool:
    return thought.reply.ok and not thought.reply.calls and not thought.reply.reasoning.strip()


def answer(target: Target) -> Thought:
    thought = _ask(target, "on")
    if _unthinking(thought):  # the facts that name the cause: the template, the stream
        thought.thinks = _thinks(target)
        twin = target.need(_streamed_alone)
        thought.twin = None if isinstance(twin, Unseen) else twin
    return thought


def streamed(target: Target) -> Thought:
    alone = target.need(_streamed_alone)
    if isinstance(alone, Unseen):
        return Thought(mode="streamed", reply=Reply(problem=alone.failure), max_tokens=0)
    thought = Thought(mode="streamed", reply=alone.reply, max_tokens=alone.max_tokens,
                      exchanges=list(alone.exchanges))
    plain = target.need(answer)
    thought.plain = None if isinstance(plain, Unseen) else plain
    if _unthinking(thought):
        thought.thinks = _thinks(target)
    return thought


def off(target: Target) -> Thought:
    return _ask(target, "off")


def judge(thought: Thought, ctx: Context[Options]) -> None:
    """Thinking on (plain or streamed): non-empty content and non-empty reasoning."""
    r, expected = thought.reply, ctx.options.field
    how = "streamed chat" if r.streamed else "chat"
    _answer(thought, ctx.driver, how)
    thinking_spent([r], ctx, figure=True)
    if expected and r.reasoning_field and r.reasoning_field != expected:
        fail(f"{how} reasoning arrived in `{r.reasoning_field}`, not in `{expected}` where "
             f"fleet.yaml expects it; clients reading `{expected}` see none",
             "set expect.reasoning.field to where this server puts it, or fix the client")
    if not r.reasoning.strip():
        _no_reasoning(thought, ctx, how)


def _no_reasoning(thought: Thought, ctx: Context[Options], how: str) -> None:
    """No reasoning: named by what the server showed, the other path's reply to the same
    prompt first (one path losing the field), then whether the template thinks at all."""
    r, driver, expected = thought.reply, ctx.driver, ctx.options.field
    where = expected or " / ".join(f"`{f}`" for f in driver.wire.reasoning_fields)
    said = f"{how} answered {one_line(r.content, 80)!r} with no reasoning ({where} empty or absent)"
    other = thought.plain if r.streamed else thought.twin
    if other is not None and other.reply.ok and other.reply.reasoning.strip():
        field, lost = other.reply.reasoning_field or "its reasoning field", (
            ("streamed", "plain (non-streamed)") if r.streamed else ("plain (non-streamed)",
                                                                      "streamed"))
        fail(f"{said}, while the {lost[1]} answer to the same prompt carried it in `{field}`: "
             f"the template thinks and the engine splits the thinking out; the {lost[0]} path "
             f"loses the field (a proxy in front that rebuilds {lost[0]} answers?)",
             f"make the proxy or gateway pass `{field}` through on {lost[0]} answers, as it "
             f"does on {lost[1]} ones")
    if thought.thinks is not None and not thought.thinks[0]:
        fail(f"{said}: the served chat template has no thinking ({thought.thinks[1]}), so this "
             f"model answers without thinking here", no_thinking_template_fix(driver))
    if thought.thinks is not None:
        fail(f"{said}, although the served chat template thinks ({thought.thinks[1]})",
             thinking_switched_off_fix(driver))
    fail(f"{said} {no_reasoning_said(driver)}", thinking_missing_fix(driver))


def judge_streamed(thought: Thought, ctx: Context[Options]) -> None:
    """Streamed: as plain, the reassembled stream carries reasoning where the plain reply
    does, and at temperature 0 it is the plain reply: the same reasoning and content."""
    judge(thought, ctx)
    s, p = thought.reply, thought.plain.reply if thought.plain else None
    if p is not None and p.reasoning_field and s.reasoning_field != p.reasoning_field:
        fail(f"the stream carries reasoning in `{s.reasoning_field}` but the plain reply in "
             f"`{p.reasoning_field}`: a client reading one misses the other",
             "a proxy or engine that re-maps fields must do so for stream deltas too")
    # A request without tools, plain and streamed: the pair that shows a stream assembly
    # sending deltas twice (vLLM's tool parser did, PR 46183). Compared where the plain reply
    # is whole (test_reasoning names a plain path that loses a field), so a difference is the
    # stream's.
    if p is not None and p.reasoning.strip() and p.content.strip():
        require_stream_agrees(s, p, ctx, "chat without tools")


def judge_off(thought: Thought, ctx: Context[Options]) -> None:
    """Thinking switched off: an answer, and no reasoning."""
    r, how = thought.reply, "chat with thinking off"
    require_answer(r, ctx.driver, how)
    if r.reasoning.strip():
        fail(f"reasoning present although thinking was switched off (enable_thinking: false): "
             f"{one_line(r.reasoning, 80)!r} in `{r.reasoning_field}`", THINKING_OFF_FIX)
    _answer(thought, ctx.driver, how)


def _answer(thought: Thought, driver: Driver, how: str) -> None:
    r = thought.reply
    require_answer(r, driver, how)
    if r.calls or r.tool_finish:  # no tools were sent: nothing but a forcing can make a call
        shown = ", ".join(str(c.name) for c in r.calls) or f"finish_reason {r.finish!r}"
        fail(f"{how} without tools came back as a tool call ({shown}): every request is "
             f"forced into tool-call output, so no answer is left to judge", forced_tools_fix(driver))
    require_thinking_ended(r, driver, "expect.reasoning.max_tokens")
    require_no_think_tags(r, driver)
    if not r.content.strip():
        landed = " (the answer landed in reasoning)" if r.reasoning.strip() else ""
        fail(f"{how} returned empty content{landed}, finish_reason {r.finish!r}",
             reasoning_parser_fix(driver) if landed else None)


def _unless(option: str) -> Callable[[Options, Driver], str | None]:
    return lambda opts, driver: (None if getattr(opts, option)
                                 else f"expect.reasoning.{option} is false")


REASONING = Check("test_reasoning", "reasoning", answer, judge)
STREAMED = Check("test_reasoning_streamed", "reasoning", streamed, judge_streamed,
                 applies=_unless("stream"))
OFF = Check("test_reasoning_off", "reasoning", off, judge_off, applies=_unless("thinking_off"))


# -- advice: thinking by engine, named by the driver's flags ------------------------------------
THINKING_OFF_FIX = ("the chat template ignores chat_template_kwargs.enable_thinking: serve the "
                    "model's own template (it honours the switch)")


def no_reasoning_said(driver: Facts) -> Text:
    """Said after "answered X with no reasoning"."""
    return advise(driver, "although thinking is on by default",
                  {AnthropicDriver: "although the request asked for thinking (thinking.type enabled): "
                                    "the proxy dropped the reasoning"})


def thinking_missing_fix(driver: Facts) -> Text:
    return advise(
        driver, "serve the model with a template that opens a thinking block and a reasoning "
                "parser that splits it out",
        {LlamaCppDriver: lambda d: Phrase("serve with ", d.flags["jinja"], " and the model's own "
                                          "template (", d.flags["template"], ") so thinking opens; "
                                          "--reasoning-budget -1 keeps it unlimited"),
         VllmDriver: lambda d: f"{d.start}--reasoning-parser <the model's parser> and a chat template "
                               "that opens a thinking block"})


def no_thinking_template_fix(driver: Facts) -> Text:
    return advise(
        driver, "serve a thinking model (with its own chat template, which opens a thinking "
                "block), or turn expect.reasoning off for this endpoint: this model answers "
                "without thinking",
        {LlamaCppDriver: lambda d: Phrase("serve a thinking model with its own template (or, for "
                                          "a model trained to think, point ", d.flags["template"],
                                          " at its thinking template), or turn expect.reasoning "
                                          "off for this endpoint: this model answers without "
                                          "thinking")})


def thinking_switched_off_fix(driver: Facts) -> Text:
    return advise(
        driver, "the template thinks, so something switches it off: a server-wide default "
                "(chat_template_kwargs enable_thinking: false) or a proxy that drops the "
                "reasoning field",
        {LlamaCppDriver: "the template thinks, so something switches it off: llama-server --reasoning "
                         "off, --reasoning-budget 0 or --chat-template-kwargs '{\"enable_thinking\": "
                         "false}' on the command line, or a proxy that drops reasoning_content"})
