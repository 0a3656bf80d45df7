"""The load claim against real llama.cpp (xllamacpp, `--parallel 4`): healthy, every reply at 1, 2
and 4 in flight is whole and its own (plain, streamed, tool-forced, thinking, and an image where
vision is asked), and ten ladders at once never fail. The model is `selftest:echo`, whose answer
is the marker word its question carries, so each request of the pool has its own answer (and
`selftest:vision` with the self-test projector for the image). Each reply counts its own prompt
too (the pool's requests differ in length), so an answer served to another request shows in its
usage, and, where the usage stays the request's own, in its words. The faults no engine here
shows on demand come from a proxy in front of that same server (tests/support/proxy.py): answers of
requests in flight together swapped, whole or their words alone, and another image served for a
request's own (vLLM PR 36708, LMCache 4086), every 50th reply left with its reasoning alone (2%,
vLLM PR 41467), a gateway that answers 503 past two in flight, and decode that slows with each
request in flight beside it."""

from __future__ import annotations

import copy
import json
import threading
import time

import pytest
from fleets import one_endpoint
from proxy import Proxy, _events, reasoning_alone

from pytest_frank.claims import vision

pytestmark = pytest.mark.real

# 4 slots of 4096: room for the tool-forced prompt; each request answered its own way
SERVER = {"model": "selftest:echo", "parallel": 4, "ctx_size": 16384}
SIGHTED = {"model": "selftest:vision", "mmproj": "selftest", "parallel": 4, "ctx_size": 16384}
PATIENT = 120
SMALL = {"requests": 28}  # 4 bursts a level: 4 + 8 + 16 requests


