"""spec_decode against real llama.cpp (xllamacpp) drafting from the model's own MTP head: the
self-test hybrid (Qwen3.5's architecture, pytest_frank.local.selftest_hybrid) under launch
`spec_type: draft-mtp`. Its head was built to misread one count in ten (acceptance 72 of 93 over
the probe's answer), its collapsing twin every count (3 of 300), and the plain file has no head;
what llama.cpp counts must be what the heads were built to give. Each configuration starts once
(the session's `llama` pool) and the fleets point at it, so the module costs seconds."""

import json

import pytest
import yaml

from pytest_frank.drivers.llamacpp import LlamaCppDriver
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.local.selftest_hybrid import built_acceptance

pytestmark = [pytest.mark.real, pytest.mark.filterwarnings("ignore")]

MTP = {"model": "selftest:hybrid", "alias": "frank", "spec_type": "draft-mtp"}
COLLAPSE = {**MTP, "model": "selftest:hybrid_collapse"}
PLAIN = {"model": "selftest:hybrid_plain", "alias": "frank"}
# The seeds' trap: the -mtp file named as its own draft model (draft-simple). Info level, so
# the log names each file llama.cpp loads.
TWICE = {"model": "selftest:hybrid", "alias": "frank", "draft_model": "selftest:hybrid",
         "verbosity": 3}
BAND = {"min_acceptance": 0.6, "max_acceptance": 0.95}


def _fleet(drafting_url, plain_url=None, **spec_decode):
    """`mtp` drafting, judged in the band; `plain` (the file without a head, no drafting) as
    its lossless reference where given."""
    endpoints = {"mtp": {"url": drafting_url, "engine": "llamacpp", "alias": "frank",
                         "expect": {"spec_decode": {**BAND, **spec_decode}}}}
    if plain_url:
        endpoints["mtp"]["expect"]["spec_decode"]["reference"] = "plain"
        endpoints["plain"] = {"url": plain_url, "engine": "llamacpp", "alias": "frank"}
    return yaml.safe_dump({"endpoints": endpoints})


def _rows(pytester, name="run.json"):
    rows = json.loads((pytester.path / name).read_text())["rows"]
    return {row["key"].split("::")[-1]: row for row in rows}


def test_the_models_own_head_drafts_as_built_and_is_lossless(llama, run_fleet, pytester):
    accepted, drafted = built_acceptance("hybrid")  # 72 of 93
    result = run_fleet(_fleet(llama(**MTP).url, llama(**PLAIN).url), "-m", "spec_decode",
                       "--frank-json", "run.json")
    result.assert_outcomes(passed=2)
    rows = _rows(pytester)
    band = rows["test_spec_decode[mtp]"]
    assert band["figures"]["acceptance"]["value"] == pytest.approx(accepted / drafted, abs=1e-4)
    measured, *_, cross = band["notes"]
    # llama.cpp's own counters, and the reply's timings saying the same.
    assert measured.startswith(f"acceptance {accepted / drafted:.2f} ({accepted} of {drafted} "
                               f"draft tokens accepted)"), measured
    assert measured.split("; ")[-2].endswith("[source: llamacpp:spec_decode_* counters]")
    assert cross == (f"cross-check, this reply's timings: draft_n {drafted}, draft_n_accepted "
                     f"{accepted} (acceptance {accepted / drafted:.2f})")
    lossless = rows["test_spec_decode_lossless[mtp]"]["notes"]
    said = "".join(f" step{i}" for i in range(64))  # thinking off, 64 tokens: the counting
    assert lossless == [f"the same {len(said)} characters as plain (64 tokens)"], lossless


