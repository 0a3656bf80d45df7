"""Any reply becomes a verdict line. Hypothesis feeds every probe arbitrary JSON values, JSON shaped
like the engine's own with parts replaced or removed, SSE streams and metrics text, on each route
it reads, through the recorder real runs use (an in-process Target over loopback HTTP to the
emulator); each battery check must end in one bounded failure, skip or pass, never an exception,
nor a verdict that only names one (Target words a probe's own crash as "could not read what
... sent: AttributeError: ...": a bug of the probe, not of the endpoint).

Which engine shape each fuzzed route imitates (the other routes answer as that engine does):
  /health                llama.cpp {"status": "ok"}, vLLM and SGLang an empty 200, the Anthropic
                         proxy {"status": "ok"}
  /v1/models             each engine's model cards (llama.cpp with aliases and meta, vLLM and
                         SGLang with max_model_len, the Anthropic list with display_name)
  /props, /slots         llama.cpp (total_slots, n_ctx, model_path, modalities, build_info)
  /metrics               Prometheus text: llama.cpp and vLLM spec_decode counters, SGLang
                         spec_accept gauges, vLLM cache_config_info, dcgm-exporter FB gauges
  /version               vLLM; /get_server_info SGLang
  /v1/chat/completions   OpenAI chat JSON and SSE chunks (llama.cpp with timings, vLLM, SGLang,
                         a generic OpenAI server)
  /v1/messages           Anthropic Messages JSON and SSE events (the proxy)
  /v1/responses          Responses JSON and named SSE events, as llama.cpp sends them (api:
                         responses)

Examples per route and engine shape: EXAMPLES below (the whole file runs in about a minute).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace

import pytest
from emulator import (
    SHAPES,
    Emulator,
    Reply,
    chat_json,
    chat_stream,
    messages_json,
    metrics_text,
    serve_chat,
    sse,
    serve_messages,
    tool_call,
)
from fleets import one_endpoint
from healthy_engines import ARGS, healthy_chat, healthy_messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_frank.base import redact
from pytest_frank.plugin import rows
from pytest_frank.runtime import identify
from pytest_frank.claims.agent import chain as agent_chain
from pytest_frank.claims.agent import reasoning_history
from pytest_frank.claims import (
    agent,
    bind,
    alias,
    health,
    load,
    params,
    perf,
    reasoning,
    reasoning_effort,
    slots,
    spec_decode,
    stream,
    tools,
    vision,
    vram,
)
from pytest_frank.drivers import DRIVERS
from pytest_frank.plugin.under_test import EndpointUnderTest
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.target import Target

pytestmark = pytest.mark.emulated

# Hypothesis examples per (route, engine shape): each generation example runs every generation
# check once (16 checks, some 30 requests), a cheap route's example a few checks.
EXAMPLES = {"chat": 12, "messages": 12, "responses": 12, "cheap": 40}
# The longest line a verdict may be: a message is cut to MAX_MESSAGE, a wrong-engine line and a
# fix may stand beside it.
LONGEST = redact.MAX_MESSAGE + 1000
# Python's own errors: a verdict naming one is a probe or judge that broke on the reply.
PYTHON_ERROR = re.compile(r"\b(Attribute|Type|Key|Index|Value|Name|UnboundLocal|ZeroDivision|"
                          r"Overflow|Recursion|Assertion|Lookup|Arithmetic|Unicode\w*)Error\b"
                          r"|\bStopIteration\b")
# Target's words for any exception a probe let out, whatever its class: a reply it did not foresee.
ESCAPED = re.compile(r"\w could not read what \S+ sent: ")

# -- what the fuzzing draws: JSON values, engine-shaped JSON with parts replaced, SSE, metrics ---
ODD = st.sampled_from([None, True, False, 0, -1, 1.5, 10**400, float("nan"), float("inf"), "",
                       "lots", "x" * 6000, "\x1b]0;owned\x07", [], {}, [1, 2, 3], {"a": None}])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | ODD
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)


def _paths(doc, at=()):
    """Every place in a JSON document a value sits: (path to its container, key)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield at, key
        yield from _paths(value, (*at, key))


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated(draw, valid):
    """The engine's own document with one to three values replaced by anything, or removed."""
    doc = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, 3))):
        places = list(_paths(doc))
        if not places:
            break
        path, key = draw(st.sampled_from(places))
        container = _at(doc, path)
        if draw(st.booleans()):  # a copy: later steps edit it in place, and ODD's values are shared
            container[key] = copy.deepcopy(draw(JSON))
        else:
            del container[key]
    return doc


