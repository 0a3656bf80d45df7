"""A tiny LLaVA-style vision projector GGUF ("mmproj") for the self-test text model.

llama.cpp's clip loader (tools/mtmd/clip.cpp) reads projector type "mlp": a CLIP ViT (patch
conv, learned positions, one pre-norm block) then mm.0 -> GELU -> mm.2 into the text model's
embedding width. With block_count 1 the LLaVA graph runs no block at all (it stops at the
second-to-last layer), but the loader still wants the block's attn_out/ffn tensors. Weights are
small seeded random numbers: the projector works, yet the text-only self-test model ignores
what it sends. (The projector that sees, with `selftest:vision`, is the package's own:
pytest_frank.local.selftest_vision.)

Observed with xllamacpp 2026.10.11549: the server starts in ~0.2 s with it, /props reports
modalities vision true (video true, audio false), and an image (any size; it is resized to
28x28) adds 4 prompt tokens, one per 14x14 patch.
"""

from __future__ import annotations

import pathlib

from pytest_frank.local.selftest_model import N_EMBD as TEXT_EMBD

IMAGE = 28  # pixels a side after the fixed-size resize
PATCH = 14
EMBD = 32
FF = 64
HEADS = 4


def write_projector(path) -> pathlib.Path:
    import gguf
    import numpy as np

    path = pathlib.Path(path)
    rng = np.random.default_rng(0)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name("frank-selftest-mmproj")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_projector_type("mlp")
    w.add_clip_has_vision_encoder(True)
    w.add_vision_image_size(IMAGE)
    w.add_vision_patch_size(PATCH)
    w.add_vision_embedding_length(EMBD)
    w.add_vision_feed_forward_length(FF)
    w.add_vision_block_count(1)
    w.add_vision_head_count(HEADS)
    w.add_vision_attention_layernorm_eps(1e-6)
    w.add_vision_projection_dim(TEXT_EMBD)
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])

    n_pos = (IMAGE // PATCH) ** 2
    tensors = {  # numpy shapes: ggml's dimensions reversed
        "v.patch_embd.weight": rand(EMBD, 3, PATCH, PATCH),
        "v.patch_embd.bias": rand(EMBD),
        "v.position_embd.weight": rand(n_pos, EMBD),
        "mm.0.weight": rand(TEXT_EMBD, EMBD),
        "mm.0.bias": rand(TEXT_EMBD),
        "mm.2.weight": rand(TEXT_EMBD, TEXT_EMBD),
        "mm.2.bias": rand(TEXT_EMBD),
    }
    blk = "v.blk.0."
    for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
        tensors[blk + name + ".weight"] = rand(EMBD, EMBD)
        tensors[blk + name + ".bias"] = rand(EMBD)
    for name in ("ln1", "ln2"):
        tensors[blk + name + ".weight"] = np.ones(EMBD, dtype=np.float32)
        tensors[blk + name + ".bias"] = np.zeros(EMBD, dtype=np.float32)
    tensors[blk + "ffn_up.weight"] = rand(FF, EMBD)
    tensors[blk + "ffn_up.bias"] = rand(FF)
    tensors[blk + "ffn_down.weight"] = rand(EMBD, FF)
    tensors[blk + "ffn_down.bias"] = rand(EMBD)
    for name, data in tensors.items():
        w.add_tensor(name, data)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
