"""The next turn from the prefix cache and the context a slot serves, judged over replies as the
engines count them (llama.cpp timings, vLLM usage and its refusal's words): no server."""

import pytest

from pytest_frank.runtime.chat import Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, slots
from pytest_frank.claims.agent import prefix_reuse
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

pytestmark = pytest.mark.unit

Failed = pytest.fail.Exception
Skipped = pytest.skip.Exception


def timed(cached: int, evaluated: int) -> Reply:
    """A llama.cpp reply with its timings (cache_n reused, prompt_n evaluated)."""
    return Reply(status=200, content="Hello!", finish="stop", prompt_tokens=cached + evaluated,
                 engine={"timings": {"cache_n": cached, "prompt_n": evaluated}})


def ctx(claim: str, expect, notes: list[str], engine="llamacpp") -> Context:
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1", expect={claim: expect}))
    return Context(ep, driver_for(engine), ep.options(claim), None, notes.append)


def judged(conversations, engine="llamacpp") -> list[str]:
    notes: list[str] = []
    prefix_reuse.require_prefix_reused(conversations, driver_for(engine),
                                       ctx("agent", True, notes, engine), "agent step")
    return notes


def test_turn_2_from_the_cache_passes_with_its_counts():
    notes = judged([[timed(0, 1068), timed(1069, 153)]])
    assert notes == ["agent step: the next turn came from the prefix cache: turn 2 took 1069 of "
                     "its 1222 prompt tokens from the cache, of the 1068 turn 1 had sent "
                     "[source: timings.cache_n / prompt_n]"]


def test_every_turn_reprocessed_fails_naming_the_engines_settings():
    with pytest.raises(Failed) as failed:
        judged([[timed(0, 1068), timed(1, 1221)], [timed(0, 1068), timed(0, 1222)]])
    text = str(failed.value)
    assert text.startswith("agent step: turn 2 took 1 of its 1222 prompt tokens from the cache, "
                           "of the 1068 turn 1 had sent [source: timings.cache_n / prompt_n] "
                           "(the best of 2): the server re-processed"), text


def test_one_conversation_pushed_out_of_its_slot_is_the_load_not_the_server():
    assert judged([[timed(0, 1068), timed(0, 1222)], [timed(0, 1068), timed(1064, 158)]])


def test_no_count_is_a_note_not_a_verdict():
    plain = [Reply(status=200, content="x", finish="stop", prompt_tokens=300),
             Reply(status=200, content="y", finish="stop", prompt_tokens=420)]
    notes = judged([plain], engine="vllm")
    assert notes == ["agent step: the next turn's reuse of the prefix cache is not judged: vLLM "
                     "sends cached_tokens in usage only with --enable-prompt-tokens-details, and "
                     "/metrics has no prefix_cache counters"]
    # an error turn is the loop's own failure, judged before: nothing to compare here
    assert judged([[timed(0, 1068), Reply(status=500, problem="boom")]]) == []


@pytest.mark.parametrize("engine, fix", [
    ("llamacpp", "keep --ctx-checkpoints above 0 (32 by default), or --swa-full"),
    ("vllm", "pass --enable-prefix-caching (opt-in for hybrid models)"),
    ("sglang", "remove --disable-radix-cache"),
    ("openai", "keep the server's prefix cache on"),
])
def test_the_fix_names_the_cause_per_engine(engine, fix):
    assert fix in str(prefix_reuse.reuse_fix(driver_for(engine)))


# -- test_slots_context ----------------------------------------------------------------------------
def filled(reply: Reply, claimed=2048, by="the server's /tokenize", ctx_train=None):
    return slots.Filled(claimed=claimed, claimed_by="expect.slots.ctx_per_slot", tokens=1768,
                        counted_by=by, reply=reply, ctx_train=ctx_train)


def judge_filled(obs, engine="llamacpp", expect=None) -> list[str]:
    notes: list[str] = []
    slots.judge_filled(obs, ctx("slots", expect or {"ctx_per_slot": 2048}, notes, engine))
    return notes


def test_a_prompt_taken_whole_passes():
    notes = judge_filled(filled(Reply(status=200, content="x", prompt_tokens=1787)))
    assert notes == ["a prompt of 1768 tokens by the server's /tokenize (0.9 of the 2048-token "
                     "slot context of expect.slots.ctx_per_slot): answered 200, "
                     "usage.prompt_tokens 1787"]


@pytest.mark.parametrize("engine, said, cap", [
    ("llamacpp", "request (1787 tokens) exceeds the available context size (1024 tokens), try "
                 "increasing it", "1024"),
    ("vllm", "This model's maximum context length is 1024 tokens. However, you requested 1791 "
             "tokens (1787 in the messages, 4 in the completion).", "1024"),
])
def test_a_refusal_names_the_cap_in_the_engines_words(engine, said, cap):
    with pytest.raises(Failed) as failed:
        judge_filled(filled(Reply(status=400, problem=said)), engine)
    assert f"was refused: the slot holds {cap} tokens, not 2048 (400: " in str(failed.value)


def test_the_training_cap_asks_for_yarn():
    said = "request (1787 tokens) exceeds the available context size (1024 tokens)"
    with pytest.raises(Failed) as failed:
        judge_filled(filled(Reply(status=400, problem=said), ctx_train=1024))
    assert "the slot holds 1024 tokens, the model's training context" in str(failed.value)
    assert "--rope-scaling yarn --rope-scale 2" in str(failed.value)


def test_a_count_short_of_the_text_is_a_cut_prompt_and_an_estimate_is_not_judged_so():
    short = Reply(status=200, content="x", prompt_tokens=906)
    with pytest.raises(Failed, match="fewer than its text alone: the prompt was cut"):
        judge_filled(filled(short))
    assert judge_filled(filled(short, by="an estimate of 1 token a character"))
    with pytest.raises(Skipped, match="without usage.prompt_tokens"):
        judge_filled(filled(Reply(status=200, content="x")))


def test_a_prompt_too_slow_to_process_is_inconclusive_and_a_dropped_one_fails():
    # The check is of what the slot holds: a long prefill that outlasts the wait says nothing of
    # it (perf judges speed); a connection dropped on the prompt is the server's own failure.
    waited = filled(Reply(problem="no answer within 70.7s, the wait for a first answer"))
    waited.wait = 70.72
    with pytest.raises(Skipped, match=r"got no answer in the 70\.7 s waited for its processing"):
        judge_filled(waited)
    dropped = filled(Reply(problem="the connection closed before an answer"))
    dropped.wait = 70.72
    with pytest.raises(Failed, match="the connection closed before an answer"):
        judge_filled(dropped)
