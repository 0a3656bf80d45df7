"""Judgements every generation check shares: error answers, an exhausted budget, leaked markup."""

from __future__ import annotations

from pytest_frank import redact
from pytest_frank.verdict import fail

THINK_TAGS = ("<think>", "</think>")


def one_line(text: str | None, limit: int = 300) -> str:
    return redact.cut(" ".join(redact.scrub(text or "").split()), limit)


def require_answer(reply, driver, doing: str) -> None:
    """Fail on an error answer, naming the server's message and a known fix."""
    if reply.error is None:
        return
    if reply.status is None:
        fail(f"{doing}: {reply.error}")
    fail(f"{doing} answered {reply.status}: {one_line(reply.error)}",
         driver.known_fix(reply.error, reply.status))


def require_budget(reply, max_tokens: int, option: str) -> None:
    """Empty content cut at the budget is thinking that ate max_tokens, not a broken endpoint."""
    if reply.cut and not reply.content.strip() and not reply.calls:
        spent = " (all of it reasoning)" if reply.reasoning else ""
        fail(f"finish_reason {reply.finish!r} with empty content: thinking used the whole budget "
             f"of max_tokens={max_tokens}{spent} before any answer; the endpoint works, the "
             f"budget is too small",
             f"raise it: `{option}` in fleet.yaml, and give clients the same headroom")


def require_no_think_tags(reply, driver) -> None:
    if any(tag in reply.content for tag in THINK_TAGS):
        fail(f"<think>/</think> inside content ({one_line(reply.content, 120)!r}): the reasoning "
             f"parser is missing or wrong, so clients show the thinking as the answer",
             driver.reasoning_parser_fix)
