"""Diagnoses of the generation claims (reasoning, tools, agent, response_format) that read what the
server showed before naming a cause: the template's caps and whether the tools reached the
prompt, whether the template thinks at all, the streamed twin's reply, the server's own token
count, a tool call where none was asked, thinking ahead of a schema's JSON. Each fault fails with
its cause, and the healthy case passes. Tables of hand-built observations first; then real
llama.cpp (SmolLM2, the self-test models, a rewriting proxy in front) for the faults an engine
here can show."""

import json
import re

import pytest
from fleets import one_endpoint
from proxy import Proxy

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import agent, bind, params, reasoning, tools
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint

pytestmark = pytest.mark.real

Failed = pytest.fail.Exception
WEATHER = Call("get_weather", '{"city": "Paris", "days": 1}', "c1")
NO_TOOLS = (False, "/props chat_template_caps.supports_tools false")
TOOLS_OK = (True, "/props chat_template_caps.supports_tools true")
NO_THINKING = (False, "/props chat_template names no thinking block, enable_thinking or "
                      "reasoning_content")


def ctx(claim, engine="llamacpp", expect=None, notes=None, **keys):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1", expect={claim: expect or True},
                       **keys))
    return Context(ep, driver_for(engine), ep.options(claim),
                   note=(notes if notes is not None else []).append)


def outcome(judge, obs, check) -> str | None:
    """The failure's whole message (line and fix), or None where the judge passed."""
    try:
        judge(obs, check)
    except Failed as failed:
        return str(failed)
    return None


# -- reasoning: no reasoning, named by the template and the other path ---------------------------
def thought(reply, mode="on", **facts):
    return reasoning.Thought(mode=mode, reply=reply, max_tokens=512, **facts)


def answered(reasoning_text="", streamed=False, content="Hello!"):
    return Reply(status=200, content=content, reasoning=reasoning_text, finish="stop",
                 streamed=streamed, tokens=6, max_tokens=512,
                 reasoning_field="reasoning_content" if reasoning_text else None)


REASONING = [  # (id, the judge, the observation, in the failure (None: passes), never in it)
    ("healthy", reasoning.judge, thought(answered("Thinking")), None, None),
    ("template-without-thinking", reasoning.judge, thought(answered(), thinks=NO_THINKING),
     ["chat answered 'Hello!' with no reasoning (`reasoning_content` / `reasoning` empty or "
      "absent): the served chat template has no thinking (/props chat_template names no "
      "thinking block, enable_thinking or reasoning_content), so this model answers without "
      "thinking here", "fix: serve a thinking model with its own template",
      "or turn expect.reasoning off for this endpoint"],
     "although thinking is on by default"),
    ("template-thinks-yet-none-came", reasoning.judge,
     thought(answered(), thinks=(True, "/props chat_template reads '<think>'")),
     ["although the served chat template thinks (/props chat_template reads '<think>')",
      "--reasoning off, --reasoning-budget 0"], "so thinking opens"),
    ("plain-path-loses-the-field", reasoning.judge,
     thought(answered(), thinks=(True, "/props chat_template reads '<think>'"),
             twin=thought(answered("Thinking", streamed=True), mode="streamed")),
     ["while the streamed answer to the same prompt carried it in `reasoning_content`: the "
      "template thinks and the engine splits the thinking out; the plain (non-streamed) path "
      "loses the field (a proxy in front that rebuilds plain (non-streamed) answers?)",
      "fix: make the proxy or gateway pass `reasoning_content` through on plain "
      "(non-streamed) answers, as it does on streamed ones"], "--jinja"),
    ("stream-path-loses-the-field", reasoning.judge_streamed,
     thought(answered(streamed=True), mode="streamed", plain=thought(answered("Thinking"))),
     ["streamed chat answered 'Hello!' with no reasoning", "the streamed path loses the field"],
     "--jinja"),
    ("engine-says-nothing", reasoning.judge, thought(answered()),
     ["with no reasoning (`reasoning_content` / `reasoning` empty or absent) although thinking "
      "is on by default", "fix: serve with --jinja"], None),
    ("forced-tool-call", reasoning.judge,
     thought(Reply(status=200, reasoning="Thinking", calls=[WEATHER], finish="tool_calls",
                   tokens=49, max_tokens=512)),
     ["chat without tools came back as a tool call (get_weather): every request is forced into "
      "tool-call output", "fix: drop --grammar-file"], "landed in reasoning"),
    ("forced-tool-call-thinking-off", reasoning.judge_off,
     thought(Reply(status=200, calls=[WEATHER], finish="tool_calls", tokens=46, max_tokens=512),
             mode="off"),
     ["chat with thinking off without tools came back as a tool call"], "landed in reasoning"),
    ("off-cut-short-by-a-proxy", reasoning.judge_off,
     thought(Reply(status=200, finish="length", tokens=3, max_tokens=512), mode="off"),
     ["finish_reason 'length' after 3 token(s) (usage) of the max_tokens=512 asked, with "
      "nothing and no answer: the budget was not spent, so neither it nor thinking cut this "
      "reply", "fix: look for what lowers max_tokens on the way", "--n-predict"],
     "used the whole budget"),
    ("off-budget-really-spent", reasoning.judge_off,
     thought(Reply(status=200, finish="length", tokens=512, max_tokens=512), mode="off"),
     ["thinking used the whole budget of max_tokens=512"], "not spent"),
    ("thinking-cut-short-by-a-proxy", reasoning.judge,
     thought(Reply(status=200, reasoning="Hmm", finish="length", tokens=6, max_tokens=2009,
                   reasoning_field="reasoning_content")),
     ["finish_reason 'length' after 6 token(s) (usage) of the max_tokens=2009 asked, with 'Hmm' "
      "of reasoning and no answer: the budget was not spent"], "did not end within"),
]


