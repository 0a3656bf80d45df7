"""fingerprint against real llama.cpp (xllamacpp), relaunched for every run: each run's fleet
has a `launch:` block, so a baseline from one launch is compared with another launch.
`selftest:flat` is the subject: its logprobs are not peaked, so a drift shows. A change of
rope frequency base or K cache type needs a model that reads positions: `selftest:positional`
(its attention goes through RoPE, its heads are 32 wide, so a quantized K cache loads)."""

import json

import pytest
import yaml

pytestmark = pytest.mark.real

FLAT = {"model": "selftest:flat", "alias": "frank", "ctx_size": 2048, "threads": 1}
POSITIONAL = {**FLAT, "model": "selftest:positional"}
# The self-test template with its thinking-off switch cut out: an edit that keeps every form.
NO_SWITCH = "{%- if enable_thinking is defined and enable_thinking is false %}"


# A machine's load moves the battery's time to verdict (SmolLM2's relaunch: 9.9 s, then 17.4 s on
# a busier machine), a rise in cost that is not the fingerprint's: its tolerance is wide here.
LOAD = {"tokens_rise": 4.0}


def _fleet(base=FLAT, name="flat", **launch):
    return yaml.safe_dump({"endpoints": {name: {
        "launch": {**base, **launch}, "alias": "frank", "expect": {"fingerprint": True},
        "regression": LOAD}}})


@pytest.fixture
def baseline(run_fleet, pytester):
    result = run_fleet(_fleet(), "-m", "fingerprint", "--frank-json", "before.json")
    result.assert_outcomes(passed=1)
    return pytester.path / "before.json"


def _regressions(result):
    text = result.stdout.str()
    return text.split("frank regressions since the baseline")[1] if \
        "frank regressions since the baseline" in text else ""


def test_records_without_a_baseline_and_passes_with_a_note(run_fleet, pytester):
    result = run_fleet(_fleet(), "-m", "fingerprint", "--frank-json", "run.json")
    result.assert_outcomes(passed=1)
    run = json.loads((pytester.path / "run.json").read_text())
    row = next(r for r in run["rows"] if r["key"].endswith("test_fingerprint[flat]"))
    recorded = json.loads(next(a["data"] for a in row["attachments"]
                               if a["name"] == "fingerprint"))
    assert set(recorded) == {"short", "multi-turn", "long"}
    assert recorded["short"]["tokens"][:2] == ["Hello", "!"]  # thinking off: no <think>
    assert all(lp < -0.1 for lp in recorded["short"]["logprobs"][:2])  # flat: not peaked
    assert any("--frank-baseline PREV.json compares them" in n for n in row["notes"])
    # The long prompt fills half the served context, measured in its tokens.
    long = next(n for n in row["notes"] if n.startswith("the long prompt"))
    tokens = int(long.split(", ")[1].split()[0])
    assert 0.45 * 2048 <= tokens <= 0.55 * 2048, long


def test_relaunches_agree(run_fleet, baseline):
    for _ in range(3):
        result = run_fleet(_fleet(), "-m", "fingerprint", "--frank-baseline", str(baseline),
                           "--frank-fail-on-regression")
        result.assert_outcomes(passed=1)
        assert result.ret == 0 and not _regressions(result), result.stdout.str()[-2000:]


def test_another_gguf_under_the_alias_drifts(run_fleet, baseline, pytester):
    """`selftest` says what `selftest:flat` says, greedy, with peaked logprobs: the same tokens,
    another model; only the drift shows it."""
    result = run_fleet(_fleet(model="selftest"), "-m", "fingerprint", "--frank-baseline",
                       str(baseline), "--frank-report", "run.md", "--frank-fail-on-regression")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "test_fingerprint[[]flat[]]: fingerprint 'short': logprob drift 0.5* on the common "
        "prefix, most at token 1 ('!'): before -0.700, now 0.000 (tolerance 0.05)"])
    md = (pytester.path / "run.md").read_text()
    assert "fingerprint 'multi-turn': logprob drift" in md and "fingerprint 'long'" in md


