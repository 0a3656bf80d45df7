"""The attention head of the self-test variant `positional`, whose logprobs depend on where
earlier tokens stand, through RoPE, so that a rope setting or a quantized K cache moves them.

Block 0 has two heads of 32 (one q4_0/q8_0 block each, so llama.cpp accepts a quantized K
cache; the other variants' 16 are refused). Head 0 alone does anything:
- Q and K read the bias unit every token has, so before RoPE every query and key is the same
  vector; after it a score is SCORE * cos(distance * theta), theta = base ** -(2 * PAIR / 32).
  The rope frequency base sets how the head weighs the tokens behind it.
- Through a slow pair (it barely turns over a prompt) an unscripted key scores TYPE (3 less)
  than a scripted one. Beside it, in the slowest pair, where Q has nothing, K carries BALLAST:
  it adds nothing to a score but sets each cache block's scale. A quantized K cache then rounds
  TYPE the same way at every position (a q8_0 step is 2 score units, TYPE lies halfway between
  two) and the scoring pair coarsely: the weights shift as a whole, not as noise that averages
  out.
- V reads the shared state unit, which every unscripted token has: the head's output is the
  attention-weighted share of unscripted tokens behind the query, written into unit SHARE.
The output matrix turns that share into the rivals' logits (selftest_model), so the chosen
tokens' logprobs move with it while greedy keeps its answer."""

from __future__ import annotations

HEADS = 2
HEAD_DIM = 32
PAIR = 8  # the scoring rope pair: theta 0.01 at base 10000, 0.032 at base 1000
SCORE = 8.0  # the peak score: the head looks ~50 tokens back at base 10000, ~16 at 1000
TYPE_PAIR = 14  # a slow pair (theta ~3e-4): unscripted keys score TYPE through it
TYPE = -3.0
BALLAST_PAIR = 15  # the slowest pair: BALLAST sets every K block's scale, scoring nothing
BALLAST = 254.0  # in score units: a q8_0 step is 2, a q4_0 step 32
SHARE = 63  # the residual unit the head writes the share into
SHARE_SIZE = 0.25  # the most it writes: small beside a token's own two units


def attention(n_embd: int):
    """Block 0's Q, K, V and output matrices (numpy shapes: out x in)."""
    import numpy as np

    q, k, v, o = (np.zeros((n_embd, n_embd), dtype=np.float32) for _ in range(4))
    unit = (n_embd / 2) ** 0.5  # a token's unit after RMS norm
    per_score = HEAD_DIM ** 0.5 / unit ** 2  # the K weight that scores 1 against Q's 1
    q[[2 * PAIR, 2 * TYPE_PAIR], 0] = 1.0
    k[2 * PAIR, 0] = SCORE * per_score
    k[2 * TYPE_PAIR, 1] = TYPE * per_score
    k[2 * BALLAST_PAIR, 0] = BALLAST * per_score
    v[0, 1] = 1.0 / unit  # 1 for an unscripted token, 0 for a scripted one
    o[SHARE, 0] = SHARE_SIZE
    return q, k, v, o
