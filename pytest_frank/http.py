"""One HTTP exchange with an endpoint, kept as evidence: what was sent, what came back, how long."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from pytest_frank import redact

MAX_BODY = 4 * 1024 * 1024  # a hostile endpoint must not make us read forever
CONNECT_TIMEOUT = 5.0


@dataclass
class Exchange:
    method: str
    url: str
    request_json: Any = None
    status: int | None = None
    body: str = ""
    elapsed: float = 0.0
    error: str | None = None  # one line: why no answer came back
    truncated: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    auth_header: str | None = None  # the header that carried a key, shown as $API_KEY in curl

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def snippet(self, limit: int = 300) -> str:
        text = " ".join(self.body.split())
        return redact.scrub(text if len(text) <= limit else text[:limit] + "...")

    def summary(self) -> str:
        if self.error:
            return f"{self.method} {self.url}: {self.error}"
        return f"{self.method} {self.url} -> {self.status} in {self.elapsed:.2f}s: {self.snippet(200)}"

    def curl(self) -> str:
        """A command that reproduces the request; the key stays in an environment variable."""
        parts = ["curl", "-sS", "-X", self.method, self.url]
        if self.request_json is not None:
            parts += ["-H", "Content-Type: application/json", "-d", json.dumps(self.request_json)]
        line = redact.scrub(" ".join(shlex.quote(p) for p in parts))
        if self.auth_header == "authorization":
            line += ' -H "Authorization: Bearer $API_KEY"'
        elif self.auth_header:
            line += f' -H "{self.auth_header}: $API_KEY"'
        return line

    def record(self) -> dict:
        return {
            "request": f"{self.method} {self.url}",
            "sent": self.request_json,
            "status": self.status,
            "error": self.error,
            "elapsed_s": round(self.elapsed, 3),
            "body": self.snippet(2000),
        }


def client(timeout: float):
    """An httpx client with a short connect timeout: a dead host should fail fast."""
    import httpx

    return httpx.Client(timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)))


def send(http, method: str, url: str, *, headers=None, json_body=None, timeout=None) -> Exchange:
    ex = Exchange(method, url, request_json=json_body)
    keyed = [h for h in ("authorization", "x-api-key") if h in {k.lower() for k in headers or {}}]
    ex.auth_header = keyed[0] if keyed else None
    start = time.monotonic()
    try:
        with http.stream(method, url, headers=headers, json=json_body, timeout=timeout) as resp:
            ex.status = resp.status_code
            ex.headers = dict(resp.headers)
            data, ex.truncated = read_capped(resp.iter_bytes())
            ex.body = data.decode("utf-8", "replace")
    except Exception as exc:  # every transport failure becomes one line of evidence
        ex.error = describe(exc, timeout or http.timeout.read)
    ex.elapsed = time.monotonic() - start
    return ex


def read_capped(chunks) -> tuple[bytes, bool]:
    """The body up to MAX_BODY, and whether there was more (left unread)."""
    parts, size = [], 0
    for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            return b"".join(parts)[:MAX_BODY], True
    return b"".join(parts), False


def describe(exc: BaseException, timeout: float | None) -> str:
    """The cause of a failed request in the words an operator searches for.

    Matched by class name, so httpx and httpx2 (the openai/anthropic clients' fork) read the same.
    """
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    text = str(exc) or type(exc).__name__
    lower = text.lower()
    if "ConnectTimeout" in kinds:
        return "connection timed out (host unreachable or a firewall drops packets)"
    if "TimeoutException" in kinds:
        return f"no answer within {timeout:g}s (the server accepted the connection but hangs)"
    if "ConnectError" in kinds:
        if "refused" in lower:
            return "connection refused (nothing listens on that port: is the server running?)"
        if any(s in lower for s in ("name or service", "nodename", "getaddrinfo", "name resolution")):
            return "DNS lookup failed (unknown host name)"
        return f"cannot connect: {text}"
    if kinds & {"RemoteProtocolError", "ReadError"}:
        return f"the server broke the connection: {text}"
    if "UnsupportedProtocol" in kinds:
        return f"unsupported URL: {text}"
    return f"{type(exc).__name__}: {text}"
