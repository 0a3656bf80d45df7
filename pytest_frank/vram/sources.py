"""Measured GPU memory: nvidia-smi CSV (local, or from any command such as ssh), DCGM exporter
and vLLM Prometheus metrics. Everything comes back in bytes."""

from __future__ import annotations

import csv
import io
import math
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pytest_frank.base import redact

MiB = 1 << 20
GPU_QUERY = "index,name,memory.used,memory.total"
NVIDIA_SMI_GPUS = ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"]
NVIDIA_SMI_APPS = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                   "--format=csv,noheader,nounits"]
_UNITS = {"B": 1, "KIB": 1 << 10, "MIB": MiB, "GIB": 1 << 30}
_MISSING = {"", "[N/A]", "N/A", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]"}


class VRAMSourceError(Exception):
    """A memory source could not be read or did not say what we need."""


@dataclass(frozen=True)
class GPUMemory:
    index: int | None
    name: str
    used: int | None            # bytes; None when the driver reports [N/A]
    total: int | None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def free(self) -> int | None:
        return None if self.used is None or self.total is None else self.total - self.used


@dataclass(frozen=True)
class ComputeApp:
    pid: int | None  # None where nvidia-smi says [N/A]
    process_name: str
    used: int | None            # bytes
    extra: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- nvidia-smi CSV

def _parse_bytes(value: str, unit: str = "MIB") -> int | None:
    """'20512', '20512 MiB' -> bytes; [N/A] and friends -> None."""
    value = value.strip()
    if value in _MISSING:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMG]?i?B)?", value, re.IGNORECASE)
    if not m:
        raise VRAMSourceError(f"nvidia-smi memory value {value!r} is not a number of MiB")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or unit).upper()])


def _column(name: str) -> tuple[str, str]:
    """'memory.used [MiB]' -> ('memory.used', 'MIB')."""
    m = re.fullmatch(r"\s*([\w.]+)\s*(?:\[(\w+)\])?\s*", name)
    if not m:
        return name.strip(), "MIB"
    return m.group(1), (m.group(2) or "MiB").upper()


def _is_header(row: list[str]) -> bool:
    # field names are lower-case dotted words; GPU names, numbers and N/A never look like that
    names = [_column(c)[0] for c in row]
    return (all(re.fullmatch(r"[a-z_.]+(\s*\[\w+\])?", c.strip()) for c in row)
            and any("." in n or "_" in n or n in ("index", "name", "pid", "uuid") for n in names))


