"""The `vram` claim's two halves: what fleet.yaml's `expect.vram` says the endpoint should use
(the model's GGUF headers through pytest_frank.vram.memory), and what a GPU memory source says it
does use (pytest_frank.vram.sources). No pytest here; claims/vram/ judges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, overload

MiB = 1 << 20
DEFAULT_TOLERANCE = 0.10
TABLE_STEPS = (0.875, 0.9375, 1.0, 1.125)   # around the configured context, as the seeds did


class PlanError(Exception):
    """expect.vram does not say enough to model the endpoint (a config gap, not a failure)."""


@dataclass
class Plan:
    model: str
    draft: str | None
    mmproj: str | None
    settings: Any                       # memory.Settings
    contexts: list[int]
    settings_from: str                  # where ctx_size/parallel came from, for messages


@dataclass
class Modelled:
    plan: Plan
    estimate: Any                       # memory.MemoryEstimate
    table: str
    verdict: Any = None                 # memory.Verdict; None without a GPU size
    max_context: int | None = None      # the largest ctx_size keeping the headroom, when short
    trained_ctx: int | None = None      # the model's context_length


@overload
def _option_bytes(opts: dict, key: str) -> int | None: ...
@overload
def _option_bytes(opts: dict, key: str, default: float) -> int: ...
def _option_bytes(opts: dict, key: str, default: float | None = None) -> int | None:
    """An option fleet.yaml gives in MiB (`gpu_mib`), in bytes."""
    value = opts.get(key, default)
    return None if value is None else int(value * MiB)


def slot_settings(opts: dict, count: int | None = None, ctx_per_slot: int | None = None
                  ) -> tuple[int | None, int, bool, str]:
    """(ctx_size, parallel, kv_unified, where from): fleet.yaml wins, then the live slot shape.

    A live shape of N slots x n_ctx is a total of N x n_ctx (llama.cpp's default split) unless
    kv_unified is set or the configured ctx_size equals n_ctx (then every slot sees all of it)."""
    parallel = opts.get("parallel") or count or 1
    ctx, unified = opts.get("ctx_size"), opts.get("kv_unified")
    if ctx is not None:
        if unified is None:
            unified = bool(parallel > 1 and ctx_per_slot == ctx)
        return ctx, parallel, unified, "fleet.yaml"
    if ctx_per_slot is None:
        return None, parallel, bool(unified), "nowhere"
    total = ctx_per_slot if unified else ctx_per_slot * parallel
    return total, parallel, bool(unified), f"the live slot shape ({parallel} x {ctx_per_slot})"


def make_plan(opts: dict, model: str | None, gpu_total: int | None = None, *,
              count: int | None = None, ctx_per_slot: int | None = None) -> Plan:
    from pytest_frank.vram.memory import DRAFT_MAX, N_UBATCH, Settings

    if not model:
        raise PlanError("expect.vram names no `model` (a GGUF path or URL) to read")
    ctx, parallel, unified, where = slot_settings(opts, count, ctx_per_slot)
    if ctx is None:
        raise PlanError("expect.vram has no `ctx_size` and no live slot shape says it")
    gpu = _option_bytes(opts, "gpu_mib") or gpu_total
    try:
        settings = Settings(
            ctx_size=ctx, n_parallel=parallel, kv_unified=unified,
            cache_type_k=opts.get("cache_type_k", "f16"),
            cache_type_v=opts.get("cache_type_v", "f16"), mtp=opts.get("mtp"),
            draft_max=opts.get("draft_max", DRAFT_MAX),
            n_ubatch=opts.get("ubatch_size", N_UBATCH), swa_full=bool(opts.get("swa_full")),
            gpu_total=gpu, fixed_overhead=_option_bytes(opts, "fixed_mib", 1024),
            headroom=_option_bytes(opts, "headroom_mib", 0))
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    contexts = opts.get("contexts") or table_contexts(ctx, 1 if unified else parallel)
    return Plan(model, opts.get("draft"), opts.get("mmproj"), settings, list(contexts), where)


def table_contexts(ctx: int, streams: int) -> list[int]:
    """The context table's rows: the configured context and its TABLE_STEPS fractions, each to
    the nearest context llama.cpp allocates differently (256 cells per stream), none twice."""
    from pytest_frank.vram.memory import CELL_PAD

    step = CELL_PAD * streams
    return sorted({ctx, *(max(step, round(ctx * f / step) * step) for f in TABLE_STEPS)})


def model_memory(plan: Plan, timeout: float = 30) -> Modelled:
    """Read the headers and model memory. A GGUFError names the offset; `frank_source` on it
    says which of the configured files it was."""
    from pytest_frank.gguf.reader import GGUFError
    from pytest_frank.vram.memory import ModelShape, context_table, estimate, fits, max_context

    def shape(src: str | None):
        try:
            return None if not src else ModelShape.from_gguf(src, timeout=timeout)
        except GGUFError as exc:
            exc.frank_source = src
            raise

    model, draft, mmproj = shape(plan.model), shape(plan.draft), shape(plan.mmproj)
    parts = {"draft": draft, "mmproj": mmproj}
    est = estimate(model, plan.settings, **parts)
    table = context_table(model, plan.settings, plan.contexts, **parts)
    if plan.settings.gpu_total is None:
        return Modelled(plan, est, table.text, trained_ctx=model.trained_ctx)
    verdict = fits(est)
    best = None if verdict.ok else max_context(model, plan.settings, **parts)
    return Modelled(plan, est, table.text, verdict, best, model.trained_ctx)


def tolerance_bytes(opts: dict, modelled: int) -> int:
    """`tolerance` (a fraction of the model) and `tolerance_mib`: the larger when both are set."""
    frac = opts.get("tolerance")
    absolute = _option_bytes(opts, "tolerance_mib")
    if frac is None and absolute is None:
        frac = DEFAULT_TOLERANCE
    return max(int((frac or 0) * modelled), absolute or 0)


# --------------------------------------------------------------------------- measured

@dataclass
class GpuReading:
    """The GPU memory in use, as one source (nvidia-smi, a command, a DCGM exporter) read it."""

    used: int | None = None             # bytes on the chosen GPU
    total: int | None = None
    where: str = ""                     # "nvidia-smi GPU 0 (NVIDIA RTX 3090)"
    apps: list = field(default_factory=list)    # sources.ComputeApp, where listed
    metrics_text: str = ""              # a Prometheus source's text (may carry a KV pool too)
    state: str = "read"                 # read | unavailable (nothing to measure here) | failed
    problem: str | None = None          # why there is no reading


def measure(opts: dict, timeout: float = 20) -> GpuReading:
    source = opts.get("source", "nvidia-smi")
    from pytest_frank.vram import sources as vs

    try:
        if source == "prometheus":
            text = vs.fetch_metrics(opts["metrics_url"], timeout=timeout)
            return _pick_dcgm(vs.parse_dcgm(text), opts.get("gpu"), opts["metrics_url"], text)
        if source == "command":
            cmd = opts["command"]
            gpus = vs.command_gpus(cmd, shell=isinstance(cmd, str), timeout=timeout)
            return _pick(gpus, opts.get("gpu"), "command")
        local, why = vs.local_gpus(timeout)
        if local is None:
            return GpuReading(state="unavailable", problem=f"no nvidia-smi on this machine ({why})")
        found = _pick(local, opts.get("gpu"), "nvidia-smi")
        found.apps = vs.local_compute_apps(timeout)[0] or []
        return found
    except vs.VRAMSourceError as exc:
        return GpuReading(state="failed", problem=str(exc))


def _pick(gpus: list, index: int | None, label: str) -> GpuReading:
    gpu = _choose(gpus, index, lambda g: g.index, label)
    if isinstance(gpu, GpuReading):
        return gpu
    name = f" ({gpu.name})" if gpu.name else ""
    return GpuReading(gpu.used, gpu.total, f"{label} GPU {gpu.index}{name}")


def _pick_dcgm(gpus: list, index: int | None, url: str, text: str) -> GpuReading:
    if not gpus:        # vLLM's own /metrics: no framebuffer gauge, maybe a KV pool
        return GpuReading(where=url, metrics_text=text)
    from pytest_frank.vram.sources import gpu_index

    gpu = _choose(gpus, index, lambda g: gpu_index(g.gpu), url)
    if isinstance(gpu, GpuReading):
        return gpu
    name = f" ({gpu.model_name})" if gpu.model_name else ""
    return GpuReading(gpu.used, gpu.total, f"DCGM_FI_DEV_FB_USED gpu {gpu.gpu}{name} at {url}",
                    metrics_text=text)


def _choose(gpus: list, index: int | None, index_of, label: str):
    if index is None:
        if len(gpus) == 1:
            return gpus[0]
        listed = ", ".join(str(index_of(g)) for g in gpus)
        return GpuReading(state="failed", problem=f"{label} reports {len(gpus)} GPUs ({listed}): "
                        "set expect.vram.gpu to the one serving this endpoint")
    for g in gpus:
        if index_of(g) == index:
            return g
    listed = ", ".join(str(index_of(g)) for g in gpus)
    return GpuReading(state="failed", problem=f"{label} reports no GPU {index} (it has {listed})")


@dataclass(frozen=True)
class KVPool:
    """What an engine that preallocates its KV pool says about it (vLLM cache_config_info)."""
    tokens: int | None                  # num_gpu_blocks x block_size
    fraction: float | None              # of the GPU the engine takes (gpu_memory_utilization)
    detail: str                         # the labels it was read from, for messages