def rows(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def run(run_fleet, url: str, expect: dict):
    return run_fleet(one_endpoint(url, timeout=PATIENT, expect=expect), "-m", "load",
                     "-p", "no:randomly", "--frank-json=run.json")


def ten_ladders(run_fleet, url: str, expect: dict):
    """Ten endpoints on one server, each asking a small ladder beside `expect`, run together."""
    fleet = {"endpoints": {f"ep{i}": {"url": url, "engine": "llamacpp", "timeout": PATIENT,
                                      "expect": {"load": SMALL, **expect}}
                           for i in range(10)}}
    return run_fleet(fleet, "-m", "load", "-p", "no:randomly", "--frank-json=run.json")


def test_llamacpp_with_four_slots_passes_at_1_2_and_4_in_flight(llama, run_fleet, pytester):
    server = llama(**SERVER)
    result = run(run_fleet, server.url, {"load": True, "tools": True, "reasoning": True})
    result.assert_outcomes(passed=1)
    row = rows(pytester)["test_load[ep]"]
    said = "\n".join(row["notes"])
    assert "ladder: 1, 2, 4 in flight (top 4: the endpoint's 4 slots (/props total_slots" in said
    assert "requests plain, streamed, thinking, tools" in said
    assert "solo answers: 4 distinct of 4 (at temperature 0 an answer another request got is " \
           "judged by its words too)" in said
    for width, replies in ((1, 18), (2, 34), (4, 68)):  # the default 120, level 1 the rest
        assert f"at {width} in flight: {replies} replies in " in said, said
        assert f"ttft_p90_s_at_{width}" in row["figures"]
        assert f"aggregate_tps_at_{width}" in row["figures"]
    assert "errors 0 of 120: under 2.5% at 95%; reasoning only 0 of 120: under 2.5% at 95%" in said
    assert "requests: 120 sent of expect.load.requests 120" in said  # 119 before: 17 at level 1


def test_a_one_slot_server_cannot_climb_the_ladder_and_says_so(llama, run_fleet, pytester):
    """One slot: the ladder's top is 1, so no two requests were ever in flight together. Not
    "load ok": inconclusive, saying why and what to set; every reply alone was still judged."""
    server = llama(model="selftest:echo", parallel=1, ctx_size=4096)
    result = run(run_fleet, server.url, {"load": SMALL})
    result.assert_outcomes(skipped=1)
    row = rows(pytester)["test_load[ep]"]
    assert row["verdict"] == "inconclusive", row
    assert row["line"].startswith("inconclusive: the ladder cannot climb: its top is 1 in flight "
                                  "(the endpoint's 1 slots (/props total_slots"), row["line"]
    assert "Set expect.load.concurrency to 2 or more" in row["line"]
    said = "\n".join(row["notes"])
    assert "at 1 in flight: 28 replies in " in said and "0 with a fault" in said, said
    assert "requests: 28 sent of expect.load.requests 28" in said


def test_ten_healthy_ladders_at_once_never_fail(llama, run_fleet, pytester):
    """Ten endpoints on the one 4-slot server, their ladders together: llama.cpp queues what it
    cannot run at once, and every reply is still whole and its own."""
    server = llama(**SERVER)
    result = ten_ladders(run_fleet, server.url, {"tools": True, "reasoning": True})
    result.assert_outcomes(passed=10)
    for row in rows(pytester).values():
        said = "\n".join(row["notes"])
        assert "solo answers: 4 distinct of 4" in said
        assert "errors 0 of 28: under 10% at 95%; reasoning only 0 of 28: under 10% at 95%; " \
               "cross-talk 0 of 28: under 10% at 95%" in said


class Swap:
    """For `rewrite_answer`: answers of two requests in flight together given to each other, as
    an engine that keys a batch's answers wrongly serves them; a request alone (no other answer
    within `wait_s`) gets its own. With `words`, only the answers' messages are swapped and each
    keeps its own usage, as a prefix cache that serves another request's generation does."""

    def __init__(self, wait_s: float = 0.2, words: bool = False) -> None:
        self.wait_s, self.words = wait_s, words
        self.cond = threading.Condition()
        self.waiting: dict | None = None
        self.swapped = 0

    def __call__(self, request: dict, answer: dict) -> dict:
        with self.cond:
            if self.waiting is None:
                mine = self.waiting = {"answer": answer, "got": None}
                self.cond.wait_for(lambda: mine["got"] is not None, timeout=self.wait_s)
                if mine["got"] is None:
                    self.waiting = None
                    return answer
                return self.given(answer, mine["got"])
            partner, self.waiting = self.waiting, None
            partner["got"] = answer
            self.swapped += 1
            self.cond.notify_all()
            return self.given(answer, partner["answer"])

    def given(self, own: dict, other: dict) -> dict:
        return {**other, "usage": own.get("usage")} if self.words else other


def test_answers_swapped_between_requests_in_flight_fail_as_cross_talk(llama, run_fleet,
                                                                       pytester):
    server = llama(**SERVER)
    swap = Swap()
    with Proxy(server.url, rewrite_answer=swap) as proxy:
        # plain, streamed, tools, plain: the second burst of two holds two whole answers
        result = run(run_fleet, proxy.url, {"load": SMALL, "tools": True})
    result.assert_outcomes(failed=1)
    assert swap.swapped
    result.stdout.fnmatch_lines([
        "*at 2 in flight, replies went to the wrong request: request #? (*) came back counting "
        "* prompt tokens where alone it counted *, the count of request #? (*): it got that "
        "request's answer*; cross-talk in * of 8 (*%, under *% at 95%) replies; 1 in flight "
        "passed*",
        "*fix: llama.cpp mixed up requests in flight together: update it, and to confirm serve "
        "with --parallel 1 or without prompt-cache reuse (--cache-reuse 0)*"])


def test_words_swapped_with_each_requests_own_count_fail_as_cross_talk_by_the_answer(
        llama, run_fleet, pytester):
    """Each reply keeps its own usage, so only its words show whose answer it is: the echo
    model answers each request of the pool with its own marker."""
    server = llama(**SERVER)
    swap = Swap(words=True)
    with Proxy(server.url, rewrite_answer=swap) as proxy:
        # plain, streamed, plain, streamed: only the burst of four holds two whole answers
        result = run(run_fleet, proxy.url, {"load": SMALL})
    result.assert_outcomes(failed=1)
    assert swap.swapped
    result.stdout.fnmatch_lines([
        "*at 4 in flight, replies went to the wrong request: request #? (plain) got the answer "
        "of request #? (plain), '*!', where alone it answered '*!'*; cross-talk in * of 16 (*%, "
        "under *% at 95%) replies; 1 and 2 in flight passed*",
        "*fix: llama.cpp mixed up requests in flight together*"])
    assert "prompt tokens where alone" not in result.stdout.str()


def test_ten_ladders_with_an_image_request_in_their_bursts_pass_by_the_colour_named(
        llama, run_fleet, pytester):
    """Ten endpoints on one 4-slot `selftest:vision` server, each ladder with its own image
    (a colour drawn for each) in flight beside the others' requests."""
    server = llama(**SIGHTED)
    result = ten_ladders(run_fleet, server.url, {"vision": True})
    result.assert_outcomes(passed=10)
    for row in rows(pytester).values():
        said = "\n".join(row["notes"])
        assert "requests plain, streamed, vision" in said
        # the image's colour and the text requests' one answer ("Hello!")
        assert "solo answers: 2 distinct of 4" in said
        assert "cross-talk 0 of 28: under 10% at 95%" in said


class OtherImage:
    """For `rewrite`: after the first image, each request's image replaced by another colour's,
    as a cache keyed without the image serves the one it holds (LMCache 4086)."""

    def __init__(self) -> None:
        self.colours = {vision.png(c): c for c in vision.COLOURS}
        self.seen = 0

    def __call__(self, body: dict) -> dict:
        body = copy.deepcopy(body)
        parts = [part for message in body.get("messages", [])
                 if isinstance(message.get("content"), list) for part in message["content"]
                 if part.get("image_url")]
        for part in parts:
            self.seen += 1
            if self.seen > 1:
                colour = self.colours[part["image_url"]["url"].split(",", 1)[-1]]
                other = next(c for c in sorted(vision.COLOURS) if c != colour)
                part["image_url"]["url"] = f"data:image/png;base64,{vision.png(other)}"
        return body


def test_another_images_colour_under_load_fails_as_cross_talk(llama, run_fleet, pytester):
    server = llama(**SIGHTED)
    other = OtherImage()
    with Proxy(server.url, rewrite=other) as proxy:
        result = run(run_fleet, proxy.url, {"load": SMALL, "vision": True})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*at 2 in flight, replies went to the wrong request: request #2 (vision): shown a solid "
        "* image, it answered '*', another image's colour, where alone it answered '*'*; "
        "1 in flight passed*"])


