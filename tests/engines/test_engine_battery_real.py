"""spec_decode, vision and perf against real llama.cpp servers (xllamacpp, the tiny self-test
model; with itself as draft model it drafts for real, acceptance about 0.8)."""

import pytest
from fleets import one_endpoint
from llama import DRAFTING
from checkout import ROOT

pytestmark = pytest.mark.real


def test_spec_decode_passes_with_real_counters(llama, run_fleet):
    server = llama(**DRAFTING)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={
        "spec_decode": {"min_acceptance": 0.5}}), "-m", "spec_decode")
    result.assert_outcomes(passed=1)


def test_a_brief_answer_is_inconclusive_not_a_broken_draft(llama, run_fleet):
    """The default self-test model answers in six tokens: as its own draft, a perfect draft."""
    server = llama(alias="m", draft_model="selftest")
    result = run_fleet(one_endpoint(server.url, alias="m", expect={
        "spec_decode": {"min_acceptance": 0.5}}), "-m", "spec_decode", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*inconclusive (* draft tokens, fewer than min_draft_tokens 64, "
                                 "over 4 generation(s) of up to 128 tokens, * written)*"])


def test_band_the_real_acceptance_misses_fails_with_the_measured_rate(llama, run_fleet):
    """The model as its own draft is accepted almost always: above a believable ceiling."""
    server = llama(**DRAFTING)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={
        "spec_decode": {"max_acceptance": 0.9}}), "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "acceptance * is above max_acceptance 0.9: acceptance * (* of * draft tokens "
        "accepted); mean acceptance length *; per position {0: *} [[]source: "
        "llamacpp:spec_decode_* counters]",
        "*fix: acceptance this close to 1 means the draft is the model itself*",
        "cross-check, this reply's timings: draft_n *, draft_n_accepted *"])


def test_draft_model_without_spec_type_is_not_engaged(llama, run_fleet):
    server = llama(**DRAFTING, draft_without_spec_type=True)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={"spec_decode": True}),
                       "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "speculative decoding is off: /slots speculative is false, 0 draft tokens over 1 "
        "generation(s)*", "*fix: start llama-server with --spec-type*"])


def test_no_draft_at_all_reads_as_off(llama, run_fleet):
    server = llama(alias="m", metrics=True)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={"spec_decode": True}),
                       "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["speculative decoding is off: /slots speculative is false*"])


def test_metrics_off_shows_the_501_diagnosis(llama, run_fleet):
    server = llama(**DRAFTING, metrics=False)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={"spec_decode": True}),
                       "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "http://127.0.0.1:*/metrics answered 501: metrics are switched off, so drafting cannot be "
        "measured; the reply's own timings show draft_n *, accepted *",
        "*fix: start llama-server with --metrics*"])


def test_vision_on_the_text_only_model_names_mmproj(llama, run_fleet):
    server = llama(alias="m")
    result = run_fleet(one_endpoint(server.url, alias="m", expect={"vision": True}),
                       "-m", "vision")
    result.assert_outcomes(failed=2)  # data_url and bare base64
    result.stdout.fnmatch_lines([
        "http://127.0.0.1:*/v1/chat/completions answered 500: image input is not supported - "
        "hint: if this is unexpected, you may need to provide the mmproj: no vision projector is "
        "loaded (http://127.0.0.1:*/props says vision false)",
        "*fix: start llama-server with --mmproj FILE*"])


def test_perf_passes_loose_floors_and_fails_an_impossible_one(llama, run_fleet):
    server = llama(alias="m", ctx_size=8192)
    loose = run_fleet(one_endpoint(server.url, alias="m", expect={"perf": {
        "max_ttft_s": 10, "min_decode_tps": 1, "max_cached_ttft_ratio": 0.5,
        "cache_prompt_words": 200}}), "-m", "perf")
    impossible = run_fleet(one_endpoint(server.url, alias="m", expect={
        "perf": {"min_decode_tps": 1.0e9, "runs": 2}}), "-m", "perf")
    loose.assert_outcomes(passed=3)
    impossible.assert_outcomes(passed=1, failed=1, skipped=1)
    impossible.stdout.fnmatch_lines([
        "decode speed *.* tok/s (median of 2, 64 tokens each) is under min_decode_tps 1e+09",
        "decode: median * tok/s over 2 runs (*); the server's own timings: * tok/s"])


def test_selftest_example_proves_spec_decode_and_perf(run_fleet):

    example = ROOT / "examples" / "selftest.yaml"
    result = run_fleet(example.read_text(), "-m", "spec_decode or perf")
    outcomes = result.parseoutcomes()  # spec_decode on the draft endpoint; ttft, decode, cache
    assert outcomes["passed"] == 4 and "failed" not in outcomes, outcomes
    result.stdout.fnmatch_lines(["frank-selftest *perf ok*", "frank-selftest-draft *spec_decode ok*"])
