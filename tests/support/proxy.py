"""A loopback HTTP proxy in front of a real server, for what sits between a client and an engine
in the field: network and scheduling jitter (a random delay before every answer), and a gateway
that rewrites the request JSON (e.g. forcing llama.cpp's `cache_prompt: false`).

    with Proxy(server.url, jitter_s=0.03, rewrite=lambda body: {**body, "cache_prompt": False}) as p:
        run_fleet(one_endpoint(p.url, ...))

Streams pass through piece by piece as the upstream sends them.
"""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import httpx

ERROR_KEPT = 2000  # characters of an error answer the exchange log keeps
SECRET_HEADERS = {"authorization", "x-api-key", "api-key"}  # never kept in the exchange log
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Proxy:
    def __init__(self, upstream: str, *, jitter_s: float = 0.0,
                 rewrite: Callable[[dict], dict] | None = None, seed: int | None = None,
                 pace_s: float = 0.0,
                 routes: dict[str, Callable[[Any], Any]] | None = None,
                 rewrite_answer: Callable[[dict, dict], dict] | None = None,
                 refuse: Callable[[dict], str | None] | None = None,
                 refuse_status: int = 400,
                 rewrite_stream: Callable[[dict, list[bytes]], list[bytes]] | None = None,
                 hold_s: float = 0.0, mutant: Any = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.jitter_s, self.rewrite = jitter_s, rewrite
        # A long prompt's processing: every generation (POST) held this long before it is sent
        # on, so its answer begins that much later
        self.hold_s = hold_s
        # rewrite_answer(request, answer): a whole JSON answer as the client receives it
        self.rewrite_answer = rewrite_answer
        # refuse(request): a gateway's own 400 (refuse_status) with that message, the upstream
        # never asked
        self.refuse, self.refuse_status = refuse, refuse_status
        # rewrite_stream(request, events): an event stream's events (each with its blank line)
        # as the client receives them, e.g. a gateway that re-stamps or re-chunks them
        self.rewrite_stream = rewrite_stream
        # mutant.answer(path, request, answer) and mutant.stream(path, request, events): the
        # same two rewrites told the route, for the mutation harness (tests/support/mutants.py)
        # whose operators differ per route; it may be swapped between runs
        self.mutant = mutant
        # A slow, steady GPU: each streamed event `pace_s` after the last, and a whole answer
        # held for `pace_s` per token it generated (a server sends it only when it is done).
        self.pace_s = pace_s
        # A gateway's own answer for a GET path: a function of the upstream's JSON (None: the
        # gateway does not serve the path, 404), e.g. a /v1/models card with max_model_len.
        self.routes = routes or {}
        self.random = random.Random(seed)
        self.delays: list[float] = []  # every delay added, for the tests to show
        self.sent: list[dict] = []  # every JSON body forwarded, after any rewrite
        # every request forwarded, in order: method, path, headers (less credentials), the
        # upstream's status, the JSON body sent (None: not JSON) and, for an error status, the
        # start of the upstream's answer
        self.exchanges: list[dict] = []
        # (start, end, method, path) of every request forwarded: when it reached the upstream
        # and when its answer's last byte went back, on time.monotonic()
        self.spans: list[tuple[float, float, str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # An upstream closed under a request still in flight (a server stopped after its test)
        # ends that request quietly: socketserver's traceback would land in a later test's output.
        self._server.handle_error = lambda request, client_address: None
        # A fresh upstream connection per request: a kept-alive one that llama.cpp closed as it
        # went idle failed the next request's send, and the client saw this proxy break the
        # connection with no answer (a healthy streamed agent turn failed once that way).
        self._client = httpx.Client(timeout=120, limits=httpx.Limits(max_keepalive_connections=0))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Proxy:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def delay(self) -> None:
        if self.jitter_s:
            wait = self.random.uniform(0, self.jitter_s)
            self.delays.append(wait)
            time.sleep(wait)

    def paced(self, upstream, request: bytes, path: str = "") -> Iterator[bytes]:
        """The answer's pieces as the upstream sends them, or slowed down to `pace_s`."""
        kind = upstream.headers.get("content-type", "")
        mutant = self.mutant
        if mutant is not None and request and upstream.status_code == 200:
            if "json" in kind:
                answer = mutant.answer(path, json.loads(request), json.loads(upstream.read()))
                return iter([json.dumps(answer).encode()])
            if "event-stream" in kind:
                return iter(mutant.stream(path, json.loads(request), list(_events(upstream))))
        if self.rewrite_answer is not None and "json" in kind and request:
            answer = self.rewrite_answer(json.loads(request), json.loads(upstream.read()))
            return iter([json.dumps(answer).encode()])
        if self.rewrite_stream is not None and "event-stream" in kind and request:
            return iter(self.rewrite_stream(json.loads(request), list(_events(upstream))))
        if not self.pace_s:
            return upstream.iter_bytes()
        if "event-stream" in kind:
            return (time.sleep(self.pace_s) or event for event in _events(upstream))
        whole = upstream.read()
        try:
            tokens = json.loads(whole)["usage"]["completion_tokens"]
        except (ValueError, KeyError, TypeError):
            tokens = 0
        time.sleep(self.pace_s * tokens)
        return iter([whole])

    def body(self, raw: bytes, kind: str) -> bytes:
        if not raw or "json" not in kind:
            return raw
        payload = json.loads(raw)
        if self.rewrite is not None and isinstance(payload, dict):
            payload = self.rewrite(payload)
        self.sent.append(payload)
        return json.dumps(payload).encode()


def _json(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _events(upstream) -> Iterator[bytes]:
    """An event stream re-cut at its event boundaries."""
    held = b""
    for piece in upstream.iter_bytes():
        held += piece
        *events, held = held.split(b"\n\n")
        yield from (event + b"\n\n" for event in events)
    if held:
        yield held


def _handler(proxy: Proxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _answer(self, status: int, payload) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(raw)
            self.close_connection = True

        def _forward(self):
            route = proxy.routes.get(self.path) if self.command == "GET" else None
            if route is not None:
                found = route(proxy._client.get(proxy.upstream + self.path).json())
                self._answer(404, {"error": "not found"}) if found is None else \
                    self._answer(200, found)
                return
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = proxy.body(raw, self.headers.get("content-type", ""))
            refused = proxy.refuse(json.loads(body)) if proxy.refuse and body else None
            if refused is not None:
                self._answer(proxy.refuse_status, {"error": {"message": refused,
                                             "type": "invalid_request_error"}})
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            request = proxy._client.build_request(self.command, proxy.upstream + self.path,
                                                  headers=headers, content=body or None)
            if self.command == "POST" and proxy.hold_s:
                time.sleep(proxy.hold_s)
            started = time.monotonic()
            upstream = proxy._client.send(request, stream=True)
            exchange = {"method": self.command, "path": self.path,
                        "status": upstream.status_code, "body": _json(body), "error": "",
                        "headers": {k.lower(): v for k, v in headers.items()
                                    if k.lower() not in SECRET_HEADERS}}
            proxy.exchanges.append(exchange)
            try:
                proxy.delay()  # before the answer's first byte: the time to first token moves
                pieces = proxy.paced(upstream, body, self.path)
                self.send_response(upstream.status_code)
                for key, value in upstream.headers.items():
                    if key.lower() not in HOP_BY_HOP and key.lower() != "content-encoding":
                        self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                for piece in pieces:
                    if upstream.status_code >= 400 and len(exchange["error"]) < ERROR_KEPT:
                        exchange["error"] += piece[:ERROR_KEPT].decode("utf-8", "replace")
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            finally:
                upstream.close()
                proxy.spans.append((started, time.monotonic(), self.command, self.path))
            self.close_connection = True

        do_GET = do_POST = _forward

    return Handler


# -- faults a gateway or an engine's stream assembly shows, as rewrites ------------------------
def content_twice(request: dict, events: list[bytes]) -> list[bytes]:
    """For `rewrite_stream`: each chat chunk that carries content followed by a second chunk
    with the same content alone, on a request without tools, as vLLM sent it with a tool
    parser on (PR 46183); a client reassembles every piece twice."""
    if request.get("tools"):
        return events
    out = []
    for event in events:
        out.append(event)
        chunk = _json(event.removeprefix(b"data: ").strip())
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        delta = choices[0].get("delta") if choices else None
        if isinstance(delta, dict) and delta.get("content"):
            again = {**chunk, "choices": [{"index": 0, "delta": {"content": delta["content"]},
                                           "finish_reason": None}]}
            again.pop("usage", None)
            out.append(b"data: " + json.dumps(again).encode() + b"\n\n")
    return out


def reasoning_alone(request: dict, answer: dict) -> dict:
    """For `rewrite_answer`: a chat answer left with its reasoning, its content and tool calls
    dropped, as a reasoning parser that holds the whole reply as thinking returns it."""
    for choice in answer.get("choices") or []:
        message = choice.get("message") or {}
        message["content"] = None
        message.pop("tool_calls", None)
        choice["finish_reason"] = "stop"  # the turn ended where the thinking did
    return answer
