"""tools: tool calls a strict client can use. Every call names an offered tool, its arguments are
a JSON object that validates against the tool's schema (typed reasons as BFCL reports them), the
turn ends with finish_reason tool_calls / stop_reason tool_use, and ids are present. Plain chat
without tools stays plain text; streamed calls reassemble into the same calls.

The calls are judged, so a reply cut while thinking is asked again with a larger budget
(chat.think_through); plain chat only has to show no call is forced, which a reply cut while
thinking already shows."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.diagnosis import MODEL, TEMPLATE, Evidence, Render, diagnose
from pytest_frank.claims.evidence import gather
from pytest_frank.claims.replies import (
    cut_while_thinking,
    dropped_answer_fix,
    one_line,
    reasoning_only,
    require_answer,
    require_not_reasoning_only,
    require_stream_agrees,
    require_thinking_ended,
    thinking_spent,
)
from pytest_frank.drivers import AnthropicDriver, LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.fleet import schema_errors
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Alt, Phrase, Text, fail, inconclusive
from pytest_frank.runtime.chat import Call, Reply, Request, send, shared, think_through
from pytest_frank.runtime.probes import slot_shape
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.runtime.target import Target

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather forecast for a city.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "days"],
                   "properties": {"city": {"type": "string", "description": "City name"},
                                  "days": {"type": "integer", "minimum": 1,
                                           "description": "Days ahead, 1 or more"}}}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a time zone.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["timezone"],
                   "properties": {"timezone": {"type": "string",
                                               "description": "IANA zone, e.g. Europe/Paris"}}}}}
TOOLS: list[dict[str, Any]] = [WEATHER, CLOCK]
NAMED = "get_time"  # not the first tool: a server that ignores the name calls get_weather
PROMPTS = {
    "required": "What is the weather in Paris tomorrow? Use the get_weather tool.",
    "auto": "What is the weather in Paris tomorrow? Use the get_weather tool.",
    "named": "What time is it in Paris? Use the get_time tool.",
    "parallel": ("What is the weather tomorrow in Paris and in London? Call get_weather once "
                 "for each city, both calls at once."),
    "parallel_auto": ("What is the weather tomorrow in Paris and in London? Call get_weather "
                      "once for each city, both calls at once."),
    "plain": "Say hello in one short sentence.",
}


class Markup:
    """A pattern searched only where one of its literal openings occurs in the text: a
    substring test skips the regex over an answer holding none (over a 4 MiB answer the
    regex alone takes 0.4 s, and each reply is judged in the probe phase and again after)."""

    def __init__(self, pattern: str, openings: tuple[str, ...]) -> None:
        self.pattern, self.openings = re.compile(pattern), openings

    def search(self, text: str) -> re.Match[str] | None:
        if not any(opening in text for opening in self.openings):
            return None
        return self.pattern.search(text)


# Tool-call markup of the common templates (Hermes/Qwen, Qwen3-XML, Llama, Mistral, DeepSeek,
# Kimi K2, gpt-oss harmony's recipient).
MARKUP = Markup(r"<tool_call>|</tool_call>|<function[=\s(>]|<tools>|<\|tool_call|"
                r"\[TOOL_CALLS\]|<｜tool▁calls|<\|python_tag\|>|\bto=functions\.",
                ("<tool_call>", "</tool_call>", "<function", "<tools>", "<|tool_call",
                 "[TOOL_CALLS]", "<｜tool▁calls", "<|python_tag|>", "to=functions."))


@dataclass(frozen=True)
class Options(ClaimOptions):
    trials: int = option(1, minimum=1, maximum=100, about=(
        "Requests per probe (required, auto, named, parallel); the rate of valid trials is "
        "reported, as K2-Vendor-Verifier's schema accuracy. Default: 1."))
    min_pass_rate: float = option(1.0, minimum=0, maximum=1, about=(
        "Share of trials that must be valid. Default: 1.0."))
    max_tokens: int = option(512, "The first budget per request. Default: 512.", minimum=1)
    auto_must_call: bool = option(False, about=(
        "Under `auto`, a text answer counts as a failure. Default: false."))
    named: bool | None = option(None, about=(
        "Probe a named tool_choice (default on except llama.cpp's chat route). Default: the "
        "driver's."))
    parallel: bool = option(False, "The endpoint claims parallel calls: probe them. Default: false.")
    stream: bool = option(True, about=(
        "False skips `test_tools_streamed` and the streamed asks of `test_tools_arguments`. "
        "Default: true."))
    # tool_choice "none" answers without a call (pytest_frank.claims.contract)
    none: bool = option(True, about=(
        "`test_tools_none`: tool_choice \"none\" with tools offered answers with no call, "
        "structured or written as text. False skips it. Default: true."))
    schemas: int = option(0, minimum=0, maximum=32, about=(
        "Tools of the generated schema corpus asked by `test_tools_schema_corpus`, one forced "
        "call each (`$defs`/`$ref` with recursion, `anyOf`/`oneOf`/`allOf`, enums, ranges, number "
        "and string formats, `additionalProperties: false`, nested arrays; strict and not, "
        "streamed and not): 4 covers every keyword and pairing once, up to 32 varies them. "
        "Default: 0 (not asked)."))
    schema_budget: int = option(1024, minimum=1, about=(
        "max_tokens of each corpus call: a model that recurses into optional `$ref`s ends there "
        "and is diagnosed as such. Default: 1024."))
    thinking: bool = option(False, about=(
        "The model thinks before it calls: `test_tools_forced_thinking` checks that `tool_choice: "
        "required` keeps the reasoning the same request has under `auto`. Default: false."))
    reference: str | None = option(None, about=(
        "The fleet endpoint whose tool-call decisions this one must share: "
        "`test_tools_trigger_agreement` asks both a fixed set of prompts (greedy, tools under "
        "`auto`) and scores agreement as F1, as K2 Vendor Verifier does. A replica (`same_as`) is "
        "compared with its original without it. Default: none."))
    min_trigger_f1: float = option(0.8, minimum=0, maximum=1, about=(
        "The least trigger F1 against the reference (precision and recall of finishing with "
        "tool_calls, the reference's decisions the truth). Default: 0.8."))


CLAIM = Claim("tools", "tool calls are well formed and validate against their schema", Options, order=60,
              tests=("test_tools_required", "test_tools_auto", "test_tools_named",
                     "test_tools_parallel", "test_tools_plain_chat", "test_tools_streamed",
                     "test_tools_arguments", "test_tools_none", "test_tools_parallel_auto",
                     "test_tools_schema_corpus", "test_tools_forced_thinking",
                     "test_tools_trigger_agreement"))


@dataclass(kw_only=True)
class Carried(Observation):
    """Whether the served template carries the tools into the prompt: the engine's own reading
    of the template (`caps`: yes or no, and where read) and the prompt's size (usage) with the
    tools and without them."""
    caps: tuple[bool, str] | None = None
    with_tools: int | None = None
    without: int | None = None

    @property
    def counted(self) -> bool:
        return self.with_tools is not None and self.without is not None

    @property
    def dropped(self) -> bool | None:
        """Whether the tools never reach the model: the counts first (what the engine did),
        else the engine's reading of its template; None where neither says."""
        if self.counted:
            return self.with_tools == self.without
        return None if self.caps is None else not self.caps[0]

    def evidence(self) -> str:
        parts = [self.caps[1]] if self.caps else []
        if self.counted and self.with_tools == self.without:
            parts.append(f"the prompt counted {self.with_tools} tokens with the tools and "
                         f"{self.without} without them")
        elif self.counted:
            parts.append(f"the prompt grew from {self.without} to {self.with_tools} tokens "
                         f"with the tools")
        return "; ".join(parts)


