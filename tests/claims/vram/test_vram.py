"""vram: the offline config gate on GGUFs the tests write (local and over HTTP), the live check on
the real tiny llama.cpp with a command source, a fake and a real nvidia-smi, and DCGM / vLLM
metrics from the emulator."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys

import gguf_files as gf
import pytest
from emulator import Emulator, Reply, metrics_text
from fleets import one_endpoint

pytestmark = pytest.mark.real

DEAD = "http://127.0.0.1:9"   # nothing listens: the offline gate must not care
MiB = 1 << 20


def seed_model(path):
    """The seeds' frank-default-large as a header: 64 blocks, every 4th attention with 4 KV heads
    x 256, no NextN, 14982 MiB of weights (sparse zeros)."""
    kv = {"{arch}.block_count": 64, "{arch}.context_length": 262144,
          "{arch}.embedding_length": 5120, "{arch}.attention.head_count": 24,
          "{arch}.attention.head_count_kv": 4, "{arch}.attention.key_length": 256,
          "{arch}.attention.value_length": 256, "{arch}.full_attention_interval": 4}
    return gf.write_gguf(path, "qwen35", kv, [("token_embd.weight", (1024, 14982 * 1024), gf.Q.I8)])


def weights_only(path, mib: int):
    """A draft sidecar that only weighs something: the seeds' 861 MiB FastMTP file."""
    return gf.write_gguf(path, "llama", {}, [("output.weight", (1024, mib * 1024), gf.Q.I8)])


@pytest.fixture(scope="module")
def seed_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vram")
    return {"model": seed_model(d / "seed.gguf"), "draft": weights_only(d / "draft.gguf", 861)}


def seed_vram(files, **over):
    """expect.vram with the seeds' numbers: q8_0 K, f16 V, 24576 MiB GPU, 1024 MiB fixed."""
    return {"model": str(files["model"]), "draft": str(files["draft"]), "cache_type_k": "q8_0",
            "cache_type_v": "f16", "ctx_size": 131072, "gpu_mib": 24576, "fixed_mib": 1024,
            "headroom_mib": 1024, **over}


def py_command(line: str) -> list[str]:
    """A real command whose stdout is nvidia-smi's CSV (index, name, used MiB, total MiB)."""
    return [sys.executable, "-c", f"print({line!r})"]


# --------------------------------------------------------------------------- the offline gate

def test_offline_gate_passes_the_seed_config_without_an_endpoint(seed_files, run_fleet):
    result = run_fleet(one_endpoint(DEAD, expect={"vram": seed_vram(seed_files)}),
                       "--frank-offline")
    result.assert_outcomes(passed=1)  # only the offline check; unasked claims are not collected
    result.stdout.fnmatch_lines([
        "*frank tables*",
        "test_vram_fits[[]ep[]]: context math",
        "| Context | KV (MiB) | Free after load |",
        "| 114688 (112K) | 5488 | 2221 (2.17 GiB) |",
        "| 122880 (120K) | 5880 | 1829 (1.79 GiB) |",
        "| 131072 (128K) | 6272 | 1437 (1.40 GiB) |",
        "| 147456 (144K) | 7056 | 653 (0.64 GiB) |",
    ])


def test_offline_gate_fails_short_headroom_naming_the_numbers(seed_files, run_fleet):
    vram = seed_vram(seed_files, ctx_size=147456)
    result = run_fleet(one_endpoint(DEAD, expect={"vram": vram}), "--frank-offline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*fits, but ctx 147456 (144K) leaves 653 MiB free, less than the 1024 MiB headroom "
        "asked (371 MiB short); it needs 23923 MiB (weights 14982 + kv 7056 + draft weights 861 "
        "+ fixed overhead 1024 MiB) of a 24576 MiB GPU",
        "| Context | KV (MiB) | Free after load |",
        "| 147456 (144K) | 7056 | 653 (0.64 GiB) |",
        "*fix: lower ctx_size to 139264 or less (the largest that keeps 1024 MiB free)*",
    ])


