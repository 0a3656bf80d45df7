"""selftest:flat served by a real llama.cpp: the properties that make it an honest subject for
the battery. At the server's default sampling (temperature 0.8, no seed) its answers vary and
about a third end after one word; at temperature 0 with a seed it answers the same every time;
its replies keep the shapes a healthy reasoning and tool-calling model has.

Requests that must vary send a `seed` but no temperature: the server's own sampling still decides
the distribution, and a seed makes each sample reproducible, so these tests cannot flake."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

pytest.importorskip("xllamacpp")

from pytest_frank.claims.tools import TOOLS  # noqa: E402

pytestmark = pytest.mark.real

SEEDS = range(30)
SAY_HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]
WEATHER = [{"role": "user", "content": "What is the weather in Paris tomorrow?"}]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def flat(llama):
    return llama(model="selftest:flat", alias="flat")


def chat(server, **body) -> dict:
    body.setdefault("messages", SAY_HELLO)
    body.setdefault("max_tokens", 256)
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]


def answer(choice: dict) -> tuple[str, str, str]:
    msg = choice["message"]
    return msg.get("reasoning_content") or "", msg.get("content") or "", choice["finish_reason"]


def calls(choice: dict) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in choice["message"].get("tool_calls") or []]


def test_the_server_default_is_temperature_0_8(flat):
    params = httpx.get(f"{flat.url}/props").json()["default_generation_settings"]["params"]
    assert params["temperature"] == pytest.approx(0.8)


def test_default_sampling_varies_between_requests(flat):
    answers = [answer(chat(flat, seed=seed)) for seed in SEEDS]
    assert len({content for _, content, _ in answers}) >= 4, answers
    assert len({reasoning for reasoning, _, _ in answers}) >= 2, answers


def test_a_seed_reproduces_a_sample(flat):
    assert answer(chat(flat, seed=7)) == answer(chat(flat, seed=7))


def test_greedy_is_deterministic_and_writes_the_default_answer(flat):
    replies = {answer(chat(flat, temperature=0, seed=42)) for _ in range(4)}
    assert replies == {("Thinking", "Hello!", "stop")}


def test_some_answers_end_after_one_word(flat):
    contents = [answer(chat(flat, seed=seed))[1] for seed in SEEDS]
    brief = [c for c in contents if c in ("Hello", "Hi")]
    longer = [c for c in contents if len(c.split()) > 2]
    assert 3 <= len(brief) <= 20, contents
    assert longer, contents


def test_every_sampled_answer_is_healthy(flat):
    # Thinking is on and answered every time; no tag leaks; the turn ends by itself.
    for seed in SEEDS:
        reasoning, content, finish = answer(chat(flat, seed=seed))
        assert reasoning.strip() and content.strip() and finish == "stop", (seed, reasoning, content)
        assert "<think>" not in content and "</think>" not in content and "<tool_call>" not in content


def test_thinking_off_answers_without_reasoning(flat):
    for seed in range(8):
        reasoning, content, finish = answer(chat(
            flat, seed=seed, chat_template_kwargs={"enable_thinking": False}))
        assert not reasoning and content.startswith(("Hello", "Hi")) and finish == "stop"


def test_required_tool_calls_vary_but_always_validate(flat):
    seen = []
    for seed in SEEDS:
        choice = chat(flat, seed=seed, messages=WEATHER, tools=TOOLS, tool_choice="required")
        assert choice["finish_reason"] == "tool_calls"
        (call,) = calls(choice)
        jsonschema.validate(call[1], SCHEMAS[call[0]])
        seen.append(call)
    names = {name for name, _ in seen}
    assert names == {"get_weather", "get_time"}, seen  # mostly the tool the prompt names
    assert sum(name == "get_weather" for name, _ in seen) > len(seen) // 2, seen
    assert len({json.dumps(args, sort_keys=True) for _, args in seen}) >= 3, seen


def test_greedy_tool_calls_match_plain_and_streamed(flat):
    body = {"messages": WEATHER, "tools": TOOLS, "tool_choice": "required", "temperature": 0,
            "seed": 42, "max_tokens": 256}
    plain = [calls(chat(flat, **body)) for _ in range(3)]
    assert plain == [[("get_weather", {"city": "Paris", "days": 1})]] * 3
    assert streamed_calls(flat, body) == plain[0]


def test_auto_answers_in_text(flat):
    for seed in range(8):
        choice = chat(flat, seed=seed, messages=WEATHER, tools=TOOLS, tool_choice="auto")
        assert choice["finish_reason"] == "stop" and not calls(choice)


def streamed_calls(server, body: dict) -> list[tuple[str, dict]]:
    parts: dict[int, dict] = {}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions",
                      json={**body, "stream": True}, timeout=60) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for call in json.loads(line[6:])["choices"][0]["delta"].get("tool_calls") or []:
                slot = parts.setdefault(call["index"], {"name": "", "arguments": ""})
                slot["name"] += call.get("function", {}).get("name") or ""
                slot["arguments"] += call.get("function", {}).get("arguments") or ""
    return [(p["name"], json.loads(p["arguments"])) for p in parts.values()]