def carried(target: Target) -> Carried:
    """Asked where a call was forced and text came back: whether the tools reached the model."""
    shape = target.need(slot_shape)
    caps = None if isinstance(shape, Unseen) else target.driver.template.caps(
        shape.payloads).get("tools")
    counts = [send(target, Request(PROMPTS["required"], 1, tools=tools, tool_choice=choice))
              for tools, choice in ((TOOLS, "auto"), (None, None))]
    with_tools, without = (r.prompt_tokens if r.ok else None for r in counts)
    return Carried(caps=caps, with_tools=with_tools, without=without)


@dataclass(kw_only=True)
class Trials(Observation):
    kind: str  # required | auto | named | parallel | plain | streamed
    replies: list[Reply]
    max_tokens: int
    plain: Trials | None = None  # beside the streamed trial: the non-streamed one
    twin: Reply | None = None  # beside plain chat: the same request streamed, where asked
    carried: Carried | None = None  # where a forced call came back as text alone
    # where a forced call came back faulty: what tells its cause apart (claims.diagnosis)
    evidence: Evidence | None = None
    diagnosed: Reply | None = None  # the reply the evidence is about


# The kinds whose every trial must call: a faulty call there is diagnosed (under auto, not
# calling is the model's choice).
DIAGNOSED = {"required": (None, 1), "named": (NAMED, 1), "parallel": (None, 2),
             "streamed": (None, 1)}


def wrong_call(kind: str) -> Callable[[Reply], str | None]:
    """What is wrong with a reply to a `kind` trial, judged as its check judges it."""
    expected, min_calls = DIAGNOSED[kind]

    def wrong(reply: Reply) -> str | None:
        if not reply.ok:
            return reply.problem_line
        if reply.thinking_cut:
            return None
        found = call_reply_problems(reply, expected, min_calls)
        return found[0] if found else None
    return wrong


def _diagnosed(target: Target, trials: Trials, req: Request) -> None:
    """The evidence about the first answered trial with a faulty call; none where there is
    none (nothing more is asked then)."""
    if trials.kind not in DIAGNOSED:
        return
    wrong = wrong_call(trials.kind)
    trials.diagnosed = next((r for r in trials.replies if r.ok and not r.cut and wrong(r)), None)
    if trials.diagnosed is not None:
        trials.evidence = gather(target, req, trials.diagnosed, wrong)


def _run(target: Target, kind: str, choice: str | None, trials: int | None = None,
         stream: bool = False, parallel: bool | None = None) -> Trials:
    opts = Options.on(target.endpoint)
    tools = None if kind == "plain" else TOOLS
    prompt = PROMPTS["required" if kind == "streamed" else kind]
    req = Request(prompt, opts.max_tokens, tools=tools, tool_choice=choice, parallel=parallel,
                  stream=stream)
    if kind == "plain":
        replies = [send(target, req)]
    else:  # the first trial is the request the agent claim's first step sends too: shared
        replies = [shared(target, req)]
        replies += [think_through(target, req) for _ in range((trials or opts.trials) - 1)]
    found = Trials(kind=kind, replies=replies, max_tokens=opts.max_tokens)
    if choice not in (None, "auto") and any(answered_in_text(r) for r in replies):
        seen = target.need(carried)
        found.carried = None if isinstance(seen, Unseen) else seen
    _diagnosed(target, found, req)
    return found


def answered_in_text(reply: Reply) -> bool:
    """A reply that had to call and answered text with no call and no call markup in it."""
    return reply.ok and not reply.calls and not MARKUP.search(reply.content) and \
        not reply.thinking_cut


def required(target: Target) -> Trials:
    return _run(target, "required", "required")


def auto(target: Target) -> Trials:
    return _run(target, "auto", "auto")


