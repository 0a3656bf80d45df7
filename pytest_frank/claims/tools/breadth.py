"""tools in breadth: the schema corpus (every JSON Schema keyword a client sends, strict and not,
streamed and not, within an answer budget), reasoning kept under a forced call, and whether
each of a fixed set of prompts triggers a call as on a reference endpoint (F1, as Moonshot's
K2 Vendor Verifier scores trigger similarity: a reply that finishes with tool_calls is a
positive, the reference's decision the truth)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line, require_answer
from pytest_frank.claims.tools.schemas import Entry, corpus
from pytest_frank.claims.tools import (
    MARKUP,
    PROMPTS,
    TOOLS,
    Options,
    call_reply_problems,
    tool_parser_fix,
)
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Text, fail, inconclusive
from pytest_frank.runtime.chat import Reply, Request, send, think_through
from pytest_frank.runtime.target import Target


# -- the schema corpus -----------------------------------------------------------------------
@dataclass(kw_only=True)
class Corpus(Observation):
    entries: list[Entry]
    replies: list[Reply]
    budget: int


def schema_corpus(target: Target) -> Corpus:
    """Each corpus tool offered alone and forced (tool_choice required), strict and streamed
    as the entry says, within the answer budget."""
    opts = Options.on(target.endpoint)
    entries = corpus(opts.schemas)
    replies = [think_through(target, Request(
        f"Call the {e.name} tool once, with arguments that fit its schema.", opts.schema_budget,
        tools=[e.tool], tool_choice="required", stream=e.stream)) for e in entries]
    return Corpus(entries=entries, replies=replies, budget=opts.schema_budget)


def depth(text: str) -> int:
    """How deep a (possibly cut) JSON text nests objects and arrays, strings skipped."""
    most = level = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (not escaped and ch == "\\"), in_string and (escaped or ch != '"')
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            level += 1
            most = max(most, level)
        elif ch in "}]":
            level -= 1
    return most


def entry_problem(entry: Entry, reply: Reply, budget: int,
                  driver: Driver) -> tuple[str, Text | None] | None:
    """Why this corpus call is unusable, and the fix; None when it validates."""
    if not reply.ok:
        return (f"answered {reply.status}: {one_line(reply.problem, 200)}" if reply.status
                else one_line(reply.problem, 200)), None
    if reply.cut and not reply.thinking_cut:
        written = "".join(str(c.arguments) for c in reply.calls) or reply.content
        nested = depth(written)
        if entry.recursive:
            return (f"still writing the call when max_tokens={budget} ran out "
                    f"(finish_reason {reply.finish!r}), {nested} levels deep into the "
                    f"recursive $defs/{entry.recursive}: the model recursed into optional $ref "
                    f"fields and would have run on until the context was full",
                    RECURSION_FIX)
        return (f"still writing the call when max_tokens={budget} ran out (finish_reason "
                f"{reply.finish!r}, {nested} levels deep)", BUDGET_FIX)
    found = call_reply_problems(reply, tools=[entry.tool])
    if not found:
        return None
    return found[0], tool_parser_fix(driver) if MARKUP.search(reply.content) else None


RECURSION_FIX = ("a model that keeps opening an optional recursive field never closes the "
                 "call: bound the recursion in the tool's schema (maxItems on the recursive "
                 "array, or a depth-limited copy of the $defs), and keep max_tokens on agent "
                 "requests so such a call ends at the budget, not at the context's end")
BUDGET_FIX = ("raise expect.tools.schema_budget: the call needs more tokens than the budget, "
              "and clients need the same headroom")


def judge_corpus(obs: Corpus, ctx: Context[Options]) -> None:
    """Every corpus tool, forced, comes back as one usable call whose arguments validate
    against its schema (Draft 2020-12) within the answer budget."""
    found = []
    for entry, reply in zip(obs.entries, obs.replies):
        problem = entry_problem(entry, reply, obs.budget, ctx.driver)
        shown = one_line(" ".join(str(c.arguments) for c in reply.calls), 100)
        ctx.note(f"{entry.label}: " + (problem[0] if problem else f"valid {shown}"))
        found.append((entry, problem))
    bad = [(e, p) for e, p in found if p is not None]
    k = len(found)
    rate = (k - len(bad)) / k
    ctx.note(f"schema corpus: {k - len(bad)}/{k} tool(s) called validly ({rate:.0%}, need "
             f"{ctx.options.min_pass_rate:.0%})")
    if rate >= ctx.options.min_pass_rate:
        return
    entry, (text, fix) = bad[0]
    if fix is None and not obs.replies[obs.entries.index(entry)].ok:
        fix = advise(ctx.driver, "the server refused a schema keyword a client sends: update "
                     "the engine, or keep that keyword out of the tools its clients offer",
                     {LlamaCppDriver: "llama.cpp turns a tool's schema into a grammar and refuses what "
                                      "its converter cannot take: update the engine, or keep that "
                                      "keyword out of the tools its clients offer"})
    fail(f"schema corpus: {k - len(bad)}/{k} tool(s) called validly ({rate:.0%}, need "
         f"{ctx.options.min_pass_rate:.0%}); {entry.label}: {text}", fix)


# -- reasoning under a forced call -----------------------------------------------------------
@dataclass(kw_only=True)
class Forced(Observation):
    forced: Reply  # tool_choice required, thinking asked
    free: Reply  # the same request under auto: whether the model thinks here at all


def forced_thinking(target: Target) -> Forced:
    opts = Options.on(target.endpoint)
    ask = [think_through(target, Request(PROMPTS["required"], opts.max_tokens, tools=TOOLS,
                                         tool_choice=choice, think=True))
           for choice in ("required", "auto")]
    return Forced(forced=ask[0], free=ask[1])


def judge_forced_thinking(obs: Forced, ctx: Context[Options]) -> None:
    """A model that thinks before it calls still thinks when the call is forced: tool_choice
    "required" comes back with the reasoning the same request has under "auto"."""
    for reply, doing in ((obs.forced, 'tool_choice "required" with thinking'),
                         (obs.free, 'tool_choice "auto" with thinking')):
        require_answer(reply, ctx.driver, doing)
    free, forced = obs.free.reasoning.strip(), obs.forced.reasoning.strip()
    ctx.note(f'under "auto": {len(free)} characters of reasoning; under "required": '
             f"{len(forced)}, {len(obs.forced.calls)} call(s)")
    if not free:
        inconclusive('the model did not think under tool_choice "auto" either: nothing to '
                     "compare (test_reasoning judges whether it thinks)")
    problems = call_reply_problems(obs.forced)
    if problems:
        fail(f'tool_choice "required" with thinking: {problems[0]}', tool_parser_fix(ctx.driver))
    if not forced:
        fail(f'tool_choice "required" suppressed the reasoning: the call came with none, where '
             f'the same request under "auto" thought first ({one_line(free, 60)!r})',
             advise(ctx.driver,
                    "the forced-call path starts the tool-call grammar at the first token (or a "
                    "proxy drops reasoning beside tool calls): update the engine to one whose "
                    "required grammar allows the reasoning first, and check that a proxy "
                    "forwards reasoning with tool calls",
                    {VllmDriver: lambda d: f"{d.start}--reasoning-parser <the model's>: without it "
                                           "the required path constrains the whole output, "
                                           "reasoning included; behind a proxy, check that it "
                                           "forwards reasoning with tool calls"}))


# -- trigger agreement with a reference ------------------------------------------------------
# Prompts with the two tools offered under auto: some ask for a tool, some plainly do not, and
# one asks for it only through the turns before it (a proxy that drops history answers it text).
TRIGGER_PROMPTS: list[str | list[dict]] = [
    "What is the weather in Paris tomorrow?",
    "Will it rain in London in three days? Check the forecast.",
    "What time is it in Tokyo right now?",
    "Write a two-line poem about the sea.",
    "What is 17 plus 25?",
    "Translate 'good morning' into French.",
    [{"role": "user", "content": "I will name a city. When I do, look up tomorrow's weather "
                                 "there with the get_weather tool."},
     {"role": "assistant", "content": "Sure. Which city?"},
     {"role": "user", "content": "Lyon."}],
]


def said(prompt: str | list[dict]) -> str:
    """A prompt as the notes quote it: its last user turn, and the turns before it."""
    if isinstance(prompt, str):
        return repr(prompt)
    return f"{prompt[-1]['content']!r} (after {len(prompt) - 1} turns)"


@dataclass(kw_only=True)
class Triggers(Observation):
    replies: list[Reply]
    reference: str | None = None  # the reference endpoint's name
    theirs: list[Reply] = field(default_factory=list)


def trigger_replies(target: Target) -> Triggers:
    """The fixed prompts, greedy, tools offered under auto: whether each answer calls."""
    greedy = target.driver.wire.sampling({"temperature": 0.0})
    budget = Options.on(target.endpoint).max_tokens
    return Triggers(replies=[send(target, Request(
        p if isinstance(p, str) else "", budget, tools=TOOLS, tool_choice="auto", extra=greedy,
        sampling=False, messages=None if isinstance(p, str) else p)) for p in TRIGGER_PROMPTS])


def reference_name(target: Target) -> str | None:
    return Options.on(target.endpoint).reference or target.endpoint.same_as


def triggers(target: Target) -> Triggers:
    mine, name = target.need(trigger_replies), reference_name(target)
    twin = target.peer(name)
    if twin is None:
        return Triggers(replies=[], failure=f"the trigger reference {name!r} is no endpoint of "
                                            f"this fleet", fix="name an endpoint of the fleet")
    if isinstance(mine, Unseen):  # the same failure, as this probe's own observation
        return Triggers(replies=[], failure=mine.failure, fix=mine.fix)
    theirs = twin.need(trigger_replies)
    if isinstance(theirs, Unseen) or theirs.failure:
        return Triggers(replies=[], failure=f"the trigger reference {name}: {theirs.failure}")
    return Triggers(replies=mine.replies, reference=name, theirs=theirs.replies)


def f1(mine: list[bool], truth: list[bool]) -> tuple[float, float, float]:
    """Precision, recall and F1 of `mine` against `truth`; all 1.0 where neither side ever
    triggers (every answer agrees, and there is nothing to count)."""
    tp = sum(m and t for m, t in zip(mine, truth))
    fp = sum(m and not t for m, t in zip(mine, truth))
    fn = sum(t and not m for m, t in zip(mine, truth))
    if tp + fp + fn == 0:
        return 1.0, 1.0, 1.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, score


def triggered(reply: Reply) -> bool:
    return reply.ok and reply.tool_finish


def judge_triggers(obs: Triggers, ctx: Context[Options]) -> None:
    """Whether each fixed prompt triggers a tool call agrees with the reference endpoint: F1 at
    least expect.tools.min_trigger_f1 (K2 Vendor Verifier's trigger similarity)."""
    name = obs.reference
    for reply, prompt in zip(obs.theirs, TRIGGER_PROMPTS):
        if not reply.ok:
            inconclusive(f"the reference {name} gave no answer to {said(prompt)}: "
                         f"{reply.problem_line}")
    mine, truth = [triggered(r) for r in obs.replies], [triggered(r) for r in obs.theirs]
    precision, recall, score = f1(mine, truth)
    ctx.figure("trigger_f1", round(score, 4))
    for prompt, m, t, r in zip(TRIGGER_PROMPTS, mine, truth, obs.replies):
        came = f"finish {r.finish}" if r.ok else one_line(r.problem_line, 80)
        ctx.note(f"{said(prompt)}: {'calls' if m else 'text'} here ({came}), "
                 f"{'calls' if t else 'text'} on {name}")
    need = ctx.options.min_trigger_f1
    head = (f"tool-call trigger agreement with {name}: F1 {score:.2f} (precision "
            f"{precision:.2f}, recall {recall:.2f}, need {need:.2f}) over {len(mine)} prompts")
    if not any(truth) and not any(mine):
        ctx.note(f"{head}: neither endpoint called a tool on any prompt")
    if score >= need:
        ctx.note(head)
        return
    missed = [i for i, (m, t) in enumerate(zip(mine, truth)) if t and not m]
    extra = [i for i, (m, t) in enumerate(zip(mine, truth)) if m and not t]
    parts = ([f"answered text where {name} called on "
              f"{', '.join(said(TRIGGER_PROMPTS[i]) for i in missed)}"] if missed else []) + (
        [f"called where {name} answered text on "
         f"{', '.join(said(TRIGGER_PROMPTS[i]) for i in extra)}"] if extra else [])
    leaked = [obs.replies[i] for i in missed if MARKUP.search(obs.replies[i].content)]
    if leaked:
        fail(f"{head}: {'; '.join(parts)}; the text holds tool-call markup "
             f"({one_line(leaked[0].content, 80)!r}): the calls were made and not parsed",
             tool_parser_fix(ctx.driver))
    fail(f"{head}: {'; '.join(parts)}",
         f"this endpoint decides otherwise than {name} on the same prompts, greedy: compare "
         f"their models, chat templates and tool parsers, and whether a proxy in front of one "
         f"drops turns of the history or changes the tools it forwards")


SCHEMA_CORPUS = Check("test_tools_schema_corpus", "tools", schema_corpus, judge_corpus,
                      asked=lambda opts: opts.schemas > 0,
                      when="with `schemas`")
FORCED_THINKING = Check("test_tools_forced_thinking", "tools", forced_thinking,
                        judge_forced_thinking, asked=lambda opts: opts.thinking,
                        when="with `thinking`")
TRIGGERS = Check("test_tools_trigger_agreement", "tools", triggers, judge_triggers,
                 asked=lambda opts: opts.reference is not None,
                 asked_of=lambda endpoint: bool(endpoint.same_as),
                 when="with `reference`, or `same_as`")
