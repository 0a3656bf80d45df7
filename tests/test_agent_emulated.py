"""agent through an Anthropic-shape endpoint that checks the history as the Messages API does
(emulated: no engine here refuses a tool_use turn whose thinking blocks are missing, and
llama.cpp's /v1/messages neither signs nor checks them). The client's echo passes, plain and
streamed; a gateway that strips the thinking blocks fails with the diagnosis."""

from emulator import Emulator, error_json, messages_json, serve_messages
from fleets import one_endpoint
from proxy import Proxy

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
    result.assert_outcomes(passed=2, skipped=1)


def test_a_gateway_that_strips_thinking_blocks_fails_with_the_diagnosis(run_fleet):
    with Emulator("anthropic") as em, Proxy(em.url, rewrite=strip_thinking) as gateway:
        serve_messages(em, strict_messages)
        result = run_fleet(fleet(gateway.url), "-m", "agent")
    result.assert_outcomes(failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "*agent step (1 call(s), then the answer): turn 2 (the answer to the tool result) "
        "answered 400: the thinking blocks were sent back (user, assistant (thinking, tool_use), "
        "user (1 tool_result block(s))) but did not arrive: messages.1.content.0.type: Expected "
        "`thinking`*",
        "*fix: a proxy dropped the thinking blocks (and their signatures)*"])