def test_a_collapsing_head_fails_below_the_band_yet_changes_no_answer(llama, run_fleet):
    """A head wrong at every count is accepted almost never; greedy, the model still writes
    its own answer, token for token: that is what lossless means."""
    accepted, drafted = built_acceptance("hybrid_collapse")  # 3 of 300
    result = run_fleet(_fleet(llama(**COLLAPSE).url, llama(**PLAIN).url), "-m", "spec_decode")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        f"acceptance {accepted / drafted:.2f} is below min_acceptance 0.6: acceptance "
        f"{accepted / drafted:.2f} ({accepted} of {drafted} draft tokens accepted);*"
        f"[[]source: llamacpp:spec_decode_* counters]",
        "*fix: the draft does not fit the model (an MTP head or draft from another quant or "
        "finetune); lower --spec-draft-n-max or raise --spec-draft-p-min*"])
    result.stdout.fnmatch_lines(["PASSED *test_spec_decode_lossless[[]mtp[]]"])


def test_a_baseline_names_the_heads_collapse(llama, run_fleet, pytester):
    """The same endpoint, healthy and then serving the collapsing head: the regression names
    the acceptance's fall, beside the verdict's."""
    healthy = run_fleet(_fleet(llama(**MTP).url), "-m", "spec_decode", "--frank-json", "ok.json")
    healthy.assert_outcomes(passed=1)
    collapsed = run_fleet(_fleet(llama(**COLLAPSE).url), "-m", "spec_decode",
                          "--frank-baseline", "ok.json")
    collapsed.assert_outcomes(failed=1)
    built = [a / d for a, d in (built_acceptance(v) for v in ("hybrid", "hybrid_collapse"))]
    collapsed.stdout.fnmatch_lines([
        "*frank regressions since the baseline*",
        "test_spec_decode[[]mtp[]]: passed before, FAIL now: acceptance * is below "
        "min_acceptance 0.6*",
        f"test_spec_decode[[]mtp[]]: draft acceptance {built[0]:.2f} -> {built[1]:.2f} "
        f"(down {built[0] - built[1]:.2f}, tolerance 0.05)"])


def test_the_mtp_file_as_its_own_draft_model_is_caught_above_the_band(llama, run_fleet):
    """The seeds' trap: `draft_model` pointed at the -mtp file loads the whole file a second
    time as a draft that agrees with itself, instead of drafting from its head."""
    server = llama(**TWICE)
    result = run_fleet(_fleet(server.url), "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "acceptance 1.00 is above max_acceptance 0.95: acceptance 1.00 (* of * draft tokens "
        "accepted)*",
        "*fix: acceptance this close to 1 means the draft is the model itself, loaded a second "
        "time: for an -mtp GGUF drop --spec-draft-model and use --spec-type draft-mtp alone*"])
    loads = [line.split("loading ", 1)[1] for line in server.log.text().splitlines()
             if "model '" in line and " loading " in line]
    path = server.model_path
    assert loads == [f"model '{path}'", f"draft model '{path}'"], loads


def test_draft_mtp_on_a_file_without_a_head_is_diagnosed(run_fleet):
    """llama.cpp refuses to start, and its error lines say only that the MTP context failed;
    its warning says why, and the failure says what it means. The file with a head, launched
    the same way beside it, starts."""
    fleet = {"endpoints": {
        name: {"engine": "llamacpp", "alias": "frank", "launch": {**MTP, "model": model}}
        for name, model in (("nohead", "selftest:hybrid_plain"), ("head", "selftest:hybrid"))}}
    result = run_fleet(fleet, "-m", "health")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*the local server could not be launched: llama.cpp did not start for model "
        "*selftest-hybrid_plain-*.gguf on 127.0.0.1:0: *failed to create MTP context*; the "
        "model file has no MTP head (nextn_predict_layers 0), so --spec-type draft-mtp has "
        "nothing to draft from (the log: \"context type MTP requested but model doesn't "
        "contain MTP layers\")",
        "*fix: serve the model's -mtp GGUF (the file with its NextN head), or stop asking for "
        "draft-mtp (drop launch.spec_type) to serve this file without drafting",
        "head *health ok*"])


def test_a_failed_start_for_another_reason_says_nothing_of_mtp():
    driver = LlamaCppDriver()
    port_taken = ("0.00.003.694 E srv    start: couldn't bind HTTP server socket, hostname: "
                  "127.0.0.1, port: 8080\n0.00.003.700 E srv    init: exiting")
    assert driver.launch.start_failure(port_taken) is None
    assert known_fix(driver, port_taken) is None
