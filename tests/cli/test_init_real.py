"""`frank init` against real llama.cpp servers (xllamacpp, the self-test models), and the round
trip: the file it writes validates against the schema, asks the claims each server's own
configuration implies (with their evidence), and the battery on it passes against the same
servers. Plain, with a draft model, with a projector, behind --api-key; then the errors."""

from __future__ import annotations

import re
import shutil
import socket
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import pytest
import yaml

from pytest_frank import fleet as fleet_module
from pytest_frank.claims import load
from pytest_frank.cli import main

pytestmark = pytest.mark.real

# The shared servers other tests start too (tests/support/llama.py keys them by spec).
PLAIN = {"alias": "frank-default-large"}
# The default model drafts for itself and calls tools (selftest:chatty, which drafts longer,
# never calls one: its round trip would fail tools, rightly).
DRAFTING = {"alias": "m", "draft_model": "selftest"}
GUARDED = {"alias": "guarded", "api_key": "sk-local-guard-42"}
# The tiny model decodes at ~2000 tok/s, and the shared 2-core machine swings that by more than
# the default 3x: the round trip checks the bounds are measured, not the machine's steadiness.
MARGIN = ["--perf-margin", "20"]


def init(tmp_path: Path, *args: str, name="fleet.yaml") -> tuple[int, str, Path]:
    out = tmp_path / name
    started = time.monotonic()
    rc = main(["init", *args, "-o", str(out), *MARGIN])
    print(f"frank init took {time.monotonic() - started:.2f}s")
    return rc, out.read_text() if out.exists() else "", out


def validates(text: str) -> dict:
    data = yaml.safe_load(text)
    jsonschema.validate(data, fleet_module.schema())
    return data


def claims_line(text: str, claim: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(f"{claim}:"))


def round_trip(run_fleet, text: str, *args, env=None):
    return run_fleet(text, "-p", "no:randomly", *args, env=env)


def test_plain_server_round_trip(llama, tmp_path, run_fleet, pytester, capsys):
    server = llama(**PLAIN)
    rc, text, _ = init(tmp_path, server.url)
    assert rc == 0, capsys.readouterr().err
    (entry,) = validates(text)["endpoints"].values()
    assert entry["engine"] == "llamacpp" and entry["alias"] == "frank-default-large"
    assert set(entry["expect"]) == {"reasoning", "tools", "agent", "clients", "perf", "slots",
                                    "vram"}
    assert entry["expect"]["slots"] == {"count": 1, "ctx_per_slot": 4096}
    # A coding client's typical request and budget outgrow 4096 tokens; Open WebUI's do not.
    assert entry["expect"]["clients"] == ["openwebui"]
    assert "      # clients: left out:\n      #   claude_code (its typical first request" in text
    # played, both turns, and each turn's prompt counted against the slot
    assert ("every turn fits the 4096-token context per slot (prompt tokens by turn: openwebui "
            in claims_line(text, "clients"))
    # one slot: no ladder to climb, and the file says so
    assert ("      # load: not written: the server reports 1 slot, so a ladder of requests in "
            "flight together has no level to climb") in text
    assert "# /v1/models owned_by 'llamacpp'" in text
    assert ("# /props chat_template_caps.supports_tools true; a forced call (tool_choice "
            "required) came back as a valid get_time call") in claims_line(text, "tools")
    assert Path(entry["expect"]["vram"]["model"]).is_absolute()
    assert "# a reply carried reasoning in reasoning_content" in claims_line(text, "reasoning")
    assert "# tools are served: a tool result sent back" in claims_line(text, "agent")
    assert (f"measured {time.strftime('%Y-%m-%d')}, 3 readings (each the median of 3 streamed "
            "answers): time to first token ") in claims_line(text, "perf")
    assert "tok/s; bounds from the slowest, with a 20x margin" in claims_line(text, "perf")
    # tool_choice none was asked and answered in text: tools stays true, none asked with it.
    assert entry["expect"]["tools"] is True and "# tools: none: false" not in text
    result = round_trip(run_fleet, text, "--frank-report=init.md")
    assert result.ret == 0, result.stdout.str()[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 10 and "failed" not in outcomes and "errors" not in outcomes
    result.stdout.fnmatch_lines(["PASSED *::test_tools_none[[]frank-default-large[]]*"])
    # A CPU server: the vram claim init wrote is not applicable here, and the file is green.
    if shutil.which("nvidia-smi") is None:
        assert "vram not applicable" in result.stdout.str()
        assert "**fleet ok: 1 endpoint(s)" in (pytester.path / "init.md").read_text()


# The slot shapes init is proven on besides PLAIN's one slot of 4096 (each shared by the tests
# that ask the same spec): two and four slots of 2,048 tokens, where Open WebUI's first request
# (about 2,300 tokens of this model's) does not fit; init once wrote it, judged by an estimate
# of the first request alone, and the battery failed test_client on the very server.
SLOTTED = {2: {"alias": "slots-2", "ctx_size": 4096, "parallel": 2},
           4: {"alias": "slots-4", "ctx_size": 8192, "parallel": 4}}


@pytest.mark.parametrize("slots", list(SLOTTED))
def test_init_on_more_slots_writes_what_passes_there(slots, llama, tmp_path, run_fleet, capsys):
    """Init writes no client whose turns outgrow the slot, and the load claim, its ladder run
    once there; the battery on the file passes on the server it came from."""
    server = llama(**SLOTTED[slots])
    rc, text, _ = init(tmp_path, server.url)
    assert rc == 0, capsys.readouterr().err
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["slots"] == {"count": slots, "ctx_per_slot": 2048}
    assert "clients" not in entry["expect"], text
    assert re.search(r"#   openwebui \(turn 1 needs \d+ tokens \(\d+ of prompt, counted by the "
                     r"refusal\), over the 2048-token context per slot\)", text), text
    assert entry["expect"]["load"] == {"requests": 5 * sum(load.widths(slots))}
    ladder = ", ".join(str(w) for w in load.widths(slots))
    assert f"the ladder passed here: {ladder} in flight" in claims_line(text, "load")
    result = round_trip(run_fleet, text, "-v")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"*test_load[[]slots-{slots}[]] PASSED*"])


