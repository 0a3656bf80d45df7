"""vram: the memory the model's own GGUF headers say the endpoint needs fits the GPU with the
headroom asked (offline: fleet.yaml and headers only), and the GPU memory it does use is within
tolerance of that (live: nvidia-smi, a command, or a Prometheus exporter)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_frank.claims import slots
from pytest_frank.http import Exchange
from pytest_frank.verdict import fail, skip
from pytest_frank.vram import (
    KVPool,
    Measured,
    Modelled,
    PlanError,
    make_plan,
    measure,
    model_memory,
    tolerance_bytes,
)

TABLE = "context math"


def _mib(n: float) -> str:
    from pytest_frank.memory import fmt_mib
    return fmt_mib(n)


# --------------------------------------------------------------------------- what should be used

def served_model(endpoint, shape) -> tuple[str | None, str]:
    """(the model file the engine reports loading when this machine can read it, why not)."""
    path = endpoint.driver.served_model_path(shape.payloads) if shape else None
    if path and Path(path).is_file():
        return path, ""
    return None, f"; the engine reports model_path {path}, not readable here" if path else ""


def modelled(endpoint, *, live: bool, strict: bool = False,
             gpu_total: int | None = None) -> Modelled:
    """Model the endpoint's memory from expect.vram (and, live, the slot shape and the model
    path the engine reports). Skips (fails when strict) when there is too little to model;
    fails on a bad header."""
    opts = endpoint.config.options("vram")
    shape, why = None, ""
    if live and not (opts.get("model") and opts.get("ctx_size")):
        shape = endpoint.probe(slots.probe)
        shape = None if shape.problem else shape
    model = opts.get("model")
    if not model:
        model, why = served_model(endpoint, shape)
    try:
        plan = make_plan(opts, model, gpu_total, count=shape.count if shape else None,
                         ctx_per_slot=shape.ctx_per_slot if shape else None)
    except PlanError as exc:
        if strict:
            fail(f"{exc}{why}", "set it in expect.vram (model: the served GGUF's path or URL)")
        skip(f"{exc}{why}" + ("" if live else "; the live test_vram reads what the engine reports"))
    from pytest_frank.gguf_header import GGUFError

    try:
        result, problem = model_memory(plan, timeout=endpoint.target.timeout), None
    except GGUFError as exc:
        problem = (f"the GGUF header of {getattr(exc, 'frank_source', plan.model)} cannot be "
                   f"read: {exc}", "point expect.vram at the complete file (a partial download "
                   "or another format reads like this)")
    except ValueError as exc:
        problem = (f"the memory model refuses this config: {exc}", None)
    if problem:     # failing outside the except block keeps the chained traceback out
        fail(*problem)
    endpoint.attach(TABLE, "text/markdown", result.table)
    endpoint.note(f"modelled: {_mib(result.estimate.total)} MiB = {result.estimate.breakdown()} "
                  f"(ctx_size, parallel from {plan.settings_from})")
    for note in result.estimate.notes:
        endpoint.note(f"note: {note}")
    return result


def judge_fit(result: Modelled) -> None:
    v = result.verdict
    if v is None or v.ok:
        return
    s = result.plan.settings
    fix = (f"lower ctx_size to {result.max_context} or less (the largest that keeps "
           f"{_mib(s.headroom)} MiB free), use a smaller K/V cache type, or a smaller quant"
           if result.max_context else
           "the weights alone leave no room: use a smaller quant or a larger GPU")
    fail(f"{v.message}\n{result.table}", fix)


# --------------------------------------------------------------------------- what is used

@dataclass
class Live:
    measured: Measured
    pool: KVPool | None
    exchanges: list[Exchange] = field(default_factory=list)


def probe(target) -> Live:
    """The GPU memory source, and the KV pool the engine describes (vLLM /metrics)."""
    opts = target.endpoint.options("vram")
    measured = measure(opts, timeout=target.timeout)
    pool, exchanges = _pool(target.driver, measured.metrics_text), []
    route = target.driver.kv_pool_route
    if pool is None and route:
        ex = target.get(route)
        exchanges.append(ex)
        pool = _pool(target.driver, ex.body) if ex.ok else None
    return Live(measured, pool, exchanges)


def _pool(driver, text: str) -> KVPool | None:
    from pytest_frank.vram_sources import VRAMSourceError

    try:
        return driver.kv_pool(text) if text else None
    except VRAMSourceError:
        return None


def judge_live(endpoint, live: Live) -> None:
    m, driver = live.measured, endpoint.driver
    if m.unavailable:
        skip(m.unavailable)
    if m.problem:
        fail(f"GPU memory could not be read: {m.problem}")
    shape = endpoint.probe(slots.probe)
    if live.pool:
        endpoint.note(f"KV pool: {live.pool.detail}")
        _judge_pool(live.pool, shape, driver)
    expected, what, weights = _expected(endpoint, live, m.total)
    if m.used is None:
        if live.pool:
            return      # the pool was the only reading, and it holds the context
        fail(f"{m.where} gives no memory-used reading (no DCGM_FI_DEV_FB_USED)")
    allowed = tolerance_bytes(endpoint.config.options("vram"), expected)
    diff = m.used - expected
    said = (f"{m.where} uses {_mib(m.used)} MiB, {_mib(abs(diff))} MiB "
            f"{'more' if diff > 0 else 'less'} than the {_mib(expected)} MiB modelled ({what}; "
            f"tolerance {_mib(allowed)} MiB)")
    endpoint.note(said)
    if diff > allowed:
        twice = ""
        if weights and abs(diff - weights) <= allowed:
            twice = (f"\nthe excess is about the model's weights again ({_mib(weights)} MiB): "
                     "the model is loaded twice")
        fail(said + twice + _apps(m), driver.vram_high_fix)
    if -diff > allowed:
        fail(said, driver.vram_low_fix)


def _expected(endpoint, live: Live, gpu_total: int | None) -> tuple[int, str, int]:
    """(bytes the endpoint should use, how that was reached, the model's weights if known)."""
    opts = endpoint.config.options("vram")
    if live.pool and live.pool.fraction and gpu_total and not opts.get("model"):
        # an engine that preallocates takes its fraction of the GPU whatever the model is
        return (int(live.pool.fraction * gpu_total),
                f"{live.pool.fraction:g} of the {_mib(gpu_total)} MiB GPU", 0)
    result = modelled(endpoint, live=True, strict=True, gpu_total=gpu_total)
    return result.estimate.total, result.estimate.breakdown(), result.estimate.weights


def _apps(m: Measured) -> str:
    if not m.apps:
        return ""
    listed = "; ".join(f"pid {a.pid} {a.process_name} "
                       f"{'?' if a.used is None else _mib(a.used)} MiB" for a in m.apps)
    return f"\nprocesses on the GPU: {listed}"


def _judge_pool(pool: KVPool, shape, driver) -> None:
    need = shape.ctx_per_slot if shape and not shape.problem else None
    if pool.tokens is None or need is None or pool.tokens >= need:
        return
    fail(f"the KV pool holds {pool.tokens} tokens, less than one {need}-token sequence "
         f"({pool.detail}): the pool was clamped", driver.vram_low_fix)