def test_offline_gate_does_not_fit(seed_files, run_fleet):
    vram = seed_vram(seed_files, ctx_size=262144, contexts=[262144])
    result = run_fleet(one_endpoint(DEAD, expect={"vram": vram}), "--frank-offline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not fit: ctx 262144 (256K) needs*4835 MiB short*"])


def test_offline_gate_reads_headers_over_http(seed_files, run_fleet):
    with gf.RangeServer(seed_files) as srv:
        vram = seed_vram(seed_files, model=srv.url("model"), draft=srv.url("draft"))
        result = run_fleet(one_endpoint(DEAD, expect={"vram": vram}), "--frank-offline")
        sent, requests = srv.bytes_sent, srv.requests
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["| 131072 (128K) | 6272 | 1437 (1.40 GiB) |"])
    # two headers of a 15.7 GB and an 0.9 GB file: a few ranged reads, never the weights
    assert requests <= 6 and sent < 2 * MiB


def test_offline_gate_broken_header_names_the_offset(seed_files, tmp_path, run_fleet):
    broken = tmp_path / "broken.gguf"
    with open(seed_files["model"], "rb") as f:   # sparse 15.7 GB: read only the start
        broken.write_bytes(f.read(300))
    vram = seed_vram(seed_files, model=str(broken))
    result = run_fleet(one_endpoint(DEAD, expect={"vram": vram}), "--frank-offline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*the GGUF header of {broken} cannot be read: at offset *: "
                                 "*runs past the end of the file (size 300)",
                                 "*fix: point expect.vram at the complete file*"])
    assert "During handling" not in result.stdout.str()


def test_offline_gate_relative_model_path_and_missing_settings(run_fleet, pytester):
    seed_model(pytester.path / "m.gguf")
    no_ctx = run_fleet(one_endpoint(DEAD, expect={"vram": {"model": "m.gguf"}}), "--frank-offline")
    no_ctx.assert_outcomes(skipped=1)
    no_ctx.stdout.fnmatch_lines(["*no `ctx_size` and no live slot shape says it*"])
    no_gpu = run_fleet(one_endpoint(DEAD, expect={"vram": {"model": "m.gguf", "ctx_size": 8192}}),
                       "--frank-offline", "-rs")
    no_gpu.assert_outcomes(skipped=1)   # the header reads; no GPU size to fit: no verdict
    no_gpu.stdout.fnmatch_lines([
        "*modelled 16518 MiB (weights 14982 + kv 512 + fixed overhead 1024 MiB), but no GPU size "
        "to judge it against (no gpu_mib; an offline run reads no GPU): set "
        "expect.vram.gpu_mib to the GPU's memory in MiB*"])
    assert "vram ok" not in no_gpu.stdout.str()
    # `frank tables` shows passing checks' tables only: this one's free column is all "-"
    assert "frank tables" not in no_gpu.stdout.str() and "| 8192 (8K) | 512 | - |" not in \
        no_gpu.stdout.str()


def test_the_context_table_keeps_its_rows_around_the_context(pytester, run_fleet):
    """The rows are ctx_size x 0.875, 0.9375, 1, 1.125, each on a context llama.cpp allocates
    differently (256 cells a slot), not floored to whole thousands."""
    seed_model(pytester.path / "m.gguf")

    def rows(**vram):
        vram = {"model": "m.gguf", "ctx_size": 4096, "gpu_mib": 24576, **vram}
        result = run_fleet(one_endpoint(DEAD, expect={"vram": vram}), "--frank-offline")
        result.assert_outcomes(passed=1)
        return [line.split(" |")[0].lstrip("| ") for line in result.stdout.lines
                if line.startswith("| ") and "Context" not in line]

    assert rows() == ["3584", "3840", "4096 (4K)", "4608"]
    assert rows(parallel=2) == ["3584", "4096 (4K)", "4608"]   # 3840 a slot pads to 4096
    assert rows(parallel=2, kv_unified=True) == ["3584", "3840", "4096 (4K)", "4608"]