def test_a_model_that_calls_under_none_gets_none_false(llama, tmp_path, run_fleet, capsys):
    """selftest:agent calls a tool whenever one is offered: under tool_choice none llama.cpp
    still renders the tools into the prompt, and the model writes its call as text. Init asks
    none as the battery would, so the file leaves none out and says why, and the battery on the
    file passes on the very server it came from. The bigram model opens a call after its
    thinking even with no tools offered (it cannot see them), so the template here ends a plain
    question's prompt as it ends one after a tool result: "Hello!", as an agent model answers
    chat, else init's chat gate rightly writes nothing."""
    from pytest_frank.local.selftest_model import chat_template

    template = chat_template("agent").replace("{%- if messages[-1].role == 'tool' %}",
                                              "{%- if messages[-1].role == 'tool' or not tools %}")
    assert template != chat_template("agent")
    path = tmp_path / "agent-chat.jinja"
    path.write_text(template)
    server = llama(model="selftest:agent", alias="agent-none", chat_template_file=str(path))
    rc, text, _ = init(tmp_path, server.url, "--no-perf")
    assert rc == 0, capsys.readouterr().err
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["tools"] == {"none": False}, text
    assert entry["expect"]["agent"] is True
    assert ('      # tools: none: false, as test_tools_none fails here:\n'
            '      #   tool_choice "none" was sent with tools offered and the content holds a '
            'tool call written as text') in text
    assert "the tools still reached the model's prompt and a client shows the markup" in text
    assert ("      #   fix, to ask it again: llama.cpp renders the tools into the prompt under "
            "tool_choice none") in text
    result = round_trip(run_fleet, text)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["SKIPPED * test_tools_none[[]agent-none[]]: *"
                                 "expect.tools.none is false*"])
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes


