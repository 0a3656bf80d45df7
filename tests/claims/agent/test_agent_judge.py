"""The agent judge over recorded turn-2 replies (the engines' own words where they fail), and the
histories the drivers build: no server."""

import json

import pytest

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import agent, bind
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

pytestmark = pytest.mark.unit

CALL = Call("get_weather", '{"city":"Paris","days":1}', "call-1")
USER = {"role": "user", "content": "What is the weather in Paris tomorrow?"}
FIRST = Reply(status=200, content="", reasoning="Thinking", reasoning_field="reasoning_content",
              calls=[CALL], finish="tool_calls")
RESULT = '{"city": "Paris", "forecast": "sunny, 21 C", "reference": "ref-0a1b2c3d"}'
Failed = pytest.fail.Exception


def conversation(second: Reply, engine="llamacpp") -> list[agent.Turn]:
    driver = driver_for(engine)
    history = driver.wire.agent_history([USER], FIRST, [RESULT])
    return [agent.Turn([USER], FIRST, [RESULT], ["ref-0a1b2c3d"]), agent.Turn(history, second)]


def problem(second: Reply, engine="llamacpp", grounded=False):
    return agent.conversation_problem(conversation(second, engine), 1, driver_for(engine),
                                      grounded)


@pytest.mark.parametrize("second, text, fix", [
    (Reply(status=200, content="Sunny, 21 C.", finish="stop"), None, None),
    # llama.cpp issue 19851's template, as a server that refuses at render time says it
    (Reply(status=500, problem="Jinja Exception: After the optional system message, conversation "
                             "roles must alternate user and assistant roles except for tool "
                             "calls and results"),
     "turn 2 (the answer to the tool result) answered 500: the chat template could not render "
     "the history (user, assistant (1 tool_call(s), reasoning_content), tool): Exception: After "
     "the optional system message", "serve the model's own chat template"),
    # llama.cpp issue 17040 (gpt-oss): the reasoning sent back beside the call
    (Reply(status=500, problem="Cannot pass both content and thinking in an assistant message "
                             "with tool calls"),
     "turn 2 (the answer to the tool result) answered 500: the chat template could not render",
     "serve the model's own chat template"),
    (Reply(status=400, problem="Unexpected tool_call_id 'call-1': no such call"),
     "turn 2 (the answer to the tool result) answered 400 about the call's id", "tool_call_id"),
    (Reply(status=200, calls=[Call("get_weather", '{"days": 1, "city": "Paris"}', "call-2")],
           finish="tool_calls"),
     'turn 2 called get_weather again with the same arguments ({"days": 1, "city": "Paris"})',
     "the tool result did not reach the prompt: does the chat template render role tool"),
    (Reply(status=200, calls=[Call("get_time", '{"timezone":"Europe/Paris"}', "call-2")],
           finish="tool_calls"),
     "turn 2 asked for another tool (get_time) instead of a final answer", "expect.agent.steps"),
    (Reply(status=200, content='<tool_call>\n{"name": "get_weather"}\n</tool_call>',
           finish="stop"),
     "turn 2's answer has markup left in it", "autoparser recognises"),
    (Reply(status=200, content="<think>It is sunny</think>Sunny.", finish="stop"),
     "turn 2's answer has markup left in it", "--reasoning-format deepseek"),
    (Reply(status=200, content="Sunny and", finish="length"),
     "turn 2 ended with finish_reason 'length', not stop (end_turn)", None),
    (Reply(status=200, content="", finish="stop"), "turn 2 answered empty content", None),
])
def test_turn_two(second, text, fix):
    found = problem(second)
    if text is None:
        assert found is None, found
        return
    assert found is not None and found.text.startswith(text), found
    assert (fix is None and found.fix is None) or fix in str(found.fix), found.fix


@pytest.mark.parametrize("error, text, fix", [
    ("Cannot continue an assistant message that contains tool calls.",
     "the results were sent", "dropped the results"),
    ("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
     "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
     "thinking block", "the thinking blocks were sent back", "dropped the thinking blocks"),
])
def test_a_proxy_that_lost_part_of_the_history(error, text, fix):
    found = problem(Reply(status=400, problem=error), engine="anthropic")
    assert text in found.text and fix in found.fix, found


def test_grounded_asks_the_answer_to_quote_the_marker():
    vague = Reply(status=200, content="It is sunny.", finish="stop")
    assert problem(vague) is None
    assert "does not quote the tool result (ref-0a1b2c3d)" in problem(vague, grounded=True).text
    quoted = Reply(status=200, content="Sunny (ref-0a1b2c3d).", finish="stop")
    assert problem(quoted, grounded=True) is None


def test_a_forced_turn_without_a_call_is_judged_as_the_call():
    turns = [agent.Turn([USER], Reply(status=200, content="Hello", finish="stop"))]
    found = agent.conversation_problem(turns, 1, driver_for("vllm"))
    assert found.text.startswith("turn 1 (the tool call) is not a usable call: no tool call")


