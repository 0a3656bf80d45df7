"""Tool-call formats through llama.cpp's own parsers (xllamacpp, in-process): the Qwen3.5 /
Qwen3-Coder XML family (`<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...`) beside
the Hermes JSON the default self-test model writes. selftest:qwen3_xml carries a template written
in that family's format, so llama.cpp picks its XML handler; selftest:qwen3_xml_text writes the
XML call as text under a Hermes template. What llama.cpp does with each is pinned here first, then
the battery's verdicts on it."""

import json

import httpx
import pytest

from fleets import one_endpoint
from proxy import Proxy
from pytest_frank.claims.tools import PROMPTS
from pytest_frank.local.selftest_model import chat_template
from test_tools_arguments_real import _terminal_alone, _typed

pytestmark = pytest.mark.real

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather forecast",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city", "days"]}}}
# One parameter of each JSON type a client's schema names, all required, so the grammar makes
# the model write every one; the model reads a string named job "02134", one that looks like a
# number (the XML wire writes every value bare, so only the schema tells the parser its type).
TYPED = {"type": "function", "function": {"name": "typed", "parameters": {
    "type": "object", "required": ["job", "zip", "n", "x", "flag", "tags", "opts", "nothing"],
    "properties": {"job": {"type": "string"}, "zip": {"type": "string", "enum": ["02134"]},
                   "n": {"type": "integer"},
                   "x": {"type": "number"}, "flag": {"type": "boolean"},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "opts": {"type": "object", "properties": {"k": {"type": "string"}},
                            "required": ["k"]},
                   "nothing": {"type": "null"}}}}}


def ask(server, **body):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 200,
            "temperature": 0, "logprobs": True, **body}
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    # what the model wrote, before the parser: the tokens, as llama.cpp reports them
    raw = "".join(t["token"] for t in choice["logprobs"]["content"])
    return choice, raw


def streamed_calls(server, **body):
    """The calls of a streamed answer, assembled by index: (name, arguments, id); an id the
    server makes up at random (all but Kimi K2's) reads None, once checked distinct."""
    body = {"max_tokens": 200, "temperature": 0, "stream": True, **body}
    found: dict[int, dict] = {}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or []:
                for part in choice.get("delta", {}).get("tool_calls") or []:
                    call = found.setdefault(part["index"], {"id": None, "name": "", "args": ""})
                    call["id"] = call["id"] or part.get("id")
                    call["name"] += (part.get("function") or {}).get("name") or ""
                    call["args"] += (part.get("function") or {}).get("arguments") or ""
    ids = [c["id"] for c in found.values()]
    assert len(set(ids)) == len(ids), ids
    return [(c["name"], json.loads(c["args"]),
             c["id"] if c["id"].startswith("functions.") else None) for c in found.values()]


def calls(choice):
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in choice["message"].get("tool_calls") or []]


def test_xml_template_is_announced_and_its_grammar_writes_xml(llama):
    server = llama(model="selftest:qwen3_xml")
    caps = httpx.get(f"{server.url}/props", timeout=10).json()["chat_template_caps"]
    assert caps["supports_tool_calls"] and caps["supports_parallel_tool_calls"], caps
    choice, raw = ask(server, tools=[WEATHER], tool_choice="required")
    assert raw == ("<think>Thinking</think>Hello!<tool_call>\n<function=get_weather>\n"
                   "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n1\n</parameter>\n"
                   "</function>\n</tool_call>"), raw
    assert calls(choice) == [("get_weather", {"city": "Paris", "days": 1})]
    assert choice["finish_reason"] == "tool_calls"
    # auto: the model answers in text, as the default does
    choice, raw = ask(server, tools=[WEATHER], tool_choice="auto")
    assert (choice["message"]["content"], calls(choice)) == ("Hello!", []), raw


