"""Parsers for measured GPU memory, on recorded nvidia-smi / DCGM / vLLM output."""

from __future__ import annotations

import os
import shlex
import stat
import sys

import pytest
from gguf_files import RangeServer

from pytest_frank.vram.sources import (
    MiB,
    VRAMSourceError,
    command_gpus,
    fetch_metrics,
    local_compute_apps,
    local_gpus,
    parse_compute_apps,
    parse_dcgm,
    parse_gpus,
    parse_vllm_cache_config,
    run_command,
)

pytestmark = pytest.mark.unit

NOHEADER_NOUNITS = """\
0, NVIDIA GeForce RTX 3090, 20512, 24576
1, NVIDIA GeForce RTX 3090, 3, 24576
"""

WITH_HEADER = """\
index, name, memory.used [MiB], memory.total [MiB]
0, NVIDIA GeForce RTX 3090, 20512 MiB, 24576 MiB
1, NVIDIA GeForce RTX 3090, 3 MiB, 24576 MiB
"""

HEADER_NOUNITS = """\
index, name, memory.used [MiB], memory.total [MiB]
0, NVIDIA H200, 130210, 143771
"""

NOT_SUPPORTED = """\
index, name, memory.used [MiB], memory.total [MiB]
0, NVIDIA GB10, [N/A], [N/A]
"""

APPS_HEADER = """\
pid, process_name, used_gpu_memory [MiB]
2411, /opt/llama.cpp/build/bin/llama-server, 22786 MiB
3120, python3, 310 MiB
"""

DCGM = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-5f1c",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA GeForce RTX 3090",Hostname="dankclaw",DCGM_FI_DRIVER_VERSION="570.86.15"} 1695
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-5f1c",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA GeForce RTX 3090",Hostname="dankclaw",DCGM_FI_DRIVER_VERSION="570.86.15"} 1598
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-77aa",pci_bus_id="00000000:02:00.0",device="nvidia1",modelName="NVIDIA GeForce RTX 3090",Hostname="dankclaw",DCGM_FI_DRIVER_VERSION="570.86.15"} 24238
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-5f1c",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA GeForce RTX 3090",Hostname="dankclaw",DCGM_FI_DRIVER_VERSION="570.86.15"} 22652
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-77aa",pci_bus_id="00000000:02:00.0",device="nvidia1",modelName="NVIDIA GeForce RTX 3090",Hostname="dankclaw",DCGM_FI_DRIVER_VERSION="570.86.15"} 12
# HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-5f1c",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA GeForce RTX 3090",Hostname="dankclaw",DCGM_FI_DRIVER_VERSION="570.86.15"} 326
"""

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="frank-medium"} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="fp8_e4m3",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",is_attention_free="False",kv_cache_memory_bytes="12884901888",num_cpu_blocks="None",num_gpu_blocks="43690",num_gpu_blocks_override="None",sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="frank-medium"} 1234.0
"""


# --------------------------------------------------------------------------- nvidia-smi CSV

@pytest.mark.parametrize("text", [NOHEADER_NOUNITS, WITH_HEADER])
def test_gpus_with_and_without_header_and_units(text):
    gpus = parse_gpus(text)
    assert [(g.index, g.name, g.used, g.total) for g in gpus] == [
        (0, "NVIDIA GeForce RTX 3090", 20512 * MiB, 24576 * MiB),
        (1, "NVIDIA GeForce RTX 3090", 3 * MiB, 24576 * MiB)]
    assert gpus[0].free == 4064 * MiB


def test_gpus_header_without_units():
    (gpu,) = parse_gpus(HEADER_NOUNITS)
    assert gpu.used == 130210 * MiB and gpu.total == 143771 * MiB and gpu.name == "NVIDIA H200"


def test_gpus_not_supported_values_are_none():
    (gpu,) = parse_gpus(NOT_SUPPORTED)
    assert gpu.used is None and gpu.total is None and gpu.free is None


def test_gpus_other_field_orders():
    header = "name, memory.total [MiB], memory.free [MiB], memory.used [MiB], uuid\n"
    (gpu,) = parse_gpus(header + "NVIDIA L4, 23034 MiB, 22800 MiB, 234 MiB, GPU-1234\n")
    assert gpu.index is None and gpu.used == 234 * MiB and gpu.total == 23034 * MiB
    assert gpu.extra == {"memory.free": "22800 MiB", "uuid": "GPU-1234"}
    (gpu,) = parse_gpus("1, 300, 1000\n", fields=["index", "memory.used", "memory.total"])
    assert (gpu.index, gpu.used, gpu.total) == (1, 300 * MiB, 1000 * MiB)


def test_gpus_bad_lines_name_the_problem():
    with pytest.raises(VRAMSourceError, match="line 1: 3 columns, expected 4"):
        parse_gpus("0, RTX, 12\n")
    with pytest.raises(VRAMSourceError, match="'lots' is not a number of MiB"):
        parse_gpus("0, RTX, lots, 24576\n")
    with pytest.raises(VRAMSourceError, match="no memory.used column"):
        parse_gpus("index, name\n0, RTX\n")
    assert parse_gpus("\n") == []


def test_compute_apps():
    apps = parse_compute_apps(APPS_HEADER)
    assert [(a.pid, a.process_name, a.used) for a in apps] == [
        (2411, "/opt/llama.cpp/build/bin/llama-server", 22786 * MiB), (3120, "python3", 310 * MiB)]
    (app,) = parse_compute_apps("77, llama-server, 1024\n")
    assert (app.pid, app.used) == (77, 1024 * MiB)
    assert parse_compute_apps("") == []


