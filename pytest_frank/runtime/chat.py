"""One generation request, in shape-neutral terms, through the official client library of the
endpoint's API shape.

The `openai` and `anthropic` SDKs are what real clients run, so a probe sees what they see: the
SDK builds the request and parses the reply (streams included). The driver owns the wire format
(pytest_frank.drivers.openai_chat, .anthropic_messages, .openai_responses); every HTTP exchange
underneath is recorded by pytest_frank.transport.http. Every shape comes back as one `Reply`, with
a clock on the stream. The types live in pytest_frank.transport.wire; they are named here for the
probes.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from pytest_frank.base import redact
from pytest_frank.drivers import Driver
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.runtime.target import Target
from pytest_frank.transport import http
from pytest_frank.transport.http import Exchange
from pytest_frank.runtime.known_errors import UNREADABLE
from pytest_frank.transport.wire import Call, Logprob, Reply, Request, Unreadable, typed

__all__ = ["Call", "Logprob", "Reply", "Request", "Unreadable", "combine", "send",
           "think_through", "thinking_budget", "typed", "headroom", "learned_budget", "shared"]

SDKS = ("openai", "anthropic", "httpx2", "httpx")  # whose errors say what went wrong themselves
PROMPT_ROOM = 1024  # tokens kept for the prompt under the served context, where no count came
# What sets a request's budget, left out of what names the request (a cut ask asked again with
# more room is the same request); Anthropic's thinking budget follows max_tokens.
BUDGET_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "thinking")


def send(target: Target, req: Request, api: str | None = None) -> Reply:
    """Ask the endpoint once, on `api`'s route (None: the endpoint's own); a refused, broken
    or cut answer is a Reply with `problem`. Not asked at all (`TooSlow`) once an earlier
    answer of the endpoint was cut as too slow, nor (`KeyRefused`) once it refused the key,
    nor (`broken.NotSent`) once the route broke alike on every request."""
    target.pace(api, req.stream)
    driver, model = target.driver_on(api), target.model_name()
    thinking = driver.wire.thinking_on(req.max_tokens) if req.think else {}
    sampling = driver.wire.sampling(target.endpoint.sampling) if req.sampling else {}
    req = replace(req, extra=combine(sampling, thinking, req.extra))
    with http.recording() as seen:
        target.pacing.sending(+1)
        began = time.monotonic()
        try:
            reply = driver.wire.converse(target.sdk(api), model, req, time.monotonic)
        except Exception as exc:  # the SDK's errors carry the status; the exchange the words
            reply = _failure(exc, seen[-1] if seen else None, driver)
        finally:
            target.pacing.sending(-1)
    reply.streamed, reply.max_tokens = req.stream, req.max_tokens
    reply.exchange = ex = seen[-1] if seen else None
    if ex is not None:
        target.heard(ex, driver.api)  # a refused key, or a broken route, stops the others
        target.pacing.spent(reply.generated, _asked(ex), req.max_tokens, began, time.monotonic())
    if reply.ok and not reply.cut and reply.reasoning.strip():
        target.pacing.learn(reply.generated)
    if ex is not None and reply.first_token_s is not None and reply.last_token_s is not None:
        # Token clocks count from the request leaving the transport, not from the SDK's own
        # first-call set-up, so a first request is not slower than a second one.
        reply.first_token_s -= ex.started
        reply.last_token_s -= ex.started
    if ex is not None and ex.error and reply.problem is None:
        reply.problem = ex.error  # read whole by the SDK, yet cut by the reader's cap or deadline
    if ex is not None and ex.late:  # the next generation would take as long: none is sent
        slow = target.answered_late(ex)
        if ex.error:  # the exchange now says what the server's load showed
            reply.problem, reply.fix = ex.error, slow.fix
    if reply.problem and reply.status is None and ex is not None:
        reply.status = ex.status
    if ex is not None and not ex.error:
        target.recorded(driver.api, ex)  # whole, before the probe settles it to its head
    return reply


def think_through(target: Target, req: Request) -> Reply:
    """Ask; when thinking used the whole budget before any answer, ask once more with room to
    finish (max_thinking_tokens, within the served context) and return that reply, the first
    one kept in `first`. For checks that judge the answer: one that a reply cut while thinking
    already proves asks with send alone, and spends no more. Asked at first with room for what
    the endpoint's answers have thought so far (learned_budget), `raised_from` then set."""
    asked = req.max_tokens
    req = replace(req, max_tokens=learned_budget(target, asked))
    reply = send(target, req)
    reply.raised_from = asked if req.max_tokens > asked else None
    if not reply.thinking_cut or reply.cut_short:  # a larger budget would be cut the same
        return reply
    budget, reply.ceiling = thinking_budget(target, reply)
    if budget <= req.max_tokens:
        return reply
    again = send(target, replace(req, max_tokens=budget))
    again.first, again.ceiling = reply, reply.ceiling
    return again


@dataclass(kw_only=True)
class Shared(Observation):
    reply: Reply