def shaped(valid):
    """Mostly the engine's shape gone wrong somewhere, sometimes any JSON at all."""
    return st.one_of(mutated(valid), mutated(valid), JSON)


def _dumps(value) -> str:
    return json.dumps(value)  # NaN and Infinity as Python's servers write them


def json_reply(valid):
    """A 200 (mostly) with a JSON body, an error status, or a body that is not JSON."""
    status = st.sampled_from([200] * 6 + [302, 400, 404, 500, 503])
    body = shaped(valid).map(_dumps) | st.text(max_size=60) | st.just("")
    return st.builds(lambda s, b: Reply(s, b, {"content-type": "application/json"}), status, body)


@st.composite
def sse_stream(draw, events, named=False):
    """SSE built from the engine's events: some replaced or dropped, junk lines, [DONE] or not."""
    lines = []
    for event in draw(st.lists(st.sampled_from(events), max_size=len(events) + 2)
                      | st.just(list(events))):
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from(["data: {", "data: ", ": ping", "event: error",
                                                "retry: x", "data: [DONE]", "junk"])
                              | st.text(max_size=30).map(lambda t: f"data: {t}")))
            continue
        event = draw(mutated(event)) if draw(st.booleans()) else event
        if named:
            kind = event.get("type") if isinstance(event, dict) else None
            lines.append(f"event: {kind if isinstance(kind, str) else draw(st.text(max_size=8))}")
        lines.append(f"data: {_dumps(event)}")
        lines.append("")
    if draw(st.booleans()):
        lines += ["data: [DONE]", ""]
    text = "\n".join(line.replace("\n", " ").replace("\r", " ") for line in lines) + "\n"
    return Reply(200, text, {"content-type": "text/event-stream"})


