"""spec_decode against emulated engines: vLLM and SGLang metric shapes, an old llama.cpp with only
per-reply timings, collapsed acceptance, speculation not configured."""

import pytest
import json

from emulator import Emulator, Reply, chat_json, metrics_text, serve_chat
from healthy_engines import healthy_chat
from fleets import one_endpoint

pytestmark = pytest.mark.emulated

VLLM_LABELS = [{"model_name": "m", "engine": "0"}, {"model_name": "m", "engine": "1"}]


def serve_drafting(em, step, render, timings=False):
    """Counters that grow by `step` (drafts, tokens, accepted, per_pos) with each generation."""
    totals = {"drafts": 0, "tokens": 0, "accepted": 0, "per_pos": [0, 0]}

    def chat(req):
        for key in ("drafts", "tokens", "accepted"):
            totals[key] += step[key]
        totals["per_pos"] = [a + b for a, b in zip(totals["per_pos"], step["per_pos"])]
        reply = chat_json("one\ntwo\nthree", model="m", finish="length")
        if timings:
            reply["timings"] = {"predicted_n": 128, "draft_n": step["tokens"],
                                "draft_n_accepted": step["accepted"]}
        return Reply(200, reply)

    em.route("POST", "/v1/chat/completions", chat)
    em.route("GET", "/metrics", lambda r: Reply(200, render(totals)))


def vllm_metrics(t):
    # vLLM splits each counter over engines (labels) and exports `_created` beside `_total`.
    half = lambda v: [(lab, v / 2) for lab in VLLM_LABELS]  # noqa: E731
    series = {"vllm:num_requests_running": half(0)}
    for key, name in (("drafts", "drafts"), ("tokens", "draft_tokens"),
                      ("accepted", "accepted_tokens")):
        series[f"vllm:spec_decode_num_{name}_total"] = half(t[key])
        series[f"vllm:spec_decode_num_{name}_created"] = half(1.7e9)
    series["vllm:spec_decode_num_accepted_tokens_per_pos_total"] = [
        ({**VLLM_LABELS[0], "position": str(i)}, v) for i, v in enumerate(t["per_pos"])]
    kinds = {f"vllm:spec_decode_num_{n}": "counter" for n in ("drafts", "draft_tokens")}
    return metrics_text(series, kinds)


def llamacpp_metrics(t):
    return metrics_text({"llamacpp:prompt_tokens_total": 21,
                         "llamacpp:spec_decode_num_drafts_total": t["drafts"],
                         "llamacpp:spec_decode_num_draft_tokens_total": t["tokens"],
                         "llamacpp:spec_decode_num_accepted_tokens_total": t["accepted"]})


def old_llamacpp_metrics(t):  # a build from before the spec_decode counters
    return metrics_text({"llamacpp:prompt_tokens_total": 21, "llamacpp:n_decode_total": 40})


def test_vllm_counters_summed_over_labels_pass_the_band(run_fleet):
    step = {"drafts": 40, "tokens": 80, "accepted": 60, "per_pos": [36, 24]}
    with Emulator("vllm", models=["m"]) as em:
        serve_drafting(em, step, vllm_metrics)
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect={
            "spec_decode": {"min_acceptance": 0.6, "max_acceptance": 0.95}}), "-m", "spec_decode")
    result.assert_outcomes(passed=1)
    assert [r.path for r in em.requests if r.path not in ("/health", "/v1/models", "/version")] == [
        "/metrics", "/v1/chat/completions", "/metrics"]  # 80 >= 64 drafted: asked once
    generation = next(r.body for r in em.requests if r.path == "/v1/chat/completions")
    assert "ignore_eos" not in generation  # the model writes of its own accord


def test_collapsed_acceptance_fails_with_the_measured_rate_and_cross_check(run_fleet):
    # llama.cpp (Aug 2026 build) at long context: 19 of 100 draft tokens accepted.
    step = {"drafts": 50, "tokens": 100, "accepted": 19, "per_pos": [0, 0]}
    with Emulator("llamacpp", models=["m"]) as em:
        serve_drafting(em, step, llamacpp_metrics, timings=True)
        result = run_fleet(one_endpoint(em.url, alias="m", expect={
            "spec_decode": {"min_acceptance": 0.6, "max_acceptance": 0.95}}), "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "acceptance 0.19 is below min_acceptance 0.6: acceptance 0.19 (19 of 100 draft tokens "
        "accepted); mean acceptance length 1.38 [[]source: llamacpp:spec_decode_* counters]",
        "*fix: the draft does not fit the model*--spec-draft-n-max*",
        "*the delta may include other requests*",
        "cross-check, this reply's timings: draft_n 100, draft_n_accepted 19 (acceptance 0.19)"])


