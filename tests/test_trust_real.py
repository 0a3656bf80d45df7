"""The battery on a healthy endpoint whose answers vary: real llama.cpp servers (xllamacpp) serving
selftest:flat at their default sampling (temperature 0.8). Every check asked must pass, every
time: a verdict that depends on the draw is a false failure.

"Several times" is one pytest run over a fleet that lists the same server under several names:
each name gets its own probes, so each is a fresh sample. The checks known to fail falsely on
the current probes are strict xfails naming the defect; a fix makes them pass, and strict turns
that into a failure here until the mark is removed."""

from __future__ import annotations

import pytest

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
# Per copy: health, alias, 3 perf, 3 reasoning, 5 mapped reasoning_effort levels, required,
# auto, plain chat, slots, vram_fits. Skipped as not asked or not shown here: the unmapped
# efforts, named and parallel tools (llama.cpp treats a named choice as auto), the live vram
# reading (no nvidia-smi), spec_decode and vision.
PASSING_PER_COPY = 18


def fleet(url: str, copies: int, expect: dict) -> dict:
    one = {"url": url, "engine": "llamacpp", "alias": "frank-flat", "expect": expect}
    return {"endpoints": {f"flat-{i}": dict(one) for i in range(1, copies + 1)}}


@pytest.fixture(scope="module")
def flat(llama):
    return llama(**FLAT)


@pytest.fixture(scope="module")
def drafting(llama):
    return llama(**DRAFTING)


def test_every_asked_check_passes_on_every_draw(flat, run_fleet):
    result = run_fleet(fleet(flat.url, COPIES, EXPECT), "-p", "no:randomly",
                       "-k", "not test_tools_streamed")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "error" not in outcomes, result.stdout.str()[-4000:]
    assert outcomes["passed"] == PASSING_PER_COPY * COPIES, outcomes


@pytest.mark.xfail(strict=True, reason=(
    "test_tools_streamed compares two samples: the probes send no temperature or seed, so at "
    "the server's 0.8 the streamed and the non-streamed answer may call different tools "
    "(get_time vs get_weather) and the check reports a broken streaming parser"))
def test_streamed_tool_calls_pass_on_every_draw(flat, run_fleet):
    result = run_fleet(fleet(flat.url, DRAWS, {"tools": True}), "-p", "no:randomly",
                       "-k", "test_tools_streamed")
    result.assert_outcomes(passed=DRAWS)


@pytest.mark.xfail(strict=True, reason=(
    "spec_decode generates with ignore_eos at the server's sampling: past the model's natural "
    "end the draft proposes the end token that the target may not take, and the target's "
    "temperature-0.8 draws disagree with the draft's greedy proposals, so a perfect draft "
    "measures 0.43-0.56 and drops under min_acceptance 0.5 in about one draw in three"))
def test_spec_decode_of_a_perfect_draft_passes_on_every_draw(drafting, run_fleet):
    result = run_fleet(fleet(drafting.url, DRAWS, SPEC), "-p", "no:randomly", "-m", "spec_decode")
    result.assert_outcomes(passed=DRAWS)
