"""agent: complete agent steps as clients play them. Turn 1 asks for a tool call; the next turn
sends the history back as the client keeps it (the assistant message with its calls and
reasoning, one result per call carrying a unique marker) and must come back as a final text
answer, not a template error, not the same call again. The history is built in the endpoint's
API shape by its route's wire (Wire.agent_history). A loop that works is judged for its cost too:
turn 2 must take the prefix it shares with turn 1 from the server's cache (claims.agent.prefix_reuse).

Calls are asked with tool_choice "required" (the serving stack is judged, not whether the model
chooses to call); the answering turn uses "auto", as clients send it."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.diagnosis import MODEL, TEMPLATE, Evidence, diagnose
from pytest_frank.claims.evidence import gather
from pytest_frank.claims.agent.prefix_reuse import require_prefix_reused
from pytest_frank.claims.replies import (
    one_line,
    reasoning_only,
    reasoning_parser_fix,
    require_not_reasoning_only,
    require_thinking_ended,
    thinking_spent,
)
from pytest_frank.claims.tools import (
    MARKUP,
    PARALLEL_FIX,
    PROMPTS,
    TOOLS,
    Carried,
    Markup,
    answered_in_text,
    call_reply_problems,
    carried,
    dropped_call_fix,
    no_call,
    tool_parser_fix,
    with_render,
)
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Text, fail
from pytest_frank.drivers.base import Driver
from pytest_frank.runtime.chat import Call, Reply, Request, shared, think_through
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.runtime.target import Target

THINK_TAGS = Markup(r"</?think>|<\|channel\|>|<\|start\|>assistant",
                    ("<think>", "</think>", "<|channel|>", "<|start|>assistant"))
FORECASTS = ("sunny, 21 C", "light rain, 14 C", "overcast, 17 C")


@dataclass(frozen=True)
class Options(ClaimOptions):
    steps: int = option(1, minimum=1, maximum=3, about=(
        "Calls answered before the final answer is asked for: 1 (one call, one result, one "
        "answer) to 3 chained calls. Default: 1."))
    trials: int = option(1, minimum=1, maximum=100, about=(
        "Conversations per test; the share that reaches a final answer is reported. Default: 1."))
    min_pass_rate: float = option(1.0, minimum=0, maximum=1, about=(
        "Share of conversations that must reach one. Default: 1.0."))
    max_tokens: int = option(512, minimum=1, about=(
        "The first budget per request; a reply cut while thinking is asked again with "
        "`max_thinking_tokens`. Default: 512."))
    stream: bool = option(True, "False skips `test_agent_streamed`, and `test_agent_chain`'s "
                                "streamed turn 2. Default: true.")
    parallel: bool = option(False, about=(
        "The endpoint claims parallel calls: play a turn of two calls answered at once. Default: "
        "false."))
    grounded: bool = option(False, about=(
        "The final answer must also quote the result's marker. That judges the model (does it use "
        "what the tool said?), not the serving stack, so it is off by default. Default: false."))
    template: bool = option(True, about=(
        "`test_agent_template`: where the engine renders templates on request (llama.cpp's POST "
        "/apply-template), an agent's history renders to a prompt that holds the tool result, its "
        "call id where the template shows ids, and the reasoning where the template keeps it (no "
        "generation). False turns it off. Default: true."))
    rounds: int = option(0, minimum=0, maximum=8, about=(
        "Rounds of forced calls `test_agent_rounds` plays over four tools (each result sent back, "
        "then the answer); 3 or more is the point. Default: 0 (not asked)."))
    long_answer: int = option(0, minimum=0, about=(
        "Characters of the answer `test_agent_long_answer` asks after a tool result (2500 runs a "
        "lazy tool-call grammar's trigger over a long text). Default: 0 (not asked)."))
    # Whether the served template keeps the previous turn's reasoning in an agent's history:
    # None lets test_agent_reasoning_history read it, true holds it to it, false turns it off.
    reasoning_history: bool | None = option(None, about=(
        "`test_agent_reasoning_history`: an agent's history asked for one token without the "
        "previous turn's reasoning and with it in each field clients send (`reasoning_content`, "
        "`reasoning`; on the Messages route the turn's thinking block); a field the engine reads "
        "must lengthen the prompt wherever the template "
        "keeps reasoning. Unset, whether the template keeps it is read from the counts and the "
        "served template; true says it does (no field reaching the prompt then fails); false "
        "turns the test off. Default: unset."))


CLAIM = Claim("agent",
              "a tool result sent back gets a final answer, as agent clients loop", Options,
              order=70,
              tests=("test_agent", "test_agent_streamed", "test_agent_parallel",
                     "test_agent_template", "test_agent_reasoning_history", "test_agent_rounds",
                     "test_agent_long_answer", "test_agent_chain"))


@dataclass
class Turn:
    """One request of a conversation and what came back; `results` answer its calls."""
    sent: list[dict]
    reply: Reply
    results: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)
    req: Request | None = None  # what was asked: asked again where the reply is faulty


@dataclass(kw_only=True)
class Conversations(Observation):
    kind: str  # plain | streamed | parallel
    trials: list[list[Turn]]
    steps: int
    carried: Carried | None = None  # where a forced call came back as text alone
    # The first faulty reply (an answer whose content is wrong, not an error) and what tells
    # its cause apart (claims.diagnosis); None on a healthy endpoint, where nothing more is asked.
    diagnosed: Reply | None = None
    evidence: Evidence | None = None


def _result(call: Call, step: int) -> tuple[str, str]:
    """A tool result a model cannot have guessed: a JSON object with a fresh marker value."""
    marker = f"ref-{secrets.token_hex(4)}"
    args = call.arguments
    city = args.get("city") if isinstance(args, dict) else None
    if isinstance(args, str):
        try:
            city = json.loads(args).get("city")
        except (ValueError, AttributeError):
            city = None
    body = {"city": city or "Paris", "forecast": FORECASTS[step % len(FORECASTS)],
            "reference": marker}
    return json.dumps(body), marker


def play(target: Target, stream: bool = False, parallel: bool | None = None, steps: int | None = None,
         tools: list[dict] = TOOLS, prompt: str | None = None,
         max_tokens: int | None = None, share: bool = False) -> list[Turn]:
    """One agent conversation: `steps` forced calls, each answered, then the free turn. With
    `share`, the first step is the tools claim's forced call, asked alike: one reply for both."""
    opts, driver = Options.on(target.endpoint), target.driver
    steps = opts.steps if steps is None else steps
    prompt = prompt or PROMPTS["parallel" if parallel else "required"]
    messages: list[dict] = [{"role": "user", "content": prompt}]
    turns: list[Turn] = []
    for step in range(steps + 1):
        last = step == steps
        req = _turn(target, prompt, max_tokens if last and max_tokens else opts.max_tokens,
                    tools, "auto" if last else "required", parallel, stream, messages)
        reply = shared(target, req) if share and step == 0 else think_through(target, req)
        turn = Turn(sent=messages, reply=reply, req=req)
        turns.append(turn)
        if last or not reply.ok or not reply.calls:
            break
        for call in reply.calls:
            result, marker = _result(call, step)
            turn.results.append(result)
            turn.markers.append(marker)
        messages = driver.wire.agent_history(messages, reply, turn.results)
    return turns


