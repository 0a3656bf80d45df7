"""reasoning and reasoning_effort (and every claim on healthy shapes) against emulated vLLM,
SGLang and Anthropic proxies: healthy shapes pass, each field fault fails with its diagnosis."""

import pytest

from emulator import (Emulator, chat_json, error_json, messages_json, serve_chat,
                      serve_messages)
from fleets import one_endpoint
from healthy_engines import ALL, KEY, healthy_chat, healthy_messages, run

pytestmark = pytest.mark.emulated


@pytest.mark.parametrize("engine,field", [("vllm", "reasoning"), ("sglang", "reasoning_content"),
                                         ("openai", "reasoning_content")])
def test_healthy_openai_shapes_pass_everything(engine, field, run_fleet):
    with Emulator(engine, models=["model"], api_key=KEY) as em:
        serve_chat(em, healthy_chat(field))
        result = run(run_fleet, em, engine, "-m", "reasoning or reasoning_effort or tools", **ALL)
    # tools: 7 (the arguments on the wire too), none and parallel under auto; unmapped probing
    # not asked
    result.assert_outcomes(passed=3 + 5 + 9, skipped=1)
    result.stdout.fnmatch_lines(["*reasoning ok  reasoning_effort ok  tools ok*"])


def test_healthy_anthropic_proxy_passes_everything(run_fleet):
    # Anthropic blocks and SSE events (ping included), through the anthropic client.
    with Emulator("anthropic", models=["model"], api_key=KEY) as em:
        serve_messages(em, healthy_messages)
        result = run(run_fleet, em, "anthropic", "-m", "reasoning or reasoning_effort or tools",
                     **ALL)
        sent = [r.body for r in em.requests if r.path == "/v1/messages"]
    # tools: none, parallel under auto and the arguments on the wire too
    result.assert_outcomes(passed=17, skipped=1)
    assert {"type": "disabled"} in [b.get("thinking") for b in sent]
    asked = [b for b in sent if (b.get("thinking") or {}).get("type") == "enabled"]
    assert len(asked) == 2 and asked[0]["thinking"]["budget_tokens"] < asked[0]["max_tokens"]
    assert {"type": "tool", "name": "get_time"} in [b.get("tool_choice") for b in sent]
    assert any(b.get("output_config") == {"effort": "xhigh"} for b in sent)


def test_older_vllm_reasoning_content_is_read_too(run_fleet):
    # vLLM before v0.16 sent `reasoning_content`; the driver falls back to it.
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, healthy_chat("reasoning_content"))
        result = run(run_fleet, em, "vllm", "-m", "reasoning", reasoning=True)
    result.assert_outcomes(passed=3)


def test_reasoning_in_another_field_than_fleet_says(run_fleet):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, healthy_chat("reasoning_content"))
        result = run(run_fleet, em, "vllm", "-k", "test_reasoning and not off and not effort",
                     reasoning={"field": "reasoning"})
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*reasoning arrived in `reasoning_content`, not in `reasoning` "
                                 "where fleet.yaml expects it*"])


def test_thinking_that_never_ends_is_asked_once_more_then_fails(run_fleet):
    with Emulator("sglang", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json("", finish="length", reasoning_content="Hmm " * 50,
                                           tokens=b["max_tokens"]))
        fleet = one_endpoint(em.url, "sglang", alias="model", max_thinking_tokens=2000,
                             expect={"reasoning": {"max_tokens": 300}})
        result = run_fleet(fleet, "-p", "no:randomly", "-k",
                           "test_reasoning and not off and not effort and not streamed")
        budgets = [r.body["max_tokens"] for r in em.requests if r.path.endswith("/completions")]
    assert budgets == [300, 2000]  # no context reported: max_thinking_tokens bounds it
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*thinking did not end within 2000 tokens: finish_reason "
                                 "'length' with * of reasoning and no answer; `expect.reasoning."
                                 "max_tokens` (300) ran out first, then this larger budget, "
                                 "bounded by max_thinking_tokens", "*fix: lower the reasoning*"])


def test_length_with_neither_answer_nor_reasoning_names_the_budget(run_fleet):
    with Emulator("sglang", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json("", finish="length", tokens=b["max_tokens"]))
        result = run(run_fleet, em, "sglang", "-k", "test_reasoning and not off and not effort "
                     "and not streamed", reasoning={"max_tokens": 300})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*finish_reason 'length' with empty content: thinking used the "
                                 "whole budget of max_tokens=300 before any answer*",
                                 "*fix: raise it*"])


def test_reasoning_present_with_thinking_off(run_fleet):
    # A template that ignores enable_thinking: false still thinks.
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json("Hello!", reasoning="Thinking"))
        result = run(run_fleet, em, "vllm", "-k", "reasoning_off", reasoning=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*reasoning present although thinking was switched off "
                                 "(enable_thinking: false)*", "*fix: the chat template ignores*"])


def test_proxy_that_drops_thinking_although_asked(run_fleet):
    with Emulator("anthropic", models=["model"]) as em:
        serve_messages(em, lambda body: messages_json("Hello!"))
        result = run(run_fleet, em, "anthropic", "-k", "test_reasoning and not streamed and not "
                     "off and not effort", reasoning=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["chat answered 'Hello!' with no reasoning (`thinking` empty or "
                                 "absent) although the request asked for thinking (thinking.type "
                                 "enabled): the proxy dropped the reasoning"])


