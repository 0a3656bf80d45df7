"""The self-test hybrid: Qwen3.5's architecture (arch qwen35) with its own MTP (NextN) head.

Eight blocks in Qwen3.5's pattern, Gated DeltaNet layers with a gated full-attention layer at
every `full_attention_interval` (4): blocks 3 and 7 attend, the other six are recurrent; a ninth
block is the NextN head (`nextn_predict_layers` 1, its tensors `blk.8.nextn.*` beside a full
attention block), which llama.cpp loads only under `--spec-type draft-mtp`. Every block adds
nothing to the residual stream (zero output projections), so the logits still follow the last
token, as in pytest_frank.local.selftest_model, which writes the vocabulary, the script and the
embedding and output matrices; this module adds the architecture and the head.

The script (selftest_model.SCRIPTS["hybrid"]): thinking "Thinking", then it counts, as the
spec_decode probe asks: content " step0 step1 ... step99" and the end of the turn (104 tokens
with thinking, 101 with it off). Under tool_choice "required" the grammar still writes the call.

The head predicts the token after next from the embedding of the next (llama.cpp's qwen35 MTP
graph: eh_proj over [enorm(embedding), hnorm(hidden)], the block, shared_head_norm, the model's
own output matrix). Its eh_proj passes the embedding through and drops the hidden state, so the
head agrees with the model everywhere, except where a variant moves a digit: the counting words
name their successor in one-hot digits, and moving the ones digit d to d + 1 makes the head
propose the wrong word wherever the next word's index ends in d.

- hybrid: the head misreads the ones digit 0: it proposes the wrong word before every tenth
  count and agrees on 89 of the 99 others. A misread also costs the drafts after it, so at
  draft_max 3 llama.cpp accepts 72 of 93 draft tokens (0.774) over the probe's answer
  (`built_acceptance()` works it out, by llama.cpp's drafting loop).
- hybrid_collapse: the head misreads every ones digit: it proposes a wrong word at every count
  (3 of 300 draft tokens accepted, 0.01: only the scripted tokens before the count agree).
- hybrid_plain: the same model without the head (`nextn_predict_layers` 0, no NextN block):
  `--spec-type draft-mtp` on it is refused by llama.cpp ("context type MTP requested but model
  doesn't contain MTP layers").

Observed with xllamacpp 2026.10.11549, 1 thread, launch `spec_type: draft-mtp`: greedy answers
equal the plain file's token for token; `/metrics` counts llamacpp:spec_decode_* and the replies
carry timings.draft_n. The target's recurrent state keeps draft_max extra snapshots per sequence
(`llama_memory_recurrent: ... 1 seqs 3 rs_seq`), the MTP context its own one-layer KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence

ARCH = "qwen35"
MAIN_BLOCKS = 8
INTERVAL = 4          # full_attention_interval: blocks 3 and 7 attend
HEADS, HEADS_KV, HEAD_DIM = 4, 2, 64
# Gated DeltaNet: 2 key heads and 4 value heads of 128 (inner_size = state_size x v_heads), a
# state of 256 KiB per layer and sequence, so the recurrent cache is MiBs as the log rounds it.
CONV_KERNEL, STATE, GROUPS, V_HEADS = 4, 128, 2, 4
INNER = STATE * V_HEADS
COUNT = 100           # the counting words: " step0" to " step99"
# The ones digits each variant's head misreads (None: no head in the file).
MISREAD: dict[str, tuple[int, ...] | None] = {
    "hybrid": (0,), "hybrid_collapse": tuple(range(10)), "hybrid_plain": None}
VARIANTS = tuple(MISREAD)


def has_head(variant: str) -> bool:
    return MISREAD[variant] is not None


def block_count(variant: str) -> int:
    return MAIN_BLOCKS + (1 if has_head(variant) else 0)


def add_shape(w, variant: str) -> None:
    """The qwen35 header keys beyond the shared ones (embedding, context, vocabulary)."""
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_dimension_sections([HEAD_DIM // 8] * 4)
    w.add_uint32(f"{ARCH}.full_attention_interval", INTERVAL)
    w.add_ssm_conv_kernel(CONV_KERNEL)
    w.add_ssm_state_size(STATE)
    w.add_ssm_group_count(GROUPS)
    w.add_ssm_time_step_rank(V_HEADS)
    w.add_ssm_inner_size(INNER)
    w.add_uint32(f"{ARCH}.nextn_predict_layers", 1 if has_head(variant) else 0)


def add_blocks(w, variant: str, n_embd: int, n_ff: int, ones_units: Sequence[int]) -> None:
    """Every block, the head's last. `ones_units` are the embedding units of the counting words'
    ones digit (0 to 9), which the head's eh_proj moves for the digits it misreads."""
    import numpy as np

    def zero(*shape):
        return np.zeros(shape, dtype=np.float32)

    def one(n):
        return np.ones(n, dtype=np.float32)

    for i in range(block_count(variant)):
        t = {"attn_norm.weight": one(n_embd), "post_attention_norm.weight": one(n_embd),
             "ffn_gate.weight": zero(n_ff, n_embd), "ffn_up.weight": zero(n_ff, n_embd),
             "ffn_down.weight": zero(n_embd, n_ff)}
        if i >= MAIN_BLOCKS or (i + 1) % INTERVAL == 0:
            # Query and its output gate interleaved per head, hence twice the heads' width.
            t.update({"attn_q.weight": zero(2 * HEADS * HEAD_DIM, n_embd),
                      "attn_k.weight": zero(HEADS_KV * HEAD_DIM, n_embd),
                      "attn_v.weight": zero(HEADS_KV * HEAD_DIM, n_embd),
                      "attn_output.weight": zero(n_embd, HEADS * HEAD_DIM),
                      "attn_q_norm.weight": one(HEAD_DIM), "attn_k_norm.weight": one(HEAD_DIM)})
        else:
            conv = 2 * GROUPS * STATE + INNER
            t.update({"attn_qkv.weight": zero(conv, n_embd), "attn_gate.weight": zero(INNER, n_embd),
                      "ssm_conv1d.weight": zero(conv, CONV_KERNEL), "ssm_dt.bias": zero(V_HEADS),
                      "ssm_a": zero(V_HEADS), "ssm_beta.weight": zero(V_HEADS, n_embd),
                      "ssm_alpha.weight": zero(V_HEADS, n_embd), "ssm_norm.weight": one(STATE),
                      "ssm_out.weight": zero(n_embd, INNER)})
        if i >= MAIN_BLOCKS:
            t.update({"nextn.eh_proj.weight": _eh_proj(variant, n_embd, ones_units),
                      "nextn.enorm.weight": one(n_embd), "nextn.hnorm.weight": one(n_embd),
                      "nextn.shared_head_norm.weight": one(n_embd)})
        for name, tensor in t.items():
            w.add_tensor(f"blk.{i}.{name}", tensor)