def named(target: Target) -> Trials:
    return _run(target, "named", NAMED)


def parallel(target: Target) -> Trials:
    return _run(target, "parallel", "required", parallel=True)


def parallel_auto(target: Target) -> Trials:
    return _run(target, "parallel_auto", "auto", parallel=True)


def plain(target: Target) -> Trials:
    """Chat without tools on a server that parses tools, and, where the reasoning claim's own
    pair does not already compare a request without tools plain and streamed, the same request
    streamed: a tool parser's streaming path is where content deltas came twice (vLLM PR
    46183). A non-thinking endpoint's short answer, so the twin costs a few tokens."""
    trials = _run(target, "plain", None, trials=1)
    if not target.endpoint.asks("reasoning"):
        req = Request(PROMPTS["plain"], Options.on(target.endpoint).max_tokens, stream=True)
        trials.twin = send(target, req)
    return trials


def streamed(target: Target) -> Trials:
    trials = _run(target, "streamed", "required", trials=1, stream=True)
    # Where the non-streamed probe saw nothing (test_tools_required fails on that), there is
    # no answer to compare the stream with: judge_streamed judges the stream alone.
    seen = target.need(required)
    trials.plain = None if isinstance(seen, Unseen) else seen
    return trials


# -- judging one call like a strict client -----------------------------------------------------
class Problem(str):
    """One reason a call is unusable, as the reports word it; `cause` says which server setting
    is to blame where one is known (MARKUP_LEFT, NO_CALL, TRUNCATED, NAME_IGNORED)."""

    cause: str | None

    def __new__(cls, text: str, cause: str | None = None) -> Problem:
        problem = super().__new__(cls, text)
        problem.cause = cause
        return problem


MARKUP_LEFT, NO_CALL, TRUNCATED, NAME_IGNORED = "markup", "no call", "truncated", "name ignored"
# What the wire breaks between the model and the client: the server's tool parser or a gateway.
ARGS_NOT_TEXT, EMPTY_ARGS, NAME_CUT, SAME_ID, NUMBER_FOR_STRING, ENCODED = (
    "arguments not text", "empty arguments", "name cut", "same id", "number for string",
    "encoded")


def call_problems(call: Call, expected_name: str | None = None,
                  tools: list[dict] = TOOLS) -> list[str]:
    """Typed reasons this call would break a strict client; empty when it is usable."""
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    args, unreadable = _arguments(call)
    if call.name is None or call.name not in offered:
        return [_cut_name(call, offered, args) or
                f"wrong name: {call.name!r} is not an offered tool ({', '.join(offered)})"]
    if expected_name and call.name != expected_name:
        return [Problem(f"wrong name: called {call.name!r} but tool_choice named "
                        f"{expected_name!r}", NAME_IGNORED)]
    if unreadable:
        return [unreadable]
    if not isinstance(args, dict):
        return [f"not JSON: {call.name} arguments are a JSON {type(args).__name__}, not an object"]
    found = schema_errors.problems(offered[call.name], args, _as_json)
    cut = _cut_name(call, offered, args) if found else None
    if cut:
        return [cut]
    problems = [_schema_reason(call.name, p, args) for p in found]
    if not call.id:
        problems.append(f"no id: the {call.name} call has no id to answer it with")
    return problems


def _arguments(call: Call) -> tuple[Any, str | None]:
    """The call's arguments decoded as a strict client decodes them (JSON.parse on the text the
    chat wire sends), or why they cannot be."""
    args = call.arguments
    if call.as_text and args is not None and not isinstance(args, str):
        kind = {dict: "object", list: "array", bool: "boolean"}.get(type(args), "number")
        return None, Problem(
            f"arguments not a string: the {call.name} call's function.arguments came as a JSON "
            f"{kind} ({_as_json(args)}), where the chat API sends them as a JSON string: a "
            f"reader that decodes leniently takes it, a client that calls JSON.parse on it "
            f"breaks", ARGS_NOT_TEXT)
    if args is None or (isinstance(args, str) and not args.strip()):
        what = "no arguments (null or missing)" if args is None else "arguments '' (empty text)"
        return None, Problem(
            f"empty arguments: the {call.name} call came with {what}, not '{{}}': a call "
            f"without arguments still carries an empty object, and a client's JSON.parse "
            f"breaks on this", EMPTY_ARGS)
    if isinstance(args, str):
        try:
            return json.loads(args), None
        except ValueError:
            return None, f"not JSON: {call.name} arguments {one_line(args, 80)!r} do not parse"
    return args, None


def _cut_name(call: Call, offered: dict[str, dict], args: Any) -> Problem | None:
    """A name that is the start of another offered tool's name, with that tool's arguments: the
    name was cut (a streaming parser that emits a name once it matches an offered tool's start,
    vLLM PR 45915), so a client runs the shorter tool or finds none."""
    if not call.name or not isinstance(call.name, str) or not isinstance(args, dict):
        return None
    for name, schema in offered.items():
        if name != call.name and name.startswith(call.name) and \
                not schema_errors.problems(schema, args):
            runs = (f"a client runs {call.name!r} instead" if call.name in offered
                    else "a client finds no tool by that name")
            return Problem(f"name cut short: the call is named {call.name!r}, the start of the "
                           f"offered {name!r}, and carries {name}'s arguments "
                           f"({_as_json(args)}): {runs}", NAME_CUT)
    return None


def _as_json(value: Any, path: schema_errors.Path = ()) -> str:
    return one_line(json.dumps(value, default=str), 60)


def _at(args: Any, path: schema_errors.Path) -> Any:
    """The value at a schema problem's path inside the arguments (None where it is not)."""
    for key in path:
        try:
            args = args[key]
        except (KeyError, IndexError, TypeError):
            return None
    return args


