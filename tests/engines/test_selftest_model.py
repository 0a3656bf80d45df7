"""The self-test model served by a real llama.cpp (xllamacpp, in-process): what each variant and
each launch key really does. Other tests rely on these behaviours, so they are pinned here."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx
import jsonschema
import pytest

pytest.importorskip("xllamacpp")

from pytest_frank.local import selftest_model  # noqa: E402
from pytest_frank.local.launch import LaunchError, launch, resolve_model  # noqa: E402

from llama import ServerPool  # noqa: E402

pytestmark = pytest.mark.real

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather forecast", "parameters": WEATHER},
}
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def pool():
    servers = ServerPool()
    yield servers
    servers.close()


# The vision variant, with its projector, must answer text and tools exactly as the default does.
@pytest.fixture(scope="module", params=[{"model": "selftest"},
                                        {"model": "selftest:vision", "mmproj": "selftest"}],
                ids=["default", "vision"])
def default(pool, request):
    return pool.get(**request.param, alias=["selftest", "frank-alt"], parallel=2)


def chat(server, timeout=30, **body):
    body.setdefault("messages", HI)
    body.setdefault("max_tokens", 64)
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=timeout)


def message(reply):
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    return choice["message"], choice["finish_reason"]


def stream(server, **body):
    """Fold an SSE chat stream into (content, reasoning, tool_calls, finish_reason)."""
    body.update(stream=True, messages=HI, max_tokens=64)
    content, reasoning, calls, finish = "", "", {}, None
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        choice = json.loads(line[6:])["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning_content") or ""
        for call in delta.get("tool_calls") or []:
            slot = calls.setdefault(call["index"], {"name": "", "arguments": ""})
            slot["name"] += call.get("function", {}).get("name") or ""
            slot["arguments"] += call.get("function", {}).get("arguments") or ""
        finish = choice["finish_reason"] or finish
    return content, reasoning, list(calls.values()), finish


# --- default variant ---------------------------------------------------------------------------

def test_plain_chat_answers_with_reasoning(default):
    msg, finish = message(chat(default))
    assert (msg["content"], msg["reasoning_content"], finish) == ("Hello!", "Thinking", "stop")


def test_thinking_off_leaves_no_reasoning(default):
    msg, finish = message(chat(default, chat_template_kwargs={"enable_thinking": False}))
    assert msg["content"] == "Hello!" and "reasoning_content" not in msg and finish == "stop"


def test_enable_thinking_must_be_boolean(default):
    reply = chat(default, chat_template_kwargs={"enable_thinking": "false"})
    assert reply.status_code == 400
    assert "expected boolean" in reply.json()["error"]["message"]


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_any_reasoning_effort_is_accepted(default, effort):
    msg, _ = message(chat(default, reasoning_effort=effort))
    assert msg["content"] == "Hello!"


def test_tool_choice_required_gives_a_valid_call(default):
    msg, finish = message(chat(default, tools=[TOOL], tool_choice="required"))
    assert finish == "tool_calls"
    (call,) = msg["tool_calls"]
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "get_weather"
    args = json.loads(call["function"]["arguments"])
    jsonschema.validate(args, WEATHER)
    assert args == {"city": "Paris", "days": 1}


def test_tool_choice_auto_stops_without_a_call(default):
    msg, finish = message(chat(default, tools=[TOOL], tool_choice="auto"))
    assert finish == "stop" and msg["content"] == "Hello!" and not msg.get("tool_calls")


def test_tool_history_renders(default):
    call = {"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 1}'}}
    history = HI + [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    msg, finish = message(chat(default, messages=history, tools=[TOOL]))
    assert (msg["content"], finish) == ("Hello!", "stop")


def test_json_schema_reply_is_valid_and_stops(default):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}},
              "required": ["answer"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    msg, finish = message(chat(default, response_format=fmt))
    assert finish == "stop"
    jsonschema.validate(json.loads(msg["content"]), schema)


def test_streaming_gives_the_same_fields(default):
    assert stream(default) == ("Hello!", "Thinking", [], "stop")
    content, reasoning, calls, finish = stream(default, tools=[TOOL], tool_choice="required")
    assert (content, reasoning, finish) == ("Hello!", "Thinking", "tool_calls")
    assert calls[0]["name"] == "get_weather"
    jsonschema.validate(json.loads(calls[0]["arguments"]), WEATHER)


def test_models_lists_the_aliases(default):
    card = httpx.get(f"{default.url}/v1/models").json()["data"][0]
    assert card["id"] == "frank-alt"  # the alphabetically first alias
    assert sorted(card["aliases"]) == ["frank-alt", "selftest"]
    assert card["owned_by"] == "llamacpp"


def test_props_report_tools_and_slots(default):
    props = httpx.get(f"{default.url}/props").json()
    caps = props["chat_template_caps"]
    assert caps["supports_tools"] and caps["supports_tool_calls"]
    assert not caps["supports_reasoning_effort"]
    assert props["total_slots"] == 2
    assert props["default_generation_settings"]["n_ctx"] == 2048  # 4096 divided by 2 slots


def test_metrics_are_served(default):
    text = httpx.get(f"{default.url}/metrics").text
    assert "llamacpp:prompt_tokens_total" in text


# --- other variants ----------------------------------------------------------------------------

def test_tool_text_leaves_markup_in_content(pool):
    server = pool.get(model="selftest:tool_text")
    msg, finish = message(chat(server, tools=[TOOL], tool_choice="auto"))
    assert msg["content"] == selftest_model.TOOL_TEXT
    assert "<function=get_weather>" in msg["content"]
    assert not msg.get("tool_calls") and finish == "stop"


@pytest.mark.parametrize("effort", ["high", "max"])
def test_effort_strict_rejects_high(pool, effort):
    reply = chat(pool.get(model="selftest:effort_strict"), reasoning_effort=effort)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert f"Unexpected reasoning effort {effort}. Supported types are xhigh" in error["message"]
    assert "Jinja Exception" in error["message"]


@pytest.mark.parametrize("effort", ["low", "medium", "xhigh", "minimal", "none"])
def test_effort_strict_accepts_other_levels(pool, effort):
    server = pool.get(model="selftest:effort_strict")
    msg, _ = message(chat(server, reasoning_effort=effort))
    assert msg["content"] == "Hello!"
    assert httpx.get(f"{server.url}/props").json()["chat_template_caps"][
        "supports_reasoning_effort"]


def test_no_think_has_no_reasoning(pool):
    server = pool.get(model="selftest:no_think")
    msg, finish = message(chat(server))
    assert msg["content"] == "Hello!" and "reasoning_content" not in msg and finish == "stop"


LONG_WAIT = 300  # a thousand tokens take seconds alone, minutes on a box shared with other jobs


@pytest.mark.parametrize("sampling", [{}, {"temperature": 1.5, "seed": 7}])
def test_long_think_thinks_a_thousand_words_then_answers(pool, sampling):
    server = pool.get(model="selftest:long_think")
    reply = chat(server, max_tokens=2048, timeout=LONG_WAIT, **sampling)
    msg, finish = message(reply)
    words = msg["reasoning_content"].split()
    assert words == [f"step{i}" for i in range(1000)]
    assert msg["content"] == "Hello!" and finish == "stop"
    assert reply.json()["usage"]["completion_tokens"] == 1005


def test_long_think_is_cut_while_thinking_at_a_small_budget(pool):
    msg, finish = message(chat(pool.get(model="selftest:long_think"), max_tokens=512,
                               timeout=LONG_WAIT))
    assert finish == "length" and not msg.get("content")
    assert msg["reasoning_content"].split()[-1] == "step510"


def test_long_think_answers_at_once_with_thinking_off(pool):
    server = pool.get(model="selftest:long_think")
    reply = chat(server, chat_template_kwargs={"enable_thinking": False})
    msg, finish = message(reply)
    assert msg["content"] == "Hello!" and "reasoning_content" not in msg and finish == "stop"
    assert reply.json()["usage"]["completion_tokens"] == 3


def test_endless_think_never_closes_its_thinking(pool):
    reply = chat(pool.get(model="selftest:endless_think"), max_tokens=1500, timeout=LONG_WAIT)
    msg, finish = message(reply)
    words = msg["reasoning_content"].split()
    assert finish == "length" and not msg.get("content")
    assert words[:3] == ["step0", "step1", "step2"] and words[1000:1003] == words[:3]
    off, finish = message(chat(pool.get(model="selftest:endless_think"),
                               chat_template_kwargs={"enable_thinking": False}))
    assert off["content"] == "Hello!" and "reasoning_content" not in off and finish == "stop"


# --- positional --------------------------------------------------------------------------------

def _answer_logprobs(server, messages):
    reply = chat(server, messages=messages, logprobs=True, temperature=0,
                 chat_template_kwargs={"enable_thinking": False})
    msg, finish = message(reply)
    assert msg["content"] == "Hello!" and finish == "stop"
    return [t["logprob"] for t in reply.json()["choices"][0]["logprobs"]["content"]]


@pytest.mark.parametrize("change", [{}, {"cache_type_k": "q8_0"}, {"cache_type_k": "q4_0"},
                                    {"rope_freq_base": 1000.0}],
                         ids=["f16", "q8_0", "q4_0", "rope_1000"])
def test_positional_reads_positions_and_keeps_its_answer(pool, change):
    """Greedy says "Hello!" whatever the K cache or rope base (its heads of 32 take a q8_0 or
    q4_0 cache); the logprobs follow where the earlier tokens stand."""
    spec = {"model": "selftest:positional", "threads": 1}
    server = pool.get(**spec, **change)
    near = [{"role": "user", "content": "Hi"}]
    far = [{"role": "user", "content": "Hi" + " there" * 60}]
    short, long = _answer_logprobs(server, near), _answer_logprobs(server, far)
    assert all(-3.5 < lp < -0.01 for lp in short + long)  # ahead, never certain
    assert abs(short[0] - long[0]) > 0.01  # the earlier tokens move them
    if change:
        reference = pool.get(**spec)
        assert _answer_logprobs(server, far) != _answer_logprobs(reference, far)


# --- echo --------------------------------------------------------------------------------------

def test_echo_markers_are_the_load_claims():
    from pytest_frank.claims.load import MARKERS
    from pytest_frank.local import selftest_echo

    assert selftest_echo.MARKERS == MARKERS


def test_echo_answers_with_the_marker_its_question_names(pool):
    """Distinct questions, distinct answers, with thinking or without, beside a forced call; a
    question without a marker is answered as the default does."""
    from pytest_frank.local.selftest_echo import MARKERS

    server = pool.get(model="selftest:echo", threads=1)

    def ask(text, **body):
        return message(chat(server, messages=[{"role": "user", "content": text}],
                            temperature=0, **body))[0]

    for marker in MARKERS:
        said = ask(f"Once more. Say hello. Begin your answer with the word {marker}.")
        assert (said["content"], said["reasoning_content"]) == (f"{marker}!", "Thinking")
    off = ask("Say hello. Begin your answer with the word mango.",
              chat_template_kwargs={"enable_thinking": False})
    assert off["content"] == "mango!" and "reasoning_content" not in off
    called = ask("What is the weather in Paris? Begin your answer with the word quince.",
                 tools=[TOOL], tool_choice="required")
    assert called["content"] == "quince!"
    assert json.loads(called["tool_calls"][0]["function"]["arguments"]) == \
        {"city": "Paris", "days": 1}
    assert ask("Hi")["content"] == "Hello!"


# --- vision ------------------------------------------------------------------------------------

def image_message(colour: str, form: str) -> list[dict]:
    from pytest_frank.claims.vision import PROMPT, png

    b64 = png(colour)
    if form == "anthropic":
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": b64}}
    else:
        url = b64 if form == "base64" else f"data:image/png;base64,{b64}"
        image = {"type": "image_url", "image_url": {"url": url}}
    return [{"role": "user", "content": [{"type": "text", "text": PROMPT}, image]}]


@pytest.fixture(scope="module")
def sighted(pool):
    return pool.get(model="selftest:vision", mmproj="selftest", threads=1)


def test_vision_palette_is_the_batterys():
    from pytest_frank.claims.vision import COLOURS
    from pytest_frank.local.selftest_vision import PALETTE

    assert PALETTE == COLOURS


@pytest.mark.parametrize("form", ["data_url", "base64", "anthropic"])
@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "thinking-off"])
def test_vision_names_each_colour(sighted, form, thinking):
    from pytest_frank.local.selftest_vision import PALETTE

    kwargs = {} if thinking else {"chat_template_kwargs": {"enable_thinking": False}}
    for colour in PALETTE:
        messages = image_message(colour, form)
        if form == "anthropic":
            reply = httpx.post(f"{sighted.url}/v1/messages", timeout=30, json={
                "messages": messages, "max_tokens": 64, **kwargs})
            assert reply.status_code == 200, reply.text
            text = [b["text"] for b in reply.json()["content"] if b["type"] == "text"]
            assert text == [colour]
        else:
            msg, finish = message(chat(sighted, messages=messages, **kwargs))
            assert (msg["content"], finish) == (colour, "stop")
            assert msg.get("reasoning_content") == ("Thinking" if thinking else None)


def test_vision_margin_between_colours_is_wide(sighted):
    """The right colour word leads the next token by a wide logit gap: at least 2 GAP less the
    shrink of the final norm (~72 measured, black against green); llama.cpp reports gaps past
    ~104 as the float minimum."""
    from pytest_frank.local.selftest_vision import PALETTE

    margins = {}
    for colour in PALETTE:
        reply = chat(sighted, messages=image_message(colour, "data_url"), temperature=0,
                     logprobs=True, top_logprobs=2)
        assert reply.status_code == 200, reply.text
        steps = reply.json()["choices"][0]["logprobs"]["content"]
        (step,) = [s for s in steps if s["token"] in PALETTE]
        best, runner_up = step["top_logprobs"]
        assert best["token"] == colour
        margins[colour] = best["logprob"] - runner_up["logprob"]
    assert min(margins.values()) > 60, margins


def test_vision_with_an_image_and_tools_still_calls(sighted):
    msg, finish = message(chat(sighted, messages=image_message("red", "data_url"),
                               tools=[TOOL], tool_choice="required"))
    assert finish == "tool_calls" and msg["tool_calls"][0]["function"]["name"] == "get_weather"


# --- launch keys -------------------------------------------------------------------------------

def spec_metric(server, name: str) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(f"llamacpp:{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no llamacpp:{name} in /metrics")


def test_draft_model_engages_speculation(pool):
    # This xllamacpp build has the spec_decode counters; replies also carry timings.draft_n.
    server = pool.get(model="selftest", draft_model="selftest")
    reply = chat(server)
    assert message(reply)[0]["content"] == "Hello!"
    assert reply.json()["timings"]["draft_n"] > 0
    assert spec_metric(server, "spec_decode_num_draft_tokens_total") > 0
    assert spec_metric(server, "spec_decode_num_accepted_tokens_total") > 0
    assert httpx.get(f"{server.url}/slots").json()[0]["speculative"] is True


def test_draft_without_spec_type_is_loaded_but_idle(pool):
    server = pool.get(model="selftest", draft_model="selftest", draft_without_spec_type=True)
    reply = chat(server)
    assert "draft_n" not in reply.json()["timings"]
    assert spec_metric(server, "spec_decode_num_draft_tokens_total") == 0
    assert httpx.get(f"{server.url}/slots").json()[0]["speculative"] is False


def test_jinja_off_rejects_tools(pool):
    server = pool.get(model="selftest", jinja=False)
    reply = chat(server, tools=[TOOL])
    assert reply.status_code == 500
    assert reply.json()["error"]["message"] == "tools param requires --jinja flag"
    msg, _ = message(chat(server))
    assert msg["content"] == "<think>Thinking</think>Hello!"


def test_reasoning_format_none_keeps_think_tags(pool):
    msg, _ = message(chat(pool.get(model="selftest", reasoning_format="none")))
    assert msg["content"] == "<think>Thinking</think>Hello!" and "reasoning_content" not in msg


def test_api_key_and_metrics_off(pool):
    server = pool.get(model="selftest", api_key="sekret", metrics=False)
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert httpx.get(f"{server.url}/v1/models").status_code == 401
    auth = {"Authorization": "Bearer sekret"}
    assert httpx.get(f"{server.url}/v1/models", headers=auth).status_code == 200
    assert httpx.get(f"{server.url}/metrics", headers=auth).status_code == 501


def test_chat_template_file_replaces_the_gguf_template(pool, tmp_path):
    path = tmp_path / "no_think.jinja"
    path.write_text(selftest_model.chat_template("no_think"))
    server = pool.get(model="selftest:effort_strict", chat_template_file=str(path))
    assert chat(server, reasoning_effort="high").status_code == 200


def test_stop_frees_the_port():
    server = launch({"model": "selftest"})
    port = server.port
    assert chat(server).status_code == 200
    server.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    again = launch({"model": "selftest", "port": port})
    try:
        assert again.port == port and chat(again).status_code == 200
    finally:
        again.stop()


def test_launch_errors_are_clear(tmp_path):
    with pytest.raises(LaunchError, match="unknown launch key"):
        launch({"model": "selftest", "ctx": 10})
    with pytest.raises(LaunchError, match="model file not found"):
        launch({"model": str(tmp_path / "missing.gguf")})
    (tmp_path / "junk.gguf").write_bytes(b"junk")
    with pytest.raises(LaunchError, match="not a GGUF"):
        launch({"model": str(tmp_path / "junk.gguf")})
    with pytest.raises(LaunchError, match="unknown selftest variant"):
        resolve_model("selftest:nope")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(LaunchError, match="did not start"):
            launch({"model": "selftest", "port": busy.getsockname()[1]})


# --- the file itself ---------------------------------------------------------------------------

def test_write_model_is_deterministic(tmp_path):
    a = selftest_model.write_model(tmp_path / "a.gguf").read_bytes()
    b = selftest_model.write_model(tmp_path / "b.gguf").read_bytes()
    assert a == b and a[:4] == b"GGUF"
    assert selftest_model.write_model(tmp_path / "c.gguf", "no_think").read_bytes() != a


# Each variant's file, byte for byte (gguf 0.19): a new variant, or a change made for one, must
# leave the others' files as they are, since tests and baselines are measured on them.
DIGESTS = {
    "default": "c743ef66ac05e0c9c2746a9d92d4c671abb1d2516764d756de5ea42b00f6bfdd",
    "tool_text": "966a38a4ba130e638ee388493ad103343316bc116f1a01dddf4f495586dff344",
    "effort_strict": "272f2331d5b609d09869e9278905952f3f656c62bcfc5e46aaec3945e7b4d4dd",
    "no_think": "3d5ea0428e0daaf10b58f9b62253e15c260dcaf3d524c42ccba50e97029af1ee",
    "flat": "bdefdd7c3733d67ae51b785def3c7910dc766cb1b92d78acca955e7431509c38",
    "chatty": "a98a8aacf5ef1794e500448192777885db48f821d0be73bfb9d0e6af17dbaf35",
    "long_think": "98e9113c09e398f760d1ee7e87d73fd2c5682a32da57975b988e0e0fb3eafe37",
    "endless_think": "dd0bd575c0f239ee92255f257c6c3c9331c70f623ccd19fa9290c6efcd8ba9ca",
    "vision": "edaa7ec280ae6b321ac6ec369bde845a2102ef6b9022ef007cbc99b127cdd8f7",
    "agent": "25cdf7fd8cd15f8fac2a9e8df57a05e4bd86a6c1c9e0a899d6b231ceea44c174",
    "positional": "4ad98a28991ef65e706b0dd0d270f78813d73a46936932aff3dfe040b0a936c6",
    "echo": "a0f9f9c4246743eb90f0ac9c82eb8d9962217c496943d1de5a012d951906a555",
    "swa": "86072561dc11b3ced256969b90a2220aa31b3cb6935f75f88a5edd09781780df",
    "hybrid": "8f4dbdf2ea6005e547d6c20f3caba76b5d526c504ec996de8575140903ff4b51",
    "hybrid_collapse": "da9dc83c278cb87f9e24449aac408d74261cd4fa006dc5b6e0cc9b1ed32e4e0e",
    "hybrid_plain": "8369999b7048ba1e97ff4443aee546244f5ef19e8fdd180580035ff20d1bcd73",
    "qwen3_xml": "3f53da281e55a746da36e19511ad76cb4d0577f2602c1aa9cef6b219ee242680",
    "qwen3_xml_text": "779774a44200c9a2b31a9993f681691886bd84e4a04f464413a4fac6491fca0b",
    "kimi_k2": "d33dd0f07e9f73c9d8bf3e52cc84daaa7d1ddd68f4f010cc2fb3943255acbc0b",
    "kimi_k2_text": "60e44cb1bf403ac9c55d663e0e988c2e2f3623ed93f074a0356f08c64cfe7a00",
    "mistral": "6214017115e591d8b7edb44534f5f07a4bfe5b7f1a03a00b6da5ce41c19c8460",
    "mistral_text": "75a2d8fd10aeab3b9a00001253ed3feeff6e9bf43e2216bffde4380da5511b49",
    "glm45": "0fcf94f39aaf1df0fb0e33b525c6a00f505f8b220471c44f3ada0ba4a6e40978",
    "glm45_text": "a7553cb87cda3334c49fee0475fe45e1b7e3028f3aa928e96f909d18dae822ba",
    "harmony": "f75ccf5b6ecf03c0d925739941678cdcad05a827637bdb47d94486eb1a3d1644",
    "harmony_text": "652f19e2dcc66492329fccca13093d4cbdf16dc7cf9f656b391688aae5eb5bfc",
    "deepseek_v31": "406cad6c62860eceef905fef9902577fd6ab58ae8f04738653cfd9e6a915bb01",
    "deepseek_v31_text": "282bd0b85e0c26606dd765ed74521b8f440f38fccaf65e94ae12b28fedb107f9",
    "mmproj": "36f79fc14a484da3af6087350839df5957876b504081ea4e63b6ccec9c2ab623",
}


def test_every_variants_file_is_byte_for_byte_what_it_was(tmp_path):
    import hashlib

    def digest(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    got = {v: digest(selftest_model.write_model(tmp_path / f"{v}.gguf", v))
           for v in selftest_model.VARIANTS}
    got["mmproj"] = digest(selftest_model.selftest_vision.write_projector(
        tmp_path / "mmproj.gguf", selftest_model.N_EMBD))
    assert got == DIGESTS


def test_vision_model_and_projector_are_quick_to_write(tmp_path):
    import time

    start = time.monotonic()
    selftest_model.write_model(tmp_path / "v.gguf", "vision")
    selftest_model.projector_path(cache_dir=tmp_path)
    assert time.monotonic() - start < 2


def test_long_thinkers_are_small_and_quick_to_write(tmp_path):
    import time

    for variant in ("long_think", "endless_think"):
        start = time.monotonic()
        path = selftest_model.write_model(tmp_path / f"{variant}.gguf", variant)
        assert time.monotonic() - start < 2 and path.stat().st_size < 1_500_000


def test_model_path_caches(tmp_path):
    first = selftest_model.model_path("tool_text", cache_dir=tmp_path)
    assert selftest_model.model_path("tool_text", cache_dir=tmp_path) == first
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_cli_writes_the_model(tmp_path):
    target = tmp_path / "m.gguf"
    out = subprocess.run(
        [sys.executable, "-m", "pytest_frank.cli", "selftest-model", str(target),
         "--variant", "no_think"],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == str(target)
    expected = selftest_model.write_model(tmp_path / "n.gguf", "no_think")
    assert target.read_bytes() == expected.read_bytes()


def test_cli_writes_the_vision_model_and_its_projector(tmp_path):
    model, mmproj = tmp_path / "v.gguf", tmp_path / "v-mmproj.gguf"
    out = subprocess.run(
        [sys.executable, "-m", "pytest_frank.cli", "selftest-model", str(model),
         "--variant", "vision", "--mmproj", str(mmproj)],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.split() == [str(model), str(mmproj)]
    assert mmproj.read_bytes() == selftest_model.projector_path(cache_dir=tmp_path).read_bytes()
    server = launch({"model": str(model), "mmproj": str(mmproj), "threads": 1})
    try:
        msg, _ = message(chat(server, messages=image_message("blue", "base64")))
        assert msg["content"] == "blue"
    finally:
        server.stop()
