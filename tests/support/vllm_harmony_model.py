"""A tiny gpt-oss model folder with a scripted harmony answer, for real vLLM servers in the tests.

Run with the vLLM environment's python (it needs numpy, safetensors and openai_harmony, all in
that environment): `python tests/support/vllm_harmony_model.py FOLDER` (or tests/support/vllm_model.py
FOLDER
--variant harmony). Writing one takes about two seconds, most of it the 201,088-token tokenizer.

vLLM serves a `gpt_oss` model through harmony: it renders the prompt itself (openai_harmony, no
chat template), always ending `<|start|>assistant`, and reads the reply's tokens with harmony's
own parser. The model writes, at any temperature:

  plain chat         <|channel|>analysis<|message|>Thinking more<|end|>
                     <|start|>assistant<|channel|>final<|message|>Hello!<|return|>
  tools offered      <|channel|>analysis<|message|>Thinking more<|end|>
                     <|start|>assistant<|channel|>commentary to=functions.get_weather
                     <|constrain|>json<|message|>{"city":"Paris","days":1}<|call|>
  after a tool result  as in plain chat

The analysis follows the level vLLM writes into the system message ("Reasoning: medium" unless
reasoning_effort asks another): "Thinking" at low, "Thinking more" at medium, "Thinking more
deeply" at high.

A bigram table (the other models of tests/support/vllm_model.py) cannot write this: "<|channel|>" comes
twice (analysis, then final or the call), "<|message|>" three ways, and the prompt with tools
ends like the one without. So the blocks are not zero here; their attention heads are set by
hand to carry four facts to the output, each one residual unit:

  THOUGHT  layer 0 (sliding window of WINDOW tokens), head 0: a word of the thinking is among
           the last few tokens, so this reply already wrote its analysis
  HEADER   layer 0, head 1: "final" (unit FINAL) or "json" (unit JSON) was just written, so the
           message that starts is the answer or the call's arguments
  TOOLS    layer 1 (full attention), head 0: "namespace" is in the prompt, which vLLM's
           developer message holds only when tools are offered
  CALLED   layer 1, head 1: "<|call|>" is in the prompt, a past call (so a result came back)
  MEDIUM, HIGH  layer 1, heads 2 and 3: " medium" or " high" is in the prompt (the level)

Each head's query is a constant (the bias), its key reads one token's unit through the slowest
rope pair (it turns by under 0.06 rad over 4,096 positions, so a key scores the same anywhere),
and its value is that token's unit too: a head attends to its token with weight ~1 where the
token is in sight, and otherwise spreads over tokens whose value is zero (the sinks are 0 and
change nothing). The output matrix adds the facts to two choices only: after "<|channel|>"
analysis, final or commentary, after "<|message|>" Thinking, Hello or the arguments, after
"Thinking" and " more" the end of the analysis or one word more. Each fact moves its rival by a
step of STEP logits against the script's TOP, so a fact decides a choice where it is on and
changes nothing anywhere else. The experts are zero (the MLP adds nothing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import vllm_model

HIDDEN = 64
HEADS = 4  # two per layer do the work; layer 0's other two read nothing
HEAD_DIM = 32  # vLLM's CPU attention accepts 32, 64, 80, ... only
WINDOW = 6  # layer 0's sliding window: "Thinking" is 4 tokens behind the second "<|channel|>"
MAX_LEN = 4096
VOCAB = 201088  # o200k_harmony, as vLLM's harmony encoding numbers it
TOP, STEP = 400.0, 40.0
SCORE = 40.0  # a head's score for its token (the rest score 0): weight ~1 among 4,096
SLOW = HEAD_DIM // 2 - 1  # the slowest rope pair (NeoX halves: dims 15 and 31 of a head)

CHANNEL, MESSAGE, END, START = 200005, 200008, 200007, 200006
RETURN, CONSTRAIN, CALL = 200002, 200003, 200012
ANALYSIS, THINKING, ASSISTANT, FINAL, HELLO, BANG = 35644, 133850, 173781, 17196, 13225, 0
JSON, NAMESPACE, BRACE = 4108, 4797, 10848
MORE, DEEPLY, MEDIUM, HIGH = 945, 29410, 14093, 1932  # " more", " deeply", " medium", " high"
# commentary to=functions.get_weather <|constrain|>json, then {"city":"Paris","days":1}: each
# token comes once, so each names the one after it
CALL_HEADER = (12606, 815, 316, 28, 44580, 775, 170154, 220, CONSTRAIN, JSON)  # "comment",
# "ary", " to", "=", "functions", ".get", "_weather", " ", <|constrain|>, "json"
CALL_ARGS = (BRACE, 17500, 7534, 72782, 4294, 20270, 1243, 16, 92)  # {" city ":" Paris ","
# days ": 1 }

PATHS = (
    (ASSISTANT, CHANNEL, ANALYSIS, MESSAGE, THINKING, END, START, ASSISTANT),
    (MORE, END), (DEEPLY, END),
    (FINAL, MESSAGE, HELLO, BANG, RETURN),
    (CALL_HEADER[-1], MESSAGE, *CALL_ARGS, CALL),
    CALL_HEADER,
)
# The units: 0 every token, 1 every token not scripted, then one per scripted token, then the
# facts the heads write.
FACTS = ("THOUGHT", "FINAL", "JSON", "TOOLS", "CALLED", "MEDIUM", "HIGH")


def _script() -> dict[int, int]:
    script: dict[int, int] = {}
    for path in PATHS:
        for token, after in zip(path, path[1:]):
            if token not in (CHANNEL, MESSAGE):
                assert script.setdefault(token, after) == after, token
    return script


def weights() -> dict:
    import numpy as np

    script = _script()
    scripted = sorted({*script, CHANNEL, MESSAGE, NAMESPACE, CALL, MEDIUM, HIGH})
    unit = {tid: 2 + n for n, tid in enumerate(scripted)}
    fact = {name: 2 + len(scripted) + n for n, name in enumerate(FACTS)}
    assert max(fact.values()) < HIDDEN
    embed = np.zeros((VOCAB, HIDDEN), dtype=np.float32)
    embed[:, 0] = 1.0
    embed[:, 1] = 1.0
    for tid, u in unit.items():
        embed[tid, 1], embed[tid, u] = 0.0, 1.0
    # The logits: the scripted successor scores TOP; anything unscripted is followed by the
    # end of the turn.
    out = np.zeros((VOCAB, HIDDEN))
    for tid, after in script.items():
        out[after, unit[tid]] = TOP
    out[RETURN, 1] = TOP
    # After "<|channel|>": analysis unless this reply thought already; then final, or the call
    # where tools are offered and none was called yet (see the table in the test of this file).
    out[ANALYSIS, unit[CHANNEL]] = TOP
    out[FINAL, unit[CHANNEL]] = TOP - STEP
    out[FINAL, fact["THOUGHT"]] = 2 * STEP
    out[CALL_HEADER[0], unit[CHANNEL]] = TOP - 5 * STEP
    out[CALL_HEADER[0], fact["THOUGHT"]] = 4 * STEP
    out[CALL_HEADER[0], fact["TOOLS"]] = 3 * STEP
    out[CALL_HEADER[0], fact["CALLED"]] = -3 * STEP
    # After "<|message|>": the thinking, unless "final" or "json" was just written.
    out[THINKING, unit[MESSAGE]] = TOP
    for word, first in (("FINAL", HELLO), ("JSON", BRACE)):
        out[first, unit[MESSAGE]] = TOP - STEP
        out[first, fact[word]] = 2 * STEP
    # The level's thinking: " more" at medium and high, " deeply" after it at high.
    out[MORE, unit[THINKING]] = TOP - STEP
    out[MORE, fact["MEDIUM"]] = out[MORE, fact["HIGH"]] = 2 * STEP
    out[DEEPLY, unit[MORE]] = TOP - STEP
    out[DEEPLY, fact["HIGH"]] = 2 * STEP
    # A token's two units read sqrt(HIDDEN / 2) after the final RMS norm (a little less where
    # facts are on: all logits of a position shrink alike, so no choice changes).
    scale = (HIDDEN / 2) ** 0.5
    tensors = {"model.embed_tokens.weight": embed, "model.norm.weight": np.ones(HIDDEN),
               "lm_head.weight": out / scale}
    # Each head: the tokens it attends to, and the fact each writes (the thinking's last word,
    # whichever it is, is within the window of the second "<|channel|>").
    thought = {THINKING: "THOUGHT", MORE: "THOUGHT", DEEPLY: "THOUGHT"}
    heads = {0: (thought, {FINAL: "FINAL", JSON: "JSON"}),
             1: ({NAMESPACE: "TOOLS"}, {CALL: "CALLED"}, {MEDIUM: "MEDIUM"}, {HIGH: "HIGH"})}
    # A score of SCORE from q = 1 against k = weight * unit (scaled by head_dim ** -0.5).
    key_weight = SCORE * HEAD_DIM ** 0.5 / scale
    for layer, layer_heads in heads.items():
        p = f"model.layers.{layer}."
        width = HEADS * HEAD_DIM
        q_bias = np.zeros(width)
        k = np.zeros((width, HIDDEN))
        v = np.zeros((width, HIDDEN))
        o = np.zeros((HIDDEN, width))
        for h, values in enumerate(layer_heads):
            base = h * HEAD_DIM
            q_bias[base + SLOW] = 1.0
            names = list(dict.fromkeys(values.values()))  # one value unit per fact
            for tid, name in values.items():
                k[base + SLOW, unit[tid]] = key_weight
                v[base + names.index(name), unit[tid]] = 1.0 / scale
                o[fact[name], base + names.index(name)] = 1.0
        tensors.update({
            p + "self_attn.q_proj.weight": np.zeros((width, HIDDEN)),
            p + "self_attn.q_proj.bias": q_bias,
            p + "self_attn.k_proj.weight": k, p + "self_attn.k_proj.bias": np.zeros(width),
            p + "self_attn.v_proj.weight": v, p + "self_attn.v_proj.bias": np.zeros(width),
            p + "self_attn.o_proj.weight": o, p + "self_attn.o_proj.bias": np.zeros(HIDDEN),
            p + "self_attn.sinks": np.zeros(HEADS),
            p + "input_layernorm.weight": np.ones(HIDDEN),
            p + "post_attention_layernorm.weight": np.ones(HIDDEN),
            # one expert, all zero: the MLP adds nothing
            p + "mlp.router.weight": np.zeros((1, HIDDEN)), p + "mlp.router.bias": np.zeros(1),
            p + "mlp.experts.gate_up_proj": np.zeros((1, HIDDEN, 2 * HIDDEN)),
            p + "mlp.experts.gate_up_proj_bias": np.zeros((1, 2 * HIDDEN)),
            p + "mlp.experts.down_proj": np.zeros((1, HIDDEN, HIDDEN)),
            p + "mlp.experts.down_proj_bias": np.zeros((1, HIDDEN)),
        })
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}


def tokenizer_json() -> dict:
    """o200k_harmony as a byte-level BPE vocabulary for vLLM's detokenizer (harmony parses the
    reply from token ids; this only spells text). No merges: text encodes byte by byte. Tokens
    that are no whole UTF-8 text get a placeholder name."""
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    first_special = 199998
    # the single bytes come first, in GPT-2's byte order (printable ones first)
    byte_order = sorted(range(256), key=lambda b: (vllm_model.BYTES[b] != chr(b), b))
    vocab: dict[str, int] = {}
    for i in range(first_special):
        if i < 256:
            text = vllm_model.BYTES[byte_order[i]]
        else:
            try:
                text = vllm_model._spell(enc.decode_utf8([i]))
            except Exception:
                text = f"<|byte_piece_{i}|>"
        vocab.setdefault(text, i)
    added = [(i, enc.decode([i]), True) for i in range(first_special, VOCAB)]
    return vllm_model.byte_level_bpe(vocab, added, [])


def write(folder) -> Path:
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
              "hidden_size": HIDDEN, "intermediate_size": HIDDEN, "num_hidden_layers": 2,
              "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "head_dim": HEAD_DIM,
              "num_local_experts": 1, "num_experts_per_tok": 1, "experts_per_token": 1,
              "sliding_window": WINDOW, "layer_types": ["sliding_attention", "full_attention"],
              "max_position_embeddings": MAX_LEN, "rms_norm_eps": 1e-5,
              "rope_theta": 150000.0,
              # factor 1: plain RoPE (yarn changes nothing and scales no attention)
              "rope_scaling": {"rope_type": "yarn", "factor": 1.0, "beta_fast": 32.0,
                               "beta_slow": 1.0, "truncate": False,
                               "original_max_position_embeddings": MAX_LEN},
              "attention_bias": True, "swiglu_limit": 7.0, "vocab_size": VOCAB,
              "tie_word_embeddings": False, "torch_dtype": "float32", "hidden_act": "silu",
              "bos_token_id": 199998, "eos_token_id": RETURN, "pad_token_id": 199999}
    files = {
        "config.json": config,
        "generation_config.json": {"eos_token_id": [RETURN, CALL], "pad_token_id": 199999},
        "tokenizer.json": tokenizer_json(),
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast",
                                  "eos_token": "<|return|>", "pad_token": "<|endoftext|>",
                                  "bos_token": "<|startoftext|>", "add_bos_token": False,
                                  "model_max_length": MAX_LEN,
                                  "clean_up_tokenization_spaces": False},
    }
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data, ensure_ascii=False))
    save_file(weights(), str(folder / "model.safetensors"))
    return folder


if __name__ == "__main__":
    print(write(sys.argv[1]))
