"""A loopback HTTP server that imitates an engine's shapes, with fault switches.

For what the real tiny llama.cpp cannot show here: vLLM, SGLang and Anthropic-proxy shapes, a
server stuck in 503 "Loading model", a socket that accepts and never answers, hostile bodies.
Routes are plain functions `(Request) -> Reply`, so later tests add chat, metrics or messages.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

HANG_LIMIT = 30.0  # a hanging handler gives up on its own, so a broken test cannot wedge CI


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


DROP = object()  # an answer that closes the connection having sent nothing


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, str/bytes -> as is
    headers: dict[str, str] = field(default_factory=dict)
    # How the answer breaks (BREAKS), where it does: a transport fault no engine commits on
    # purpose, which only a loopback server can show.
    broken: str | None = None


# A TCP reset (as a crashed worker, or a proxy or firewall cutting in, sends) before the status
# line, after part of the headers, or after half the body; a clean close after half the body (a
# length promised and not kept); bytes that are no HTTP answer.
BREAKS = ("reset before", "reset headers", "reset body", "short body", "not http")
NOT_HTTP = b"SSH-2.0-OpenSSH_9.6\r\n\r\n"  # another service on the port: no status line


def broken(how: str, reply: Reply | None = None) -> Reply:
    """`reply` (a healthy-looking model list by default) broken `how` (BREAKS)."""
    assert how in BREAKS, how
    base = reply or Reply(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
    return Reply(base.status, base.body, base.headers, broken=how)


def _models_llamacpp(em):
    first = sorted(em.models)[0]
    return {"object": "list", "data": [{"id": first, "object": "model", "owned_by": "llamacpp",
                                        "aliases": sorted(em.models), "meta": {"n_ctx": 4096}}]}


def _models_cards(owner, root=lambda m: f"/models/{m}"):
    def cards(em):
        return {"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": owner, "root": root(m),
             "max_model_len": 32768} for m in em.models]}
    return cards


def _models_anthropic(em):
    return {"data": [{"type": "model", "id": m, "display_name": m} for m in em.models],
            "has_more": False}


SHAPES = {
    # engine: (health reply, models body)
    "llamacpp": (Reply(200, {"status": "ok"}), _models_llamacpp),
    "vllm": (Reply(200, ""), _models_cards("vllm")),
    # SGLang's card: ModelCard(id=served_model_name, root=served_model_name, ...)
    "sglang": (Reply(200, ""), _models_cards("sglang", root=lambda m: m)),
    "anthropic": (Reply(200, {"status": "ok"}), _models_anthropic),
    "openai": (None, _models_cards("openai")),
}
LOADING = Reply(503, {"error": {"message": "Loading model", "type": "unavailable_error",
                                "code": 503}})


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that cut its connection (a cap, a deadline, an interrupt) is no server error.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class Emulator:
    """`with Emulator("vllm", models=["m"]) as em:` serves on `em.url` until the block ends."""

    def __init__(self, engine: str = "llamacpp", models=("model",), *, api_key: str | None = None,
                 loading_for: float = 0.0, hang: bool = False, latency: float = 0.0):
        self.engine = engine
        self.latency = latency  # seconds before each POST is answered: a generation's cost
        self.in_flight = self.peak_in_flight = 0  # requests being answered now, and at most
        self.models = list(models)
        self.api_key = api_key
        self.loading_for = loading_for  # answers 503 "Loading model" so long from the first request
        self.loading_until: float | None = None
        self.hang = hang
        self.requests: list[Request] = []
        self.routes: dict[tuple[str, str], Callable[[Request], Reply]] = {}
        health, models_body = SHAPES[engine]
        if health is not None:
            self.route("GET", "/health", lambda r: health)
        self.route("GET", "/v1/models", lambda r: Reply(200, models_body(self)))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, method: str, path: str, fn: Callable[[Request], Reply]) -> None:
        self.routes[(method, path)] = fn

    def loading(self, forever: bool = True) -> None:
        self.loading_until = float("inf") if forever else 0.0

    def arrive(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def start(self) -> "Emulator":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def answer(self, req: Request) -> Reply | None:
        if self.hang:
            self._stop.wait(HANG_LIMIT)
            return None
        if self.loading_until is None:
            self.loading_until = time.monotonic() + self.loading_for
        if time.monotonic() < self.loading_until:
            return LOADING
        if self.api_key and not self._authorized(req) and req.path != "/health":
            return Reply(401, {"error": {"message": "Invalid API Key", "type": "auth_error"}})
        fn = self.routes.get((req.method, req.path.split("?")[0]))
        if fn is None:
            return Reply(404, {"error": {"message": f"File Not Found: {req.path}", "code": 404}})
        return fn(req)

    def _authorized(self, req: Request) -> bool:
        bearer = req.headers.get("authorization", "")
        return self.api_key in (bearer.removeprefix("Bearer "), req.headers.get("x-api-key"))


def _handler(em: Emulator):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall

        def log_message(self, *args):  # quiet: tests read assertions, not access logs
            pass

        def _serve(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = Request(self.command, self.path, headers, body)
            em.requests.append(req)
            em.arrive()
            self.working = True
            try:
                if em.latency and req.method == "POST":
                    time.sleep(em.latency)
                reply = em.answer(req)
                if reply is DROP:  # the connection closed with nothing sent
                    self.close_connection = True
                elif reply is not None:
                    self._send(reply)
            finally:
                self.done()

        def done(self):
            # Counted as answered just before its last bytes go out: the client can only send
            # its next request after reading them, so a request never overlaps its successor.
            if self.working:
                self.working = False
                em.leave()

        def _reset(self):
            """Close with a TCP RST: linger on, zero seconds, so the close drops what is
            unsent and resets the connection instead of ending it."""
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True

        def _send(self, reply: Reply):
            body = reply.body
            if reply.broken == "reset before":
                return self._reset()
            if reply.broken == "not http":
                self.wfile.write(NOT_HTTP)
                self.close_connection = True
                return None
            if hasattr(body, "__next__"):  # a paced stream: write pieces as they come, then close
                return self._send_paced(reply)
            if isinstance(body, (dict, list)):
                data, ctype = json.dumps(body).encode(), "application/json"
            else:
                data = body.encode() if isinstance(body, str) else (body or b"")
                ctype = reply.headers.get("content-type", "text/plain")
            self.send_response(reply.status)
            self.send_header("content-type", ctype)
            for k, v in reply.headers.items():
                if k.lower() != "content-type":
                    self.send_header(k, v)
            self.send_header("content-length", str(len(data)))
            if reply.broken == "reset headers":  # the status line and part of the headers went out
                self._headers_buffer = self._headers_buffer[:2]
                self.flush_headers()
                return self._reset()
            self.end_headers()
            self.done()
            if reply.broken in ("reset body", "short body"):
                self.wfile.write(data[:len(data) // 2])
                if reply.broken == "short body":  # a clean close, the length not kept
                    self.close_connection = True
                    return None
                return self._reset()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client cut the answer off (the cap)

        def _send_paced(self, reply: Reply):
            self.send_response(reply.status)
            for k, v in {"content-type": "text/event-stream", **reply.headers}.items():
                self.send_header(k, v)
            self.send_header("connection", "close")  # no length: the end of the body is the close
            self.end_headers()
            try:
                for piece in reply.body:
                    self.wfile.write(piece.encode() if isinstance(piece, str) else piece)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client cut the answer off (a cap, a deadline, an interrupt)

        do_GET = do_POST = _serve
        working = False

    return Handler


# -- reply builders any test can reuse: chat JSON, SSE streams, Prometheus text, sent images -----

# What every chat completion and chunk of an engine carries (the OpenAI SDK's types require id,
# object and created): the emulator's healthy shapes keep the published contract.
CREATED = 1700000000
CHUNK = {"id": "chatcmpl-emu", "object": "chat.completion.chunk", "created": CREATED}


def chat_json(content="Hello!", *, model="model", finish="stop", tokens=5,
              **message_extra) -> dict:
    """An OpenAI chat completion; extra keys go into `message` (e.g. reasoning_content).
    `tokens` is usage.completion_tokens: a reply cut by the budget it was asked with says the
    budget (the request's max_tokens), as engines count."""
    return {"id": "chatcmpl-emu", "object": "chat.completion", "created": CREATED, "model": model,
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content, **message_extra}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": tokens,
                      "total_tokens": 10 + tokens}}