def _turn(target: Target, prompt: str, max_tokens: int, tools: list[dict], choice: str,
          parallel: bool | None, stream: bool, messages: list[dict]) -> Request:
    return Request(prompt, max_tokens, tools=tools, tool_choice=choice, parallel=parallel,
                   stream=stream, messages=messages,
                   # thinking asked where the API wants it asked (the driver's thinking_on)
                   think=target.endpoint.asks("reasoning"))


def first_call(target: Target) -> Reply:
    """The first turn of test_agent's conversation (the tools claim's forced call), asked as
    play(share=True) asks it: one reply for every check that reads it."""
    prompt = PROMPTS["required"]
    return shared(target, _turn(target, prompt, Options.on(target.endpoint).max_tokens, TOOLS,
                                "required", None, False, [{"role": "user", "content": prompt}]))


def _conversations(target: Target, kind: str, stream: bool = False,
                   parallel: bool | None = None) -> Conversations:
    opts = Options.on(target.endpoint)
    trials = [play(target, stream, parallel, share=i == 0) for i in range(opts.trials)]
    found = Conversations(kind=kind, trials=trials, steps=opts.steps)
    if any(answered_in_text(turns[0].reply) for turns in trials if opts.steps):
        seen = target.need(carried)
        found.carried = None if isinstance(seen, Unseen) else seen
    min_calls = 2 if kind == "parallel" else 1
    for turns in trials:
        for n, turn in enumerate(turns, 1):
            wrong = turn_wrong(turns, n, opts.steps, min_calls, target.driver)
            if turn.req is not None and turn.reply.ok and not turn.reply.cut and \
                    wrong(turn.reply):
                found.diagnosed = turn.reply
                found.evidence = gather(target, turn.req, turn.reply, wrong)
                return found
    return found


