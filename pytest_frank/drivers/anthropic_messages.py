"""The Anthropic Messages wire: request params, a reply read whole, a stream reassembled."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pytest_frank.transport.http import NO_KEY
from pytest_frank.transport.wire import Call, Reply, Request, typed

ANTHROPIC_VERSION = "2023-06-01"


def params(model: str, req: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens,
                           "messages": req.messages or [{"role": "user", "content": req.content}]}
    if req.tools is not None:
        out["tools"] = [_tool(t) for t in req.tools]
        if req.tool_choice is not None:
            out["tool_choice"] = _choice(req.tool_choice, req.parallel)
    return {**out, **req.extra}


def converse(sdk: Any, model: str, req: Request, clock: Callable[[], float]) -> Reply:
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


def count_tokens(sdk: Any, model: str, req: Request) -> int | None:
    """/v1/messages/count_tokens for the request's messages (errors raise, as the SDK raises)."""
    counted = sdk.messages.count_tokens(model=model, messages=params(model, req)["messages"])
    return typed(getattr(counted, "input_tokens", None), int, "input_tokens")


def _tokens(usage: Any) -> int | None:
    return typed(getattr(usage, "output_tokens", None), int, "usage.output_tokens")


def _read_stream(stream: Any, req: Request, clock: Callable[[], float]) -> Reply:
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


def _index(event: Any) -> int:
    return typed(getattr(event, "index", None), int, f"{event.type} index") or 0


def _prompt_tokens(usage: Any) -> int | None:
    """The prompt's tokens: the Messages API counts cached ones apart from the rest."""
    parts = [getattr(usage, key, None) for key in
             ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    counts = [p for p in parts if isinstance(p, int) and not isinstance(p, bool)]
    return sum(counts) if isinstance(parts[0], int) else None


def _choice(choice: str, parallel: bool | None) -> dict[str, Any]:
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

    def __init__(self, start: Any) -> None:
        self.kind = typed(getattr(start, "type", None), str, "content block type")
        self.start = start
        self.text: list[str] = []
        self.signature = typed(getattr(start, "signature", None), str, "signature") or ""
        # Whether a signature came at all (in the block or a signature_delta), even an empty
        # one: a client echoes the block with it, and the API refuses one without.
        self.signed = getattr(start, "signature", None) is not None

    def add(self, delta: Any) -> bool:
        """Fold one delta in; True when it carried text or thinking."""
        kind = typed(getattr(delta, "type", None), str, "delta type")
        if kind == "signature_delta":
            self.signed = True
            self.signature += typed(getattr(delta, "signature", None), str, "signature") or ""
            return False
        piece = self.PIECES.get(kind or "")
        value = typed(getattr(delta, piece, None), str, f"{kind}.{piece}") if piece else None
        self.text.append(value or "")
        return bool(value) and piece != "partial_json"

    def close(self, reply: Reply) -> None:
        text = "".join(self.text)
        if self.kind == "text":
            said = (typed(getattr(self.start, "text", None), str, "text") or "") + text
            reply.content += said
            reply.blocks.append({"type": "text", "text": said})
        elif self.kind == "thinking":
            said = (typed(getattr(self.start, "thinking", None), str, "thinking") or "") + text
            reply.reasoning += said
            reply.reasoning_field = "thinking"
            reply.blocks.append({"type": "thinking", "thinking": said,
                                 "signature": self.signature if self.signed else None})
        elif self.kind == "redacted_thinking":
            reply.reasoning += "[redacted thinking]"
            reply.reasoning_field = "redacted_thinking"
            reply.blocks.append({"type": "redacted_thinking",
                                 "data": getattr(self.start, "data", None) or ""})
        elif self.kind == "tool_use":
            # A strict client parses the concatenated input_json_delta pieces itself.
            args: Any = text if text else getattr(self.start, "input", None) or {}
            call = Call(typed(getattr(self.start, "name", None), str, "tool_use name"),
                        args, getattr(self.start, "id", None))
            reply.calls.append(call)
            reply.blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                                 "input": _parsed(args)})


