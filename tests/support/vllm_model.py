"""Tiny Hugging Face model folders with scripted answers, for real vLLM servers in the tests.

Run with the vLLM environment's python (it needs numpy and safetensors, nothing else):
`python tests/support/vllm_model.py FOLDER [--variant sharp|flat|chatty|long_think|qwen3_xml|harmony]`
(harmony: a gpt-oss model whose attention is set by hand, written by
tests/support/vllm_harmony_model.py).
Writing one takes well under a second.

Like the self-test GGUF (pytest_frank/local/selftest_model.py), the model is a bigram table: a Llama
with zero blocks, so the logits depend only on the last token. The embedding gives each scripted
token its own unit; the output matrix maps that unit to the next scripted token. Under a grammar
(vLLM's tool_choice "required" and named tools) the script's token is not allowed, and a global
ranking takes over: close and end as soon as allowed, keys and strings spelled by the grammar.

Replies (ChatML template, Qwen3/Hermes style; "<|im_end|>" ends a turn):
  plain chat                "<think>Thinking</think>Hello!"   (qwen3 parser: reasoning, content)
  enable_thinking false     "Hello!"   (the template closes an empty think block)
  tools offered, no grammar '<tool_call>\\n{"name": "get_weather", "arguments": {"city":
                            "Paris", "days": 1}}\\n</tool_call>'   (the hermes format)
  tool_choice "required"    '[{"name":"get_weather","parameters":{"city":"Paris","days":1}}]'
  named get_time            '{"timezone":"Paris"}'
The template ends the generation prompt with a cue token when tools are offered and no tool
result came last: a bigram model cannot otherwise tell that a tool call is wanted (after a result,
it answers as in plain chat). That is the one liberty taken with a real
template; everything vLLM does with the reply (parsers, grammars, streaming) is its own.

Variants: "sharp" follows the script at any temperature (logit gaps of 400). "flat" has the same
greedy answers, but gaps so small that sampling at temperature 1 wanders off the script.
"long_think" thinks like an R1-style distill before it answers: reasoning " step0 step1 ...
step999" (a thousand words, each its own token), then "Hello!", 1,005 tokens in all; thinking
off, "Hello!" at once. A bigram table cannot count, so each word is its own token and names its
successor in three one-hot base-10 digits (30 units): the chain fits in the same 64 units, and
the folder (912 KB) is written in about 0.4 s. Observed on vLLM 0.32.0 with --reasoning-parser
qwen3: max_tokens 512 ends with finish_reason "length", content null, reasoning up to " step510"
and usage.completion_tokens_details.reasoning_tokens 511 (plain and streamed alike); a budget
that fits gives reasoning_tokens 1000, content "Hello!", finish "stop". Its tool calls are
the qwen3_xml variant's, under that variant's template (the same prompt where no tools are
offered).

"qwen3_xml" writes its calls in the Qwen3.5 / Qwen3-Coder XML format, under a template written
here in that family's documented format (the tools in <tools>, the call format spelled out,
past calls rendered as XML); plain chat, thinking off and the answer after a tool result are
as above:
  tools offered             '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n
                            </parameter>\n<parameter=days>\n1\n</parameter>\n</function>\n
                            </tool_call>'   (vLLM's qwen3_xml and qwen3_coder parsers)
  the tool "typed" first    the same format, one value of each JSON type (TYPED_CALL)
The get_weather call's pieces are tokens of their own, so a stream carries it in several
deltas, and they spell what vLLM's Qwen XML structural tag (tool_choice "required" and named)
allows, so that grammar lets the script through. A bigram model cannot read which tool it is
offered: the template's cue is a second token where the first tool offered is "typed". That
call is one token, "<tool_call>" inside it as text, so it is read whole only: vLLM's streaming
parser knows <tool_call> by its token id and streams such text as reasoning.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HIDDEN = 64
HEADS = 2  # head size 32: vLLM's CPU attention accepts 32, 64, 80, ... only
LAYERS = 2
MAX_LEN = 4096  # tool prompts are long: the tokenizer spells most text byte by byte

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Plain-text added tokens: vLLM's hermes tool parser and qwen3 reasoning parser look these up.
MARKERS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|tool_cue|>")
CALL = '\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}\n'
WORDS = ("Hello", "Thinking", "Paris", CALL)
JSON_CHUNKS = ("}}", '{"', ',"', "name", "parameters")

SCRIPT = {
    "\n": ["<think>"],          # the generation prompt ends "<|im_start|>assistant\n"
    "\n\n": ["Hello"],          # ... or "<think>\n\n</think>\n\n" with thinking off
    "<think>": ["Thinking"],
    "Thinking": ["</think>"],
    "</think>": ["Hello"],
    "Hello": ["!"],
    "!": ["<|im_end|>"],
    "<|tool_cue|>": ["<tool_call>"],
    "<tool_call>": [CALL],
    CALL: ["</tool_call>"],
    "</tool_call>": ["<|im_end|>"],
    # Under a grammar: a string gets one word, then closes.
    '"': ["Paris"], '{"': ["Paris"], ',"': ["Paris"], "Paris": ['"'],
}
# Under a grammar the best allowed token wins: end, close, then what JSON needs next; whitespace
# last, so constrained replies are short and finite.
RANKING = (
    ["<|im_end|>", "}}", '"', "}", "]", ',"', ",", ":", '{"', "{", "[", "1", "2", "0", "-", ".",
     "name", "parameters"]
    + list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ3456789_")
    + [chr(c) for c in range(33, 127)] + [" ", "\n", "\t"]
)
GAPS = {"sharp": (400.0, 40.0), "flat": (6.0, 0.01), "chatty": (400.0, 40.0)}  # (scripted logit,
# step between ranks). chatty is sharp but never done: "Hello!" again until max_tokens, so a
# drafter has a long answer of the model's own accord to draft.
SCRIPTS = {"sharp": SCRIPT, "flat": SCRIPT, "chatty": {**SCRIPT, "!": ["Hello"]}}
# The long thinker's thinking: distinct words, since the next token depends on the last alone.
CHAIN_WORDS = tuple(f" step{i}" for i in range(1000))
CHAIN_DIGITS = 3
CHAINS = ("long_think",)
# The Qwen XML call, in the pieces the bigram chains: each piece is its own token, followed by
# one piece only; "Paris" and "1" stay inside them, so under a JSON grammar (another parser's)
# the sharp model's script still spells its strings.
XML_PIECES = ("\n<function=get_weather>\n", "<parameter=city>\nParis\n</parameter>\n",
              "<parameter=days>\n1\n</parameter>\n", "</function>\n")
# One value of each JSON type, for the parser to type by the tool's schema.
TYPED_CALL = ("<tool_call>\n<function=typed>\n"
              + "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in (
                  ("zip", "02134"), ("n", "7"), ("x", "2.5"), ("flag", "true"),
                  ("tags", '["a", "b"]'), ("opts", '{"k": "v"}'), ("nothing", "null")))
              + "</function>\n</tool_call>")
XML_WORDS = (*XML_PIECES, TYPED_CALL)
XML_MARKERS = ("<|typed_cue|>",)
XML_SCRIPT = {
    "<tool_call>": [XML_PIECES[0]],
    **{piece: [after] for piece, after in zip(XML_PIECES, XML_PIECES[1:])},
    XML_PIECES[-1]: ["</tool_call>"], "<|typed_cue|>": [TYPED_CALL], TYPED_CALL: ["<|im_end|>"]}
SCRIPTS["qwen3_xml"] = {**SCRIPT, **XML_SCRIPT}
# The long thinker calls in the XML format too (tests/support/vllm_server.py serves it under hermes, the
# wrong parser for it: its reasoning tests ask no tools). Only the chain's first and last words
# are scripted; the digits drive the rest.
SCRIPTS["long_think"] = {**SCRIPT, **XML_SCRIPT, "<think>": [CHAIN_WORDS[0]],
                         CHAIN_WORDS[-1]: ["</think>"]}
XML_VARIANTS = ("qwen3_xml", "long_think")
GAPS["qwen3_xml"] = GAPS["long_think"] = GAPS["sharp"]


def _byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode table, as byte-level BPE vocabularies spell bytes."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra, table = 0, []
    for b in range(256):
        table.append(chr(b) if b in keep else chr(256 + extra))
        extra += b not in keep
    return table


BYTES = _byte_chars()


def _spell(text: str) -> str:
    return "".join(BYTES[b] for b in text.encode())


class Vocab:
    def __init__(self, extra: tuple[str, ...] = (), markers: tuple[str, ...] = ()) -> None:
        words = WORDS + JSON_CHUNKS + extra
        self.bpe = list(BYTES) + [_spell("\n\n")] + [_spell(w) for w in words]
        self.added = list(SPECIAL + MARKERS + markers)
        texts = [bytes([i]).decode("latin-1") if i < 256 else None for i in range(256)]
        texts += ["\n\n", *words, *self.added]
        self.ids = {}
        for i, text in enumerate(texts):
            if i < 256 and i >= 128:
                continue  # a lone high byte is no text
            self.ids.setdefault(text, i)

    def __len__(self) -> int:
        return len(self.bpe) + len(self.added)

    def __getitem__(self, text: str) -> int:
        return self.ids[text]


def weights(vocab: Vocab, variant: str) -> dict:
    import numpy as np

    top, gap = GAPS[variant]
    script = {vocab[k]: [vocab[t] for t in v] for k, v in SCRIPTS[variant].items()}
    unit = {tid: 2 + n for n, tid in enumerate(sorted(script))}  # 0: bias, 1: every other token
    n = len(vocab)
    chain = _chain(vocab, variant, script)
    embed = np.zeros((n, HIDDEN), dtype=np.float32)
    embed[:, 0] = 1.0
    for tid in range(n):
        if tid not in chain:
            embed[tid, unit.get(tid, 1)] = 1.0
    order = list(dict.fromkeys(vocab[t] for t in RANKING))
    order += [i for i in range(n) if i not in order]
    base = np.zeros(n)
    base[order] = -gap * np.arange(n)
    out = np.zeros((n, HIDDEN))
    out[:, 0] = base
    for tid, prefs in script.items():
        for i, nxt in enumerate(prefs):
            out[nxt, unit[tid]] = top - gap * i - base[nxt]
    _write_chain(chain, 2 + len(script), embed, out, base, top)
    # Zero blocks and RMS norm leave the final state at embedding * sqrt(HIDDEN / 2).
    tensors = {"model.embed_tokens.weight": embed, "model.norm.weight": np.ones(HIDDEN),
               "lm_head.weight": out / (HIDDEN / 2) ** 0.5}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = np.ones(HIDDEN)
        tensors[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN)
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            tensors[p + name + ".weight"] = np.zeros((HIDDEN, HIDDEN))
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}


def _chain(vocab: Vocab, variant: str, script: dict) -> dict[int, int]:
    """Chain word id -> the id of the word after it, for the words the digits drive (the last
    word is scripted: its own unit leads to "</think>")."""
    if variant not in CHAINS:
        return {}
    ids = [vocab[w] for w in CHAIN_WORDS]
    return {tid: nxt for tid, nxt in zip(ids, ids[1:]) if tid not in script}


def _write_chain(chain: dict[int, int], first_unit: int, embed, out, base, top: float) -> None:
    """Each chain word's embedding holds its successor's digits; each word's output row matches
    its own. Only the successor matches all three (3 * top); one sharing digits reaches 2 * top
    at most, any other token stays under 0. The unit 1/sqrt(CHAIN_DIGITS) keeps a row's squared
    norm at 2, like every other row, so the final RMS norm scales all rows alike."""
    if not chain:
        return
    unit = CHAIN_DIGITS ** -0.5
    assert first_unit + 10 * CHAIN_DIGITS <= HIDDEN, "the chain's digits need a larger HIDDEN"
    words = sorted(set(chain) | set(chain.values()))
    index = {tid: n for n, tid in enumerate(words)}

    def units(tid: int) -> list[int]:
        n = index[tid]
        return [first_unit + 10 * d + (n // 10 ** d) % 10 for d in range(CHAIN_DIGITS)]

    for tid, nxt in chain.items():
        embed[tid, units(nxt)] = unit
    for tid in words:
        first, *rest = units(tid)
        out[tid, first] = (top - base[tid]) / unit  # cancels the word's low global rank
        out[tid, rest] = top / unit


def _chatml(tools_text: str, call: str, cue: str) -> str:
    """A ChatML template (Qwen3 style, "<|im_end|>" ends a turn) around a family's parts: how
    the system turn presents the tools, how a past call is written, and the cue after the
    generation prompt when tools are offered and no tool result came last."""
    return """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
