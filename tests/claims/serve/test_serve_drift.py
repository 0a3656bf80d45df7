"""serve.drift against what servers report (route -> parsed JSON, shaped like real llama.cpp and
vLLM answers), pi's reasoningEffortMap, and the fleet loader's serve: and reasoning_effort.from."""

from __future__ import annotations

import json

import pytest

from pytest_frank import fleet
from pytest_frank.drivers import driver_for
from pytest_frank.claims import bind
from pytest_frank.claims.reasoning_effort.effort_map import EffortMapError, read_effort_map
from pytest_frank.serve import drift, read

pytestmark = pytest.mark.unit

UNIT = """[Service]
ExecStart=/opt/llama-server -m /m/Q-mtp.gguf --alias frank -c 131072 -np 1 \\
  --mmproj /m/mmproj.gguf --spec-type draft-mtp
"""


def llama_live(n_ctx=131072, slots=1, model="/m/Q-mtp.gguf", vision=True, speculative=True,
               alias="frank") -> dict:
    return {
        "/props": {"total_slots": slots, "model_path": model, "modalities": {"vision": vision},
                   "default_generation_settings": {"n_ctx": n_ctx}},
        "/slots": [{"id": i, "n_ctx": n_ctx, "speculative": speculative} for i in range(slots)],
        "/v1/models": {"data": [{"id": alias, "aliases": [alias]}]},
    }


@pytest.fixture
def unit_cmd(tmp_path):
    path = tmp_path / "frank.service"
    path.write_text(UNIT)
    return read({"unit": str(path)})


def test_a_restarted_server_shows_no_drift(unit_cmd):
    assert drift(unit_cmd, llama_live(), driver_for("llamacpp")) == []


def test_unrestarted_context_edit_reads_like_a_diagnosis(unit_cmd):
    (found,) = drift(unit_cmd, llama_live(n_ctx=65536), driver_for("llamacpp"))
    assert found.what == ("the unit asks ctx 131072, the server runs 65536: the service was not "
                          "restarted since the edit")
    assert found.fix == "systemctl restart frank.service"
    assert found.where.endswith("frank.service:2")


@pytest.mark.parametrize("live,expected", [
    (llama_live(slots=2, n_ctx=65536), "the unit asks 1 slots, the server runs 2"),
    (llama_live(model="/m/Q.gguf"), "asks model /m/Q-mtp.gguf, the server runs /m/Q.gguf"),
    (llama_live(alias="qwen"), "asks the name(s) frank, the server runs as qwen"),
    (llama_live(vision=False), "asks a vision projector, the server runs without one"),
    (llama_live(speculative=False), "asks speculative decoding, the server runs without "
     "drafting"),
])
def test_each_llamacpp_drift(unit_cmd, live, expected):
    texts = [f.what for f in drift(unit_cmd, live, driver_for("llamacpp"))]
    assert any(expected in t for t in texts), texts


def test_vllm_max_model_len_and_root():
    cmd = read({"command": "vllm serve /srv/qwen --served-model-name frank "
                           "--max-model-len 131072"})
    live = {"/v1/models": {"data": [{"id": "frank", "root": "/srv/qwen",
                                     "max_model_len": 131072}]}}
    assert drift(cmd, live, driver_for("vllm")) == []
    live["/v1/models"]["data"][0].update(max_model_len=32768, root="/srv/old")
    texts = [f.what for f in drift(cmd, live, driver_for("vllm"))]
    assert texts == [
        "the serve command asks ctx 131072, the server runs 32768: the service was not "
        "restarted since the edit",
        "the serve command asks model /srv/qwen, the server runs /srv/old: the service was not "
        "restarted since the edit"]