def test_proxy_stream_without_thinking_blocks(run_fleet):
    def answer(body):
        return messages_json("Hello!", thinking=None if body.get("stream") else "Thinking")
    with Emulator("anthropic", models=["model"]) as em:
        serve_messages(em, answer)
        result = run(run_fleet, em, "anthropic", "-k", "reasoning_streamed", reasoning=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*streamed chat answered 'Hello!' with no reasoning (`thinking`*"])


def test_vllm_template_400_names_level_and_map_entry(run_fleet):
    def answer(body):
        level = body.get("reasoning_effort")
        if level in ("high", "max"):
            return error_json(400, f"Unexpected reasoning effort {level}. Supported types are "
                                   f"xhigh (default), medium, and low")
        return chat_json("Hello!", reasoning="Thinking")
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, answer)
        result = run(run_fleet, em, "vllm", "-m", "reasoning_effort",
                     reasoning_effort={"map": {"low": "low", "high": "high"}, "unmapped": True})
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*reasoning_effort 'high' (sent as 'high') answered 400: the chat template rejects it: "
        "Unexpected reasoning effort high. Supported types are xhigh (default), medium, and low",
        "*`high: xhigh`*"])
    result.stdout.fnmatch_lines(["*rejects client level(s) max and the fleet's reasoning_effort "
                                 "map leaves them out*", "*`max: xhigh`*"])


@pytest.mark.parametrize("expect,bad", [
    ({"tools": {"trial": 3}}, "unknown key 'trial'"),
    ({"tools": {"min_pass_rate": 2}}, "min_pass_rate"),
    ({"reasoning": {"feild": "x"}}, "unknown key 'feild'"),
    ({"reasoning_effort": {"hihg": "xhigh"}}, "reasoning_effort"),
])
def test_option_typos_are_usage_errors(expect, bad, run_fleet):
    result = run_fleet(one_endpoint("http://127.0.0.1:9", "vllm", expect=expect))
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{bad}*"])


def test_runaway_chat_answer_is_cut_with_one_line(run_fleet):
    # A hostile or broken OpenAI-shape server answering megabytes of junk: the client stops
    # reading at the cap and the check says so instead of parsing forever.
    from emulator import Reply

    with Emulator("openai", models=["model"]) as em:
        em.route("POST", "/v1/chat/completions", lambda r: Reply(200, "x" * (6 * 1024 * 1024)))
        result = run_fleet(one_endpoint(em.url, "openai", expect={"reasoning": True}),
                           "-m", "reasoning")
    # one root cause, failed once: the other reasoning checks are blocked behind it
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*the answer ran past 4194304 bytes*"])


# -- budgets learned from the endpoint's answers; effort levels asked for a handful of tokens ----
def thinker(lengths):
    """A model that thinks `lengths[prompt]` tokens (else 600) before a two-token answer: cut at a
    smaller budget with the reasoning so far and no content, as engines cut."""
    def reply(body):
        need = lengths.get(body["messages"][-1]["content"], 600)
        if body["max_tokens"] < need:
            return chat_json("", finish="length", reasoning_content="Hmm " * 20,
                             tokens=body["max_tokens"])
        return chat_json("Hi!", reasoning_content="Hmm " * 20, tokens=need)
    return reply


def test_a_model_thinking_longer_than_measured_passes_on_the_second_ask(run_fleet):
    # The chat check's answer thinks 150 tokens: reasoning then asks room for that (200) at
    # once, not its own 100; this prompt thinks 600, so the second ask still finds the answer.
    from pytest_frank.claims.chat import PROMPT

    with Emulator("sglang", models=["model"]) as em:
        serve_chat(em, thinker({PROMPT: 150}))
        fleet = one_endpoint(em.url, "sglang", alias="model", max_thinking_tokens=2000,
                             expect={"reasoning": {"max_tokens": 100}})
        result = run_fleet(fleet, "-p", "no:randomly", "-k",
                           "test_chat or (test_reasoning and not off and not effort and not "
                           "streamed)")
        budgets = [r.body["max_tokens"] for r in em.requests if r.path.endswith("/completions")]
    assert budgets == [128, 2000, 200, 2000]
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["ep  cost: 4 generations, 1078 tokens (1.44x the plan's minimum "
                                 "of 750), * s to verdict"])


@pytest.mark.parametrize("shows, budgets, outcome", [
    ("reasoning", [16], {"passed": 1, "skipped": 1}),  # cut while thinking: the level was taken
    ("nothing", [16, 512], {"failed": 1, "skipped": 1}),  # no sign: asked and judged as before
])
def test_effort_levels_are_asked_for_a_handful_of_tokens(run_fleet, shows, budgets, outcome):
    extra = {"reasoning_content": "Hmm"} if shows == "reasoning" else {}
    with Emulator("sglang", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json("", finish="length", tokens=b["max_tokens"], **extra))
        fleet = one_endpoint(em.url, "sglang", alias="model",
                             expect={"reasoning_effort": {"high": "high"}})
        result = run_fleet(fleet, "-p", "no:randomly", "-k", "test_reasoning_effort")
        asked = [r.body["max_tokens"] for r in em.requests if r.path.endswith("/completions")]
    assert asked == budgets
    result.assert_outcomes(**outcome)
    if shows == "nothing":
        result.stdout.fnmatch_lines(["*finish_reason 'length' with empty content: thinking used "
                                     "the whole budget of max_tokens=512 before any answer*"])