class EveryNth:
    """Every `n`th reply of the endpoint, whole or streamed, left with its reasoning alone (a
    reasoning parser that holds the whole reply as thinking, now and then under load)."""

    def __init__(self, n: int = 50) -> None:
        self.n, self.count, self.lock = n, 0, threading.Lock()

    def due(self) -> bool:
        with self.lock:
            self.count += 1
            return self.count % self.n == 0

    def answer(self, request: dict, answer: dict) -> dict:
        return reasoning_alone(request, answer) if self.due() else answer

    def stream(self, request: dict, events: list[bytes]) -> list[bytes]:
        if not self.due():
            return events
        out = []
        for event in events:
            chunk = _json_event(event)
            for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
                delta = choice.get("delta") or {}
                delta.pop("content", None)
                delta.pop("tool_calls", None)
                if choice.get("finish_reason"):
                    choice["finish_reason"] = "stop"
            out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n"
                       if isinstance(chunk, dict) else event)
        return out


def _json_event(event: bytes):
    try:
        return json.loads(event.removeprefix(b"data: ").strip())
    except ValueError:
        return None


def test_reasoning_alone_at_a_2_percent_rate_is_caught_at_the_default_sample(llama, run_fleet,
                                                                            pytester):
    server = llama(**SERVER)
    nth = EveryNth(50)
    with Proxy(server.url, rewrite_answer=nth.answer, rewrite_stream=nth.stream) as proxy:
        result = run(run_fleet, proxy.url, {"load": True, "tools": True, "reasoning": True})
    result.assert_outcomes(failed=1)
    # the 50th of those alone (17 or 18, by the pool) and 34 at 2 in flight
    result.stdout.fnmatch_lines([
        "*at 2 in flight, replies carried reasoning only: request #? (*): reasoning only, no "
        "content and no tool call (finish_reason 'stop', reasoning 'Thinking'); 1 of 34 (2.9%, "
        "under 13% at 95%) replies, over max_reasoning_only_rate 0; 1 in flight passed; cause: "
        "intermittent (the counts cannot tie it to load: 0 of * at 1 in flight (0-*%); 1 of "
        "34 at 2 in flight (1-15%); Fisher's exact test p=1, the rates' 95% intervals overlap)",
        "*fix: an intermittent fault, not tied to load*"])
    assert "--jinja" not in result.stdout.str()


