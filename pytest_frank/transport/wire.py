"""The wire's shape-neutral types: what a probe asks (`Request`) and what comes back (`Reply`),
whichever API shape carries them. A leaf: the drivers read and write these, and `chat` sends
them through a target, so neither needs the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_frank.base import redact
from pytest_frank.transport.http import Exchange, event_budget


class Reads(Protocol):
    """What a reply's reader asks its driver: where reasoning arrives, and the engine's own
    fields (a route's wire answers both)."""

    @property
    def reasoning_fields(self) -> tuple[str, ...]: ...

    def engine_fields(self, extra: dict) -> dict: ...


@dataclass
class Call:
    """One tool call as a strict client receives it."""
    name: str | None
    arguments: Any  # OpenAI: the JSON text the server sent; Anthropic: the `input` object
    id: str | None = None
    # The wire sends arguments as JSON text (OpenAI chat, Responses): an object, a list or a
    # number there is kept as it came, for the judges to name, since clients JSON.parse the text.
    as_text: bool = False


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
    # is then unused. A route's wire builds it (Wire.agent_history).
    messages: list[dict] | None = None

    @property
    def event_budget(self) -> int:
        return event_budget(self.max_tokens)


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
    raised_from: int | None = None  # the check's own budget, where a learned larger one was asked
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
    response_id: str | None = None  # Responses: the id a next turn's previous_response_id names
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
