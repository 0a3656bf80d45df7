"""reasoning, reasoning_effort and tools against real llama.cpp servers (xllamacpp, the tiny
self-test model): healthy passes on both API shapes, and each fault made real fails with its cause."""

import json

import pytest
from fleets import one_endpoint
from proxy import Proxy
from checkout import ROOT

pytestmark = pytest.mark.real

SEEDS_MAP = {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "max": "xhigh"}
ALL = {"reasoning": True, "reasoning_effort": SEEDS_MAP, "tools": {"trials": 2}}


def run(run_fleet, server, *args, engine="llamacpp", **expect):
    return run_fleet(one_endpoint(server.url, engine, alias="frank-default-large", expect=expect),
                     "-p", "no:randomly", *args)


def test_healthy_server_passes_all_three_claims(llama, run_fleet):
    server = llama(alias="frank-default-large")
    result = run(run_fleet, server, "-m", "reasoning or reasoning_effort or tools", **ALL)
    # 3 reasoning + 5 levels + required, auto, plain, streamed; named (ignored by llama.cpp),
    # parallel and unmapped are skipped as not asked.
    result.assert_outcomes(passed=14, skipped=3)
    result.stdout.fnmatch_lines(["*ep  *reasoning ok  reasoning_effort ok  tools ok*"])


def test_healthy_server_through_its_messages_route(llama, run_fleet):
    # llama.cpp's own /v1/messages, through the anthropic client: thinking blocks, tool_use,
    # and a named tool_choice that it honours there.
    server = llama(alias="frank-default-large")
    result = run(run_fleet, server, "-m", "reasoning or reasoning_effort or tools",
                 engine="anthropic", **ALL)
    result.assert_outcomes(passed=15, skipped=2)


# reasoning_format none leaves the thinking in content: <think> tags, or gpt-oss harmony's
# analysis channel (selftest:harmony, llama.cpp's GPT-OSS handler), each named as such.
@pytest.mark.parametrize("spec, said", [
    ({"alias": "frank-default-large"}, "<think>/</think> inside content ('<think>Thinking"
                                       "</think>Hello!')"),
    ({"model": "selftest:harmony"}, "gpt-oss harmony's analysis channel inside content "
                                    "('<|channel|>analysis<|message|>Thinking<|end|>Hello!')"),
], ids=["think tags", "harmony"])
def test_reasoning_format_none_leaves_the_thinking_in_content(llama, run_fleet, spec, said):
    server = llama(**spec, reasoning_format="none")
    result = run(run_fleet, server, "-m", "reasoning", reasoning={"thinking_off": False})
    result.assert_outcomes(failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        f"*{said}: the reasoning parser is missing or wrong*",
        "*fix: start llama-server with --reasoning-format deepseek (or auto)*"])


def test_model_that_never_thinks_is_reported(llama, run_fleet):
    server = llama(alias="frank-default-large", model="selftest:no_think")
    result = run(run_fleet, server, "-m", "reasoning", reasoning=True)
    result.assert_outcomes(passed=1, failed=2)  # thinking off is fine
    # Its template names no thinking: the diagnosis says so, not "thinking is on by default".
    result.stdout.fnmatch_lines([
        "*chat answered 'Hello!' with no reasoning (`reasoning_content` / `reasoning` empty or "
        "absent): the served chat template has no thinking (/props chat_template names no "
        "thinking block, enable_thinking or reasoning_content), so this model answers without "
        "thinking here",
        "  fix: serve a thinking model with its own template*",
        "*streamed chat answered 'Hello!' with no reasoning*: the served chat template has no "
        "thinking*"])
    assert "although thinking is on by default" not in result.stdout.str()


def rows(pytester) -> dict:
    """test name -> its row in the run's --frank-json (verdict, notes, figures)."""
    import json

    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def test_budget_used_up_by_thinking_is_asked_again_larger(llama, run_fleet, pytester):
    server = llama(alias="frank-default-large")
    result = run(run_fleet, server, "-k", "test_reasoning and not off and not effort",
                 "--frank-json=run.json", reasoning={"max_tokens": 2})
    result.assert_outcomes(passed=2)
    row = rows(pytester)["test_reasoning[ep]"]
    assert row["figures"] == {"thinking_tokens": {"value": 3.0, "unit": "tokens"}}
    # 4096 tokens of context, less the prompt, is less than max_thinking_tokens
    assert row["notes"][0].startswith("thinking took 3 tokens here: clients need max_tokens "
                                      "above about 100 (max_tokens=2 ran out while thinking; "
                                      "asked again with 40")


