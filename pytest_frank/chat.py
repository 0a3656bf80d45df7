"""One generation request, in shape-neutral terms, through the official client library of the
endpoint's API shape.

The `openai` and `anthropic` SDKs are what real clients run, so a probe sees what they see: the
SDK builds the request and parses the reply (streams included). The driver owns the wire format
(pytest_frank.drivers.openai_chat, .anthropic_messages, .openai_responses); every HTTP exchange
underneath is recorded by pytest_frank.http. Every shape comes back as one `Reply`, with a clock
on the stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_frank import http, redact
from pytest_frank.http import Exchange

if TYPE_CHECKING:
    from pytest_frank.target import Target

SDKS = ("openai", "anthropic", "httpx2", "httpx")  # whose errors say what went wrong themselves
PROMPT_ROOM = 1024  # tokens kept for the prompt under the served context, where no count came


@dataclass
class Call:
    """One tool call as a strict client receives it."""
    name: str | None
    arguments: Any  # OpenAI: the JSON text the server sent; Anthropic: the `input` object
    id: str | None = None


@dataclass
class Logprob:
    """One generated token's log probability and the alternatives sent with it."""
    token: str
    logprob: float | None
    top: int  # how many alternatives came (top_logprobs' width)
    alternatives: tuple[tuple[str, float], ...] = ()  # (token, logprob) of each, as sent


@dataclass
class Request:
    """What a probe asks; `content` is text or the driver's content parts (images)."""
    content: Any
    max_tokens: int
    tools: list[dict] | None = None  # the OpenAI function form; drivers translate
    tool_choice: Any = None  # "auto" | "required" | "none" | a tool name (named choice)
    parallel: bool | None = None
    stream: bool = False
    extra: dict = field(default_factory=dict)  # driver-supplied params (thinking switch, effort)
    reasoning_field: str | None = None  # where fleet.yaml says reasoning arrives, read first
    think: bool = False  # ask for thinking where the API wants it asked (the driver's thinking_on)
    # or "max_completion_tokens": the OpenAI shape takes both; None sends no budget (the
    # server's default decides; max_tokens then only bounds how long a stream is read)
    budget_key: str | None = "max_tokens"
    stream_usage: bool = True  # a stream asks for its usage (OpenAI stream_options.include_usage)
    # The fleet's sampling goes with the request; False sends none, as clients that leave
    # sampling to the server's defaults do (Claude Code, Codex, pi, opencode).
    sampling: bool = True
    # A conversation so far, in the driver's wire shape (an agent step's history); `content`
    # is then unused. Drivers build it (Driver.agent_history).
    messages: list[dict] | None = None

    @property
    def event_budget(self) -> int:
        # A token costs about one event; a stream far past that never ends by itself.
        return 4 * self.max_tokens + 64


@dataclass
class Reply:
    status: int | None = None  # HTTP status; None when no answer came back
    problem: str | None = None  # the server's own message, or why nothing (whole) came back
    content: str = ""
    reasoning: str = ""
    reasoning_field: str | None = None  # where the reasoning was found
    calls: list[Call] = field(default_factory=list)
    finish: str | None = None  # finish_reason / stop_reason as sent
    streamed: bool = False
    first_token_s: float | None = None  # streams: to the first content or reasoning text
    last_token_s: float | None = None
    pieces: int = 0  # stream deltas that carried text
    tokens: int | None = None  # the server's own count of generated tokens (usage)
    prompt_tokens: int | None = None  # its count of the prompt (usage.prompt_tokens)
    cached_tokens: int | None = None  # of it served from the prefix cache, where sent
    reasoning_tokens: int | None = None  # its count of those spent thinking, where it says
    max_tokens: int | None = None  # the budget it was asked with
    first: Reply | None = None  # a second ask with a larger budget: the reply the first one got
    ceiling: str | None = None  # what bounds a larger budget (max_thinking_tokens or the context)
    engine: dict[str, Any] = field(default_factory=dict)  # engine fields, e.g. llama.cpp timings
    stop_sequence: str | None = None  # Anthropic: the stop sequence that ended the answer
    logprobs: list[Logprob] | None = None  # per generated token, where asked and sent
    events: int = 0  # streams: the chunks read
    usage_events: list[int] = field(default_factory=list)  # streams: the chunks that had usage
    # The assistant content blocks as sent (Anthropic shape: thinking with its signature,
    # tool_use), so a client's next turn can echo them verbatim.
    blocks: list[dict] = field(default_factory=list)
    exchange: Exchange | None = None
    fix: str | None = None  # what to do about a reply that did not come (a saturated server)

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def url(self) -> str:
        return self.exchange.url if self.exchange else "the endpoint"

    @property
    def problem_line(self) -> str:
        """One line: why this reply is not an answer (no answer, or an error status)."""
        if self.status is None:
            return self.problem or "no answer came back"
        return f"answered {self.status}: {self.problem}"

    @property
    def tool_finish(self) -> bool:
        """finish says "a tool call ends this turn"."""
        return self.finish in ("tool_calls", "tool_use")

    @property
    def cut(self) -> bool:
        """finish says the token budget ran out."""
        return self.finish in ("length", "max_tokens")

    @property
    def cut_short(self) -> bool:
        """finish says the budget ran out, yet the server's own count (usage) is below the
        budget asked: something else cut the answer (a proxy or a server-side cap)."""
        return (self.cut and self.tokens is not None and self.max_tokens is not None
                and self.tokens < self.max_tokens)

    @property
    def thinking_cut(self) -> bool:
        """The budget ran out while the model was still thinking: reasoning, no answer, no call."""
        return (self.cut and bool(self.reasoning.strip()) and not self.content.strip()
                and not self.calls)

    @property
    def generated(self) -> int:
        return self.tokens if self.tokens is not None else self.pieces

    @property
    def thinking_tokens(self) -> int:
        """Tokens spent thinking: the server's own count where it gives one, else the reply's
        tokens shared between reasoning and answer by their length."""
        if self.reasoning_tokens is not None:
            return self.reasoning_tokens
        said = len(self.reasoning) + len(self.content) + sum(len(str(c.arguments))
                                                             for c in self.calls)
        return round(self.generated * len(self.reasoning) / said) if said else 0

    def tick(self, now: float) -> None:
        """A stream delta carried text at `now` (time.monotonic())."""
        self.first_token_s = self.first_token_s if self.first_token_s is not None else now
        self.last_token_s = now
        self.pieces += 1

    def decode_rate(self) -> float | None:
        """Tokens per second after the first token: decode speed without prefill."""
        span = (self.last_token_s or 0) - (self.first_token_s or 0)
        return (self.generated - 1) / span if self.generated > 1 and span > 0 else None


