"""test_agent_reasoning_history's judge over prompt counts as the engines sent them (llama.cpp's
672 / 712 / 672 on an agent history: it reads reasoning_content only; vLLM reads both fields),
and the history each variant sends: no server."""

import pytest

from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind
from pytest_frank.claims.agent import reasoning_history
from pytest_frank.claims.agent.reasoning_history import NONE, Counted
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

pytestmark = pytest.mark.unit

Failed = pytest.fail.Exception
Skipped = pytest.skip.Exception
KEEPS = (True, "the served template, rendered here with the same history, keeps it")
DROPS = (False, "the served template, rendered here with the same history, drops it")


def judged(counts: dict, engine="llamacpp", keeps=None, expect=True, refused=None,
           api=None, unasked=None, reasoning=False) -> list[str]:
    notes: list[str] = []
    claims = {"agent": expect, **({"reasoning": True} if reasoning else {})}
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1", expect=claims))
    found = Counted(counts=counts, refused=refused or {}, keeps=keeps, unasked=unasked)
    driver = driver_for(engine).with_api(api)
    reasoning_history.judge(found, Context(ep, driver, ep.options("agent"), None, notes.append))
    return notes


def test_llamacpp_reading_reasoning_content_passes_and_names_the_field_it_ignores():
    notes = judged({NONE: 672, "reasoning_content": 712, "reasoning": 672}, keeps=KEEPS)
    assert notes == [
        "the same agent history, one token asked: 672 prompt tokens without the previous "
        "turn's reasoning; 712 with it in `reasoning_content`; 672 with it in `reasoning`",
        "`reasoning` does not reach the prompt (the llama.cpp server reads "
        "`reasoning_content`): a client that sends the reasoning back only there loses it",
        "the template keeps an agent's reasoning, and `reasoning_content` reaches it"]


def test_vllm_losing_one_field_it_reads_fails_naming_it():
    # vLLM 0.20 until its fix read only `reasoning` (vLLM 38488), as a gateway that strips
    # reasoning_content shows it too
    with pytest.raises(Failed) as info:
        judged({NONE: 300, "reasoning_content": 300, "reasoning": 331}, engine="vllm")
    said = str(info.value)
    assert said.startswith("the previous turn's reasoning in `reasoning_content` left the prompt "
                           "at 300 tokens, as long as without it, while in `reasoning` it "
                           "reached the template (+31): the vLLM server reads `reasoning`, "
                           "`reasoning_content`, so it was dropped on the way"), said
    assert "a vLLM from 0.20 until its fix read only `reasoning` and dropped " \
           "`reasoning_content` (vLLM 38488)" in said, said


def test_every_field_dropped_where_the_template_keeps_reasoning_fails():
    with pytest.raises(Failed) as info:
        judged({NONE: 672, "reasoning_content": 672, "reasoning": 672}, keeps=KEEPS)
    said = str(info.value)
    assert "left the prompt at 672 prompt tokens in every field clients send it in " \
           "(`reasoning_content`, `reasoning`), as long as without it, though the served " \
           "template, rendered here with the same history, keeps it" in said, said
    # the fix names the field llama.cpp reads, not the one it ignores anyway
    assert "strips `reasoning_content` from the history's assistant messages" in said, said


@pytest.mark.parametrize("keeps, why", [
    (DROPS, "the served template, rendered here with the same history, drops it"),
    (None, "no field changes the prompt")])
def test_a_template_keeping_no_reasoning_is_a_note(keeps, why):
    notes = judged({NONE: 80, "reasoning_content": 80, "reasoning": 80}, keeps=keeps)
    assert notes[-1] == (f"the template keeps no earlier reasoning in an agent's history "
                         f"({why}), so none is asked for")


def test_the_fleets_word_that_the_template_keeps_reasoning_wins():
    with pytest.raises(Failed) as info:
        judged({NONE: 80, "reasoning_content": 80, "reasoning": 80}, keeps=DROPS,
               expect={"reasoning_history": True})
    assert "though fleet.yaml says the template keeps it (expect.agent.reasoning_history)" \
        in str(info.value)