def shared(target: Target, req: Request,
           ask: Callable[[Target, Request], Reply] = think_through) -> Reply:
    """One request, many judges: the reply to `req` as the first check of the endpoint to ask
    it got it (the probe cache, keyed by what the request sends), its exchanges in the caller's
    evidence too. For one ask each check needs; a check that samples the request again (its
    further trials) sends those itself."""
    key = f"{ask.__name__} {_sent_as(target, req)}"
    with target.lock():
        target.asking.setdefault(key, (req, ask))
    seen = target.need(_ask_shared, key)
    if isinstance(seen, Unseen):
        target.pace()  # not sent after an answer too slow: this check is held, as its own ask was
        return Reply(problem=seen.failure, fix=seen.fix if isinstance(seen.fix, str) else None)
    for ex in seen.exchanges:
        http.shared(ex)
    return seen.reply


def _ask_shared(target: Target, key: str) -> Shared:
    req, ask = target.asking[key]
    return Shared(reply=ask(target, req))


def _sent_as(target: Target, req: Request) -> str:
    """What a request sends, as a key: a lone user message is its content, thinking asked is
    what the driver sends for it (nothing, where thinking is the template's default)."""
    if req.messages == [{"role": "user", "content": req.content}]:
        req = replace(req, messages=None)
    if req.think:
        asked = target.driver.wire.thinking_on(req.max_tokens)
        req = replace(req, think=False, extra=combine(asked, req.extra))
    return json.dumps(asdict(req), sort_keys=True, default=str)


def learned_budget(target: Target, asked: int) -> int:
    """The budget to ask a thinking answer with: `asked`, or room for the longest answer this
    endpoint already thought through where that is more (within max_thinking_tokens and the
    served context). A long thinker's first ask then ends; one that thinks longer still is
    asked again (think_through)."""
    thought = target.pacing.thought
    if not thought or thought < asked:
        return asked
    return max(asked, min(headroom(thought), thinking_budget(target, Reply())[0]))


def headroom(tokens: int) -> int:
    """A client's budget for a reply of `tokens` (thinking and answer): 20% more, in hundreds."""
    return max(100, math.ceil(tokens * 1.2 / 100) * 100)


def _asked(ex: Exchange) -> str:
    """The request an exchange sent, less its budget: what names it in the plan's minimum."""
    body = ex.request_json if isinstance(ex.request_json, dict) else {}
    rest = {k: v for k, v in body.items() if k not in BUDGET_FIELDS}
    return ex.url + " " + json.dumps(rest, sort_keys=True, default=str)


def thinking_budget(target: Target, cut: Reply) -> tuple[int, str]:
    """The larger budget and what bounds it: max_thinking_tokens, or the context one
    conversation gets, less the prompt, where the engine says (a budget past it is refused or
    cut by the engine, not by the model)."""
    most = target.endpoint.max_thinking_tokens
    context = target.served_context()
    if context is None:
        return most, "max_thinking_tokens"
    room = context - (cut.prompt_tokens if cut.prompt_tokens is not None else PROMPT_ROOM)
    if room < most:
        return room, (f"the room the served context leaves ({context} tokens, "
                      f"{context - room} of them the prompt)")
    return most, "max_thinking_tokens"


def _failure(exc: Exception, ex: Exchange | None, driver: Driver) -> Reply:
    if ex is not None and ex.error:
        return Reply(status=ex.status, problem=ex.error)
    status = getattr(exc, "status_code", None)
    message = driver.error_message(ex) if ex is not None and status is not None else None
    if isinstance(exc, ValueError) and "JSON compliant" in str(exc):
        # The client writes a request as strict JSON; a NaN or Infinity in it came from an
        # earlier reply of the endpoint that this request sends back (an agent's history).
        return Reply(status=status, problem="this request sends back what an earlier reply "
                     "held, and that held NaN or Infinity, which JSON has no words for (RFC "
                     "8259): no client can send it back; the server must write standard JSON")
    if not isinstance(exc, Unreadable) and type(exc).__module__.split(".")[0] not in SDKS:
        # Not the SDK's own error: its parse of a reply shaped unlike the API's broke on it.
        return Reply(status=status, problem=f"a reply the {driver.wire.api_shape} client cannot "
                                          f"read ({type(exc).__name__}: {_sdk_message(exc)})")
    if isinstance(exc, Unreadable):
        return Reply(status=status, problem=f"{_sdk_message(exc)} ({UNREADABLE})")
    return Reply(status=status, problem=message or _sdk_message(exc))


def _sdk_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return redact.squeeze(str(text))


def combine(*params: dict) -> dict:
    """Request params from several sources (sampling, thinking switch, effort); their
    `extra_body` parts merge instead of replacing each other."""
    out: dict[str, Any] = {}
    for part in params:
        for key, value in part.items():
            if key == "extra_body" and isinstance(value, dict):
                body = out.setdefault("extra_body", {})
                for k, v in value.items():
                    if isinstance(v, dict) and isinstance(body.get(k), dict):
                        body[k] = {**body[k], **v}
                    else:
                        body[k] = v
            else:
                out[key] = value
    return out
