"""vram: the memory the model's own GGUF headers say the endpoint needs fits the GPU with the
headroom asked (offline: fleet.yaml and headers only), and the GPU memory it does use is within
tolerance of that (live: nvidia-smi, a command, or a Prometheus exporter)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_frank.claims import Claim, option, slots
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.protocols import Facts, Parts
from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Phrase, Text, fail, inconclusive, not_applicable
from pytest_frank.vram.memory import fmt_mib
from pytest_frank.vram.plan import (
    GpuReading,
    KVPool,
    Modelled,
    PlanError,
    make_plan,
    measure,
    model_memory,
    tolerance_bytes,
)
from pytest_frank.runtime.target import Target

TABLE = "context math"


@dataclass(frozen=True)
class Options(ClaimOptions):
    PATHS = ("model", "draft", "mmproj")  # GGUF files, relative to the fleet file, or URLs

    model: str | None = option(None, minLength=1, about=(
        "The served GGUF: a path (relative to fleet.yaml) or http(s) URL. Default: live: the "
        "engine's own report (llama.cpp `/props` `model_path`) when that file is readable here."))
    draft: str | None = option(None, minLength=1, about=(
        "A separate draft model GGUF (`--model-draft`): its weights and KV are counted. Default: "
        "none."))
    mmproj: str | None = option(None, minLength=1, about=(
        "The projector GGUF (`--mmproj`): its weights are counted. Default: none."))
    mtp: bool | None = option(None, about=(
        "Count the MTP draft context (`--spec-type draft-mtp`). Default: on when the file has "
        "NextN layers."))
    draft_max: int | None = option(None, minimum=0, about=(
        "`--spec-draft-n-max`: with MTP, each sequence keeps this many snapshots of its recurrent "
        "state beside its own (a hybrid's state is counted 1 + draft_max times). Default: 3."))
    ctx_size: int | None = option(None, minimum=1, about=(
        "The total `--ctx-size`. Default: live: from the slot shape (slots x context per slot)."))
    parallel: int | None = option(None, minimum=1, about=(
        "`--parallel`. Default: live: the slot count; else 1."))
    kv_unified: bool | None = option(None, about=(
        "`--kv-unified`. Default: live: true when each slot's context equals `ctx_size`; else "
        "false."))
    ubatch_size: int | None = option(None, minimum=1, about=(
        "`--ubatch-size`: a sliding-window cache holds the window plus one ubatch. Default: 512."))
    swa_full: bool | None = option(None, about=(
        "`--swa-full`: the sliding-window layers keep the whole context. Default: false."))
    cache_type_k: str | None = option(
        None, enum=["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"], about=(
        "`--cache-type-k/-v`: f32 f16 bf16 q8_0 q5_1 q5_0 q4_1 q4_0 iq4_nl. Default: f16."))
    cache_type_v: str | None = option(
        None, enum=["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"], about=(
        "`--cache-type-k/-v`: f32 f16 bf16 q8_0 q5_1 q5_0 q4_1 q4_0 iq4_nl. Default: f16."))
    gpu_mib: float | None = option(None, exclusiveMinimum=0, about=(
        "GPU memory in MiB; without it (offline, or no reading) the table is printed and the fit "
        "is inconclusive. Default: live: the source's total."))
    fixed_mib: float | None = option(None, minimum=0, about=(
        "CUDA context, compute buffers, scratch: measure it once per host. Default: 1024."))
    headroom_mib: float | None = option(None, minimum=0, about=(
        "Free memory the config must leave. Default: 0."))
    tolerance: float | None = option(None, exclusiveMinimum=0, maximum=1, about=(
        "Allowed difference, a fraction of the modelled total. Default: 0.10."))
    tolerance_mib: float | None = option(None, exclusiveMinimum=0, about=(
        "Allowed difference in MiB (replaces `tolerance`; the larger when both are set). Default: "
        "none."))
    contexts: list[int] | None = option(
        None, minItems=1, items={"type": "integer", "minimum": 1}, about=(
        "Context sizes for the context-math table. Default: ctx_size x 0.875, 0.9375, 1, 1.125, "
        "each to the nearest 256 tokens a slot."))
    source: str | None = option(None, enum=["nvidia-smi", "command", "prometheus"], about=(
        "Where the used memory is read: `nvidia-smi` (on the machine running pytest), `command`, "
        "`prometheus`. Default: `nvidia-smi`."))
    gpu: int | None = option(None, minimum=0, about=(
        "Which GPU: nvidia-smi index, or the DCGM `gpu` label. Default: the only GPU."))
    command: Any = option(None, oneOf=[
        {"type": "string", "minLength": 1},
        {"type": "array", "minItems": 1, "items": {"type": "string"}}], about=(
        "A shell line (or an argv list) whose stdout is `nvidia-smi "
        "--query-gpu=index,name,memory.used,memory.total --format=csv[,noheader][,nounits]`, e.g. "
        "over ssh. Required with `source: command`."))
    metrics_url: str | None = option(None, pattern="^https?://", about=(
        "A Prometheus text URL: dcgm-exporter (`DCGM_FI_DEV_FB_USED`/`_FREE`) and/or vLLM's "
        "`/metrics` (`vllm:cache_config_info`). Required with `source: prometheus`."))
    host: str | None = option(None, minLength=1, about=(
        "The machine whose GPU serves the endpoint, for the `nvidia-smi` rule above (a URL that "
        "names a proxy or load balancer rather than the GPU host). Default: the URL's host."))

    def as_dict(self) -> dict[str, Any]:
        """The keys fleet.yaml set, as the memory model (pytest_frank.vram.plan) reads them."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """A reading source's own key is required with it: `command` with `source: command`,
        `metrics_url` with `source: prometheus`."""
        needs = {"command": "command", "prometheus": "metrics_url"}
        return {**super().schema(), "allOf": [
            {"if": {"type": "object", "required": ["source"],
                    "properties": {"source": {"const": source}}},
             "then": {"required": [key]}} for source, key in needs.items()]}


CLAIM = Claim("vram", "GPU memory used matches the model's own header", Options, order=170,
              tests=("test_vram_fits", "test_vram"))


if TYPE_CHECKING:  # the config gate reads these options too: the type checker keeps them in step
    from pytest_frank.serve import gate

    _GATE: type[gate.VramWants] = Options


# --------------------------------------------------------------------------- what should be used

@dataclass(kw_only=True)
class Fit(Observation):
    modelled: Modelled | None = None
    gpu_unread: str = ""  # why no GPU size was read, where none was
    gpu_absent: bool = False  # served on this machine, which has no GPU to read: not applicable


def _model(target: Target, *, strict: bool, gpu_total: int | None = None) -> Fit:
    """Model the endpoint's memory from expect.vram and, live, the slot shape and the model path
    the engine reports. Too little to model is inconclusive (a failure when strict)."""
    settings = {**_launched(target), **Options.on(target.endpoint).as_dict()}
    shape, why = None, ""
    if not target.offline and not (settings.get("model") and settings.get("ctx_size")):
        found = target.need(slots.shape)
        shape = found if not isinstance(found, Unseen) and found.seen else None
    model = settings.get("model")
    if not model:
        model, why = _served_model(target, shape)
    try:
        plan = make_plan(settings, model, gpu_total,
                         count=shape.count if shape else None,
                         ctx_per_slot=shape.ctx_per_slot if shape else None)
    except PlanError as exc:
        if strict:
            return Fit(failure=f"{exc}{why}",
                       fix="set it in expect.vram (model: the served GGUF's path or URL)")
        later = "; the live test_vram reads what the engine reports" if target.offline else ""
        return Fit(inconclusive=f"{exc}{why}{later}")
    from pytest_frank.gguf.reader import GGUFError

    try:
        return Fit(modelled=model_memory(plan, timeout=target.timeout))
    except GGUFError as exc:
        return Fit(failure=f"the GGUF header of {getattr(exc, 'frank_source', plan.model)} cannot "
                           f"be read: {exc}",
                   fix="point expect.vram at the complete file (a partial download or another "
                       "format reads like this)")
    except ValueError as exc:
        return Fit(failure=f"the memory model refuses this config: {exc}")


def _launched(target: Target) -> dict[str, Any]:
    """What a `launch:` block says of the model and its context (expect.vram wins)."""
    spec = target.endpoint.launch
    if not spec:
        return {}
    from pytest_frank.local.launch import DEFAULT_CTX_SIZE, LaunchError, resolve_model

    try:
        model = str(resolve_model(spec["model"]))
    except LaunchError:
        model = None  # the plan then says no model is named
    # A launched server loads the file's MTP head only under spec_type draft-mtp, and then
    # keeps draft_max snapshots of a hybrid's recurrent state per sequence.
    settings = {"model": model, "ctx_size": spec.get("ctx_size", DEFAULT_CTX_SIZE),
                "parallel": spec.get("parallel", 1), "kv_unified": spec.get("kv_unified", False),
                "mtp": spec.get("spec_type") == "draft-mtp", "draft_max": spec.get("draft_max")}
    return {k: v for k, v in settings.items() if v is not None}


def _served_model(target: Target, shape: slots.SlotShape | None) -> tuple[str | None, str]:
    """(the model file the engine reports loading when this machine can read it, why not)."""
    path = target.driver.served_model_path(shape.payloads) if shape else None
    if path and Path(path).is_file():
        return path, ""
    return None, f"; the engine reports model_path {path}, not readable here" if path else ""


def fit(target: Target) -> Fit:
    total, why, absent = _gpu_total(target)
    obs = _model(target, strict=False, gpu_total=total)
    obs.gpu_unread, obs.gpu_absent = why, absent
    return obs


def _gpu_total(target: Target) -> tuple[int | None, str, bool]:
    """Without gpu_mib, in a live run: the GPU's size as the memory source reads it; else
    None, why none was read, and whether that is because this machine, which serves the
    endpoint, has no GPU at all."""
    opts = Options.on(target.endpoint)
    if opts.gpu_mib:
        return None, "", False
    if target.offline:
        return None, "an offline run reads no GPU", False
    elsewhere = _gpu_elsewhere(target.endpoint, opts)
    if elsewhere:
        return None, elsewhere, False
    reading = measure(opts.as_dict(), timeout=target.timeout)
    if reading.total is None:
        return (None, f"the GPU memory source gave no size: {reading.problem or reading.where}",
                reading.state == "unavailable")
    return reading.total, "", False


def judge_fit(obs: Fit, ctx: Context[Options]) -> None:
    """The modelled memory fits the GPU with the headroom asked."""
    if obs.modelled is None:  # the probe said why, as a failure or inconclusive
        fail("the model's memory could not be modelled")
    result = _show_model(obs.modelled, ctx)
    from pytest_frank.vram.memory import trained_context_warning

    overflow = trained_context_warning(result.plan.settings, result.trained_ctx)
    if overflow:  # the same warning as frank preflight's: it fits, but past what was trained
        ctx.note(f"warning: {overflow}")  # a note, not warnings.warn: -W error must not crash
    v = result.verdict
    if v is None and obs.gpu_absent:  # a CPU server: there is no GPU for the model to fit
        not_applicable(f"not applicable: modelled {fmt_mib(result.estimate.total)} MiB "
                       f"({result.estimate.breakdown()}), but the endpoint is served on this "
                       f"machine, which has no GPU ({obs.gpu_unread}): there is none for it to "
                       "fit; expect.vram.gpu_mib judges it against a GPU of that size")
    if v is None:  # nothing to judge the model against: not a pass
        inconclusive(f"modelled {fmt_mib(result.estimate.total)} MiB "
                     f"({result.estimate.breakdown()}), but no GPU size to judge it against "
                     f"(no gpu_mib; {obs.gpu_unread}): set expect.vram.gpu_mib to the GPU's "
                     "memory in MiB (nvidia-smi --query-gpu=memory.total --format=csv)")
    if v.ok:
        return
    s = result.plan.settings
    fix = (f"lower ctx_size to {result.max_context} or less (the largest that keeps "
           f"{fmt_mib(s.headroom)} MiB free), use a smaller K/V cache type, or a smaller quant"
           if result.max_context else
           "the weights alone leave no room: use a smaller quant or a larger GPU")
    fail(f"{v.message}\n{result.table}", fix)


def _show_model(result: Modelled, ctx: Context[Options]) -> Modelled:
    ctx.attach(TABLE, "text/markdown", result.table)
    ctx.figure("vram_modelled_mib", result.estimate.total / 2**20, "MiB")
    ctx.note(f"modelled: {fmt_mib(result.estimate.total)} MiB = {result.estimate.breakdown()} "
             f"(ctx_size, parallel from {result.plan.settings_from})")
    for note in result.estimate.notes:
        ctx.note(f"note: {note}")
    return result


# --------------------------------------------------------------------------- what is used

@dataclass(kw_only=True)
class Live(Observation):
    measured: GpuReading
    pool: KVPool | None = None
    shape: slots.SlotShape | None = None
    expected: Fit | None = None  # the model, when the pool alone does not say what is expected


def live(target: Target) -> Live:
    """The GPU memory source, the KV pool the engine describes (vLLM /metrics), the slot shape,
    and what the model says should be used."""
    opts = Options.on(target.endpoint)
    elsewhere = _gpu_elsewhere(target.endpoint, opts)
    if elsewhere:
        return Live(measured=GpuReading(where="nvidia-smi"), inconclusive=elsewhere)
    measured = measure(opts.as_dict(), timeout=target.timeout)
    if measured.state == "unavailable":  # the server is on this machine, which has no GPU
        return Live(measured=measured, not_applicable=(
            f"{measured.problem}, and the endpoint is served on this machine: it runs without a "
            "GPU, so it uses no GPU memory to measure"))
    if measured.problem:
        return Live(measured=measured, failure=f"GPU memory could not be read: {measured.problem}")
    pool = _pool(target.driver, measured.metrics_text)
    route = target.driver.metrics.kv_pool_route
    if pool is None and route:
        ex = target.get(route)
        pool = _pool(target.driver, ex.body) if ex.ok else None
    shape = target.need(slots.shape)
    obs = Live(measured=measured, pool=pool,
               shape=shape if not isinstance(shape, Unseen) and shape.seen else None)
    if not (pool and pool.fraction and measured.total and not opts.model):
        obs.expected = _model(target, strict=True, gpu_total=measured.total)
    return obs


def _gpu_elsewhere(endpoint: Endpoint, opts: Options) -> str | None:
    """Why nvidia-smi here cannot read the endpoint's GPU: it runs on another machine. Decided
    from names and addresses alone; the endpoint is never contacted for it."""
    if (opts.source or "nvidia-smi") != "nvidia-smi":
        return None
    from pytest_frank.base.hosts import is_local

    host = opts.host or endpoint.host or ""  # serve.host, else the URL's: where it is served
    if is_local(host):
        return None
    said = "expect.vram.host is" if opts.host else "the endpoint runs on"
    return (f"{said} {host}, not this machine, and the nvidia-smi source reads this machine's "
            f"GPU; read that host's instead: source: command with command: ssh {host} "
            f"nvidia-smi --query-gpu=index,name,memory.used,memory.total "
            f"--format=csv,noheader,nounits, or source: prometheus with metrics_url: the "
            f"host's dcgm-exporter (http://{_url_host(host)}:9400/metrics)")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _pool(driver: Parts, text: str) -> KVPool | None:
    from pytest_frank.vram.sources import VRAMSourceError

    try:
        return driver.metrics.kv_pool(text) if text else None
    except VRAMSourceError:
        return None


def judge_live(obs: Live, ctx: Context[Options]) -> None:
    """The GPU memory the endpoint uses is within tolerance of what its model needs."""
    m, driver = obs.measured, ctx.driver
    if obs.pool:
        ctx.note(f"KV pool: {obs.pool.detail}")
        _judge_pool(obs.pool, obs.shape, driver)
    if obs.expected is not None and obs.expected.failure:
        fail(obs.expected.failure, obs.expected.fix)
    expected, what, weights = _expected(obs, ctx)
    if m.used is None:
        if obs.pool:
            return      # the pool was the only reading, and it holds the context
        fail(f"{m.where} gives no memory-used reading (no DCGM_FI_DEV_FB_USED)")
    allowed = tolerance_bytes(ctx.options.as_dict(), expected)
    diff = m.used - expected
    said = (f"{m.where} uses {fmt_mib(m.used)} MiB, {fmt_mib(abs(diff))} MiB "
            f"{'more' if diff > 0 else 'less'} than the {fmt_mib(expected)} MiB modelled ({what}; "
            f"tolerance {fmt_mib(allowed)} MiB)")
    ctx.note(said)
    ctx.figure("vram_used_mib", m.used / 2**20, "MiB", high=(expected + allowed) / 2**20)
    if diff > allowed:
        twice = ""
        if weights and abs(diff - weights) <= allowed:
            twice = (f"\nthe excess is about the model's weights again ({fmt_mib(weights)} MiB): "
                     "the model is loaded twice")
        fail(said + twice + _apps(m), vram_high_fix(driver))
    if -diff > allowed:
        fail(said, vram_low_fix(driver))


def _expected(obs: Live, ctx: Context[Options]) -> tuple[int, str, int]:
    """(bytes the endpoint should use, how that was reached, the model's weights if known)."""
    pool, total = obs.pool, obs.measured.total
    if obs.expected is None and pool and pool.fraction and total:
        # an engine that preallocates takes its fraction of the GPU
        return int(pool.fraction * total), f"{pool.fraction:g} of the {fmt_mib(total)} MiB GPU", 0
    if obs.expected is None or obs.expected.modelled is None:
        fail("neither the model's memory nor the engine's KV pool says what should be used")
    result = _show_model(obs.expected.modelled, ctx)
    return result.estimate.total, result.estimate.breakdown(), result.estimate.weights


def _apps(m: GpuReading) -> str:
    if not m.apps:
        return ""
    listed = "; ".join(f"pid {a.pid} {a.process_name} "
                       f"{'?' if a.used is None else fmt_mib(a.used)} MiB" for a in m.apps)
    return f"\nprocesses on the GPU: {listed}"


def _judge_pool(pool: KVPool, shape: slots.SlotShape | None, driver: Facts) -> None:
    need = shape.ctx_per_slot if shape else None
    if pool.tokens is None or need is None or pool.tokens >= need:
        return
    fail(f"the KV pool holds {pool.tokens} tokens, less than one {need}-token sequence "
         f"({pool.detail}): the pool was clamped", vram_low_fix(driver))


FITS = Check("test_vram_fits", "vram", fit, judge_fit, offline=True)
VRAM = Check("test_vram", "vram", live, judge_live)


# -- advice: unexpected memory by engine, named by the driver's flags ---------------------------
def vram_high_fix(driver: Facts) -> Text:
    return advise(
        driver, "the usual causes: a draft that loads the whole model a second time (a draft "
                "model pointed at a file that already carries an MTP head), mmap off (weights "
                "copied into anonymous memory), or another process on the GPU",
        {LlamaCppDriver: lambda d: Phrase("the usual causes: --model-draft/-md pointed at the -mtp GGUF "
                                          "(the whole model loads twice; use ",
                                          d.flags["spec_type"]("draft-mtp"), " alone), mmap off "
                                          "(--no-mmap, or an -ot/-ncmoe override that silently disables "
                                          "it), or another process on the GPU"),
         VllmDriver: "another process on the GPU, or --gpu-memory-utilization higher than intended "
                     "(vLLM takes that fraction of the whole GPU at start)"})


def vram_low_fix(driver: Facts) -> Text:
    return advise(
        driver, "the KV pool is smaller than configured (the server clamped the context or "
                "cache to fit), layers run on the CPU, or the cache types are smaller than "
                "expect.vram says; read the server's load log for the context it allocated",
        {LlamaCppDriver: lambda d: Phrase("the KV pool is smaller than configured: check the load log's "
                                          "n_ctx and n_ctx_slot (a --fit or a lower ", d.flags["ctx"],
                                          " clamps it), -ngl below all layers (part of the model on the "
                                          "CPU), or --cache-type-k/-v smaller than expect.vram"),
         VllmDriver: "vLLM took less than gpu_memory_utilization of the GPU: the KV pool was clamped (a "
                     "co-tenant held memory at start); free the GPU or lower --max-model-len / "
                     "--max-num-seqs, then restart"})