def test_an_unknown_engine_notes_the_field_that_changes_nothing():
    notes = judged({NONE: 80, "reasoning_content": 95, "reasoning": 80}, engine="openai")
    assert notes[1] == ("`reasoning` does not reach the prompt (which fields the "
                        "OpenAI-compatible server reads is not known here): a client that sends "
                        "the reasoning back only there loses it")


def test_a_refused_history_fails_with_the_servers_words():
    with pytest.raises(Failed) as info:
        judged({NONE: 80, "reasoning_content": 95}, refused={
            "reasoning": "answered 400: Extra inputs are not permitted: messages.1.reasoning"})
    assert str(info.value).startswith(
        "an agent's history (user, assistant with a tool call, tool) with the previous turn's "
        "reasoning in `reasoning` was not answered: answered 400: Extra inputs are not "
        "permitted")


def test_no_prompt_count_is_inconclusive():
    with pytest.raises(Skipped) as info:
        judged({NONE: None, "reasoning_content": None, "reasoning": None})
    assert "the server sent no usage.prompt_tokens" in str(info.value)


@pytest.mark.parametrize("engine, sent", [
    ("llamacpp", ("reasoning_content", "reasoning")), ("vllm", ("reasoning_content", "reasoning")),
    ("anthropic", ("thinking",))])
def test_each_variant_carries_the_reasoning_in_its_field_alone(engine, sent):
    driver = driver_for(engine)
    assert driver.wire.history_reasoning_fields == sent
    for name in sent if engine != "anthropic" else ():  # blocks: the server's own turn
        history = driver.wire.agent_history([], reasoning_history._said("0a1b2c3d", name), ["{}"])
        said = history[0]
        assert "note-0a1b2c3d" in said[name]
        assert not [k for k in ("reasoning_content", "reasoning") if k != name and k in said]
    bare = driver.wire.agent_history([], reasoning_history._said("0a1b2c3d", None), ["{}"])
    assert "note-0a1b2c3d" not in str(bare)


def test_llamacpps_messages_route_reading_thinking_blocks_passes():
    # llama.cpp's /v1/messages: 1255 input tokens without the turn's thinking block, 1268 with it
    notes = judged({NONE: 1255, "thinking": 1268}, api="messages")
    assert notes == [
        "the same agent history, one token asked: 1255 input tokens without the previous "
        "turn's reasoning; 1268 with it in `thinking` blocks",
        "the template keeps an agent's reasoning, and `thinking` blocks reaches it"]


def test_thinking_blocks_dropped_on_the_messages_route_fail_naming_them():
    with pytest.raises(Failed) as info:
        judged({NONE: 668, "thinking": 668}, api="messages", keeps=KEEPS)
    said = str(info.value)
    assert said.startswith(
        "the previous turn's reasoning left the prompt at 668 input tokens in every field "
        "clients send it in (`thinking` blocks), as long as without it, though the served "
        "template, rendered here with the same history, keeps it: the llama.cpp server reads "
        "`thinking` blocks, so it was dropped on the way"), said
    assert "fix: a proxy or gateway in front strips the `thinking` blocks from the history's " \
           "assistant turns: make it forward each assistant turn's content blocks" in said, said


def test_a_block_the_server_requires_reached_it():
    # Anthropic's own API refuses a thinking turn's tool_use sent back without its block
    notes = judged({"thinking": 702}, engine="anthropic", refused={
        NONE: "answered 400: Expected `thinking` or `redacted_thinking`, but found `tool_use`"})
    assert notes == [
        "the agent's history without the turn's thinking block was refused (answered 400: "
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`) and answered with it "
        "(702 input tokens): the server requires the block, so it reached the server"]


def test_no_thinking_block_to_send_back_is_not_measured():
    with pytest.raises(Skipped) as info:
        judged({}, engine="anthropic", reasoning=True,
               unasked="the agent's turn with a call came back without a thinking block")
    assert "without a thinking block: whether a history's thinking block reaches the prompt " \
           "is not measured" in str(info.value)
    with pytest.raises(Skipped) as info:
        judged({}, engine="anthropic", unasked="reasoning is not claimed, so the agent's turn "
                                               "asks no thinking block")
    assert "reasoning is not claimed" in str(info.value)