SERIES = ["llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_drafts_total",
          "llamacpp:spec_decode_num_accepted_tokens_total",
          "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
          "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_drafts_total",
          "vllm:spec_decode_num_accepted_tokens_total",
          "vllm:spec_decode_num_accepted_tokens_per_pos_total", "vllm:cache_config_info",
          "sglang:spec_accept_rate", "sglang:spec_accept_length", "DCGM_FI_DEV_FB_USED",
          "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "llamacpp:prompt_tokens_total"]
LABELS = ["position", "gpu", "UUID", "modelName", "Hostname", "num_gpu_blocks", "block_size",
          "gpu_memory_utilization", "model_name", "engine"]
VALUE = (st.sampled_from(["0", "1", "64", "-1", "NaN", "+Inf", "-Inf", "1e308", "0x10", "lots"])
         | st.integers().map(str) | st.floats().map(repr))
LABEL_VALUE = st.sampled_from(["0", "1", "²", "-1", "1e3", "None", "0.9", "NaN", ""]) \
    | st.text(max_size=8)


@st.composite
def metrics_series(draw):
    """Series the probes read, with values and labels of any kind, and any TYPE."""
    series = {}
    for name in draw(st.lists(st.sampled_from(SERIES), max_size=8)):
        labels = draw(st.lists(st.dictionaries(st.sampled_from(LABELS), LABEL_VALUE, max_size=3),
                               min_size=1, max_size=3))
        series[name] = [({k: _escaped(v) for k, v in lab.items()}, draw(VALUE)) for lab in labels]
    kinds = draw(st.dictionaries(st.sampled_from([s.removesuffix("_total") for s in SERIES]),
                                 st.sampled_from(["counter", "gauge", "histogram", "info", "x"]),
                                 max_size=3))
    return metrics_text(series, kinds)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


METRICS = st.builds(lambda text: Reply(200, text, {"content-type": "text/plain"}),
                    metrics_series() | st.text(max_size=200)
                    | st.text(max_size=80).map(lambda t: f"llamacpp:{t} 1\nvllm:{t} 2\n"))

# -- the engines' own documents, the seeds of the mutations ---------------------------------------
CHAT = chat_json("Hello!", reasoning_content="Thinking", tool_calls=[
    tool_call("get_weather", ARGS["get_weather"]), tool_call("get_weather", ARGS["get_weather"],
                                                             "call_2")])
CHAT["timings"] = {"predicted_n": 64, "draft_n": 32, "draft_n_accepted": 24,
                   "predicted_per_second": 50.0}
CHAT_EVENTS = [json.loads(line[6:]) for line in chat_stream(CHAT).body.splitlines()
               if line.startswith("data: {")]
MESSAGE = messages_json("Hello!", thinking="Thinking",
                        tool_uses=[("get_weather", ARGS["get_weather"])], stop="tool_use")


def _message_events(message):
    from emulator import messages_stream

    text = messages_stream(message).body
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


MESSAGE_EVENTS = _message_events(MESSAGE)
# /v1/responses as llama.cpp answered it (reasoning item with reasoning_text, a message, a call).
RESPONSE_OUTPUT = [
    {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "",
     "content": [{"type": "reasoning_text", "text": "Thinking"}], "status": "completed"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Hello!", "annotations": [], "logprobs": [
         {"token": "Hello!", "logprob": -0.1, "top_logprobs": [{"token": "Hello!",
                                                                "logprob": -0.1}]}]}]},
    {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1",
     "name": "get_weather", "arguments": json.dumps(ARGS["get_weather"])}]
RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "model": "model",
            "output": RESPONSE_OUTPUT,
            "usage": {"input_tokens": 21, "output_tokens": 6, "total_tokens": 27,
                      "input_tokens_details": {"cached_tokens": 0}}}
RESPONSE_EVENTS = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0,
     "item": {**RESPONSE_OUTPUT[0], "content": [], "status": "in_progress"}},
    {"type": "response.reasoning_text.delta", "item_id": "rs_1", "delta": "Thinking"},
    {"type": "response.output_item.done", "output_index": 0, "item": RESPONSE_OUTPUT[0]},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hello!"},
    {"type": "response.output_item.done", "output_index": 1, "item": RESPONSE_OUTPUT[1]},
    {"type": "response.output_item.added", "output_index": 2,
     "item": {**RESPONSE_OUTPUT[2], "arguments": ""}},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
     "delta": RESPONSE_OUTPUT[2]["arguments"]},
    {"type": "response.output_item.done", "output_index": 2, "item": RESPONSE_OUTPUT[2]},
    {"type": "response.completed", "response": RESPONSE}]
PROPS = {"total_slots": 2, "model_path": "/models/m.gguf", "build_info": "b6000-abc",
         "modalities": {"vision": True}, "default_generation_settings": {"n_ctx": 4096}}
SLOTS = [{"id": 0, "n_ctx": 4096, "speculative": True}, {"id": 1, "n_ctx": 4096,
                                                        "speculative": True}]
HEALTHY_METRICS = metrics_text({
    "llamacpp:spec_decode_num_draft_tokens_total": 0, "vllm:spec_decode_num_draft_tokens_total": 0,
    "sglang:spec_accept_rate": 0.7, "sglang:spec_accept_length": 2.1,
    "DCGM_FI_DEV_FB_USED": [({"gpu": "0", "modelName": "GPU"}, 20000)],
    "DCGM_FI_DEV_FB_FREE": [({"gpu": "0", "modelName": "GPU"}, 4000)]})