def test_sglang_model_path_comes_from_the_server_info():
    cmd = read({"command": "python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                           "--served-model-name frank --context-length 32768"})
    # SGLang's card carries the served name as root; the model path is in /get_server_info.
    live = {"/v1/models": {"data": [{"id": "frank", "root": "frank", "max_model_len": 32768}]},
            "/get_server_info": {"model_path": "Qwen/Qwen3-8B", "context_length": 32768}}
    assert drift(cmd, live, driver_for("sglang")) == []
    live["/get_server_info"]["model_path"] = "Qwen/Qwen3-14B"
    (found,) = drift(cmd, live, driver_for("sglang"))
    assert "asks model Qwen/Qwen3-8B, the server runs Qwen/Qwen3-14B" in found.what
    del live["/get_server_info"]  # a build without the route: nothing to compare, no guess
    assert drift(cmd, live, driver_for("sglang")) == []


MODELS = {"providers": {
    "llamacpp (dankserver)": {"baseUrl": "http://192.168.0.235:7770/v1", "models": [
        {"id": "frank", "compat": {"reasoningEffortMap": {"minimal": "low", "high": "xhigh",
                                                          "off": "none"}}},
        {"id": "plain"}]},
    "other": {"baseUrl": "http://192.168.0.9:8000/v1", "models": [
        {"id": "frank", "compat": {"reasoningEffortMap": {"low": "low"}}}]}}}


def test_pi_reasoning_effort_map(tmp_path):
    path = tmp_path / "models.json"
    path.write_text(json.dumps(MODELS))
    assert read_effort_map(path, "frank", "http://192.168.0.235:7770") == {
        "minimal": "low", "high": "xhigh"}
    assert read_effort_map(path, "frank", provider="other") == {"low": "low"}
    with pytest.raises(EffortMapError, match="several providers"):
        read_effort_map(path, "frank")
    with pytest.raises(EffortMapError, match="model 'plain' has no compat.reasoningEffortMap"):
        read_effort_map(path, "plain")
    with pytest.raises(EffortMapError, match="no model 'gone' in any provider"):
        read_effort_map(path, "gone")
    path.write_text("{")
    with pytest.raises(EffortMapError, match="not valid JSON"):
        read_effort_map(path, "frank")


def write_fleet(tmp_path, body: str):
    path = tmp_path / "fleet.yaml"
    path.write_text(body)
    return path


def test_fleet_resolves_serve_paths_and_the_effort_map(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "frank.service").write_text(UNIT)
    (tmp_path / "cfg" / "models.json").write_text(json.dumps(MODELS))
    path = write_fleet(tmp_path, """
endpoints:
  frank:
    url: http://192.168.0.235:7770/v1
    engine: llamacpp
    alias: frank
    serve: {unit: cfg/frank.service, command: llama-server -m x}
    expect:
      serve: {unit_policy: true}
      reasoning_effort: {from: cfg/models.json}
""")
    ep = fleet.load(path, bind=bind)["frank"]
    assert ep.serve == {"unit": str(tmp_path / "cfg" / "frank.service"),
                        "command": "llama-server -m x"}
    effort = ep.options("reasoning_effort")
    assert effort.map == {"minimal": "low", "high": "xhigh"}
    assert effort.source == str(tmp_path / "cfg" / "models.json")


@pytest.mark.parametrize("serve,expect,message", [
    ("{unit: gone.service}", "{}", "endpoints.frank.serve.unit: "),
    ("{env: a.env}", "{}", "serve: needs one of unit, script, command"),
    ("{unit: a, typo: b}", "{}", "unknown key 'typo'"),
    ("{command: x}", "{serve: {unit_policy: 1}}", "expect.serve.unit_policy"),
    ("{command: x}", "{reasoning_effort: {from: none.json}}",
     "expect.reasoning_effort.from: "),
])
def test_broken_serve_keys_are_usage_errors(tmp_path, serve, expect, message):
    path = write_fleet(tmp_path, f"""
endpoints:
  frank: {{url: "http://h:1", engine: llamacpp, alias: frank, serve: {serve}, expect: {expect}}}
""")
    with pytest.raises(fleet.FleetError) as err:
        fleet.load(path, bind=bind)
    assert message in str(err.value) and str(path) in str(err.value)
