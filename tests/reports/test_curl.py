"""curl lines: each sent header as one shell word that a shell turns back into the header, with
secrets left in environment variables."""

import os
import shlex
import subprocess

import httpx2
import pytest

from pytest_frank.base import redact
from pytest_frank.transport import http

pytestmark = pytest.mark.unit


def _shell(word: str, env: dict[str, str]) -> str:
    """What a shell makes of `word`, as curl would receive it."""
    done = subprocess.run(["bash", "-c", f"printf %s {word}"], env={**os.environ, **env},
                          capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.parametrize("value", [
    "Bearer tok-curl-plain-0001",        # double quotes: "Bearer $TOK"
    "tok-curl-plain-0001suffix",          # a name followed by letters needs ${TOK}
    'sig="tok-curl-plain-0001" $HOME `x` !',  # quotes and $ in the literal: single-quoted parts
])
def test_a_header_word_expands_back_to_what_was_sent(fresh_state, value):
    redact.register_variable("tok-curl-plain-0001", "TOK")
    word = http._curl_header("X-Upstream", value)
    assert "tok-curl-plain-0001" not in word
    assert _shell(word, {"TOK": "tok-curl-plain-0001"}) == f"X-Upstream: {value}"


def test_a_plain_header_is_shown_as_sent_and_noise_is_left_out():
    assert http._curl_header("X-Route", "blue $HOME") == shlex.quote("X-Route: blue $HOME")
    for name, value in [("Host", "h:1"), ("Content-Length", "12"), ("User-Agent", "OpenAI/Python"),
                        ("x-stainless-retry-count", "0"), ("Accept-Encoding", "identity"),
                        ("Connection", "keep-alive"), ("Accept", "*/*")]:
        assert http._curl_header(name, value) is None, name
    assert http._curl_header("Accept", "text/event-stream") == "'Accept: text/event-stream'"


def test_a_secret_header_without_a_known_variable_is_named_for_itself():
    assert http._curl_header("X-Api-Key", "literal-in-fleet-yaml") == '"X-Api-Key: $X_API_KEY"'
    assert http._curl_header("Authorization", "Bearer abc") == '"Authorization: $AUTHORIZATION"'
    assert http._curl_header("x-api-key", http.NO_KEY) is None  # the SDK's stand-in: no key


def test_the_exchange_keeps_the_words_not_the_values(fresh_state):
    redact.register_variable("sk-exchange-key-0002", "API_KEY")
    request = httpx2.Request("POST", "http://h:1/v1/x", json={"a": 1},
                             headers={"Authorization": "Bearer sk-exchange-key-0002"})
    ex = http.Exchange("POST", str(request.url), request_json={"a": 1},
                       curl_headers=http._curl_headers(request.headers))
    assert "sk-exchange-key-0002" not in repr(ex)
    assert ex.curl() == ("curl -sS -X POST http://h:1/v1/x -H \"Authorization: Bearer $API_KEY\" "
                         "-H 'Content-Type: application/json' -d '{\"a\": 1}'")


def test_the_terminal_cuts_a_long_reproduce_line_and_says_where_it_is_whole():
    from pytest_frank.plugin.under_test import CURL_SHOWN, terminal_curl

    short = "curl -sS http://h:1/v1/models"
    assert terminal_curl(short) == short
    long = "curl -sS -X POST http://h:1/v1/messages -d '" + "x" * 90_000 + "'"
    shown = terminal_curl(long)
    assert shown.startswith(long[:CURL_SHOWN]) and len(shown) < CURL_SHOWN + 300
    assert shown.endswith(f"[{len(long) - CURL_SHOWN} more characters: cut here, so not "
                          "runnable as shown; the whole line is in the reports (--frank-report, "
                          "--html, --frank-json)]")
