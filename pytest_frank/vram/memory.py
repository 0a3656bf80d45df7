"""How much GPU memory an endpoint needs: weights, KV cache, recurrent state, draft, projector.

The arithmetic follows llama.cpp's caches:

- KV: per cell and per attention layer, one K row of n_head_kv x key_length elements and one V
  row of n_head_kv x value_length, each sized by the cache type's ggml block (q8_0 packs 32
  elements in 34 bytes). Recurrent (SSM / DeltaNet) layers and layers with no KV heads cost
  nothing. The cells, as llama.cpp allocates them (llama-context.cpp, llama-kv-cache-iswa.cpp):
      n_ctx     = pad(ctx_size)                       pad: up to a multiple of 256
      n_ctx_seq = n_ctx if kv_unified else pad(n_ctx / n_parallel)
      streams   = 1 if kv_unified else n_parallel
      full-attention layers: n_ctx_seq cells per stream
      sliding-window layers: pad(min(n_ctx_seq, window x (n_parallel if kv_unified else 1)
                                     + n_ubatch)) cells per stream; n_ctx_seq with --swa-full
  so a sliding layer stops growing at window + n_ubatch cells; only full layers grow with
  context.
- Recurrent state, per recurrent layer and per row, in f32:
      conv  = (conv_kernel - 1) x (inner_size + 2 x group_count x state_size) x 4 bytes
      state = state_size x inner_size x 4 bytes
  (llama.cpp's n_embd_r / n_embd_s; for DeltaNet inner_size is v_heads x v_head_dim.) Each
  sequence (n_parallel of them) keeps one row, and with MTP drafting draft_max more
  (--spec-draft-n-max, default 3; llama.cpp's n_rs_seq): a snapshot per drafted token, to roll
  the state back to where a draft was rejected. So MTP at the default makes the state 4x:
      rows  = n_parallel x (1 + draft_max)    with MTP; n_parallel without (a separate draft
                                              model keeps no snapshots)
  llama.cpp's load log says it as `llama_memory_recurrent: size = ... (N cells, L layers, S
  seqs D rs_seq)`, cells = n_parallel and rs_seq = draft_max; its "layers" is the trunk's block
  count, though only the recurrent layers hold state.
- Weights: the file's tensors, less its NextN (MTP head) tensors where MTP is off: llama.cpp
  loads the head only under --spec-type draft-mtp ("model has unused tensor blk.N.nextn... --
  ignoring" otherwise), in the served file and in a draft file alike. So an -mtp file named as
  its own --model-draft (draft-simple) costs its trunk twice.
- An MTP (NextN) draft context keeps KV for the NextN layers, at the draft context size and the
  target's sequences, in its own cache types (f16 unless set; the target's -ctk/-ctv do not
  reach it) and no recurrent state; a separate draft model costs its weights plus its own KV.
- Everything else -- CUDA context, compute graphs, scratch -- is `fixed_overhead`, a number to
  measure once per host and pass in (the 1 GiB default is a starting guess, not a law).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import gguf

if TYPE_CHECKING:   # the header reader is imported only when a GGUF is read
    from pytest_frank.gguf.summary import GgufSummary

MiB = 1 << 20
GiB = 1 << 30
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
CELL_PAD = 256      # llama.cpp pads n_ctx, each sequence's share and the SWA cache to this
N_UBATCH = 512      # llama-server's default --ubatch-size
DRAFT_MAX = 3       # llama-server's default --spec-draft-n-max


def row_bytes(cache_type: str, n_elements: int) -> int:
    """Bytes of one cache row of n_elements in cache_type (ggml_row_size)."""
    if cache_type.lower() not in CACHE_TYPES:
        raise ValueError(f"cache type {cache_type!r} is not one of {', '.join(CACHE_TYPES)}")
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[cache_type.upper()]]
    if n_elements % block:
        raise ValueError(f"a row of {n_elements} elements does not split into {cache_type} "
                         f"blocks of {block}; llama.cpp refuses that cache type for this model")
    return n_elements // block * size


def recurrent_state_bytes(conv_kernel: int, inner_size: int, state_size: int,
                          group_count: int = 0, **_: Any) -> int:
    """f32 conv + SSM state of one recurrent layer for one sequence (see the module doc)."""
    conv = max(conv_kernel - 1, 0) * (inner_size + 2 * group_count * state_size) * 4
    return conv + state_size * inner_size * 4


@dataclass(frozen=True)
class LayerKV:
    n_head_kv: int
    key_length: int
    value_length: int
    sliding: bool = False

    def bytes_per_token(self, type_k: str, type_v: str) -> int:
        return (row_bytes(type_k, self.n_head_kv * self.key_length)
                + row_bytes(type_v, self.n_head_kv * self.value_length))


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on, from a GGUF header or written down by hand."""
    weights: int = 0                            # bytes
    nextn_weights: int = 0                      # of them, the MTP head's (loaded only with MTP)
    kv_layers: tuple[LayerKV, ...] = ()         # attention layers of the main model
    nextn_layers: tuple[LayerKV, ...] = ()      # MTP head layers (their own draft context)
    recurrent_layers: int = 0
    recurrent_state_per_layer: int = 0          # bytes per sequence
    sliding_window: int | None = None
    name: str = ""
    notes: tuple[str, ...] = ()
    trained_ctx: int | None = None              # context_length in the header

    @classmethod
    def uniform(cls, *, attention_layers: int, n_head_kv: int, head_dim: int,
                value_dim: int | None = None, weights: int = 0, name: str = "") -> ModelShape:
        layer = LayerKV(n_head_kv, head_dim, value_dim or head_dim)
        return cls(weights=weights, kv_layers=(layer,) * attention_layers, name=name)

    @classmethod
    def weights_only(cls, weights: int, name: str = "") -> ModelShape:
        return cls(weights=weights, name=name)

    @classmethod
    def from_summary(cls, summary: GgufSummary) -> ModelShape:
        def kv(kind: str) -> tuple[LayerKV, ...]:
            return tuple(LayerKV(x.n_head_kv, x.key_length, x.value_length, x.sliding)
                         for x in summary.layers if x.kind == kind and x.n_head_kv > 0)

        n_rec = len(summary.recurrent_layers)
        known = {"conv_kernel", "inner_size", "state_size"} <= summary.ssm.keys()
        return cls(
            weights=summary.weight_bytes, nextn_weights=summary.nextn_weight_bytes,
            kv_layers=kv("attention"), nextn_layers=kv("nextn"),
            recurrent_layers=n_rec,
            recurrent_state_per_layer=recurrent_state_bytes(**summary.ssm) if known else 0,
            sliding_window=summary.sliding_window,
            name=summary.name or summary.architecture or "",
            notes=tuple(_summary_notes(summary, n_rec, known)),
            trained_ctx=summary.context_length)

    @classmethod
    def from_gguf(cls, source: str | os.PathLike, **read_kwargs: Any) -> ModelShape:
        from pytest_frank.gguf.reader import read_header
        from pytest_frank.gguf.summary import summarize
        return cls.from_summary(summarize(read_header(source, **read_kwargs)))