# -- the endpoint under the fuzz: one emulator per engine shape, routes swapped per example -------
@pytest.fixture(scope="module", autouse=True)
def no_counter_lag():
    """spec_decode waits a second for counters that trail a reply; here none ever will."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spec_decode, "COUNTER_LAG", 0.0)
        yield


@pytest.fixture(scope="module")
def emulators():
    started = {}

    def get(engine):
        if engine not in started:
            started[engine] = Emulator(engine, models=["model"]).start()
        em = started[engine]
        healthy(em)
        return em

    yield get
    for em in started.values():
        em.stop()


def healthy(em: Emulator) -> None:
    """Every route as the engine answers it when well; a test then breaks one."""
    em.routes.clear()
    health_reply, models_body = SHAPES[em.engine]
    if health_reply is not None:
        em.route("GET", "/health", lambda r: health_reply)
    em.route("GET", "/v1/models", lambda r: Reply(200, models_body(em)))
    em.route("GET", "/props", lambda r: Reply(200, PROPS))
    em.route("GET", "/slots", lambda r: Reply(200, SLOTS))
    em.route("GET", "/metrics", lambda r: Reply(200, HEALTHY_METRICS))
    em.route("GET", "/version", lambda r: Reply(200, {"version": "0.11.0"}))
    em.route("GET", "/get_server_info", lambda r: Reply(200, {"version": "0.5.0"}))
    serve_chat(em, healthy_chat())
    serve_messages(em, healthy_messages)


EXPECT = {"reasoning": True, "reasoning_effort": {"map": {"high": "xhigh"}, "unmapped": True},
          "tools": {"parallel": True, "named": True}, "agent": {"parallel": True, "steps": 2},
          "spec_decode": {"min_draft_tokens": 1},
          "perf": {"runs": 1, "max_cached_ttft_ratio": 0.9}, "vision": True,
          "slots": {"count": 2, "ctx_per_slot": 4096}, "params": {"claude_code": True},
          "stream": True, "load": {"requests": 4, "concurrency": 2}}
GENERATION = [reasoning.REASONING, reasoning.STREAMED, reasoning.OFF, reasoning_effort.LEVEL,
              reasoning_effort.UNMAPPED, tools.REQUIRED, tools.AUTO, tools.NAMED_CHOICE,
              tools.PARALLEL, tools.PLAIN, tools.STREAMED, tools.WIRE, spec_decode.SPEC_DECODE,
              perf.TTFT,
              perf.DECODE, perf.PREFIX_CACHE, vision.VISION, params.MAX_TOKENS, params.STOP,
              params.RESPONSE_FORMAT, params.LOGPROBS, params.STREAM_USAGE, params.CONTEXT_LIMIT,
              params.COUNT_TOKENS, params.SYSTEM_MESSAGE,
              agent.PLAIN, agent.STREAMED, agent.PARALLEL, reasoning_history.HISTORY,
              stream.STREAM_WIRE, load.LOAD]


def target_for(em: Emulator, **fleet) -> Target:
    entry = {"alias": "model", "expect": EXPECT, **fleet}
    entry["expect"] = {**entry["expect"], "vram": {"source": "prometheus",
                                                   "metrics_url": f"{em.url}/metrics"}}
    ep = bind(Endpoint("ep", em.engine, url=em.url, ready_timeout=0, timeout=5,
                       **{k: v for k, v in entry.items()}))
    return Target(ep)


def verdicts(target: Target, checks) -> list[str]:
    """Each check run as its battery test runs it; each must end in one bounded line."""
    lines = []
    for check in checks:
        cases = check.cases(target.endpoint.options(check.claim), target.driver) \
            if check.cases else [None]
        for case in cases:
            handle = EndpointUnderTest(target)
            try:
                handle.verify(check, case)
                lines.append("passed")
            except (pytest.fail.Exception, pytest.skip.Exception) as outcome:
                lines.append(_bounded(outcome.msg, check.test))
            handle.text(), handle.evidence()  # what the reports then show must render too
    return lines


def _bounded(message, test: str) -> str:
    assert isinstance(message, str) and message.strip(), f"{test}: no verdict ({message!r})"
    assert len(message) <= LONGEST, f"{test}: a {len(message)}-character verdict"
    assert "Traceback" not in message, f"{test}: {message[:400]}"
    assert not PYTHON_ERROR.search(message), f"{test}: a Python error for a verdict: {message[:400]}"
    assert not ESCAPED.search(message), f"{test}: a probe's exception for a verdict: {message[:400]}"
    return message


def header(target: Target) -> dict:
    """The reports' header row: build and served models, from whatever the endpoint said."""
    target.need(identify.identity)  # as the probe phase does
    row = rows._identity(target)
    assert row["build"] is None or (isinstance(row["build"], str) and len(row["build"]) <= 120)
    assert all(isinstance(m, str) for m in row["models"]), row["models"]
    return row