def test_draft_server_asks_spec_decode(llama, tmp_path, run_fleet):
    server = llama(**DRAFTING)
    rc, text, _ = init(tmp_path, server.url)
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["spec_decode"] is True
    assert "# /slots speculative true" in claims_line(text, "spec_decode")
    # No route names the draft file: the vram claim leaves it out, and says so.
    assert "draft" not in entry["expect"]["vram"]
    assert ("      # vram: the draft is left out: the server drafts (/slots speculative true) "
            "and no route names a draft file") in text
    result = round_trip(run_fleet, text)
    assert result.ret == 0, result.stdout.str()[-3000:]
    # Its answer is six tokens: too few drafts for a rate, an inconclusive skip, not a failure.
    result.stdout.fnmatch_lines(["SKIPPED * test_spec_decode[[]m[]]: inconclusive (* draft tokens*"])


def test_the_draft_a_serve_file_names_is_in_vram(llama, pytester, run_fleet, tmp_path_factory):
    """A draft model named in the serve file: a copy of the served model under another name (a
    draft that drafts as self-drafting does, which the serve gate does not take for the served
    file loaded twice)."""
    import httpx

    from pytest_frank.claims import declared
    from pytest_frank.fleet import load
    from pytest_frank.local.selftest_model import model_path
    from pytest_frank.vram.plan import make_plan, model_memory

    draft = tmp_path_factory.mktemp("draft") / "selftest-draft.gguf"
    shutil.copy(model_path(), draft)
    server = llama(alias="m", draft_model=str(draft))
    model = httpx.get(f"{server.url}/props", timeout=10).json()["model_path"]
    port, here = server.url.rsplit(":", 1)[1], pytester.path
    (here / "drafted.sh").write_text(
        f"exec llama-server -m {model} -md {draft} --spec-type draft-simple --host 127.0.0.1 "
        f"--port {port} --alias m --ctx-size 4096 --parallel 1 --jinja --metrics\n")
    rc, text, out = init(here, server.url, "--serve", str(here / "drafted.sh"), name="init.yaml")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["vram"] == {"model": model, "ctx_size": 4096, "draft": str(draft)}
    assert f"; the draft --model-draft {draft} (--serve)" in claims_line(text, "vram")
    assert "# vram:" not in text
    # The memory model counts the draft: its weights and its KV beside the model's.
    (bound,) = load(out, claims=declared()).values()
    opts = bound.options("vram").as_dict()
    both = model_memory(make_plan(opts, opts["model"])).estimate
    alone = model_memory(make_plan({**opts, "draft": None}, opts["model"])).estimate
    assert both.draft_weights == alone.weights and both.draft_kv == alone.kv > 0
    assert both.total == alone.total + both.draft_weights + both.draft_kv
    print(f"vram modelled: {alone.total / 2**20:.2f} MiB alone, {both.total / 2**20:.2f} MiB "
          "with the draft")
    result = round_trip(run_fleet, text, "-v")
    assert result.ret == 0, result.stdout.str()[-3000:]
    # the GGUF and its draft were read and modelled; a CPU server here has no GPU to fit
    result.stdout.fnmatch_lines(["*test_serve_config*PASSED*",
                                 "SKIPPED [[]1[]] test_vram_fits[[]*[]]: not applicable: modelled * "
                                 "+ draft weights *"])


def test_a_relative_model_path_round_trip(llama, tmp_path, monkeypatch, pytester, run_fleet):
    """A server given models/x.gguf in its own folder; init run there with -o sub/fleet.yaml;
    the battery, run from another folder, reads the same file."""
    from pytest_frank.local.selftest_model import model_path

    served = tmp_path / "served"
    (served / "models").mkdir(parents=True)
    (served / "sub").mkdir()
    shutil.copy(model_path(), served / "models" / "x.gguf")
    monkeypatch.chdir(served)
    server = llama(model="models/x.gguf", alias="relative")
    assert main(["init", server.url, "--no-perf", "-o", "sub/fleet.yaml"]) == 0
    out = served / "sub" / "fleet.yaml"
    text = out.read_text()
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["vram"]["model"] == str(served / "models" / "x.gguf")
    assert f"(the engine reports models/x.gguf, read from {served})" in claims_line(text, "vram")
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest("--endpoints", str(out), "-p", "no:cacheprovider", "-v", "-rs",
                                "-p", "no:randomly", "-p", "no:hypothesispytest")
    assert result.ret == 0, result.stdout.str()[-3000:]
    # the served file was found from the fleet file's folder and modelled (no GPU here)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_vram_fits[[]relative[]]: not applicable: "
                                 "modelled *"])