def _reads(said, holds, never):
    """None where the judge passes; else the outcome holds each text and never the other."""
    if holds is None:
        assert said is None, said
        return
    assert said is not None
    for text in holds:
        assert text in said, said
    assert never is None or never not in said, said


@pytest.mark.parametrize("judge, obs, holds, never", [c[1:] for c in REASONING],
                         ids=[c[0] for c in REASONING])
def test_reasoning_names_the_cause_it_read(judge, obs, holds, never):
    said = outcome(judge, obs, ctx("reasoning"))
    _reads(said, holds, never)


@pytest.mark.parametrize("props, thinks", [
    ({"chat_template": "{{ '<|im_start|>' + message['role'] }}"}, NO_THINKING),
    ({"chat_template": "{{ '<think>\\n' }}{{ reasoning_content }}"},
     (True, "/props chat_template reads '<think>'")),
    ({"chat_template": "{% if enable_thinking %}"},
     (True, "/props chat_template reads 'enable_thinking'")),
    ({"chat_template": "<|START_THINKING|>"}, (True, "/props chat_template reads "
                                                      "'<|START_THINKING|>'")),
    ({"chat_template": "Think step by step.", "chat_template_caps": {"supports_thinking": True}},
     (True, "/props chat_template_caps.supports_thinking true")),
    ({}, None),
], ids=["chatml", "think-block", "switch", "command-r", "caps-win", "unsaid"])
def test_llamacpp_reads_whether_the_template_thinks(props, thinks):
    assert driver_for("llamacpp").template.thinks({"/props": props}) == thinks


def test_other_engines_do_not_say_whether_the_template_thinks():
    assert driver_for("vllm").template.thinks({"/v1/models": {"data": []}}) is None


# -- tools: a forced call answered in text, named by whether the tools reached the model --------
def trials(replies, kind="required", carried=None, plain=None):
    return tools.Trials(kind=kind, replies=replies, max_tokens=512, carried=carried, plain=plain)


TEXT = Reply(status=200, content="Paris is sunny.", finish="stop", tokens=8, max_tokens=512)
LEAK = Reply(status=200, content='<tool_call>{"name": "get_weather"}</tool_call>', finish="stop")
CALLED = Reply(status=200, calls=[WEATHER], finish="tool_calls")

