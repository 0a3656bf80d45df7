"""tools: tool calls a strict client can use. Every call names an offered tool, its arguments are
a JSON object that validates against the tool's schema (typed reasons as BFCL reports them), the
turn ends with finish_reason tool_calls / stop_reason tool_use, and ids are present. Plain chat
without tools stays plain text; streamed calls reassemble into the same calls."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pytest_frank.chat import Chat, Reply, Request
from pytest_frank.claims.replies import one_line, require_answer, require_budget
from pytest_frank.http import Exchange
from pytest_frank.verdict import fail

DEFAULT_MAX_TOKENS = 512
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
TOOLS = [WEATHER, CLOCK]
NAMED = "get_time"  # not the first tool: a server that ignores the name calls get_weather
PROMPTS = {
    "required": "What is the weather in Paris tomorrow? Use the get_weather tool.",
    "auto": "What is the weather in Paris tomorrow? Use the get_weather tool.",
    "named": "What time is it in Paris? Use the get_time tool.",
    "parallel": ("What is the weather tomorrow in Paris and in London? Call get_weather once "
                 "for each city, both calls at once."),
    "plain": "Say hello in one short sentence.",
}
# Tool-call markup of the common templates (Hermes/Qwen, Qwen3-XML, Llama, Mistral, DeepSeek).
MARKUP = re.compile(r"<tool_call>|</tool_call>|<function[=\s(>]|<tools>|<\|tool_call|"
                    r"\[TOOL_CALLS\]|<｜tool▁calls|<\|python_tag\|>")


@dataclass
class Trials:
    kind: str  # required | auto | named | parallel | plain | streamed
    replies: list[Reply]
    max_tokens: int
    exchanges: list[Exchange] = field(default_factory=list)


def settings(endpoint) -> dict:
    opts = endpoint.options("tools")
    return {"trials": int(opts.get("trials", 1)), "min_pass_rate": float(opts.get("min_pass_rate", 1.0)),
            "max_tokens": int(opts.get("max_tokens", DEFAULT_MAX_TOKENS)),
            "auto_must_call": bool(opts.get("auto_must_call", False)),
            "named": opts.get("named"), "parallel": bool(opts.get("parallel", False)),
            "stream": opts.get("stream", True) is not False}


def _run(target, kind: str, choice, trials: int | None = None, stream=False, parallel=None):
    s = settings(target.endpoint)
    tools = None if kind == "plain" else TOOLS
    prompt = PROMPTS["required" if kind == "streamed" else kind]
    with Chat(target) as chat:
        replies = [chat.send(Request(prompt, s["max_tokens"], tools=tools, tool_choice=choice,
                                     parallel=parallel, stream=stream))
                   for _ in range(trials or s["trials"])]
    return Trials(kind, replies, s["max_tokens"], list(chat.exchanges))


def probe_required(target) -> Trials:
    return _run(target, "required", "required")


def probe_auto(target) -> Trials:
    return _run(target, "auto", "auto")


def probe_named(target) -> Trials:
    return _run(target, "named", NAMED)


def probe_parallel(target) -> Trials:
    return _run(target, "parallel", "required", parallel=True)


def probe_plain(target) -> Trials:
    return _run(target, "plain", None, trials=1)


def probe_streamed(target) -> Trials:
    return _run(target, "streamed", "required", trials=1, stream=True)


# -- judging one call like a strict client -----------------------------------------------------
def call_problems(call, expected_name: str | None = None) -> list[str]:
    """Typed reasons this call would break a strict client; empty when it is usable."""
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    if call.name not in offered:
        return [f"wrong name: {call.name!r} is not an offered tool ({', '.join(offered)})"]
    if expected_name and call.name != expected_name:
        return [f"wrong name: called {call.name!r} but tool_choice named {expected_name!r}"]
    args = call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return [f"not JSON: {call.name} arguments {one_line(args, 80)!r} do not parse"]
    if not isinstance(args, dict):
        return [f"not JSON: {call.name} arguments are a JSON {type(args).__name__}, not an object"]
    problems = [_schema_reason(call.name, e) for e in _errors(offered[call.name], args)]
    if not call.id:
        problems.append(f"no id: the {call.name} call has no id to answer it with")
    return problems


def _errors(schema: dict, args: dict):
    import jsonschema

    return sorted(jsonschema.Draft202012Validator(schema).iter_errors(args), key=str)


def _schema_reason(name: str, error) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"missing required: {name} lacks {missing!r}"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"unexpected parameter: {name} got {', '.join(map(repr, extra))}"
    if error.validator == "type":
        return (f"wrong type: {name}.{where} is {json.dumps(error.instance)} "
                f"({type(error.instance).__name__}), the schema says {error.validator_value}")
    return f"invalid value: {name}.{where}: {error.message}"


def call_reply_problems(reply: Reply, expected_name=None, min_calls: int = 1) -> list[str]:
    """Why a reply that had to call a tool is not a usable tool call."""
    if not reply.calls:
        if MARKUP.search(reply.content):
            return [f"leaked markup: the tool call was written as text in content "
                    f"({one_line(reply.content, 100)!r}) with no structured call"]
        return [f"no tool call: answered {one_line(reply.content, 60)!r} "
                f"(finish_reason {reply.finish!r})"]
    problems = [p for call in reply.calls for p in call_problems(call, expected_name)]
    if not reply.tool_finish:
        problems.append(f"finish_reason {reply.finish!r}, not tool_calls (tool_use)")
    if MARKUP.search(reply.content):
        problems.append(f"leaked markup: tool markup left in content beside the structured call "
                        f"({one_line(reply.content, 80)!r})")
    if len(reply.calls) < min_calls:
        problems.append(f"parallel calls truncated: {len(reply.calls)} call(s) where "
                        f"{min_calls} were asked for at once")
    return problems


# -- judging the probes --------------------------------------------------------------------------
def judge_calls(trials: Trials, driver, min_pass_rate: float, note, expected_name=None,
                min_calls: int = 1) -> None:
    """Every trial must call usable tools; k trials pass when the valid share reaches the rate."""
    doing = _doing(trials)
    for reply in trials.replies:
        require_answer(reply, driver, doing)
        require_budget(reply, trials.max_tokens, "expect.tools.max_tokens")
    found = [call_reply_problems(r, expected_name, min_calls) for r in trials.replies]
    _judge_rate(trials, found, min_pass_rate, note, driver)


def judge_auto(trials: Trials, driver, min_pass_rate: float, must_call: bool, note) -> None:
    """tool_choice auto: the model may answer in text. Calls it makes must be usable, markup must
    not leak; not calling fails only when the fleet says the model must (auto_must_call)."""
    doing = _doing(trials)
    for reply in trials.replies:
        require_answer(reply, driver, doing)
        require_budget(reply, trials.max_tokens, "expect.tools.max_tokens")
    called = sum(bool(r.calls) for r in trials.replies)
    note(f"tool_choice auto: called a tool in {called}/{len(trials.replies)} trial(s) "
         f"(trigger rate {called / len(trials.replies):.0%})")
    found = []
    for reply in trials.replies:
        problems = call_reply_problems(reply)
        if not reply.calls and problems[0].startswith("no tool call") and not must_call:
            problems = []
        found.append(problems)
    _judge_rate(trials, found, min_pass_rate, note, driver)


def judge_plain(trials: Trials, driver) -> None:
    """Without tools the answer is text: a forced call means a global grammar or template."""
    reply = trials.replies[0]
    require_answer(reply, driver, "plain chat without tools")
    require_budget(reply, trials.max_tokens, "expect.tools.max_tokens")
    if reply.calls or reply.tool_finish or MARKUP.search(reply.content):
        shown = (f"{len(reply.calls)} tool call(s)" if reply.calls
                 else one_line(reply.content, 100) or f"finish_reason {reply.finish!r}")
        fail(f"plain chat without tools came back as a tool call ({shown}): every request is "
             f"forced into tool-call output", driver.forced_tools_fix)
    if not reply.content.strip():
        fail(f"plain chat without tools answered empty content (finish_reason {reply.finish!r})")


def judge_streamed(streamed: Trials, plain: Trials, driver, note) -> None:
    """The reassembled stream is a usable call, the same tools as the non-streamed answer."""
    judge_calls(streamed, driver, 1.0, note)
    s, p = streamed.replies[0], plain.replies[0]
    if not p.ok or not p.calls:
        return
    names_s, names_p = [c.name for c in s.calls], [c.name for c in p.calls]
    if names_s != names_p:
        fail(f"streamed tool calls {names_s} differ from the non-streamed {names_p}: the stream "
             f"reassembles into other calls", "check the engine's streaming tool parser "
             "(or the proxy's SSE translation)")
    for a, b in zip(s.calls, p.calls):
        if _parsed(a.arguments) != _parsed(b.arguments):
            note(f"{a.name}: streamed arguments {_parsed(a.arguments)} vs non-streamed "
                 f"{_parsed(b.arguments)} (both valid; sampling may differ)")


def _judge_rate(trials: Trials, found: list[list[str]], min_pass_rate: float, note, driver):
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
    fail(f"{head}; {'; '.join(first)}", _fix(first, driver))


def _fix(problems: list[str], driver) -> str | None:
    text = " ".join(problems)
    if "leaked markup" in text or "no tool call" in text:
        return driver.tool_parser_fix
    if "parallel calls truncated" in text:
        return driver.parallel_fix
    if "tool_choice named" in text:
        return "the server ignores a named tool_choice; set expect.tools.named: false if expected"
    return None


def _doing(trials: Trials) -> str:
    return {"required": 'tool_choice "required"', "auto": 'tool_choice "auto"',
            "named": f"tool_choice named {NAMED!r}", "parallel": "parallel tool calls",
            "streamed": 'streamed tool_choice "required"'}.get(trials.kind, trials.kind)


def _parsed(args):
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args