@pytest.mark.parametrize("template", ["own", "tools"])
def test_a_model_that_never_calls_gets_no_tools(smollm2, tmp_path_factory, template):
    """SmolLM2: its own template cannot carry tools (llama.cpp's caps say so, and it is not
    asked); under a ChatML template that carries them (the self-test's) llama.cpp reads the
    tool format, but the model answers a forced call in prose."""
    from pytest_frank.local.selftest_model import chat_template

    spec = {}
    if template == "tools":
        path = tmp_path_factory.mktemp("template") / "chatml-tools.jinja"
        path.write_text(chat_template("no_think"))
        spec = {"chat_template_file": str(path)}
    server = smollm2(**spec)
    rc, text, _ = init(tmp_path_factory.mktemp("init"), server.url, "--no-perf")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert not {"tools", "agent"} & set(entry["expect"])
    said = {"own": "      # tools: not written: /props chat_template_caps.supports_tools false: "
                   "the served template cannot carry tools",
            "tools": "      # tools: not written: a forced call (tool_choice required) came "
                     "back "}[template]
    assert said in text
    assert "      # agent: not written: an agent step needs tools" in text


def test_a_call_with_markup_left_in_content_is_not_usable(llama, tmp_path):
    """selftest:tool_text: under tool_choice required the grammar forces a real call, after
    markup the parser leaves in content; a strict client cannot use that turn."""
    server = llama(model="selftest:tool_text", alias="tool-text")
    rc, text, _ = init(tmp_path, server.url, "--no-perf")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert not {"tools", "agent"} & set(entry["expect"])
    assert ("      # tools: not written: a forced call (tool_choice required) came back with no "
            "usable call: leaked markup: tool markup left in content beside the structured call "
            "('<function=get_weather>") in text


def test_a_familys_template_names_its_parser(llama, tmp_path, run_fleet):
    """selftest:kimi_k2 serves Kimi K2's format (the server tests/claims/tools/test_tool_formats_real.py
    shares): the tools comment names the family, how llama.cpp picked its parser, and the
    parser vLLM needs for it; the battery on the file passes on the same server."""
    server = llama(model="selftest:kimi_k2")
    rc, text, _ = init(tmp_path, server.url, "--no-perf")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["tools"] is True
    assert ("      # tools: calls in the Kimi K2 format (/props chat_template holds "
            "<|tool_calls_section_begin|>, <|tool_call_begin|>): llama.cpp server's parser for "
            "them; vLLM: --tool-call-parser kimi_k2\n") in text, text
    result = round_trip(run_fleet, text, "-m", "tools")
    assert result.ret == 0, result.stdout.str()[-3000:]


def test_a_familys_call_left_as_text_names_the_parser_it_needs(llama, tmp_path):
    """selftest:kimi_k2_text writes its Kimi K2 call as text under a Hermes template: no tools
    are written, and the comment's fix names the family and the template markers."""
    server = llama(model="selftest:kimi_k2_text")
    rc, text, _ = init(tmp_path, server.url, "--no-perf")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert not {"tools", "agent"} & set(entry["expect"])
    assert ("      #   fix: the content holds a Kimi K2 tool call (<|tool_call_begin|>"
            "functions.NAME:INDEX<|tool_call_argument_begin|>), which llama.cpp server parses "
            "only from a served template that carries that format") in text, text


def test_projector_server_asks_vision(llama, tmp_path_factory, run_fleet):
    # The seeing self-test model (the same server configuration as
    # tests/claims/vision/test_vision_real.py).
    server = llama(model="selftest:vision", mmproj="selftest", threads=1)
    out = tmp_path_factory.mktemp("init")
    rc, text, _ = init(out, server.url)
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert entry["expect"]["vision"] is True
    assert "# /props advertises vision (a projector is loaded)" in claims_line(text, "vision")
    result = round_trip(run_fleet, text)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["PASSED *test_vision*data_url*", "PASSED *test_vision*base64*"])


