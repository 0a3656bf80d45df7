"""The Anthropic Messages wire: request params, a reply read whole, a stream reassembled."""

from __future__ import annotations

from typing import Any, Callable

from pytest_frank.chat import Call, Reply, Request, typed


def params(model: str, req: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens,
                           "messages": [*req.history, {"role": "user", "content": req.content}]}
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
    reply = Reply(status=200, finish=typed(getattr(message, "stop_reason", None), str,
                                           "stop_reason"))
    reply.stop_sequence = typed(getattr(message, "stop_sequence", None), str, "stop_sequence")
    usage = getattr(message, "usage", None)
    reply.tokens = _tokens(usage)
    reply.prompt_tokens = _prompt_tokens(usage)
    for block in typed(getattr(message, "content", None), list, "content") or []:
        _Block(block).close(reply)
    return reply


def count_tokens(sdk, model: str, req: Request) -> int | None:
    """/v1/messages/count_tokens for the request's messages (errors raise, as the SDK raises)."""
    counted = sdk.messages.count_tokens(model=model, messages=params(model, req)["messages"])
    return typed(getattr(counted, "input_tokens", None), int, "input_tokens")


def _tokens(usage) -> int | None:
    return typed(getattr(usage, "output_tokens", None), int, "usage.output_tokens")


def _read_stream(stream, req: Request, clock: Callable[[], float]) -> Reply:
    reply, blocks = Reply(status=200), {}
    for n, event in enumerate(stream):
        if n > req.event_budget:
            reply.problem = (f"the stream ran past {req.event_budget} events for "
                             f"{req.max_tokens} max_tokens without ending")
            break
        kind = getattr(event, "type", None)
        if kind == "message_start":
            reply.prompt_tokens = _prompt_tokens(getattr(getattr(event, "message", None),
                                                         "usage", None))
        elif kind == "content_block_start":
            blocks[_index(event)] = _Block(getattr(event, "content_block", None))
        elif kind == "content_block_delta":
            if blocks.setdefault(_index(event), _Block(None)).add(getattr(event, "delta", None)):
                reply.tick(clock())
        elif kind == "message_delta":
            finish = getattr(getattr(event, "delta", None), "stop_reason", None)
            reply.finish = typed(finish, str, "message_delta stop_reason") or reply.finish
            said = getattr(getattr(event, "delta", None), "stop_sequence", None)
            reply.stop_sequence = typed(said, str, "message_delta stop_sequence")
            tokens = _tokens(getattr(event, "usage", None))
            reply.tokens = tokens if tokens is not None else reply.tokens
        elif kind == "error":
            error = getattr(event, "error", None)
            said = typed(getattr(error, "message", None), str, "error.message")
            reply.problem = said or "the stream carried an error event"
    for index in sorted(blocks):
        blocks[index].close(reply)
    return reply


def _index(event) -> int:
    return typed(getattr(event, "index", None), int, f"{event.type} index") or 0


def _prompt_tokens(usage) -> int | None:
    """The prompt's tokens: the Messages API counts cached ones apart from the rest."""
    parts = [getattr(usage, key, None) for key in
             ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    counts = [p for p in parts if isinstance(p, int) and not isinstance(p, bool)]
    return sum(counts) if isinstance(parts[0], int) else None


def _choice(choice, parallel):
    kind = {"auto": "auto", "required": "any", "none": "none"}.get(choice)
    out: dict[str, Any] = {"type": kind} if kind else {"type": "tool", "name": choice}
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
        self.kind = typed(getattr(start, "type", None), str, "content block type")
        self.start = start
        self.text: list[str] = []

    def add(self, delta) -> bool:
        """Fold one delta in; True when it carried text or thinking."""
        kind = typed(getattr(delta, "type", None), str, "delta type")
        piece = self.PIECES.get(kind or "")
        value = typed(getattr(delta, piece, None), str, f"{kind}.{piece}") if piece else None
        self.text.append(value or "")
        return bool(value) and piece != "partial_json"

    def close(self, reply: Reply) -> None:
        text = "".join(self.text)
        if self.kind == "text":
            reply.content += (typed(getattr(self.start, "text", None), str, "text") or "") + text
        elif self.kind == "thinking":
            said = typed(getattr(self.start, "thinking", None), str, "thinking")
            reply.reasoning += (said or "") + text
            reply.reasoning_field = "thinking"
        elif self.kind == "redacted_thinking":
            reply.reasoning += "[redacted thinking]"
            reply.reasoning_field = "redacted_thinking"
        elif self.kind == "tool_use":
            # A strict client parses the concatenated input_json_delta pieces itself.
            args: Any = text if text else getattr(self.start, "input", None) or {}
            reply.calls.append(Call(typed(getattr(self.start, "name", None), str, "tool_use name"),
                                    args, getattr(self.start, "id", None)))