def test_vram_options_typos_are_usage_errors(run_fleet):
    typo = run_fleet(one_endpoint(DEAD, expect={"vram": {"gpu_mb": 24576}}))
    assert typo.ret == 4
    typo.stderr.fnmatch_lines(["*endpoints.ep.expect.vram: unknown key 'gpu_mb'*"])
    cmd = run_fleet(one_endpoint(DEAD, expect={"vram": {"source": "command"}}))
    assert cmd.ret == 4
    cmd.stderr.fnmatch_lines(["*expect.vram: 'command' is required but missing*"])
    kind = run_fleet(one_endpoint(DEAD, expect={"vram": {"cache_type_k": "q9"}}))
    kind.stderr.fnmatch_lines(["*expect.vram.cache_type_k: 'q9' is not one of f32*"])


# --------------------------------------------------------------------------- live: real llama.cpp

def live_fleet(server, line: str, **vram):
    return one_endpoint(server.url, expect={"vram": {
        "source": "command", "command": py_command(line), "tolerance_mib": 64, **vram}})


def test_live_models_the_served_model_path(llama, run_fleet):
    """No `model`: /props model_path (the self-test GGUF) is read; 2 slots x 2048 from /slots."""
    server = llama(parallel=2, ctx_size=4096)
    # the model: 0.35 MiB weights + 2 MiB KV + 1024 MiB fixed = 1026.4 MiB
    result = run_fleet(live_fleet(server, "0, NVIDIA GeForce RTX 3090, 1050, 24576"),
                       "-m", "vram")
    result.assert_outcomes(passed=2)
    # no gpu_mib: the fit is judged against the source's total (24576 MiB)
    result.stdout.fnmatch_lines(["test_vram_fits[[]ep[]]: context math",
                                 "| 4096 (4K) | 2 | 23549.6 (23.00 GiB) |"])


def test_live_fit_is_judged_against_the_gpu_the_source_reads(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(live_fleet(server, "0, NVIDIA T400, 300, 512"), "-m", "vram",
                       "-k", "fits")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not fit: ctx 4096 (4K) needs 1026.4 MiB (*) of a 512 "
                                 "MiB GPU: 514.4 MiB short*"])


def test_live_far_over_the_model_lists_the_causes(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(live_fleet(server, "0, NVIDIA GeForce RTX 3090, 15000, 24576"),
                       "-m", "vram")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*command GPU 0 (NVIDIA GeForce RTX 3090) uses 15000 MiB, 13973.6 MiB more than the "
        "1026.4 MiB modelled (weights 0.4 + kv 2 + fixed overhead 1024 MiB; tolerance 64 MiB)*",
        "*fix: the usual causes: --model-draft/-md pointed at the -mtp GGUF*mmap off*another "
        "process on the GPU*"])


def test_live_far_under_the_model_points_at_a_clamped_pool(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(live_fleet(server, "0, NVIDIA GeForce RTX 3090, 300, 24576"), "-m", "vram")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*uses 300 MiB, 726.4 MiB less than the 1026.4 MiB modelled*",
                                 "*fix: the KV pool is smaller than configured*n_ctx_slot*"])


