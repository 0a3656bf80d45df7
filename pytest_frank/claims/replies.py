"""Judgements every generation check shares: error answers, an exhausted budget, thinking that
never ends, leaked markup, replies that are reasoning alone, a stream that reassembles into
another answer than the plain one."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_frank.base import redact
from pytest_frank.claims.advice import advise
from pytest_frank.claims.diagnosis import TEMPLATE, Evidence, diagnose, stream_assembly_fix
from pytest_frank.drivers import AnthropicDriver, LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.verdict import Phrase, Text, fail
from pytest_frank.runtime.chat import headroom
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.transport.wire import Reply

if TYPE_CHECKING:
    from pytest_frank.claims.checks import Context

THINK_TAGS = ("<think>", "</think>")
# gpt-oss harmony's thinking is its analysis channel: this header left in content means no
# reasoning parser split it out.
HARMONY_ANALYSIS = "<|channel|>analysis<|message|>"


def one_line(text: str | None, limit: int = 300) -> str:
    return redact.cut(redact.squeeze(redact.scrub(text or ""), limit), limit)


def require_answer(reply: Reply, driver: Driver, doing: str) -> None:
    """Fail on an error answer, naming the server's message and a known fix."""
    if reply.problem is None:
        return
    if reply.status is None:
        fail(f"{doing}: {reply.problem}", reply.fix)
    fail(f"{doing} answered {reply.status}: {one_line(reply.problem)}",
         known_fix(driver, reply.problem, reply.status))


def require_budget(reply: Reply, max_tokens: int | None, option: str,
                   driver: Driver | None = None) -> None:
    """Empty content cut at the budget is thinking that ate max_tokens, not a broken endpoint;
    cut before it (usage says so), something else cut it."""
    if reply.cut and not reply.content.strip() and not reply.calls:
        require_not_cut_short(reply, driver)
        spent = " (all of it reasoning)" if reply.reasoning else ""
        fail(f"finish_reason {reply.finish!r} with empty content: thinking used the whole budget "
             f"of max_tokens={max_tokens}{spent} before any answer; the endpoint works, the "
             f"budget is too small",
             f"raise it: `{option}` in fleet.yaml, and give clients the same headroom")


def require_thinking_ended(reply: Reply, driver: Driver, option: str) -> None:
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


def require_not_cut_short(reply: Reply, driver: Driver | None = None) -> None:
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


def cut_while_thinking(reply: Reply, ctx: Context[Any], doing: str) -> bool:
    """For a check that does not judge the answer: a reply cut by the budget while thinking (200,
    reasoning, no answer) shows the request was accepted and the model at work; noted, it passes."""
    if not reply.thinking_cut:
        return False
    ctx.note(f"{doing}: cut at max_tokens={reply.max_tokens} while thinking (finish_reason "
             f"{reply.finish!r}, reasoning, no answer yet): that proves what this check asks; "
             f"the answer itself is not judged here")
    return True


def thinking_spent(replies: Sequence[Reply], ctx: Context[Any], figure: bool = False) -> None:
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


def reasoning_only(reply: Reply) -> bool:
    """Answered in full (not cut by the budget, which require_thinking_ended judges) with
    reasoning and neither content nor a tool call: a client has nothing to show or run."""
    return (reply.ok and not reply.cut and bool(reply.reasoning.strip())
            and not reply.content.strip() and not reply.calls)


def require_not_reasoning_only(replies: Sequence[Reply], driver: Driver, doing: str,
                               dropped_fix: Callable[[Driver | None], Text] | None = None,
                               evidence: Evidence | None = None) -> None:
    """Any reply that is reasoning alone fails as such, counted over the trials: it is the
    server's parser or template losing the answer, not the model choosing badly, so it is
    named apart from a call that is merely invalid (MiniMax's Provider-Verifier counts these
    and asks for none). With `evidence` about the first such reply, the cause is the one it
    shows (pytest_frank.claims.diagnosis): the template and parser only where it shows them."""
    only = [r for r in replies if reasoning_only(r)]
    if not only:
        return
    k, first = len(replies), only[0]
    said = (f"{doing}: {len(only)} of {k} {'reply' if k == 1 else 'replies'} carried reasoning "
            f"only: no content and no tool call (finish_reason {first.finish!r}, reasoning "
            f"{one_line(first.reasoning, 80)!r})")
    if unshown_tokens(first):
        said = (f"{said}, though the server counted {first.tokens} tokens, "
                f"{first.reasoning_tokens} of them thinking: what the model wrote after its "
                f"thinking reached the client as neither")
        fix = (dropped_fix or dropped_answer_fix)(driver)
    else:
        fix = reasoning_only_fix(driver)
    if evidence is None:
        fail(f"{said}; a client has nothing to show or run", fix)
    found = diagnose(evidence, driver, own=(TEMPLATE, fix))
    fail(f"{said}; a client has nothing to show or run; {found.line}", found.fix)


