"""The facts a diagnosis reads before it names a cause, table-driven: the wait an answer got and
where it came from, the server's load after a cut read against the battery's own request, what
llama.cpp's /slots, log and a gateway's model card say (decoded tokens, the backend, the
context). tests/engines/test_real_model_diagnoses.py shows the same on real llama.cpp and SmolLM2."""

from __future__ import annotations

import pytest

from pytest_frank.runtime import probes
from pytest_frank.transport import http
from pytest_frank.claims import bind, perf
from pytest_frank.claims.checks import Context
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.target import Target

pytestmark = pytest.mark.unit

LLAMA = driver_for("llamacpp")


@pytest.mark.parametrize("body, floor_from, why", [
    ({"max_tokens": 512}, "expect.perf.min_decode_tps",
     "timeout 30 s + 512 tokens at expect.perf.min_decode_tps 4.4 tok/s"),
    ({"messages": []}, "min_tokens_per_s", "4 x timeout 30 s"),
])
def test_a_wait_says_where_it_comes_from(body, floor_from, why):
    pace = http.Pace.of(body, 30.0, 4.4, floor_from)
    assert pace.why == why


@pytest.mark.parametrize("keys, expect, floor, source", [
    ({}, {}, 5.0, "the default min_tokens_per_s"),
    ({}, {"perf": {"min_decode_tps": 4.4}}, 4.4, "expect.perf.min_decode_tps"),
    ({"min_tokens_per_s": 2}, {"perf": {"min_decode_tps": 4.4}}, 2.0, "min_tokens_per_s"),
])
def test_the_floor_names_its_setting(keys, expect, floor, source):
    target = Target(bind(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1", expect=expect,
                                  **keys)))
    assert (target.pacing.floor, target.pacing.floor_from) == (floor, source)


def _cut(monkeypatch, load, others=0, sent=None):
    """A generation cut as late, the server's load read after it as `load`."""
    monkeypatch.setattr(probes, "server_load", lambda target: load)
    target = Target(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1", timeout=30))
    target.pacing.generating = others
    ex = http.Exchange("POST", "http://127.0.0.1:1/v1/chat/completions",
                       request_json=sent or {"max_tokens": 512}, late=True,
                       error="no answer within 132.4s (timeout 30 s + 512 tokens at the default "
                             "min_tokens_per_s 5 tok/s)" + http.SILENT)
    slow = target.answered_late(ex)
    return slow, ex.error


def test_the_cut_requests_own_slot_is_not_saturation(monkeypatch):
    slow, said = _cut(monkeypatch, probes.ServerLoad(busy=1, slots=1, waiting=0, decoded=400))
    assert "saturated" not in said and "hangs" not in said, said
    assert said.endswith("the one request the server was running is this one (1 of 1 slots "
                         "busy, 0 waiting, 400 tokens decoded; nothing else of the battery's in "
                         "flight): slow, not hung, and not busy with others"), said
    assert slow.fix.startswith("the server is slow, not broken: give its answers more time: "
                               "lower `min_tokens_per_s` (now 5 tok/s, the default "
                               "min_tokens_per_s)"), slow.fix


def test_a_request_decoding_past_its_cap_names_the_cap(monkeypatch):
    slow, said = _cut(monkeypatch, probes.ServerLoad(busy=1, slots=1, waiting=0, decoded=581),
                      sent={"max_tokens": 16})
    assert said.endswith("(1 of 1 slots busy, 0 waiting, 581 tokens decoded of a request capped "
                         "at max_tokens=16): the cap is not applied, so the answer runs on"), said
    assert slow.fix == ("update the engine (max_tokens must cap the answer); a proxy in front "
                        "must pass max_tokens through")


@pytest.mark.parametrize("load, others", [
    (probes.ServerLoad(busy=1, slots=1, waiting=1), 0),  # another client waits
    (probes.ServerLoad(busy=2, slots=2, waiting=0), 0),  # another client holds the other slot
    (probes.ServerLoad(busy=1, slots=1, waiting=0), 1),  # the battery's own other request
])
def test_load_beyond_the_cut_request_is_saturation(monkeypatch, load, others):
    slow, said = _cut(monkeypatch, load, others)
    assert f"the server is saturated ({load.line()}): slow, not hung" in said, said
    assert slow.fix.startswith("the server is busy, not broken")


def test_an_idle_server_after_the_cut_gets_a_conditional_fix(monkeypatch):
    slow, said = _cut(monkeypatch, probes.ServerLoad(busy=0, slots=1, waiting=0))
    assert said.endswith(http.SILENT), said
    assert slow.fix.startswith("if the server is only slow (its log shows this request's tokens "
                               "being generated), give its answers more time"), slow.fix


def test_llamacpp_slots_say_the_tokens_decoded():
    slots = [{"is_processing": True, "next_token": [{"n_decoded": 400}]},
             {"is_processing": False, "next_token": [{"n_decoded": 9}]},
             {"is_processing": True, "next_token": {"n_decoded": 3}}]
    assert LLAMA.decoded_tokens(slots) == 403
    assert LLAMA.decoded_tokens([{"is_processing": True}]) is None


# llama.cpp's load log at info level, as common_params_print_info and load_tensors write it
CPU_LOG = ("0.00.002.745 I cmn  common_param: device_info:\n"
           "0.00.002.756 I cmn  common_param:   - CPU     : AMD EPYC (24105 MiB, 24105 MiB free)\n"
           "0.00.002.836 I cmn  common_param: system_info: n_threads = 1 | CPU : SSE3 = 1 |\n")
GPU_LOG = ("I common_param: device_info:\nI common_param:   - CUDA0   : NVIDIA H100 (81000 MiB)\n"
           "I common_param:   - CPU     : AMD EPYC\nI system_info: n_threads = 8\n")


@pytest.mark.parametrize("log, found", [
    (CPU_LOG, ("cpu", "the log's device_info: CPU")),
    (GPU_LOG, ("gpu", "the log's device_info: CUDA0, CPU")),
    ("load_tensors: offloaded 0/31 layers to GPU\n", ("cpu", "the log: offloaded 0/31 layers "
                                                             "to GPU")),
    (GPU_LOG + "load_tensors: offloaded 31/31 layers to GPU\n",
     ("gpu", "the log: offloaded 31/31 layers to GPU")),
    ("W srv init: security: no API key is set\n", None),
])
def test_llamacpp_reads_the_backend_from_its_log(log, found):
    assert LLAMA.launch.backend({}, log) == found


def _decode_fix(backend, engine="llamacpp"):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1",
                       expect={"perf": {"min_decode_tps": 100}}))
    run = perf.Reply(status=200, tokens=64, first_token_s=0.1, last_token_s=6.4)
    with pytest.raises(pytest.fail.Exception) as failed:
        perf.judge_decode(perf.Runs(runs=[run], max_tokens=64, backend=backend),
                          Context(ep, driver_for(engine), ep.options("perf")))
    return str(failed.value)


