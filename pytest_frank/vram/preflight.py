"""`frank preflight <path-or-url>`: read a GGUF header (a few MB, never the weights), print what
sizing a deployment needs, and with --ctx the context-math table.

Exit status: 0 when something fits (or no --gpu-mib was given to judge), 1 when nothing fits
(no context asked with --ctx, or without --ctx not even 1024 tokens), 2 for a usage error or a
header that cannot be read."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from pytest_frank.gguf.reader import GGUFError, read_header
from pytest_frank.gguf.summary import GgufSummary, summarize
from pytest_frank.vram.memory import (
    CACHE_TYPES,
    CELL_PAD,
    DRAFT_MAX,
    N_UBATCH,
    MiB,
    ModelShape,
    Settings,
    cache_cells,
    context_table,
    estimate,
    fits,
    fmt_mib,
    growing_layers,
    kv_bytes_per_token,
    max_context,
    mtp_on,
    recurrent_rows_per_sequence,
    row_bytes,
    sliding_layers,
    trained_context_warning,
)


@dataclass(frozen=True)
class DraftFlags:
    """How llama.cpp is told to draft, as the MTP head's line names it: the flag and value that
    draft from the file's own head (`--spec-type draft-mtp`) and the flag that loads a draft
    model. They are the llama.cpp driver's facts, and the drivers sit above vram (they read its
    memory model), so the `frank` command (pytest_frank.cli) reads them from the driver and
    hands them in; without them the line names no flag."""

    mtp: str = "MTP drafting"
    draft: str = ""


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _list(value: Any) -> str:
    if isinstance(value, list):
        return "per layer " + ",".join(map(str, value))
    return "-" if value is None else str(value)


def describe(s: GgufSummary, flags: DraftFlags = DraftFlags()) -> list[tuple[str, str]]:
    """The architecture summary as (label, text) lines."""
    size = human_bytes(s.file_size)
    lines = [
        ("source", s.source),
        ("header", (f"{human_bytes(s.header_bytes)} ({s.header_bytes} B); read "
                    f"{human_bytes(s.bytes_read)} in {s.requests} request(s) of a "
                    f"{size} file")),
        ("architecture", (f"{s.architecture}" + (f" ({s.name})" if s.name else "")
                          + f", GGUF v{s.gguf_version}, {s.n_tensors} tensors")),
    ]
    if s.projector_type or s.architecture == "clip":
        lines.append(("projector", (f"{s.projector_type}, vision encoder "
                                    f"{s.has_vision_encoder}, audio encoder "
                                    f"{s.has_audio_encoder}")))
    if s.block_count:
        lines += _llm_lines(s, flags)
    if s.vocab_size:
        lines.append(("vocabulary", f"{s.vocab_size} tokens"))
    by_type = ", ".join(f"{t} {human_bytes(n)}" for t, n in s.weight_bytes_by_type.items())
    lines.append(("weights", (f"{human_bytes(s.weight_bytes)} ({s.weight_bytes} B): "
                              f"{by_type or 'none'}")))
    if s.nextn_weight_bytes:
        lines.append(("nextn weights", human_bytes(s.nextn_weight_bytes)))
    return lines


def _context_text(s: GgufSummary) -> str:
    text = f"native {s.context_length}"
    if s.sliding_window:
        text += f", sliding window {s.sliding_window} on {len(s.sliding_layers)} layers"
    return text


def _llm_lines(s: GgufSummary, flags: DraftFlags) -> list[tuple[str, str]]:
    kinds = [f"{len(s.attention_layers)} attention"]
    if s.recurrent_layers:
        kinds.append(f"{len(s.recurrent_layers)} recurrent")
    if s.nextn_layers:
        kinds.append(f"{len(s.nextn_layers)} NextN (MTP)")
    interval = s.full_attention_interval
    layout = f"; every {interval}th layer is attention" if interval else ""
    lines = [
        ("layers", f"{s.block_count} blocks: {', '.join(kinds)}{layout}"),
        ("attention layers", ",".join(map(str, s.attention_layers)) or "none"),
        ("heads", (f"{_list(s.head_count)} query, {_list(s.attention_head_count_kv)} KV "
                   f"(file: {_list(s.head_count_kv)})")),
        ("head dims", f"key {_list(s.key_length)}, value {_list(s.value_length)}"),
        ("context", _context_text(s)),
        ("nextn_predict_layers", str(s.nextn_predict_layers)),
        ("MTP head", _mtp_head(s, flags)),
    ]
    if s.ssm:
        lines.append(("ssm", ", ".join(f"{k} {v}" for k, v in s.ssm.items())))
    if s.kv_lora_rank:
        lines.append(("kv_lora_rank", f"{s.kv_lora_rank} (MLA)"))
    return lines


def _mtp_head(s: GgufSummary, flags: DraftFlags) -> str:
    """Whether the file drafts for itself: MTP is a property of the file (its NextN layers), not
    of the flags, and the flags that serve it are llama.cpp's (its driver's serve flags)."""
    spec, draft = flags.mtp, flags.draft or "a draft model"
    model = f"a draft model ({flags.draft})" if flags.draft else "a draft model"
    n = len(s.nextn_layers)
    if not n:
        return (f"none (nextn_predict_layers 0): llama.cpp refuses {spec} on this file (no "
                f"head to draft from); a release's -mtp GGUF carries one, or draft with {model}")
    where = ",".join(map(str, s.nextn_layers))
    if n == s.block_count:  # a head without the model: a sidecar for the model it belongs to
        return (f"a standalone head ({n} NextN layer(s), no model layers): the draft for its "
                f"model, loaded with {draft} beside {spec}")
    return (f"its own, {n} NextN layer(s) (blk.{where}.nextn.*): {spec} alone serves it; "
            f"{draft} at this file would load it a second time")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="frank preflight", description=__doc__)
    p.add_argument("source", help="GGUF path or http(s) URL (read by ranged GETs)")
    p.add_argument("--ctx", action="append", default=[], metavar="N[,N...]",
                   help="total --ctx-size to tabulate; repeat or comma-separate")
    p.add_argument("--parallel", type=int, default=1, help="--parallel slots (default 1)")
    p.add_argument("--kv-unified", action="store_true", help="one KV stream shared by all slots")
    p.add_argument("--ubatch-size", type=int, default=N_UBATCH,
                   help=f"--ubatch-size (default {N_UBATCH}): sizes the sliding-window cache")
    p.add_argument("--swa-full", action="store_true",
                   help="full-size sliding-window cache (llama-server --swa-full)")
    p.add_argument("--cache-type-k", default="f16", choices=CACHE_TYPES)
    p.add_argument("--cache-type-v", default="f16", choices=CACHE_TYPES)
    p.add_argument("--gpu-mib", type=float, help="GPU memory in MiB")
    p.add_argument("--fixed-mib", type=float, default=1024,
                   help="CUDA context, compute buffers, scratch (default 1024; measure yours)")
    p.add_argument("--headroom-mib", type=float, default=0, help="free memory to keep")
    p.add_argument("--draft", help="draft model GGUF (path or URL)")
    p.add_argument("--mmproj", help="multimodal projector GGUF (path or URL)")
    mtp = p.add_mutually_exclusive_group()
    mtp.add_argument("--mtp", dest="mtp", action="store_true", default=None,
                     help="count the MTP draft context (default: when the file has NextN layers)")
    mtp.add_argument("--no-mtp", dest="mtp", action="store_false")
    p.add_argument("--draft-max", type=int, default=DRAFT_MAX,
                   help=f"--spec-draft-n-max (default {DRAFT_MAX}): with MTP, each sequence keeps "
                        "this many snapshots of a hybrid's recurrent state beside its own")
    p.add_argument("--timeout", type=float, default=30, help="per-request HTTP timeout, seconds")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


def _contexts(values: list[str]) -> list[int]:
    out = []
    for v in values:
        for part in v.split(","):
            text = part.strip().lower()
            digits = text.removesuffix("k")
            if not digits.removeprefix("-").isdecimal() or not digits.isascii():
                raise ValueError(f"--ctx {part!r} is not a token count (e.g. 131072 or 128k)")
            n = int(digits) * (1024 if text.endswith("k") else 1)
            if n <= 0:
                raise ValueError(f"--ctx {part.strip()!r}: a context holds at least 1 token "
                                 "(llama-server reads -c 0 as the model's trained context: "
                                 "pass that number)")
            out.append(n)
    return out


def _settings(args: argparse.Namespace, ctx: int) -> Settings:
    return Settings(
        ctx_size=ctx, n_parallel=args.parallel, kv_unified=args.kv_unified,
        cache_type_k=args.cache_type_k, cache_type_v=args.cache_type_v, mtp=args.mtp,
        draft_max=args.draft_max,
        n_ubatch=args.ubatch_size, swa_full=args.swa_full,
        gpu_total=None if args.gpu_mib is None else int(args.gpu_mib * MiB),
        fixed_overhead=int(args.fixed_mib * MiB), headroom=int(args.headroom_mib * MiB))


def _kv_lines(model: ModelShape, args: argparse.Namespace) -> list[tuple[str, str]]:
    k, v = args.cache_type_k, args.cache_type_v
    layers = growing_layers(model, args.swa_full)
    sliding = sliding_layers(model, args.swa_full)
    kind = "full-attention" if sliding else "attention"
    if len({(x.n_head_kv, x.key_length, x.value_length) for x in layers}) == 1:
        x = layers[0]
        kb = row_bytes(k, x.n_head_kv * x.key_length)
        vb = row_bytes(v, x.n_head_kv * x.value_length)
        text = (f"{len(layers)} {kind} layers x {x.n_head_kv} KV heads x {x.key_length} dim: "
                f"K {k} {kb} B + V {v} {vb} B per layer = {(kb + vb) * len(layers)} B/token")
    else:
        per = kv_bytes_per_token(layers, k, v)
        text = f"{len(layers)} {kind} layers, K {k}, V {v}: {per} B/token"
    lines = [("KV per token", text)]
    if sliding:
        lines.append(("sliding-window KV", _sliding_text(model, sliding, args)))
    mtp = mtp_on(model, _settings(args, 0))
    if model.nextn_layers:
        per = sum(x.bytes_per_token("f16", "f16") for x in model.nextn_layers)
        unused = "" if mtp else " (not counted: --no-mtp)"
        lines.append(("MTP draft KV",
                      f"{len(model.nextn_layers)} NextN layer(s), f16: {per} B/token{unused}"))
    if model.recurrent_layers:
        lines.append(("recurrent state", _recurrent_text(model, args, mtp)))
    return lines


def _recurrent_text(model: ModelShape, args: argparse.Namespace, mtp: bool) -> str:
    """A hybrid's recurrent state: per row, and the rows each sequence keeps (with MTP, one
    snapshot per drafted token beside its own)."""
    row = model.recurrent_layers * model.recurrent_state_per_layer
    text = f"{model.recurrent_layers} layers x {model.recurrent_state_per_layer} B = {human_bytes(row)}"
    rows = recurrent_rows_per_sequence(_settings(args, 0), mtp)
    if rows == 1:
        return f"{text} per sequence (f32)"
    return (f"{text} a row (f32); with MTP {rows} rows per sequence (its own and --draft-max "
            f"{args.draft_max} snapshots) = {human_bytes(row * rows)} per sequence")


def _sliding_text(model: ModelShape, sliding: tuple, args: argparse.Namespace) -> str:
    """What the sliding-window layers hold at any context (llama.cpp's SWA cache)."""
    cells = cache_cells(1 << 30, n_parallel=args.parallel, kv_unified=args.kv_unified,
                        window=model.sliding_window, n_ubatch=args.ubatch_size)
    per = kv_bytes_per_token(sliding, args.cache_type_k, args.cache_type_v)
    streams = f" x {cells.streams} streams" if cells.streams > 1 else ""
    return (f"{len(sliding)} layers with window {model.sliding_window}: {per} B/cell, at most "
            f"{cells.sliding} cells{streams} (window + ubatch {args.ubatch_size}, padded to "
            f"{CELL_PAD}) = {human_bytes(per * cells.sliding * cells.streams)} however long "
            "the context")


def _companion(source: str | None, timeout: float, label: str):
    if not source:
        return None, []
    s = summarize(read_header(source, timeout=timeout))
    what = s.projector_type or s.architecture
    line = (label, (f"{what}, {human_bytes(s.weight_bytes)} weights, "
                    f"{len(s.attention_layers)} attention layers ({s.source})"))
    return ModelShape.from_summary(s), [line]


def run(args: argparse.Namespace, flags: DraftFlags = DraftFlags()) -> dict[str, Any]:
    summary = summarize(read_header(args.source, timeout=args.timeout))
    model = ModelShape.from_summary(summary)
    draft, draft_lines = _companion(args.draft, args.timeout, "draft")
    mmproj, mmproj_lines = _companion(args.mmproj, args.timeout, "mmproj")
    lines = describe(summary, flags) + draft_lines + mmproj_lines
    out: dict[str, Any] = {"summary": summary.as_dict(), "lines": lines, "notes": list(model.notes)}
    contexts = _contexts(args.ctx)
    if summary.block_count:
        lines += _kv_lines(model, args)
    if contexts:
        settings = _settings(args, contexts[0])
        table = context_table(model, settings, contexts, draft=draft, mmproj=mmproj)
        out["table"], out["context_table"] = table.text, table.rows
        est = estimate(model, settings, draft=draft, mmproj=mmproj)
        out["notes"] = est.notes
        out["warnings"] = [w for c in contexts if (w := trained_context_warning(
            _settings(args, c), summary.context_length))]
        if args.gpu_mib is not None:
            verdicts = [fits(estimate(model, _settings(args, c), draft=draft, mmproj=mmproj))
                        for c in contexts]
            out["verdicts"] = [v.message for v in verdicts]
            out["fits"] = any(verdicts)
    if args.gpu_mib is not None:
        best = max_context(model, _settings(args, 0), draft=draft, mmproj=mmproj)
        out["max_context"] = best
        out.setdefault("fits", best > 0)
        keep = fmt_mib(args.headroom_mib * MiB)
        short = (f"leave less than {keep} MiB free" if args.headroom_mib else "do not fit")
        said = f"{best} tokens leave >= {keep} MiB free" if best else f"none: even 1024 tokens {short}"
        lines.append(("max context", said))
    return out


def _nothing_fits(args: argparse.Namespace, contexts: list[int]) -> str:
    gpu = f"a {fmt_mib(args.gpu_mib * MiB)} MiB GPU"
    if args.headroom_mib:
        gpu += f" with {fmt_mib(args.headroom_mib * MiB)} MiB kept free"
    if contexts:
        asked = ", ".join(map(str, contexts))
        return f"nothing fits: none of the contexts asked ({asked}) fits {gpu}"
    return f"nothing fits: not even 1024 tokens of context fit {gpu}"


def _print(out: dict[str, Any]) -> None:
    width = max(len(label) for label, _ in out["lines"])
    for label, text in out["lines"]:
        print(f"{label:<{width}}  {text}")
    if "table" in out:
        print()
        print(out["table"])
    for line in (out.get("verdicts", []) + [f"warning: {w}" for w in out.get("warnings", [])]
                 + [f"note: {n}" for n in out.get("notes", [])]):
        print(line)


def main(argv: list[str] | None = None, flags: DraftFlags = DraftFlags()) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:       # argparse already printed usage
        return int(exc.code or 0)
    try:
        if args.parallel < 1:
            raise ValueError(f"--parallel {args.parallel}: need at least 1 slot")
        if args.ubatch_size < 1:
            raise ValueError(f"--ubatch-size {args.ubatch_size}: need at least 1 token")
        out = run(args, flags)
    except (GGUFError, ValueError, OSError) as exc:
        print(f"frank preflight: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out.pop("lines")
        print(json.dumps(out, indent=2, default=str))
    else:
        _print(out)
    if out.get("fits") is False:
        print(_nothing_fits(args, _contexts(args.ctx)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