# --------------------------------------------------------------------------- commands

def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_command_source_runs_a_real_command():
    gpus = command_gpus(_py("print('0, NVIDIA GeForce RTX 3090, 20512, 24576')"))
    assert gpus[0].used == 20512 * MiB
    line = shlex.join(_py("print('0, A, 1, 2')"))
    assert command_gpus(line)[0].total == 2 * MiB                      # shlex-split string
    assert command_gpus(line + " | cat", shell=True)[0].used == MiB    # a shell line


def test_command_failure_names_command_and_status(monkeypatch):
    monkeypatch.setenv("FRANK_TEST_SECRET", "hunter2")
    cmd = _py("import sys; sys.stderr.write('ssh: connect to host gpu1 port 22: "
              "Connection refused\\n'); sys.exit(255)")
    with pytest.raises(VRAMSourceError) as err:
        command_gpus(cmd)
    msg = str(err.value)
    assert "exited with status 255: ssh: connect to host gpu1 port 22: Connection refused" in msg
    assert sys.executable in msg and "hunter2" not in msg


def test_command_timeout_and_missing_program():
    with pytest.raises(VRAMSourceError, match="did not finish within 0.2 s"):
        run_command(_py("import time; time.sleep(5)"), timeout=0.2)
    with pytest.raises(VRAMSourceError, match="program not found"):
        run_command(["frank-no-such-program-xyz"])
    with pytest.raises(VRAMSourceError, match="printed no GPU lines"):
        command_gpus(_py("pass"))
    with pytest.raises(VRAMSourceError, match=r"command .*: nvidia-smi CSV line 1"):
        command_gpus(_py("print('garbage')"))


def test_local_nvidia_smi_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert local_gpus() == (None, "nvidia-smi is not on PATH")
    assert local_compute_apps() == (None, "nvidia-smi is not on PATH")


def test_local_nvidia_smi_on_path(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!{sys.executable}\nimport sys\n"
                    "if any('compute-apps' in a for a in sys.argv):\n"
                    "    print('2411, llama-server, 22786')\n"
                    "else:\n"
                    "    print('0, NVIDIA GeForce RTX 3090, 20512, 24576')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    gpus, reason = local_gpus()
    assert reason == "" and gpus[0].used == 20512 * MiB
    apps, reason = local_compute_apps()
    assert reason == "" and apps[0].pid == 2411


# --------------------------------------------------------------------------- Prometheus

def test_dcgm_framebuffer():
    gpus = parse_dcgm(DCGM)
    assert [(g.gpu, g.uuid, g.used, g.free, g.reserved) for g in gpus] == [
        ("0", "GPU-5f1c", 22652 * MiB, 1598 * MiB, 326 * MiB),
        ("1", "GPU-77aa", 12 * MiB, 24238 * MiB, None)]
    assert gpus[0].total == 24576 * MiB and gpus[1].total == 24250 * MiB
    assert gpus[0].model_name == "NVIDIA GeForce RTX 3090" and gpus[0].hostname == "dankclaw"
    assert parse_dcgm(VLLM) == []
    # A gauge past what a float holds once in bytes is no reading (it overflowed int() before)
    huge = parse_dcgm('DCGM_FI_DEV_FB_USED{gpu="0"} 1e308\nDCGM_FI_DEV_FB_FREE{gpu="0"} 10\n')
    assert [(g.used, g.free, g.total) for g in huge] == [(None, 10 * MiB, None)]


def test_vllm_cache_config():
    cfg = parse_vllm_cache_config(VLLM)
    assert cfg["block_size"] == 16 and cfg["num_gpu_blocks"] == 43690
    assert cfg["gpu_memory_utilization"] == 0.92 and cfg["cache_dtype"] == "fp8_e4m3"
    assert cfg["kv_cache_memory_bytes"] == 12884901888
    assert cfg["num_cpu_blocks"] is None and cfg["enable_prefix_caching"] == "True"
    assert parse_vllm_cache_config(DCGM) is None


def test_fetch_metrics_over_http(tmp_path):
    (tmp_path / "metrics").write_text(DCGM)
    with RangeServer({"metrics": tmp_path / "metrics"}) as srv:
        assert parse_dcgm(fetch_metrics(srv.url("metrics")))[0].used == 22652 * MiB
        with pytest.raises(VRAMSourceError, match=r"GET .*/nope: HTTP 404"):
            fetch_metrics(srv.url("nope"))
    with pytest.raises(VRAMSourceError, match="connection refused"):
        fetch_metrics("http://127.0.0.1:9/metrics", timeout=2)


def test_fetch_metrics_reads_no_more_than_the_cap(tmp_path):
    (tmp_path / "metrics").write_text("# junk\n" * (1024 * 1024))  # 7 MiB of comments
    with RangeServer({"metrics": tmp_path / "metrics"}) as srv, \
            pytest.raises(VRAMSourceError, match="ran past 4194304 bytes"):
        fetch_metrics(srv.url("metrics"))


def test_prometheus_garbage_is_a_clean_error():
    with pytest.raises(VRAMSourceError, match="not Prometheus text"):
        parse_dcgm('DCGM_FI_DEV_FB_USED{gpu="0" 12\n')