class Unreadable(ValueError):
    """A reply field of a type the API never sends (the SDKs build replies without validating,
    so it would otherwise surface later as a Python error far from the field)."""


def typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` when it is None or of `kind` (a bool is no number); else Unreadable, naming it."""
    if value is None or (isinstance(value, kind) and not (isinstance(value, bool)
                                                          and kind in (int, float))):
        return value
    shown = redact.cut(repr(value), 60)  # masked before the cut: a key's prefix never shows
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise Unreadable(f"{where} is {shown}, not {names}")


def send(target: Target, req: Request, api: str | None = None) -> Reply:
    """Ask the endpoint once, on `api`'s route (None: the endpoint's own); a refused, broken
    or cut answer is a Reply with `problem`. Not asked at all (`TooSlow`) once an earlier
    answer of the endpoint was cut as too slow."""
    target.pace()
    driver, model = target.wire(api), target.model_name()
    thinking = driver.thinking_on(req.max_tokens) if req.think else {}
    sampling = driver.sampling(target.endpoint.sampling) if req.sampling else {}
    req = replace(req, extra=combine(sampling, thinking, req.extra))
    with http.recording() as seen:
        target.sending(+1)
        try:
            reply = driver.converse(target.sdk(api), model, req, time.monotonic)
        except Exception as exc:  # the SDK's errors carry the status; the exchange the words
            reply = _failure(exc, seen[-1] if seen else None, driver)
        finally:
            target.sending(-1)
    reply.streamed, reply.max_tokens = req.stream, req.max_tokens
    reply.exchange = ex = seen[-1] if seen else None
    if ex is not None:
        target.spent(reply.generated)
    if ex is not None and reply.first_token_s is not None:
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
    return reply


def think_through(target: Target, req: Request) -> Reply:
    """Ask; when thinking used the whole budget before any answer, ask once more with room to
    finish (max_thinking_tokens, within the served context) and return that reply, the first
    one kept in `first`. For checks that judge the answer: one that a reply cut while thinking
    already proves asks with send alone, and spends no more."""
    reply = send(target, req)
    if not reply.thinking_cut or reply.cut_short:  # a larger budget would be cut the same
        return reply
    budget, reply.ceiling = thinking_budget(target, reply)
    if budget <= req.max_tokens:
        return reply
    again = send(target, replace(req, max_tokens=budget))
    again.first, again.ceiling = reply, reply.ceiling
    return again


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


def _failure(exc: Exception, ex: Exchange | None, driver) -> Reply:
    if ex is not None and ex.error:
        return Reply(status=ex.status, problem=ex.error)
    status = getattr(exc, "status_code", None)
    message = driver.error_message(ex) if ex is not None and status is not None else None
    if not isinstance(exc, Unreadable) and type(exc).__module__.split(".")[0] not in SDKS:
        # Not the SDK's own error: its parse of a reply shaped unlike the API's broke on it.
        return Reply(status=status, problem=f"a reply the {driver.api_shape} client cannot read "
                                          f"({type(exc).__name__}: {_sdk_message(exc)})")
    return Reply(status=status, problem=message or _sdk_message(exc))


def _sdk_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


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