def turn_wrong(turns: list[Turn], n: int, steps: int, min_calls: int,
               driver: Driver) -> Callable[[Reply], str | None]:
    """What is wrong with a reply in turn `n`'s place, judged as the conversation's judge does:
    a forced call's problems, or the final answer's."""
    def wrong(reply: Reply) -> str | None:
        if not reply.ok:
            return reply.problem_line
        if reply.thinking_cut:
            return None
        if n <= steps:
            found = call_reply_problems(reply, min_calls=min_calls if n == 1 else 1)
            return found[0] if found else None
        problem = answer_problem(turns[:n - 1] + [Turn(sent=turns[n - 1].sent, reply=reply)],
                                 driver)
        return problem.text if problem else None
    return wrong


def plain(target: Target) -> Conversations:
    return _conversations(target, "plain")


def streamed(target: Target) -> Conversations:
    return _conversations(target, "streamed", stream=True)


def parallel(target: Target) -> Conversations:
    return _conversations(target, "parallel", parallel=True)


# -- judging one conversation ----------------------------------------------------------------
@dataclass
class Problem:
    """Why one conversation is not a working agent step, and the usual fix; `reply`, where the
    fault is in what a reply said (not an error), and `cause`, whose fault the usual fix names
    (claims.diagnosis: the template and its parser, or the model)."""
    text: str
    fix: Text | None = None
    reply: Reply | None = None
    cause: str = TEMPLATE
    reading: str = ""  # the claim's own reading of the cause, said where the evidence agrees


TEMPLATE_WORDS = ("jinja", "template", "conversation roles must alternate", "raise_exception",
                  "cannot pass both content and thinking")
TEMPLATE_FIX = ("serve the model's own chat template (llama.cpp --jinja with "
                "--chat-template-file <the model's>, vLLM --chat-template), or a newer engine "
                "build whose template handling renders tool results")
# What an engine says when the history reaches it without the results, or without the thinking
# blocks a thinking turn's call must keep (the Messages API's own check).
LOST_RESULTS = ("cannot continue an assistant message",
                "tool_use ids were found without tool_result")
LOST_THINKING = ("expected `thinking` or `redacted_thinking`", "must start with a thinking block",
                 "thinking block", "signature")
LOST_RESULTS_FIX = ("the history reached the engine ending in the assistant's tool call: a "
                    "proxy or gateway between the client and the engine dropped the results "
                    "(tool_result blocks, role tool messages); make it forward them")
LOST_THINKING_FIX = ("a proxy dropped the thinking blocks (and their signatures) the client "
                     "echoes with a tool call in extended thinking: make it forward assistant "
                     "content verbatim")
UNSIGNED_FIX = ("a gateway between the client and the engine rebuilt the thinking blocks and "
                "left out their signature (LiteLLM 26916): pass thinking blocks through whole, "
                "signature included; an engine that signs nothing sends \"signature\": \"\" "
                "(llama.cpp does), never no field")
# What a Responses server says when a reasoning item comes back without the content it reads
# (llama.cpp reads the reasoning_text in `content`; Codex echoes a summary-only item as it came).
REFUSED_REASONING = ("item['content'] is not an array", "item['content'] is empty")
REFUSED_REASONING_FIX = ("Codex sends a reasoning item back as it came: a summary without "
                         "`content` where the server (or a proxy in front) sent the reasoning "
                         "only as a summary, and llama.cpp's /v1/responses refuses such an item. "
                         "Send reasoning items with their reasoning_text content (a proxy must "
                         "pass the upstream's items through unchanged), or update the engine to "
                         "a build that accepts reasoning items without content")
