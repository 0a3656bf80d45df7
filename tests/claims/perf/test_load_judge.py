"""The load claim's judgement over ladders built by hand: rates with their bound, the ladder's
levels, each reply against its solo twin (cross-talk by prompt count and by answer, reasoning
alone, a broken call), and the fix for errors by what the endpoint reports of its slots and by
engine. No server: real llama.cpp and the faults in front of it are
tests/claims/perf/test_load_real.py's."""

from __future__ import annotations

import threading
import time

import pytest

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, load
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.target import Target
from pytest_frank.outcome.verdict import Failure, render

pytestmark = pytest.mark.unit


def ctx(engine="llamacpp", expect=None, notes=None, temperature=0.0):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1", expect={"load": expect or True},
                       sampling={"temperature": temperature}))
    return Context(ep, driver_for(engine), ep.options("load"), None,
                   (notes if notes is not None else []).append)


def answer(content="Hello!", prompt=10, finish="stop", **extra) -> Reply:
    return Reply(status=200, content=content, reasoning="Thinking", finish=finish, tokens=6,
                 prompt_tokens=prompt, **extra)


def ladder(*levels: list[tuple[int, str, Reply]], slots=None, marks=None) -> load.Ladder:
    """Levels 1, 2, 4 ... each with the replies given, a second each; each request asks its
    answer to name its marker, or the word `marks` gives it (an image's colour)."""
    marks = marks or {}
    kinds = {i: kind for level in levels for i, kind, _ in level}
    top = 2 ** (len(levels) - 1)
    pool = range(max(top, len(kinds)))
    return load.Ladder(top=top, top_from="expect.load.concurrency", slots=slots,
                       kinds=[kinds.get(i, "plain") for i in pool],
                       marks=[marks.get(i, load.MARKERS[i]) for i in pool],
                       levels=[load.Level(2 ** n, [load.Sent(*s) for s in level], 1.0)
                               for n, level in enumerate(levels)])


def solo_pair() -> list[tuple[int, str, Reply]]:
    return [(0, "plain", answer(prompt=10)), (1, "plain", answer("Bonjour!", prompt=14))]


@pytest.mark.parametrize("k, n, said", [
    (0, 200, "0 of 200: under 1.5% at 95%"),
    (0, 60, "0 of 60: under 4.9% at 95%"),
    (1, 34, "1 of 34 (2.9%, under 13% at 95%)"),
    (8, 16, "8 of 16 (50%, under 72% at 95%)"),
    (3, 3, "3 of 3 (100%, under 100% at 95%)"),
])
def test_a_rate_is_said_with_its_upper_bound(k, n, said):
    assert load.rate(k, n) == said


@pytest.mark.parametrize("top, levels", [(1, [1]), (2, [1, 2]), (4, [1, 2, 4]),
                                         (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8])])
def test_the_ladder_doubles_up_to_its_top(top, levels):
    assert load.widths(top) == levels


@pytest.mark.parametrize("requests, levels, pool, plan", [
    (24, [1, 2, 4], 4, {1: 6, 2: 3, 4: 3}),  # 24 sent: level 1 takes what does not divide
    (120, [1, 2, 4], 4, {1: 18, 2: 17, 4: 17}),
    (120, [1, 2, 4, 8], 8, {1: 8, 2: 8, 4: 8, 8: 8}),
    (28, [1], 2, {1: 28}),
    (5, [1, 2, 4], 4, {1: 4, 2: 1, 4: 1}),  # the floor: each alone once, a burst a level
])
def test_the_ladder_sends_the_requests_asked_exactly_above_its_floor(requests, levels, pool, plan):
    got = load.bursts(requests, levels, pool)
    assert got == plan
    sent = sum(width * n for width, n in got.items())
    assert sent == requests or (sent > requests and got[1] == pool and
                                all(got[w] == 1 for w in levels[1:]))


def test_the_count_sent_is_said_and_why_it_is_more_than_asked():
    assert load.asked_line(24, 24, 4, [1, 2, 4]) == "requests: 24 sent of expect.load.requests 24"
    assert load.asked_line(5, 10, 4, [1, 2, 4]) == (
        "requests: 10 sent of expect.load.requests 5: the ladder's floor is more (each of the "
        "pool's 4 requests alone once, and one burst at each of 2, 4 in flight)")