""" + tools_text + """\
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{%- set text = message.content if message.content is string
    else message.content | map(attribute='text') | select | join('') %}
{{- '<|im_start|>' + message.role + '\\n' + text + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\\n' }}
{%- if message.content is string %}{{- message.content }}{%- endif %}
{%- for tool_call in message.tool_calls or [] %}
{%- set call = tool_call.function if tool_call.function is defined else tool_call %}
""" + call + """\
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- if tools and messages[-1].role != 'tool' %}""" + cue + """
{%- elif enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}
{%- endif %}
{%- endif %}
"""


# Qwen3 / Hermes: the tools as JSON in <tools>, a call as JSON inside <tool_call>.
TEMPLATE = _chatml("""\
{{- '# Tools\\n\\nYou are provided with function signatures within <tools></tools> XML ' }}
{{- 'tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and ' }}
{{- 'arguments within <tool_call></tool_call> XML tags.<|im_end|>\\n' }}
""", """\
{{- '<tool_call>\\n{"name": "' + call.name + '", "arguments": ' }}
{{- call.arguments if call.arguments is string else call.arguments | tojson }}
{{- '}\\n</tool_call>' }}
""", "{{- '<|tool_cue|>' }}")

# The Qwen3.5 / Qwen3-Coder XML family's format, written here from its documentation: the tools
# as JSON inside <tools>, the call format spelled out, a past call as <function=NAME> with one
# <parameter=KEY> block per argument (vLLM hands the template the arguments as a mapping). The
# cue is this file's liberty, as above, with a second one for the tool "typed".
XML_TEMPLATE = _chatml("""\
{{- '# Tools\\n\\nYou have access to the following functions:\\n\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools>\\n\\nTo call a function, reply in this format and nothing after it:\\n\\n' }}
{{- '<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter>\\n' }}
{{- 'value\\n</parameter>\\n</function>\\n</tool_call>\\n\\nA value may span several lines; ' }}
{{- 'arrays and objects are written as JSON.<|im_end|>\\n' }}
""", """\
{{- '<tool_call>\\n<function=' + call.name + '>\\n' }}
{%- if call.arguments is mapping %}
{%- for key, value in call.arguments.items() %}
{{- '<parameter=' + key + '>\\n' }}
{{- value if value is string else value | tojson }}
{{- '\\n</parameter>\\n' }}
{%- endfor %}
{%- endif %}
{{- '</function>\\n</tool_call>' }}
""", """
{{- '<|typed_cue|>' if (tools[0].function or tools[0]).name == 'typed' else '<|tool_cue|>' }}""")


def tokenizer_json(vocab: Vocab) -> dict:
    added = [(len(vocab.bpe) + i, text, text in SPECIAL) for i, text in enumerate(vocab.added)]
    return byte_level_bpe({t: i for i, t in enumerate(vocab.bpe)}, added,
                          [f"{BYTES[10]} {BYTES[10]}"])


def byte_level_bpe(vocab: dict[str, int], added: list[tuple[int, str, bool]],
                   merges: list[str]) -> dict:
    """A tokenizer.json: byte-level BPE over `vocab` (spelled in BYTES), with `added` tokens
    (id, text, special)."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": text, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": special}
                             for i, text, special in added],
            "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
            "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}


