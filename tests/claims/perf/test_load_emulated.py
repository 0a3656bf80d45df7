"""The load claim against endpoints no engine here is on demand: one whose streams never end,
beside a healthy one (emulated vLLM, tests/support/emulator.py). The ladder's requests are read through
the same capped reader with the same deadlines as every other probe's, so the endless stream
costs the hostile-endpoint bound, not the ladder, and the healthy endpoint's ladder passes."""

from __future__ import annotations

import json
import time

import pytest
from emulator import Emulator, serve_chat
from healthy_engines import endless_streams, healthy_chat

pytestmark = pytest.mark.emulated

READY, TIMEOUT = 1, 1
BOUND = READY + 4 * TIMEOUT + 5  # the README's bound on one endpoint
STARTUP = 6  # the in-process pytest's own start, collection and reports, on a busy machine


def test_an_endless_stream_under_load_costs_the_bound_and_spares_the_healthy_ladder(run_fleet):
    with Emulator("vllm", models=["m"]) as hostile, Emulator("vllm", models=["m"]) as healthy:
        serve_chat(hostile, endless_streams)
        serve_chat(healthy, healthy_chat("reasoning"))
        load = {"concurrency": 4, "requests": 14, "max_tokens": 32}
        # the healthy one patient: on a busy machine four streams at once may take over 1 s
        fleet = {"endpoints": {
            name: {"url": em.url, "engine": "vllm", "alias": "m", "ready_timeout": READY,
                   "timeout": timeout, "expect": {"load": load}}
            for name, em, timeout in (("hostile", hostile, TIMEOUT), ("healthy", healthy, 30))}}
        start = time.monotonic()
        result = run_fleet(fleet, "-m", "load", "-p", "no:randomly")
        took = time.monotonic() - start
        streams = sum(r.path == "/v1/chat/completions" and (r.body or {}).get("stream") is True
                      for r in hostile.requests)
    result.assert_outcomes(passed=1, failed=1)
    assert took < BOUND + STARTUP, took
    assert streams == 1  # the first one cut, no other generation is sent
    result.stdout.fnmatch_lines([
        "*at 1 in flight, requests failed: request #1 (streamed): *without ending*; errors in 1 "
        "of 2 (50%, under 97% at 95%) replies, over max_error_rate 0: it fails with one request "
        "at a time too*"])
    table = result.stdout.str()
    assert "healthy  load ok" in table and "hostile  load FAIL" in table


def test_the_ladder_climbs_no_higher_than_the_entrys_concurrency(run_fleet, pytester):
    """vLLM reports no slot count, so the ladder's top would be 4; the entry's `concurrency: 2`
    holds it at 2, and the emulated engine (answering after 0.05 s, so a burst overlaps) never
    sees more in flight."""
    with Emulator("vllm", models=["m"], latency=0.05) as em:
        serve_chat(em, healthy_chat("reasoning"))
        fleet = {"endpoints": {"ep": {"url": em.url, "engine": "vllm", "alias": "m",
                                      "concurrency": 2, "expect": {"load": {"requests": 9}}}}}
        result = run_fleet(fleet, "-m", "load", "-p", "no:randomly", "--frank-json=run.json")
        peak = em.peak_in_flight
    result.assert_outcomes(passed=1)
    assert peak == 2
    row = json.loads((pytester.path / "run.json").read_text())["rows"][0]
    assert "ladder: 1, 2 in flight (top 2: the fleet entry's concurrency 2 (4: the endpoint " \
           "reports no slot count (set expect.load.concurrency) would be more))" in row["notes"][0]
