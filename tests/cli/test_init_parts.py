"""frank init's parts that need no server: entry names, rounding, serve files matched by port,
and a generic OpenAI-compatible server (the loopback emulator: no engine here is generic)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from emulator import Emulator, Reply, chat_json
from checkout import ROOT
from pytest_frank.cli import main
from pytest_frank.init import fleet_file, serve_files
from pytest_frank.init.measured import round_down, round_up
from pytest_frank.init.survey import Survey, _vram, with_serve

pytestmark = pytest.mark.emulated

EXAMPLES = ROOT / "examples" / "serve"


def test_entry_names_are_test_ids_and_unique():
    taken: set[str] = set()
    assert fleet_file.entry_name("Qwen/Qwen3-8B", taken) == "Qwen-Qwen3-8B"
    assert fleet_file.entry_name("Qwen/Qwen3 8B", taken) == "Qwen-Qwen3-8B-2"
    assert fleet_file.entry_name("///", taken) == "endpoint"


def test_bounds_round_outward_to_two_figures():
    assert round_up(0.2634) == 0.27
    assert round_up(12.01) == 13
    assert round_down(2291.8 / 3) == 760
    assert round_down(0.0) == 0.0


def test_serve_files_match_their_server_by_port(tmp_path):
    files = [str(EXAMPLES / n) for n in ("frank-large.service", "frank-large.env",
                                         "frank-large.sh", "frank-small.service",
                                         "frank-small.env")]
    specs = serve_files.specs(files)
    assert len(specs) == 2
    large = serve_files.match(specs, "http://192.168.0.235:7770/v1", "llamacpp", EXAMPLES)
    assert large is not None and large["files"] == {
        "unit": "frank-large.service", "env": "frank-large.env", "script": "frank-large.sh"}
    assert "port 7770" in large["why"]
    assert serve_files.match(specs, "http://192.168.0.143:9999", "vllm", EXAMPLES) is None
    small = serve_files.match(specs, "http://192.168.0.143:52625/v1", "vllm", tmp_path)
    assert small is not None and set(small["files"]) == {"unit", "env"}
    assert specs == []  # each spec goes to one server


def test_a_generic_openai_server_with_several_models(tmp_path):
    with Emulator("openai", models=["org/model-a", "org/model-b"]) as em:
        em.route("POST", "/v1/chat/completions", lambda r: Reply(200, chat_json(model="org/model-a")))
        out = tmp_path / "fleet.yaml"
        assert main(["init", em.url, "--no-perf", "-o", str(out)]) == 0
        one = out.read_text()
        assert main(["init", em.url, "--no-perf", "--all-models", "-o", str(out), "--force"]) == 0
        every = yaml.safe_load(out.read_text())
    (entry,) = yaml.safe_load(one)["endpoints"].values()
    assert entry["engine"] == "openai" and entry["alias"] == "org/model-a"
    assert "# a model list on /v1/models and no engine's own sign" in one
    assert "# served by /v1/models; also served: org/model-b" in one
    assert list(every["endpoints"]) == ["org-model-a", "org-model-b"]


def test_every_claim_init_can_write_loads(tmp_path):
    """Each value shape a survey may hold passes the fleet loader (schema and claim options)."""
    from pytest_frank.fleet import load
    from pytest_frank.init.survey import Found, Survey, _effort_levels

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    claims = {"tools": Found(True, "t"), "agent": Found(True, "a"), "reasoning": Found(True, "r"),
              "reasoning_effort": Found(_effort_levels(), "e"), "spec_decode": Found(True, "s"),
              "vision": Found(True, "v"), "slots": Found({"count": 2, "ctx_per_slot": 8192}, "sl"),
              "vram": Found({"model": str(model), "ctx_size": 4096}, "vr"),
              "perf": Found({"max_ttft_s": 0.27, "min_decode_tps": 760.0}, "p # not a key"),
              "clients": Found(["claude_code", "pi"], "c")}
    found = Survey(url="http://127.0.0.1:8080", engine="llamacpp", engine_why="w\nx",
                   models=["a"], claims=claims)
    text = fleet_file.render([(found, None)], key_env="KEY", all_models=False, out_name="f.yaml")
    (tmp_path / "f.yaml").write_text(text)
    (entry,) = load(tmp_path / "f.yaml", environ={"KEY": "k"}).values()
    assert set(entry.expect) == set(claims)
    assert entry.expect["reasoning_effort"] == {"low": "low", "medium": "medium", "high": "high"}
    assert "engine: llamacpp  # w x" in text  # evidence stays on its line


def _drafting(model: Path) -> Survey:
    from pytest_frank.init.survey import Found

    found = Survey(url="http://127.0.0.1:8080", engine="llamacpp", engine_why="w", models=["m"],
                   claims={"spec_decode": Found(True, "/slots speculative true")})
    _vram(found, str(model), None)
    return found


def test_a_relative_model_path_is_written_absolute(tmp_path, monkeypatch):
    """The engine reports the path it was given; the battery reads expect.vram relative to the
    fleet file, so init writes where the file is, not where init ran."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "x.gguf").write_bytes(b"GGUF" + bytes(8))
    monkeypatch.chdir(tmp_path)
    found = Survey(url="http://h:1", engine="llamacpp", engine_why="w", models=["m"])
    _vram(found, "models/x.gguf", None)
    assert found.claims["vram"].value == {"model": str(tmp_path / "models" / "x.gguf")}
    assert f"the engine reports models/x.gguf, read from {tmp_path}" in found.claims["vram"].why
    _vram(found, "elsewhere/y.gguf", None)
    assert found.notes["vram"].startswith("not written: the engine reports the model "
                                          "elsewhere/y.gguf, not a GGUF file readable here")