def _schema_reason(name: str, problem: schema_errors.SchemaProblem, args: Any = None) -> str:
    """A schema problem in BFCL's categories: missing required, unexpected parameter, ...; a
    wrong type that a parser or gateway makes (a string read as a number, an array sent as
    JSON text) is named as such."""
    where = f"{name}.{problem.where}" if problem.where else name
    if problem.kind == "missing":
        return f"missing required: {where} lacks {', '.join(map(repr, problem.names))}"
    if problem.kind == "unknown":
        return f"unexpected parameter: {where} got {', '.join(map(repr, problem.names))}"
    if problem.kind == "type":
        return _converted(where, problem, _at(args, problem.path)) or \
            f"wrong type: {where}: {problem.reason}"
    return f"invalid value: {where}: {problem.reason}"


def _converted(where: str, problem: schema_errors.SchemaProblem, value: Any) -> Problem | None:
    """A wrong type that reads as a conversion by the value's look, not by the schema."""
    if isinstance(value, str) and {"array", "object"} & set(problem.expected):
        try:
            inner = json.loads(value)
        except ValueError:
            return None
        kind = "array" if isinstance(inner, list) else "object" if isinstance(inner, dict) else None
        if kind is None or kind not in problem.expected:
            return None
        return Problem(f"{kind} sent as a JSON string: {where} is the text "
                       f"{one_line(value, 60)!r}, where the schema types it {kind}: a client "
                       f"hands the tool the text, not the {kind} it spells", ENCODED)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and \
            "string" in problem.expected and not {"number", "integer"} & set(problem.expected):
        return Problem(f"number for a string: {where} is the number {value}, where the schema "
                       f"types it a string: a client hands the tool a number where it takes "
                       f"text (a ZIP code like '02134' loses its leading zero)", NUMBER_FOR_STRING)
    return None


def call_reply_problems(reply: Reply, expected_name: str | None = None, min_calls: int = 1,
                        tools: list[dict] = TOOLS) -> list[str]:
    """Why a reply that had to call a tool is not a usable tool call."""
    if not reply.calls:
        if MARKUP.search(reply.content):
            return [Problem(f"leaked markup: the tool call was written as text in content "
                            f"({one_line(reply.content, 100)!r}) with no structured call",
                            MARKUP_LEFT)]
        return [Problem(f"no tool call: answered {one_line(reply.content, 60)!r} "
                        f"(finish_reason {reply.finish!r})", NO_CALL)]
    problems = [p for call in reply.calls for p in call_problems(call, expected_name, tools)]
    if not reply.tool_finish:
        problems.append(f"finish_reason {reply.finish!r}, not tool_calls (tool_use)")
    if MARKUP.search(reply.content):
        problems.append(Problem(f"leaked markup: tool markup left in content beside the "
                                f"structured call ({one_line(reply.content, 80)!r})", MARKUP_LEFT))
    ids = [c.id for c in reply.calls if isinstance(c.id, str) and c.id]
    for twice in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(Problem(f"same id: {ids.count(twice)} of the {len(reply.calls)} calls "
                                f"share the id {one_line(twice, 40)!r}: a client answers each "
                                f"call by its id (tool_call_id), so the answers cannot tell "
                                f"the calls apart", SAME_ID))
    if len(reply.calls) < min_calls:
        problems.append(Problem(f"parallel calls truncated: {len(reply.calls)} call(s) where "
                                f"{min_calls} were asked for at once", TRUNCATED))
    return problems


# -- judging the probes --------------------------------------------------------------------------
def judge_calls(trials: Trials, ctx: Context[Options], expected_name: str | None = None,
                min_calls: int = 1) -> None:
    """Every trial must call usable tools; k trials pass when the valid share reaches the rate."""
    _require_answers(trials, ctx)
    found = [call_reply_problems(r, expected_name, min_calls) for r in trials.replies]
    _judge_rate(trials, found, ctx)


def judge_named(trials: Trials, ctx: Context[Options]) -> None:
    """tool_choice naming a tool: every trial calls that tool, usably."""
    judge_calls(trials, ctx, expected_name=NAMED)


def judge_parallel(trials: Trials, ctx: Context[Options]) -> None:
    """Parallel calls asked for at once: every trial makes at least two usable calls."""
    judge_calls(trials, ctx, min_calls=2)


def judge_auto(trials: Trials, ctx: Context[Options]) -> None:
    """tool_choice auto: the model may answer in text. Calls it makes must be usable, markup must
    not leak; not calling fails only when the fleet says the model must (auto_must_call)."""
    _judge_under_auto(trials, ctx, 1, lambda called, k: (
        f"tool_choice auto: called a tool in {called}/{k} trial(s) (trigger rate "
        f"{called / k:.0%})"))


def judge_parallel_auto(trials: Trials, ctx: Context[Options]) -> None:
    """Parallel calls under tool_choice auto: where the model calls, the calls asked for at
    once come back together (a server may cut them to one under auto alone, where a lazy
    grammar or the parser takes over mid-answer); a text answer fails only with
    auto_must_call."""
    _judge_under_auto(trials, ctx, 2, lambda called, k: (
        f"tool_choice auto with parallel calls: called in {called}/{k} trial(s)"))


def _judge_under_auto(trials: Trials, ctx: Context[Options], min_calls: int,
                      said: Callable[[int, int], str]) -> None:
    """Each trial's calls judged, a text answer no fault unless auto_must_call; `said(called,
    trials)` notes how often the model called."""
    _require_answers(trials, ctx)
    ctx.note(said(sum(bool(r.calls) for r in trials.replies), len(trials.replies)))
    found = []
    for reply in trials.replies:
        problems = call_reply_problems(reply, min_calls=min_calls)
        if problems and _cause(problems[0]) == NO_CALL and not ctx.options.auto_must_call:
            problems = []
        found.append(problems)
    _judge_rate(trials, found, ctx)