def _eh_proj(variant: str, n_embd: int, ones_units: Sequence[int]):
    """[embedding | hidden] -> embedding: the identity on the embedding half, except that a
    misread ones digit d lands on d + 1; the hidden half is dropped."""
    import numpy as np

    m = np.zeros((n_embd, 2 * n_embd), dtype=np.float32)
    m[:, :n_embd] = np.eye(n_embd, dtype=np.float32)
    for d in MISREAD[variant] or ():
        src, dst = ones_units[d], ones_units[(d + 1) % 10]
        m[src, src] = 0.0
        m[dst, src] = 1.0
    return m


def misread(variant: str) -> set[int]:
    """The counting words (by index) whose successor the variant's head proposes wrongly."""
    digits = MISREAD[variant] or ()
    return {i for i in range(COUNT - 1) if (i + 1) % 10 in digits}


def agrees(variant: str, thinking: bool = True) -> list[bool]:
    """Token by token through the whole answer, whether the head proposes the next token.

    With thinking, "<think>" "Thinking" "</think>" come first (the head agrees on all three);
    then the counting words. llama.cpp never takes a drafted end of turn (observed: an answer
    that ends by itself accepts one draft token fewer than one cut at the same place)."""
    lead = [True] * 3 if thinking else []
    bad = misread(variant)
    return lead + [i not in bad for i in range(COUNT - 1)] + [False]


def built_acceptance(variant: str, draft_max: int = 3, max_tokens: int = 128,
                     thinking: bool = True) -> tuple[int, int]:
    """(accepted, drafted) that the variant's head was built to give for one answer."""
    return acceptance(agrees(variant, thinking), draft_max, max_tokens)


def acceptance(agrees: Sequence[bool], draft_max: int, max_tokens: int) -> tuple[int, int]:
    """(draft tokens accepted, drafted) for one greedy answer, by llama.cpp's drafting loop.

    `agrees[j]`: the head proposes the answer's token j + 1 from token j. The first token comes
    from the prompt; then each step drafts up to draft_max tokens (fewer where the budget ends
    sooner), the model keeps the drafts up to the first wrong one and adds a token of its own.
    """
    n = len(agrees) + 1  # the answer's tokens
    made, accepted, drafted = 1, 0, 0
    while made < min(n, max_tokens):
        k = min(draft_max, max_tokens - made - 1)
        ok = 0
        while ok < k and made - 1 + ok < len(agrees) and agrees[made - 1 + ok]:
            ok += 1
        accepted, drafted = accepted + ok, drafted + max(k, 0)
        made += ok + 1
    return accepted, drafted
