"""The Anthropic Messages wire: request params, a reply read whole, a stream reassembled."""

from __future__ import annotations

from typing import Any, Callable

from pytest_frank.chat import Call, Reply, Request


def params(model: str, req: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens,
                           "messages": [{"role": "user", "content": req.content}]}
    if req.tools is not None:
        out["tools"] = [_tool(t) for t in req.tools]
        if req.tool_choice is not None:
            out["tool_choice"] = _choice(req.tool_choice, req.parallel)
    return {**out, **req.extra}


def converse(sdk, model: str, req: Request, clock: Callable[[], float]) -> Reply:
    kwargs = params(model, req)
    if req.stream:
        with sdk.messages.create(stream=True, **kwargs) as stream:
            return _read_stream(stream, req, clock)
    message = sdk.messages.create(**kwargs)
    reply = Reply(status=200, finish=message.stop_reason)
    usage = getattr(message, "usage", None)
    reply.tokens = getattr(usage, "output_tokens", None)
    reply.prompt_tokens = _prompt_tokens(usage)
    for block in message.content:
        _Block(block).close(reply)
    return reply


def _read_stream(stream, req: Request, clock: Callable[[], float]) -> Reply:
    reply, blocks = Reply(status=200), {}
    for n, event in enumerate(stream):
        if n > req.event_budget:
            reply.error = (f"the stream ran past {req.event_budget} events for "
                           f"{req.max_tokens} max_tokens without ending")
            break
        kind = event.type
        if kind == "message_start":
            reply.prompt_tokens = _prompt_tokens(getattr(event.message, "usage", None))
        elif kind == "content_block_start":
            blocks[event.index] = _Block(event.content_block)
        elif kind == "content_block_delta":
            if blocks.setdefault(event.index, _Block(None)).add(event.delta):
                reply.tick(clock())
        elif kind == "message_delta":
            reply.finish = event.delta.stop_reason or reply.finish
            tokens = getattr(getattr(event, "usage", None), "output_tokens", None)
            reply.tokens = tokens if tokens is not None else reply.tokens
        elif kind == "error":
            error = getattr(event, "error", None)
            reply.error = getattr(error, "message", None) or "the stream carried an error event"
    for index in sorted(blocks):
        blocks[index].close(reply)
    return reply


def _prompt_tokens(usage) -> int | None:
    """The prompt's tokens: the Messages API counts cached ones apart from the rest."""
    parts = [getattr(usage, key, None) for key in
             ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    return sum(p for p in parts if p) if parts[0] is not None else None


def _choice(choice, parallel):
    kind = {"auto": "auto", "required": "any", "none": "none"}.get(choice)
    out = {"type": kind} if kind else {"type": "tool", "name": choice}
    if parallel is False and kind != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _tool(tool: dict) -> dict:
    fn = tool["function"]
    return {"name": fn["name"], "description": fn.get("description", ""),
            "input_schema": fn["parameters"]}


class _Block:
    """A content block, whole or rebuilt from its start event and deltas."""

    PIECES = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}

    def __init__(self, start):
        self.kind = getattr(start, "type", None)
        self.start = start
        self.text: list[str] = []

    def add(self, delta) -> bool:
        """Fold one delta in; True when it carried text or thinking."""
        piece = self.PIECES.get(getattr(delta, "type", ""))
        value = (getattr(delta, piece, "") or "") if piece else ""
        self.text.append(value)
        return bool(value) and piece != "partial_json"

    def close(self, reply: Reply) -> None:
        text = "".join(self.text)
        if self.kind == "text":
            reply.content += (getattr(self.start, "text", "") or "") + text
        elif self.kind == "thinking":
            reply.reasoning += (getattr(self.start, "thinking", "") or "") + text
            reply.reasoning_field = "thinking"
        elif self.kind == "redacted_thinking":
            reply.reasoning += "[redacted thinking]"
            reply.reasoning_field = "redacted_thinking"
        elif self.kind == "tool_use":
            # A strict client parses the concatenated input_json_delta pieces itself.
            args: Any = text if text else getattr(self.start, "input", None) or {}
            reply.calls.append(Call(getattr(self.start, "name", None), args,
                                    getattr(self.start, "id", None)))