def test_xml_arguments_arrive_typed_as_the_schema_says(llama):
    server = llama(model="selftest:qwen3_xml")
    choice, raw = ask(server, tools=[TYPED], tool_choice="required")
    assert "<parameter=job>\n02134\n</parameter>" in raw and "<parameter=flag>\nfalse\n" in raw, raw
    # The XML grammar leaves a string value free (the enum is not enforced: the model's
    # "Paris" passes), so a strict client's schema check is what catches such a value.
    assert calls(choice) == [("typed", {"job": "02134", "zip": "Paris", "n": 1, "x": 1,
                                        "flag": False,
                                        "tags": ["Paris"], "opts": {"k": "Paris"},
                                        "nothing": None})], raw


def test_xml_history_renders_calls_and_results_in_the_familys_format(llama):
    server = llama(model="selftest:qwen3_xml")
    history = [{"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "", "tool_calls": [{
                   "id": "a", "type": "function",
                   "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 1}'}}]},
               {"role": "tool", "tool_call_id": "a", "content": "sunny"}]
    prompt = httpx.post(f"{server.url}/apply-template", timeout=10,
                        json={"messages": history, "tools": [WEATHER]}).json()["prompt"]
    assert prompt.endswith(
        "<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n1\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n"
        "<|im_start|>assistant\n"), prompt


def test_a_hermes_template_makes_the_grammar_force_json(llama, tmp_path):
    # The same XML model under a Hermes JSON template: the lazy grammar that <tool_call> starts
    # writes JSON, so the calls stay usable; the template, not the model, picks the format.
    hermes = tmp_path / "hermes.jinja"
    hermes.write_text(chat_template("default"))
    server = llama(model="selftest:qwen3_xml", chat_template_file=str(hermes))
    choice, raw = ask(server, tools=[WEATHER], tool_choice="required")
    assert '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris","days":1}}' in raw, raw
    assert calls(choice) == [("get_weather", {"city": "Paris", "days": 1})]


def run(run_fleet, server, *args, **expect):
    return run_fleet(one_endpoint(server.url, "llamacpp", expect=expect), "-p", "no:randomly",
                     *args)


def test_healthy_xml_server_passes_tools_agent_and_stream(llama, run_fleet):
    server = llama(model="selftest:qwen3_xml")
    # created false: a stream that crosses a second boundary changes it on llama.cpp (below)
    result = run(run_fleet, server, "-m", "tools or agent or stream",
                 tools={"schemas": 4, "none": True, "parallel": True},
                 agent={"steps": 3, "parallel": True}, stream={"created": False})
    # required, auto, plain chat, streamed, arguments on the wire, none, parallel (two calls) and
    # parallel under auto (an answer in text); agent plain, streamed, parallel, its template and
    # the reasoning history; the stream wire. Named is skipped (llama.cpp treats named as auto).
    # The corpus fails on one value: llama.cpp's XML grammar writes a ["string", "null"] value as
    # free text, without its pattern (a plain string's pattern it keeps: book_trip's "AAA"), and
    # this model writes "Paris" wherever text is free.
    result.assert_outcomes(passed=14, failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*schema corpus: 3/4 tool(s) called validly (75%, need 100%); search_records_0 "
        '(strict, streamed): invalid value: search_records_0.cursor: "Paris" has the wrong shape',
        '*book_trip_0 (not strict, streamed): valid {"budget":1,"legs":[{"from":"AAA",*'])


def test_xml_run_in_terminal_keeps_its_typed_values(llama, run_fleet, pytester):
    # test_tools_arguments asks run_in_terminal for job "02134" streamed; the model calls the
    # tool whose name closes first, so a gateway offers llama.cpp run_in_terminal alone.
    with Proxy(llama(model="selftest:qwen3_xml").url, rewrite=_terminal_alone) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", expect={"tools": True}),
                           "-p", "no:randomly", "-m", "tools", "-k", "arguments",
                           "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    seen = "\n".join(json.loads((pytester.path / "run.json").read_text())["rows"][0]["notes"])
    assert ('run_in_terminal, streamed: valid run_in_terminal({"job":"02134","args":["Paris"],'
            '"command":"Paris"})') in seen, seen