def test_a_server_here_without_a_gpu_is_not_applicable_saying_so(llama, run_fleet, pytester,
                                                                  tmp_path):
    """A CPU server on this machine, which has no nvidia-smi: there is no GPU memory to fit or
    measure, so both halves are not applicable (never inconclusive), and the fleet is ok."""
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(one_endpoint(server.url, expect={"vram": True}), "-m", "vram or health",
                       "--frank-report=cpu.md", env={"PATH": str(tmp_path)})
    result.assert_outcomes(passed=1, skipped=2)  # nothing read: neither the fit nor the use
    result.stdout.fnmatch_lines(["*ep  health ok  vram not applicable*",
                                 "*test_vram_fits*not applicable: modelled 1026.4 MiB (weights "
                                 "0.4 + kv 2 + fixed overhead 1024 MiB), but the endpoint is "
                                 "served on this machine, which has no GPU (the GPU memory source "
                                 "gave no size: no nvidia-smi on this machine (nvidia-smi is not "
                                 "on PATH)): there is none for it to fit; expect.vram.gpu_mib "
                                 "judges it against a GPU of that size*",
                                 "*test_vram[[]*not applicable: no nvidia-smi on this machine "
                                 "(nvidia-smi is not on PATH), and the endpoint is served on this "
                                 "machine: it runs without a GPU*"])
    report = (pytester.path / "cpu.md").read_text()
    assert "**fleet ok: 1 endpoint(s): 0 failing, 0 inconclusive, 1 passing**" in report, report


def test_a_gpu_source_that_reads_nothing_stays_inconclusive(llama, run_fleet, tmp_path):
    """A command source that prints no GPU is a broken reading, not a machine without a GPU."""
    server = llama(parallel=2, ctx_size=4096)
    empty = tmp_path / "gpus"
    empty.write_text(f"#!{sys.executable}\n")
    empty.chmod(empty.stat().st_mode | stat.S_IEXEC)
    result = run_fleet(one_endpoint(server.url, expect={"vram": {"source": "command",
                                                                  "command": [str(empty)]}}),
                       "-m", "vram")
    result.stdout.fnmatch_lines(["*ep  vram *"])
    assert "not applicable" not in result.stdout.str(), result.stdout.str()


def test_live_lists_the_processes_on_the_gpu(llama, run_fleet, tmp_path):
    """A stand-in nvidia-smi on PATH: 2 GiB over the model, and who holds it."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!{sys.executable}\nimport sys\n"
                    "if any('compute-apps' in a for a in sys.argv):\n"
                    "    print('2411, llama-server, 1030'); print('3120, comfyui, 2048')\n"
                    "else:\n"
                    "    print('0, NVIDIA GeForce RTX 3090, 3078, 24576')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(one_endpoint(server.url, expect={"vram": True}), "-m", "vram",
                       env={"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*nvidia-smi GPU 0 (NVIDIA GeForce RTX 3090) uses 3078 MiB*",
                                 "*processes on the GPU: pid 2411 llama-server 1030 MiB; "
                                 "pid 3120 comfyui 2048 MiB*"])


def fake_nvidia_smi(folder, line: str):
    """A stand-in nvidia-smi on PATH that prints `line` and leaves a mark that it ran."""
    fake = folder / "nvidia-smi"
    fake.write_text(f"#!{sys.executable}\nimport pathlib, sys\n"
                    f"pathlib.Path({str(folder / 'ran')!r}).touch()\n"
                    f"if not any('compute-apps' in a for a in sys.argv):\n"
                    f"    print({line!r})\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_live_nvidia_smi_for_a_gpu_on_another_host_is_inconclusive(seed_files, run_fleet,
                                                                  tmp_path):
    """llama.cpp shape on loopback, its GPU declared on 10.255.255.1 (never contacted): this
    machine's nvidia-smi would read the wrong card, so it is not run; the offline fit still is."""
    env = fake_nvidia_smi(tmp_path, "0, NVIDIA GeForce RTX 3090, 22000, 24576")
    with Emulator("llamacpp") as em:
        vram = seed_vram(seed_files, host="10.255.255.1")
        result = run_fleet(one_endpoint(em.url, expect={"vram": vram}), "-m", "vram", env=env)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*test_vram[[]ep[]]: inconclusive: expect.vram.host is 10.255.255.1, not this machine, "
        "and the nvidia-smi source reads this machine's GPU; read that host's instead: source: "
        "command with command: ssh 10.255.255.1 nvidia-smi --query-gpu=index,name,memory.used,"
        "memory.total --format=csv,noheader,nounits, or source: prometheus with metrics_url: the "
        "host's dcgm-exporter (http://10.255.255.1:9400/metrics)*"])
    assert not (tmp_path / "ran").exists()