TOOLS = [  # (id, the judge, the observation, in the failure (None: passes), never in it)
    ("healthy", tools.judge_calls, trials([CALLED]), None, None),
    ("template-cannot-carry-tools", tools.judge_calls,
     trials([TEXT], carried=tools.Carried(caps=NO_TOOLS, with_tools=42, without=42)),
     ["no tool call: answered 'Paris is sunny.' (finish_reason 'stop'): the chat template cannot "
      "carry tools (/props chat_template_caps.supports_tools false; the prompt counted 42 tokens "
      "with the tools and 42 without them): the engine drops them without a word and the model "
      "never sees them", "fix: serve a model whose own template renders tools"], "--jinja"),
    ("counts-overrule-the-caps", tools.judge_calls,
     trials([TEXT], carried=tools.Carried(caps=TOOLS_OK, with_tools=42, without=42)),
     ["the chat template cannot carry tools"], "model limit"),
    ("model-never-calls", tools.judge_calls,
     trials([TEXT], carried=tools.Carried(caps=TOOLS_OK, with_tools=578, without=65)),
     ["the template carries the tools (/props chat_template_caps.supports_tools true; the "
      "prompt grew from 65 to 578 tokens with the tools) and the model still answered in text, "
      "a model limit, not a serving fault", "fix: serve a model trained to call tools"],
     "--jinja"),
    ("caps-alone", tools.judge_calls,
     trials([TEXT], carried=tools.Carried(caps=NO_TOOLS)),
     ["cannot carry tools (/props chat_template_caps.supports_tools false)"], "--jinja"),
    ("nothing-known", tools.judge_calls, trials([TEXT], carried=tools.Carried()),
     ["no tool call: answered 'Paris is sunny.'", "fix: llama.cpp reads the tool-call format "
      "from the chat template: serve with --jinja"], "cannot carry"),
    ("markup-is-the-parser", tools.judge_calls,
     trials([LEAK], carried=tools.Carried(caps=TOOLS_OK, with_tools=578, without=65)),
     ["leaked markup", "fix: llama.cpp reads the tool-call format"], "model limit"),
    ("streamed-model-never-calls", tools.judge_streamed,
     trials([TEXT], kind="streamed",
            carried=tools.Carried(caps=TOOLS_OK, with_tools=578, without=65)),
     ['streamed tool_choice "required": 0/1', "a model limit, not a serving fault"], None),
    ("plain-call-wrong-stream-right", tools.judge_streamed,
     trials([CALLED], kind="streamed", plain=trials([Reply(
         status=200, calls=[Call("weather", '{"city": "Paris", "days": 1}', "c1")],
         finish="tool_calls")])), None, None),
    ("both-usable-but-different-greedy", tools.judge_streamed,
     trials([CALLED], kind="streamed", plain=trials([Reply(
         status=200, calls=[Call("get_time", '{"timezone": "Europe/Paris"}', "c1")],
         finish="tool_calls")])),
     ["the streamed reply differs from the plain (non-streamed) one to the same request at "
      "temperature 0: the calls differ: streamed ['get_weather'], plain ['get_time']",
      "streaming parser (the chat format's partial parse) sent deltas"], None),
    ("both-required-missing-once", tools.judge_calls,
     trials([Reply(status=200, calls=[Call("get_weather", "{}", "c1")], finish="tool_calls")]),
     ["0/1 trial(s) valid (0%, need 100%); missing required: get_weather lacks 'city', 'days'"],
     None),
]


@pytest.mark.parametrize("judge, obs, holds, never", [c[1:] for c in TOOLS],
                         ids=[c[0] for c in TOOLS])
def test_tools_name_the_cause_they_read(judge, obs, holds, never):
    notes = []
    said = outcome(judge, obs, ctx("tools", notes=notes, sampling={"temperature": 0}))
    _reads(said, holds, never)
    assert said is None or said.count("missing required") <= 1, said


def test_the_stream_right_and_the_plain_call_wrong_is_noted_not_failed():
    notes = []
    obs = TOOLS[8][2]
    tools.judge_streamed(obs, ctx("tools", notes=notes, sampling={"temperature": 0}))
    assert any(n.startswith("the streamed call is usable; the non-streamed answer to the same "
                            "request is not (wrong name: 'weather' is not an offered tool (get_weather, "
                            "get_time)): test_tools_required judges that path")
               for n in notes), notes


def test_an_agent_turn_answered_in_text_reads_whether_the_tools_arrived():
    turn = agent.Turn(sent=[{"role": "user", "content": "weather?"}], reply=TEXT)
    dropped = tools.Carried(caps=NO_TOOLS, with_tools=42, without=42)
    found = agent.conversation_problem([turn], 1, driver_for("llamacpp"), carried=dropped)
    assert "turn 1 (the tool call) is not a usable call: no tool call" in found.text
    assert "the chat template cannot carry tools" in found.reading
    assert "serve a model whose own template renders tools" in str(found.fix)
    unknown = agent.conversation_problem([turn], 1, driver_for("llamacpp"))
    assert "--jinja" in str(unknown.fix) and "cannot carry" not in unknown.text


# -- response_format: thinking ahead of the JSON is a parser fault, not an unenforced schema ----
VALID = json.dumps({"colour": "green", "code": "PAR", "place": {"city": "Paris"}})