def test_a_ladder_of_one_level_is_inconclusive_not_ok():
    """A 1-slot server: every reply alone was whole, yet nothing was in flight together."""
    notes: list[str] = []
    with pytest.raises(pytest.skip.Exception) as raised:
        load.judge(ladder(solo_pair()), ctx(notes=notes))
    said = str(raised.value)
    assert said.startswith("inconclusive: the ladder cannot climb: its top is 1 in flight "
                           "(expect.load.concurrency)"), said
    assert "at 1 in flight: 2 replies in 1 s, 0 with a fault" in "\n".join(notes)


def test_a_ladder_of_one_level_still_fails_a_fault_alone():
    bad = [(0, "plain", Reply(status=503, problem="no slot available")), *solo_pair()[1:]]
    with pytest.raises(Failure):
        load.judge(ladder(bad), ctx())


def test_a_healthy_ladder_passes_and_notes_each_level_with_its_rates():
    notes: list[str] = []
    healthy = [(0, "plain", answer(prompt=10)), (1, "plain", answer("Bonjour!", prompt=14))]
    load.judge(ladder(solo_pair(), healthy), ctx(notes=notes))
    said = "\n".join(notes)
    assert "ladder: 1, 2 in flight (top 2: expect.load.concurrency)" in said
    assert "at 2 in flight: 2 replies in 1 s, 0 with a fault" in said
    assert "errors 0 of 4: under 53% at 95%; reasoning only 0 of 4: under 53% at 95%" in said


def test_a_reply_counting_another_requests_prompt_is_cross_talk_named_by_whose():
    swapped = [(0, "plain", answer("Bonjour!", prompt=14)), (1, "plain", answer(prompt=10))]
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo_pair(), swapped), ctx())
    assert render(failed.value.line).startswith(
        "at 2 in flight, replies went to the wrong request: request #0 (plain) came back "
        "counting 14 prompt tokens where alone it counted 10, the count of request #1 (plain): "
        "it got that request's answer; request #1 (plain) came back counting 10 prompt tokens")
    assert "cross-talk in 2 of 2 (100%, under 100% at 95%) replies; 1 in flight passed" in \
        render(failed.value.line)


def test_at_temperature_0_another_questions_answer_is_cross_talk_without_counts():
    solo = [(0, "plain", answer(prompt=None)), (1, "streamed", answer("Bonjour!", prompt=None))]
    swapped = [(0, "plain", answer("Bonjour!", prompt=None)),
               (1, "streamed", answer(prompt=None))]
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo, swapped), ctx())
    assert "request #0 (plain) got the answer of request #1 (streamed), 'Bonjour!', where " \
           "alone it answered 'Hello!'" in render(failed.value.line)
    # sampled, two answers may differ by chance: no verdict on the words
    load.judge(ladder(solo, swapped), ctx(temperature=0.8))
    # two requests of one question may be answered alike, and a batched greedy answer may move
    load.judge(ladder(solo_pair(), [(0, "plain", answer("Bonjour!", prompt=None)),
                                    (1, "plain", answer(prompt=None))]), ctx())


def test_at_temperature_0_one_questions_answer_naming_anothers_marker_is_cross_talk():
    """The pool's requests of one question each ask for their own marker: a reply that is
    another's solo answer, naming that one's marker and not its own, is that one's answer."""
    solo = [(0, "plain", answer("apricot!", prompt=None)),
            (1, "plain", answer("banana!", prompt=None))]
    swapped = [(0, "plain", answer("banana!", prompt=None)),
               (1, "plain", answer("apricot!", prompt=None))]
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo, swapped), ctx())
    assert render(failed.value.line).startswith(
        "at 2 in flight, replies went to the wrong request: request #0 (plain) got the answer of "
        "request #1 (plain), 'banana!', where alone it answered 'apricot!'; request #1 (plain) "
        "got the answer of request #0 (plain), 'apricot!', where alone it answered 'banana!'")
    # an answer that names both markers is not another's by its words
    load.judge(ladder([(0, "plain", answer("apricot banana!", prompt=None)),
                       (1, "plain", answer("banana apricot!", prompt=None))],
                      [(0, "plain", answer("banana apricot!", prompt=None)),
                       (1, "plain", answer("apricot banana!", prompt=None))]), ctx())


