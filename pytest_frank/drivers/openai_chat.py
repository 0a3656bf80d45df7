"""The OpenAI chat-completions wire: request params, a reply read whole, a stream reassembled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from pytest_frank.chat import Call, Reply, Request

if TYPE_CHECKING:
    from pytest_frank.drivers.base import Driver


def params(model: str, req: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens,
                           "messages": [{"role": "user", "content": req.content}]}
    if req.tools is not None:
        out["tools"] = req.tools
        if req.tool_choice is not None:
            out["tool_choice"] = _choice(req.tool_choice)
        if req.parallel is not None:
            out["parallel_tool_calls"] = req.parallel
    return {**out, **req.extra}


def converse(driver: Driver, sdk, model: str, req: Request, clock: Callable[[], float]) -> Reply:
    kwargs = params(model, req)
    if req.stream:
        kwargs.setdefault("stream_options", {"include_usage": True})
        with sdk.chat.completions.create(stream=True, **kwargs) as stream:
            return _read_stream(driver, stream, req, clock)
    completion = sdk.chat.completions.create(**kwargs)
    choice = completion.choices[0]
    msg = choice.message
    extra = msg.model_extra or {}
    reply = Reply(status=200, content=msg.content or "", finish=choice.finish_reason)
    reply.reasoning, reply.reasoning_field = _reasoning(_fields(driver, req), extra)
    reply.engine = driver.engine_fields(completion.model_extra or {})
    _usage(reply, getattr(completion, "usage", None))
    for tc in msg.tool_calls or []:
        fn = getattr(tc, "function", None)
        reply.calls.append(Call(getattr(fn, "name", None), getattr(fn, "arguments", None),
                                getattr(tc, "id", None)))
    return reply


def _read_stream(driver: Driver, stream, req: Request, clock: Callable[[], float]) -> Reply:
    reply, texts, thoughts, calls = Reply(status=200), [], {}, {}
    for n, chunk in enumerate(stream):
        if n > req.event_budget:
            reply.error = (f"the stream ran past {req.event_budget} events for "
                           f"{req.max_tokens} max_tokens without ending")
            break
        reply.engine.update(driver.engine_fields(chunk.model_extra or {}))
        usage = getattr(chunk, "usage", None)
        if getattr(usage, "completion_tokens", None) is not None:
            _usage(reply, usage)
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta is not None and _take(_fields(driver, req), delta, texts, thoughts, calls):
                reply.tick(clock())
            if choice.finish_reason:
                reply.finish = choice.finish_reason
    reply.content = "".join(texts)
    reply.reasoning, reply.reasoning_field = _reasoning(_fields(driver, req), thoughts)
    reply.calls = [calls[i] for i in sorted(calls)]
    return reply


def _usage(reply: Reply, usage) -> None:
    reply.tokens = getattr(usage, "completion_tokens", None)
    reply.prompt_tokens = getattr(usage, "prompt_tokens", None)
    details = getattr(usage, "completion_tokens_details", None)
    reply.reasoning_tokens = getattr(details, "reasoning_tokens", None) or None


def _fields(driver: Driver, req: Request) -> tuple[str, ...]:
    # fleet.yaml may name the field; the driver's usual ones are still read, so a check can
    # say where the reasoning went instead of calling it missing.
    named = (req.reasoning_field,) if req.reasoning_field else ()
    return named + tuple(f for f in driver.reasoning_fields if f not in named)


def _take(fields: tuple[str, ...], delta, texts: list, thoughts: dict, calls: dict) -> bool:
    """Fold one delta in; True when it carried content or reasoning text."""
    text = delta.content or ""
    texts.append(text)
    carried = bool(text)
    for name, value in (delta.model_extra or {}).items():
        if name in fields and isinstance(value, str):
            thoughts[name] = thoughts.get(name, "") + value
            carried = carried or bool(value)
    for tc in delta.tool_calls or []:
        _add_fragment(calls, tc)
    return carried


def _reasoning(fields: tuple[str, ...], found: dict) -> tuple[str, str | None]:
    """The first non-empty reasoning field, in the order read."""
    for name in fields:
        value = found.get(name)
        if isinstance(value, str) and value.strip():
            return value, name
    return "", None


def _choice(choice):
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _add_fragment(calls: dict, tc) -> None:
    """The first delta of a call has id and name; later ones argument pieces."""
    index = getattr(tc, "index", None)
    index = len(calls) if index is None else index
    call = calls.setdefault(index, Call(None, "", None))
    call.id = call.id or getattr(tc, "id", None)
    fn = getattr(tc, "function", None)
    if fn is not None:
        call.name = call.name or getattr(fn, "name", None)
        call.arguments += getattr(fn, "arguments", None) or ""
