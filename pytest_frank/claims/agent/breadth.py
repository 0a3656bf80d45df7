"""agent in breadth: several rounds over four tools (each call usable against its schema, each
id new, the results back in, then the answer), and a long answer after a tool result, which
runs a lazy tool-call grammar's trigger over thousands of characters it must not fire on."""

from __future__ import annotations

from pytest_frank.claims.agent import (
    Conversations,
    Options,
    Problem,
    Turn,
    _show,
    conversation_problem,
    play,
)
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line, require_thinking_ended
from pytest_frank.claims.tools import TOOLS
from pytest_frank.outcome.verdict import fail, inconclusive

CONVERT = {"type": "function", "function": {
    "name": "convert_currency", "description": "Convert an amount between two currencies.",
    "parameters": {"type": "object", "additionalProperties": False,
                   "required": ["amount", "source", "target"],
                   "properties": {"amount": {"type": "number", "exclusiveMinimum": 0},
                                  "source": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
                                  "target": {"type": "string", "enum": ["EUR", "USD", "GBP"]}}}}}
SEARCH = {"type": "function", "function": {
    "name": "search_web", "description": "Search the web; returns the top results.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["query"],
                   "properties": {"query": {"type": "string", "minLength": 1},
                                  "limit": {"type": "integer", "minimum": 1, "maximum": 10}}}}}
FOUR = [*TOOLS, CONVERT, SEARCH]
ROUNDS_PROMPT = ("Plan my day in Paris tomorrow. Use the tools one at a time: the weather, the "
                 "local time, 100 EUR in USD, and a web search for museums; then sum it up.")
LONG_PROMPT = ("What is the weather in Paris tomorrow? Use the get_weather tool. Then, from its "
               "result, write a detailed travel guide for the day of at least {n} characters: "
               "what to wear, where to go, what to eat, hour by hour.")


def rounds(target) -> Conversations:
    opts = Options.on(target.endpoint)
    turns = play(target, steps=opts.rounds, tools=FOUR, prompt=ROUNDS_PROMPT)
    return Conversations(kind="rounds", trials=[turns], steps=opts.rounds)


def reused_id(turns: list[Turn]) -> Problem | None:
    """A call id handed out again in a later round: the client keys results by id."""
    seen: dict[str, int] = {}
    for n, turn in enumerate(turns, 1):
        for call in turn.reply.calls:
            if call.id and call.id in seen:
                return Problem(f"turn {n} gave its {call.name} call the id {call.id!r}, the id "
                               f"of a call of turn {seen[call.id]}: a client that answers "
                               f"calls by id cannot tell the two results apart",
                               "the server (or a proxy) must give every call a fresh id: a "
                               "counter that starts again per reply (call_0) repeats across "
                               "rounds; use random ids, as the engines do")
            seen.setdefault(call.id or "", n)
    return None


def judge_rounds(convs: Conversations, ctx: Context[Options]) -> None:
    """Several rounds over four tools: each forced call is usable against the four tools'
    schemas with an id of its own, each result goes back, and a final text answer comes."""
    turns = convs.trials[0]
    _show(turns, 1, ctx)
    called = [str(c.name) for t in turns[:-1] for c in t.reply.calls]
    ctx.note(f"{len(turns) - 1} round(s) called {', '.join(called) or 'nothing'} "
             f"({len(set(called))} of the {len(FOUR)} tools offered)")
    problem = reused_id(turns) or conversation_problem(turns, convs.steps, ctx.driver,
                                                       ctx.options.grounded, tools=FOUR)
    if problem is None:
        return
    require_thinking_ended(turns[-1].reply, ctx.driver, "expect.agent.max_tokens")
    fail(f"agent loop of {convs.steps} rounds over {len(FOUR)} tools: {problem.text}", problem.fix)


def long_answer(target) -> Conversations:
    opts = Options.on(target.endpoint)
    budget = max(opts.max_tokens, opts.long_answer // 2 + 512)  # ~4 characters a token, twice
    turns = play(target, steps=1, prompt=LONG_PROMPT.format(n=f"{opts.long_answer:,}"),
                 max_tokens=budget)
    return Conversations(kind="long", trials=[turns], steps=1)


LAZY_FIX = ("the engine's lazy tool-call grammar fired inside a plain answer: a word of the "
            "text matched its trigger. Update the engine (llama.cpp: a build whose autoparser "
            "triggers on the model's own call opener only), or serve the model's own template "
            "so the trigger is its real call token")


def judge_long_answer(convs: Conversations, ctx: Context[Options]) -> None:
    """After a tool result, a long answer (expect.agent.long_answer characters) comes back
    whole as text: no call fired inside it, no grammar error, nothing cut but by the budget."""
    turns, want = convs.trials[0], ctx.options.long_answer
    _show(turns, 1, ctx)
    last = turns[-1].reply
    if len(turns) == 2 and not last.ok and "grammar" in (last.problem or "").lower():
        fail(f"the long answer after the tool result answered {last.status}: "
             f"{one_line(last.problem, 200)}", LAZY_FIX)
    if len(turns) == 2 and last.ok and last.calls and last.content.strip():
        fail(f"a tool call ({last.calls[0].name}) fired after {len(last.content):,} characters "
             f"of the long answer to the tool result: {one_line(last.content[-80:], 80)!r}",
             LAZY_FIX)
    if len(turns) == 2 and last.ok and last.cut and not last.calls:
        inconclusive(f"the long answer ran to max_tokens={last.max_tokens} ({len(last.content):,} "
                     f"characters, finish_reason {last.finish!r}): raise expect.agent.max_tokens "
                     f"to see it end")
    problem = conversation_problem(turns, 1, ctx.driver)
    if problem is not None:
        require_thinking_ended(last, ctx.driver, "expect.agent.max_tokens")
        fail(f"long answer after a tool result: {problem.text}", problem.fix)
    ctx.note(f"the answer after the tool result: {len(last.content):,} characters, finish "
             f"{last.finish}")
    if len(last.content) < want:
        inconclusive(f"the model answered {len(last.content):,} characters where {want:,} were "
                     f"asked: a long answer was not exercised (a model limit, not the server's)")


ROUNDS = Check("test_agent_rounds", "agent", rounds, judge_rounds,
               asked=lambda opts: opts.rounds > 0,
               when="with `rounds`")
LONG_ANSWER = Check("test_agent_long_answer", "agent", long_answer, judge_long_answer,
                    asked=lambda opts: opts.long_answer > 0,
                    when="with `long_answer`")
