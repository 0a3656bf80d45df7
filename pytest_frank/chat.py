"""One generation request through the official client library for the endpoint's API shape.

The `openai` and `anthropic` SDKs are what real clients run, so a probe sees what they see: the
SDK builds the request and parses the reply (streams included). Every HTTP exchange underneath is
recorded as an `Exchange` by a transport wrapper (the key stays in the headers, never in
evidence). Replies of both shapes are normalised into one `Reply` that checks judge.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from pytest_frank import http
from pytest_frank.http import Exchange

NO_KEY = "frank-no-key"  # the SDKs insist on a key; a server without one ignores it


@dataclass
class Call:
    """One tool call as a strict client receives it."""
    name: str | None
    arguments: Any  # OpenAI: the JSON text the server sent; Anthropic: the `input` object
    id: str | None = None


@dataclass
class Reply:
    status: int | None = None  # HTTP status; None when no answer came back
    error: str | None = None  # the server's own message, or why nothing came back
    content: str = ""
    reasoning: str = ""
    reasoning_field: str | None = None  # where the reasoning was found
    calls: list[Call] = field(default_factory=list)
    finish: str | None = None  # finish_reason / stop_reason as sent
    tool_finish: bool = False  # finish says "a tool call ends this turn"
    cut: bool = False  # finish says the token budget ran out
    streamed: bool = False
    exchange: Exchange | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Request:
    """What a probe asks, in shape-neutral terms; tools use the OpenAI function form."""
    prompt: str
    max_tokens: int
    tools: list[dict] | None = None
    tool_choice: Any = None  # "auto" | "required" | "none" | a tool name (named choice)
    parallel: bool | None = None
    stream: bool = False
    extra: dict = field(default_factory=dict)  # driver-supplied params (thinking switch, effort)


class Chat:
    """A client for one endpoint; `send(Request)` returns a `Reply` and records the exchange."""

    def __init__(self, target, reasoning_field: str | None = None):
        self.target = target
        self.driver = target.driver
        # fleet.yaml may name the field; the driver's usual ones are still read, so a check
        # can say where the reasoning went instead of calling it missing.
        known = tuple(target.driver.reasoning_fields)
        self.fields = (reasoning_field,) + known if reasoning_field else known
        self.exchanges: list[Exchange] = []
        self._http = _recording_client(self.exchanges, target)
        self._sdk = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Chat":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, req: Request) -> Reply:
        before = len(self.exchanges)
        anthropic = self.driver.api_shape == "anthropic"
        try:
            reply = self._anthropic(req) if anthropic else self._openai(req)
        except Exception as exc:  # the SDK's errors carry the status; the exchange the words
            reply = self._failure(exc)
        reply.streamed = req.stream
        if len(self.exchanges) > before:
            reply.exchange = self.exchanges[-1]
        if reply.error and reply.status is None and reply.exchange is not None:
            reply.status = reply.exchange.status
        return reply

    # -- OpenAI chat completions -------------------------------------------------------------
    def _openai(self, req: Request) -> Reply:
        client = self._client()
        params: dict[str, Any] = {"model": self.target.model_name(), "max_tokens": req.max_tokens,
                                  "messages": [{"role": "user", "content": req.prompt}]}
        if req.tools is not None:
            params["tools"] = req.tools
            if req.tool_choice is not None:
                params["tool_choice"] = _openai_choice(req.tool_choice)
            if req.parallel is not None:
                params["parallel_tool_calls"] = req.parallel
        params.update(_merge_extra(req.extra))
        if req.stream:
            return self._openai_stream(client.chat.completions.create(stream=True, **params))
        completion = client.chat.completions.create(**params)
        choice = completion.choices[0]
        msg = choice.message
        reply = Reply(status=200, content=msg.content or "", finish=choice.finish_reason)
        reply.reasoning, reply.reasoning_field = self._reasoning(msg.model_extra or {})
        for tc in msg.tool_calls or []:
            fn = getattr(tc, "function", None)
            reply.calls.append(Call(getattr(fn, "name", None), getattr(fn, "arguments", None),
                                    getattr(tc, "id", None)))
        return _finished(reply)

    def _openai_stream(self, stream) -> Reply:
        reply, texts, thoughts, calls = Reply(status=200), [], {}, {}
        for chunk in stream:
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is not None:
                    texts.append(delta.content or "")
                    for name, value in (delta.model_extra or {}).items():
                        if name in self.fields and isinstance(value, str):
                            thoughts[name] = thoughts.get(name, "") + value
                    for tc in delta.tool_calls or []:
                        _add_fragment(calls, tc)
                if choice.finish_reason:
                    reply.finish = choice.finish_reason
        reply.content = "".join(texts)
        reply.reasoning, reply.reasoning_field = self._reasoning(thoughts)
        reply.calls = [calls[i] for i in sorted(calls)]
        return _finished(reply)

    def _reasoning(self, fields: dict) -> tuple[str, str | None]:
        """The first non-empty reasoning field, in the driver's (or fleet.yaml's) order."""
        for name in self.fields:
            value = fields.get(name)
            if isinstance(value, str) and value.strip():
                return value, name
        return "", None

    # -- Anthropic messages ------------------------------------------------------------------
    def _anthropic(self, req: Request) -> Reply:
        client = self._client()
        params: dict[str, Any] = {"model": self.target.model_name(), "max_tokens": req.max_tokens,
                                  "messages": [{"role": "user", "content": req.prompt}]}
        if req.tools is not None:
            params["tools"] = [_anthropic_tool(t) for t in req.tools]
            if req.tool_choice is not None:
                params["tool_choice"] = _anthropic_choice(req.tool_choice, req.parallel)
        params.update(_merge_extra(req.extra))
        if req.stream:
            return self._anthropic_stream(client.messages.create(stream=True, **params))
        message = client.messages.create(**params)
        reply = Reply(status=200, finish=message.stop_reason)
        for block in message.content:
            _add_block(reply, block.type, block)
        return _finished(reply)

    def _anthropic_stream(self, stream) -> Reply:
        reply, blocks = Reply(status=200), {}
        for event in stream:
            kind = event.type
            if kind == "content_block_start":
                blocks[event.index] = _StreamBlock(event.content_block)
            elif kind == "content_block_delta":
                blocks.setdefault(event.index, _StreamBlock(None)).add(event.delta)
            elif kind == "message_delta":
                reply.finish = event.delta.stop_reason or reply.finish
            elif kind == "error":
                raise _StreamError(getattr(event, "error", None))
        for index in sorted(blocks):
            blocks[index].close(reply)
        return _finished(reply)

    # -- clients and errors -------------------------------------------------------------------
    def _client(self):
        if self._sdk is None:
            ep, timeout = self.target.endpoint, self.target.timeout
            common = dict(api_key=ep.api_key or NO_KEY, http_client=self._http, max_retries=0,
                          timeout=timeout, default_headers=dict(ep.headers) or None)
            if self.driver.api_shape == "anthropic":
                import anthropic

                self._sdk = anthropic.Anthropic(base_url=ep.root, **common)
            else:
                import openai

                self._sdk = openai.OpenAI(base_url=ep.api_base, **common)
        return self._sdk

    def _failure(self, exc: Exception) -> Reply:
        status = getattr(exc, "status_code", None)
        ex = self.exchanges[-1] if self.exchanges else None
        if ex is not None and ex.error:
            return Reply(status=None, error=ex.error)
        message = None
        if ex is not None and status is not None:
            message = self.driver.error_message(ex)
        if message is None:
            message = _sdk_message(exc)
        return Reply(status=status, error=message)


class _StreamError(Exception):
    def __init__(self, error):
        message = getattr(error, "message", None) if error is not None else None
        super().__init__(message or "the stream carried an error event")
        self.message = str(self)


def _sdk_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def _finished(reply: Reply) -> Reply:
    reply.tool_finish = reply.finish in ("tool_calls", "tool_use")
    reply.cut = reply.finish in ("length", "max_tokens")
    return reply


def _merge_extra(extra: dict) -> dict:
    """Driver params; `extra_body` parts from several sources merge instead of replacing."""
    out: dict[str, Any] = {}
    for key, value in extra.items():
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


def _openai_choice(choice):
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _anthropic_choice(choice, parallel):
    kind = {"auto": "auto", "required": "any", "none": "none"}.get(choice)
    out = {"type": kind} if kind else {"type": "tool", "name": choice}
    if parallel is False and kind != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _anthropic_tool(tool: dict) -> dict:
    fn = tool["function"]
    return {"name": fn["name"], "description": fn.get("description", ""),
            "input_schema": fn["parameters"]}


def _add_fragment(calls: dict, tc) -> None:
    """OpenAI stream: the first delta of a call has id and name; later ones argument pieces."""
    index = getattr(tc, "index", None)
    index = len(calls) if index is None else index
    call = calls.setdefault(index, Call(None, "", None))
    call.id = call.id or getattr(tc, "id", None)
    fn = getattr(tc, "function", None)
    if fn is not None:
        call.name = call.name or getattr(fn, "name", None)
        call.arguments += getattr(fn, "arguments", None) or ""


def _add_block(reply: Reply, kind: str, block) -> None:
    if kind == "text":
        reply.content += block.text or ""
    elif kind == "thinking":
        reply.reasoning += block.thinking or ""
        reply.reasoning_field = "thinking"
    elif kind == "redacted_thinking":
        reply.reasoning += "[redacted thinking]"
        reply.reasoning_field = "redacted_thinking"
    elif kind == "tool_use":
        reply.calls.append(Call(block.name, block.input, block.id))


class _StreamBlock:
    """An Anthropic content block rebuilt from its start event and deltas."""

    def __init__(self, start):
        self.kind = getattr(start, "type", None)
        self.start = start
        self.text: list[str] = []

    def add(self, delta) -> None:
        kind = getattr(delta, "type", "")
        piece = {"text_delta": "text", "thinking_delta": "thinking",
                 "input_json_delta": "partial_json"}.get(kind)
        if piece:
            self.text.append(getattr(delta, piece, "") or "")

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


# -- the recording transport -----------------------------------------------------------------
def _recording_client(sink: list, target):
    import httpx2

    class Recorder(httpx2.BaseTransport):
        """Reads each answer whole (streams too) so the exchange keeps the body as evidence."""

        def __init__(self):
            self.inner = httpx2.HTTPTransport()

        def handle_request(self, request):
            ex = Exchange(request.method, str(request.url), request_json=_json(request.read()))
            keyed = [h for h in ("authorization", "x-api-key") if h in request.headers]
            ex.auth_header = keyed[0] if keyed and target.endpoint.api_key else None
            start = time.monotonic()
            try:
                resp = self.inner.handle_request(request)
                data, ex.truncated = http.read_capped(resp.iter_raw())
                if ex.truncated:  # a hostile or runaway answer: stop reading, say so
                    resp.close()
                    raise httpx2.ReadError(f"the answer ran past {http.MAX_BODY} bytes",
                                           request=request)
            except Exception as exc:
                ex.error = http.describe(exc, target.timeout)
                ex.elapsed = time.monotonic() - start
                sink.append(ex)
                raise
            resp = httpx2.Response(resp.status_code, headers=resp.headers, content=data,
                                   request=request, extensions=resp.extensions)
            ex.status, ex.headers = resp.status_code, dict(resp.headers)
            ex.body = resp.read().decode("utf-8", "replace")
            ex.elapsed = time.monotonic() - start
            sink.append(ex)
            return resp

        def close(self):
            self.inner.close()

    timeout = target.timeout
    return httpx2.Client(transport=Recorder(), timeout=httpx2.Timeout(
        timeout, connect=min(http.CONNECT_TIMEOUT, timeout)))


def _json(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