def test_a_drafting_server_without_serve_files_says_the_draft_is_left_out(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    found = _drafting(model)
    assert "draft" not in found.claims["vram"].value
    assert found.notes["vram"].startswith("the draft is left out: the server drafts (/slots "
                                          "speculative true) and no route names a draft file")
    with_serve(found, None)
    assert "vram" in found.notes


def _serve(tmp_path: Path, name: str, text: str) -> dict:
    script = tmp_path / name
    script.write_text(text)
    specs = serve_files.specs([str(script)])
    served = serve_files.match(specs, "http://127.0.0.1:8080", "llamacpp", tmp_path)
    assert served is not None
    return served


def test_the_serve_file_names_the_draft(tmp_path):
    from pytest_frank.local.selftest_model import write_model

    model, draft = write_model(tmp_path / "m.gguf"), write_model(tmp_path / "d.gguf", "no_think")
    unit = (f"[Service]\nWorkingDirectory={tmp_path}\nExecStart=llama-server -m {model} "
            "-md d.gguf --spec-type draft-simple --port 8080\n")
    found = _drafting(model)
    with_serve(found, _serve(tmp_path, "frank.service", unit))
    assert found.claims["vram"].value == {"model": str(model), "draft": str(draft)}
    assert "; the draft --model-draft d.gguf (--serve)" in found.claims["vram"].why
    assert "vram" not in found.notes
    # the memory model counts it: the draft's weights and KV on top of the model's
    from pytest_frank.vram.plan import make_plan, model_memory

    alone, both = (model_memory(make_plan({"ctx_size": 4096, **value}, str(model))).estimate
                   for value in ({}, {"draft": str(draft)}))
    assert both.draft_weights > 0 and both.draft_kv > 0
    assert both.total == alone.total + both.draft_weights + both.draft_kv


@pytest.mark.parametrize("flags, value, said", [
    ("--spec-type draft-mtp", {"mtp": True}, "; --spec-type draft-mtp (--serve)"),
    ("--spec-type ngram-mod", {}, "; --spec-type ngram-mod (--serve) drafts with no model"),
])
def test_the_serve_file_says_what_drafts(tmp_path, flags, value, said):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    found = _drafting(model)
    with_serve(found, _serve(tmp_path, "s.sh", f"exec llama-server -m {model} {flags} "
                                                "--port 8080\n"))
    assert found.claims["vram"].value == {"model": str(model), **value}
    assert found.claims["vram"].why.endswith(said) and "vram" not in found.notes


def test_a_draft_file_not_readable_here_is_said(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    found = _drafting(model)
    with_serve(found, _serve(tmp_path, "s.sh", f"exec llama-server -m {model} -md "
                                               "/nowhere/d.gguf --spec-type draft-simple "
                                               "--port 8080\n"))
    assert "draft" not in found.claims["vram"].value
    assert found.notes["vram"] == ("the draft is left out: --model-draft /nowhere/d.gguf "
                                   "(--serve) is not a GGUF file readable here")


def test_what_was_not_written_is_a_comment_beside_its_claim(tmp_path):
    from pytest_frank.fleet import load
    from pytest_frank.init.survey import Found

    found = Survey(url="http://127.0.0.1:8080", engine="llamacpp", engine_why="w",
                   models=["a"], claims={"reasoning": Found(True, "r")},
                   notes={"tools": "not written: a forced call (tool_choice required) came "
                                   "back as text ('Hi', 3 tokens, finish_reason 'stop'): the "
                                   "model never opened a call",
                          "agent": "not written: an agent step needs tools"})
    text = fleet_file.render([(found, None)], key_env=None, all_models=False, out_name="f.yaml")
    (tmp_path / "f.yaml").write_text(text)
    (entry,) = load(tmp_path / "f.yaml").values()
    assert set(entry.expect) == {"reasoning"}
    assert text.splitlines()[-3:] == [
        "      reasoning: true  # r",
        "      # tools: not written: a forced call (tool_choice required) came back as text "
        "('Hi', 3 tokens, finish_reason 'stop'): the model never opened a call",
        "      # agent: not written: an agent step needs tools"]


@pytest.mark.parametrize("auto_status", [200, 400])
def test_a_server_silent_on_its_template_is_asked_a_forced_call_and_auto(tmp_path, auto_status):
    from emulator import serve_chat

    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_time", "arguments": '{"timezone": "Europe/Paris"}'}}

    def answer(body):
        if body.get("tool_choice") == "required":
            return chat_json(None, finish="tool_calls", tool_calls=[call])
        if body.get("tool_choice") == "auto" and auto_status != 200:
            return Reply(auto_status, {"error": {"message": '"auto" tool choice requires '
                                                 "--enable-auto-tool-choice", "code": 400}})
        return chat_json("Hello!")

    with Emulator("openai", models=["m"]) as em:
        serve_chat(em, answer)
        out = tmp_path / "fleet.yaml"
        assert main(["init", em.url, "--no-perf", "-o", str(out)]) == 0
        text = out.read_text()
    (entry,) = yaml.safe_load(text)["endpoints"].values()
    forced = "a forced call (tool_choice required) came back as a valid get_time call"
    if auto_status == 200:
        assert {"tools", "agent"} <= set(entry["expect"])
        assert f"tools: true  # {forced}; tool_choice auto answered 200" in text
    else:
        assert not {"tools", "agent"} & set(entry["expect"])
        assert (f"      # tools: not written: {forced}, but tool_choice auto: answered 400: "
                '"auto" tool choice requires --enable-auto-tool-choice') in text


def test_a_client_is_offered_only_where_every_turn_fits():
    """The issue's case: Open WebUI's first request fits the slot, its second, carrying the
    call and its result, does not (2,142 tokens of a 2,048-token slot); counted as the clients
    claim counts, by each reply's usage."""
    from pytest_frank.claims.clients.play import Played, Step
    from pytest_frank.claims.clients.profile import Choices
    from pytest_frank.claims.clients.registry import PROFILES
    from pytest_frank.init.clients import _counted
    from pytest_frank.runtime.chat import Reply as Answer

    first = PROFILES["openwebui"].first(Choices())
    played = Played(client="openwebui", first=first, steps=[
        Step("system, user", Answer(status=200, prompt_tokens=1702)),
        Step("system, user, assistant (1 tool_call(s)), tool",
             Answer(status=400, prompt_tokens=2142))])
    assert _counted(None, played, 2048) == ([1702, 2142], (
        "turn 2 needs 2142 tokens (2142 of prompt, counted by usage), over the 2048-token "
        "context per slot"))
    assert _counted(None, played, 4096) == ([1702, 2142], None)
    budgeted = Played(client="pi", first=PROFILES["pi"].first(Choices(max_tokens=1000)),
                      steps=played.steps)
    assert _counted(None, budgeted, 3000)[1] == (
        "turn 2 needs 3142 tokens (2142 of prompt, counted by usage plus its output budget "
        "1000), over the 3000-token context per slot")


def test_perf_bounds_come_from_the_slowest_reading_and_say_the_machine_was_busy(monkeypatch):
    """Three readings, one of them slow (the machine busy then): the floor is the slowest's,
    every reading is in the comment, and a load average over half the cores is noted."""
    from pytest_frank.claims import perf as perf_claim
    from pytest_frank.init import measured
    from pytest_frank.runtime.chat import Reply as Answer

    readings = iter([(0.010, 95.0), (0.030, 30.0), (0.011, 94.0)])

    class Run(Answer):
        def decode_rate(self):
            return self.rate

    def speed(target):
        ttft, rate = next(readings)
        runs = []
        for _ in range(3):
            run = Run(status=200, first_token_s=ttft)
            run.rate = rate
            runs.append(run)
        return perf_claim.Runs(max_tokens=64, runs=runs)

    class Target:
        class endpoint:
            url = "http://127.0.0.1:8080"

    monkeypatch.setattr(perf_claim, "speed", speed)
    monkeypatch.setattr(measured, "busy_now", lambda: (3.4, 2))
    found = Survey(url="u", engine="llamacpp", engine_why="", models=["m"])
    measured.perf(Target(), found, 3.0)
    assert found.claims["perf"].value == {"max_ttft_s": 0.28, "min_decode_tps": 3.1}
    assert ("3 readings (each the median of 3 streamed answers): time to first token 0.010, "
            "0.030, 0.011s, decode 95.0, 30.0, 94.0 tok/s; bounds from the slowest, with a 3x "
            "margin times each figure's spread (3.00x, 3.17x)") in found.claims["perf"].why
    assert found.notes["perf"].startswith("measured while this machine was busy: load average "
                                          "3.4 on 2 core(s) with the server idle")