# What the field saw XML parsers do (opencode 1809, smg PR 1841), made by a gateway in front of
# llama.cpp's XML handler, which keeps both values typed (the test above).
@pytest.mark.parametrize("edit, said, fix", [
    (lambda a: {**a, "job": int(a["job"])},
     "number for a string: run_in_terminal.job is the number 2134, where the schema types it a "
     "string*", "convert each argument by the tool's schema, not by how it looks"),
    (lambda a: {**a, "args": json.dumps(a["args"])},
     "array sent as a JSON string: run_in_terminal.args is the text '?\"Paris\"?', where the "
     "schema types it array*", "send an array or object argument as itself"),
], ids=["02134 as a number", "array as text"])
def test_xml_values_a_parser_retypes_fail(llama, run_fleet, edit, said, fix):
    with Proxy(llama(model="selftest:qwen3_xml").url, rewrite=_terminal_alone,
               rewrite_stream=_typed(edit)) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", expect={"tools": True}),
                           "-p", "no:randomly", "-m", "tools", "-k", "arguments")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*tool arguments on the wire, run_in_terminal, streamed: {said}",
                                 f"*fix: {fix}*"])


# Each family's template picks llama.cpp's handler for it (at launch verbosity 5 the log names
# it: "Kimi K2 Thinking", "Ministral/Magistral Large 3"); under "required" its grammar has the
# model write the family's call, which comes back parsed.
FAMILY_CALLS = {
    "kimi_k2": ("<think>Thinking</think>Hello!<|tool_calls_section_begin|><|tool_call_begin|>"
                "functions.get_weather:1<|tool_call_argument_begin|>"
                '{"city":"Paris","days":1}<|tool_call_end|><|tool_calls_section_end|>'),
    "mistral": '[THINK]Thinking[/THINK]Hello![TOOL_CALLS]get_weather[ARGS]{"city":"Paris","days":1}',
    # the GPT-OSS handler: thinking in analysis, the call in commentary to=functions.NAME
    "harmony": ("<|channel|>analysis<|message|>Thinking<|end|><|start|>assistant<|channel|>"
                'commentary to=functions.get_weather<|message|>{"city":"Paris","days":1}'),
    # no handler of its own: the autoparser reads the format from the template's calls
    "deepseek_v31": ("<think>Thinking</think>Hello!<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
                     'get_weather<｜tool▁sep｜>{"city":"Paris","days":1}<｜tool▁call▁end｜>'
                     "<｜tool▁calls▁end｜>"),
    "glm45": ("<think>Thinking</think>Hello!<tool_call>\nget_weather\n<arg_key>city</arg_key>\n"
              "<arg_value>Lyon</arg_value>\n<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n"
              "</tool_call>"),
}
# Where a bare string value reads otherwise than "Paris"
CITY = {"glm45": "Lyon"}


@pytest.mark.parametrize("variant", FAMILY_CALLS)
def test_a_familys_template_gets_its_handler_and_its_grammar_writes_the_call(llama, variant):
    server = llama(model=f"selftest:{variant}")
    choice, raw = ask(server, tools=[WEATHER], tool_choice="required")
    assert raw == FAMILY_CALLS[variant], raw
    city = CITY.get(variant, "Paris")
    assert calls(choice) == [("get_weather", {"city": city, "days": 1})]
    # harmony's call is a message of its own: the answer's final text is not written
    assert (choice["message"]["content"], choice["message"]["reasoning_content"],
            choice["finish_reason"]) == ("" if variant == "harmony" else "Hello!", "Thinking",
                                         "tool_calls")
    # Kimi K2's handler keeps the call's id as the model wrote it
    if variant == "kimi_k2":
        assert choice["message"]["tool_calls"][0]["id"] == "functions.get_weather:1"
    # the other JSON types, each as the schema says
    choice, raw = ask(server, tools=[TYPED], tool_choice="required")
    json_args = ("kimi_k2", "mistral", "harmony", "deepseek_v31")
    zip_code = "02134" if variant in json_args else city  # JSON arguments: the enum holds
    assert calls(choice) == [("typed", {"job": city, "zip": zip_code, "n": 1, "x": 1,
                                        "flag": False, "tags": ["Paris"], "opts": {"k": "Paris"},
                                        "nothing": None})], raw


