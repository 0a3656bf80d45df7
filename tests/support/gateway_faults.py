"""Rewrites for the proxy (tests/support/proxy.py) that put a fault in one place, so a test can
hold the diagnosis to the place it names: a stream rewriter that loses tool calls where the
whole answer keeps them, and a gateway that renames the model and loses the calls in both, or
zeroes the usage of a stream and keeps the engine's own count beside it. A stream rewriter that
passes reasoning alone stands for the forced call that streamed empty.

    with Proxy(server.url, rewrite_stream=calls_dropped_from_stream) as p: ...
    with Proxy(server.url, rewrite_answer=gateway_answer, rewrite_stream=gateway_stream) as p: ...
"""

from __future__ import annotations

import json

GATEWAY_MODEL = "gateway/{}"  # how the gateway names the model it routed to


def _chunk(event: bytes):
    """An event's JSON (None: not a data event with JSON)."""
    line = event.strip()
    if not line.startswith(b"data:"):
        return None
    try:
        return json.loads(line[5:])
    except ValueError:
        return None


def _mapped(events: list[bytes], change) -> list[bytes]:
    out = []
    for event in events:
        chunk = _chunk(event)
        if not isinstance(chunk, dict):
            out.append(event)
            continue
        chunk = change(chunk)
        if chunk is not None:
            out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    return out


def _no_calls(chunk: dict) -> dict | None:
    """A chat chunk without its tool-call deltas, a tool_calls finish turned to stop; a chunk
    left with nothing to say is dropped."""
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if "tool_calls" in delta:
            delta.pop("tool_calls")
            if not delta and choice.get("finish_reason") is None:
                return None
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return chunk


def calls_dropped_from_stream(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: a stream rewriter in front that drops the tool-call deltas of a
    request with tools (as one that knows only content and reasoning deltas does); the whole
    answer passes unchanged."""
    if not request.get("tools"):
        return events
    return _mapped(events, _no_calls)


def _no_answer(chunk: dict) -> dict | None:
    """A chat chunk without its content or tool-call deltas: reasoning alone comes through."""
    for choice in chunk.get("choices") or []:
        (choice.get("delta") or {}).pop("content", None)
    return _no_calls(chunk)


def answer_dropped_from_stream(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: a stream rewriter that passes only reasoning deltas of a request
    with tools, so a forced call streams as reasoning alone; the whole answer passes unchanged."""
    if not request.get("tools"):
        return events
    return _mapped(events, _no_answer)


def _renamed(chunk: dict) -> dict:
    if isinstance(chunk.get("model"), str):
        chunk["model"] = GATEWAY_MODEL.format(chunk["model"])
    return chunk


def gateway_answer(request: dict, answer: dict) -> dict:
    """For `rewrite_answer`: a gateway that names the model by its own route and loses the
    tool calls of a whole answer (it rebuilds the message from its content)."""
    for choice in answer.get("choices") or []:
        message = choice.get("message") or {}
        message.pop("tool_calls", None)
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return _renamed(answer)


def gateway_stream(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: the same gateway on a stream."""
    def both(chunk: dict) -> dict | None:
        kept = _no_calls(chunk)
        return None if kept is None else _renamed(kept)
    return _mapped(events, both)


def usage_zeroed(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: a gateway that rewrites a stream's usage to 0 completion tokens
    (as one that bills by its own count and lost it), leaving llama.cpp's timings beside it."""
    def zero(chunk: dict) -> dict:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            usage["completion_tokens"] = 0
        return chunk
    return _mapped(events, zero)