def fuzzed(examples: int):
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the routes ------------------------------------------------------------------------------------
ENGINES = list(DRIVERS)  # each needs its shape in the emulator (tests/support/emulator.py SHAPES)


@pytest.mark.parametrize("engine", ["llamacpp", "vllm", "sglang", "anthropic"])
@fuzzed(EXAMPLES["cheap"])
@given(reply=json_reply({"status": "ok"}))
def test_any_health_answer_is_a_verdict(emulators, engine, reply):
    em = emulators(engine)
    em.route("GET", "/health", lambda r: reply)
    target = target_for(em)
    try:
        assert len(verdicts(target, [health.HEALTH])) == 1
    finally:
        target.close()


@pytest.mark.parametrize("engine", ENGINES)
@fuzzed(EXAMPLES["cheap"])
@given(data=st.data())
def test_any_models_list_is_a_verdict(emulators, engine, data):
    """The alias and slot checks read the list; a failing generation asks the fingerprint, and
    without an alias the list names the model every generation asks for."""
    em = emulators(engine)
    reply = data.draw(json_reply(SHAPES[engine][1](em)))
    em.route("GET", "/v1/models", lambda r: reply)
    serve_chat(em, lambda body: Reply(500, {"error": {"message": "upstream gone"}}))
    serve_messages(em, lambda body: Reply(500, {"error": {"message": "upstream gone"}}))
    for named in (True, False):  # without an alias, the alias check is not asked
        target = target_for(em, **({} if named else {"alias": None}))
        try:
            verdicts(target, [alias.ALIAS] * named + [slots.SLOTS, reasoning.REASONING])
            header(target)
        finally:
            target.close()


@fuzzed(EXAMPLES["cheap"])
@given(route=st.sampled_from(["/props", "/slots"]), data=st.data())
def test_any_props_or_slots_answer_is_a_verdict(emulators, route, data):
    """llama.cpp's /props and /slots: the slot shape, drafting, vision advert, build, live vram."""
    em = emulators("llamacpp")
    reply = data.draw(json_reply(PROPS if route == "/props" else SLOTS))
    em.route("GET", route, lambda r: reply)
    serve_chat(em, lambda body: Reply(400, {"error": {"message": "image input is not supported"}}))
    target = target_for(em)
    try:
        verdicts(target, [slots.SLOTS, spec_decode.SPEC_DECODE, vision.VISION, vram.VRAM])
        header(target)
    finally:
        target.close()


@pytest.mark.parametrize("engine", ["llamacpp", "vllm", "sglang"])
@fuzzed(EXAMPLES["cheap"])
@given(first=METRICS, then=METRICS)
def test_any_metrics_text_is_a_verdict(emulators, engine, first, then):
    """Drafting counters and gauges, vLLM's KV pool, dcgm's memory gauges, the fingerprint. The
    first scrape reads `first`, every later one `then`: counters may grow, vanish or turn NaN."""
    em = emulators(engine)
    scrapes = []
    em.route("GET", "/metrics", lambda r: scrapes.append(r) or (then if scrapes[1:] else first))
    target = target_for(em, alias="nope")  # a failing alias asks the fingerprint, which scans it
    try:
        verdicts(target, [spec_decode.SPEC_DECODE, vram.VRAM, alias.ALIAS])
    finally:
        target.close()


