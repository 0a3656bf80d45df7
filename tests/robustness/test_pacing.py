"""How long an answer is waited for scales with the work it asks (its token budget at
min_tokens_per_s), while a drip or a keep-alive-only stream is still cut. Emulated vLLM: a slow but
steady server and the drips are faults no engine here shows on demand."""

import json
import time

import pytest

from emulator import Emulator, Reply, chat_chunks, paced, serve_chat, sse
from fleets import one_endpoint
from healthy_engines import healthy_chat

from pytest_frank.transport.http import FIRST_ANSWER_MAX_S, Pace, first_answer_wait

pytestmark = pytest.mark.emulated


@pytest.mark.parametrize("body, stream, limit, first_byte", [
    ({"max_tokens": 512}, False, 30 + 512 / 5, 30 + 512 / 5),          # whole: wait for it all
    ({"max_tokens": 512, "stream": True}, True, 30 + 512 / 5, 30),      # a stream starts at once
    ({"max_completion_tokens": 100, "max_tokens": 9}, False, 30 + 20, 50),
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
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, answer)
        start = time.monotonic()
        result = run_fleet(_reasoning_fleet(em.url), "-k", f"{test}[")
        took = time.monotonic() - start
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert said in out, out[-3000:]
    assert took < 8, took  # far less than the 0.5 + 512 / 5 s a budget alone would allow