# A model that thinks 1,000 tokens before it answers (selftest:long_think).
LONG = {"model": "selftest:long_think", "alias": "frank-long"}
BATTERY = {"reasoning": True, "reasoning_effort": SEEDS_MAP, "tools": True}


def test_long_thinker_passes_the_whole_battery_at_the_defaults(run_fleet, pytester):
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "alias": "frank-long", "launch": LONG,
                                  "expect": BATTERY}}}
    result = run_fleet(fleet, "-p", "no:randomly", "--frank-json=run.json")
    # health, alias, chat, 3 reasoning, 5 levels, required, auto, plain, streamed, none;
    # the contract's two; named, parallel and unmapped are not asked.
    result.assert_outcomes(passed=19, skipped=3)
    found = rows(pytester)
    # cut at 128 while thinking, asked again with room: the answer ended, the chat check passed
    assert found["test_chat[ep]"]["verdict"] == "pass"
    thought = found["test_reasoning[ep]"]
    assert thought["figures"]["thinking_tokens"]["value"] > 990
    # the chat check's answer showed a thousand tokens of thinking: asked with room for them
    assert thought["notes"] == [
        f"thinking took {thought['figures']['thinking_tokens']['value']:.0f} tokens here: "
        "clients need max_tokens above about 1,300 (max_tokens=512 is less than this endpoint's "
        "answers took: asked with 1300)"]
    assert found["test_tools_required[ep]"]["notes"][0].startswith("thinking took ")
    # a level is taken once the engine starts on it: a handful of tokens shows it
    assert found["test_reasoning_effort[ep-high]"]["notes"] == [
        "reasoning_effort 'high' (sent as 'xhigh'): cut at max_tokens=16 while thinking "
        "(finish_reason 'length', reasoning, no answer yet): that proves what this check asks; "
        "the answer itself is not judged here"]
    # after the chat check's first answer every check asks each of its requests once: none is
    # asked again with a larger budget (test_tools_arguments asks three different requests)
    for key, row in found.items():
        asked = [ex for ex in row["exchanges"] if ex["request"].startswith("POST")]
        if key == "test_chat[ep]":
            assert len(asked) <= 2, asked
            continue
        same = [json.dumps({k: v for k, v in ex["sent"].items() if k != "max_tokens"},
                           sort_keys=True) for ex in asked]
        assert len(same) == len(set(same)), (key, asked)
    assert found["test_tools_plain_chat[ep]"]["notes"][0].startswith(
        "plain chat without tools: cut at max_tokens=512 while thinking")


def test_long_thinker_on_a_slow_steady_server_passes_plain_and_streamed(llama, run_fleet,
                                                                        pytester):
    """The long thinker behind a proxy that paces it like a slow GPU (15 ms a token, steady):
    each answer takes longer than 4 x timeout in all, yet never stalls. Its budget at the
    default min_tokens_per_s is waited for; timeout is small only to keep the test short."""
    server = llama(**LONG)
    with Proxy(server.url, pace_s=0.015) as slow:
        result = run_fleet(one_endpoint(slow.url, alias="frank-long", timeout=3,
                                        expect={"reasoning": True}),
                           "-p", "no:randomly", "-m", "reasoning", "--frank-json=run.json")
    # plain asked again (1,000 > 512), streamed at once with room for what plain took; off
    result.assert_outcomes(passed=3)
    found = rows(pytester)
    for test in ("test_reasoning[ep]", "test_reasoning_streamed[ep]"):
        assert found[test]["figures"]["thinking_tokens"]["value"] > 990, found[test]
        longest = max(ex["elapsed_s"] for ex in found[test]["exchanges"])
        assert longest > 4 * 3, (test, longest)  # the old whole-answer wall: 4 x timeout


def test_long_thinker_through_the_messages_route(llama, run_fleet):
    server = llama(**LONG)
    result = run_fleet(one_endpoint(server.url, "anthropic", alias="frank-long",
                                    expect=BATTERY),
                       "-p", "no:randomly", "-m", "reasoning or reasoning_effort or tools")
    result.assert_outcomes(passed=15, skipped=2)  # a named tool_choice is honoured here