def judge_plain(trials: Trials, ctx: Context[Options]) -> None:
    """Without tools the answer is text: a forced call means a global grammar or template."""
    reply, driver, doing = trials.replies[0], ctx.driver, "plain chat without tools"
    require_answer(reply, driver, doing)
    if cut_while_thinking(reply, ctx, doing):
        return  # no call was forced before the budget ran out
    _require_answers(trials, ctx, doing)
    if reply.calls or reply.tool_finish or MARKUP.search(reply.content):
        shown = (f"{len(reply.calls)} tool call(s)" if reply.calls
                 else one_line(reply.content, 100) or f"finish_reason {reply.finish!r}")
        fail(f"plain chat without tools came back as a tool call ({shown}): every request is "
             f"forced into tool-call output", forced_tools_fix(driver))
    if not reply.content.strip():
        fail(f"plain chat without tools answered empty content (finish_reason {reply.finish!r})")
    twin = trials.twin
    if twin is not None:
        require_answer(twin, driver, f"{doing}, streamed")
        require_stream_agrees(twin, reply, ctx, doing)


def judge_streamed(streamed: Trials, ctx: Context[Options]) -> None:
    """The reassembled stream is a usable call, the same tools as the non-streamed answer."""
    _require_answers(streamed, ctx)
    _judge_rate(streamed, [call_reply_problems(r) for r in streamed.replies], ctx, 1.0)
    s, p = streamed.replies[0], streamed.plain.replies[0] if streamed.plain else None
    if p is None or not p.ok or not p.calls:
        return
    wrong = call_reply_problems(p)
    if wrong:  # the stream's call is usable (judged above): the non-streamed path is at fault
        ctx.note(f"the streamed call is usable; the non-streamed answer to the same request is "
                 f"not ({wrong[0]}): test_tools_required judges that path")
        return
    require_stream_agrees(s, p, ctx, _doing(streamed))
    names_s, names_p = [c.name for c in s.calls], [c.name for c in p.calls]
    if names_s != names_p:  # sampled: both valid (judged above), the draws may differ
        ctx.note(f"streamed tool calls {names_s}, non-streamed {names_p}: both valid; at "
                 f"temperature {ctx.endpoint.sampling.get('temperature')} the draws may differ")
        return
    for a, b in zip(s.calls, p.calls):
        if _parsed(a.arguments) != _parsed(b.arguments):
            ctx.note(f"{a.name}: streamed arguments {_parsed(a.arguments)} vs non-streamed "
                     f"{_parsed(b.arguments)} (both valid)")