def _parsed(args: Any) -> Any:
    if not isinstance(args, str):
        return args
    try:
        return json.loads(args)
    except ValueError:
        return args


def agent_history(messages: list[dict], reply: Reply, results: list[str]) -> list[dict]:
    """The next turn's history as Claude Code keeps it: the assistant content echoed verbatim
    (thinking blocks with their signatures, tool_use), then a user turn of tool_result blocks."""
    answers = [{"type": "tool_result", "tool_use_id": c.id, "content": result}
               for c, result in zip(reply.calls, results)]
    return [*messages, {"role": "assistant", "content": list(reply.blocks)},
            {"role": "user", "content": answers}]


@dataclass(frozen=True)
class MessagesWire:
    """The Messages API, the route a driver holds as its wire (drivers.protocols.Wire): an
    Anthropic proxy's own shape, and the `/v1/messages` route an OpenAI-family engine serves
    beside chat (fleet.yaml `api: messages`)."""

    api = "messages"
    api_shape = "anthropic"
    sdk_modules = ("anthropic", "anthropic.resources.messages")
    image_forms = ("anthropic",)
    reasoning_fields = ("thinking",)  # thinking content blocks
    # The assistant turn's thinking blocks, sent back as the server signed them
    history_reasoning_fields = ("thinking",)
    shape_params = frozenset({"max_tokens", "stop", "count_tokens", "claude_code",
                              "context_limit", "sampling"})
    budget_keys = ("max_tokens",)
    sampling_fields = ("temperature", "top_p")  # no penalties, no n

    def sdk_client(self, endpoint: Any, http_client: Any, timeout: float) -> Any:
        import anthropic

        return anthropic.Anthropic(base_url=endpoint.root, api_key=endpoint.api_key or NO_KEY,
                                   http_client=http_client, max_retries=0, timeout=timeout,
                                   default_headers=dict(endpoint.headers) or None)

    def image_part(self, b64: str, mime: str, form: str) -> dict:
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64}}

    def sampling(self, sampling: dict) -> dict:
        # The Messages API has no seed (temperature 0 is as repeatable as it goes), and the
        # client no longer takes sampling arguments: they travel in the body.
        body = {k: v for k, v in sampling.items() if k in ("temperature", "top_p", "top_k")
                and v is not None}
        return {"extra_body": body} if body else {}

    def converse(self, sdk: Any, model: str, req: Request,
                 clock: Callable[[], float]) -> Reply:
        return converse(sdk, model, req, clock)

    def stop_param(self, stop: str) -> dict:
        return {"stop_sequences": [stop]}

    # Not Messages fields (test_params_response_format and test_params_logprobs are not
    # collected on this route): the chat ones, as an OpenAI-family engine's chat route reads them.
    def response_format(self, fmt: dict) -> dict:
        return {"response_format": fmt}

    def logprobs(self, top: int) -> dict:
        return {"logprobs": True, "top_logprobs": top}

    def count_tokens(self, sdk: Any, model: str, req: Request) -> int | None:
        return count_tokens(sdk, model, req)

    def agent_history(self, messages: list[dict], reply: Reply,
                      results: list[str]) -> list[dict]:
        return agent_history(messages, reply, results)

    def thinking_on(self, max_tokens: int) -> dict:
        # As Claude Code asks when thinking is on: the Messages API sends thinking blocks only
        # then. The budget stays under max_tokens (the API requires it; 1024 at least upstream).
        return {"thinking": {"type": "enabled", "budget_tokens": max(1, max_tokens - 1)}}

    def thinking_off(self) -> dict:
        # The Messages API switch, and the template kwarg a llama.cpp upstream actually reads.
        return {"thinking": {"type": "disabled"},
                "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}

    def effort(self, value: str) -> dict:
        # output_config.effort is the Messages API field; a llama.cpp upstream reads the kwarg.
        return {"extra_body": {"output_config": {"effort": value},
                               "chat_template_kwargs": {"reasoning_effort": value}}}
