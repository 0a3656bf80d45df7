"""Sight for the self-test model: a projector GGUF and the weights that make `selftest:vision`
name the colour of a solid image, written by hand like the rest of the self-test models.

The path of an image, in llama.cpp's LLaVA "mlp" graph and then the text model:

- Projector: the patch conv takes each 14x14 patch's mean R, G and B (pixels normalised by the
  projector's mean 0.5 and std 0.5, so each in [-1, 1]) and a constant from its bias, the image
  marker. mm.0 adds 20 before the GELU and mm.2 takes it off again: ggml's GELU returns x
  unchanged for x >= 10, so the values pass through linearly. With one vision block declared
  the LLaVA graph runs none, so the image tokens are exactly (marker, r, g, b), one per patch.
- Attention (block 0, head 0): the query comes from the unit every text token has, the key from
  the image marker, so from any text token after an image the head attends to the image tokens
  alone (a score of ~40 against 0) and copies the marker and the mean colour into the residual.
  Without an image every value is zero and the head adds exactly nothing. The query and key sit
  in the head's last rope pair, which a rope_freq_base of 1e12 leaves practically unrotated
  (llama.cpp refuses a rope dimension count below the head size for llama).
- Output: the colour words are scripted third after the answer's opening tokens ("</think>" and
  the "\\n\\n" that ends a prompt with thinking off), behind "Hello" and "<tool_call>", and the
  copied marker lifts them past both, so they win only where an image was seen. Each colour c
  adds 2 p_c.x - |p_c|^2 for the seen colour x and its prototype p_c: the largest for the
  nearest prototype, ahead of the next by |p_c - p_next|^2 at least (1.9 for green against
  black), scaled so that is about 2 GAP of logit.

Text-only prompts get the same top tokens as the default model at every step, so text and tool
answers are the same. Observed with xllamacpp 2026.10.11549: see `selftest_model`'s `vision`.
"""

from __future__ import annotations

import pathlib

# The battery's six colours (pytest_frank.claims.vision.COLOURS; a test keeps them equal).
PALETTE = {"red": (220, 20, 20), "green": (20, 170, 40), "blue": (20, 40, 220),
           "yellow": (250, 220, 20), "black": (0, 0, 0), "white": (255, 255, 255)}
COLOUR_WORDS = tuple(PALETTE)
ROPE_FREQ_BASE = 1e12

# Projector shape: a 28x28 image in four 14x14 patches, four image tokens.
IMAGE = 28
PATCH = 14
EMBD = 32  # vision width
FF = 64
HEADS = 4
MARKER = 50.0  # the image marker: so large that an image token's RMS barely depends on colour
PASS = 20.0  # the GELU's offset: ggml's GELU is the identity from 10 on

# Text-model units the image uses (after the scripted states, which a test keeps below them).
M, R, G, B = 60, 61, 62, 63
# What the attention head leaves in the residual of every text token after an image: the marker
# and the colour, small beside the token's own two units so the text logits barely shrink.
SEEN_MARKER = 0.5
SEEN_COLOUR = 0.25
SCORE = 40.0  # attention score of an image token; a text token scores 0
QK_DIM = 14  # head 0's last rope pair is (14, 15)
HEAD_DIM = 16


def prototypes():
    """Each colour as the projector sees it: normalised RGB in [-1, 1]."""
    import numpy as np

    return {c: np.array(rgb, dtype=np.float64) / 255 * 2 - 1 for c, rgb in PALETTE.items()}


def add_sight(out, vocab, states: dict[int, int], base, top: float, gap: float) -> None:
    """Colour-word rows of the (unscaled) output matrix: third after the answer's opening
    tokens, first where an image was seen, the nearest prototype ahead of the others."""
    protos = prototypes()
    lift = 3 * gap  # the marker's lift: past "Hello" by one gap, "<tool_call>" by two
    scale = gap / 0.95  # the closest pair, green and black, are 1.9 apart: ~2 gap of logit
    openers = [states[vocab[t]] for t in ("</think>", "\n\n")]
    for colour, p in protos.items():
        tid = vocab[colour]
        for unit in openers:
            out[tid, unit] = top - 2 * gap - base[tid]
        out[tid, M] = (lift - scale * float(p @ p)) / SEEN_MARKER
        out[tid, [R, G, B]] = 2 * scale * p / SEEN_COLOUR