def test_live_fit_without_gpu_mib_on_another_host_says_why_it_is_unjudged(seed_files, run_fleet,
                                                                          tmp_path):
    env = fake_nvidia_smi(tmp_path, "0, NVIDIA GeForce RTX 3090, 22000, 24576")
    with Emulator("llamacpp") as em:
        vram = seed_vram(seed_files, host="10.255.255.1", gpu_mib=None)
        vram = {k: v for k, v in vram.items() if v is not None}
        result = run_fleet(one_endpoint(em.url, expect={"vram": vram}), "-m", "vram", "-k",
                           "fits", env=env)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*test_vram_fits[[]ep[]]: modelled 23139 MiB (*), but no GPU "
                                 "size to judge it against (no gpu_mib; expect.vram.host is "
                                 "10.255.255.1, not this machine*): set expect.vram.gpu_mib*"])
    assert not (tmp_path / "ran").exists()


def test_live_nvidia_smi_on_loopback_still_reads_this_machine(seed_files, run_fleet, tmp_path):
    """The same emulated endpoint, no host given: 127.0.0.1 is this machine, nvidia-smi is read."""
    env = fake_nvidia_smi(tmp_path, "0, NVIDIA GeForce RTX 3090, 23100, 24576")
    report = tmp_path / "frank.json"
    with Emulator("llamacpp") as em:
        result = run_fleet(one_endpoint(em.url, expect={"vram": seed_vram(
            seed_files, tolerance_mib=256)}), "-m", "vram", "--frank-json", str(report), env=env)
    result.assert_outcomes(passed=2)
    rows = json.loads(report.read_text())["rows"]
    live = next(r for r in rows if r["key"].endswith("test_vram[ep]"))
    assert live["figures"]["vram_used_mib"]["value"] == 23100
    assert "nvidia-smi GPU 0 (NVIDIA GeForce RTX 3090) uses 23100 MiB, 39 MiB less" in \
        " ".join(live["notes"])


@pytest.mark.parametrize("url,source,elsewhere", [
    ("http://10.255.255.1:8080", None, "the endpoint runs on 10.255.255.1, not this machine"),
    ("http://[fd12::7]:8000/v1", None, "ssh fd12::7 nvidia-smi*(http://[[]fd12::7[]]:9400/"),
    ("http://10.255.255.1:8080", "command", None),
    ("http://127.0.0.1:8080", None, None),
    ("http://localhost:8080/v1", "nvidia-smi", None),
])
def test_which_endpoints_nvidia_smi_cannot_read(url, source, elsewhere):
    """The decision from the URL alone (no request is sent: 10.255.255.1 is unroutable)."""
    import fnmatch

    from pytest_frank.claims.vram import Options, _gpu_elsewhere
    from pytest_frank.fleet import Endpoint

    opts = Options(source=source, command="ssh gpu nvidia-smi" if source == "command" else None)
    said = _gpu_elsewhere(Endpoint("ep", "llamacpp", url=url), opts)
    if elsewhere is None:
        assert said is None
    else:
        assert said and fnmatch.fnmatch(said, f"*{elsewhere}*"), said


@pytest.mark.skipif(shutil.which("nvidia-smi") is None,
                    reason="no nvidia-smi on this machine: real GPU readings are not checked")