REPEAT_FIX = ("the tool result did not reach the prompt: does the chat template render role "
              "tool (OpenAI) or tool_result blocks (Anthropic)? Serve the model's own template; "
              "behind a proxy, check that it forwards the results")


def held(turn: Turn) -> str:
    """What the history of a turn held, in a client's words."""
    roles: list[str] = []
    for m in turn.sent:
        role, content = m.get("role"), m.get("content")
        if role is None or m.get("type") not in (None, "message"):  # a Responses input item
            roles.append(str(m.get("type") if role is None else role))
        elif role == "assistant":
            parts = []
            if m.get("tool_calls"):
                parts.append(f"{len(m['tool_calls'])} tool_call(s)")
            parts += [k for k in ("reasoning_content", "reasoning") if m.get(k)]
            if isinstance(content, list):
                parts += [b.get("type", "?") for b in content if isinstance(b, dict)]
            elif content:
                parts.append("content")
            roles.append(f"assistant ({', '.join(parts)})" if parts else "assistant")
        elif isinstance(content, list) and any(isinstance(b, dict) and b.get("type") ==
                                               "tool_result" for b in content):
            roles.append(f"user ({len(content)} tool_result block(s))")
        else:
            roles.append(str(role))
    return ", ".join(roles)


def conversation_problem(turns: list[Turn], steps: int, driver: Driver, grounded: bool = False,
                         min_calls: int = 1, carried: Carried | None = None,
                         tools: list[dict] = TOOLS) -> Problem | None:
    """The first reason this conversation is not a working agent loop; None when it is.
    `min_calls`: calls the first turn must make at once (2 where parallel calls are asked);
    `carried`: whether the tools reached the model, where a forced call came back as text."""
    for n, turn in enumerate(turns[:-1], 1):
        found = call_reply_problems(turn.reply, min_calls=min_calls if n == 1 else 1,
                                    tools=tools)
        if not turn.reply.ok:
            return _error(turn, n, driver)
        if found:
            return Problem(f"turn {n} (the tool call) is not a usable call: {found[0]}",
                           PARALLEL_FIX if found[0].startswith("parallel")
                           else tool_parser_fix(driver), turn.reply)
    if len(turns) <= steps:  # a forced turn came back without a call: judged above as last
        turn = turns[-1]
        if not turn.reply.ok:
            return _error(turn, len(turns), driver)
        why, fix = no_call(carried, driver) if answered_in_text(turn.reply) else (
            "", tool_parser_fix(driver))
        model = answered_in_text(turn.reply) and carried is not None and carried.dropped is False
        return Problem(f"turn {len(turns)} (the tool call) is not a usable call: "
                       f"{call_reply_problems(turn.reply, tools=tools)[0]}", fix,
                       turn.reply, MODEL if model else TEMPLATE, why)
    return answer_problem(turns, driver, grounded) or unsigned(turns)


def unsigned(turns: list[Turn]) -> Problem | None:
    """A thinking block that came without its signature (Messages API): the client sends it
    back as it came, and the API refuses a thinking block without one."""
    for n, turn in enumerate(turns, 1):
        blocks = [b for b in turn.reply.blocks if b.get("type") == "thinking"
                  and "signature" in b and b["signature"] is None]
        if blocks:
            return Problem(f"turn {n}'s thinking block came without its signature: a client "
                           f"(Claude Code) sends it back as it came in the next turn, and the "
                           f"Messages API refuses it there (thinking.signature: Field "
                           f"required)", UNSIGNED_FIX)
    return None