def test_old_llamacpp_falls_back_to_reply_timings_and_says_so(run_fleet):
    step = {"drafts": 0, "tokens": 90, "accepted": 63, "per_pos": [0, 0]}
    with Emulator("llamacpp", models=["m"]) as em:
        serve_drafting(em, step, old_llamacpp_metrics, timings=True)
        ok = run_fleet(one_endpoint(em.url, alias="m", expect={
            "spec_decode": {"min_acceptance": 0.6}}), "-m", "spec_decode")
        strict = run_fleet(one_endpoint(em.url, alias="m", expect={
            "spec_decode": {"min_acceptance": 0.8}}), "-m", "spec_decode")
    ok.assert_outcomes(passed=1)
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines([
        "acceptance 0.70 is below min_acceptance 0.8: acceptance 0.70 (63 of 90 draft tokens "
        "accepted) [[]source: the reply's timings.draft_n / draft_n_accepted (this build has no "
        "spec_decode counters in /metrics)]"])


def test_drafts_that_are_never_accepted_fail(run_fleet):
    step = {"drafts": 30, "tokens": 60, "accepted": 0, "per_pos": [0, 0]}
    with Emulator("vllm", models=["m"]) as em:
        serve_drafting(em, step, vllm_metrics)
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect={"spec_decode": True}),
                           "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["speculative decoding drafts but nothing is accepted: "
                                 "acceptance 0.00 (0 of 120 draft tokens accepted)*"])  # 2 asks


def sglang(em, rate, length, *, written=128, earlier=(0.5, 2.0)):
    """SGLang shape: each answer writes `written` tokens; the acceptance gauges hold `earlier`
    (a previous window) until a generation, then (rate, length)."""
    gauges = list(earlier)

    def chat(req):
        gauges[:] = [rate, length]
        reply = chat_json("x", model="m", finish="length")
        reply["usage"]["completion_tokens"] = written
        return Reply(200, reply)

    em.route("POST", "/v1/chat/completions", chat)
    em.route("GET", "/metrics", lambda r: Reply(200, metrics_text(
        {"sglang:spec_accept_rate": [({"model_name": "m"}, gauges[0])],
         "sglang:spec_accept_length": [({"model_name": "m"}, gauges[1])]},
        {"sglang:spec_accept_rate": "gauge", "sglang:spec_accept_length": "gauge"})))


def test_sglang_gauges_pass_and_fail_the_band(run_fleet):
    band = {"spec_decode": {"min_acceptance": 0.6, "max_acceptance": 0.95}}
    with Emulator("sglang", models=["m"]) as em:
        sglang(em, 0.72, 3.2)
        ok = run_fleet(one_endpoint(em.url, "sglang", alias="m", expect=band), "-m", "spec_decode")
    with Emulator("sglang", models=["m"]) as em:
        sglang(em, 0.0, 0.0, earlier=(0.0, 0.0))
        idle = run_fleet(one_endpoint(em.url, "sglang", alias="m", expect=band),
                         "-m", "spec_decode")
    ok.assert_outcomes(passed=1)
    idle.assert_outcomes(failed=1)
    idle.stdout.fnmatch_lines(["speculative decoding is configured but not engaged: acceptance "
                               "0.00; mean acceptance length 0.00 [[]source: sglang:spec_accept_* "
                               "gauges]*", "*fix: start SGLang with --speculative-algorithm*"])