def _rows(text: str, default_fields: Sequence[str]) -> list[dict]:
    """CSV rows as {field: (value, unit)}; a header line (if any) names the columns."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    if _is_header(rows[0]):
        cols = [_column(c) for c in rows[0]]
        rows = rows[1:]
    else:
        cols = [(f, "MIB") for f in default_fields]
    out = []
    for n, row in enumerate(rows, 1):
        if len(row) != len(cols):
            raise VRAMSourceError(f"nvidia-smi CSV line {n}: {len(row)} columns, expected "
                                  f"{len(cols)} ({', '.join(c for c, _ in cols)}): {row!r}")
        out.append({c: (v.strip(), unit) for (c, unit), v in zip(cols, row)})
    return out


def _int(value: str, what: str) -> int | None:
    if value in _MISSING:
        return None
    try:
        return int(value)
    except ValueError:
        raise VRAMSourceError(f"nvidia-smi {what} {value!r} is not an integer") from None


def parse_gpus(text: str, fields: Sequence[str] = GPU_QUERY.split(",")) -> list[GPUMemory]:
    """nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]. Without a header the
    columns are `fields` (default index,name,memory.used,memory.total)."""
    gpus = []
    for row in _rows(text, fields):
        for need in ("memory.used", "memory.total"):
            if need not in row:
                raise VRAMSourceError(f"nvidia-smi CSV has no {need} column: {sorted(row)}")
        gpus.append(GPUMemory(
            index=_int(row["index"][0], "index") if "index" in row else None,
            name=row.get("name", ("", ""))[0],
            used=_parse_bytes(*row["memory.used"]), total=_parse_bytes(*row["memory.total"]),
            extra={k: v for k, (v, _) in row.items()
                   if k not in ("index", "name", "memory.used", "memory.total")}))
    return gpus


def parse_compute_apps(text: str,
                       fields: Sequence[str] = ("pid", "process_name", "used_memory")
                       ) -> list[ComputeApp]:
    """nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv[...]. The
    header calls the memory column used_gpu_memory; both names are accepted."""
    apps = []
    for row in _rows(text, fields):
        mem = row.get("used_gpu_memory") or row.get("used_memory")
        if mem is None or "pid" not in row:
            raise VRAMSourceError(f"nvidia-smi apps CSV needs pid and used memory: {sorted(row)}")
        apps.append(ComputeApp(
            pid=_int(row["pid"][0], "pid"), process_name=row.get("process_name", ("", ""))[0],
            used=_parse_bytes(*mem),
            extra={k: v for k, (v, _) in row.items()
                   if k not in ("pid", "process_name", "used_gpu_memory", "used_memory")}))
    return apps


# --------------------------------------------------------------------------- commands

def _shown(command: str | Sequence[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def run_command(command: str | Sequence[str], *, shell: bool = False, timeout: float = 20) -> str:
    """stdout of a command (a list, a string to shlex-split, or with shell=True a shell line).

    Errors name the command and its exit status -- never the environment."""
    shown = _shown(command)
    argv = command if shell or not isinstance(command, str) else shlex.split(command)
    try:
        done = subprocess.run(argv, shell=shell, capture_output=True, text=True, check=False,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise VRAMSourceError(f"command `{shown}`: program not found") from None
    except subprocess.TimeoutExpired:
        raise VRAMSourceError(f"command `{shown}` did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        last = redact.cut((done.stderr.strip().splitlines() or [""])[-1], 200, "")
        why = f": {last}" if last else ""
        raise VRAMSourceError(f"command `{shown}` exited with status {done.returncode}{why}")
    return done.stdout


def command_gpus(command: str | Sequence[str], *, shell: bool = False,
                 timeout: float = 20) -> list[GPUMemory]:
    """Run a command whose stdout is nvidia-smi --query-gpu CSV (e.g. over ssh) and parse it."""
    out = run_command(command, shell=shell, timeout=timeout)
    try:
        gpus = parse_gpus(out)
    except VRAMSourceError as exc:
        raise VRAMSourceError(f"command `{_shown(command)}`: {exc}") from None
    if not gpus:
        raise VRAMSourceError(f"command `{_shown(command)}` printed no GPU lines")
    return gpus


def local_gpus(timeout: float = 20) -> tuple[list[GPUMemory] | None, str]:
    """(GPUs, "") from nvidia-smi on PATH, or (None, reason) when there is none to ask."""
    if shutil.which("nvidia-smi") is None:
        return None, "nvidia-smi is not on PATH"
    try:
        return command_gpus(NVIDIA_SMI_GPUS, timeout=timeout), ""
    except VRAMSourceError as exc:
        return None, str(exc)


def local_compute_apps(timeout: float = 20) -> tuple[list[ComputeApp] | None, str]:
    if shutil.which("nvidia-smi") is None:
        return None, "nvidia-smi is not on PATH"
    try:
        return parse_compute_apps(run_command(NVIDIA_SMI_APPS, timeout=timeout)), ""
    except VRAMSourceError as exc:
        return None, str(exc)


# --------------------------------------------------------------------------- Prometheus

def fetch_metrics(url: str, *, timeout: float = 10) -> str:
    """GET a Prometheus text endpoint (dcgm-exporter :9400/metrics, vLLM /metrics) through the
    one capped, deadline-bound reader every endpoint answer goes through."""
    from pytest_frank.transport import http

    with http.client(timeout) as client:
        ex = http.send(client, "GET", url)
    if ex.error:
        raise VRAMSourceError(f"GET {url}: {ex.error}")
    if ex.status != 200:
        raise VRAMSourceError(f"GET {url}: HTTP {ex.status}")
    return ex.body


def _samples(text: str):
    try:
        for family in text_string_to_metric_families(text):
            yield from family.samples
    except ValueError as exc:
        raise VRAMSourceError(f"not Prometheus text exposition: {exc}") from None


@dataclass(frozen=True)
class DcgmGPU:
    gpu: str
    uuid: str
    model_name: str
    hostname: str
    used: int | None            # bytes
    free: int | None
    reserved: int | None = None

    @property
    def total(self) -> int | None:
        if self.used is None or self.free is None:
            return None
        return self.used + self.free + (self.reserved or 0)


_DCGM = {"DCGM_FI_DEV_FB_USED": "used", "DCGM_FI_DEV_FB_FREE": "free",
         "DCGM_FI_DEV_FB_RESERVED": "reserved"}


def parse_dcgm(text: str) -> list[DcgmGPU]:
    """dcgm-exporter's framebuffer gauges (MiB) per GPU, in bytes."""
    by_gpu: dict[tuple, dict[str, Any]] = {}
    for s in _samples(text):
        part = _DCGM.get(s.name)
        # NaN or Inf MiB, or more MiB than a float holds in bytes (1e308): no reading at all
        if part is None or not math.isfinite(s.value * MiB):
            continue
        key = (s.labels.get("Hostname", ""), s.labels.get("gpu", ""), s.labels.get("UUID", ""))
        entry = by_gpu.setdefault(key, {"model_name": s.labels.get("modelName", "")})
        entry[part] = int(s.value * MiB)
    return [DcgmGPU(gpu=g, uuid=u, hostname=h, model_name=e["model_name"], used=e.get("used"),
                    free=e.get("free"), reserved=e.get("reserved"))
            for (h, g, u), e in sorted(by_gpu.items(), key=_gpu_order)]


def gpu_index(label: str) -> int | None:
    """A `gpu` label as an index; isdigit() would also take "²", which int() refuses."""
    return int(label) if label.isdecimal() and len(label) < 10 else None


def _gpu_order(item) -> tuple:
    (host, gpu, uuid), _ = item
    index = gpu_index(gpu)
    return (host, 1 << 30 if index is None else index, gpu, uuid)


_VLLM_NUMBERS = {"block_size": int, "num_gpu_blocks": int, "num_cpu_blocks": int,
                 "gpu_memory_utilization": float, "kv_cache_memory_bytes": int,
                 "swap_space": float, "swap_space_bytes": int, "num_gpu_blocks_override": int}


def parse_vllm_cache_config(text: str) -> dict[str, Any] | None:
    """The labels of vllm:cache_config_info, numbers as numbers; None when absent."""
    for s in _samples(text):
        if s.name in ("vllm:cache_config_info", "vllm_cache_config_info"):
            return {k: _number(v, _VLLM_NUMBERS.get(k)) for k, v in s.labels.items()}
    return None


def _number(value: str, kind) -> Any:
    if kind is None or value in ("", "None"):
        return None if value == "None" else value
    try:
        return kind(float(value)) if kind is int else kind(value)
    except (ValueError, OverflowError):  # int(float("inf")) overflows
        return value