@pytest.mark.parametrize("first, said", [
    ("blue", "replies went to the wrong request: request #0 (vision) got the answer of request "
             "#1 (vision), 'blue', where alone it answered 'red'"),
    # one image under load named as another colour: another image's answer
    ("Green", "replies went to the wrong request: request #0 (vision): shown a solid red "
              "image, it answered 'Green', another image's colour, where alone it answered "
              "'red'"),
    # a reply that lost its image answers as the text request does: not its answer, not whole
    ("Hello!", "replies were not whole: request #0 (vision): shown a solid red image, it "
               "answered 'Hello!' (names no colour)"),
    ("Red or green", "replies were not whole: request #0 (vision): shown a solid red image, it "
                     "answered 'Red or green' (names red, green)"),
], ids=["another_images_answer", "another_colour", "no_colour", "two_colours"])
def test_an_image_is_judged_by_the_colour_named(first, said):
    solo = [(0, "vision", answer("red", prompt=20)), (1, "vision", answer("blue", prompt=24)),
            (2, "plain", answer("Hello!", prompt=30))]
    loaded = [(0, "vision", answer(first, prompt=20)), (1, "vision", answer("blue", prompt=24))]
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo, loaded, marks={0: "red", 1: "blue"}), ctx())
    assert render(failed.value.line).startswith(f"at 2 in flight, {said}")


def test_reasoning_alone_fails_over_its_floor_and_is_noted_within_it():
    alone = Reply(status=200, reasoning="Thinking", finish="stop", tokens=3, prompt_tokens=14)
    replies = [(0, "plain", answer(prompt=10)), (1, "plain", alone)]
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo_pair(), replies), ctx())
    assert "replies carried reasoning only: request #1 (plain): reasoning only, no content" \
           in render(failed.value.line)
    assert "1 of 2 (50%, under 97% at 95%) replies, over max_reasoning_only_rate 0" in \
        render(failed.value.line)
    notes: list[str] = []
    load.judge(ladder(solo_pair(), replies), ctx(expect={"max_reasoning_only_rate": 0.5},
                                                 notes=notes))
    assert any(n.startswith("reasoning only: request #1 (plain)") for n in notes)


def test_a_forced_call_broken_under_load_is_not_whole():
    good = answer(prompt=90, calls=[Call("get_weather", '{"city": "Paris", "days": 1}', "c1")],
                  finish="tool_calls")
    broken = answer(prompt=90, calls=[Call("get_weather", '{"city": "Paris"}', "c2")],
                    finish="tool_calls")
    solo = [(0, "tools", good), (1, "plain", answer(prompt=14))]
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo, [(0, "tools", broken), (1, "plain", answer(prompt=14))]), ctx())
    assert "replies were not whole: request #0 (tools): missing required: get_weather lacks " \
           "'days'" in render(failed.value.line)


@pytest.mark.parametrize("engine, slots, fix", [
    ("llamacpp", None, "llama.cpp serves as many requests at once as it has slots: give it "
                       "more (--parallel 2, with the context split between them), or set "
                       "expect.load.concurrency to 1"),
    ("vllm", None, "vLLM queues past --max-num-seqs and refuses once its KV cache is full"),
    ("llamacpp", 4, "the endpoint reports 4 slots, yet requests failed at 2 in flight: "
                    "something in front of it admits fewer"),
])
def test_errors_fail_where_they_began_with_the_fix_for_what_runs_out(engine, slots, fix):
    refused = Reply(status=503, problem="no slot available")
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo_pair(), [(0, "plain", answer(prompt=10)), (1, "plain", refused)],
                          slots=slots), ctx(engine))
    assert "at 2 in flight, requests failed: request #1 (plain): answered 503: no slot " \
           "available; errors in 1 of 2 (50%, under 97% at 95%) replies, over max_error_rate 0; " \
           "1 in flight passed: errors began at 2 in flight" in render(failed.value.line)
    assert fix in render(failed.value.fix)


def test_errors_within_their_floor_below_name_the_level_where_they_began():
    refused = Reply(status=503, problem="no slot available")
    replies = [(0, "plain", answer(prompt=10)), (1, "plain", answer("Bonjour!", prompt=14))]
    below = [*replies, *replies, (0, "plain", refused), (1, "plain", answer("Bonjour!", prompt=14))]
    above = [(0, "plain", refused), (1, "plain", refused), *replies]
    with pytest.raises(Failure) as failed:
        load.judge(ladder([*replies, *replies], below, above),
                   ctx(expect={"max_error_rate": 0.25}))
    assert "at 4 in flight, requests failed: request #0 (plain): answered 503: no slot " \
           "available; request #1 (plain): answered 503: no slot available; errors in 2 of 4 " \
           "(50%, under 90% at 95%) replies, over max_error_rate 0.25; 1 and 2 in flight " \
           "passed: errors began at 2 in flight" in render(failed.value.line)


