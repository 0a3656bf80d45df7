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
from pytest_frank.local.selftest_vision import EMBD, IMAGE, PATCH, write_clip


def write_projector(path) -> pathlib.Path:
    import numpy as np

    rng = np.random.default_rng(0)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    n_pos = (IMAGE // PATCH) ** 2
    return write_clip(path, "frank-selftest-mmproj", TEXT_EMBD, {  # numpy shapes: ggml's reversed
        "v.patch_embd.weight": rand(EMBD, 3, PATCH, PATCH),
        "v.patch_embd.bias": rand(EMBD),
        "v.position_embd.weight": rand(n_pos, EMBD),
        "mm.0.weight": rand(TEXT_EMBD, EMBD),
        "mm.0.bias": rand(TEXT_EMBD),
        "mm.2.weight": rand(TEXT_EMBD, TEXT_EMBD),
        "mm.2.bias": rand(TEXT_EMBD),
    }, block=rand)