def paced(pieces, gap: float):
    """A body written piece by piece, `gap` seconds before each: a drip, a slow stream."""
    for piece in pieces:
        time.sleep(gap)
        yield piece


def drip(text: str = "data: " + "x" * 1000, gap: float = 1.0) -> Reply:
    """An answer that comes one byte every `gap` seconds: no read ever times out, yet it never
    ends in useful time (an overloaded or swapped-out server)."""
    return Reply(200, paced(text, gap), {"content-type": "text/event-stream"})


def endless_line(size: int, piece: int = 1024 * 1024) -> Reply:
    """An event stream of one `size`-byte line with no newline, made as it is sent (the server
    holds one piece, not the line)."""
    def line():
        yield 'data: {"choices": [{"index": 0, "delta": {"content": "'
        block = b"x" * piece
        for _ in range(size // piece):
            yield block
    return Reply(200, line(), {"content-type": "text/event-stream"})


def sse(events, done: bool = True, gap: float = 0.0, named: bool = False) -> Reply:
    """A server-sent event stream of JSON events ending in [DONE]; `gap` seconds before each
    event after the first paces it like a real decode (else it is sent in one piece). An event
    may be a number: a pause of that many seconds. `named` adds the `event: <type>` line the
    Anthropic Messages API sends before each event."""
    def line(e):
        name = f"event: {e['type']}\n" if named else ""
        return f"{name}data: {json.dumps(e)}\n\n"
    lines = [e if isinstance(e, (int, float)) else line(e) for e in events]
    lines += ["data: [DONE]\n\n"] if done else []

    def paced():
        for i, line in enumerate(lines):
            if isinstance(line, (int, float)):
                time.sleep(line)
                continue
            if i and gap:
                time.sleep(gap)
            yield line

    if gap or any(isinstance(x, (int, float)) for x in lines):
        return Reply(200, paced(), {"content-type": "text/event-stream"})
    return Reply(200, "".join(lines), {"content-type": "text/event-stream"})


def chat_chunks(pieces, *, model="model", field="content", usage=True) -> list[dict]:
    """OpenAI stream chunks: a role-only chunk, one delta per piece, a finish chunk (+ usage)."""
    def chunk(delta, finish=None):
        return {**CHUNK, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    out = [chunk({"role": "assistant", "content": None})]
    out += [chunk({field: p}) for p in pieces] + [chunk({}, "length")]
    if usage:
        out.append({**CHUNK, "model": model, "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(pieces),
                              "total_tokens": 10 + len(pieces)}})
    return out


def metrics_text(series: dict[str, Any], kinds: dict[str, str] | None = None) -> str:
    """Prometheus text: {name: value or [(labels, value), ...]}; kinds maps a family to its TYPE."""
    lines = [f"# TYPE {family} {kind}" for family, kind in (kinds or {}).items()]
    for name, value in series.items():
        for labels, v in (value if isinstance(value, list) else [({}, value)]):
            tag = ",".join(f'{k}="{x}"' for k, x in labels.items())
            lines.append(f"{name}{{{tag}}} {v}" if tag else f"{name} {v}")
    return "\n".join(lines) + "\n"


def sent_images(body) -> list[bytes]:
    """The image bytes in a chat request: data: URLs, bare base64, Anthropic base64 blocks
    (a tool_result's too)."""
    import base64

    found = []
    for message in (body or {}).get("messages", []):
        parts = message.get("content") if isinstance(message.get("content"), list) else []
        # a tool's images travel inside its tool_result (Anthropic)
        parts = [p for part in parts for p in ([part] + (
            part["content"] if part.get("type") == "tool_result"
            and isinstance(part.get("content"), list) else []))]
        for part in parts:
            if part.get("type") == "image_url":
                found.append(base64.b64decode(part["image_url"]["url"].split("base64,")[-1]))
            elif part.get("type") == "image" and part.get("source", {}).get("type") == "base64":
                found.append(base64.b64decode(part["source"]["data"]))
    return found


# -- generation replies for reasoning / tools checks: OpenAI chat and Anthropic messages ------

def tool_call(name, arguments, call_id="call_1") -> dict:
    """An OpenAI tool call; `arguments` is sent as given when a string, else as JSON text."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def error_json(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "code": status}})


def chat_stream(completion: dict) -> Reply:
    """The SSE stream an engine sends for `completion` (a chat_json dict): role, reasoning and
    content deltas, each tool call as id+name then argument fragments, a finish chunk, [DONE]."""
    msg, finish = completion["choices"][0]["message"], completion["choices"][0]["finish_reason"]

    def chunk(delta, end=None):
        return {**CHUNK, "model": completion.get("model"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": end}]}
    out = [chunk({"role": "assistant", "content": None})]
    for key in ("reasoning_content", "reasoning"):
        if msg.get(key):
            out.append(chunk({key: msg[key]}))
    if msg.get("content"):
        text = msg["content"]
        out += [chunk({"content": text[:3]}), chunk({"content": text[3:]})]
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn, args = call["function"], call["function"]["arguments"]
        out.append(chunk({"tool_calls": [{"index": i, "id": call.get("id"), "type": "function",
                                          "function": {"name": fn["name"], "arguments": ""}}]}))
        half = len(args) // 2
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                for part in (args[:half], args[half:]) if part]
    out.append(chunk({}, finish))
    if completion.get("usage"):  # the last chunk, as engines send it (include_usage)
        out.append({**CHUNK, "model": completion.get("model"), "choices": [],
                    "usage": completion["usage"]})
    return sse(out)


def messages_json(text="Hello!", *, thinking=None, tool_uses=(), stop="end_turn",
                  model="model") -> dict:
    """An Anthropic Messages reply: optional thinking block, text, tool_use blocks."""
    blocks = [{"type": "thinking", "thinking": thinking, "signature": "sig"}] if thinking else []
    blocks += [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
               for i, (name, args) in enumerate(tool_uses)]
    return {"id": "msg_emu", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def messages_stream(message: dict) -> Reply:
    """The Messages SSE events for `message`: start, per block start/deltas/stop, delta, stop."""
    events = [{"type": "message_start", "message": {**message, "content": [],
                                                    "stop_reason": None}}]
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        empty = {"text": {"type": "text", "text": ""},
                 "thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "tool_use": {**block, "input": {}}}[kind]
        events.append({"type": "content_block_start", "index": i, "content_block": empty})
        if kind == "text":
            delta = {"type": "text_delta", "text": block["text"]}
        elif kind == "thinking":
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
        else:
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        if kind == "thinking":  # the signature comes last, in a delta of its own
            events.append({"type": "content_block_delta", "index": i, "delta": {
                "type": "signature_delta", "signature": block["signature"]}})
        events += [{"type": "ping"}, {"type": "content_block_stop", "index": i}]
    events += [{"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]},
                "usage": {"output_tokens": 5}}, {"type": "message_stop"}]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Reply(200, text, {"content-type": "text/event-stream"})


def serve_chat(em: Emulator, answer: Callable[[dict], Any]) -> None:
    """/v1/chat/completions from `answer(body) -> chat_json dict | Reply`; streams when asked."""
    def route(req: Request) -> Reply:
        out = answer(req.body or {})
        if isinstance(out, Reply):
            return out
        return chat_stream(out) if (req.body or {}).get("stream") else Reply(200, out)
    em.route("POST", "/v1/chat/completions", route)


def serve_messages(em: Emulator, answer: Callable[[dict], Any]) -> None:
    """/v1/messages from `answer(body) -> messages_json dict | Reply`; streams when asked."""
    def route(req: Request) -> Reply:
        out = answer(req.body or {})
        if isinstance(out, Reply):
            return out
        return messages_stream(out) if (req.body or {}).get("stream") else Reply(200, out)
    em.route("POST", "/v1/messages", route)