class Capacity:
    """A gateway with room for `room` requests at once: past it, 503 (its `refuse`); a request
    leaves `hold_s` after its answer is read whole (`rewrite_answer`, `rewrite_stream`), so the
    requests of one burst overlap however a busy machine staggers them."""

    def __init__(self, room: int = 2, hold_s: float = 0.1) -> None:
        self.room, self.hold_s, self.in_flight, self.refused = room, hold_s, 0, 0
        self.lock = threading.Lock()

    def refuse(self, request: dict) -> str | None:
        with self.lock:
            if self.in_flight >= self.room:
                self.refused += 1
                return "no slot available: the server is at capacity"
            self.in_flight += 1
            return None

    def done(self, request: dict, answer):
        time.sleep(self.hold_s)
        with self.lock:
            self.in_flight -= 1
        return answer


def test_503_past_two_in_flight_fails_where_the_errors_began(llama, run_fleet, pytester):
    server = llama(**SERVER)
    gate = Capacity(2)
    with Proxy(server.url, refuse=gate.refuse, refuse_status=503, rewrite_answer=gate.done,
               rewrite_stream=gate.done) as proxy:
        result = run(run_fleet, proxy.url, {"load": SMALL, "tools": True})
    result.assert_outcomes(failed=1)
    assert gate.refused
    result.stdout.fnmatch_lines([
        "*at 4 in flight, requests failed: request #? (*): answered 503: no slot available: the "
        "server is at capacity*; errors in * of 16 (*%, under *% at 95%) replies, over "
        "max_error_rate 0; 1 and 2 in flight passed: errors began at 4 in flight*",
        "*fix: the endpoint reports 4 slots, yet requests failed at 4 in flight: something in "
        "front of it admits fewer (a gateway, a proxy, a rate limit, a connection cap): raise "
        "its limit, or set expect.load.concurrency to 2 and route no more than 2 clients at "
        "once to it*"])


class Crowded(Proxy):
    """Each streamed event held `step_s` for every request in flight through the proxy, squared:
    decode speed falls as load grows (a server whose batch shares one slow card)."""

    def __init__(self, upstream: str, step_s: float) -> None:
        super().__init__(upstream)
        self.step_s, self.in_flight, self.lock = step_s, 0, threading.Lock()

    def paced(self, upstream, request: bytes):
        if "event-stream" not in upstream.headers.get("content-type", ""):
            return upstream.iter_bytes()
        with self.lock:
            self.in_flight += 1

        def events():
            try:
                for event in _events(upstream):
                    time.sleep(self.step_s * self.in_flight ** 2)
                    yield event
            finally:
                with self.lock:
                    self.in_flight -= 1
        return events()


def test_decode_that_collapses_with_load_fails_under_min_decode_tps(llama, run_fleet, pytester):
    server = llama(**SERVER)
    # alone a streamed reply decodes at about 120 tok/s through it (its events 20 ms apart);
    # with its twin in flight at 4, a quarter of that (a busy machine only slows both)
    with Crowded(server.url, step_s=0.02) as proxy:
        result = run(run_fleet, proxy.url, {"load": {**SMALL, "min_decode_tps": 60}})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*at 4 in flight, decode runs at * tok/s per request (median), under min_decode_tps "
        "60; it decoded * at 1, * at 2*",
        "*fix: the load shares the hardware between the requests: set expect.load.concurrency "
        "to 2 and route no more than 2 clients at once to it*"])