@pytest.mark.parametrize("content, holds, never", [
    (VALID, None, None),
    (f"<think>The user wants JSON.</think>{VALID}",
     ["the content holds the model's thinking", "the JSON after it validates, so the schema is "
      "enforced", "the reasoning parser is off or wrong", "fix: start llama-server with "
      "--reasoning-format deepseek"], "not enforced"),
    ("<think>The user wants JSON.</think>green",
     ["the content holds the model's thinking", "what follows is no valid answer either "
      "('green')"], "the schema is enforced"),
    ('{"colour": "green"}', ["the content breaks it"], "thinking"),
], ids=["healthy", "thinking-then-valid-json", "thinking-then-no-json", "no-thinking-invalid"])
def test_response_format_tells_leaked_thinking_from_an_unenforced_schema(content, holds, never):
    sent = params.Sent(replies={"response_format": Reply(status=200, content=content,
                                                         finish="stop", tokens=20,
                                                         max_tokens=512)})
    said = outcome(params.judge_response_format, sent, ctx("params"))
    if holds is None:
        assert said is None, said
        return
    for text in holds:
        assert text in said, said
    assert never not in said, said


# -- on real llama.cpp ------------------------------------------------------------------------------
def test_smollm2_names_a_template_without_tools_or_thinking(smollm2, run_fleet):
    """SmolLM2's own ChatML template renders no tools and opens no thinking: llama.cpp answers
    a forced call in text (/props supports_tools false, the tools dropped from the prompt) and
    plain chat without reasoning. Each failure names the template, not a serving flag."""
    server = smollm2(alias="smol")
    # Short answers, and time for them on a busy machine: the faults show in the first tokens.
    fleet = one_endpoint(server.url, alias="smol", timeout=300, min_tokens_per_s=0.5, expect={
        "tools": {"max_tokens": 24, "stream": False},
        "reasoning": {"max_tokens": 24, "stream": False, "thinking_off": False}})
    result = run_fleet(fleet, "-k", "test_tools_required or (test_reasoning and not effort)")
    result.assert_outcomes(failed=2, skipped=2)  # streamed and off: not asked
    out = result.stdout.str()
    result.stdout.fnmatch_lines([  # in the order of the report: reasoning, then tools
        "*with no reasoning (`reasoning_content` / `reasoning` empty or absent): the served chat "
        "template has no thinking (/props chat_template names no thinking block, "
        "enable_thinking or reasoning_content), so this model answers without thinking here",
        "  fix: serve a thinking model with its own template*",
        "*no tool call: answered * the chat template cannot carry tools (/props "
        "chat_template_caps.supports_tools false; the prompt counted * tokens with the tools "
        "and * without them): the engine drops them without a word and the model never sees "
        "them; cause: the engine's chat template and the parser it selects (the engine's own "
        "render: /props chat_template_caps.supports_tools false*",
        "  fix: serve a model whose own template renders tools*"])
    counted = re.search(r"counted (\d+) tokens with the tools and (\d+) without", out)
    assert counted and counted.group(1) == counted.group(2), out[-3000:]
    for wrong in ("so thinking opens", "although thinking is on by default", "--jinja"):
        assert wrong not in out, out[-3000:]


def _forced_call(body):
    """A gateway that forces a tool call on every chat request (a global grammar's effect)."""
    if "messages" in body and not body.get("tools"):
        return {**body, "tools": [tools.WEATHER], "tool_choice": "required"}
    return body


def _capped(body):
    """A gateway that caps every answer at 3 tokens, whatever the client asked."""
    return {**body, "max_tokens": 3} if "messages" in body else body


def _messages(payload, change):
    for choice in payload.get("choices") or []:
        change(choice.get("message") or {})
    return payload


def _drop_reasoning(payload):
    return _messages(payload, lambda m: m.pop("reasoning_content", None))


def _fold_thinking(payload):
    """A gateway that puts the thinking back into content, as <think>...</think>."""
    def fold(m):
        if m.get("reasoning_content"):
            m["content"] = f"<think>{m.pop('reasoning_content')}</think>{m.get('content') or ''}"
    return _messages(payload, fold)


def _calls(change):
    def each(m):
        for call in m.get("tool_calls") or []:
            change(call["function"])
    return lambda payload: _messages(payload, each)


def _never_calls(payload):
    """Whole answers with the call taken out: what a model that never opens a call sends (no
    model here declines a forced call: llama.cpp's grammar writes one for the self-test
    models, and SmolLM2's template drops the tools). The template's caps and the prompt's
    size with and without the tools stay the real server's."""
    def text(m):
        if m.pop("tool_calls", None) is not None:
            m["content"] = "Paris will be sunny tomorrow."
    for choice in payload.get("choices") or []:
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return _messages(payload, text)