def answer_problem(turns: list[Turn], driver: Driver, grounded: bool = False) -> Problem | None:
    """The final turn, after the tool results: 200, text, finish stop, nothing leaked."""
    last, n = turns[-1], len(turns)
    reply = last.reply
    if not reply.ok:
        return _error(last, n, driver)
    earlier = [(c.name, call_args(c.arguments)) for t in turns[:-1] for c in t.reply.calls]
    for call in reply.calls:
        if (call.name, call_args(call.arguments)) in earlier:
            return Problem(f"turn {n} called {call.name} again with the same arguments "
                           f"({one_line(json.dumps(call_args(call.arguments)), 80)}) instead of "
                           f"answering: the model never saw the result, so an agent would loop "
                           f"forever", REPEAT_FIX, reply)
    if reply.calls:
        names = ", ".join(str(c.name) for c in reply.calls)
        return Problem(f"turn {n} asked for another tool ({names}) instead of a final answer "
                       f"after {len(earlier)} result(s)",
                       "a model that keeps calling: raise expect.agent.steps, or check that "
                       "the results reach the prompt", reply, MODEL)
    if MARKUP.search(reply.content) or THINK_TAGS.search(reply.content):
        return Problem(f"turn {n}'s answer has markup left in it "
                       f"({one_line(reply.content, 100)!r}): a client shows it to the user",
                       tool_parser_fix(driver) if MARKUP.search(reply.content)
                       else reasoning_parser_fix(driver), reply)
    if reply.finish not in ("stop", "end_turn"):
        return Problem(f"turn {n} ended with finish_reason {reply.finish!r}, not stop "
                       f"(end_turn): no final answer", reply=reply)
    if not reply.content.strip():
        return Problem(f"turn {n} answered empty content (finish_reason {reply.finish!r})",
                       reply=reply)
    markers = [m for t in turns[:-1] for m in t.markers]
    if grounded and not any(m in reply.content for m in markers):
        return Problem(f"turn {n}'s answer {one_line(reply.content, 100)!r} does not quote the "
                       f"tool result ({', '.join(markers)}): it answered without using it",
                       "expect.agent.grounded judges the model, not the server: a small or "
                       "quantised model may ignore results; drop grounded where that is known",
                       reply, MODEL)
    return None


def _error(turn: Turn, n: int, driver: Driver) -> Problem:
    reply, what = turn.reply, "the tool call" if n == 1 else "the answer to the tool result"
    said = one_line(reply.problem, 240)
    if reply.status is None:
        return Problem(f"turn {n} ({what}): {said}")
    lower = (reply.problem or "").lower()
    if n > 1 and any(w in lower for w in LOST_RESULTS):
        return Problem(f"turn {n} ({what}) answered {reply.status}: the results were sent "
                       f"({held(turn)}) but did not arrive: {said}", LOST_RESULTS_FIX)
    if n > 1 and any(w in lower for w in LOST_THINKING):
        return Problem(f"turn {n} ({what}) answered {reply.status}: the thinking blocks were "
                       f"sent back ({held(turn)}) but did not arrive: {said}", LOST_THINKING_FIX)
    if n > 1 and any(w.lower() in lower for w in REFUSED_REASONING):
        return Problem(f"turn {n} ({what}) answered {reply.status}: the reasoning item echoed "
                       f"back as Codex echoes it ({held(turn)}) was refused: {said}",
                       REFUSED_REASONING_FIX)
    if n > 1 and any(w in lower for w in TEMPLATE_WORDS):
        return Problem(f"turn {n} ({what}) answered {reply.status}: the chat template could not "
                       f"render the history ({held(turn)}): {_raised(reply.problem or '')}",
                       TEMPLATE_FIX)
    if "tool_call_id" in lower or "tool_use_id" in lower:
        return Problem(f"turn {n} ({what}) answered {reply.status} about the call's id: {said}",
                       "the server or proxy must accept the ids it handed out: a tool message "
                       "answers a call by tool_call_id (tool_use_id); check the proxy's "
                       "translation or update the engine")
    return Problem(f"turn {n} ({what}) answered {reply.status}: {said}",
                   known_fix(driver, reply.problem, reply.status))


def _raised(error: str) -> str:
    """The template's own words: llama.cpp wraps them in the parser's and the source excerpt."""
    at = error.rfind("Exception:")
    return one_line(error[at:] if at >= 0 else error, 240)