def test_live_real_nvidia_smi_reading(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(one_endpoint(server.url, expect={"vram": {"gpu": 0}}), "-m", "vram", "-rA")
    # the CPU-only server uses no GPU memory: the reading must be taken and compared
    result.stdout.fnmatch_lines(["*nvidia-smi GPU 0 * uses * MiB*"])


# --------------------------------------------------------------------------- emulated engines

def test_emulated_llamacpp_draft_loading_the_model_twice(seed_files, run_fleet):
    """llama.cpp shape; DCGM says the GPU holds the model's weights twice (-md on the -mtp file)."""
    used = 14982 + 6272 + 1024 + 14982
    dcgm = metrics_text({"DCGM_FI_DEV_FB_USED": [({"gpu": "0"}, 12), ({"gpu": "1"}, used)],
                         "DCGM_FI_DEV_FB_FREE": [({"gpu": "0"}, 24564), ({"gpu": "1"}, 100)]})
    with Emulator("llamacpp") as em:
        em.route("GET", "/metrics", lambda r: Reply(200, dcgm))
        vram = seed_vram(seed_files, draft=None, headroom_mib=0, source="prometheus",
                         metrics_url=f"{em.url}/metrics", gpu=1, tolerance_mib=256)
        vram.pop("draft")
        result = run_fleet(one_endpoint(em.url, expect={"vram": vram}), "-m", "vram")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*DCGM_FI_DEV_FB_USED gpu 1 at http*/metrics uses 37260 MiB, 14982 MiB more than*",
        "*the excess is about the model's weights again (14982 MiB): the model is loaded twice*",
    ])


def vllm_metrics(blocks: int, used: int, total: int = 24576) -> str:
    """vLLM /metrics (cache_config_info) and DCGM gauges, as one exporter URL would serve them."""
    info = {"block_size": 16, "num_gpu_blocks": blocks, "gpu_memory_utilization": 0.9,
            "cache_dtype": "auto", "num_cpu_blocks": "None"}
    return metrics_text({"vllm:cache_config_info": [(info, 1.0)],
                         "DCGM_FI_DEV_FB_USED": [({"gpu": "0"}, used)],
                         "DCGM_FI_DEV_FB_FREE": [({"gpu": "0"}, total - used)]})


@pytest.mark.parametrize("blocks,used,outcome,line", [
    (4096, 22100, "passed", None),
    (1000, 22100, "failed", "*the KV pool holds 16000 tokens, less than one 32768-token sequence "
                            "(vllm:cache_config_info num_gpu_blocks 1000 x block_size 16*clamped*"),
    (4096, 12000, "failed", "*uses 12000 MiB, 10118.4 MiB less than the 22118.4 MiB modelled "
                            "(0.9 of the 24576 MiB GPU*"),
])
def test_emulated_vllm_pool(run_fleet, blocks, used, outcome, line):
    """vLLM shape: max_model_len 32768 on the card, a pool of blocks x 16 tokens, 0.9 of the GPU."""
    with Emulator("vllm", models=["m"]) as em:
        em.route("GET", "/metrics", lambda r: Reply(200, vllm_metrics(blocks, used)))
        vram = {"source": "prometheus", "metrics_url": f"{em.url}/metrics", "tolerance": 0.05}
        result = run_fleet(one_endpoint(em.url, "vllm", expect={"vram": vram}), "-m", "vram")
    # test_vram_fits has no GGUF to read for a vLLM model: it skips, saying why
    result.assert_outcomes(skipped=1, **{outcome: 1})
    if line:
        result.stdout.fnmatch_lines([line, "*fix: *"])


def test_emulated_vllm_pool_from_its_own_metrics(run_fleet):
    """vLLM shape: the DCGM exporter has only memory; the pool comes from the engine's /metrics."""
    with Emulator("vllm", models=["m"]) as exporter, Emulator("vllm", models=["m"]) as em:
        exporter.route("GET", "/metrics", lambda r: Reply(200, metrics_text(
            {"DCGM_FI_DEV_FB_USED": [({"gpu": "0"}, 22100)],
             "DCGM_FI_DEV_FB_FREE": [({"gpu": "0"}, 2476)]})))
        em.route("GET", "/metrics", lambda r: Reply(200, vllm_metrics(1000, 0)))
        vram = {"source": "prometheus", "metrics_url": f"{exporter.url}/metrics"}
        result = run_fleet(one_endpoint(em.url, "vllm", expect={"vram": vram}), "-m", "vram")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines(["*the KV pool holds 16000 tokens*"])