def test_sglang_six_tokens_written_are_inconclusive_with_the_counts(run_fleet):
    """SGLang answers briefly (6 tokens): asked again up to four times, 24 tokens are still
    fewer than min_draft_tokens, so the gauges' 0.72 is not judged."""
    with Emulator("sglang", models=["m"]) as em:
        sglang(em, 0.72, 3.2, written=6)
        result = run_fleet(one_endpoint(em.url, "sglang", alias="m", expect={
            "spec_decode": {"min_acceptance": 0.9}}), "-m", "spec_decode")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*inconclusive (24 tokens written, fewer than min_draft_tokens 64, over 4 generation(s) "
        "of up to 128 tokens, 24 written; the gauges count no draft tokens): acceptance 0.72; "
        "mean acceptance length 3.20 [[]source: sglang:spec_accept_* gauges]*"])
    assert sum(r.path == "/v1/chat/completions" for r in em.requests) == 4


def test_sglang_gauges_that_did_not_move_are_inconclusive(run_fleet):
    """SGLang shape: 128 tokens written, yet the gauges read the same before and after (the
    window was not refreshed): the 0.40 is an earlier window's, not a failure of this one."""
    with Emulator("sglang", models=["m"]) as em:
        sglang(em, 0.4, 1.8, earlier=(0.4, 1.8))
        result = run_fleet(one_endpoint(em.url, "sglang", alias="m", expect={
            "spec_decode": {"min_acceptance": 0.6}}), "-m", "spec_decode")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*inconclusive (the gauges did not move over 1 generation(s) of up to 128 tokens, 128 "
        "written: they still hold an earlier window, not this probe's): acceptance 0.40; mean "
        "acceptance length 1.80*"])


def test_sglang_without_metrics_names_the_flag(run_fleet):
    with Emulator("sglang", models=["m"]) as em:  # no /metrics route: SGLang answers 404
        em.route("POST", "/v1/chat/completions", lambda r: Reply(200, chat_json("x")))
        result = run_fleet(one_endpoint(em.url, "sglang", alias="m", expect={"spec_decode": True}),
                           "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*/metrics answered 404: metrics are switched off*",
                                 "*fix: start SGLang with --enable-metrics"])


def test_too_few_draft_tokens_is_inconclusive_not_a_rate(run_fleet):
    """A model that answers briefly: four generations draft 4 tokens each, under the minimum."""
    step = {"drafts": 2, "tokens": 4, "accepted": 1, "per_pos": [1, 0]}
    with Emulator("vllm", models=["m"]) as em:
        serve_drafting(em, step, vllm_metrics)
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect={
            "spec_decode": {"min_acceptance": 0.6}}), "-m", "spec_decode")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*inconclusive (16 draft tokens, fewer than min_draft_tokens 64, "
                                 "over 4 generation(s) of up to 128 tokens*"])
    assert sum(r.path == "/v1/chat/completions" for r in em.requests) == 4


# -- the probe owns its window --------------------------------------------------------------------

def serve_shared(em, counted, own):
    """llama.cpp shape (Aug 2026 build): each generation's reply says what it drafted itself
    (`own`: draft_n, draft_n_accepted), while the server-wide counters grow by `counted`
    (drafted, accepted): other requests drafted in the same window."""
    totals = {"drafts": 0, "tokens": 0, "accepted": 0, "per_pos": [0, 0]}

    def chat(req):
        totals["drafts"] += counted[0] // 2
        totals["tokens"] += counted[0]
        totals["accepted"] += counted[1]
        reply = chat_json("one\ntwo\nthree", model="m", finish="length")
        reply["timings"] = {"predicted_n": 128, "draft_n": own[0], "draft_n_accepted": own[1]}
        return Reply(200, reply)

    em.route("POST", "/v1/chat/completions", chat)
    em.route("GET", "/metrics", lambda r: Reply(200, llamacpp_metrics(totals)))


def test_counters_that_saw_others_drafting_are_inconclusive_naming_both(run_fleet):
    """The loaded box of the field: the counters grew by 400 draft tokens, 69 accepted, while
    the probe's own answer drafted 70: the 0.17 is mostly others' (abandoned, grammar-bound)
    requests, never this endpoint's failure."""
    with Emulator("llamacpp", models=["m"]) as em:
        serve_shared(em, counted=(400, 69), own=(70, 66))
        result = run_fleet(one_endpoint(em.url, alias="m", expect={
            "spec_decode": {"min_acceptance": 0.5}}), "-m", "spec_decode")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*inconclusive (the counters saw 400 draft tokens over the probe's window, 330 more than "
        "its own replies drafted (70, timings.draft_n): other requests drafted at least as much "
        "in the same window, so the counters' rate is not this endpoint's own): acceptance 0.17 "
        "(69 of 400 draft tokens accepted)*the probe's own replies: acceptance 0.94 (66 of 70 "
        "draft tokens accepted)*"])