RENAMED = _calls(lambda f: f.__setitem__("name", "weather"))
EMPTIED = _calls(lambda f: f.update(name="get_weather", arguments="{}"))
NO_THINK_OFF = {"thinking_off": False}
PROXIED = [  # (id, request rewrite, answer rewrite, expect, -k, outcomes, lines, never)
    ("healthy", None, None, {"reasoning": NO_THINK_OFF, "tools": True},
     "(test_reasoning and not effort and not off) or test_tools_required or "
     "test_tools_streamed or test_tools_plain", {"passed": 5}, [], []),
    ("plain-answers-lose-reasoning", None, _drop_reasoning, {"reasoning": NO_THINK_OFF},
     "test_reasoning and not effort and not off", {"failed": 1, "passed": 1},
     ["*chat answered 'Hello!' with no reasoning (`reasoning_content` / `reasoning` empty or "
      "absent), while the streamed answer to the same prompt carried it in "
      "`reasoning_content`: the template thinks and the engine splits the thinking out; the "
      "plain (non-streamed) path loses the field*",
      "  fix: make the proxy or gateway pass `reasoning_content` through on plain "
      "(non-streamed) answers, as it does on streamed ones"], ["--jinja"]),
    ("every-chat-forced-into-a-call", _forced_call, None, {"reasoning": True, "tools": True},
     "(test_reasoning and not effort and not streamed and not off) or test_tools_plain",
     {"failed": 2},
     ["*chat without tools came back as a tool call (get_weather): every request is forced "
      "into tool-call output*", "*plain chat without tools came back as a tool call*"],
     ["landed in reasoning", "--reasoning-format"]),
    ("answers-capped-at-3-tokens", _capped, None, {"reasoning": True},
     "test_reasoning and not effort and not streamed and not off", {"failed": 1},
     ["*finish_reason 'length' after 3 token(s) (usage) of the max_tokens=512 asked, with "
      "'Thinking' of reasoning and no answer: the budget was not spent*",
      "  fix: look for what lowers max_tokens on the way*"],
     ["did not end within", "whole budget"]),
    ("thinking-folded-into-content", None, _fold_thinking,
     {"params": {k: k == "response_format" for k in ("max_tokens", "stop", "response_format",
                                                      "logprobs", "stream_usage",
                                                      "context_limit")}},
     "test_params_response_format and not variants", {"failed": 1},
     ["*response_format json_schema: the content holds the model's thinking ('<think>Thinking"
      "</think>*'); the JSON after it validates, so the schema is enforced: the reasoning "
      "parser is off or wrong*", "  fix: start llama-server with --reasoning-format deepseek*"],
     ["not enforced"]),
    ("model-never-opens-a-call", None, _never_calls, {"tools": {"stream": False}},
     "test_tools_required", {"failed": 1},
     ["*no tool call: answered 'Paris will be sunny tomorrow.' (finish_reason 'stop'): the "
      "template carries the tools (/props chat_template_caps.supports_tools true; the prompt "
      "grew from * to * tokens with the tools) and the model still answered in text, a model "
      "limit, not a serving fault; cause: the model itself (the unstreamed request fails, "
      "again when asked once more*", "  fix: serve a model trained to call tools*"],
     ["--jinja", "cannot carry"]),
    ("whole-answers-rename-the-tool", None, RENAMED, {"tools": True},
     "test_tools_required or test_tools_streamed", {"failed": 1, "passed": 1},
     ["*wrong name: 'weather' is not an offered tool*"], ["streaming tool parser"]),
    ("whole-answers-lose-the-arguments", None, EMPTIED, {"tools": {"stream": False}},
     "test_tools_required", {"failed": 1},
     ["*0/1 trial(s) valid (0%, need 100%); missing required: get_weather lacks 'city', "
      "'days'; cause unknown (seen: missing required*"], []),
]


@pytest.mark.parametrize("request_rewrite, answer_rewrite, expect, select, outcomes, lines, never",
                         [c[1:] for c in PROXIED], ids=[c[0] for c in PROXIED])
def test_a_gateway_in_front_of_llamacpp_is_named(llama, run_fleet, request_rewrite,
                                                 answer_rewrite, expect, select, outcomes,
                                                 lines, never):
    """Real llama.cpp on the self-test model, behind a gateway that rewrites requests or whole
    answers: each fault fails with the cause the server showed; the healthy pass-through
    passes."""
    server = llama(alias="m")
    answer = answer_rewrite and (lambda request, answer: answer_rewrite(answer))
    with Proxy(server.url, rewrite=request_rewrite, rewrite_answer=answer) as gateway:
        result = run_fleet(one_endpoint(gateway.url, alias="m", expect=expect), "-k", select)
    result.assert_outcomes(**outcomes)
    result.stdout.fnmatch_lines(lines)
    out = result.stdout.str()
    for text in never:
        assert text not in out, out[-3000:]