def _summary_notes(summary: GgufSummary, n_rec: int, ssm_known: bool) -> Iterable[str]:
    if n_rec and not ssm_known:
        yield f"{n_rec} recurrent layers but no ssm.* sizes in the file: their state is not counted"
    if summary.sliding_window and not summary.sliding_pattern_known:
        yield ("sliding window set but no layer pattern: every attention layer is counted "
               "at full context (an overestimate)")
    if summary.kv_lora_rank:
        yield "MLA (kv_lora_rank) cache is not modelled: KV counted as full heads (an overestimate)"
    if (summary.split_count or 1) > 1:
        yield f"split GGUF ({summary.split_count} shards): weights are this shard's only"


@dataclass(frozen=True)
class Settings:
    """The endpoint's knobs, llama-server's names and defaults. Sizes in bytes."""
    ctx_size: int
    n_parallel: int = 1
    kv_unified: bool = False
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    n_ubatch: int = N_UBATCH
    swa_full: bool = False
    mtp: bool | None = None             # None: on when the file has NextN layers
    draft_max: int = DRAFT_MAX          # --spec-draft-n-max: with MTP, snapshots per sequence
    ctx_size_draft: int | None = None   # None: same as ctx_size
    cache_type_k_draft: str = "f16"
    cache_type_v_draft: str = "f16"
    gpu_total: int | None = None
    fixed_overhead: int = 1024 * MiB
    headroom: int = 0

    def __post_init__(self) -> None:
        if self.ctx_size < 0 or self.n_parallel < 1 or self.n_ubatch < 1:
            raise ValueError(f"ctx_size {self.ctx_size} / n_parallel {self.n_parallel} / n_ubatch "
                             f"{self.n_ubatch}: need ctx_size >= 0, n_parallel >= 1 and "
                             "n_ubatch >= 1")
        if self.draft_max < 0:
            raise ValueError(f"draft_max {self.draft_max}: a draft is at least 0 tokens long "
                             "(llama-server --spec-draft-n-max)")
        for name in ("cache_type_k", "cache_type_v", "cache_type_k_draft", "cache_type_v_draft"):
            if getattr(self, name).lower() not in CACHE_TYPES:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of "
                                 f"{', '.join(CACHE_TYPES)}")