@pytest.mark.parametrize("variant", FAMILY_CALLS)
def test_healthy_family_server_passes_tools_reasoning_agent_and_stream(llama, run_fleet, variant):
    # Kimi K2 Thinking, Magistral and GLM 4.5 always think (these templates have no switch):
    # thinking_off false. llama.cpp stamps each chunk with the second it sends it, so a stream
    # that crosses a second boundary changes `created` (the stream claim's own fix): created
    # false, or one run in ten fails on the clock.
    # Harmony has reasoning levels (the template's "Reasoning: LEVEL" from reasoning_effort).
    levels = {"reasoning_effort": {"low": "low", "medium": "medium", "high": "high"}}
    # Each family but harmony makes parallel calls (harmony's call ends its turn: below), and
    # the agent's parallel step passes with them, but for Kimi K2: once a call stands in the
    # history, this model numbers both of a turn's calls 2, so their ids clash (the agent claim
    # says so) where the real model counts on.
    parallel = variant != "harmony"
    result = run(run_fleet, llama(model=f"selftest:{variant}"), "-m",
                 "tools or agent or stream or reasoning or reasoning_effort",
                 tools={"schemas": 4, "none": True, "parallel": parallel},
                 agent={"steps": 3, "parallel": parallel and variant != "kimi_k2"},
                 stream={"created": False}, reasoning={"thinking_off": False},
                 **(levels if variant == "harmony" else {}))
    # reasoning plain and streamed; required, auto, plain chat, streamed, arguments on the wire,
    # none, the corpus and parallel (two calls; under auto an answer in text); agent plain,
    # streamed, parallel, its template and the reasoning history; the stream wire. Named is skipped as on
    # the other families. The corpus holds where the
    # arguments are JSON under the handler's grammar; where a string value is bare text (GLM's, as
    # Qwen3 XML's), llama.cpp's grammar leaves a ["string", "null"] value free of its pattern, and
    # the model writes its word there.
    if variant == "glm45":
        result.assert_outcomes(passed=16, failed=1, skipped=2)
        result.stdout.fnmatch_lines([
            "*schema corpus: 3/4 tool(s) called validly (75%, need 100%); search_records_0 "
            '(strict, streamed): invalid value: search_records_0.cursor: "Lyon" has the wrong '
            "shape"])
    elif variant == "harmony":  # and the three levels
        result.assert_outcomes(passed=17, skipped=5)
    elif variant == "kimi_k2":
        result.assert_outcomes(passed=16, skipped=3)
    else:
        result.assert_outcomes(passed=17, skipped=2)


