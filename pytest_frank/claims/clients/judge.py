"""The judge: the client's first request accepted; its prompt plus its output budget within the
served context; each answer a usable call (valid against the tool's full schema) or a plain
answer; the request carrying the tool's result answered. Every failure names the client, what
of its request broke, and the usual fix."""

from __future__ import annotations

import json
from typing import Any

from pytest_frank.claims.agent import REPEAT_FIX, TEMPLATE_WORDS, _raised, call_args
from pytest_frank.claims.chat import edited_template_fix, wrong_template_fix
from pytest_frank.claims.checks import Context
from pytest_frank.claims.clients.options import Options
from pytest_frank.claims.clients.play import Played
from pytest_frank.claims.clients.profile import ARRAYS, CACHE_CONTROL, LATE_SYSTEM
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.claims.replies import one_line
from pytest_frank.claims.slots import more_context_fix
from pytest_frank.claims.tools import MARKUP_LEFT, NO_CALL, call_reply_problems, tool_parser_fix
from pytest_frank.outcome.verdict import fail
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.transport import http

ROUTES = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
CONTEXT_WORDS = ("context size", "context length", "context window", "exceeds the available",
                 "maximum context")
ARRAY_WORDS = ("array", "list", "expected string", "must be a string")
LATE_WORDS = ("system message", "developer", "beginning", "must be first")
SCHEMA_FIX = ("the engine's constrained decoding left a keyword of the tool's schema unenforced "
              "(format, minLength, pattern, propertyNames, ...), and the client checks each "
              "call against the full schema and rejects it: update the engine, or serve the "
              "client tools whose constraints it enforces")
ARRAY_FIX = ("a translation proxy in front takes only string content: set it to accept (or "
             "flatten) content given as an array of text blocks, which these clients send on "
             "every turn, or point the client past it")
CACHE_FIX = ("a translation proxy in front refuses cache_control: set it to drop or forward "
             "prompt-caching fields (cache_control on system, text and tool_result blocks), "
             "which this client sends on every request, or point the client past it")
LATE_FIX = ("edit the chat template so a system (developer) message that is not first renders "
            "(as a user turn, or folded into the first system message) instead of raising at "
            "the line quoted; then ")


def judge(played: Played, ctx: Context[Options]) -> None:
    """The client's request accepted within the served context, its answer usable, and the
    request carrying a tool's result answered too."""
    _show(played, ctx)
    first = played.steps[0].reply
    if not first.ok:
        _refused(played, 1, ctx)
    _fits(played, ctx)
    _usable(played, 1, ctx)
    if not played.steps[1].reply.ok:
        _refused(played, 2, ctx)
    _repeated(played)
    _usable(played, 2, ctx)


def _who(played: Played, n: int) -> str:
    profile, first = PROFILES[played.client], played.first
    what = (f"first request ({first.size / 1024:.1f} KB)" if n == 1 else
            "request carrying the tool result" + (" of an earlier call" if played.earlier_call
                                                  else ""))
    return f"{profile.label} ({played.client}), its {what} on {ROUTES[profile.api]}"


def _refused(played: Played, n: int, ctx: Context[Options]) -> None:
    reply, sends = played.steps[n - 1].reply, played.first.sends
    said, lower = one_line(reply.problem, 240), (reply.problem or "").lower()
    who = _who(played, n)
    if reply.status is None:
        fail(f"{who}: {said}", reply.fix)
    if n == 1 and reply.status in (404, 405):
        route = ROUTES[PROFILES[played.client].api]
        fail(f"{who} answered {reply.status}: the server does not serve {route}: {said}",
             f"serve {route} (a newer engine, or a proxy in front that translates it), or "
             f"drop {played.client} from expect.clients: the client cannot talk to this "
             f"endpoint")
    if any(w in lower for w in CONTEXT_WORDS):
        _too_long(played, ctx, f"; it answered {reply.status}: {said}")
    if CACHE_CONTROL in sends and "cache_control" in lower:
        fail(f"{who} answered {reply.status} to cache_control ({sends[CACHE_CONTROL]}): {said}",
             CACHE_FIX)
    if ARRAYS in sends and "content" in lower and any(w in lower for w in ARRAY_WORDS):
        fail(f"{who} answered {reply.status} to content as arrays ({sends[ARRAYS]}): {said}",
             ARRAY_FIX)
    if any(w in lower for w in TEMPLATE_WORDS) or "exception" in lower:
        raised = _raised(reply.problem or "")
        line = ctx.driver.template.raised_at(reply.problem)
        at = f" (template {line})" if line else ""
        if LATE_SYSTEM in sends and any(w in lower for w in LATE_WORDS):
            fail(f"{who} answered {reply.status}: the chat template raised on "
                 f"{sends[LATE_SYSTEM]}: {raised}{at}", LATE_FIX + edited_template_fix(ctx.driver))
        fail(f"{who} answered {reply.status}: the chat template could not render it "
             f"({played.steps[n - 1].held}): {raised}{at}", wrong_template_fix(ctx.driver))
    fail(f"{who} answered {reply.status}: {said}",
         known_fix(ctx.driver, reply.problem, reply.status))