def test_a_template_edit_diverges_at_its_position(run_fleet, baseline, pytester, llama):
    """The thinking-off switch cut from the template: the answer now opens with a think block;
    reported at token 0, before and now."""
    import httpx

    template = httpx.get(f"{llama(**FLAT).url}/props").json()["chat_template"]
    assert NO_SWITCH in template
    edited = pytester.path / "edited.jinja"
    edited.write_text(template.replace(NO_SWITCH, "{%- if false %}"))
    result = run_fleet(_fleet(chat_template_file=str(edited)), "-m", "fingerprint",
                       "--frank-baseline", str(baseline), "--frank-report", "run.md",
                       "--html", "page.html", "--self-contained-html")
    assert result.ret == 0  # reported; only --frank-fail-on-regression fails the run
    result.stdout.fnmatch_lines([
        "test_fingerprint[[]flat[]]: fingerprint 'short' diverges at token 0 of *: before "
        "'Hello!', now '<think>*' (agreement 0.00, tolerance 1)"])
    assert "diverges at token 0" in (pytester.path / "run.md").read_text()
    page = (pytester.path / "page.html").read_text()
    assert "Regressions since the baseline" in page and "diverges at token 0 of" in page


def test_replicas_agree_and_one_serving_another_model_does_not(run_fleet):
    """Three launched servers in one run: `b` is a replica of `a` and agrees; `c` claims to be
    one but serves `selftest` (peaked logprobs) where `a` serves `selftest:flat`."""
    entry = {"alias": "frank", "expect": {"fingerprint": True}}
    fleet = {"endpoints": {
        "a": {**entry, "launch": FLAT},
        "b": {**entry, "launch": FLAT, "same_as": "a"},
        "c": {**entry, "launch": {**FLAT, "model": "selftest"}, "same_as": "a"}}}
    result = run_fleet(yaml.safe_dump(fleet), "-m", "fingerprint", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*test_fingerprint[[]a[]] PASSED*", "*test_fingerprint[[]b[]] PASSED*",
        "*test_fingerprint[[]c[]] FAILED*",
        "*not the same model as a: 'short': logprob drift 0.5* on the common prefix, most at "
        "token 1 ('!'): before -0.700, now 0.000 (before: a, now: this replica; tolerance "
        "0.05)*",
        "*a replica serves another model, template, cache type or build than a*"])


def test_a_replica_of_no_endpoint_is_named(run_fleet):
    fleet = {"endpoints": {"b": {"alias": "frank", "expect": {"fingerprint": True},
                                 "launch": FLAT, "same_as": "gone"}}}
    result = run_fleet(yaml.safe_dump(fleet), "-m", "fingerprint")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*same_as names 'gone', which is no endpoint of this fleet*"])


def test_runs_against_one_launch_agree(run_fleet, llama):
    """One server, asked again and again (its prefix cache warm from the runs before): the same
    tokens and logprobs each time."""
    from fleets import one_endpoint

    server = llama(**FLAT)
    fleet = one_endpoint(server.url, alias="frank", expect={"fingerprint": True})
    first = run_fleet(fleet, "-m", "fingerprint", "--frank-json", "first.json")
    first.assert_outcomes(passed=1)
    for _ in range(3):
        result = run_fleet(fleet, "-m", "fingerprint", "--frank-baseline", "first.json")
        result.assert_outcomes(passed=1)
        assert not _regressions(result), result.stdout.str()[-2000:]


@pytest.fixture
def positional_baseline(run_fleet, pytester):
    result = run_fleet(_fleet(POSITIONAL, "pos"), "-m", "fingerprint", "--frank-json",
                       "before.json")
    result.assert_outcomes(passed=1)
    return pytester.path / "before.json"


def test_relaunches_of_the_positional_model_agree(run_fleet, positional_baseline):
    for _ in range(2):
        result = run_fleet(_fleet(POSITIONAL, "pos"), "-m", "fingerprint", "--frank-baseline",
                           str(positional_baseline), "--frank-fail-on-regression")
        result.assert_outcomes(passed=1)
        assert result.ret == 0 and not _regressions(result), result.stdout.str()[-2000:]


# Greedy keeps its words ("Hello!"); the logprobs move, most on the long prompt: rope base 1000
# by 0.32, a q4_0 K cache by 0.34, q8_0 by 0.10 (bench/fingerprint.py measures the margins).
@pytest.mark.parametrize("change", [{"rope_freq_base": 1000.0}, {"cache_type_k": "q4_0"},
                                    {"cache_type_k": "q8_0"}],
                         ids=["rope_freq_base", "cache_type_k_q4_0", "cache_type_k_q8_0"])
