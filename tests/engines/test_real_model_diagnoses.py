"""Diagnoses that hold on a real trained model: SmolLM2-135M-Instruct on real llama.cpp
(tests/support/real_models.py). Its answers vary under sampling and are sometimes terse, it drafts with
itself, it runs on this machine's CPU; the faults come from a proxy in front of it
(tests/support/proxy.py:
one that drops a parameter, hides /props behind a gateway's model card, or paces the answer like
a slow GPU), as no engine here shows them on its own."""

from __future__ import annotations

import collections
import json

import pytest

from fleets import one_endpoint
from proxy import Proxy
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, params
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.target import Target
from pytest_frank.outcome.verdict import Inconclusive

pytestmark = pytest.mark.real

Failed = pytest.fail.Exception
SMOL = {"alias": "m", "ctx_size": 2048, "threads": 1}
RUNS = 30  # probes of the token cap on the real model


@pytest.fixture(scope="module")
def smol(smollm2):
    return smollm2(**SMOL)


def _cap_outcomes(url: str, runs: int) -> tuple[collections.Counter, list[str]]:
    """`runs` probes and judgements of test_params_max_tokens, sampled (temperature 1, no
    seed) so the model's answers vary as a client's do; their outcomes and messages."""
    ep = bind(Endpoint("ep", "llamacpp", url=url, alias="m", expect={"params": True},
                       sampling={"temperature": 1.0, "seed": None}))
    target = Target(ep)
    seen: collections.Counter = collections.Counter()
    said = []
    try:
        for _ in range(runs):
            obs = params.capped(target)
            seen["asked again"] += sum(len(tries) > 0 for tries in obs.under.values())
            notes: list[str] = []
            try:
                params.judge_max_tokens(obs, Context(ep, target.driver, ep.options("params"),
                                                     None, notes.append))
                seen["passed"] += 1
            except Inconclusive as exc:
                seen["inconclusive"] += 1
                said.append(str(exc))
            except Failed as exc:
                seen["failed"] += 1
                said.append(str(exc))
    finally:
        target.close()
    return seen, said


def test_a_terse_real_model_never_fails_the_token_cap(smol):
    """SmolLM2 answers 'Count from one to one hundred' with 'One hundred.' (4 tokens) about
    half the time: such an answer is asked again under a smaller cap, never failed."""
    seen, said = _cap_outcomes(smol.url, RUNS)
    print(f"max_tokens on SmolLM2, {RUNS} runs: {dict(seen)}")
    assert seen["failed"] == 0, said
    assert seen["passed"] + seen["inconclusive"] == RUNS


def test_a_proxy_that_overrides_the_cap_still_fails_on_the_real_model(smol):
    """A gateway that puts its own default cap (64) in place of the client's: the long answers
    run past 16, and the short ones are asked again under a smaller cap, which they pass too."""
    with Proxy(smol.url, rewrite=lambda b: {**b, "max_tokens": 64,
                                            "max_completion_tokens": 64}) as proxy:
        seen, said = _cap_outcomes(proxy.url, 5)
    print(f"max_tokens overridden by a proxy, 5 runs: {dict(seen)}")
    assert seen["failed"] == 5, said
    assert all("the cap is not applied" in s for s in said), said


def test_a_proxy_that_drops_the_cap_fails_on_the_real_model(smollm2, run_fleet):
    """Dropped altogether: the greedy answer counts on past the request's wait (5 s + 16 tokens
    at 5 tok/s); the server's /slots, read after the cut, shows the request still decoding far
    past its cap of 16, which names the fault instead of a slow server. A server of its own:
    the proxy keeps the uncapped answer running to the end of the context after the cut."""
    server = smollm2(**{**SMOL, "ctx_size": 1024})
    drop = ("max_tokens", "max_completion_tokens")
    with Proxy(server.url, rewrite=lambda b: {k: v for k, v in b.items() if k not in drop}) as p:
        result = run_fleet(one_endpoint(p.url, alias="m", timeout=5, expect={"params": True}),
                           "-k", "test_params_max_tokens")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*no answer within 8.2s (timeout 5 s + 16 tokens at the default min_tokens_per_s 5 "
        "tok/s): the one request the server was running is this one (1 of 1 slots busy, 0 "
        "waiting, * tokens decoded of a request capped at max_tokens=16): the cap is not "
        "applied, so the answer runs on",
        "  fix: update the engine (max_tokens must cap the answer); a proxy in front must pass "
        "max_tokens through"])


def test_logprobs_on_a_self_drafting_real_model_name_drafting(smollm2, smollm2_path, run_fleet):
    """SmolLM2 drafting with itself: llama.cpp sends the drafted tokens without alternatives;
    the failure names drafting (/slots speculative true), not a proxy or the engine's version."""
    drafting = smollm2(**SMOL, draft_model=str(smollm2_path))
    result = run_fleet(one_endpoint(drafting.url, alias="m", expect={"params": True}),
                       "-k", "test_params_logprobs")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "top_logprobs: 2 was sent and token * came with 0 alternatives (logprob 0.0), * tokens "
        "so: the server drafts (/slots speculative true), and llama.cpp sends the tokens the "
        "draft proposed with logprob 0.0 and no alternatives",
        "  fix: serve clients that need top_logprobs from a server that does not draft*"])
    assert "a proxy in front must pass logprobs" not in result.stdout.str()
    print(next(line for line in result.outlines if line.startswith("top_logprobs")))


