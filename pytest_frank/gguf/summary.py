"""What a GGUF header says about the model's architecture: per-layer kinds (attention, recurrent,
an MTP head), KV shapes, sliding windows and weight bytes, read off a parsed `GGUFHeader`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pytest_frank.gguf.reader import MAX_LAYERS, GGUFHeader


@dataclass(frozen=True)
class LayerSummary:
    index: int
    kind: str                   # "attention", "recurrent", "nextn" (an MTP head) or "none"
    n_head: int
    n_head_kv: int              # 0 for a layer that keeps no KV cache
    key_length: int
    value_length: int
    sliding: bool               # a sliding-window attention layer


# A per-layer key may be one value for every layer or a list with one per layer; values read
# straight from the metadata are what the file wrote, unchecked.
PerLayer = int | list[int] | None


@dataclass(frozen=True)
class GgufSummary:
    """What a person sizing a deployment reads off a header. Fields in the order `as_dict` (the
    preflight's JSON) lists them."""
    source: str
    gguf_version: int
    architecture: str | None
    name: str | None
    block_count: int
    layers: tuple[LayerSummary, ...]
    attention_layers: tuple[int, ...]       # layer indices
    recurrent_layers: tuple[int, ...]
    nextn_layers: tuple[int, ...]
    sliding_layers: tuple[int, ...]
    sliding_pattern_known: bool
    full_attention_interval: int | None
    nextn_predict_layers: int
    embedding_length: int | None
    head_count: PerLayer
    head_count_kv: PerLayer
    attention_head_count_kv: PerLayer       # over attention layers only
    key_length: PerLayer
    value_length: PerLayer
    kv_lora_rank: int | None
    context_length: int | None
    sliding_window: int | None
    ssm: dict[str, int]                     # the ssm.* sizes the file has
    projector_type: str | None
    has_vision_encoder: bool | None
    has_audio_encoder: bool | None
    vocab_size: int | None
    n_tensors: int
    weight_bytes_by_type: dict[str, int]    # largest first
    weight_bytes: int
    nextn_weight_bytes: int
    split_count: int | None
    header_bytes: int
    file_size: int | None
    bytes_read: int
    requests: int

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        return asdict(self)


# Sliding-window periods llama.cpp hard-codes for files that predate the pattern key:
# in each period the last layer is full attention, the others slide.
_SWA_PERIOD_DEFAULTS = {"gemma2": 2, "gemma3": 6, "cohere2": 4}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _per_layer(header: GGUFHeader, key: str, n_layers: int, default: Any = None) -> list:
    """A key that may be a scalar or one value per layer, as a per-layer list."""
    value = header.get(key, default)
    if isinstance(value, list):
        if len(value) < n_layers:
            raise header.error(key, f"{len(value)} entries for {n_layers} layers")
        return value[:n_layers]
    return [value] * n_layers


def _sliding_flags(header: GGUFHeader, n_layers: int) -> list[bool] | None:
    """Which layers use the sliding window; None when the file has a window but no pattern."""
    if not _int(header.get("attention.sliding_window")):
        return [False] * n_layers
    pattern = header.get("attention.sliding_window_pattern")
    if pattern is None:
        pattern = _SWA_PERIOD_DEFAULTS.get(header.architecture or "")
    if isinstance(pattern, list):
        return [bool(x) for x in _per_layer(header, "attention.sliding_window_pattern", n_layers)]
    if _int(pattern) is None:
        return None
    # llama.cpp's set_swa_pattern: period 0 means every layer slides
    return [pattern == 0 or i % pattern < pattern - 1 for i in range(n_layers)]


def _layer_kind(i: int, main_layers: int, interval: int | None, kv_heads: int,
                has_ssm: bool) -> str:
    if i >= main_layers:
        return "nextn"
    if interval and (i + 1) % interval != 0:
        return "recurrent"
    if kv_heads <= 0:
        return "recurrent" if has_ssm else "none"
    return "attention"


def _layers(header: GGUFHeader, blocks: int, nextn: int, has_ssm: bool) -> list[LayerSummary]:
    embd = _int(header.get("embedding_length"))
    heads = _per_layer(header, "attention.head_count", blocks)
    kv_heads = _per_layer(header, "attention.head_count_kv", blocks)
    interval = _int(header.get("full_attention_interval"))
    sliding = _sliding_flags(header, blocks) or [False] * blocks
    layers = []
    for i in range(blocks):
        n_head = _int(heads[i]) or 0
        n_kv = _int(kv_heads[i]) if kv_heads[i] is not None else n_head
        head_dim = embd // n_head if embd and n_head else 0
        swa = sliding[i]
        k_len = _int(header.get("attention.key_length_swa" if swa else "attention.key_length"))
        v_len = _int(header.get("attention.value_length_swa" if swa else "attention.value_length"))
        if swa and k_len is None:
            k_len = _int(header.get("attention.key_length"))
        if swa and v_len is None:
            v_len = _int(header.get("attention.value_length"))
        kind = _layer_kind(i, blocks - nextn, interval, n_kv or 0, has_ssm)
        has_kv = kind in ("attention", "nextn")
        layers.append(LayerSummary(
            index=i, kind=kind, n_head=n_head, n_head_kv=(n_kv or 0) if has_kv else 0,
            key_length=k_len or head_dim, value_length=v_len or head_dim,
            sliding=swa and has_kv))
    return layers


def _scalar_or_list(values: list) -> Any:
    return values[0] if values and all(v == values[0] for v in values) else values


def _weights_by_type(header: GGUFHeader) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in header.tensors:
        out[t.ggml_type.name] = out.get(t.ggml_type.name, 0) + t.n_bytes
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


_SSM_KEYS = ("conv_kernel", "inner_size", "state_size", "time_step_rank", "group_count")


def _block_bytes(header: GGUFHeader, blocks: list[int]) -> int:
    """The bytes of every tensor of these blocks: an MTP head is its whole block (attention and
    FFN beside the nextn.* projections), all of which llama.cpp skips unless it drafts with it."""
    prefixes = tuple(f"blk.{i}." for i in blocks)
    return sum(t.n_bytes for t in header.tensors if t.name.startswith(prefixes)) if blocks else 0


def summarize(header: GGUFHeader) -> GgufSummary:
    """What a person sizing a deployment reads off a header."""
    g = header.get
    blocks = _int(g("block_count")) or 0
    if blocks > MAX_LAYERS:
        raise header.error("block_count", f"{blocks} layers is absurd (more than {MAX_LAYERS})")
    nextn = min(_int(g("nextn_predict_layers")) or 0, blocks)
    ssm = {k: n for k in _SSM_KEYS if (n := _int(g(f"ssm.{k}"))) is not None}
    layers = _layers(header, blocks, nextn, bool(ssm))
    attn = [x for x in layers if x.kind == "attention"]
    tokens = g("tokenizer.ggml.tokens")
    return GgufSummary(
        source=header.source,
        gguf_version=header.version,
        architecture=header.architecture,
        name=g("general.name"),
        block_count=blocks,
        layers=tuple(layers),
        attention_layers=tuple(x.index for x in attn),
        recurrent_layers=tuple(x.index for x in layers if x.kind == "recurrent"),
        nextn_layers=tuple(x.index for x in layers if x.kind == "nextn"),
        sliding_layers=tuple(x.index for x in attn if x.sliding),
        sliding_pattern_known=_sliding_flags(header, blocks) is not None,
        full_attention_interval=_int(g("full_attention_interval")),
        nextn_predict_layers=nextn,
        embedding_length=_int(g("embedding_length")),
        head_count=g("attention.head_count"),
        head_count_kv=g("attention.head_count_kv", g("attention.head_count")),
        attention_head_count_kv=_scalar_or_list([x.n_head_kv for x in attn]) if attn else None,
        key_length=_scalar_or_list([x.key_length for x in attn]) if attn else None,
        value_length=_scalar_or_list([x.value_length for x in attn]) if attn else None,
        kv_lora_rank=_int(g("attention.kv_lora_rank")),
        context_length=_int(g("context_length")),
        sliding_window=_int(g("attention.sliding_window")),
        ssm=ssm,
        projector_type=(g("clip.projector_type") or g("clip.vision.projector_type")
                        or g("clip.audio.projector_type")),
        has_vision_encoder=g("clip.has_vision_encoder"),
        has_audio_encoder=g("clip.has_audio_encoder"),
        vocab_size=len(tokens) if isinstance(tokens, list) else _int(g("vocab_size")),
        n_tensors=len(header.tensors),
        weight_bytes_by_type=_weights_by_type(header),
        weight_bytes=header.weight_bytes,
        nextn_weight_bytes=_block_bytes(header, [x.index for x in layers if x.kind == "nextn"]),
        split_count=_int(g("split.count")),
        header_bytes=header.header_bytes,
        file_size=header.file_size,
        bytes_read=header.bytes_read,
        requests=header.requests,
    )
