"""A loopback HTTP server that imitates an engine's shapes, with fault switches.

For what the real tiny llama.cpp cannot show here: vLLM, SGLang and Anthropic-proxy shapes, a
server stuck in 503 "Loading model", a socket that accepts and never answers, hostile bodies.
Routes are plain functions `(Request) -> Reply`, so later tests add chat, metrics or messages.
"""

from __future__ import annotations

import json
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


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, str/bytes -> as is
    headers: dict[str, str] = field(default_factory=dict)


def _models_llamacpp(em):
    first = sorted(em.models)[0]
    return {"object": "list", "data": [{"id": first, "object": "model", "owned_by": "llamacpp",
                                        "aliases": sorted(em.models), "meta": {"n_ctx": 4096}}]}


def _models_cards(owner):
    def cards(em):
        return {"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": owner, "root": f"/models/{m}",
             "max_model_len": 32768} for m in em.models]}
    return cards


def _models_anthropic(em):
    return {"data": [{"type": "model", "id": m, "display_name": m} for m in em.models],
            "has_more": False}


SHAPES = {
    # engine: (health reply, models body)
    "llamacpp": (Reply(200, {"status": "ok"}), _models_llamacpp),
    "vllm": (Reply(200, ""), _models_cards("vllm")),
    "sglang": (Reply(200, ""), _models_cards("sglang")),
    "anthropic": (Reply(200, {"status": "ok"}), _models_anthropic),
    "openai": (None, _models_cards("openai")),
}
LOADING = Reply(503, {"error": {"message": "Loading model", "type": "unavailable_error",
                                "code": 503}})


class Emulator:
    """`with Emulator("vllm", models=["m"]) as em:` serves on `em.url` until the block ends."""

    def __init__(self, engine: str = "llamacpp", models=("model",), *, api_key: str | None = None,
                 loading_for: float = 0.0, hang: bool = False):
        self.engine = engine
        self.models = list(models)
        self.api_key = api_key
        self.loading_until = time.monotonic() + loading_for if loading_for else 0.0
        self.hang = hang
        self.requests: list[Request] = []
        self.routes: dict[tuple[str, str], Callable[[Request], Reply]] = {}
        health, models_body = SHAPES[engine]
        if health is not None:
            self.route("GET", "/health", lambda r: health)
        self.route("GET", "/v1/models", lambda r: Reply(200, models_body(self)))
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
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
            reply = em.answer(req)
            if reply is None:
                return
            self._send(reply)

        def _send(self, reply: Reply):
            body = reply.body
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
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

    return Handler