def test_some_of_others_drafting_judges_the_probes_own_counts(run_fleet, tmp_path):
    """Others drafted 20 tokens beside the probe's 80: the counters' 0.80 would fail a 0.81
    floor that the probe's own replies (66 of 80, 0.82) meet; those are judged."""
    report = tmp_path / "frank.json"
    with Emulator("llamacpp", models=["m"]) as em:
        serve_shared(em, counted=(100, 80), own=(80, 66))
        result = run_fleet(one_endpoint(em.url, alias="m", expect={
            "spec_decode": {"min_acceptance": 0.81}}), "-m", "spec_decode",
            "--frank-json", str(report))
    result.assert_outcomes(passed=1)
    notes = _notes(report)
    assert ("the counters saw 100 draft tokens over the probe's window, 20 more than its own "
            "replies drafted (80, timings.draft_n): other requests drafted beside the probe, so "
            "its own replies are judged, not the counters' acceptance 0.80 (80 of 100 draft "
            "tokens accepted)") in notes, notes
    row = json.loads(report.read_text())["rows"][-1]
    assert row["figures"]["acceptance"]["value"] == 0.825


def _notes(report) -> str:
    rows = json.loads(report.read_text())["rows"]
    return "\n".join(next(r for r in rows if r["key"].endswith("test_spec_decode[ep]"))["notes"])


def sglang_window(em, *, interval=40):
    """SGLang shape (python/sglang/srt/managers/scheduler_metrics_mixin.py): the spec_accept_*
    gauges hold the last logging window, the decode steps of every running request since the
    previous log (decode_log_interval, 40 steps), not one request's. A grammar-bound tool call
    accepts about 1 draft in 128 over a short answer (24 steps); a free answer 53 of 56 over 48
    steps (the field's figures)."""
    window = {"accepted": 0, "drafted": 0, "steps": 0}
    gauges = [0.0, 0.0]

    def answer(body):
        bound = bool(body.get("tools")) and body.get("tool_choice") != "none"
        accepted, drafted, steps = (1, 128, 24) if bound else (53, 56, 48)
        window["accepted"] += accepted
        window["drafted"] += drafted
        window["steps"] += steps
        if window["steps"] >= interval:  # the scheduler logs, and the gauges take the window
            rate = window["accepted"] / window["drafted"]
            gauges[:] = [rate, 1 + 3 * rate]
            window.update(accepted=0, drafted=0, steps=0)
        reply = healthy_chat()(body)
        reply["usage"]["completion_tokens"] = 128
        return reply

    serve_chat(em, answer)
    em.route("GET", "/metrics", lambda r: Reply(200, metrics_text(
        {"sglang:spec_accept_rate": [({"model_name": "m"}, gauges[0])],
         "sglang:spec_accept_length": [({"model_name": "m"}, gauges[1])]},
        {"sglang:spec_accept_rate": "gauge", "sglang:spec_accept_length": "gauge"})))


def test_sglang_gauges_read_before_any_tool_call_share_their_window(run_fleet, tmp_path):
    """spec_decode beside tools on one self-drafting SGLang endpoint, four requests at once:
    the spec_decode probe runs first and alone, so the window its gauges report holds its own
    steps, not the grammar-bound tool calls' (which read 0.17 in the field)."""
    report = tmp_path / "frank.json"
    with Emulator("sglang", models=["m"]) as em:
        sglang_window(em)
        result = run_fleet(one_endpoint(em.url, "sglang", alias="m", concurrency=4, expect={
            "spec_decode": {"min_acceptance": 0.6}, "tools": {"trials": 2}}),
            "-m", "spec_decode or tools", "--frank-json", str(report))
    chats = [r.body for r in em.requests if r.path == "/v1/chat/completions"]
    spec = [i for i, b in enumerate(chats) if b["messages"][0]["content"].startswith("Count")]
    assert spec and len(chats) > len(spec) and spec == list(range(len(spec))), spec
    assert "PASSED test_spec_decode.py::test_spec_decode[ep]" in result.stdout.str()
    assert "acceptance 0.95; mean acceptance length 3.84" in _notes(report)
