"""agent through an Anthropic-shape endpoint that checks the history as the Messages API does
(emulated: no engine here refuses a tool_use turn whose thinking blocks are missing, and
llama.cpp's /v1/messages neither signs nor checks them; no self-test model here makes two calls
in one turn). The client's echo passes, plain and streamed; a gateway that strips the thinking
blocks fails with the diagnosis; two results in one turn pass, and a gateway that loses one fails."""

import pytest
from emulator import Emulator, error_json, messages_json, serve_messages
from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.emulated

# The Messages API's refusal of a tool_use turn that lost its thinking (extended thinking on).
NO_THINKING = ("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
               "`tool_use`. When `thinking` is enabled, a final `assistant` message must start "
               "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
               "blocks). We recommend you include thinking blocks from previous turns.")


def strict_messages(body):
    messages = body["messages"]
    if len(messages) == 1:
        return messages_json("", thinking="The forecast tool knows.", stop="tool_use",
                             tool_uses=[("get_weather", {"city": "Paris", "days": 1})])
    said = messages[1]["content"]
    if said[0].get("type") != "thinking" or said[0].get("signature") != "sig":
        return error_json(400, NO_THINKING)
    results = [b for b in messages[2]["content"] if b.get("type") == "tool_result"]
    if [b["tool_use_id"] for b in results] != ["toolu_0"]:
        return error_json(400, "messages.2: tool_use ids were found without tool_result "
                               "blocks immediately after: toolu_0")
    return messages_json("Sunny, 21 C in Paris tomorrow.", thinking="Sunny.")


def strip_thinking(body):
    return {**body, "messages": [
        {**m, "content": [b for b in m["content"] if b.get("type") != "thinking"]}
        if isinstance(m.get("content"), list) else m for m in body["messages"]]}


def fleet(url):
    return one_endpoint(url, "anthropic", expect={"agent": True, "reasoning": True})


def test_thinking_echoed_with_its_signature_passes_plain_and_streamed(run_fleet):
    with Emulator("anthropic") as em:
        serve_messages(em, strict_messages)
        result = run_fleet(fleet(em.url), "-m", "agent")
    # parallel not asked; no template route. test_agent_reasoning_history: the history
    # without the turn's thinking block refused (the Messages API requires it), taken with it
    result.assert_outcomes(passed=3, skipped=2)
    result.stdout.fnmatch_lines(["PASSED*test_agent_reasoning_history*"])


def test_a_gateway_that_strips_thinking_blocks_fails_with_the_diagnosis(run_fleet):
    with Emulator("anthropic") as em, Proxy(em.url, rewrite=strip_thinking) as gateway:
        serve_messages(em, strict_messages)
        result = run_fleet(fleet(gateway.url), "-m", "agent")
    result.assert_outcomes(failed=3, skipped=2)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 2 (the answer to the tool result) "
        "answered 400: the thinking blocks were sent back (user, assistant (thinking, tool_use), "
        "user (1 tool_result block(s))) but did not arrive: messages.1.content.0.type: Expected "
        "`thinking`*",
        "*fix: a proxy dropped the thinking blocks (and their signatures)*",
        "*an agent's history (user, assistant with a tool call, tool) with the previous turn's "
        "reasoning in `thinking` blocks was not answered, as without it: answered 400: "
        "messages.1.content.0.type: Expected `thinking`*",
        "*fix: a proxy or gateway in front strips the `thinking` blocks from the history's "
        "assistant turns*"])


def parallel_messages(body):
    """Two calls in one turn; the answer only once both results came back in one user turn."""
    messages = body["messages"]
    if len(messages) == 1:
        return messages_json("", thinking="Two cities.", stop="tool_use",
                             tool_uses=[("get_weather", {"city": "Paris", "days": 1}),
                                        ("get_weather", {"city": "Tokyo", "days": 1})])
    results = [b["tool_use_id"] for b in messages[2]["content"] if b.get("type") == "tool_result"]
    if results != ["toolu_0", "toolu_1"]:
        lost = ", ".join(sorted({"toolu_0", "toolu_1"} - set(results)))
        return error_json(400, f"messages.2: tool_use ids were found without tool_result "
                               f"blocks immediately after: {lost}")
    return messages_json("Sunny in Paris, rain in Tokyo.", thinking="Both came back.")


def drop_second_result(body):
    """A gateway that loses the second tool_result of a turn."""
    messages = [{**m, "content": [b for b in m["content"] if b.get("tool_use_id") != "toolu_1"]}
                if m["role"] == "user" and isinstance(m.get("content"), list) else m
                for m in body["messages"]]
    return {**body, "messages": messages}


def test_two_results_in_one_turn_pass_and_a_lost_one_fails(run_fleet):
    expect = {"agent": {"parallel": True}, "reasoning": True}
    with Emulator("anthropic") as em:
        serve_messages(em, parallel_messages)
        passed = run_fleet(one_endpoint(em.url, "anthropic", expect=expect), "-m", "agent",
                           "-k", "parallel")
        with Proxy(em.url, rewrite=drop_second_result) as gateway:
            failed = run_fleet(one_endpoint(gateway.url, "anthropic", expect=expect), "-m",
                               "agent", "-k", "parallel")
    passed.assert_outcomes(passed=1)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*turn 2 (the answer to the tool result) answered 400*toolu_1*"])