@pytest.mark.parametrize("engine, route", [("vllm", "/version"), ("sglang", "/get_server_info"),
                                           ("llamacpp", "/props")])
@fuzzed(EXAMPLES["cheap"])
@given(data=st.data())
def test_any_build_route_answer_is_a_header(emulators, engine, route, data):
    em = emulators(engine)
    reply = data.draw(json_reply({"version": "0.11.0", "build_info": "b6000-abc"}))
    em.route("GET", route, lambda r: reply)
    target = target_for(em)
    try:
        header(target)
    finally:
        target.close()


@pytest.mark.parametrize("engine", ["llamacpp", "vllm", "sglang", "openai"])
@fuzzed(EXAMPLES["chat"])
@given(plain=json_reply(CHAT), stream=sse_stream(CHAT_EVENTS), swap=st.booleans())
def test_any_chat_answer_is_a_verdict(emulators, engine, plain, stream, swap):
    """OpenAI chat JSON for plain requests, SSE chunks for streamed ones (or the other way round)."""
    em = emulators(engine)
    route_answers(em, "/v1/chat/completions", plain, stream, swap)
    target = target_for(em)
    try:
        verdicts(target, GENERATION)
    finally:
        target.close()


@fuzzed(EXAMPLES["messages"])
@given(plain=json_reply(MESSAGE), stream=sse_stream(MESSAGE_EVENTS, named=True),
       swap=st.booleans())
def test_any_messages_answer_is_a_verdict(emulators, plain, stream, swap):
    """Anthropic Messages JSON for plain requests, named SSE events for streamed ones."""
    em = emulators("anthropic")
    route_answers(em, "/v1/messages", plain, stream, swap)
    target = target_for(em)
    try:
        verdicts(target, GENERATION)
    finally:
        target.close()


@fuzzed(EXAMPLES["responses"])
@given(plain=json_reply(RESPONSE), stream=sse_stream(RESPONSE_EVENTS, named=True),
       swap=st.booleans())
def test_any_responses_answer_is_a_verdict(emulators, plain, stream, swap):
    """/v1/responses (fleet.yaml api: responses): Responses JSON for plain requests, named SSE
    events for streamed ones."""
    em = emulators("llamacpp")
    route_answers(em, "/v1/responses", plain, stream, swap)
    target = target_for(em, api="responses")
    try:
        verdicts(target, [*GENERATION, agent_chain.CHAIN])  # the chain: this route's own
    finally:
        target.close()


def test_nan_or_infinity_sent_back_in_the_history_is_named_not_the_clients_error(emulators):
    """Found by the fuzzing above: a reasoning item whose `encrypted_content` is Infinity (not
    JSON, though Python's reader takes it) goes back in the agent's next turn, and the openai
    client refuses to write it. The verdict says so; it was the client's ValueError."""
    reasoning = {**RESPONSE_OUTPUT[0], "encrypted_content": float("inf")}
    body = {**RESPONSE, "output": [reasoning, *RESPONSE_OUTPUT[1:]]}
    events = [{**e, "item": reasoning} if e.get("item", {}).get("id") == "rs_1" and
              e["type"] == "response.output_item.done" else e for e in RESPONSE_EVENTS]
    events[-1] = {**events[-1], "response": body}
    em = emulators("llamacpp")
    route_answers(em, "/v1/responses", Reply(200, json.dumps(body)), sse(events, named=True),
                  swap=False)
    target = target_for(em, api="responses")
    try:
        lines = verdicts(target, [agent.PLAIN, agent.STREAMED])
    finally:
        target.close()
    assert any("held NaN or Infinity, which JSON has no words for" in line for line in lines), lines


def route_answers(em: Emulator, path: str, plain: Reply, stream: Reply, swap: bool) -> None:
    def answer(req):
        streamed = bool((req.body or {}).get("stream")) if isinstance(req.body, dict) else False
        return stream if streamed != swap else plain
    em.route("POST", path, answer)


def _none_get(target):
    models = None if target.endpoint else {}
    return models.get("data")


