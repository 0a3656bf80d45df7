"""How long an answer is waited for scales with the work it asks (its token budget at
min_tokens_per_s), while a drip or a keep-alive-only stream is still cut. Emulated vLLM: a slow but
steady server and the drips are faults no engine here shows on demand."""

import json
import re
import socket
import threading
import time

import pytest

from emulator import Emulator, Reply, chat_chunks, paced, serve_chat, sse
from fleets import one_endpoint
from healthy_engines import healthy_chat

from pytest_frank.transport import http
from pytest_frank.transport.http import FIRST_ANSWER_MAX_S, Pace, first_answer_wait

pytestmark = pytest.mark.emulated


@pytest.mark.parametrize("body, stream, limit, first_byte", [
    ({"max_tokens": 512}, False, 30 + 512 / 5, 30 + 512 / 5),          # whole: wait for it all
    ({"max_tokens": 512, "stream": True}, True, 30 + 512 / 5, 30),      # a stream starts at once
    ({"max_completion_tokens": 100, "max_tokens": 9}, False, 30 + 20, 50),
    ({"max_output_tokens": 100}, False, 30 + 20, 50),                   # the Responses route's
    ({"messages": []}, False, 120, 30),                                 # no budget: 4 x timeout
    (None, False, 120, 30),                                             # a GET
    ({"max_tokens": True}, False, 120, 30),                             # not a number
])
def test_an_answers_limit_is_its_budget_at_the_floor_rate(body, stream, limit, first_byte):
    pace = Pace.of(body, 30.0, 5.0)
    assert (pace.stream, pace.limit, pace.first_byte) == (stream, limit, first_byte)


@pytest.mark.parametrize("timeout, wanted, wait", [
    (30.0, 300.0, 300.0),                  # a client's own wait, longer than the timeout
    (30.0, 5.0, 30.0),                     # never less than the endpoint's timeout
    (30.0, 5000.0, FIRST_ANSWER_MAX_S),    # never past the battery's bound
    (900.0, 300.0, FIRST_ANSWER_MAX_S),    # the bound holds over a long timeout too
])
def test_a_first_answer_is_waited_for_within_the_timeout_and_the_bound(timeout, wanted, wait):
    """The slots claim's long prompt and a client's first turn derive their wait here, once."""
    assert first_answer_wait(timeout, wanted) == wait


def _reasoning_fleet(url, timeout=0.5):
    return one_endpoint(url, "vllm", alias="model", timeout=timeout, expect={"reasoning": True})


def slow_steady(body):
    """A healthy server slower in total than 4 x timeout (1 s), never stalling: a whole answer
    comes after 3 s of generating, a stream paces its 150 tokens 30 ms apart. Both say the
    same, as a healthy server's greedy answers do."""
    if body.get("stream"):
        pieces = ["Hel", "lo!"] * 75
        chunks = chat_chunks(["Thinking"], field="reasoning_content")[:2]
        chunks += chat_chunks(pieces)[1:]
        chunks[-2]["choices"][0]["finish_reason"] = "stop"
        return sse(chunks, gap=0.03)
    time.sleep(3)
    answer = healthy_chat("reasoning_content")(body)
    answer["choices"][0]["message"]["content"] = "Hello!" * 75
    return answer


def test_a_slow_steady_server_passes_plain_and_streamed(run_fleet):
    # A 1 s timeout, not the faults' 0.5 s: a healthy stream's first byte must not miss its
    # window on a busy machine (it did at 0.5 s beside the suite and two busy processes).
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, slow_steady)
        result = run_fleet(_reasoning_fleet(em.url, timeout=1), "-m", "reasoning")
    result.assert_outcomes(passed=3)  # reasoning, reasoning_streamed, reasoning_off


def keep_alive_only(body):
    """A stream of SSE comments that never carries a token (a stuck proxy keeping it open)."""
    return Reply(200, paced([": keep-alive\n\n"] * 100, 0.05), {"content-type": "text/event-stream"})


def whole_answer_dripped(body):
    """A non-streamed answer sent one byte every 50 ms once it begins."""
    text = json.dumps(healthy_chat("reasoning_content")(body))
    return Reply(200, paced(text, 0.05), {"content-type": "application/json"})