def write(folder, variant: str = "sharp") -> Path:
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    xml = variant in XML_VARIANTS
    vocab = Vocab((CHAIN_WORDS if variant in CHAINS else ()) + (XML_WORDS if xml else ()),
                  XML_MARKERS if xml else ())
    end, pad = vocab["<|im_end|>"], vocab["<|endoftext|>"]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": HIDDEN, "intermediate_size": HIDDEN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
              "head_dim": HIDDEN // HEADS, "max_position_embeddings": MAX_LEN,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": len(vocab),
              "tie_word_embeddings": False, "torch_dtype": "float32", "hidden_act": "silu",
              "bos_token_id": pad, "eos_token_id": end, "pad_token_id": pad}
    files = {
        "config.json": config,
        "generation_config.json": {"eos_token_id": end, "pad_token_id": pad},
        "tokenizer.json": tokenizer_json(vocab),
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast",
                                  "chat_template": XML_TEMPLATE if xml else TEMPLATE,
                                  "eos_token": "<|im_end|>",
                                  "pad_token": "<|endoftext|>", "bos_token": None,
                                  "add_bos_token": False, "model_max_length": MAX_LEN,
                                  "clean_up_tokenization_spaces": False},
    }
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data, indent=1, ensure_ascii=False))
    save_file(weights(vocab, variant), str(folder / "model.safetensors"))
    return folder


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    # harmony: a gpt-oss model with hand-set attention, tests/support/vllm_harmony_model.py
    parser.add_argument("--variant", choices=[*sorted(GAPS), "harmony"], default="sharp")
    args = parser.parse_args()
    if args.variant == "harmony":
        import vllm_harmony_model

        print(vllm_harmony_model.write(args.folder))
    else:
        print(write(args.folder, args.variant))
    sys.exit(0)