def test_a_rope_base_or_a_quantized_k_cache_drifts(run_fleet, positional_baseline, pytester,
                                                   change):
    result = run_fleet(_fleet(POSITIONAL, "pos", **change), "-m", "fingerprint",
                       "--frank-baseline", str(positional_baseline), "--frank-report", "run.md",
                       "--frank-fail-on-regression")
    assert result.ret == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines([
        "test_fingerprint[[]pos[]]: fingerprint 'long': logprob drift 0.* on the common prefix, "
        "most at token ? ('*'): before -0.*, now -0.* (tolerance 0.05)"])
    assert "fingerprint 'long': logprob drift" in (pytester.path / "run.md").read_text()


def test_an_unknown_cache_type_is_named_before_anything_starts():
    from pytest_frank.local.launch import LaunchError, launch

    pytest.importorskip("xllamacpp")
    with pytest.raises(LaunchError, match="cache_type_k 'q5_9' is not one of"):
        launch({**POSITIONAL, "cache_type_k": "q5_9"})


# -- SmolLM2-135M-Instruct, a real trained model (tests/support/real_models.py) -------------------------
# Slots of 1,024 tokens keep its long prompt near 500 tokens: quick on a shared CPU. `timeout`
# is generous for the same reason: a loaded machine evaluates such a prompt in tens of seconds.
SMOL = {"alias": "frank", "ctx_size": 1024, "threads": 2}
PATIENT = {"alias": "frank", "engine": "llamacpp", "timeout": 600,
           "expect": {"fingerprint": True}, "regression": LOAD}


def _logprobs(server, extra, words=300):
    import httpx

    from pytest_frank.claims.fingerprint import long_prompt

    body = {"model": "frank", "max_tokens": 4, "temperature": 0, "logprobs": True,
            "top_logprobs": 1, "messages": [{"role": "user", "content": long_prompt(words)}],
            **extra}
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=600).json()
    return ([t["logprob"] for t in answer["choices"][0]["logprobs"]["content"]],
            answer["timings"]["cache_n"])


def test_smollm2_a_reused_prefix_moves_logprobs_and_the_uncached_repeat_does_not(smollm2):
    """llama.cpp evaluates only the part of a prompt its slot has not cached, in other batches:
    the same greedy request then gets other logprobs. The driver's uncached request
    (`cache_prompt: false`) is computed whole each time: bit-identical."""
    from pytest_frank.drivers import driver_for

    server = smollm2(**SMOL)
    uncached = driver_for("llamacpp").uncached()["extra_body"]
    first, cached = _logprobs(server, uncached)
    again, _ = _logprobs(server, uncached)
    assert cached == 0 and first == again
    reused, cached = _logprobs(server, {"cache_prompt": True})  # the slot holds that prompt
    assert cached > 300 and reused != first
    assert max(abs(a - b) for a, b in zip(first, reused)) > 1e-3, (first, reused)


def test_smollm2_replicas_at_one_and_two_slots_and_a_drafting_twin_agree(
        run_fleet, pytester, smollm2, smollm2_path):
    """Replicas ask their original's long prompt, not one sized to their own slot: one slot
    of 1,024 tokens and a drafting server agree with two slots of 512. The drafting twin's
    tokens taken from its draft come with logprob 0.0 and no alternatives: not judged for
    drift; where its batched verification breaks a near tie otherwise, that is no change."""
    two = smollm2(**SMOL, parallel=2)
    one = smollm2(**SMOL)
    drafting = smollm2(**SMOL, draft_model=str(smollm2_path))
    fleet = {"endpoints": {"two": {**PATIENT, "url": two.url},
                           "one": {**PATIENT, "url": one.url, "same_as": "two"},
                           "drafting": {**PATIENT, "url": drafting.url, "same_as": "two"}}}
    result = run_fleet(fleet, "-m", "fingerprint", "--frank-json", "run.json")
    result.assert_outcomes(passed=3)
    rows = {r["endpoint"]: r for r in json.loads((pytester.path / "run.json").read_text())[
        "rows"]}
    for name in ("one", "drafting"):
        notes = rows[name]["notes"]
        assert any(n.startswith("the long prompt: ") and n.endswith("(two's, its original)")
                   for n in notes), notes
        same = next(n for n in notes if n.startswith("the same answers as two"))
        assert "'short' agreement 1.00" in same and "(tolerance: agreement at least 1, drift " \
            "at most 0.05)" in same, same
    same = next(n for n in rows["one"]["notes"] if n.startswith("the same answers as two"))
    assert all(f"'{p}' agreement 1.00, drift 0.0000" in same
               for p in ("short", "multi-turn", "long")), same
    assert any("not judged for drift" in n for n in rows["drafting"]["notes"])


