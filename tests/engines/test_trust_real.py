"""The battery on a healthy endpoint whose answers vary: real llama.cpp servers (xllamacpp) serving
selftest:flat at their default sampling (temperature 0.8). Every check asked must pass, every
time: a verdict that depends on the draw is a false failure.

"Several times" is one pytest run over a fleet that lists the same server under several names:
each name gets its own probes, so each is a fresh sample. The fleet says
`sampling: {temperature: null, seed: null}`: the probes send no sampling, so the server's own
decides (the battery is greedy and seeded by default, which would hide what sampling does)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.real

pytest.importorskip("xllamacpp")

COPIES = 4  # the whole battery, four draws
DRAWS = 20  # one check, twenty draws: a defect that fails one draw in three cannot hide
FLAT = {"model": "selftest:flat", "alias": ["frank-flat", "flat-local"], "ctx_size": 4096,
        "parallel": 2, "kv_unified": True}
DRAFTING = {"model": "selftest:flat", "alias": "frank-flat", "draft_model": "selftest:flat"}
# examples/selftest.yaml's expectations, perf with two runs to spare the CPU.
EXPECT = {
    "perf": {"max_ttft_s": 10, "min_decode_tps": 5, "max_cached_ttft_ratio": 0.5,
             "cache_prompt_words": 150, "runs": 2},
    "reasoning": True,
    "reasoning_effort": {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh",
                         "max": "xhigh"},
    "tools": {"trials": 2},
    "slots": {"count": 2, "ctx_per_slot": 4096},
    "vram": {"ctx_size": 4096, "parallel": 2, "kv_unified": True, "contexts": [2048, 4096],
             "gpu_mib": 1024, "fixed_mib": 64, "headroom_mib": 64},
}
# A perfect draft (the model itself) and the example's floor.
SPEC = {"spec_decode": {"min_acceptance": 0.5}}
# Per copy: health, alias, chat, 3 perf, 3 reasoning, 5 mapped reasoning_effort levels, required,
# auto, plain chat, streamed tools, the arguments on the wire, tool_choice none, slots, the
# slot's context, vram_fits, every reply's contract. Skipped as not asked or not shown here: the
# unmapped efforts, named and parallel tools (llama.cpp treats a named choice as auto), the live
# vram reading (no nvidia-smi), spec_decode, vision, and the stream twins (sampled: no pair).
PASSING_PER_COPY = 24
SERVER_SAMPLING = {"temperature": None, "seed": None}


def fleet(url: str, copies: int, expect: dict) -> dict:
    one = {"url": url, "engine": "llamacpp", "alias": "frank-flat", "expect": expect,
           "sampling": SERVER_SAMPLING}
    return {"endpoints": {f"flat-{i}": dict(one) for i in range(1, copies + 1)}}


@pytest.fixture(scope="module")
def flat(llama):
    return llama(**FLAT)


@pytest.fixture(scope="module")
def drafting(llama):
    return llama(**DRAFTING)


def test_every_asked_check_passes_on_every_draw(flat, run_fleet):
    result = run_fleet(fleet(flat.url, COPIES, EXPECT), "-p", "no:randomly")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "error" not in outcomes, result.stdout.str()[-4000:]
    assert outcomes["passed"] == PASSING_PER_COPY * COPIES, outcomes


def test_streamed_tool_calls_pass_on_every_draw(flat, run_fleet):
    """Sampled, the streamed and the plain answer may call different tools: both valid is a
    pass, the difference a note."""
    result = run_fleet(fleet(flat.url, DRAWS, {"tools": True}), "-p", "no:randomly",
                       "-k", "test_tools_streamed")
    result.assert_outcomes(passed=DRAWS)


def test_a_perfect_draft_never_fails(drafting, run_fleet):
    """The model as its own draft answers in a few tokens: too few drafted to judge a rate, so
    spec_decode says inconclusive (a skip with the count), never a failure."""
    result = run_fleet(fleet(drafting.url, DRAWS, SPEC), "-p", "no:randomly", "-m", "spec_decode")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and outcomes.get("skipped", 0) + outcomes.get("passed", 0) \
        == DRAWS, outcomes
    result.stdout.fnmatch_lines(["*inconclusive (* draft tokens, fewer than min_draft_tokens 64*"])