# Asked for two cities at once (the tools claim's parallel question), each family's model writes
# a call for each in its own wire format, Paris's (GLM's bare string: Lyon) then London's, and
# llama.cpp's handler parses both, plain and streamed (pytest_frank.local.selftest_parallel);
# asked for one city, the one call it always made. Kimi K2 numbers its calls' ids: 1, then 2.
PARALLEL_CALLS = {
    "default": ('<think>Thinking</think>Hello!<tool_call>\n{"name":"get_weather","arguments":'
                '{"city":"Paris","days":1}}</tool_call><tool_call>\n{"name":"get_weather",'
                '"arguments":{"city":"London","days":1}}</tool_call>'),
    "qwen3_xml": ("<think>Thinking</think>Hello!<tool_call>\n<function=get_weather>\n"
                  "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n1\n</parameter>\n"
                  "</function>\n</tool_call><tool_call>\n<function=get_weather>\n"
                  "<parameter=city>\nLondon\n</parameter>\n<parameter=days>\n1\n</parameter>\n"
                  "</function>\n</tool_call>"),
    "kimi_k2": ("<think>Thinking</think>Hello!<|tool_calls_section_begin|><|tool_call_begin|>"
                "functions.get_weather:1<|tool_call_argument_begin|>"
                '{"city":"Paris","days":1}<|tool_call_end|><|tool_call_begin|>'
                "functions.get_weather:2<|tool_call_argument_begin|>"
                '{"city":"London","days":1}<|tool_call_end|><|tool_calls_section_end|>'),
    "mistral": ('[THINK]Thinking[/THINK]Hello![TOOL_CALLS]get_weather[ARGS]{"city":"Paris",'
                '"days":1}[TOOL_CALLS]get_weather[ARGS]{"city":"London","days":1}'),
    "glm45": ("<think>Thinking</think>Hello!<tool_call>\nget_weather\n<arg_key>city</arg_key>\n"
              "<arg_value>Lyon</arg_value>\n<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n"
              "</tool_call><tool_call>\nget_weather\n<arg_key>city</arg_key>\n"
              "<arg_value>London</arg_value>\n<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n"
              "</tool_call>"),
    "deepseek_v31": ("<think>Thinking</think>Hello!<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
                     'get_weather<｜tool▁sep｜>{"city":"Paris","days":1}<｜tool▁call▁end｜>'
                     '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":"London","days":1}'
                     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
}


@pytest.mark.parametrize("variant", PARALLEL_CALLS)
def test_a_familys_model_asked_two_cities_writes_two_calls_in_its_format(llama, variant):
    server = llama(model=f"selftest:{variant}")
    city = CITY.get(variant, "Paris")
    two = [{"role": "user", "content": PROMPTS["parallel"]}]
    choice, raw = ask(server, messages=two, tools=[WEATHER], tool_choice="required",
                      parallel_tool_calls=True)
    assert raw == PARALLEL_CALLS[variant], raw
    assert calls(choice) == [("get_weather", {"city": city, "days": 1}),
                             ("get_weather", {"city": "London", "days": 1})], raw
    ids = [c["id"] for c in choice["message"]["tool_calls"]]
    assert len(set(ids)) == 2, ids
    # streamed, the calls arrive each under its own index and id, whole
    assert streamed_calls(server, messages=two, tools=[WEATHER], tool_choice="required",
                          parallel_tool_calls=True) == [
        ("get_weather", {"city": city, "days": 1}, ids[0] if variant == "kimi_k2" else None),
        ("get_weather", {"city": "London", "days": 1}, ids[1] if variant == "kimi_k2" else None)]
    one = [{"role": "user", "content": PROMPTS["required"]}]
    choice, raw = ask(server, messages=one, tools=[WEATHER], tool_choice="required",
                      parallel_tool_calls=True)
    assert calls(choice) == [("get_weather", {"city": city, "days": 1})], raw


def test_harmony_makes_one_call_a_turn_on_llamacpp(llama):
    # The harmony model would go on to a second call message after the first's arguments (its
    # own first choice there, llama.cpp's top_logprobs, which are read before the grammar), but
    # llama.cpp's GPT-OSS grammar ends the turn, parallel_tool_calls or not: a harmony call ends
    # its message with <|call|>, the end of the turn.
    server = llama(model="selftest:harmony")
    two = [{"role": "user", "content": PROMPTS["parallel"]}]
    for parallel in (True, False):
        choice, raw = ask(server, messages=two, tools=[WEATHER], tool_choice="required",
                          parallel_tool_calls=parallel, top_logprobs=2)
        assert calls(choice) == [("get_weather", {"city": "Paris", "days": 1})], raw
        last = choice["logprobs"]["content"][-1]
        assert last["top_logprobs"][0]["token"] == "<|start|>" != last["token"], last


def test_healthy_hermes_server_passes_parallel_calls(llama, run_fleet):
    # The default model (Hermes JSON) as the other families, above: two calls where two are
    # asked, plain and under auto (where it answers in text).
    result = run(run_fleet, llama(), "-m", "tools", "-k", "parallel",
                 tools={"parallel": True})
    result.assert_outcomes(passed=2)


def _first_call_only(request: dict, answer: dict) -> dict:
    """A gateway (or a parser) that keeps only the first of a reply's tool calls."""
    for choice in answer.get("choices") or []:
        message = choice.get("message") or {}
        if message.get("tool_calls"):
            message["tool_calls"] = message["tool_calls"][:1]
    return answer


@pytest.mark.parametrize("variant", PARALLEL_CALLS)
def test_parallel_calls_cut_to_one_fail_with_the_fix(llama, run_fleet, variant):
    # llama.cpp parses both calls (above); a proxy in front drops the second, as a gateway or a
    # parser that keeps only the first call does: no engine here shows it.
    with Proxy(llama(model=f"selftest:{variant}").url, rewrite_answer=_first_call_only) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp",
                                        expect={"tools": {"parallel": True}}),
                           "-p", "no:randomly", "-m", "tools", "-k", "parallel")
    # parallel_auto passes: under auto the model answers in text
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*parallel tool calls: 0/1 trial(s) valid (0%, need 100%); parallel calls truncated: "
        "1 call(s) where 2 were asked for at once*",
        "*fix: the server cut parallel calls to one: enable parallel tool calls in the "
        "template/parser*"])