def test_the_decode_fix_follows_the_backend():
    # What it runs on, and where that was read (a device list can be long), ends the diagnosis;
    # the fix says what to do there, short enough to read on one terminal line or two.
    cpu = _decode_fix(("cpu", "xllamacpp's ggml devices: CPU"))
    line, fix = cpu.split("\n  fix: ")
    assert line.endswith("is under min_decode_tps 100, on the CPU, whose cores and memory "
                         "bandwidth bound it (xllamacpp's ggml devices: CPU)"), cpu
    assert fix == ("set --threads to the physical cores, serve "
                   "a smaller quant or model, or move it to a GPU; check that no other load "
                   "shares the machine; or relax expect.perf.min_decode_tps"), cpu
    assert len(fix) < 220 and "-ngl" not in cpu and "the card" not in cpu, cpu
    gpu = _decode_fix(("gpu", "the log: offloaded 31/31 layers to GPU"))
    assert ", on a GPU (the log: offloaded 31/31 layers to GPU)\n  fix: check that every layer " \
           "is offloaded to the GPU (-ngl)" in gpu, gpu
    unknown = _decode_fix(None)
    assert "is under min_decode_tps 100\n  fix: on a GPU, check that every layer is offloaded " \
           "to the GPU (-ngl)" in unknown, unknown
    assert "; if it runs on the CPU, set --threads to the physical cores" in unknown, unknown


@pytest.mark.parametrize("payloads, ctx", [
    # a gateway in front of llama.cpp: no /props or /slots, a card that says max_model_len
    ({"/v1/models": {"data": [{"id": "m", "max_model_len": 2048}]}}, 2048),
    ({"/v1/models": {"data": [{"id": "m"}]}}, None),
    ({"/props": {"default_generation_settings": {"n_ctx": 4096}},
      "/v1/models": {"data": [{"id": "m", "max_model_len": 2048}]}}, 4096),
])
def test_llamacpp_reads_the_context_from_whichever_route_says_it(payloads, ctx):
    assert LLAMA.slot_shape(payloads)[1] == ctx