def test_smollm2_a_replica_whose_slot_cannot_hold_the_original_prompt_says_so(run_fleet,
                                                                             smollm2):
    two, one = smollm2(**SMOL, parallel=2), smollm2(**SMOL)
    fleet = {"endpoints": {"one": {**PATIENT, "url": one.url},
                           "two": {**PATIENT, "url": two.url, "same_as": "one"}}}
    result = run_fleet(fleet, "-m", "fingerprint", "-v")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*test_fingerprint[[]two[]]*the long prompt is one's, its original (* tokens), and this "
        "server's slot of 512 tokens no longer holds it with the 32 tokens answered: not sent*"])


def test_smollm2_relaunch_agrees_with_its_baseline_and_a_template_edit_is_caught(
        run_fleet, pytester, smollm2, smollm2_path):
    """A baseline run, then a relaunch: the same prompts (the baseline's long one), the same
    tokens, its figures noted. The same server at two slots cannot hold that prompt: said, not
    a regression. A template with another default system message: 'short' diverges."""
    import httpx

    launch = {**SMOL, "model": str(smollm2_path)}
    fleet = {"endpoints": {"smol": {**PATIENT, "launch": launch}}}
    run_fleet(fleet, "-m", "fingerprint", "--frank-json", "before.json").assert_outcomes(
        passed=1)
    again = run_fleet(fleet, "-m", "fingerprint", "--frank-baseline", "before.json",
                      "--frank-fail-on-regression", "--frank-json", "again.json")
    again.assert_outcomes(passed=1)
    assert again.ret == 0 and not _regressions(again), again.stdout.str()[-3000:]
    notes = json.loads((pytester.path / "again.json").read_text())["rows"][0]["notes"]
    assert any(n.endswith("(the baseline's)") for n in notes), notes
    figures = next(n for n in notes if n.startswith("against the baseline: "))
    for prompt in ("short", "multi-turn", "long"):
        assert f"'{prompt}' agreement 1.00, drift 0.0000" in figures, figures

    two = smollm2(**SMOL, parallel=2)
    narrow = run_fleet({"endpoints": {"smol": {**PATIENT, "url": two.url}}}, "-m",
                       "fingerprint", "--frank-baseline", "before.json",
                       "--frank-fail-on-regression")
    narrow.assert_outcomes(skipped=1)
    assert narrow.ret == 0 and not _regressions(narrow)
    narrow.stdout.fnmatch_lines(["*the long prompt is the baseline's (* tokens), and this "
                                 "server's slot of 512 tokens no longer holds it*"])

    template = httpx.get(f"{smollm2(**SMOL).url}/props").json()["chat_template"]
    assert SMOL_SYSTEM in template
    edited = pytester.path / "edited.jinja"
    edited.write_text(template.replace(SMOL_SYSTEM, "You are a pirate."))
    fleet["endpoints"]["smol"]["launch"] = {**launch, "chat_template_file": str(edited)}
    caught = run_fleet(fleet, "-m", "fingerprint", "--frank-baseline", "before.json",
                       "--frank-fail-on-regression")
    assert caught.ret == 1, caught.stdout.str()[-3000:]
    caught.stdout.fnmatch_lines(["test_fingerprint[[]smol[]]: fingerprint 'short' diverges "
                                 "at token 0 of *: before *, now * (agreement 0.00, "
                                 "tolerance 1)"])
    assert "fingerprint 'multi-turn'" not in _regressions(caught)  # it has its own system


SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def test_replicas_of_each_other_are_named_before_anything_is_asked(run_fleet, llama):
    entry = {"url": llama(**FLAT).url, "engine": "llamacpp", "alias": "frank",
             "expect": {"fingerprint": True}}
    fleet = {"endpoints": {"a": {**entry, "same_as": "b"}, "b": {**entry, "same_as": "a"}}}
    result = run_fleet(fleet, "-m", "fingerprint")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*same_as goes round in a circle: a -> b -> a*"])