def test_endless_thinker_fails_once_the_larger_budget_runs_out(llama, run_fleet):
    server = llama(model="selftest:endless_think", alias="frank-long")
    fleet = one_endpoint(server.url, alias="frank-long", max_thinking_tokens=600,
                         expect={"reasoning": True})
    result = run_fleet(fleet, "-p", "no:randomly", "-k", "test_reasoning and not off")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*thinking did not end within 600 tokens: finish_reason 'length' with * tokens of "
        "reasoning and no answer; `expect.reasoning.max_tokens` (512) ran out first, then this "
        "larger budget, bounded by max_thinking_tokens",
        "*fix: lower the reasoning effort clients send, switch thinking off in the chat template "
        "where clients may (chat_template_kwargs enable_thinking: false), or serve a model that "
        "does not loop*"])


def test_endless_thinker_is_bounded_by_the_served_context(llama, run_fleet):
    server = llama(model="selftest:endless_think", alias="frank-long", ctx_size=1024)
    result = run_fleet(one_endpoint(server.url, alias="frank-long",
                                    expect={"reasoning": True}),
                       "-p", "no:randomly", "-k", "test_reasoning and not off and not streamed")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*thinking did not end within 9?? tokens: * then this larger budget, bounded by the "
        "room the served context leaves (1024 tokens, * of them the prompt)"])


def test_template_rejecting_levels_names_level_status_and_map_entry(llama, run_fleet):
    server = llama(alias="frank-default-large", model="selftest:effort_strict")
    raw = {"low": "low", "medium": "medium", "high": "high", "max": "max"}
    result = run(run_fleet, server, "-m", "reasoning_effort", "-v", reasoning_effort=raw)
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "*test_reasoning_effort?ep-high? FAILED*", "*test_reasoning_effort?ep-max? FAILED*"])
    result.stdout.fnmatch_lines([
        "*reasoning_effort 'high' (sent as 'high') answered 400: the chat template rejects it: "
        "Unexpected reasoning effort high. Supported types are xhigh, medium, and low*",
        "*fix: map it to a level the template accepts (xhigh, medium, low): `high: xhigh`*"])


def test_unmapped_levels_the_template_rejects_are_found(llama, run_fleet):
    server = llama(alias="frank-default-large", model="selftest:effort_strict")
    partial = {k: v for k, v in SEEDS_MAP.items() if k != "max"}
    result = run(run_fleet, server, "-k", "unmapped",
                 reasoning_effort={"map": partial, "unmapped": True})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the template rejects client level(s) max and the fleet's reasoning_effort map leaves "
        "them out*", "*`max: xhigh`*", "*high: rejected by the template (mapped to 'xhigh')*"])


def test_jinja_off_fails_tools_naming_the_flag(llama, run_fleet):
    server = llama(alias="frank-default-large", jinja=False)
    result = run(run_fleet, server, "-k", "required", tools=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '*tool_choice "required" answered 500: tools param requires --jinja flag',
        "*fix: start llama-server with --jinja*"])


def test_tool_call_written_as_text_is_a_leak(llama, run_fleet):
    server = llama(alias="frank-default-large", model="selftest:tool_text")
    result = run(run_fleet, server, "-m", "tools", tools=True)
    result.stdout.fnmatch_lines([
        '*tool_choice "auto": 0/1 trial(s) valid (0%, need 100%); leaked markup: the tool call '
        "was written as text in content ('<function=get_weather>*') with no structured call",
        "*fix: llama.cpp reads the tool-call format from the chat template*"])
    result.stdout.fnmatch_lines(["*plain chat without tools came back as a tool call*",
                                 "*fix: drop --grammar-file*"])
    # required: the grammar forces a real call, but the same markup sits in content beside it
    result.stdout.fnmatch_lines(["*tool markup left in content beside the structured call*"])
    # none: the same markup, written whatever tool_choice says; the arguments check's forced
    # calls carry it too
    result.assert_outcomes(failed=6, skipped=2)


def test_selftest_example_asks_and_passes_all_three(run_fleet):

    example = ROOT / "examples" / "selftest.yaml"
    result = run_fleet(example.read_text(), "-m", "reasoning or reasoning_effort or tools")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes["passed"] >= 12, outcomes
    result.stdout.fnmatch_lines(["frank-selftest *reasoning ok  reasoning_effort ok  tools ok*"])