def test_a_ladder_cut_by_its_deadline_is_inconclusive():
    seen = ladder(solo_pair())
    seen.stopped = "expect.load.deadline_s (300 s) ran out at 2 in flight"
    seen.top = 2
    with pytest.raises(pytest.skip.Exception, match="reached 1 of 2 in flight, every level "
                                                    "whole: expect.load.deadline_s"):
        load.judge(seen, ctx())


def test_a_burst_is_in_flight_at_once_inside_the_hold_and_nothing_else_beside_it():
    """The ladder's bursts: with `concurrency` 1, the holder's workers are in flight together,
    while a request of another probe waits for the hold to end."""
    target = Target(bind(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1")))
    limiter, order = target.pacing.limiter, []

    def request(name: str) -> str:
        limiter.enter()
        order.append(name)
        time.sleep(0.05)
        limiter.leave()
        return name

    outside = threading.Thread(target=request, args=("other probe",))
    with target.exclusive():
        outside.start()
        assert target.at_once([lambda i=i: request(f"burst {i}") for i in range(3)]) == \
            ["burst 0", "burst 1", "burst 2"]
        assert limiter.peak == 3
    outside.join()
    assert order[-1] == "other probe"


def test_an_error_with_one_request_at_a_time_gets_the_errors_own_fix_not_more_slots():
    refused = Reply(status=401, problem="Invalid API Key")
    with pytest.raises(Failure) as failed:
        load.judge(ladder([(0, "plain", answer(prompt=10)), (1, "plain", refused)]), ctx())
    assert "at 1 in flight, requests failed: request #1 (plain): answered 401: Invalid API Key;" \
           in render(failed.value.line)
    assert "it fails with one request at a time too" in render(failed.value.line)
    assert "api_key" in render(failed.value.fix) and "slots" not in render(failed.value.fix)


def test_replies_cut_at_the_budget_pass_and_are_noted_with_the_key_that_gives_room():
    cut = Reply(status=200, reasoning="Let me think", finish="length", tokens=256,
                prompt_tokens=14, max_tokens=256)
    notes: list[str] = []
    load.judge(ladder(solo_pair(), [(0, "plain", answer(prompt=10)), (1, "plain", cut)]),
               ctx(notes=notes))
    assert "1 of 4 replies were cut at max_tokens=256 (1 of them while thinking) and judged " \
           "only as far as they went: raise expect.load.max_tokens" in "\n".join(notes)


def test_a_first_token_slow_under_load_fails_over_max_ttft_p90_s():
    def streamed(first: float, prompt: int) -> Reply:
        return answer(prompt=prompt, streamed=True, first_token_s=first, last_token_s=first + 0.1)

    solo = [(0, "streamed", streamed(0.1, 10)), (1, "streamed", streamed(0.1, 14))]
    loaded = [(0, "streamed", streamed(0.3, 10)), (1, "streamed", streamed(2.5, 14))]
    notes: list[str] = []
    with pytest.raises(Failure) as failed:
        load.judge(ladder(solo, loaded), ctx(expect={"max_ttft_p90_s": 1}, notes=notes))
    assert render(failed.value.line) == ("at 2 in flight, the first token's P90 is 2.5 s, over "
                                         "max_ttft_p90_s 1; 1 in flight passed")
    assert "set expect.load.concurrency to 1" in render(failed.value.fix)
    assert any("first token P50 0.1 s, P90 0.1 s, decode 50 tok/s per request" in n
               for n in notes), notes


def test_a_reply_not_whole_alone_points_at_the_batterys_own_checks():
    with pytest.raises(Failure) as failed:
        load.judge(ladder([(0, "plain", answer("<|im_end|>Hello", prompt=10)),
                           (1, "plain", answer(prompt=14))]), ctx())
    assert "at 1 in flight, replies were not whole: request #0 (plain): template markup " \
           "'<|im_end|>' in the answer" in render(failed.value.line)
    assert "the battery's own checks of these requests" in render(failed.value.fix)