# Tokens past the thinking that a reply may spend on markup alone: harmony's end of analysis and
# an empty final message (<|end|><|start|>assistant<|channel|>final<|message|><|return|>) are 7;
# a call's header alone (commentary to=functions.NAME <|constrain|>json) is about a dozen.
MARKUP_TOKENS = 8


def unshown_tokens(reply: Reply) -> int:
    """Of the server's own count (usage), the tokens past its count of thinking, where it gives
    both and they are more than markup: the model wrote something the reply does not show."""
    if reply.tokens is None or reply.reasoning_tokens is None:
        return 0
    past = reply.tokens - reply.reasoning_tokens
    return past if past > MARKUP_TOKENS else 0


def stream_difference(streamed: Reply, plain: Reply) -> str | None:
    """The first place a streamed reply and the plain one to the same greedy request part:
    reasoning, content (each without the whitespace at its ends, which parsers trim
    differently and no client shows), then the calls. Where either was cut by the budget, the
    texts are compared as far as both go and the calls not at all."""
    cut = streamed.cut or plain.cut
    for name in ("reasoning", "content"):
        found = text_difference(name, getattr(streamed, name), getattr(plain, name), cut)
        if found is not None:
            return found[1]
    if cut:
        return None
    names_s, names_p = [c.name for c in streamed.calls], [c.name for c in plain.calls]
    if names_s != names_p:
        return f"the calls differ: streamed {names_s}, plain {names_p}"
    for a, b in zip(streamed.calls, plain.calls):
        if parsed_arguments(a.arguments) != parsed_arguments(b.arguments):
            return (f"{a.name}'s arguments differ: streamed "
                    f"{one_line(json.dumps(parsed_arguments(a.arguments), default=str), 80)}, plain "
                    f"{one_line(json.dumps(parsed_arguments(b.arguments), default=str), 80)}")
    return None


def text_difference(name: str, streamed: str, plain: str, cut: bool) -> tuple[int, str] | None:
    """Where a streamed text and the plain one part, without the whitespace at their ends (as
    far as both go where either was cut): the character, and the words that say so."""
    a, b = streamed.strip(), plain.strip()
    if cut:
        a, b = a[:min(len(a), len(b))], b[:min(len(a), len(b))]
    if a == b:
        return None
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    twice = (f" ({len(a)} characters streamed, {len(b)} plain: twice as long, as when "
             f"every delta is sent twice)" if b and len(a) == 2 * len(b) else "")
    return at, (f"{name} differs at character {at}: streamed {_from(a, at)!r}, plain "
                f"{_from(b, at)!r}{twice}")


def require_stream_agrees(streamed: Reply, plain: Reply, ctx: Context[Any], doing: str) -> None:
    """At temperature 0 the streamed reply reassembles into the plain reply to the same
    request: content, reasoning and calls. Sampled, two draws may differ honestly, so nothing
    is compared; a pair where either side did not answer is judged elsewhere."""
    if not (streamed.ok and plain.ok):
        return
    if not ctx.endpoint.greedy:
        ctx.note(f"{doing}: streamed and plain not compared: sampled at temperature "
                 f"{ctx.endpoint.sampling.get('temperature')}, two draws may differ")
        return
    found = stream_difference(streamed, plain)
    if found is not None:
        fail(f"{doing}: the streamed reply differs from the plain (non-streamed) one to the "
             f"same request at temperature 0: {found}; a client reading the stream gets "
             f"another answer than one reading it whole", stream_assembly_fix(ctx.driver))
    said = [f"{len(streamed.content.strip())} characters of content"]
    if streamed.reasoning.strip():
        said.append(f"{len(streamed.reasoning.strip())} of reasoning")
    if streamed.calls:
        said.append(f"{len(streamed.calls)} call(s)")
    cut = " (compared as far as both go: one was cut by its budget)" if (
        streamed.cut or plain.cut) else ""
    ctx.note(f"{doing}: streamed and plain agree at temperature 0: {', '.join(said)}{cut}")


def _from(text: str, at: int, width: int = 60) -> str:
    """`text` from a little before `at`, where the difference shows."""
    start = max(0, at - 10)
    cut = text[start:at + width]
    return ("..." if start else "") + cut + ("..." if len(text) > at + width else "")


