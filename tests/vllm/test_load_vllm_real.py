"""The load claim against real vLLM 0.32.0 (tests/support/vllm_server.py's FULL configuration: the
bigram model with the qwen3 reasoning and hermes tool parsers, on the CPU). vLLM reports no slot
count, so the ladder climbs to expect.load.concurrency: every reply at 1, 2 and 4 in flight
(plain, streamed, tool-forced, thinking) is whole and its own."""

from __future__ import annotations

import json

import pytest
from fleets import one_endpoint
from vllm_server import CONFIGS, KEY

pytestmark = pytest.mark.real


@pytest.mark.vllm_config("FULL")
def test_vllm_passes_the_ladder_at_1_2_and_4_in_flight(vllm, run_fleet, pytester):
    server = vllm(**CONFIGS["FULL"])
    result = run_fleet(one_endpoint(server.url, "vllm", alias=server.model, api_key=KEY,
                                    timeout=120,
                                    expect={"load": {"concurrency": 4, "requests": 28},
                                            "tools": True, "reasoning": True}),
                       "-m", "load", "-p", "no:randomly", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    row = json.loads((pytester.path / "run.json").read_text())["rows"][0]
    said = "\n".join(row["notes"])
    assert "ladder: 1, 2, 4 in flight (top 4: expect.load.concurrency 4); requests plain, " \
           "streamed, thinking, tools" in said, said
    assert "errors 0 of 28: under 10% at 95%; reasoning only 0 of 28: under 10% at 95%; " \
           "cross-talk 0 of 28: under 10% at 95%" in said, said