def test_key_protected_server_writes_the_variable_never_the_key(llama, tmp_path, run_fleet,
                                                                monkeypatch, capsys):
    server = llama(**GUARDED)
    rc, text, out = init(tmp_path, server.url)
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "answered 401" in err and "pass --api-key-env NAME" in err and "nothing written" in err
    monkeypatch.setenv("FRANK_GUARD_KEY", GUARDED["api_key"])
    rc, text, _ = init(tmp_path, server.url, "--api-key-env", "FRANK_GUARD_KEY")
    assert rc == 0
    assert GUARDED["api_key"] not in text
    (entry,) = validates(text)["endpoints"].values()
    assert entry["api_key"] == "${FRANK_GUARD_KEY}"
    assert "guarded" in text and "tools" in entry["expect"]
    result = round_trip(run_fleet, text, env={"FRANK_GUARD_KEY": GUARDED["api_key"]})
    assert result.ret == 0, result.stdout.str()[-3000:]


def test_two_servers_and_a_serve_file(llama, tmp_path, monkeypatch):
    """Two URLs, one file; the serve script whose port is the plain server's goes with it."""
    plain, guarded = llama(**PLAIN), llama(**GUARDED)
    port = plain.url.rsplit(":", 1)[1]
    script = tmp_path / "plain.sh"
    script.write_text(f"exec llama-server --jinja --port {port} --alias frank-default-large "
                      "--reasoning-format deepseek\n")
    other = tmp_path / "other.sh"
    other.write_text("exec llama-server --port 1\n")
    monkeypatch.setenv("FRANK_GUARD_KEY", GUARDED["api_key"])  # the plain server takes any
    rc, text, _ = init(tmp_path, plain.url, guarded.url, "--serve", str(script), str(other),
                       "--no-perf", "--api-key-env", "FRANK_GUARD_KEY")
    assert rc == 0
    data = validates(text)
    assert list(data["endpoints"]) == ["frank-default-large", "guarded"]
    first = data["endpoints"]["frank-default-large"]
    assert first["serve"] == {"script": "plain.sh"}
    assert f"listens on port {port}" in claims_line(text, "serve")
    assert "serve" not in data["endpoints"]["guarded"]


# -- errors: one line, non-zero, nothing written -----------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web_server(tmp_path):
    """A plain HTTP server (Python's file server): answers, but is no LLM endpoint."""
    (tmp_path / "index.html").write_text("<html>hello</html>")
    handler = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 lambda *a: handler(*a, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_dead_url_is_one_line(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    rc, _, out = init(tmp_path, url)
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"frank init: {url}/v1/models: connection refused (nothing listens on that "
                   "port: is the server running?); nothing written"]
    assert list(tmp_path.iterdir()) == []


def test_a_web_server_that_is_no_llm_endpoint(web_server, tmp_path, capsys):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    rc, _, out = init(out_dir, web_server)
    assert rc == 1 and not out.exists()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"frank init: {web_server}: not an LLM endpoint: ")
    assert "answered 404" in line and line.endswith("nothing written")
    assert list(out_dir.iterdir()) == []


def test_an_existing_file_is_kept_without_force(llama, tmp_path, capsys):
    server = llama(**PLAIN)
    out = tmp_path / "fleet.yaml"
    out.write_text("mine\n")
    rc, text, _ = init(tmp_path, server.url, "--no-perf")
    assert rc == 1 and text == "mine\n"
    assert f"{out} exists; pass --force to overwrite it" in capsys.readouterr().err
    rc, text, _ = init(tmp_path, server.url, "--no-perf", "--force")
    assert rc == 0 and text.startswith("# Written by `frank init`")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.yaml"]  # no temp file left