def parsed_arguments(arguments: Any) -> Any:
    """A call's arguments as clients use them: JSON text parsed, anything else as sent."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


def require_no_think_tags(reply: Reply, driver: Driver) -> None:
    if any(tag in reply.content for tag in THINK_TAGS):
        fail(f"<think>/</think> inside content ({one_line(reply.content, 120)!r}): the reasoning "
             f"parser is missing or wrong, so clients show the thinking as the answer",
             reasoning_parser_fix(driver))
    if HARMONY_ANALYSIS in reply.content:
        fail(f"gpt-oss harmony's analysis channel inside content "
             f"({one_line(reply.content, 120)!r}): the reasoning parser is missing or wrong, so "
             f"clients show the thinking, and the channel markup, as the answer",
             reasoning_parser_fix(driver, "harmony"))


# -- advice the generation claims share, by engine ----------------------------------------------
def reasoning_parser_fix(driver: Driver, family: str | None = None) -> Text:
    """How the engine splits thinking out of the answer; `family` (a tool-call family's name,
    pytest_frank.claims.tools.FAMILIES) where the thinking's markup tells it, so the parser is
    named where the engine has one for it."""
    parser = driver.reasoning_parsers.get(family) if driver is not None and family else None
    if parser:
        return f"{driver.start or 'serve with '}--reasoning-parser {parser}, this family's parser"
    return advise(
        driver, "turn on the server's reasoning parser (llama.cpp --reasoning-format deepseek, "
                "vLLM/SGLang --reasoning-parser <the model's>)",
        {LlamaCppDriver: lambda d: Phrase(d.start or "", d.flags["reasoning_format"]("deepseek"),
                                          " (or auto); 'none' leaves the thinking inside content"),
         VllmDriver: lambda d: f"{d.start}--reasoning-parser <the model's parser, e.g. qwen3, "
                               "deepseek_r1>",
         SglangDriver: lambda d: f"{d.start}--reasoning-parser <the model's parser, e.g. qwen3, "
                                 "deepseek-r1>",
         AnthropicDriver: "the upstream server must split thinking out (llama.cpp "
                          "--reasoning-format deepseek, vLLM --reasoning-parser) so the proxy can "
                          "send thinking blocks"})


def dropped_answer_fix(driver: Driver | None) -> Text:
    """Tokens past the thinking that reached the client as nothing (where the claim knows no
    more: the tools claim names the tool-call parser, tools.dropped_call_fix)."""
    return advise(driver, "the server took the model's call (or its answer) out of the reply "
                          "and sent it nowhere: turn on its tool-call parser for the model's "
                          "format, and update the engine")


def reasoning_only_fix(driver: Facts) -> Text:
    """What leaves a reply with reasoning alone: the answer or the call kept inside reasoning,
    or the turn ended where the thinking did."""
    return advise(
        driver, "the server returned the thinking and dropped what came after it: its "
                "reasoning parser keeps the answer (or the forced call) inside reasoning, or "
                "the template ends the turn with the thinking; serve the model's own template "
                "and reasoning parser, and update the engine",
        {LlamaCppDriver: lambda d: Phrase("llama.cpp kept the answer (or the call) inside the thinking: "
                                          "serve with ", d.flags["jinja"], " and the model's own "
                                          "template (", d.flags["template"], ") so the parser knows "
                                          "where thinking ends, and update llama.cpp"),
         VllmDriver: lambda d: f"{d.start}--reasoning-parser <the model's own parser>, and update vLLM: "
                               "a reasoning parser that holds the whole reply as reasoning returns "
                               "neither content nor the forced call (vLLM PR 41467)",
         AnthropicDriver: "the upstream returned thinking alone: check its reasoning parser (llama.cpp "
                          "--reasoning-format, vLLM --reasoning-parser) and update it"})


def endless_thinking_fix(driver: Facts) -> Text:
    return advise(
        driver, "lower the reasoning effort clients send, switch thinking off in the chat "
                "template where clients may (chat_template_kwargs enable_thinking: false), or "
                "serve a model that does not loop; if this model really thinks longer, raise "
                "max_thinking_tokens (and the served context)",
        {AnthropicDriver: "lower the effort clients send (output_config.effort), or switch thinking off "
                          "(thinking.type disabled) where clients may, or serve a model that does not "
                          "loop; if this model really thinks longer, raise max_thinking_tokens (and the "
                          "upstream's context)"})


def budget_cap_fix(driver: Facts | None) -> Text:
    return advise(
        driver, "look for what lowers max_tokens on the way: a proxy or gateway that rewrites "
                "it, a server-side cap on generated tokens, or a served context too small for "
                "the prompt and the answer",
        {LlamaCppDriver: lambda d: Phrase("look for what lowers max_tokens on the way: a proxy or "
                                          "gateway that rewrites it, llama-server's --n-predict "
                                          "(it caps every request), or a slot context (",
                                          d.flags["ctx"], " / ", d.flags["parallel"], ") too small "
                                          "for the prompt and the answer")})