def _gives_up(target):
    raise RuntimeError("the reader gave up")


@pytest.mark.parametrize("probe, why", [
    (_none_get, "a Python error for a verdict: _none_get could not read what ep sent: "
                "AttributeError"),
    (_gives_up, "a probe's exception for a verdict: _gives_up could not read what ep sent: "
                "RuntimeError: the reader gave up"),
])
def test_a_probe_that_breaks_on_a_reply_is_no_verdict(emulators, probe, why):
    """The guard itself: a probe that breaks on what came back (`None.get(...)`, any exception
    it lets out) ends in a line Target words as a failure; the harness must not pass it."""
    em = emulators("llamacpp")
    target = target_for(em)
    try:
        with pytest.raises(AssertionError, match=f"test_health: {why}"):
            verdicts(target, [replace(health.HEALTH, probe=probe)])
    finally:
        target.close()


# -- the crash that started this: a models list that is not an object -----------------------------
def test_a_models_list_that_is_not_an_object_leaves_every_failure_a_verdict(run_fleet):
    """`[1, 2, 3]` from /v1/models breaks the engine fingerprint each later failure consults:
    every failing test of the endpoint still ends in its own verdict line, no Python frames."""
    with Emulator("vllm", models=["m"]) as em:
        em.route("GET", "/v1/models", lambda r: Reply(200, [1, 2, 3]))
        serve_chat(em, lambda body: Reply(500, {"error": {"message": "upstream gone"}}))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m",
                                        expect={"reasoning": True, "tools": True}))
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "AttributeError" not in out, out[-2000:]
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    # alias, chat, three reasoning, seven tools (parallel is not asked)
    assert len(failed) == 12, failed
    for line in failed:
        assert "Error" not in line.split(" - ", 1)[-1], line  # a verdict, not an exception name
    result.stdout.fnmatch_lines(["*/v1/models not a model list: GET /v1/models: the body: "
                                 "expected an object, got list [[]1, 2, 3[]]*",
                                 "*test_reasoning_streamed*",
                                 "streamed chat answered 500: upstream gone"])


# -- the Responses stream's own verdicts: it must end with response.completed -----------------------
def _events(events) -> Reply:
    lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n" for e in events]
    return Reply(200, "\n".join(lines) + "\n", {"content-type": "text/event-stream"})


FAILED = {**RESPONSE, "status": "failed", "output": [],
          "error": {"code": "server_error", "message": "the model crashed"}}


@pytest.mark.parametrize("events,problem", [
    (RESPONSE_EVENTS, None),
    (RESPONSE_EVENTS[:-1], "the event stream ended without response.completed (its last event: "
                           "response.output_item.done): a client waits for it, or reports the "
                           "turn as failed"),
    ([*RESPONSE_EVENTS[:3], {"type": "response.failed", "response": FAILED}],
     "the stream ended with response.failed: status failed: the model crashed"),
    ([*RESPONSE_EVENTS[:3], {"type": "error", "code": "x", "message": "out of memory"}],
     "the stream carried an error event: out of memory"),
    ([*RESPONSE_EVENTS[:3], {"type": "error", "error": {"message": "slot unavailable"}}],
     "the stream carried an error event: slot unavailable"),
])
def test_a_responses_stream_ends_with_response_completed(emulators, events, problem):
    from pytest_frank.runtime.chat import Request, send

    em = emulators("llamacpp")
    em.route("POST", "/v1/responses", lambda r: _events(events))
    target = target_for(em, api="responses")
    try:
        reply = send(target, Request("Hi", 64, stream=True))
    finally:
        target.close()
    assert reply.problem == problem
    if problem is None:
        assert (reply.content, reply.reasoning, reply.reasoning_field) == (
            "Hello!", "Thinking", "reasoning_text")
        assert [(c.name, c.id) for c in reply.calls] == [("get_weather", "call_1")]
        assert (reply.finish, reply.tokens, reply.prompt_tokens) == ("tool_calls", 6, 21)
        assert [t.token for t in reply.logprobs or []] == ["Hello!"]