def attention(n_embd: int):
    """Block 0's Q, K, V and output matrices (numpy shapes: out x in)."""
    import numpy as np

    q, k, v, o = (np.zeros((n_embd, n_embd), dtype=np.float32) for _ in range(4))
    text_unit = (n_embd / 2) ** 0.5  # unit 0 of a text token after RMS norm
    image_marker = n_embd ** 0.5  # the marker of an image token after RMS norm (~all its norm)
    q[QK_DIM, 0] = 1.0
    k[QK_DIM, M] = SCORE * HEAD_DIM ** 0.5 / (text_unit * image_marker)
    # Values: the normed marker, and the colour back at its projector scale.
    colour_scale = MARKER / image_marker
    v[0, M] = 1.0
    v[1:4, [R, G, B]] = np.eye(3) * colour_scale
    o[M, 0] = SEEN_MARKER / image_marker
    o[[R, G, B], [1, 2, 3]] = SEEN_COLOUR
    return q, k, v, o


def write_projector(path, n_text_embd: int = 64) -> pathlib.Path:
    """The projector GGUF: each patch becomes (marker, mean r, g, b) in the text units M, R, G, B."""
    import numpy as np

    def zeros(*shape):
        return np.zeros(shape, dtype=np.float32)

    # Conv channel 0: the marker's 1 (bias); channels 1-3: the patch's mean of R, G, B.
    conv, conv_bias = zeros(EMBD, 3, PATCH, PATCH), zeros(EMBD)
    conv_bias[0] = 1.0
    for channel in range(3):
        conv[1 + channel, channel] = 1.0 / PATCH ** 2
    # mm.0 lifts each value by PASS into the GELU's linear range; mm.2 takes the lift off.
    mm0, mm0_bias = zeros(n_text_embd, EMBD), zeros(n_text_embd)
    mm2, mm2_bias = zeros(n_text_embd, n_text_embd), zeros(n_text_embd)
    for channel, unit in enumerate((M, R, G, B)):
        mm0[unit, channel] = MARKER if unit == M else 1.0
        mm0_bias[unit] = PASS
        mm2[unit, unit] = 1.0
        mm2_bias[unit] = -PASS
    return write_clip(path, "frank-selftest-vision-mmproj", n_text_embd, {
        "v.patch_embd.weight": conv,
        "v.patch_embd.bias": conv_bias,
        "v.position_embd.weight": zeros((IMAGE // PATCH) ** 2, EMBD),
        "mm.0.weight": mm0, "mm.0.bias": mm0_bias,
        "mm.2.weight": mm2, "mm.2.bias": mm2_bias,
    }, block=zeros)


def write_clip(path, name: str, n_text_embd: int, tensors: dict, block) -> pathlib.Path:
    """A LLaVA "mlp" projector file (llama.cpp tools/mtmd/clip.cpp): the header, the given
    patch, position and mm tensors, and one ViT block made by `block(*shape)` that the loader
    wants and the LLaVA graph never runs (it stops before the last block)."""
    import gguf
    import numpy as np

    path = pathlib.Path(path)
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name(name)
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
    w.add_vision_projection_dim(n_text_embd)
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    tensors = dict(tensors)
    blk = "v.blk.0."
    for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
        tensors[blk + part + ".weight"] = block(EMBD, EMBD)
        tensors[blk + part + ".bias"] = block(EMBD)
    for part in ("ln1", "ln2"):
        tensors[blk + part + ".weight"] = np.ones(EMBD, dtype=np.float32)
        tensors[blk + part + ".bias"] = np.zeros(EMBD, dtype=np.float32)
    tensors[blk + "ffn_up.weight"], tensors[blk + "ffn_up.bias"] = block(FF, EMBD), block(FF)
    tensors[blk + "ffn_down.weight"], tensors[blk + "ffn_down.bias"] = block(EMBD, FF), block(EMBD)
    for tensor, data in tensors.items():
        w.add_tensor(tensor, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