def kv_bytes_per_token(layers: Iterable[LayerKV], type_k: str = "f16", type_v: str = "f16") -> int:
    """What one cell of the given layers costs."""
    return sum(x.bytes_per_token(type_k, type_v) for x in layers)


def sliding_layers(model: ModelShape, swa_full: bool = False) -> tuple[LayerKV, ...]:
    """The attention layers whose cache stops growing at the window (none with --swa-full)."""
    if swa_full or not model.sliding_window:
        return ()
    return tuple(x for x in model.kv_layers if x.sliding)


def growing_layers(model: ModelShape, swa_full: bool = False) -> tuple[LayerKV, ...]:
    """The attention layers whose cache grows with context: all but the sliding-window ones."""
    if swa_full or not model.sliding_window:
        return model.kv_layers
    return tuple(x for x in model.kv_layers if not x.sliding)


def mtp_on(model: ModelShape, settings: Settings) -> bool:
    """Whether the endpoint drafts with the file's own MTP head: as settings say, else when the
    file has one."""
    return bool(model.nextn_layers) if settings.mtp is None else settings.mtp


def recurrent_rows_per_sequence(settings: Settings, mtp: bool) -> int:
    """Rows of recurrent state each sequence keeps: its own, and with MTP draft_max more (the
    snapshots a rejected draft rolls back to; see the module doc)."""
    return 1 + (settings.draft_max if mtp else 0)


