"""tools against emulated vLLM, SGLang and Anthropic proxies: each way a tool call breaks a
strict client fails with its typed reason and the usual fix."""

import pytest

from emulator import (Emulator, chat_json, messages_json, serve_chat,
                      serve_messages, tool_call)
from healthy_engines import ARGS, healthy_chat, run

pytestmark = pytest.mark.emulated


BAD_CALLS = [
    (tool_call("get_weather", {"city": "Paris"}), "missing required: get_weather lacks 'days'"),
    (tool_call("get_weather", {"city": "Paris", "days": "1"}),
     'wrong type: get_weather.days: expected an integer, got string "1"'),
    (tool_call("get_weather", {"city": "Paris", "days": 1, "units": "C"}),
     "unexpected parameter: get_weather got 'units'"),
    (tool_call("get_weather", '{"city": "Paris", "days": 1'), "not JSON: get_weather arguments"),
    (tool_call("weather", {"city": "Paris"}), "wrong name: 'weather' is not an offered tool"),
    (tool_call("get_weather", ARGS["get_weather"], call_id=None), "no id: the get_weather call"),
]


def test_calls_a_strict_client_cannot_use(run_fleet):
    # One bad call per trial; each trial's typed reason lands in the evidence.
    sent = iter(BAD_CALLS)
    with Emulator("sglang", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json(None, finish="tool_calls", tool_calls=[next(sent)[0]]))
        result = run(run_fleet, em, "sglang", "-k", "tools_required",
                     tools={"trials": len(BAD_CALLS)})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f'*tool_choice "required": 0/6 trial(s) valid (0%, need 100%); '
                                 f"{BAD_CALLS[0][1]}*"])
    result.stdout.fnmatch_lines([f"*trial {i}: {reason}*"
                                 for i, (_, reason) in enumerate(BAD_CALLS, 1)])


def test_anthropic_tool_use_failing_the_schema(run_fleet):
    bad = messages_json("", tool_uses=[("get_weather", {"city": 7, "days": 1})], stop="tool_use")
    with Emulator("anthropic", models=["model"]) as em:
        serve_messages(em, lambda b: bad)
        result = run(run_fleet, em, "anthropic", "-k", "tools_required or tools_streamed",
                     tools=True)
    result.assert_outcomes(failed=2)
    # a number where the schema says string reads as a conversion by the value's look; which
    # place made it (the server's parser, a gateway) the evidence cannot tell: a proxy's shape
    # states no engine facts to hold the reply to, so it says what was seen
    result.stdout.fnmatch_lines(["*number for a string: get_weather.city is the number 7, where "
                                 "the schema types it a string*; cause unknown (seen: number for "
                                 "a string*; asked again: number for a string*no engine facts to "
                                 "compare with the reply)",
                                 "*fix: the evidence here does not tell where the fault lies*"])


def test_parallel_calls_truncated_to_one(run_fleet):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, lambda b: healthy_chat("reasoning")({**b, "parallel_tool_calls": False}))
        result = run(run_fleet, em, "vllm", "-k", "tools_parallel and not auto",
                     tools={"parallel": True})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*parallel tool calls: 0/1 trial(s) valid (0%, need 100%); "
                                 "parallel calls truncated: 1 call(s) where 2 were asked for*",
                                 "*fix: the server cut parallel calls to one*"])


def test_markup_in_content_without_a_parser(run_fleet):
    # vLLM with a wrong --tool-call-parser: the call stays in content, tool_calls empty.
    leak = chat_json('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                     "</tool_call>")
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, lambda b: leak if b.get("tools") else chat_json("Hello!"))
        result = run(run_fleet, em, "vllm", "-k", "tools_auto", tools=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*leaked markup: the tool call was written as text in content*",
                                 "*fix: start vLLM with --enable-auto-tool-choice "
                                 "--tool-call-parser*"])


def test_named_choice_ignored(run_fleet):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, lambda b: healthy_chat("reasoning")({**b, "tool_choice": "required"}))
        result = run(run_fleet, em, "vllm", "-k", "tools_named", tools=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*wrong name: called 'get_weather' but tool_choice named "
                                 "'get_time'*"])


@pytest.mark.parametrize("rate,outcome", [(0.5, "passed"), (0.8, "failed")])
def test_trials_report_the_rate(rate, outcome, run_fleet):
    seen = []

    def flaky(body):  # every other call misses a required argument
        seen.append(1)
        args = ARGS["get_weather"] if len(seen) % 2 else {"city": "Paris"}
        return chat_json(None, finish="tool_calls", tool_calls=[tool_call("get_weather", args)])
    with Emulator("sglang", models=["model"]) as em:
        serve_chat(em, flaky)
        result = run(run_fleet, em, "sglang", "-k", "tools_required", "-rA",
                     tools={"trials": 4, "min_pass_rate": rate})
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(['*tool_choice "required": 2/4 trial(s) valid (50%, need '
                                     "80%); missing required: get_weather lacks 'days'; "
                                     "cause: intermittent (the same request asked again came "
                                     "back right (called get_weather*"])


def test_auto_without_a_call_passes_unless_the_fleet_requires_it(run_fleet):
    with Emulator("vllm", models=["model"]) as em:
        serve_chat(em, lambda b: chat_json("Hello!", reasoning="Thinking"))
        lenient = run(run_fleet, em, "vllm", "-k", "tools_auto", tools=True)
        strict = run(run_fleet, em, "vllm", "-k", "tools_auto", tools={"auto_must_call": True})
    lenient.assert_outcomes(passed=1)
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*no tool call: answered 'Hello!'*"])


@pytest.mark.parametrize("engine,reply,fix", [
    ("llamacpp", chat_json('<tool_call>{"name": "get_weather"}</tool_call>'), "--grammar-file"),
    ("vllm", chat_json(None, finish="tool_calls", tool_calls=[tool_call("get_weather", ARGS[
        "get_weather"])]), "structured-output default"),
])
def test_plain_chat_forced_into_a_tool_call(engine, reply, fix, run_fleet):
    with Emulator(engine, models=["model"]) as em:
        serve_chat(em, lambda b: reply)
        result = run(run_fleet, em, engine, "-k", "tools_plain", tools=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*plain chat without tools came back as a tool call*",
                                 f"*fix: *{fix}*"])
