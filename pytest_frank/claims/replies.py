"""Judgements every generation check shares: error answers, an exhausted budget, thinking that
never ends, leaked markup."""

from __future__ import annotations

from pytest_frank import redact
from pytest_frank.chat import headroom
from pytest_frank.claims.advice import advise
from pytest_frank.drivers.base import Driver
from pytest_frank.known_errors import known_fix
from pytest_frank.verdict import Phrase, Text, fail

THINK_TAGS = ("<think>", "</think>")


def one_line(text: str | None, limit: int = 300) -> str:
    return redact.cut(redact.squeeze(redact.scrub(text or ""), limit), limit)


def require_answer(reply, driver, doing: str) -> None:
    """Fail on an error answer, naming the server's message and a known fix."""
    if reply.problem is None:
        return
    if reply.status is None:
        fail(f"{doing}: {reply.problem}", reply.fix)
    fail(f"{doing} answered {reply.status}: {one_line(reply.problem)}",
         known_fix(driver, reply.problem, reply.status))


def require_budget(reply, max_tokens: int, option: str, driver=None) -> None:
    """Empty content cut at the budget is thinking that ate max_tokens, not a broken endpoint;
    cut before it (usage says so), something else cut it."""
    if reply.cut and not reply.content.strip() and not reply.calls:
        require_not_cut_short(reply, driver)
        spent = " (all of it reasoning)" if reply.reasoning else ""
        fail(f"finish_reason {reply.finish!r} with empty content: thinking used the whole budget "
             f"of max_tokens={max_tokens}{spent} before any answer; the endpoint works, the "
             f"budget is too small",
             f"raise it: `{option}` in fleet.yaml, and give clients the same headroom")


def require_thinking_ended(reply, driver, option: str) -> None:
    """For a check that judges the answer: the reply it judges is cut while thinking only when
    the larger budget (chat.think_through) ran out too, or none larger could be asked."""
    if not reply.thinking_cut:
        require_budget(reply, reply.max_tokens, option, driver)
        return
    require_not_cut_short(reply, driver)
    if reply.first is not None:
        first = reply.first
        raised = (f", raised to {first.max_tokens} by this endpoint's earlier answers"
                  if first.raised_from else "")
        tried = (f"`{option}` ({first.raised_from or first.max_tokens}{raised}) ran out first, "
                 f"then this larger budget, bounded by {reply.ceiling}")
    else:
        tried = f"`{option}` is already as large as {reply.ceiling or 'max_thinking_tokens'} allows"
    spent = f"{reply.thinking_tokens} tokens of reasoning" if reply.generated else "reasoning"
    fail(f"thinking did not end within {reply.max_tokens} tokens: finish_reason {reply.finish!r} "
         f"with {spent} and no answer; {tried}",
         endless_thinking_fix(driver))


def require_not_cut_short(reply, driver=None) -> None:
    """A reply that says the budget ran out after fewer tokens than it was given was cut by
    neither that budget nor thinking: a proxy or the server capped it, or the context filled."""
    if not reply.cut_short:
        return
    had = (f"{one_line(reply.reasoning, 60)!r} of reasoning" if reply.reasoning.strip()
           else "nothing")
    fail(f"finish_reason {reply.finish!r} after {reply.tokens} token(s) (usage) of the "
         f"max_tokens={reply.max_tokens} asked, with {had} and no answer: the budget was not "
         f"spent, so neither it nor thinking cut this reply; something between the client and "
         f"the model capped it",
         budget_cap_fix(driver))


def cut_while_thinking(reply, ctx, doing: str) -> bool:
    """For a check that does not judge the answer: a reply cut by the budget while thinking (200,
    reasoning, no answer) shows the request was accepted and the model at work; noted, it passes."""
    if not reply.thinking_cut:
        return False
    ctx.note(f"{doing}: cut at max_tokens={reply.max_tokens} while thinking (finish_reason "
             f"{reply.finish!r}, reasoning, no answer yet): that proves what this check asks; "
             f"the answer itself is not judged here")
    return True


def thinking_spent(replies, ctx, figure: bool = False) -> None:
    """How long the model thought: the `thinking_tokens` figure (with `figure`), and where a
    first budget ran out, the headroom clients need."""
    answered = [r for r in replies if r.ok and r.reasoning.strip() and not r.cut]
    if not answered:
        return
    longest = max(answered, key=lambda r: r.thinking_tokens)
    if figure:
        ctx.figure("thinking_tokens", longest.thinking_tokens, "tokens")
    need = (f"thinking took {longest.thinking_tokens} tokens here: clients need max_tokens "
            f"above about {headroom(longest.generated):,}")
    if longest.first is not None:
        first = longest.first
        asked = first.raised_from or first.max_tokens
        ctx.note(f"{need} (max_tokens={asked} ran out while thinking; asked again with "
                 f"{longest.max_tokens})")
    elif longest.raised_from is not None:
        ctx.note(f"{need} (max_tokens={longest.raised_from} is less than this endpoint's "
                 f"answers took: asked with {longest.max_tokens})")


def require_no_think_tags(reply, driver) -> None:
    if any(tag in reply.content for tag in THINK_TAGS):
        fail(f"<think>/</think> inside content ({one_line(reply.content, 120)!r}): the reasoning "
             f"parser is missing or wrong, so clients show the thinking as the answer",
             reasoning_parser_fix(driver))


# -- advice the generation claims share, by engine ----------------------------------------------
def reasoning_parser_fix(driver: Driver) -> Text:
    """How the engine splits thinking out of the answer."""
    return advise(
        driver, "turn on the server's reasoning parser (llama.cpp --reasoning-format deepseek, "
                "vLLM/SGLang --reasoning-parser <the model's>)",
        llamacpp=lambda d: Phrase(d.start or "", d.flags["reasoning_format"]("deepseek"),
                                  " (or auto); 'none' leaves the thinking inside content"),
        vllm=lambda d: f"{d.start}--reasoning-parser <the model's parser, e.g. qwen3, deepseek_r1>",
        sglang=lambda d: f"{d.start}--reasoning-parser <the model's parser, e.g. qwen3, "
                         "deepseek-r1>",
        anthropic="the upstream server must split thinking out (llama.cpp --reasoning-format "
                  "deepseek, vLLM --reasoning-parser) so the proxy can send thinking blocks")


def endless_thinking_fix(driver: Driver) -> Text:
    return advise(
        driver, "lower the reasoning effort clients send, switch thinking off in the chat "
                "template where clients may (chat_template_kwargs enable_thinking: false), or "
                "serve a model that does not loop; if this model really thinks longer, raise "
                "max_thinking_tokens (and the served context)",
        anthropic="lower the effort clients send (output_config.effort), or switch thinking off "
                  "(thinking.type disabled) where clients may, or serve a model that does not "
                  "loop; if this model really thinks longer, raise max_thinking_tokens (and the "
                  "upstream's context)")


def budget_cap_fix(driver: Driver | None) -> Text:
    return advise(
        driver, "look for what lowers max_tokens on the way: a proxy or gateway that rewrites "
                "it, a server-side cap on generated tokens, or a served context too small for "
                "the prompt and the answer",
        llamacpp=lambda d: Phrase("look for what lowers max_tokens on the way: a proxy or "
                                  "gateway that rewrites it, llama-server's --n-predict (it caps "
                                  "every request), or a slot context (", d.flags["ctx"], " / ",
                                  d.flags["parallel"], ") too small for the prompt and the "
                                  "answer"))