def _fits(played: Played, ctx: Context[Options]) -> None:
    if played.context is None or played.prompt_tokens is None:
        ctx.note("the served context or the prompt's tokens are not known: the prompt plus the "
                 "client's output budget is not judged against it")
        return
    if played.prompt_tokens + (played.first.budget or 0) > played.context:
        _too_long(played, ctx, "")


def _too_long(played: Played, ctx: Context[Options], said: str) -> None:
    first, prompt, budget = played.first, played.prompt_tokens, played.first.budget or 0
    label = PROFILES[played.client].label
    counted = (f"{prompt} tokens of prompt (counted by {played.counted_by})" if prompt
               is not None else "its prompt")
    need = (prompt or 0) + budget
    asks = f"{first.budget_field} {budget}" if first.budget else first.budget_field
    where = "the served context" if played.context is None else (
        f"the {played.context}-token context each of the server's {played.slots} slot(s) serves"
        if played.slots else f"the {played.context}-token context the server serves")
    line = (f"{_who(played, 1)}: {counted} plus its output budget ({asks}) need {need} tokens, "
            f"over {where}{said}")
    fix = more_context_fix(ctx.driver, -(-need // 1024) * 1024, played.slots) \
        if prompt is not None else None
    advice = (f"; or configure {label} with a smaller output budget "
              f"(expect.clients {played.client} max_tokens says what it sends)")
    fail(line, fix + advice if fix is not None else None)


def _repeated(played: Played) -> None:
    """The request carrying a call's result answered by the same call again: the result never
    reached the model, and the client loops on it."""
    carried = [(c.name, call_args(c.arguments)) for c in played.carried]
    for call in played.steps[1].reply.calls:
        if (call.name, call_args(call.arguments)) in carried:
            fail(f"{_who(played, 2)} called {call.name} again with the same arguments "
                 f"({one_line(_args(call_args(call.arguments)), 80)}) instead of answering: "
                 f"the result never reached the model, so "
                 f"{PROFILES[played.client].label} would loop on it", REPEAT_FIX)


def _usable(played: Played, n: int, ctx: Context[Options]) -> None:
    reply, tools = played.steps[n - 1].reply, played.first.tools
    who = _who(played, n)
    if reply.calls:
        problems = call_reply_problems(reply, tools=tools)
        if problems:
            cause = getattr(problems[0], "cause", None)
            fix = tool_parser_fix(ctx.driver) if cause in (MARKUP_LEFT, NO_CALL) or \
                problems[0].startswith(("wrong name", "not JSON")) else SCHEMA_FIX
            fail(f"{who}: the call is not one {PROFILES[played.client].label} can use: "
                 f"{problems[0]}", fix)
        return
    if not reply.content.strip():
        fail(f"{who} answered no text and no call (finish_reason {reply.finish!r}, "
             f"{reply.generated} token(s))", known_fix(ctx.driver, reply.problem, reply.status))


def _show(played: Played, ctx: Context[Options]) -> None:
    first = played.first
    ctx.note(f"{played.client}: first request {first.size / 1024:.1f} KB, {len(first.tools)} "
             f"tools, output budget {first.budget_field} {first.budget or ''}".rstrip())
    if played.context is not None:
        ctx.note(f"served context {played.context} tokens per slot, {played.slots} slot(s); "
                 f"prompt {played.prompt_tokens} tokens ({played.counted_by or 'not counted'})")
    profile = PROFILES[played.client]
    own = f" ({profile.first_answer_from})" if profile.first_answer_from else ""
    ctx.note(f"each turn waited up to {played.wait:g} s for its answer to begin, as "
             f"{profile.label} does{own}, within the battery's {http.FIRST_ANSWER_MAX_S:g} s and the "
             "endpoint's deadline")
    for n, step in enumerate(played.steps, 1):
        reply = step.reply
        began = (f"; it began after {reply.first_token_s:.1f} s"
                 if reply.first_token_s is not None else "")
        ctx.note(f"turn {n} sent: {step.held}{began}")
        if not reply.ok:
            ctx.note(f"turn {n} came back: {one_line(reply.problem_line, 200)}")
            continue
        calls = "; ".join(f"{c.name} {one_line(_args(c.arguments), 80)}" for c in reply.calls)
        ctx.note(f"turn {n} came back: finish {reply.finish}"
                 + (f", calls {calls}" if calls else "")
                 + (f", content {one_line(reply.content, 80)!r}" if reply.content else ""))
    if played.earlier_call:
        ctx.note("turn 1 answered in text: turn 2 carries an earlier call and its result, as a "
                 "client's history holds one")


def _args(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
