"""reasoning: a chat reply carries an answer AND separate reasoning, plain and streamed, and
switching thinking off really switches it off."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank.chat import Chat, Reply, Request
from pytest_frank.claims.replies import (one_line, require_answer, require_budget,
                                         require_no_think_tags)
from pytest_frank.http import Exchange
from pytest_frank.verdict import fail

PROMPT = "Say hello in one short sentence."
DEFAULT_MAX_TOKENS = 512  # thinking counts against it; the tiny self-test model needs ~6


@dataclass
class Thought:
    mode: str  # "on" (the endpoint's default), "streamed", "off" (thinking switched off)
    reply: Reply
    max_tokens: int
    exchanges: list[Exchange] = field(default_factory=list)


def _ask(target, mode: str) -> Thought:
    opts = target.endpoint.options("reasoning")
    max_tokens = int(opts.get("max_tokens", DEFAULT_MAX_TOKENS))
    extra = target.driver.thinking_off() if mode == "off" else {}
    with Chat(target, opts.get("field")) as chat:
        reply = chat.send(Request(PROMPT, max_tokens, stream=mode == "streamed", extra=extra))
    return Thought(mode, reply, max_tokens, list(chat.exchanges))


def probe(target) -> Thought:
    return _ask(target, "on")


def probe_streamed(target) -> Thought:
    return _ask(target, "streamed")


def probe_off(target) -> Thought:
    return _ask(target, "off")


def judge(thought: Thought, driver, expected_field: str | None = None) -> None:
    """Thinking on (plain or streamed): non-empty content and non-empty reasoning."""
    r = thought.reply
    how = "streamed chat" if r.streamed else "chat"
    _answer(thought, driver, how)
    if expected_field and r.reasoning_field and r.reasoning_field != expected_field:
        fail(f"{how} reasoning arrived in `{r.reasoning_field}`, not in `{expected_field}` where "
             f"fleet.yaml expects it; clients reading `{expected_field}` see none",
             "set expect.reasoning.field to where this server puts it, or fix the client")
    if not r.reasoning.strip():
        where = expected_field or " / ".join(f"`{f}`" for f in driver.reasoning_fields)
        fail(f"{how} answered {one_line(r.content, 80)!r} with no reasoning ({where} empty or "
             f"absent) although thinking is on by default", driver.thinking_missing_fix)


def judge_same_fields(streamed: Thought, plain: Thought) -> None:
    """The reassembled stream carries reasoning where the plain reply does."""
    s, p = streamed.reply, plain.reply
    if p.reasoning_field and s.reasoning_field != p.reasoning_field:
        fail(f"the stream carries reasoning in `{s.reasoning_field}` but the plain reply in "
             f"`{p.reasoning_field}`: a client reading one misses the other",
             "a proxy or engine that re-maps fields must do so for stream deltas too")


def judge_off(thought: Thought, driver) -> None:
    """Thinking switched off: an answer, and no reasoning."""
    r = thought.reply
    _answer(thought, driver, "chat with thinking off")
    if r.reasoning.strip():
        fail(f"reasoning present although thinking was switched off (enable_thinking: false): "
             f"{one_line(r.reasoning, 80)!r} in `{r.reasoning_field}`", driver.thinking_off_fix)


def _answer(thought: Thought, driver, how: str) -> None:
    r = thought.reply
    require_answer(r, driver, how)
    require_budget(r, thought.max_tokens, "expect.reasoning.max_tokens")
    require_no_think_tags(r, driver)
    if not r.content.strip():
        landed = " (the answer landed in reasoning)" if r.reasoning.strip() else ""
        fail(f"{how} returned empty content{landed}, finish_reason {r.finish!r}",
             driver.reasoning_parser_fix if landed else None)
