"""One generation request in the endpoint's own API shape (the driver builds and reads it), plain
or streamed with a clock on each token, for the checks that look at what the engine does."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from pytest_frank import http
from pytest_frank.http import Exchange

MAX_SSE_LINES = 4000  # evidence keeps the stream's head; a runaway stream must not fill memory


def request(target, content, max_tokens: int, **extra) -> Exchange:
    """A single user turn; `content` is a string or the driver's list of content parts."""
    path, body = target.driver.chat_request(target.model_name(), content, max_tokens, extra)
    return target.post(path, body)


@dataclass
class Streamed:
    exchange: Exchange
    first_token_s: float | None = None  # to the first content or reasoning text, not chunk
    last_token_s: float | None = None
    pieces: int = 0  # deltas that carried text
    tokens: int | None = None  # the server's own count (usage), when it gives one
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. llama.cpp's final `timings`

    @property
    def generated(self) -> int:
        return self.tokens if self.tokens is not None else self.pieces

    def decode_rate(self) -> float | None:
        """Tokens per second after the first token: decode speed without prefill."""
        span = (self.last_token_s or 0) - (self.first_token_s or 0)
        return (self.generated - 1) / span if self.generated > 1 and span > 0 else None


def stream(target, content, max_tokens: int, **extra) -> Streamed:
    driver = target.driver
    path, body = driver.chat_request(target.model_name(), content, max_tokens,
                                     {**extra, **driver.stream_options})
    ex = Exchange("POST", target.url(path), request_json=body)
    out, lines = Streamed(ex), []
    # A token costs an event and a blank line; a stream far past that never ends by itself.
    budget = 4 * max_tokens + 64
    start = time.monotonic()
    try:
        with target.client().stream("POST", ex.url, headers=target.headers(), json=body,
                                    timeout=target.timeout) as resp:
            ex.status = resp.status_code
            for n, line in enumerate(resp.iter_lines()):
                if len(lines) < MAX_SSE_LINES:
                    lines.append(line)
                if _take(driver, line, out, time.monotonic() - start):
                    break
                if n > budget:
                    ex.error = (f"the stream ran past {budget} lines for {max_tokens} "
                                "max_tokens without ending")
                    break
    except Exception as exc:  # a broken stream is evidence, not a crash
        ex.error = http.describe(exc, target.timeout)
    ex.elapsed = time.monotonic() - start
    ex.body = "\n".join(lines)
    return out


def _take(driver, line: str, out: Streamed, now: float) -> bool:
    """Read one SSE line into `out`; True at the end of the stream."""
    if not line.startswith("data:"):
        return False
    data = line[5:].strip()
    if data == "[DONE]":
        return True
    try:
        event = json.loads(data)
    except ValueError:
        return False
    if driver.stream_text(event):
        out.first_token_s = out.first_token_s if out.first_token_s is not None else now
        out.last_token_s = now
        out.pieces += 1
    tokens = driver.stream_tokens(event)
    out.tokens = tokens if tokens is not None else out.tokens
    if isinstance(event, dict) and isinstance(event.get("timings"), dict):
        out.extra["timings"] = event["timings"]
    return False