def test_serve_script_round_trip(llama, pytester, run_fleet):
    """The plain server's own command as a serve script: the config gate and the drift check
    pass on the file init writes (the gate reads the flags the asked claims need)."""
    import httpx

    server = llama(**PLAIN)
    model = httpx.get(f"{server.url}/props", timeout=10).json()["model_path"]
    port = server.url.rsplit(":", 1)[1]
    here = pytester.path  # where run_fleet writes its fleet.yaml: init's relative paths hold
    (here / "plain.sh").write_text(
        f"exec llama-server -m {model} --host 127.0.0.1 --port {port} --alias "
        "frank-default-large --ctx-size 4096 --parallel 1 --jinja --reasoning-format auto "
        "--metrics\n")
    rc, text, _ = init(here, server.url, "--serve", str(here / "plain.sh"), name="init.yaml")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert entry["serve"] == {"script": "plain.sh"}
    result = round_trip(run_fleet, text, "-m", "serve", "-v")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*test_serve_config*PASSED*", "*test_serve_drift*PASSED*"])


# The fleet's own MTP: Qwen3.5's hybrid layout with its own NextN head, served with
# --spec-type draft-mtp alone; and the same model without the head, served without drafting.
HYBRID_MTP = {"model": "selftest:hybrid", "spec_type": "draft-mtp", "alias": "hybrid-mtp"}
HYBRID_PLAIN = {"model": "selftest:hybrid_plain", "alias": "hybrid-plain"}


def test_an_mtp_server_round_trip(llama, pytester, run_fleet):
    """The -mtp file served with --spec-type draft-mtp and its own serve script: init asks
    spec_decode, counts the head in vram (mtp: true, from the script), and every claim it
    writes passes against the same server."""
    import httpx

    server = llama(**HYBRID_MTP)
    model = httpx.get(f"{server.url}/props", timeout=10).json()["model_path"]
    port, here = server.url.rsplit(":", 1)[1], pytester.path
    (here / "mtp.sh").write_text(
        f"exec llama-server -m {model} --spec-type draft-mtp --host 127.0.0.1 --port {port} "
        "--alias hybrid-mtp --ctx-size 4096 --parallel 1 --jinja --metrics\n")
    rc, text, _ = init(here, server.url, "--serve", str(here / "mtp.sh"), name="init.yaml")
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert "# /slots speculative true" in claims_line(text, "spec_decode")
    assert entry["expect"]["vram"] == {"model": model, "ctx_size": 4096, "mtp": True}
    assert "--spec-type draft-mtp (--serve)" in claims_line(text, "vram")
    assert "# vram:" not in text
    result = round_trip(run_fleet, text, "-v")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines_random(["*test_spec_decode[[]hybrid-mtp[]] PASSED*",
                                        "*test_serve_config*PASSED*",
                                        "*test_vram_fits[[]hybrid-mtp[]] SKIPPED*"])


def test_the_same_model_without_its_head_asks_no_spec_decode(llama, tmp_path, run_fleet):
    server = llama(**HYBRID_PLAIN)
    rc, text, _ = init(tmp_path, server.url)
    assert rc == 0
    (entry,) = validates(text)["endpoints"].values()
    assert "spec_decode" not in entry["expect"]
    assert "mtp" not in entry["expect"]["vram"] and "# vram:" not in text
    result = round_trip(run_fleet, text)
    assert result.ret == 0, result.stdout.str()[-3000:]


def test_the_mtp_servers_spec_decode_holds_the_seeds_band(llama, tmp_path, run_fleet):
    """init writes spec_decode: true (any acceptance above 0); the band a fleet edits it to, the
    runbook's 0.6 to 0.95 for an MTP head, holds on the same server: its head drafts from the
    model's own weights."""
    server = llama(**HYBRID_MTP)
    rc, text, _ = init(tmp_path, server.url, "--no-perf")
    assert rc == 0
    line = claims_line(text, "spec_decode")
    banded = text.replace(line, "      spec_decode: {min_acceptance: 0.6, max_acceptance: 0.95}")
    result = round_trip(run_fleet, banded, "-k", "spec_decode", "-v")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*test_spec_decode[[]hybrid-mtp[]] PASSED*"])