# -- arguments on the wire ---------------------------------------------------------------------
# A tool without parameters, and a second whose name starts with the first's (a coding agent's
# `run` beside `run_in_terminal`), with an array and a string that reads as a number.
RUN: dict[str, Any] = {"type": "function", "function": {
    "name": "run", "description": "Run the project's default task. Takes no arguments.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}}
TERMINAL: dict[str, Any] = {"type": "function", "function": {
    "name": "run_in_terminal", "description": "Run a command in the terminal.",
    "parameters": {"type": "object", "additionalProperties": False,
                   "required": ["command", "args", "job"],
                   "properties": {"command": {"type": "string", "description": "Program to run"},
                                  "args": {"type": "array", "items": {"type": "string"},
                                           "minItems": 1, "description": "Its arguments"},
                                  "job": {"type": "string",
                                          "description": "Job number as written, leading "
                                                         "zeros kept"}}}}}
RUN_PROMPT = "Start the project's default task: call the run tool, which takes no arguments."
TERMINAL_PROMPT = ('Use the run_in_terminal tool to run the command "make" with the argument '
                   '"test" for job "02134".')
# (label, tools in the order offered, streamed, prompt): the first offered is the one asked
# for, as a model that calls the first tool it is offered does too.
WIRE_ASKS: list[tuple[str, list[dict], bool, str]] = [
    ("run (no arguments), whole", [RUN, TERMINAL], False, RUN_PROMPT),
    ("run (no arguments), streamed", [RUN, TERMINAL], True, RUN_PROMPT),
    ("run_in_terminal, streamed", [TERMINAL, RUN], True, TERMINAL_PROMPT)]


@dataclass(kw_only=True)
class Wire(Observation):
    labels: list[str]
    tools: list[list[dict]]
    replies: list[Reply]


def wire(target: Target) -> Wire:
    """The asks of WIRE_ASKS under tool_choice required (the streamed ones only where the
    endpoint streams tools)."""
    opts = Options.on(target.endpoint)
    asks = [a for a in WIRE_ASKS if opts.stream or not a[2]]
    replies = [think_through(target, Request(prompt, opts.max_tokens, tools=tools,
                                             tool_choice="required", stream=stream))
               for _, tools, stream, prompt in asks]
    return Wire(labels=[a[0] for a in asks], tools=[a[1] for a in asks], replies=replies)


def judge_wire(obs: Wire, ctx: Context[Options]) -> None:
    """Each call arrives as the chat API sends it: arguments as a JSON string, '{}' for a tool
    without parameters (plain and streamed), ids present and distinct, a name that shares its
    start with another tool's whole when streamed, values of the schema's own types."""
    for label, reply in zip(obs.labels, obs.replies):
        require_answer(reply, ctx.driver, f"tool arguments on the wire, {label}")
        require_thinking_ended(reply, ctx.driver, "expect.tools.max_tokens")
    thinking_spent(obs.replies, ctx)
    empty_seen = False
    for label, tools, reply in zip(obs.labels, obs.tools, obs.replies):
        problems = call_reply_problems(reply, tools=tools)
        calls = ", ".join(f"{c.name}({one_line(_shown(c.arguments), 60)})" for c in reply.calls)
        ctx.note(f"{label}: " + (problems[0] if problems else f"valid {calls}"))
        if problems:
            fail(f"tool arguments on the wire, {label}: {'; '.join(problems)}",
                 _fix(problems, ctx.driver))
        asked = tools[0]["function"]["name"]
        if asked not in [c.name for c in reply.calls]:
            ctx.note(f"{label}: the model called {calls} where {asked} was asked; valid, "
                     f"but not the call this ask is about")
        empty_seen = empty_seen or any(c.name == RUN["function"]["name"] for c in reply.calls)
    if not empty_seen:
        inconclusive("the model never called the tool without parameters (run): whether such "
                     "a call carries '{}' is not shown")


def _shown(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)


def _require_answers(trials: Trials, ctx: Context[Options], doing: str | None = None) -> None:
    for reply in trials.replies:
        require_answer(reply, ctx.driver, doing or _doing(trials))
        require_thinking_ended(reply, ctx.driver, "expect.tools.max_tokens")
    # before the valid share: reasoning alone is the server losing the reply, not a bad call
    only = [r for r in trials.replies if reasoning_only(r)]
    evidence = trials.evidence if only and only[0] is trials.diagnosed else None
    require_not_reasoning_only(trials.replies, ctx.driver, doing or _doing(trials),
                               dropped_call_fix,
                               None if evidence is None else with_render(evidence, trials.carried))
    thinking_spent(trials.replies, ctx)


def _judge_rate(trials: Trials, found: list[list[str]], ctx: Context[Options],
                min_pass_rate: float | None = None) -> None:
    min_pass_rate = ctx.options.min_pass_rate if min_pass_rate is None else min_pass_rate
    note, driver = ctx.note, ctx.driver
    k, passed = len(found), sum(not p for p in found)
    rate = passed / k
    note(f"{trials.kind}: {passed}/{k} trial(s) valid ({rate:.0%}, need {min_pass_rate:.0%})")
    for i, problems in enumerate(found, 1):
        for problem in problems:
            note(f"  trial {i}: {problem}")
    if rate >= min_pass_rate:
        return
    first = next(p for p in found if p)
    head = f"{_doing(trials)}: {passed}/{k} trial(s) valid ({rate:.0%}, need {min_pass_rate:.0%})"
    why = no_call(trials.carried, driver)[0] if NO_CALL in {_cause(p) for p in first} else ""
    fix = _fix(first, driver, trials.carried)
    if trials.evidence is None:
        fail(f"{head}; {'; '.join(first)}{why}", fix)
    found_by = diagnose(with_render(trials.evidence, trials.carried), driver,
                        own=None if fix is None else (_own_cause(first, trials.carried), fix))
    if found_by.fix is not fix:  # another cause than the claim's own: its reading is not said
        why = ""
    fail(f"{head}; {'; '.join(first)}{why}; {found_by.line}", found_by.fix)


def _own_cause(problems: list[str], carried: Carried | None) -> str:
    """Whose fault the claim's own fix names: the model where the tools reached it and it
    answered in text, else the template and the parser it selects."""
    causes = {_cause(p) for p in problems}
    if NO_CALL in causes and MARKUP_LEFT not in causes and carried is not None \
            and carried.dropped is False:
        return MODEL
    return TEMPLATE


def with_render(evidence: Evidence, carried: Carried | None) -> Evidence:
    """The evidence with the engine's own reading of whether the tools reach the prompt."""
    if carried is None or carried.dropped is None:
        return evidence
    return replace(evidence, render=Render(not carried.dropped, carried.evidence()))


def _cause(problem: str) -> str | None:
    return problem.cause if isinstance(problem, Problem) else None


def no_call(carried: Carried | None, driver: Driver) -> tuple[str, Text | None]:
    """Why a forced call came back as text, from whether the tools reached the model: what
    the diagnosis adds, and the fix. Unknown: the parser, as before any facts."""
    dropped = carried.dropped if carried is not None else None
    if dropped is None or carried is None:
        return "", tool_parser_fix(driver)
    if dropped:
        return (f": the chat template cannot carry tools ({carried.evidence()}): the engine "
                f"drops them without a word and the model never sees them",
                tools_template_fix(driver))
    return (f": the template carries the tools ({carried.evidence()}) and the model still "
            f"answered in text, a model limit, not a serving fault",
            "serve a model trained to call tools, or turn expect.tools (and expect.agent) off "
            "for this one")


def _fix(problems: list[str], driver: Driver, carried: Carried | None = None) -> Text | None:
    """The fix for the worst cause among a trial's problems: the parser, then parallel calls."""
    causes = {_cause(p) for p in problems}
    if NO_CALL in causes and MARKUP_LEFT not in causes:
        return no_call(carried, driver)[1]
    if causes & {MARKUP_LEFT, NO_CALL}:
        return tool_parser_fix(driver, "\n".join(problems))
    if TRUNCATED in causes:
        return PARALLEL_FIX
    if NAME_IGNORED in causes:
        return "the server ignores a named tool_choice; set expect.tools.named: false if expected"
    found = next((WIRE_FIXES[c] for c in WIRE_FIXES if c in causes), None)
    # an error answer among them: the usual fix for its words (a reply no client can read)
    return found or known_fix(driver, "\n".join(problems))


def _doing(trials: Trials) -> str:
    return {"required": 'tool_choice "required"', "auto": 'tool_choice "auto"',
            "named": f"tool_choice named {NAMED!r}", "parallel": "parallel tool calls",
            "parallel_auto": 'parallel tool calls under tool_choice "auto"',
            "streamed": 'streamed tool_choice "required"'}.get(trials.kind, trials.kind)


def _parsed(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def _named_applies(opts: Options, driver: Driver) -> str | None:
    if opts.named if opts.named is not None else driver.honours_named_tool_choice:
        return None
    return (f"{driver.label} treats a named tool_choice as auto "
            f"(set expect.tools.named: true to probe it anyway)")


REQUIRED = Check("test_tools_required", "tools", required, judge_calls)
AUTO = Check("test_tools_auto", "tools", auto, judge_auto)
NAMED_CHOICE = Check("test_tools_named", "tools", named, judge_named, applies=_named_applies)
PARALLEL = Check("test_tools_parallel", "tools", parallel, judge_parallel,
                 applies=lambda opts, driver: None if opts.parallel else (
                     "expect.tools.parallel is not set (the endpoint does not claim parallel "
                     "calls)"))
PARALLEL_AUTO = Check("test_tools_parallel_auto", "tools", parallel_auto, judge_parallel_auto,
                      asked=lambda opts: opts.parallel,
                      when="with `parallel`")
PLAIN = Check("test_tools_plain_chat", "tools", plain, judge_plain)
STREAMED = Check("test_tools_streamed", "tools", streamed, judge_streamed,
                 applies=lambda opts, driver: None if opts.stream else "expect.tools.stream is false")
WIRE = Check("test_tools_arguments", "tools", wire, judge_wire)


# -- advice: tool calls by engine, named by the driver's flags ----------------------------------
PARALLEL_FIX = ("the server cut parallel calls to one: enable parallel tool calls in the "
                "template/parser (llama.cpp: a template with supports_parallel_tool_calls; "
                "vLLM: a parser that splits several calls), or drop expect.tools.parallel")


# Each names the two places these faults arise: the server's tool-call parser, which turns the
# model's text into calls, and a gateway in front that re-encodes them.
WIRE_FIXES = {
    ARGS_NOT_TEXT: "send function.arguments as the JSON text of the arguments (the string "
                   "'{\"city\": ...}'), as the chat API does: a gateway in front that re-encodes "
                   "the calls, or the server's tool-call parser, hands over the decoded object; "
                   "fix or update whichever sits between the model and the client",
    EMPTY_ARGS: "a call without arguments must carry '{}': the server's tool-call parser, or a "
                "gateway in front, sends empty text or null when the model wrote no arguments; "
                "update the engine or fix the gateway",
    NAME_CUT: "a streamed call's name must arrive whole: the server's streaming tool parser "
              "emits a name as soon as it matches the start of an offered tool's (vLLM PR "
              "45915), or a gateway re-chunks it; update the engine, or fix the gateway",
    SAME_ID: "every call needs an id of its own: the server's tool-call parser (or a gateway "
             "that re-stamps ids) gives several calls one id; update the engine or fix the "
             "gateway",
    NUMBER_FOR_STRING: "convert each argument by the tool's schema, not by how it looks: the "
                       "server's tool-call parser (or a gateway in front) turns a string that "
                       "reads as a number into a number (smg PR 1841); update the engine's "
                       "parser or fix the gateway (where the model writes its calls as JSON, "
                       "it wrote the number itself: strict tools constrain it to a string)",
    ENCODED: "send an array or object argument as itself: the server's tool-call parser (or a "
             "gateway in front) encoded it a second time, as JSON text inside the arguments "
             "(opencode 1809); update the engine's parser or fix the gateway",
}


# Tool-call families a call left in content can be told by. A Qwen3.5 / Qwen3-Coder XML call
# (vLLM's qwen3_xml and qwen3_coder parsers): its parameter tag sets it apart from the other
# formats that open with <function=. A Kimi K2 call: its call marker, then its id
# functions.NAME:INDEX. A Mistral call: [TOOL_CALLS], then the name and [ARGS] (Ministral 3,
# Magistral), [CALL_ID] (Small 3.2) or a JSON list (earlier models). A GLM 4.5+ call: its
# arguments as <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>. A gpt-oss harmony call: a
# message addressed to=functions.NAME. A DeepSeek V3.1 call: its call marker.
@dataclass(frozen=True)
class Family:
    name: str  # the key of the drivers' facts about it (call_family_markers, _parsers)
    label: str
    holds: str  # what the content holds, in a sentence
    pattern: re.Pattern
    where: str = ""  # where in the model's text the engine looks for such a call
    tail: str = ""  # what no template fixes


QWEN3_XML = re.compile(r"<function=[^>\s]*>\s*(<parameter=|</function>)")
KIMI_K2 = re.compile(r"<\|tool_call_begin\|>\s*functions\.")
DEEPSEEK = re.compile(r"<｜tool▁call▁begin｜>")
HARMONY = re.compile(r"\bto=functions\.[\w.-]+")
GLM = re.compile(r"<arg_key>[^<]*</arg_key>\s*<arg_value>")
MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*(\w[\w.-]*\s*\[(ARGS|CALL_ID)\]|\[)")
FAMILIES = (
    Family("qwen3_xml", "Qwen3 XML", "a Qwen3 XML tool call (<function=NAME><parameter=KEY>)", QWEN3_XML,
           "only inside <tool_call>...</tool_call> and ",
           "; a call without its <tool_call> opener stays text under any template, a model or "
           "quantisation fault"),
    Family("kimi_k2", "Kimi K2", "a Kimi K2 tool call (<|tool_call_begin|>functions.NAME:INDEX"
                      "<|tool_call_argument_begin|>)", KIMI_K2),
    Family("mistral", "Mistral", "a Mistral tool call ([TOOL_CALLS]NAME[ARGS]{...})", MISTRAL),
    Family("harmony", "gpt-oss harmony", "a gpt-oss harmony tool call (<|channel|>commentary "
                                         "to=functions.NAME ... <|message|>{...})", HARMONY),
    Family("deepseek_v31", "DeepSeek V3.1", "a DeepSeek V3.1 tool call (<｜tool▁call▁begin｜>"
                                            "NAME<｜tool▁sep｜>{...})", DEEPSEEK),
    Family("glm45", "GLM 4.5", "a GLM 4.5 tool call (<tool_call>NAME <arg_key>KEY</arg_key>"
                    "<arg_value>VALUE</arg_value>)", GLM),
)


def leaked_family(leaked: str) -> Family | None:
    """The tool-call family whose call the text holds, where it is one FAMILIES knows."""
    return next((f for f in FAMILIES if f.pattern.search(leaked)), None)


def template_family(driver: Driver, payloads: dict) -> str | None:
    """Which family's calls the served template selects, and the parser each engine needs for
    it (frank init's comment); None where the engine's template says no family FAMILIES knows."""
    from pytest_frank.drivers import driver_for

    read = driver.template.call_family(payloads)
    family = next((f for f in FAMILIES if read and f.name == read[0]), None)
    if family is None or read is None:
        return None
    parser = driver_for("vllm").call_family_parsers.get(family.name)
    return (f"calls in the {family.label} format ({read[1]}): {driver.label}'s parser for them"
            + (f"; vLLM: --tool-call-parser {parser}" if parser else ""))


def dropped_call_fix(driver: Driver | None) -> Text:
    """What leaves tokens past the thinking that reach the client as neither content nor a
    call: a call the server took out of the reply and sent nowhere."""
    family = next((f for f in FAMILIES if driver and f.name == driver.drops_unparsed_calls),
                  None)
    parser = driver.call_family_parsers.get(family.name) if driver and family else None
    if driver and family and parser:
        return Phrase(driver.start or "start the server with ", driver.flags["auto_tool_choice"],
                      " ", driver.flags["tool_parser"](parser), ": a ", driver.label,
                      " serving a ", family.label, " model takes tools without a tool-call "
                      "parser, and drops each call the model writes")
    return dropped_answer_fix(driver)


def tool_parser_fix(driver: Driver, leaked: str = "") -> Text:
    """How the engine turns the model's tool markup into tool calls; `leaked` (the markup left
    in content, where known) names the call format when it is one the engine's facts know."""
    family = leaked_family(leaked)
    markers = driver.template.call_family_markers.get(family.name) if driver and family else None
    parser = driver.call_family_parsers.get(family.name) if driver and family else None
    if family and markers:
        # --jinja as an alternative: a server that has it on still needs the family's template
        return Phrase("the content holds ", family.holds, ", which ", driver.label, " parses ",
                      family.where, "only from a served template that carries that format (",
                      ", ".join(markers), "): the template decides the parser. Serve ",
                      Alt("with ", driver.flags["jinja"], " and "), "the model's own template (",
                      driver.flags["template"], ")", family.tail)
    if family and parser:
        # A flag picks the parser (vLLM): the one for this family, named by the driver.
        return Phrase("the content holds ", family.holds, ", which the ", driver.label,
                      "'s tool-call parser left as text: ", driver.start or "start the server with ",
                      driver.flags["auto_tool_choice"], " ", driver.flags["tool_parser"](parser),
                      ", the parser for that format (a parser for another format, or none, "
                      "leaves such calls in content)")
    return advise(
        driver, "turn on the server's tool-call parser for this model's format (vLLM "
                "--enable-auto-tool-choice --tool-call-parser <name>; llama.cpp --jinja with the "
                "model's own template)",
        {LlamaCppDriver: lambda d: Phrase("llama.cpp reads the tool-call format from the chat "
                                          "template: serve ", Alt("with ", d.flags["jinja"], " and "),
                                          "the model's own template (", d.flags["template"], ") so "
                                          "the autoparser recognises the model's tool markup"),
         VllmDriver: lambda d: f"{d.start}--enable-auto-tool-choice --tool-call-parser <the parser "
                               "for the model's format: hermes, qwen3_xml, qwen3_coder, ...>; a "
                               "wrong parser leaves the call in content",
         SglangDriver: lambda d: f"{d.start}--tool-call-parser <the parser for the model's format, "
                                 "e.g. qwen25, qwen3_coder>; a wrong parser leaves the call in content",
         AnthropicDriver: "the proxy passes tool calls through only when the upstream parses them: "
                          "turn on the upstream's tool-call parser (llama.cpp --jinja with the "
                          "model's template, vLLM --tool-call-parser)"})


def tools_template_fix(driver: Driver) -> Text:
    return advise(
        driver, "serve a model whose chat template renders tools (or give this model one that "
                "does), or turn expect.tools (and expect.agent) off for this endpoint",
        {LlamaCppDriver: lambda d: Phrase("serve a model whose own template renders tools "
                                          "(llama.cpp reads chat_template_caps.supports_tools from "
                                          "it), or give this model a template that does (",
                                          d.flags["template"], "); else turn expect.tools (and "
                                          "expect.agent) off for this endpoint")})


def forced_tools_fix(driver: Driver) -> Text:
    """What forces tool-call output on a request that asked for none."""
    return advise(
        driver, "something forces tool-call output on every request: drop a server-wide grammar "
                "(llama.cpp --grammar-file) or structured-output default and pass grammars per "
                "request",
        {LlamaCppDriver: "drop --grammar-file from the server command: a global grammar forces "
                         "tool-call output on plain chat (pass grammars per request)",
         VllmDriver: "something forces tool-call output on plain chat: check for a server-wide "
                     "structured-output default (--guided-decoding-*, generation config) or a "
                     "template that always emits a tool call"})
