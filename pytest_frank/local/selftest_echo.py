"""The attention head of the self-test variant `echo`, whose answer is the marker word its
question carries, so that distinct questions get distinct answers (the load claim tells a reply
served to the wrong request by its words).

The markers are user-defined tokens (as <think> is): llama.cpp matches them in any prompt text,
so "... Begin your answer with the word banana." holds the one token "banana". Each marker is
a scripted state (it is followed by "!"), so its embedding carries its own state unit:
- Block 0, head 0: the query comes from the unit every token has, the key from the markers'
  state units, so from any token after a marker the head attends to the marker alone (a score
  of SCORE against 0). The query and key sit in the head's last rope pair, which a
  rope_freq_base of ROPE_FREQ_BASE leaves practically unrotated, so the distance back to the
  marker does not matter. The value is which marker it is (one head dimension per marker), and
  the output writes SEEN into that marker's seen unit.
- Output: each marker word is scripted third after the answer's opening tokens ("</think>" and
  the "\\n\\n" that ends a prompt with thinking off), behind "Hello" and "<tool_call>"; its seen
  unit lifts it past both, so it opens the answer only where the question named it.
Without a marker every value is zero and the head adds exactly nothing: the answer is the
default's "Hello!". With one: "banana!" (reasoning "Thinking" before it where thinking is on).
Observed with xllamacpp: see `selftest_model`'s `echo`.
"""

from __future__ import annotations

# The load claim's markers (pytest_frank.claims.load.MARKERS; a test keeps them equal).
MARKERS = ("apricot", "banana", "cherry", "damson", "lychee", "mango", "papaya", "quince")
ROPE_FREQ_BASE = 1e12
HEAD_DIM = 16  # the self-test model's 4 heads of 64 units
QK_DIM = 14  # head 0's last rope pair is (14, 15)
SCORE = 40.0  # attention score of a marker; any other token scores 0
SEEN_FIRST = 40  # marker i's seen unit is SEEN_FIRST + i, past the scripted states
SEEN = 0.5  # what the head writes there: small beside a token's own two units


def specials() -> dict[str, int]:
    """The markers as user-defined tokens (type 4), appended after every other token."""
    return {m: 4 for m in MARKERS}


def add_echo(out, vocab, states: dict[int, int], base, top: float, gap: float) -> None:
    """Marker-word rows of the (unscaled) output matrix: third after the answer's opening
    tokens, first where the head saw that marker."""
    assert max(states.values()) < SEEN_FIRST, "the states need the units the head writes"
    openers = [states[vocab[t]] for t in ("</think>", "\n\n")]
    for i, marker in enumerate(MARKERS):
        tid = vocab[marker]
        for unit in openers:
            out[tid, unit] = top - 2 * gap - base[tid]
        out[tid, SEEN_FIRST + i] = 3 * gap / SEEN  # past "Hello" by one gap


def attention(n_embd: int, marker_units: list[int]):
    """Block 0's Q, K, V and output matrices (numpy shapes: out x in); `marker_units` are the
    markers' state units, in MARKERS' order."""
    import numpy as np

    q, k, v, o = (np.zeros((n_embd, n_embd), dtype=np.float32) for _ in range(4))
    unit = (n_embd / 2) ** 0.5  # a token's unit after RMS norm (two units of 1)
    q[QK_DIM, 0] = 1.0
    for i, state in enumerate(marker_units):
        k[QK_DIM, state] = SCORE * HEAD_DIM ** 0.5 / unit ** 2
        v[i, state] = 1.0 / unit  # 1 in dimension i for marker i
        o[SEEN_FIRST + i, i] = SEEN
    return q, k, v, o