def call_args(arguments: Any) -> Any:
    """A call's arguments as an object where they are JSON text (else as sent)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


# -- judging the probes ----------------------------------------------------------------------
def judge(convs: Conversations, ctx: Context[Options]) -> None:
    """Each conversation: the calls come back, the results go in, a final text answer comes out."""
    opts, driver = ctx.options, ctx.driver
    found = []
    for i, turns in enumerate(convs.trials, 1):
        _show(turns, i, ctx)
        found.append(conversation_problem(turns, convs.steps, driver, opts.grounded,
                                          2 if convs.kind == "parallel" else 1, convs.carried))
    replies = [t.reply for turns in convs.trials for t in turns]
    thinking_spent(replies, ctx)
    # before the share that reached an answer: a turn of reasoning alone is the server losing
    # the call or the answer, named as such whatever min_pass_rate allows
    only = [r for r in replies if reasoning_only(r)]
    require_not_reasoning_only(replies, driver, _doing(convs), dropped_call_fix,
                               _evidence(convs) if only and only[0] is convs.diagnosed else None)
    k, passed = len(found), sum(p is None for p in found)
    ctx.note(f"{convs.kind}: {passed}/{k} conversation(s) reached a final answer "
             f"({passed / k:.0%}, need {opts.min_pass_rate:.0%})")
    if passed / k >= opts.min_pass_rate:
        # a loop that works, judged for its cost: turn 2 continues turn 1 from the cache
        require_prefix_reused([[t.reply for t in turns] for turns in convs.trials], driver,
                              ctx, _doing(convs))
        return
    first = next(p for p in found if p is not None)
    for turns in convs.trials:
        require_thinking_ended(turns[-1].reply, driver, "expect.agent.max_tokens")
    head = f"{_doing(convs)}: {passed}/{k} conversation(s) reached a final answer" if k > 1 \
        else _doing(convs)
    evidence = _evidence(convs) if first.reply is convs.diagnosed else None
    if first.reply is None or evidence is None:
        fail(f"{head}: {first.text}{first.reading}", first.fix)
    found_by = diagnose(evidence, driver,
                        own=None if first.fix is None else (first.cause, first.fix))
    # the claim's own reading only where the evidence names its cause
    reading = first.reading if found_by.fix is first.fix else ""
    fail(f"{head}: {first.text}{reading}; {found_by.line}", found_by.fix)


def _evidence(convs: Conversations) -> Evidence | None:
    """The evidence about the conversation's first faulty reply, with the engine's own reading
    of whether the tools reach the prompt where a forced call came back as text."""
    if convs.evidence is None:
        return None
    return with_render(convs.evidence, convs.carried)


def _show(turns: list[Turn], trial: int, ctx: Context[Options]) -> None:
    """The conversation, turn by turn: what was sent, what came back."""
    for n, turn in enumerate(turns, 1):
        reply = turn.reply
        ctx.note(f"trial {trial} turn {n} sent: {held(turn)}")
        if not reply.ok:
            ctx.note(f"trial {trial} turn {n} came back: {one_line(reply.problem_line, 200)}")
            continue
        calls = "; ".join(f"{c.name} {one_line(json.dumps(call_args(c.arguments)), 80)}"
                          for c in reply.calls)
        came = [f"finish {reply.finish}"] + ([f"calls {calls}"] if calls else []) + (
            [f"content {one_line(reply.content, 80)!r}"] if reply.content else [])
        ctx.note(f"trial {trial} turn {n} came back: {', '.join(came)}")
        for result in turn.results:
            ctx.note(f"trial {trial} turn {n} result: {one_line(result, 120)}")


def _doing(convs: Conversations) -> str:
    return {"plain": "agent step", "streamed": "streamed agent step",
            "parallel": "agent step with parallel calls"}[convs.kind] + \
        f" ({convs.steps} call(s), then the answer)"


def _parallel_applies(opts: Options, driver: Driver) -> str | None:
    return None if opts.parallel else (
        "expect.agent.parallel is not set (the endpoint does not claim parallel calls)")


PLAIN = Check("test_agent", "agent", plain, judge)
STREAMED = Check("test_agent_streamed", "agent", streamed, judge,
                 applies=lambda opts, driver: None if opts.stream else "expect.agent.stream is false")
PARALLEL = Check("test_agent_parallel", "agent", parallel, judge, applies=_parallel_applies)
