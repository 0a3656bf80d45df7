"""Multi-turn prefix reuse on real llama.cpp (xllamacpp): the agent loop's turn 2 sends turn 1's
prompt again with the call and its result appended, and must take that prefix from the cache,
by the server's own count (timings.cache_n), judged on the turns test_agent already plays.

Healthy: the self-test model, and the self-test hybrid (Qwen3.5's recurrent layers) with
llama.cpp's default 32 context checkpoints, which it continues from. The fault is real: the same
hybrid with `ctx_checkpoints: 0` re-processes the whole prompt every turn ("forcing full prompt
re-processing due to lack of cache data", as llama.cpp 22746 reports of hybrid and sliding-window
models). A gateway that forces `cache_prompt: false` into every request (a proxy in front of the
healthy server) fails too, with the same fix naming it."""

import json

import pytest
from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real

PLAIN = ("-p", "no:randomly", "-m", "agent", "-k",
         "test_agent and not template and not parallel and not reasoning_history",
         "--frank-json=run.json")
FIX = ("*fix: llama.cpp continues a hybrid (recurrent) or sliding-window model's conversation "
       "only from a saved checkpoint, else it forces full prompt re-processing: keep --ctx-checkpoints"
       " above 0 (32 by default), or --swa-full for a sliding-window model (its whole KV, more "
       "memory); where slots serve other requests between turns, --cache-ram above 0 keeps their "
       "prompts; and no client or proxy may send \"cache_prompt\": false (nor --no-cache-prompt)*")


def notes(pytester, test: str) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(next(r for r in data["rows"] if r["key"].endswith(test))["notes"])


def turn2(text: str, doing: str) -> tuple[int, int, int]:
    """(cached, prompt, turn 1's prompt) from the note test_agent wrote."""
    said = text.split(f"{doing}: the next turn came from the prefix cache: turn 2 took ")[1]
    cached, rest = said.split(" of its ", 1)
    prompt, rest = rest.split(" prompt tokens from the cache, of the ", 1)
    before = rest.split(" turn 1 had sent")[0]
    return int(cached.replace(",", "")), int(prompt.replace(",", "")), int(before.replace(",", ""))


@pytest.mark.parametrize("model", ["selftest", "selftest:hybrid_plain"])
def test_turn_2_comes_from_the_cache_plain_and_streamed(llama, run_fleet, pytester, model):
    server = llama(model=model, alias="m")
    result = run_fleet(one_endpoint(server.url, alias="m", expect={"agent": True}), *PLAIN)
    result.assert_outcomes(passed=2)
    for test, doing in (("test_agent[ep]", "agent step"),
                        ("test_agent_streamed[ep]", "streamed agent step")):
        text = notes(pytester, test)
        cached, prompt, before = turn2(text, f"{doing} (1 call(s), then the answer)")
        # the whole of turn 1's prompt but the tokens that open the reply; the rest is new
        assert before * 0.9 < cached <= prompt and prompt > before, text
        assert "[source: timings.cache_n / prompt_n]" in text, text


def test_a_hybrid_without_checkpoints_reprocesses_each_turn(llama, run_fleet):
    server = llama(model="selftest:hybrid_plain", alias="m", ctx_checkpoints=0)
    result = run_fleet(one_endpoint(server.url, alias="m", expect={"agent": True}), *PLAIN)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 2 took 0 of its * prompt tokens from "
        "the cache, of the * turn 1 had sent [[]source: timings.cache_n / prompt_n]: the server "
        "re-processed the conversation it had just served, so each turn of an agent costs the "
        "whole history's prefill", FIX])


def test_cache_prompt_false_forced_by_a_proxy_fails_turn_2(llama, run_fleet):
    server = llama(alias="m")
    with Proxy(server.url, rewrite=lambda body: {**body, "cache_prompt": False}) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="m", expect={"agent": True}), *PLAIN)
    result.assert_outcomes(failed=2)
    assert all(b["cache_prompt"] is False for b in proxy.sent if "messages" in b)
    result.stdout.fnmatch_lines([
        "*streamed agent step (1 call(s), then the answer): turn 2 took 0 of its * prompt "
        "tokens from the cache, of the * turn 1 had sent [[]source: timings.cache_n / "
        "prompt_n]: the server re-processed*", FIX])
