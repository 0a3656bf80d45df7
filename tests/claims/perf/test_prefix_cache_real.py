"""The prefix cache on real llama.cpp (xllamacpp, the tiny self-test model), judged by the
server's own count (timings.cache_n): healthy behind a loopback proxy that adds 0-30 ms to every
answer (the jitter that makes first-token ratios noise on a fast prefill), and failing with the
fix behind a gateway that forces `cache_prompt: false` into every request. The count reaches
--frank-json and the baseline."""

import pytest
import json

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real

PERF = {"perf": {"min_cached_share": 0.5, "cache_prompt_words": 150}}
SPEC = {"alias": "m", "ctx_size": 4096, "parallel": 2, "kv_unified": True}


def figures(report, test="test_perf_prefix_cache[ep]"):
    rows = json.loads(report.read_text())["rows"]
    return next(r for r in rows if r["key"].endswith(test))


def test_healthy_cache_passes_by_count_through_jitter(llama, run_fleet, tmp_path):
    report = tmp_path / "frank.json"
    with Proxy(llama(**SPEC).url, jitter_s=0.03, seed=7) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="m", expect=PERF), "-m", "perf",
                           "-k", "test_perf_prefix_cache", "--frank-json", str(report))
    result.assert_outcomes(passed=1)
    assert len(proxy.delays) >= 6 and max(proxy.delays) <= 0.03  # every answer was delayed
    row = figures(report)
    share, cached = row["figures"]["cached_share"], row["figures"]["cached_tokens"]
    assert 0.5 <= share["value"] <= 1 and cached["unit"] == "tokens" and cached["value"] > 100
    assert "cached_ttft_ratio" in row["figures"]  # the times are a figure, not the verdict
    notes = "\n".join(row["notes"])
    assert f"the repeated 150-word prompt was {share['value']:.2f} served from the cache" in notes
    assert "[source: timings.cache_n / prompt_n]" in notes


def test_cache_prompt_false_forced_by_a_proxy_fails_with_the_fix(llama, run_fleet, tmp_path):
    """First a healthy run as the baseline, then the same endpoint behind a gateway that adds
    cache_prompt: false: the check fails by count, and the baseline names the share's fall."""
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    server = llama(**SPEC)
    ok = run_fleet(one_endpoint(server.url, alias="m", expect=PERF), "-m", "perf",
                   "-k", "test_perf_prefix_cache", "--frank-json", str(before))
    with Proxy(server.url, rewrite=lambda body: {**body, "cache_prompt": False}) as proxy:
        bad = run_fleet(one_endpoint(proxy.url, alias="m", expect=PERF), "-m", "perf",
                        "-k", "test_perf_prefix_cache", "--frank-json", str(after),
                        "--frank-baseline", str(before))
    ok.assert_outcomes(passed=1)
    bad.assert_outcomes(failed=1)
    chats = [b for b in proxy.sent if "messages" in b]
    assert len(chats) == 6 and all(b["cache_prompt"] is False for b in chats)
    bad.stdout.fnmatch_lines([
        "the repeated 150-word prompt was 0.00 served from the cache (median of 3; cached "
        "tokens 0 of *, 0 of *, 0 of *) [[]source: timings.cache_n / prompt_n], under "
        "min_cached_share 0.5: the prefix cache does not help",
        "*fix: llama-server reuses a slot's cached prompt unless the request says "
        "\"cache_prompt\": false: find the client or proxy that sends it and drop it*"])
    was = figures(before)["figures"]["cached_share"]["value"]
    bad.stdout.fnmatch_lines([f"*prefix-cache share {was:.2f} -> 0.00 (down {was:.2f}, "
                              "tolerance 0.1)*"])
    assert figures(after)["figures"]["cached_tokens"]["value"] == 0


# -- the long prompt sized to the slot, by the server's own count ----------------------------------

def _notes(report, test="test_perf_prefix_cache[ep]"):
    return "\n".join(figures(report, test)["notes"])


def test_the_prompt_fits_2048_token_slots_by_the_servers_count(llama, run_fleet, tmp_path):
    """-c 8192 -np 4: 2048 tokens a slot. The default 1500 words are some 8700 tokens to the
    self-test's byte-level tokenizer (llama.cpp answered 400 "exceeds the available context
    size" to a prompt sized by words): /tokenize counts them, and half the slot goes out."""
    report = tmp_path / "frank.json"
    server = llama(alias="m", ctx_size=8192, parallel=4, metrics=True)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={
        "perf": {"min_cached_share": 0.5}}), "-m", "perf", "-k", "test_perf_prefix_cache",
        "--frank-json", str(report))
    result.assert_outcomes(passed=1)
    notes = _notes(report)
    assert "1500 words are " in notes and "tokens by the server's /tokenize, more than the " \
        "1024 a 2048-token slot leaves a long prompt: " in notes, notes
    sent = [ex["sent"] for ex in figures(report)["exchanges"]
            if ex["request"].endswith("/v1/chat/completions")]
    tokens = int(notes.split("-word prompt (")[1].split(" tokens")[0])
    assert len(sent) == 6 and 512 < tokens <= 1024, (len(sent), tokens)


def test_a_slot_too_small_to_measure_is_inconclusive_with_its_size(llama, run_fleet):
    server = llama(alias="m", ctx_size=512, parallel=4)  # 256 tokens a slot (llama.cpp's least)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={
        "perf": {"min_cached_share": 0.5}}), "-m", "perf", "-k", "test_perf_prefix_cache")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*inconclusive: the prefix cache is not measured: each slot holds 256 tokens: room for "
        "128 prompt tokens, fewer than the 256 a measurement needs*"])
    assert "/v1/chat/completions" not in result.stdout.str()