def test_logprobs_pass_on_the_real_model_without_drafting(smol, run_fleet):
    result = run_fleet(one_endpoint(smol.url, alias="m", expect={"params": True}),
                       "-k", "test_params_logprobs")
    result.assert_outcomes(passed=1)


def _gateway(hide_context: bool):
    """A gateway in front of llama.cpp: no /props or /slots, and its own model card that says
    the context as vLLM does (max_model_len), or says nothing of it."""
    def card(models):
        for c in models["data"]:
            c.pop("meta", None)
            if not hide_context:
                c["max_model_len"] = SMOL["ctx_size"]
        return models
    return {"/props": lambda _: None, "/slots": lambda _: None, "/v1/models": card}


@pytest.mark.parametrize("hide_context, outcome", [(False, "passed"), (True, "skipped")])
def test_the_context_limit_reads_a_gateways_max_model_len(smol, run_fleet, hide_context,
                                                          outcome):
    with Proxy(smol.url, routes=_gateway(hide_context)) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="m", expect={"params": True}),
                           "-k", "test_params_context_limit")
        asked = [b for b in proxy.sent if "Repeat the last word" in json.dumps(b)]
    result.assert_outcomes(**{outcome: 1})
    if hide_context:
        result.stdout.fnmatch_lines(["*the endpoint does not say its context*"])
        assert not asked
    else:  # a prompt past the card's 2048 tokens went out, and llama.cpp refused it
        assert len(asked) == 1 and asked[0]["messages"][0]["content"].count("hello") == 2048 + 256


def test_a_cpu_server_gets_a_cpu_fix_for_slow_decode(smollm2_path, run_fleet):
    """A launched SmolLM2 runs on this machine's CPU (xllamacpp's devices): a decode under the
    floor is told about threads and smaller quants, not -ngl and the card."""
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "alias": "m", "launch": {
        "model": str(smollm2_path), "alias": "m", "ctx_size": 2048, "threads": 1},
        "expect": {"perf": {"min_decode_tps": 1.0e9}}}}}
    result = run_fleet(fleet, "-k", "test_perf_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "decode speed * tok/s (median of 3, 64 tokens each) is under min_decode_tps 1e+09, on "
        "the CPU, whose cores and memory bandwidth bound it (xllamacpp's ggml devices: CPU)",
        # launched by the fleet's launch: block, so the fix is in its spelling
        "  fix: set launch.threads to the physical cores, serve a "
        "smaller quant or model, or move it to a GPU; check that no other load shares the "
        "machine; or relax expect.perf.min_decode_tps"])
    out = result.stdout.str()
    assert "-ngl" not in out and "the card" not in out, out[-3000:]


# -- healthy and slow: a proxy that paces the real model's answer like a slow GPU ------------
def _slow(url, floor, timeout, expect):
    return one_endpoint(url, alias="m", timeout=timeout, min_tokens_per_s=floor, expect=expect)


def test_a_slow_stream_still_producing_tokens_is_slow_not_hung(smol, run_fleet):
    """64 tokens streamed 100 ms apart (10 tok/s) against a wait of 3 s + 64 tokens at 32
    tok/s: cut at 5 s while tokens were arriving. The message says what came and where the wait
    came from, and the fix gives the answers more time."""
    with Proxy(smol.url, pace_s=0.1) as proxy:
        result = run_fleet(_slow(proxy.url, 32, 3, {"perf": {"min_decode_tps": 1}}),
                           "-k", "test_perf_ttft")
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the stream was still producing tokens when its 5s (timeout 3 s + 64 tokens at "
        "min_tokens_per_s 32 tok/s) ran out (* events with data in *s, about * a second, the "
        "last one *s before the cut): slower than min_tokens_per_s 32 tok/s, not hung*",
        "  fix: the server is slow, not broken: give its answers more time: lower "
        "`min_tokens_per_s` (now 32 tok/s, min_tokens_per_s) below the speed it decodes at "
        "under the battery's load, or raise `timeout` (now 3 s) for this endpoint in fleet.yaml"])
    assert "hangs" not in out and "saturated" not in out, out[-3000:]


def test_a_slow_whole_answer_explains_its_wait_and_gives_a_fix(smol, run_fleet):
    """A whole answer held by the proxy at 0.5 s a token: nothing comes before the wait of 1 s
    + 512 tokens at 1000 tok/s ends. The budget is explained, and the fix gives answers more
    time (conditional where /slots, read after the cut, no longer shows the request)."""
    with Proxy(smol.url, pace_s=0.5) as proxy:  # even a terse answer is held past the wait
        result = run_fleet(_slow(proxy.url, 1000, 1, {"params": True}), "-k", "test_params_stop")
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*no answer within 1.512s (timeout 1 s + 512 tokens at min_tokens_per_s 1000 tok/s)*",
        "  fix: *give its answers more time: lower `min_tokens_per_s` (now 1000 tok/s, "
        "min_tokens_per_s)*"])
    assert "saturated" not in out and "accepted the connection but hangs" not in out, out[-3000:]