def test_openai_history_keeps_calls_reasoning_and_one_tool_message_per_call():
    reply = Reply(status=200, content="", reasoning="Thinking", reasoning_field="reasoning",
                  calls=[CALL, Call("get_weather", {"city": "London", "days": 1}, "call-2")])
    history = driver_for("vllm").wire.agent_history([USER], reply, [RESULT, "{}"])
    said = history[1]
    assert said["reasoning"] == "Thinking" and said["content"] is None
    assert [c["id"] for c in said["tool_calls"]] == ["call-1", "call-2"]
    assert said["tool_calls"][0]["function"]["arguments"] == '{"city":"Paris","days":1}'
    assert json.loads(said["tool_calls"][1]["function"]["arguments"]) == {"city": "London",
                                                                        "days": 1}
    assert history[2:] == [{"role": "tool", "tool_call_id": "call-1", "content": RESULT},
                           {"role": "tool", "tool_call_id": "call-2", "content": "{}"}]


def test_anthropic_history_echoes_the_blocks_verbatim():
    blocks = [{"type": "thinking", "thinking": "Thinking", "signature": "c2ln"},
              {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
               "input": {"city": "Paris", "days": 1}}]
    reply = Reply(status=200, calls=[Call("get_weather", {"city": "Paris", "days": 1},
                                          "toolu_1")], blocks=blocks, finish="tool_use")
    history = driver_for("anthropic").wire.agent_history([USER], reply, [RESULT])
    assert history[1] == {"role": "assistant", "content": blocks}
    assert history[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": RESULT}]}


@pytest.mark.parametrize("signature, text", [
    ("", None),  # llama.cpp signs with "": a block with its field is echoed whole
    ("c2ln", None),
    (None, "turn 1's thinking block came without its signature"),
], ids=["empty", "signed", "no-field"])
def test_a_thinking_block_without_its_signature_fails(signature, text):
    blocks = [{"type": "thinking", "thinking": "Thinking", "signature": signature},
              {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
               "input": {"city": "Paris", "days": 1}}]
    first = Reply(status=200, calls=[Call("get_weather", {"city": "Paris", "days": 1},
                                          "toolu_1")], blocks=blocks, finish="tool_use")
    history = driver_for("anthropic").wire.agent_history([USER], first, [RESULT])
    turns = [agent.Turn([USER], first, [RESULT]),
             agent.Turn(history, Reply(status=200, content="Sunny.", finish="end_turn"))]
    found = agent.conversation_problem(turns, 1, driver_for("anthropic"))
    assert (found.text if found else None) == (text and text + (
        ": a client (Claude Code) sends it back as it came in the next turn, and the Messages "
        "API refuses it there (thinking.signature: Field required)")), found
    assert found is None or "signature included" in str(found.fix)


def test_the_judge_shows_the_conversation_and_fails_with_the_fix():
    notes: list[str] = []
    ep = bind(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1", expect={"agent": True}))
    ctx = Context(ep, driver_for("llamacpp"), ep.options("agent"), None, notes.append)
    repeat = Reply(status=200, calls=[CALL], finish="tool_calls")
    convs = agent.Conversations(kind="plain", trials=[conversation(repeat)], steps=1)
    with pytest.raises(Failed) as failed:
        agent.judge(convs, ctx)
    assert "agent step (1 call(s), then the answer): turn 2 called get_weather again" in str(
        failed.value)
    assert "trial 1 turn 2 sent: user, assistant (1 tool_call(s), reasoning_content), tool" in notes
    assert f"trial 1 turn 1 result: {RESULT}" in notes


# -- test_agent_template: what the served template asks of the rendered history ---------------
def _rendered(prompt_parts, template, status=None, said=None):
    from pytest_frank.claims.agent import template as agent_template

    sent, markers = agent_template.history()
    prompt = None if status else "".join(markers[p] for p in prompt_parts)
    return agent_template.Rendered(sent=sent, markers=markers, route="/apply-template",
                                   prompt=prompt, status=status, said=said, template=template)


def _template_ctx(notes):
    ep = bind(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1", expect={"agent": True}))
    return Context(ep, driver_for("llamacpp"), ep.options("agent"), None, notes.append)


# A DeepSeek-R1-style template: reasoning cut out of content, never read from reasoning_content.
R1 = ("{% for m in messages %}{% if m['role'] == 'assistant' %}{% set content = "
      "m['content'].split('</think>')[-1] %}{% endif %}{% if m['role'] == 'tool' %}"
      "<tool_output>{{ m['content'] }}{% endif %}{% endfor %}")
QWEN3 = "{%- if message.reasoning_content is string %}{{ message.reasoning_content }}{% endif %}"
MISTRAL = "{{ '[TOOL_RESULTS]' + {'call_id': message.tool_call_id} | tojson }}"


@pytest.mark.parametrize("parts, template, failure", [
    (["result"], R1, None),  # drops earlier reasoning by design: not asked for it
    (["result"], None, None),  # the template unseen: the result alone is judged
    (["result", "reasoning"], QWEN3, None),
    (["result"], QWEN3, "lacks the earlier reasoning the history carried, though the served "
                        "template keeps reasoning_content"),
    (["result", "id"], MISTRAL, None),
    (["result"], MISTRAL, r"lacks the call id the history carried, though the served template "
                          r"shows call ids \(tool_call_id\)"),
    (["reasoning"], QWEN3, r"lacks the tool result \(ref-"),
])
def test_template_asks_what_it_renders(parts, template, failure):
    from pytest_frank.claims.agent import template as agent_template

    found, notes = _rendered(parts, template), []
    if failure is None:
        agent_template.judge(found, _template_ctx(notes))
        assert "the tool result is in the prompt" in notes
        return
    with pytest.raises(Failed, match=failure):
        agent_template.judge(found, _template_ctx(notes))


def test_template_route_not_forwarded_is_inconclusive():
    from pytest_frank.claims.agent import template as agent_template
    from pytest_frank.outcome.verdict import Inconclusive

    found = _rendered([], None, status=404, said="File Not Found")
    with pytest.raises(Inconclusive, match="answered 404 .*does not render templates on request"):
        agent_template.judge(found, _template_ctx([]))
    assert agent_template.TEMPLATE.applies(agent.Options(), driver_for("vllm")) == \
        "a vLLM server renders no chat template on request"


def test_a_served_template_is_rendered_here_in_a_bounded_child():
    """What test_agent_template learns a template shows by design: the self-test template keeps
    the result and the reasoning; a template that raises, or that grows a string past the
    child's memory, renders nothing here (its text then decides), without harm to the run."""
    from pytest_frank.claims.agent.template import history
    from pytest_frank.claims.tools import TOOLS
    from pytest_frank.local.render import render
    from pytest_frank.local.selftest_model import chat_template

    sent, markers = history()
    here = render(chat_template("agent"), sent, TOOLS)
    assert here is not None and markers["result"] in here and markers["reasoning"] in here
    assert markers["id"] not in here
    assert render("{{ raise_exception('no tools here') }}", sent, TOOLS) is None
    bomb = ("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}"
            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}")
    assert render(bomb, sent, TOOLS) is None


# -- test_agent_chain over recorded replies: the store's refusals in each engine's words -------
def chain_of(chained: Reply | None = None, offered: Reply | None = None):
    from pytest_frank.claims.agent import chain as agent_chain

    first = agent.Turn([USER], FIRST)
    return agent_chain.Chain(offered=agent.Turn([USER], offered or FIRST), first=first,
                             chained=None if chained is None else agent.Turn([], chained))


@pytest.mark.parametrize("chained, noted", [
    (Reply(status=400, problem="llama.cpp does not support 'previous_response_id'."),
     "answered 400: llama.cpp does not support 'previous_response_id'."),
    (Reply(status=404, problem="Response with id 'resp_917f4e47783dc936' not found."),
     "answered 404: Response with id 'resp_917f4e47783dc936' not found."),
], ids=["llamacpp", "vllm-without-store"])
def test_chain_a_server_that_keeps_no_responses_is_noted(chained, noted):
    from pytest_frank.claims.agent import chain as agent_chain

    notes: list[str] = []
    agent_chain.judge(chain_of(chained), _template_ctx(notes))
    assert any(noted in n and "not judged" in n for n in notes), notes


@pytest.mark.parametrize("found, text", [
    (chain_of(Reply(status=400, problem="No tool call found for function call output with "
                                        "call_id call-1")),
     "turn 2 by previous_response_id, answering turn 1's 1 call(s) with function_call_output "
     "items alone, answered 400: No tool call found"),
    (chain_of(offered=Reply(status=500, problem="Unsupported tool type: web_search")),
     "the server answered 500: Unsupported tool type: web_search"),
    (chain_of(offered=Reply(status=400, problem="")),
     "the server answered 400 without a message"),
    (chain_of(offered=Reply(problem="the connection was closed before an answer came")),
     "no answer came back: the connection was closed"),
], ids=["lost-call", "other-tools-500", "other-tools-silent-400", "other-tools-dropped"])
def test_chain_faults_fail_with_their_line(found, text):
    from pytest_frank.claims.agent import chain as agent_chain

    with pytest.raises(Failed) as raised:
        agent_chain.judge(found, _template_ctx([]))
    assert text in str(raised.value), raised.value
    assert ("previous_response_id must bring back" if "previous" in text
            else "tools that are not functions") in str(raised.value)