def pad(n: int, to: int = CELL_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Cells:
    """llama.cpp's KV cells per stream: of the full-attention cache and of the sliding-window
    cache, and how many streams (one per sequence unless kv_unified)."""
    full: int
    sliding: int
    streams: int


def cache_cells(ctx_size: int, *, n_parallel: int = 1, kv_unified: bool = False,
                window: int | None = None, n_ubatch: int = N_UBATCH,
                swa_full: bool = False) -> Cells:
    """The cells llama.cpp allocates for ctx_size (see the module doc)."""
    n_ctx = pad(ctx_size)
    per_seq = n_ctx if kv_unified else pad(n_ctx // n_parallel)
    sliding = per_seq
    if window and not swa_full:
        sliding = pad(min(per_seq, window * (n_parallel if kv_unified else 1) + n_ubatch))
    return Cells(per_seq, sliding, 1 if kv_unified else n_parallel)


def kv_cache_bytes(layers: Iterable[LayerKV], ctx_size: int, *, n_parallel: int = 1,
                   kv_unified: bool = False, window: int | None = None,
                   type_k: str = "f16", type_v: str = "f16", n_ubatch: int = N_UBATCH,
                   swa_full: bool = False) -> int:
    cells = cache_cells(ctx_size, n_parallel=n_parallel, kv_unified=kv_unified, window=window,
                        n_ubatch=n_ubatch, swa_full=swa_full)
    total = 0
    for layer in layers:
        n = cells.sliding if layer.sliding and window else cells.full
        total += layer.bytes_per_token(type_k, type_v) * n * cells.streams
    return total


@dataclass
class MemoryEstimate:
    settings: Settings
    weights: int
    kv_bytes_per_token: int
    kv: int
    recurrent_state: int
    mtp_kv: int
    draft_weights: int
    draft_kv: int
    projector: int
    fixed_overhead: int
    total: int
    gpu_total: int | None
    free_after_load: int | None
    notes: list[str] = field(default_factory=list)

    PARTS = ("weights", "kv", "recurrent_state", "mtp_kv", "draft_weights", "draft_kv",
             "projector", "fixed_overhead")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["settings"] = asdict(self.settings)
        return d

    def breakdown(self) -> str:
        """'weights 14982 + kv 6272 + ...' in MiB, zero parts left out."""
        parts = [f"{p.replace('_', ' ')} {fmt_mib(getattr(self, p))}"
                 for p in self.PARTS if getattr(self, p)]
        return " + ".join(parts) + " MiB"


def _as_shape(x: ModelShape | int | None) -> ModelShape | None:
    return ModelShape.weights_only(x) if isinstance(x, int) else x


def estimate(model: ModelShape, settings: Settings, *, draft: ModelShape | int | None = None,
             mmproj: ModelShape | int | None = None) -> MemoryEstimate:
    """Every part of the memory bill for `model` served with `settings`."""
    s, draft, mmproj = settings, _as_shape(draft), _as_shape(mmproj)
    notes = list(model.notes)
    cache = partial(kv_cache_bytes, n_parallel=s.n_parallel, kv_unified=s.kv_unified,
                    window=model.sliding_window, n_ubatch=s.n_ubatch, swa_full=s.swa_full)
    kv = cache(model.kv_layers, s.ctx_size, type_k=s.cache_type_k, type_v=s.cache_type_v)
    ctx_draft = s.ctx_size if s.ctx_size_draft is None else s.ctx_size_draft
    draft_cache = partial(cache, type_k=s.cache_type_k_draft, type_v=s.cache_type_v_draft)
    mtp = mtp_on(model, s)
    if mtp and not model.nextn_layers:
        notes.append("MTP asked for but the model has no NextN layers: no MTP draft KV counted")
    mtp_kv = draft_cache(model.nextn_layers, ctx_draft) if mtp else 0
    draft_kv = 0
    if draft is not None:
        notes.extend(f"draft: {n}" for n in draft.notes)
        draft_kv = (draft_cache(draft.kv_layers, ctx_draft)
                    + draft.recurrent_layers * draft.recurrent_state_per_layer * s.n_parallel)

    def loaded(shape: ModelShape) -> int:
        return shape.weights - (0 if mtp else shape.nextn_weights)

    parts = {
        "weights": loaded(model), "kv": kv,
        "recurrent_state": (model.recurrent_layers * model.recurrent_state_per_layer
                            * s.n_parallel * recurrent_rows_per_sequence(s, mtp)),
        "mtp_kv": mtp_kv, "draft_weights": loaded(draft) if draft else 0, "draft_kv": draft_kv,
        "projector": mmproj.weights if mmproj else 0, "fixed_overhead": s.fixed_overhead}
    total = sum(parts.values())
    free = None if s.gpu_total is None else s.gpu_total - total
    per_token = kv_bytes_per_token(growing_layers(model, s.swa_full), s.cache_type_k,
                                   s.cache_type_v)
    return MemoryEstimate(
        settings=s, kv_bytes_per_token=per_token,
        total=total, gpu_total=s.gpu_total, free_after_load=free, notes=notes, **parts)


# --------------------------------------------------------------------------- verdicts and tables

def fmt_mib(n: float) -> str:
    mib = n / MiB
    return f"{mib:.0f}" if abs(mib - round(mib)) < 0.05 else f"{mib:.1f}"


def fmt_ctx(n: int) -> str:
    return f"{n} ({n // 1024}K)" if n and n % 1024 == 0 else str(n)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    estimate: MemoryEstimate = field(repr=False)

    def __bool__(self) -> bool:
        return self.ok


def fits(est: MemoryEstimate, headroom: int | None = None) -> Verdict:
    """Does it load, and does it leave `headroom` (default: settings.headroom) free?"""
    free, ctx = est.free_after_load, fmt_ctx(est.settings.ctx_size)
    if est.gpu_total is None or free is None:
        raise ValueError("fits() needs the GPU's size: set Settings.gpu_total")
    want = est.settings.headroom if headroom is None else headroom
    needs = (f"needs {fmt_mib(est.total)} MiB ({est.breakdown()}) "
             f"of a {fmt_mib(est.gpu_total)} MiB GPU")
    if free < 0:
        return Verdict(False, f"does not fit: ctx {ctx} {needs}: {fmt_mib(-free)} MiB short", est)
    if free < want:
        return Verdict(False, f"fits, but ctx {ctx} leaves {fmt_mib(free)} MiB free, less than "
                       f"the {fmt_mib(want)} MiB headroom asked ({fmt_mib(want - free)} MiB "
                       f"short); it {needs}", est)
    return Verdict(True, f"fits: ctx {ctx} leaves {fmt_mib(free)} MiB free "
                   f"(headroom asked {fmt_mib(want)} MiB); it {needs}", est)


def max_context(model: ModelShape, settings: Settings, *, draft: ModelShape | int | None = None,
                mmproj: ModelShape | int | None = None, step: int = 1024,
                limit: int = 1 << 24) -> int:
    """The largest ctx_size (a multiple of step) that still leaves settings.headroom free."""
    def ok(k: int) -> bool:
        est = estimate(model, replace(settings, ctx_size=k * step), draft=draft, mmproj=mmproj)
        return est.free_after_load is not None and est.free_after_load >= settings.headroom
    if settings.gpu_total is None:
        raise ValueError("max_context() needs the GPU's size: set Settings.gpu_total")
    lo, hi = 0, limit // step
    if not ok(1):
        return 0
    while lo < hi:                  # KV never shrinks as ctx grows: bisect
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo * step


@dataclass
class ContextTable:
    rows: list[dict[str, Any]]
    text: str

    def __str__(self) -> str:
        return self.text


def context_table(model: ModelShape, settings: Settings, contexts: Iterable[int], *,
                  draft: ModelShape | int | None = None,
                  mmproj: ModelShape | int | None = None) -> ContextTable:
    """The seeds' "context math" table: context | KV (MiB) | free after load."""
    rows = []
    for ctx in contexts:
        est = estimate(model, replace(settings, ctx_size=ctx), draft=draft, mmproj=mmproj)
        rows.append({
            "context": ctx, "kv_bytes": est.kv, "kv_mib": est.kv / MiB,
            "draft_kv_mib": (est.mtp_kv + est.draft_kv) / MiB,
            "total_mib": est.total / MiB,
            "free_after_load_mib": None if est.free_after_load is None
            else est.free_after_load / MiB,
            "fits": None if est.free_after_load is None
            else est.free_after_load >= settings.headroom,
        })
    return ContextTable(rows, _render(rows))


def _render(rows: list[dict]) -> str:
    draft_col = any(r["draft_kv_mib"] for r in rows)
    head = ["Context", "KV (MiB)"] + (["Draft KV (MiB)"] if draft_col else []) + ["Free after load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("-" * (len(h) + 2) for h in head) + "|"]
    for r in rows:
        cells = [fmt_ctx(r["context"]), fmt_mib(r["kv_mib"] * MiB)]
        if draft_col:
            cells.append(fmt_mib(r["draft_kv_mib"] * MiB))
        cells.append(_free_cell(r["free_after_load_mib"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _free_cell(free_mib: float | None) -> str:
    if free_mib is None:
        return "-"
    if free_mib < 0:  # a shortfall reads as one, not as "-1.9 (-0.00 GiB)"
        return f"{fmt_mib(-free_mib * MiB)} MiB short"
    return f"{fmt_mib(free_mib * MiB)} ({free_mib / 1024:.2f} GiB)"


def per_sequence_context(settings: Settings) -> int:
    """The context each sequence (slot) gets: llama.cpp's n_ctx_seq."""
    return cache_cells(settings.ctx_size, n_parallel=settings.n_parallel,
                       kv_unified=settings.kv_unified).full


def trained_context_warning(settings: Settings, trained: int | None) -> str | None:
    """llama.cpp's "possible training context overflow", said before the server starts."""
    per_seq = per_sequence_context(settings)
    if not trained or per_seq <= trained:
        return None
    ctx = fmt_ctx(settings.ctx_size)
    who = (f"ctx {ctx} gives each sequence {per_seq} tokens" if settings.kv_unified
           or settings.n_parallel == 1 else
           f"ctx {ctx} over {settings.n_parallel} slots gives each slot {per_seq} tokens")
    return (f"{who}, more than the {trained} the model was trained on (context_length in its "
            f"GGUF header): answers past {trained} tokens degrade unless RoPE scaling extends "
            f"the context (e.g. --rope-scaling yarn --yarn-orig-ctx {trained})")