@pytest.mark.parametrize("answer, test, said", [
    (keep_alive_only, "test_reasoning_streamed", "the stream carried no token for 0.5s"),
    (whole_answer_dripped, "test_reasoning", "the answer began but was still arriving 0.5s "
     "later"),
])
def test_a_drip_is_cut_by_its_pace_not_by_its_budget(run_fleet, answer, test, said):
    """Cut by its pace (the words say which rule), not at the 0.5 + 512 / 5 s its budget alone
    would allow (those would say "did not finish within 102.9s"), and asked once."""
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, answer)
        result = run_fleet(_reasoning_fleet(em.url), "-k", f"{test}[")
        asked = sum(r.path == "/v1/chat/completions" for r in em.requests)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert said in out, out[-3000:]
    assert "did not finish within" not in out, out[-3000:]
    assert asked == 1, asked


# -- one request's wall time: an answer with no token budget comes whole within `timeout` once
# it began, and a request whose answer drips is cut by the clock, not at its next byte --------
GAP = 0.1  # seconds between the drips' bytes


def test_an_answer_with_no_budget_ends_within_timeout_once_begun():
    """A model list dripped a byte every 0.1 s for a minute: cut `timeout` (1 s) after it
    began, not at the 4 x timeout such an answer may take in all. The server's own count of
    what it sent shows when: some 10 bytes, never the 40 of 4 s."""
    with Emulator("vllm") as em:
        em.route("GET", "/v1/models", lambda r: Reply(200, paced(" " * 600, GAP)))
        with http.client(1.0) as client:
            ex = http.send(client, "GET", f"{em.url}/v1/models")
    assert ex.late and ex.fault is None, ex
    found = re.fullmatch(r"the answer began but was still arriving 1s later \((\d+) bytes "
                         r"came\): the server drips it", ex.error or "")
    assert found, ex.error
    assert int(found[1]) < 4 * 1.0 / GAP / 2, ex.error  # well short of what 4 s would bring


def _drip_headers(lines: int, sent: list[int]) -> tuple[socket.socket, threading.Thread]:
    """A loopback server whose one answer is a status line and then a header every GAP
    seconds, `lines` of them at most: each read gets a byte well within any timeout, and no
    answer ever begins. Counts into `sent` the headers it could send before the socket shut."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for _ in range(lines):
                    time.sleep(GAP)
                    conn.sendall(b"x-drip: 1\r\n")
                    sent[0] += 1
            except OSError:  # the client shut it
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def test_headers_that_drip_are_cut_by_the_clock():
    """No read ever times out on headers that come a line every 0.1 s; the request is cut
    when its answer should have begun (timeout 1 s, after the connection's 1 s), and the
    server could send some 20 of its 600 lines (a minute of them) before its socket shut."""
    sent = [0]
    server, thread = _drip_headers(600, sent)
    with server, http.client(1.0) as client:
        ex = http.send(client, "GET", f"http://127.0.0.1:{server.getsockname()[1]}/metrics")
        thread.join(10)
    assert not thread.is_alive(), "the server was never cut off"
    assert ex.late and ex.fault is None and ex.status is None, ex
    assert ex.error == ("no whole answer head within 2s of the request: the server drips its "
                        "headers or hangs"), ex.error
    assert sent[0] < 600 / 2, sent  # cut long before the drip's end


def test_a_slow_stream_past_its_cap_ends_within_timeout():
    """Tokens forever, 50 a second, asked for 40: past its 40 + 64 events the stream is given
    `timeout` (0.5 s) to end, which comes before its 64 events more would (1.3 s)."""
    event = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    with Emulator("vllm") as em:
        em.route("POST", "/v1/chat/completions", lambda r: Reply(
            200, paced(iter(lambda: event, None), 0.02), {"content-type": "text/event-stream"}))
        with http.client(0.5) as client:
            ex = http.send(client, "POST", f"{em.url}/v1/chat/completions",
                           json_body={"max_tokens": 40, "stream": True})
    assert ex.late, ex
    assert (ex.error or "").startswith("the stream ran past 104 events for 40 max_tokens without "
                                       "ending 0.5s after that ("), ex.error