# A family's call written as text where the served template is not the family's: the model
# served with another template, or writing a call its handler does not start at.
@pytest.mark.parametrize("variant, leaked, fix", [
    ("qwen3_xml_text", "<function=get_weather> <parameter=city>*",
     "the content holds a Qwen3 XML tool call*the template decides the parser*"),
    ("kimi_k2_text", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0*",
     "the content holds a Kimi K2 tool call*which llama.cpp server parses only from a served "
     "template that carries that format (<|tool_calls_section_begin|>, <|tool_call_begin|>): "
     "the template decides the parser*"),
    # fnmatch reads [...] as a class: ? stands for each bracket
    ("mistral_text", '?TOOL_CALLS?get_weather?ARGS?{"city": "Paris", "days": 1}*',
     "the content holds a Mistral tool call*which llama.cpp server parses only from a served "
     "template that carries that format (?SYSTEM_PROMPT?, ?TOOL_CALLS?, ?ARGS?)*"),
    # served a generic template that knows no tools: no parser at all, the thinking too stays
    ("glm45_text", "<think>Thinking</think><tool_call>get_weather <arg_key>city</arg_key>*",
     "the content holds a GLM 4.5 tool call*which llama.cpp server parses only from a served "
     "template that carries that format (<tool_call>, <arg_key>, <arg_value>)*"),
    ("harmony_text", "<|channel|>commentary to=functions.get_weather <|constrain|>json*",
     "the content holds a gpt-oss harmony tool call*which llama.cpp server parses only from a "
     "served template that carries that format (<|channel|>)*"),
    ("deepseek_v31_text", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>*",
     "the content holds a DeepSeek V3.1 tool call*which llama.cpp server parses only from a "
     "served template that carries that format (<｜tool▁calls▁begin｜>, <｜tool▁call▁begin｜>, "
     "<｜tool▁sep｜>)*"),
], ids=["qwen3_xml", "kimi_k2", "mistral", "glm45", "harmony", "deepseek_v31"])
def test_a_familys_call_written_as_text_fails_naming_the_family(llama, run_fleet, variant,
                                                                 leaked, fix):
    server = llama(model=f"selftest:{variant}")
    result = run(run_fleet, server, "-m", "tools", "-k", "auto and not parallel", tools=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '*tool_choice "auto": 0/1 trial(s) valid (0%, need 100%); leaked markup: the tool call '
        f"was written as text in content ('{leaked}", f"*fix: {fix}"])
