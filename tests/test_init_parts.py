"""frank init's parts that need no server: entry names, rounding, serve files matched by port,
and a generic OpenAI-compatible server (the loopback emulator: no engine here is generic)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from emulator import Emulator, Reply, chat_json
from pytest_frank.cli import main
from pytest_frank.init import render, serve_files
from pytest_frank.init.survey import _round_down, _round_up

EXAMPLES = Path(__file__).parent.parent / "examples" / "serve"


@pytest.mark.unit
def test_entry_names_are_test_ids_and_unique():
    taken: set[str] = set()
    assert render.entry_name("Qwen/Qwen3-8B", taken) == "Qwen-Qwen3-8B"
    assert render.entry_name("Qwen/Qwen3 8B", taken) == "Qwen-Qwen3-8B-2"
    assert render.entry_name("///", taken) == "endpoint"


@pytest.mark.unit
def test_bounds_round_outward_to_two_figures():
    assert _round_up(0.2634) == 0.27
    assert _round_up(12.01) == 13
    assert _round_down(2291.8 / 3) == 760
    assert _round_down(0.0) == 0.0


@pytest.mark.unit
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


@pytest.mark.emulated
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


@pytest.mark.unit
def test_every_claim_init_can_write_loads(tmp_path):
    """Each value shape a survey may hold passes the fleet loader (schema and claim options)."""
    from pytest_frank.fleet import load
    from pytest_frank.init.survey import Found, Survey, _effort_levels

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    claims = {"tools": Found(True, "t"), "reasoning": Found(True, "r"),
              "reasoning_effort": Found(_effort_levels(), "e"), "spec_decode": Found(True, "s"),
              "vision": Found(True, "v"), "slots": Found({"count": 2, "ctx_per_slot": 8192}, "sl"),
              "vram": Found({"model": str(model), "ctx_size": 4096}, "vr"),
              "perf": Found({"max_ttft_s": 0.27, "min_decode_tps": 760.0}, "p # not a key")}
    found = Survey(url="http://127.0.0.1:8080", engine="llamacpp", engine_why="w\nx",
                   models=["a"], claims=claims)
    text = render.render([(found, None)], key_env="KEY", all_models=False, out_name="f.yaml")
    (tmp_path / "f.yaml").write_text(text)
    (entry,) = load(tmp_path / "f.yaml", environ={"KEY": "k"}).values()
    assert set(entry.expect) == set(claims)
    assert entry.expect["reasoning_effort"] == {"low": "low", "medium": "medium", "high": "high"}
    assert "engine: llamacpp  # w x" in text  # evidence stays on its line
