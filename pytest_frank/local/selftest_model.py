"""A tiny deterministic GGUF chat model, so frank can be tested against a real llama.cpp server.

The file (arch `llama`, 2 zero blocks, embedding 64, ~275 tokens, ~370 KB, written in ~0.1 s)
loads in llama.cpp in a few ms. Its blocks add nothing, so the logits depend only on the last
token: the embedding and output matrices script a greedy chain, with logit gaps so wide that the
server's default sampling (temperature 0.8) picks the same tokens as temperature 0. Under a
grammar (tool_choice "required", response_format) a global ranking takes over: end the turn as
soon as allowed, else open a tool call; strings read "Paris", integers 1, booleans false, arrays
and objects close as soon as they may.

Observed with xllamacpp 2026.10.11549 (llama.cpp server code; its template "autoparser" sees the
Qwen3/Hermes format: per-call "<tool_call>\\n", JSON with "name" and "arguments", reasoning
<think>...</think>), default sampling, a user message "Hi":

default
  plain chat: 200, content "Hello!", reasoning_content "Thinking", finish "stop", 6 tokens.
  chat_template_kwargs {"enable_thinking": false}: content "Hello!", no reasoning_content, 3
  tokens (the prompt ends "<think>\\n\\n</think>\\n\\n"; "\\n\\n" is one token leading to
  "Hello"). {"enable_thinking": "false"} (a string): 400 'invalid type for "enable_thinking"
  (expected boolean, got string)'.
  reasoning_effort: any value gives 200 as above, except "none", which turns thinking off.
  reasoning_format "none" (server or request): content "<think>Thinking</think>Hello!".
  tools + tool_choice "auto" or "none": as plain chat, finish "stop", no tool_calls.
  tools + tool_choice "required", with get_weather(city: string, days: integer, both required):
  content "Hello!", reasoning_content "Thinking", tool_calls [{"type": "function", "id": <random>,
  "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":1}"}}],
  finish "tool_calls", 49 completion tokens (46 with thinking off): give such requests
  max_tokens >= 64. A tool with no parameters gets "{}"; the first of several tools is called.
  response_format json_schema {answer: string, n: integer}: content '{"answer":"Paris","n":1}',
  finish "stop"; json_object: '{"Paris":"Paris"}'.
  Streaming gives the same fields as deltas (tool call arguments arrive in fragments).
  /v1/messages works too: thinking block "Thinking", text "Hello!", stop_reason "end_turn"
  (tool_choice {"type": "any"}: a tool_use block with input {"city": "Paris", "days": 1}).
  /props chat_template_caps: supports_tools, supports_tool_calls, supports_parallel_tool_calls,
  supports_preserve_reasoning true; supports_reasoning_effort false.
tool_text
  Writes the tool call as text, in a format the Qwen3/Hermes parser does not know: with tools and
  tool_choice "auto" (or no tools): 200,
  content '<function=get_weather>{"city": "Paris"}</function>', reasoning_content "Thinking",
  NO tool_calls, finish "stop". Under "required" the grammar still forces a real call after that
  text. (Writing "<tool_call>\\n{...}\\n</tool_call>" as one plain token instead makes the
  server fail with 500 "got exception: Unexpected empty grammar stack after accepting piece:
  <tool_call>..." once tools are sent, because the lazy tool grammar triggers on the text;
  streaming then ends with an SSE error event and no [DONE].)
effort_strict
  As default, but its template raises for reasoning_effort "high" or "max": HTTP 400 (not 500:
  the exception surfaces while llama.cpp builds the output parser for the request),
  {"error": {"code": 400, "type": "invalid_request_error", "message": "Unable to generate parser
  for this template. Automatic parser generation failed: \\n------------\\nWhile executing
  CallExpression at line 2, column 20 in source: ... Error: Jinja Exception: Unexpected reasoning
  effort high. Supported types are xhigh, medium, and low"}}. "low", "medium", "xhigh",
  "minimal" and "none" give 200. With "stream": true the same 400 JSON comes back (no SSE), and
  chat_template_kwargs {"reasoning_effort": "high"} fails the same way. /props reports
  supports_reasoning_effort true. llama.cpp hands the request's reasoning_effort to the template
  as the variable `reasoning_effort`.
no_think
  No thinking anywhere in the template or the model: content "Hello!", no reasoning_content,
  finish "stop" (also with enable_thinking false); tool_choice "required" still gives the call.
flat
  Not peaked, so it shows what sampling does to the battery. Greedy (temperature 0) it answers
  like default: reasoning "Thinking", content "Hello!", and under tool_choice "required"
  get_weather {"city": "Paris", "days": 1}, the same plain and streamed. At the server's default
  sampling (temperature 0.8, top_p 0.95, min_p 0.05) each reply is a fresh draw: reasoning
  "Thinking" or "Hmm", sometimes followed by " more"; content "Hello" or "Hi", then maybe
  " there", "!", " How can I help?". Over 200 seeded requests 28% of the answers were one word
  ("Hello", "Hi"), 6.8 completion tokens on average, every one with reasoning and content and
  finish "stop". Under "required": get_weather 79 and get_time 21 of 100, arguments Paris or
  London, days 1 or 2, always valid. As its own draft model (draft_max 3), 128 tokens with
  ignore_eos: acceptance 0.66 greedy (past the natural end the draft proposes the end token the
  target may not take), 0.43-0.56 sampled. Of its own accord, greedy, it writes 6 tokens and 3
  of its 6 draft tokens are accepted: the draft runs past the end token and those are dropped.
chatty
  As default, but the answer never ends by itself: reasoning "Thinking", then content
  "Hello!Hello!..." until max_tokens (finish "length"). As its own draft model it drafts for the
  whole answer, so spec_decode has hundreds of draft tokens to measure without ignore_eos.
long_think
  Thinks long, like an R1-style distill, then answers briefly (1,275 tokens, ~0.9 MB, written in
  ~0.4 s). Plain chat: reasoning_content " step0 step1 ... step999" (1,000 words, each its own
  token), content "Hello!", finish "stop", 1005 completion tokens; the same at temperature 0.8
  and at 1.5: the chain's gaps are as wide as the others'. With max_tokens 512: finish "length",
  no content, reasoning up to " step510". enable_thinking false or reasoning_effort "none":
  "Hello!" at once, 3 tokens. tool_choice "required": the same thousand words, content "Hello!",
  the get_weather call, finish "tool_calls", 1048 tokens (46 with thinking off); "auto": as plain
  chat. /v1/messages: a thinking block of the thousand words, text "Hello!", stop_reason
  "end_turn", 1005 output tokens. On a shared 2-core box the thousand tokens take 1 to 15 s, a
  required tool call up to a minute (the tool grammar runs over the whole thinking).
endless_think
  Never closes its thinking: the same thousand words, round and round, until max_tokens (finish
  "length", reasoning only, no content); thinking off still answers "Hello!" at once.
agent
  As default, but under tool_choice "auto" it calls a tool, as agent models do: after the
  thinking, "<tool_call>" (llama.cpp's lazy grammar then writes the call). Its template opens the
  answer with a blank line when a role tool message came last, so the prompt ends in the "\\n\\n"
  token, after which it answers "Hello!" (no thinking), finish "stop". Observed on the agent
  claim: turn 1 (tool_choice "required") get_time {"timezone": "Paris"}, reasoning "Thinking";
  turn 2 with the role tool result and "auto": content "Hello!", finish "stop"; the same
  streamed and through /v1/messages (thinking block echoed with its empty signature). Without a
  rendered result (a template that drops role tool) turn 2 calls get_time again. One call only
  where two are asked at once.
vision
  Sees, with the self-test projector (projector_path(), launch `mmproj: selftest`; how:
  pytest_frank.local.selftest_vision). Text and tools as default, token for token (block 0's
  attention head adds exactly nothing without an image). Shown a solid red, green, blue, yellow,
  black or white image (the vision claim's colours; a data URL, bare base64 or an Anthropic image
  block; 4 image tokens): reasoning "Thinking", content the colour's word ("red"), finish "stop",
  5 tokens; with thinking off the word at once. The right word leads the next token by 72 logits
  at the least (black against green; llama.cpp's top_logprobs), by 97 or more for the others
  (past ~104 it reports the float minimum). Under tool_choice "required" with an image: the
  get_weather call. Without the projector llama.cpp refuses images; default with the projector
  answers "Hello!" whatever the image. Model ~380 KB, projector ~140 KB, each written in
  ~15 ms; the server starts in ~0.1 s.
positional
  Reads positions (pytest_frank.local.selftest_positional): greedy it answers as default, but
  each answer token leads a rival by a margin (0.5 to 3.5) that attention over the earlier
  tokens sets, through RoPE, so the logprobs depend on the prompt's layout. Two heads of 32, so
  a q8_0 or q4_0 K cache loads. With thinking off, the fingerprint claim's prompts (ctx_size
  2048, 1 thread): "Hello", "!" at logprobs -0.045/-0.043 (short), -0.052/-0.049 (multi-turn),
  -0.140/-0.125 (long); a relaunch repeats them exactly. The mean change over the answer's
  tokens, on the prompt that moves most: rope_freq_base 1000 0.32 (long), cache_type_k q4_0
  0.34, q8_0 0.10 (long); 4 threads instead of 1 0.0002.
echo
  Answers with the marker word its question carries (pytest_frank.local.selftest_echo): the
  load claim's markers (apricot, banana, cherry, damson, lychee, mango, papaya, quince) are
  user-defined tokens, so llama.cpp reads each as one token wherever a prompt holds it, and one
  attention head carries it to the answer. "Say hello. Begin your answer with the word banana.":
  reasoning "Thinking", content "banana!", finish "stop"; thinking off, "banana!" at once; under
  tool_choice "required" content "banana!" and the get_weather call. A question without a marker
  is answered "Hello!" (the head adds exactly nothing). Distinct questions, distinct answers, at
  --parallel 4 with requests in flight together too (tests/claims/perf/test_load_real.py).
swa
  Gemma 3's architecture (arch gemma3; 6 blocks of 2 heads x 64, ~1.2 MB): plain chat as default
  ("Thinking", "Hello!"). llama.cpp reads is_swa_any 1, n_swa 512 and makes two caches
  (llama_kv_cache_iswa), logged at verbosity 4: ctx 4096, 1 slot: non-SWA 4096 cells x 1 layer
  (2.00 MiB) + SWA 1024 cells x 5 layers (2.50 MiB); 2 slots: 2048 cells x 2 streams (2.00 MiB)
  + 1024 cells x 2 streams (5.00 MiB); 2 slots unified: 4096 + 1536 cells (2.00 + 3.75 MiB); ctx
  1000 over 3 slots: 512 + 512 cells x 3 streams (0.75 + 3.75 MiB).
qwen3_xml
  The Qwen3.5 / Qwen3-Coder XML family: its template lists the tools in XML in the system
  prompt, explains the call format and renders past calls as <tool_call>\n<function=NAME>\n
  <parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call> and results as
  <tool_response> in a user turn. The template carries "<tool_call>", "<function=" and
  "<parameter=", so llama.cpp takes its Qwen3-Coder handler (at launch verbosity 5 its log
  says "Using specialized template: Qwen3-Coder" at the first request with tools; /props
  chat_template_caps reads as the default's: supports_tool_calls and
  supports_parallel_tool_calls true). Plain chat and "auto" answer as default. Under "required"
  the model writes (greedy, its tokens per logprobs) "<think>Thinking</think>Hello!<tool_call>\n
  <function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n1\n
  </parameter>\n</function>\n</tool_call>", 39 tokens, and tool_calls carries
  {"city":"Paris","days":1}; streamed the same. Values arrive typed: integer 1, number 1, false,
  ["Paris"], {"k": "Paris"}, null; a parameter named job opens with one token ("job>\n") and
  reads "02134", which stays the string "02134" where the schema types it a string. The
  grammar leaves a string with an enum, or a ["string", "null"] with a pattern, as free text
  (the model writes "Paris"); a plain string's pattern holds. Two calls where two cities are
  asked at once (below). Under a Hermes JSON template (launch chat_template_file) the lazy grammar after
  <tool_call> forces JSON, and the call is valid.
qwen3_xml_text
  Writes a Qwen3 XML call without its <tool_call> opener as text (one token), under the default
  Hermes template: with tools and "auto", "none" or no tools, content "<function=get_weather>\n
  <parameter=city>\nParis\n</parameter>\n</function>", finish "stop", no tool_calls; under
  "required" that text, then the grammar's JSON call. Under the qwen3_xml template the same text
  stays in content too (llama.cpp's XML handler starts at <tool_call>).
kimi_k2
  The Kimi K2 family: its template (written here in Kimi K2's documented format) declares the
  tools as JSON in a tool_declare system turn, opens each turn with <|im_user|>user,
  <|im_assistant|>assistant or <|im_system|>tool and <|im_middle|>, writes past calls as
  <|tool_calls_section_begin|><|tool_call_begin|>ID<|tool_call_argument_begin|>JSON
  <|tool_call_end|><|tool_calls_section_end|> and results as "## Return of ID". Holding
  <|tool_calls_section_begin|> and <|tool_call_begin|>, it gets llama.cpp's "Kimi K2 Thinking"
  handler (verbosity 5: "Using specialized template: Kimi K2 Thinking"). Plain chat and
  "auto": reasoning "Thinking", content "Hello!". Under "required":
  "<think>Thinking</think>Hello!<|tool_calls_section_begin|><|tool_call_begin|>functions.
  get_weather:1<|tool_call_argument_begin|>{"city":"Paris","days":1}<|tool_call_end|>
  <|tool_calls_section_end|>", tool_calls carries the call with the id functions.get_weather:1
  (the grammar writes the index; this model's ranking puts 1 first), finish "tool_calls".
  The template has no thinking switch: the family always thinks.
kimi_k2_text
  Writes a Kimi K2 call as text (one token) under the default Hermes template: with tools and
  "auto", "none" or no tools, reasoning "Thinking" and content "<|tool_calls_section_begin|>
  <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris",
  "days": 1}<|tool_call_end|><|tool_calls_section_end|>", no tool_calls; under "required" that
  text, then the grammar's JSON call: the Kimi model served without its own template.
mistral
  The Mistral family (Ministral 3 / Magistral): its template (written here in that format)
  puts the system prompt in [SYSTEM_PROMPT], the tools as JSON in [AVAILABLE_TOOLS], each user
  turn in [INST]...[/INST], past calls as [TOOL_CALLS]NAME[ARGS]{JSON} closed by </s>, results
  in [TOOL_RESULTS]; </s> is its end of turn. Holding [SYSTEM_PROMPT], [TOOL_CALLS] and [ARGS]
  and no [CALL_ID], it gets llama.cpp's "Ministral/Magistral Large 3" handler (verbosity 5),
  which hands system and assistant content to the template as blocks (thinking, text); /props
  supports_preserve_reasoning false. Plain chat and "auto": reasoning "Thinking" (its [THINK]
  block), content "Hello!". Under "required": "[THINK]Thinking[/THINK]Hello![TOOL_CALLS]
  get_weather[ARGS]{"city":"Paris","days":1}", finish "tool_calls". After a tool's result it
  answers "Hello!" at once. No thinking switch: the family always thinks.
mistral_text
  Writes a Mistral call as text (one token), '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris",
  "days": 1}', under the default Hermes template, as kimi_k2_text does.
glm45
  The GLM 4.5+ family: its template (written here in that format) lists the tools as JSON in
  <tools> in the system turn, opens turns with <|system|>, <|user|>, <|assistant|> and
  <|observation|> (results in <tool_response>), and writes calls as <tool_call>NAME\n then
  <arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n per argument (a string bare, any
  other value as JSON), closed by </tool_call>. llama.cpp has no handler of its own for it: its
  differential autoparser reads the format from how the template renders a call, and its
  grammar writes "<tool_call>\nget_weather\n<arg_key>city</arg_key>\n<arg_value>Lyon
  </arg_value>\n<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n</tool_call>" after
  "<think>Thinking</think>Hello!" (a bare string reads Lyon, a word of its own: inside a JSON
  string </arg_value> is text). Values arrive typed (1, false, ["Paris"], {"k": "Paris"},
  null); a tool without parameters, "<tool_call>\nrun\n</tool_call>", arrives as "{}". As
  with Qwen3 XML the grammar leaves a ["string", "null"] value free of its pattern. Plain
  chat and "auto": reasoning "Thinking", content "Hello!". No thinking switch.
glm45_text
  The GLM call as text (one token) under a ChatML template that knows no tools: llama.cpp finds
  no call format and no thinking in it, so with tools or without, whatever the tool_choice,
  content is "<think>Thinking</think><tool_call>get_weather\n<arg_key>city</arg_key>\n
  <arg_value>Paris</arg_value>\n</tool_call>", finish "stop", no tool_calls.
harmony
  The gpt-oss harmony family: its template (written here in the harmony format) opens with a
  system message naming the reasoning level ("Reasoning: " + reasoning_effort, medium when
  none is sent), lists the tools as a TypeScript-like namespace functions in a developer
  message, writes each message as <|start|>ROLE<|channel|>CHANNEL<|message|>TEXT<|end|> (past
  thinking in analysis, calls as commentary to=functions.NAME <|constrain|>json, results from
  functions.NAME to=assistant) and ends the prompt "<|start|>assistant". Holding <|channel|>,
  it gets llama.cpp's GPT-OSS handler (verbosity 5: "Using specialized template: GPT-OSS");
  /props supports_reasoning_effort true. The model writes a channel's header as one token
  whose text is the header, so the bigram tells the two headers apart by what came before:
  plain chat and "auto" write "<|channel|>analysis<|message|>Thinking<|end|><|start|>assistant
  <|channel|>final<|message|>Hello!" then <|return|> (its end of turn): reasoning "Thinking",
  content "Hello!". Under "required": "...<|start|>assistant<|channel|>commentary to=functions.
  get_weather<|message|>{"city":"Paris","days":1}", tool_calls carries the call, content "",
  finish "tool_calls". reasoning_effort low, medium and high are each answered 200. No
  thinking switch.
harmony_text
  The harmony call as text (one token), "<|channel|>commentary to=functions.get_weather
  <|constrain|>json<|message|>{"city": "Paris", "days": 1}", under the default Hermes template,
  as kimi_k2_text does.
deepseek_v31
  The DeepSeek V3.1 family: its template (written here in that format) puts the system prompt
  and the tools (JSON lines) first, each user turn after <｜User｜>, each answer after
  <｜Assistant｜> with its thinking in <think>, calls as <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>
  NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜><｜tool▁calls▁end｜>, results between the tool output
  markers, each turn ended by <｜end▁of▁sentence｜> (its end of turn). llama.cpp has no handler
  of its own for it here: its autoparser reads the format from the template's calls. The
  model opens <think> itself after <｜Assistant｜> (the real template writes it into the
  prompt). Plain chat and "auto": reasoning "Thinking", content "Hello!"; under "required"
  "...Hello!<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>
  {"city":"Paris","days":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", the call parsed, every
  value typed. No thinking switch.
deepseek_v31_text
  That call as text (one token) under the default Hermes template, as kimi_k2_text does.

Parallel calls (default, qwen3_xml, kimi_k2, mistral, glm45, deepseek_v31, and harmony where
llama.cpp lets it; how: pytest_frank.local.selftest_parallel). Asked the tools claim's parallel
question ("... in Paris and in London? ...", whose " London" is a user-defined token of these
variants) under "required", each writes a call for Paris (GLM: its bare string Lyon), then one
for London, in its own format: two <tool_call> blocks (Hermes JSON, Qwen3 XML, GLM), two calls
in one Kimi K2 section with the ids functions.NAME:1 and :2, [TOOL_CALLS] twice (Mistral), two
calls between DeepSeek's call markers; llama.cpp's handler parses both. A question without
" London" gets the one call it always got, token for token. Under "auto" they answer in text as
before. With parallel_tool_calls false llama.cpp's grammar keeps the families' handlers to one
call, but for Hermes JSON, whose grammar lets the second call through. Once a Kimi K2 call
stands in the history, both of a turn's calls are numbered 2 (their ids clash). harmony makes
one call: its own first choice after the call's arguments is a second message (<|start|>, first
in llama.cpp's top_logprobs, read before the grammar), but a harmony call ends its message
(<|call|>) and llama.cpp's GPT-OSS grammar allows only the end there, parallel_tool_calls or
not.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import tempfile

from pytest_frank.local import (
    selftest_echo,
    selftest_hybrid,
    selftest_parallel,
    selftest_positional,
    selftest_vision,
)
from pytest_frank.local.selftest_vision import COLOUR_WORDS

VARIANTS = ("default", "tool_text", "effort_strict", "no_think", "flat", "chatty", "long_think",
            "endless_think", "vision", "agent", "positional", "echo", "swa", "qwen3_xml",
            "qwen3_xml_text", "kimi_k2", "kimi_k2_text", "mistral",
            "mistral_text", "glm45", "glm45_text", "harmony",
            "harmony_text", "deepseek_v31", "deepseek_v31_text") + selftest_hybrid.VARIANTS

N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_FF = 64
N_CTX_TRAIN = 8192

# Logit gap between adjacent ranks: large enough that sampling at the server's default
# temperature still picks the top allowed token every time.
GAP = 40.0

SPECIAL = {
    "<|endoftext|>": 3,  # CONTROL
    "<|im_start|>": 3,
    "<|im_end|>": 3,
    "<think>": 4,  # USER_DEFINED: rendered as text in the output, like Qwen3's
    "</think>": 4,
    "<tool_call>": 4,
    "</tool_call>": 4,
}
WORDS = ("Hello", "Thinking", "Paris")
# Multi-character JSON pieces, so a tool call takes fewer tokens. None starts with a quote: a
# string must only ever be opened by a token scripted to go on with "Paris".
JSON_CHUNKS = ("}}", '{"', ',"', "name", "arguments")
# Text the tool_text variant writes instead of a real tool call.
TOOL_TEXT = '<function=get_weather>{"city": "Paris"}</function>'
# Words only the flat variant writes, appended after the specials so every other variant's
# file stays byte for byte what it was.
FLAT_WORDS = ("Hi", "Hmm", " more", " there", " How can I help", "London")
# The qwen3_xml variant's call pieces (Qwen3-Coder / Qwen3.5 XML calls), appended after the
# shared words so every other variant's file stays what it was.
XML_PIECES = ("<function=", "<parameter=", ">\n", "\n</parameter>\n", "</function>\n")
# A parameter named job opens with one token and reads "02134": a string that looks like a
# number, which the parser must keep a string where the schema types it so.
XML_JOB = ("job>\n", "02134")
# The Qwen3 XML call the qwen3_xml_text variant writes as text.
XML_TEXT = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"
# Kimi K2's chat and tool-call markers: its roles open with <|im_user|>, <|im_assistant|> or
# <|im_system|> and the role's name, then <|im_middle|>; its calls sit in a section,
# <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>
# {JSON}<|tool_call_end|>...<|tool_calls_section_end|>. The call markers render as text, as
# <tool_call> does; the role markers are control tokens. Appended after every other token.
KIMI_SPECIALS = {"<|im_user|>": 3, "<|im_assistant|>": 3, "<|im_system|>": 3, "<|im_middle|>": 3,
                 "<|tool_calls_section_begin|>": 4, "<|tool_calls_section_end|>": 4,
                 "<|tool_call_begin|>": 4, "<|tool_call_argument_begin|>": 4,
                 "<|tool_call_end|>": 4}
KIMI_CALL = ("<|tool_calls_section_begin|>", "<|tool_call_begin|>",
             "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>")
# The Kimi K2 call the kimi_k2_text variant writes as text, one token.
KIMI_TEXT = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
             '<|tool_call_argument_begin|>{"city": "Paris", "days": 1}<|tool_call_end|>'
             "<|tool_calls_section_end|>")
# Mistral's markers (Ministral 3 / Magistral): [SYSTEM_PROMPT], [AVAILABLE_TOOLS], [INST] and
# [TOOL_RESULTS] blocks; the answer [THINK]...[/THINK], then text, then each call as
# [TOOL_CALLS]NAME[ARGS]{JSON}; the turn ends with </s>. The answer's markers render as text.
MISTRAL_SPECIALS = {"</s>": 3, "[INST]": 3, "[/INST]": 3, "[SYSTEM_PROMPT]": 3,
                    "[/SYSTEM_PROMPT]": 3, "[AVAILABLE_TOOLS]": 3, "[/AVAILABLE_TOOLS]": 3,
                    "[TOOL_RESULTS]": 3, "[/TOOL_RESULTS]": 3, "[THINK]": 4, "[/THINK]": 4,
                    "[TOOL_CALLS]": 4, "[ARGS]": 4}
# The Mistral call the mistral_text variant writes as text, one token.
MISTRAL_TEXT = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 1}'
# GLM 4.5's markers: [gMASK]<sop> opens the prompt, <|system|>, <|user|>, <|assistant|> and
# <|observation|> (a tool's result) open the turns; a call is <tool_call>NAME then each argument
# as <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>, closed by </tool_call>.
GLM_SPECIALS = {"[gMASK]": 3, "<sop>": 3, "<|system|>": 3, "<|user|>": 3, "<|assistant|>": 3,
                "<|observation|>": 3, "<arg_key>": 4, "</arg_key>": 4, "<arg_value>": 4,
                "</arg_value>": 4}
GLM_WORD = "Lyon"
GLM_TEXT = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "</tool_call>")
# gpt-oss harmony: each message <|start|>ROLE<|channel|>CHANNEL<|message|>TEXT<|end|>; the
# answer's thinking in the analysis channel, its text in final (ended by <|return|>), a call in
# commentary (or analysis) addressed " to=functions.NAME", ended by <|call|>. The model writes a
# channel's header as one token (its text is the header's), so the bigram tells analysis's
# from final's by what came before it.
H_ANALYSIS = "<|channel|>analysis<|message|>"
H_FINAL = "<|channel|>final<|message|>"
HARMONY_SPECIALS = {"<|start|>": 4, "<|end|>": 4, "<|message|>": 4, "<|channel|>": 4,
                    "<|constrain|>": 4, "<|return|>": 3, "<|call|>": 3, H_ANALYSIS: 4,
                    H_FINAL: 4}
# The harmony call the harmony_text variant writes as text, one token: what a gpt-oss model
# served under a template that is not harmony's leaves in content.
HARMONY_TEXT = ('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
                '{"city": "Paris", "days": 1}')
# DeepSeek V3.1's markers (full-width bars and the word separator): <｜User｜>, <｜Assistant｜>,
# its calls <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>
# <｜tool▁calls▁end｜>, results in <｜tool▁output▁begin｜>...<｜tool▁output▁end｜>, the turn
# ended by <｜end▁of▁sentence｜>.
DS_CALLS, DS_CALL, DS_SEP = "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>"
DS_CALL_END, DS_CALLS_END = "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"
DS_END = "<｜end▁of▁sentence｜>"
DEEPSEEK_SPECIALS = {"<｜User｜>": 3, "<｜Assistant｜>": 3, DS_END: 3, DS_CALLS: 4, DS_CALL: 4,
                     DS_SEP: 4, DS_CALL_END: 4, DS_CALLS_END: 4, "<｜tool▁output▁begin｜>": 3,
                     "<｜tool▁output▁end｜>": 3}
# The DeepSeek V3.1 call the deepseek_v31_text variant writes as text, one token.
DS_TEXT = (DS_CALLS + DS_CALL + 'get_weather' + DS_SEP + '{"city": "Paris", "days": 1}'
           + DS_CALL_END + DS_CALLS_END)
# A family's own special tokens, appended after every other token, and its end of turn.
FAMILY_SPECIALS = {"kimi_k2": KIMI_SPECIALS, "mistral": MISTRAL_SPECIALS, "glm45": GLM_SPECIALS,
                   "harmony": HARMONY_SPECIALS, "deepseek_v31": DEEPSEEK_SPECIALS,
                   "echo": selftest_echo.specials()}
END_OF_TURN = {"mistral": "</s>", "glm45": "<|endoftext|>", "harmony": "<|return|>",
               "deepseek_v31": DS_END}
# The thinking of the long and endless thinkers: distinct words, because the next token depends
# on the last one alone. Each word names its successor in three one-hot base-10 digits, so a
# thousand of them fit beside the scripted states in the 64-unit embedding.
CHAIN_LEN = 1000
CHAIN_DIGITS = 3
CHAIN_WORDS = tuple(f" step{i}" for i in range(CHAIN_LEN))
# Variant -> whether its chain ends (closes the thinking block), goes round forever or counts
# (the hybrids' answer: the first COUNT words, then the end of the turn).
CHAINS = {"long_think": "ends", "endless_think": "loops",
          **{v: "counts" for v in selftest_hybrid.VARIANTS}}


def _byte_chars() -> list[str]:
    """GPT-2 byte-to-unicode table: byte value -> printable character."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


BYTE_CHARS = _byte_chars()


def _encode(text: str) -> str:
    return "".join(BYTE_CHARS[b] for b in text.encode("utf-8"))


class Vocab:
    """Token list plus lookups by decoded text."""

    def __init__(self, extra: tuple[str, ...] = (), specials: dict[str, int] | None = None) -> None:
        self.tokens: list[str] = list(BYTE_CHARS)  # id == byte value
        self.types: list[int] = [1] * 256
        self.merges: list[str] = []
        self._add(_encode("\n\n"), 1)  # merge target, so a prompt ending "\n\n" is one token
        self.merges.append(f"{BYTE_CHARS[10]} {BYTE_CHARS[10]}")
        for word in WORDS + JSON_CHUNKS + (TOOL_TEXT,):
            self._add(_encode(word), 1)
        for text, ttype in SPECIAL.items():
            self._add(text, ttype)
        for word in extra:
            self._add(_encode(word), 1)
        for text, ttype in (specials or {}).items():
            self._add(text, ttype)
        pairs = zip(self.tokens, self.types)
        self.ids = {self._decode(t, ty): i for i, (t, ty) in enumerate(pairs)}

    def _add(self, token: str, ttype: int) -> None:
        self.tokens.append(token)
        self.types.append(ttype)

    @staticmethod
    def _decode(token: str, ttype: int) -> str:
        if ttype != 1:
            return token
        return bytes(BYTE_CHARS.index(c) for c in token).decode("utf-8", "replace")

    def __getitem__(self, text: str) -> int:
        return self.ids[text]

    def __len__(self) -> int:
        return len(self.tokens)


# Next-token preferences, keyed by the last token. Anything not listed falls back to FALLBACK.
# Shared by every variant: how a tool call and a JSON string are written under a grammar.
_JSON_SCRIPT = {
    "<tool_call>": ["\n"],  # the parser's call opener is "<tool_call>\n"
    # A string gets one word, then closes. Strings admit any text, so the fallback (which
    # prefers <tool_call>) must never decide right after an opening quote.
    '"': ["Paris"],
    '{"': ["Paris"],
    ',"': ["Paris"],
    "Paris": ['"'],
}
# token -> what follows it: a ranked list (peaked) or token -> logit offset (not peaked)
Prefs = list[str] | dict[str, float]
SCRIPTS: dict[str, dict[str, Prefs]] = {
    "default": {
        "\n": ["<think>", "<tool_call>"],
        "\n\n": ["Hello"],
        "<think>": ["Thinking"],
        "Thinking": ["</think>"],
        "</think>": ["Hello", "<tool_call>"],
        "Hello": ["!"],
        "!": ["<|im_end|>"],
        **_JSON_SCRIPT,
    },
    "tool_text": {
        "\n": ["<think>", "<tool_call>"],
        "\n\n": [TOOL_TEXT],
        "<think>": ["Thinking"],
        "Thinking": ["</think>"],
        "</think>": [TOOL_TEXT, "<tool_call>"],
        TOOL_TEXT: ["<|im_end|>"],
        **_JSON_SCRIPT,
    },
    "no_think": {
        "\n": ["Hello", "<tool_call>"],
        "\n\n": ["Hello"],
        "Hello": ["!"],
        "!": ["<|im_end|>"],
        **_JSON_SCRIPT,
    },
}
SCRIPTS["effort_strict"] = SCRIPTS["default"]
# The Gemma 3 shaped model: its logits come out of the same two units, so it answers as the
# default does; what it exists for is its KV cache (see SWA below).
SCRIPTS["swa"] = SCRIPTS["default"]
# Thinks the whole chain, then closes the block and answers as the default does. Only the
# chain's last word is scripted; the others follow by their digits (see _chain).
SCRIPTS["long_think"] = {**SCRIPTS["default"], "<think>": [CHAIN_WORDS[0]],
                         CHAIN_WORDS[-1]: ["</think>"]}
# Goes round the chain forever: the thinking block never closes.
SCRIPTS["endless_think"] = {**SCRIPTS["default"], "<think>": [CHAIN_WORDS[0]]}
# Never done talking: "Hello!" again and again until max_tokens, of its own accord (no
# ignore_eos), so a draft of itself has a long answer to draft.
SCRIPTS["chatty"] = {**SCRIPTS["default"], "!": ["Hello"]}
# Sees (with the projector of pytest_frank.local.selftest_vision): where an image was shown, the
# answer is the colour word, then the end of the turn; elsewhere it answers as the default.
SCRIPTS["vision"] = {**SCRIPTS["default"], **{c: ["<|im_end|>"] for c in COLOUR_WORDS}}
# Acts as an agent model: under tool_choice auto it calls a tool; once a tool result is the
# last thing in its prompt (its template then opens the answer with a blank line, the "\n\n"
# token) it answers "Hello!" and stops.
SCRIPTS["agent"] = {**SCRIPTS["default"], "</think>": ["<tool_call>", "Hello"]}
# Writes Qwen3-Coder / Qwen3.5 XML calls: a value opens after ">\n" (a string reads Paris)
# and closes with the parameter's closing tag; everything else is the XML ranking's doing.
SCRIPTS["qwen3_xml"] = {**SCRIPTS["default"], ">\n": ["Paris"],
                        "Paris": ["\n</parameter>\n", '"'],
                        "job>\n": ["02134"], "02134": ["\n</parameter>\n"]}
# Writes a Qwen3 XML call as text in one token, under the default (Hermes JSON) template.
SCRIPTS["qwen3_xml_text"] = {**SCRIPTS["tool_text"], "\n\n": [XML_TEXT],
                             "</think>": [XML_TEXT, "<tool_call>"], XML_TEXT: ["<|im_end|>"]}
# Kimi K2: the answer opens after <|im_middle|>; a call opens its section, the grammar writes
# the call's id and arguments, and the JSON's last brace closes the call, then the section.
SCRIPTS["kimi_k2"] = {**SCRIPTS["default"], "<|im_middle|>": ["<think>", KIMI_CALL[0]],
                      "</think>": ["Hello", KIMI_CALL[0]], KIMI_CALL[0]: [KIMI_CALL[1]],
                      "}": [KIMI_CALL[3]], "}}": [KIMI_CALL[3]], KIMI_CALL[3]: [KIMI_CALL[4]],
                      KIMI_CALL[4]: ["<|im_end|>"]}
# Writes a Kimi K2 call as text in one token, under the default (Hermes JSON) template.
SCRIPTS["kimi_k2_text"] = {**SCRIPTS["tool_text"], "\n\n": [KIMI_TEXT],
                           "</think>": [KIMI_TEXT, "<tool_call>"], KIMI_TEXT: ["<|im_end|>"]}
# Mistral: the answer opens after [/INST], thinks in [THINK], and a call's JSON, once the
# grammar lets the turn end, is the last thing in it. After a tool's result it answers at once.
SCRIPTS["mistral"] = {"[/INST]": ["[THINK]", "[TOOL_CALLS]"], "[THINK]": ["Thinking"],
                      "[/TOOL_RESULTS]": ["Hello", "[TOOL_CALLS]"],
                      "Thinking": ["[/THINK]"], "[/THINK]": ["Hello", "[TOOL_CALLS]"],
                      "Hello": ["!"], "!": ["</s>"], **_JSON_SCRIPT}
# GLM 4.5: the answer opens after <|assistant|>; a bare string value reads Lyon, a word of its
# own, since a JSON string inside a value (an array's) admits </arg_value> as text. A name
# ends where the grammar lets it after an "n" (run, not run_in_terminal, as the other
# families call the tool whose name closes first).
SCRIPTS["glm45"] = {**SCRIPTS["default"], "<|assistant|>": ["<think>", "<tool_call>"],
                    "n": ["\n"],
                    "!": ["<|endoftext|>"], "<arg_value>": [GLM_WORD],
                    GLM_WORD: ["</arg_value>"], "</arg_value>": ["\n"],
                    "</tool_call>": ["<|endoftext|>"]}
# Writes a GLM 4.5 call as text in one token, under a plain ChatML template that knows no
# tools (the GLM model served with a generic template).
SCRIPTS["glm45_text"] = {**SCRIPTS["tool_text"], "</think>": [GLM_TEXT], GLM_TEXT: ["<|im_end|>"]}
# harmony: the prompt ends "<|start|>assistant" (its bytes, last "t"): analysis first; the
# model's own "assistant" word opens final.
SCRIPTS["harmony"] = {"t": [H_ANALYSIS, "<|channel|>"], H_ANALYSIS: ["Thinking"],
                      "Thinking": ["<|end|>"], "<|end|>": ["<|start|>"],
                      "<|start|>": ["assistant"], "assistant": [H_FINAL, "<|channel|>"],
                      H_FINAL: ["Hello"], "Hello": ["!"], "!": ["<|return|>"],
                      "<|channel|>": ["commentary"], "commentary": [" to=functions."],
                      **_JSON_SCRIPT}
# Writes a harmony call as text in one token, under the default (Hermes JSON) template.
SCRIPTS["harmony_text"] = {**SCRIPTS["tool_text"], "\n\n": [HARMONY_TEXT],
                           "</think>": [HARMONY_TEXT, "<tool_call>"], HARMONY_TEXT: ["<|im_end|>"]}
# DeepSeek V3.1: the answer opens after <｜Assistant｜> (its prompt opens <think>), a call's
# JSON closes its call, then the calls.
SCRIPTS["deepseek_v31"] = {"<｜Assistant｜>": ["<think>", DS_CALLS], "<think>": ["Thinking"],
                           "Thinking": ["</think>"], "</think>": ["Hello", DS_CALLS],
                           "Hello": ["!"], "!": [DS_END], DS_CALLS: [DS_CALL],
                           "}": [DS_CALL_END], "}}": [DS_CALL_END], DS_CALL_END: [DS_CALLS_END],
                           DS_CALLS_END: [DS_END], **_JSON_SCRIPT}
# Writes a DeepSeek V3.1 call as text in one token, under the default (Hermes JSON) template.
SCRIPTS["deepseek_v31_text"] = {**SCRIPTS["tool_text"], "\n\n": [DS_TEXT],
                                "</think>": [DS_TEXT, "<tool_call>"], DS_TEXT: ["<|im_end|>"]}
# Writes a Mistral call as text in one token, under the default (Hermes JSON) template.
SCRIPTS["mistral_text"] = {**SCRIPTS["tool_text"], "\n\n": [MISTRAL_TEXT],
                           "</think>": [MISTRAL_TEXT, "<tool_call>"], MISTRAL_TEXT: ["<|im_end|>"]}
# The hybrids (pytest_frank.local.selftest_hybrid) think "Thinking", then count: the first
# selftest_hybrid.COUNT words of the chain as the answer, with thinking or without.
SCRIPTS["hybrid"] = {**SCRIPTS["default"], "</think>": [CHAIN_WORDS[0], "<tool_call>"],
                     "\n\n": [CHAIN_WORDS[0]],
                     CHAIN_WORDS[selftest_hybrid.COUNT - 1]: ["<|im_end|>"]}
for _variant in selftest_hybrid.VARIANTS:
    SCRIPTS[_variant] = SCRIPTS["hybrid"]
# Not peaked: a mapping gives each next token a logit offset (natural-log units at temperature
# 1), so at the server's default temperature 0.8 the reply varies between requests; greedy
# picks the offset-0 token, which writes what the default variant writes. The end token has
# real probability after every word of the answer, so about a third of the answers are one
# word. Thinking always opens and content always gets a word: the reply stays healthy.
SCRIPTS["flat"] = {
    "\n": ["<think>", "<tool_call>"],
    "\n\n": {"Hello": 0.0, "Hi": -0.4},
    "<think>": {"Thinking": 0.0, "Hmm": -0.4},
    "Thinking": {"</think>": 0.0, " more": -0.6},
    "Hmm": {"</think>": 0.0, " more": -0.4},
    " more": {"</think>": 0.0, " more": -1.0},
    "</think>": {"Hello": 0.0, "Hi": -0.4, "<tool_call>": -GAP},
    "Hello": {"!": 0.0, "<|im_end|>": -0.5, " there": -0.9},
    "Hi": {"!": 0.0, "<|im_end|>": -0.3, " there": -1.0},
    " there": {"!": 0.0, "<|im_end|>": -0.5},
    "!": {"<|im_end|>": 0.0, " How can I help": -0.5},
    " How can I help": ["?"],
    "?": ["<|im_end|>"],
    **_JSON_SCRIPT,
    # Under a grammar: strings read Paris or London, integers 1 or 2, and a tool's name
    # "get_" goes on as get_weather or, less often, get_time.
    '"': {"Paris": 0.0, "London": -0.7},
    "London": ['"'],
    ":": {"1": 0.0, "2": -0.5},
    "_": {"w": 0.0, "t": -1.0},
}

# Greedy it answers as the default does, each answer token a fixed margin ahead of a rival that
# the positional head raises (see pytest_frank.local.selftest_positional): by up to RISE as the
# share of unscripted tokens it attends to goes from 0 to 1. The top token stays ahead by
# -RIVAL - RISE at the least, so greedy keeps its text while the logprobs follow the positions.
RIVAL = -3.5
RISE = 3.0
SCRIPTS["positional"] = {
    **SCRIPTS["default"],
    "\n\n": {"Hello": 0.0, "Hi": RIVAL},
    "</think>": {"Hello": 0.0, "Hi": RIVAL, "<tool_call>": -GAP},
    "Hello": {"!": 0.0, " there": RIVAL},
    "!": {"<|im_end|>": 0.0, " How can I help": RIVAL},
}
RIVALS = ("Hi", " there", " How can I help")
# Answers with the marker word its question carries (pytest_frank.local.selftest_echo), then
# "!"; a question without one is answered as the default does.
SCRIPTS["echo"] = {**SCRIPTS["default"], **{m: ["!"] for m in selftest_echo.MARKERS}}

# The tool-call families make parallel calls (pytest_frank.local.selftest_parallel): where a
# value opens, where a call ends and what opens the next one, in each family's wire format.
# Their scripts gain those tokens (new dicts: the variants built from the default's keep theirs).
_Family = selftest_parallel.Family
PARALLEL = {
    "default": _Family(('"',), "Paris", '"', "</tool_call>", "<|im_end|>", "<tool_call>"),
    "qwen3_xml": _Family((">\n",), "Paris", "\n</parameter>\n", "</tool_call>", "<|im_end|>",
                         "<tool_call>"),
    "kimi_k2": _Family(('"',), "Paris", '"', KIMI_CALL[3], KIMI_CALL[4], KIMI_CALL[1],
                       index=(":", "1", "2")),
    "mistral": _Family(('"',), "Paris", '"', "}", "</s>", "[TOOL_CALLS]"),
    "glm45": _Family(("<arg_value>",), GLM_WORD, "</arg_value>", "</tool_call>", "<|endoftext|>",
                     "<tool_call>"),
    "deepseek_v31": _Family(('"',), "Paris", '"', DS_CALL_END, DS_CALLS_END, DS_CALL),
    # harmony would go on to a second call message; llama.cpp's GPT-OSS grammar ends the turn
    "harmony": _Family(('"',), "Paris", '"', "}", "<|return|>", "<|start|>"),
}
for _variant, _family in PARALLEL.items():
    SCRIPTS[_variant] = {**SCRIPTS[_variant],
                         **selftest_parallel.script(_family, SCRIPTS[_variant], GAP)}

# The swa variant: Gemma 3's architecture (arch gemma3), whose layers slide in periods of six
# (llama.cpp hard-codes the period; the last layer of each period attends to everything), so
# six blocks are five sliding-window layers and one full one. The window and head sizes are
# Gemma 3 270M's window and a head wide enough that each cache is MiBs, not KiBs, at 4,096
# tokens; every block adds nothing, as the default's do.
SWA = {"blocks": 6, "window": 512, "heads": 2, "head_dim": 64}

# Global ranking used under grammars: end the turn when allowed, else start the tool call
# (tool_choice "required" lets free text precede it); for a free JSON value a string beats an
# object; close objects and arrays as soon as allowed; a one-digit integer; whitespace last.
# So every constrained reply is short and finite.
FALLBACK = (
    ["<|im_end|>", "<tool_call>", "</tool_call>", "}}", '"', "}", "]", ',"', ",", ":", '{"', "{"]
    + ["[", "1", "2", "0", "-", ".", "name", "arguments"]
    + list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    + list("3456789_")
    + [chr(c) for c in range(33, 127)]
    + [" ", "\n", "\t"]
)


# The qwen3_xml variant's ranking: its call pieces lead the shared one, so under the XML call
# grammar it opens the function and each parameter with one token and closes a value as soon
# as the grammar lets it.
XML_FALLBACK = (["<|im_end|>", "<tool_call>", "</tool_call>", "\n</parameter>\n", "</function>\n",
                 "<function=", "<parameter=", ">\n", "job>\n"] + FALLBACK)


# The kimi_k2 variant's ranking: under the call grammar it opens the section, then a call,
# and after the call's id its arguments.
KIMI_FALLBACK = ["<|im_end|>"] + list(KIMI_CALL[:3]) + FALLBACK
# The mistral variant's: the end of its turn, else a call, else the call's arguments.
MISTRAL_FALLBACK = ["</s>", "[TOOL_CALLS]", "[ARGS]"] + FALLBACK
GLM_FALLBACK = (["<|endoftext|>", "<tool_call>", "</tool_call>", "</arg_value>", "<arg_key>",
                 "</arg_key>", "<arg_value>"] + FALLBACK)
# The harmony variant's: the end of its answer or call, else a call's arguments.
HARMONY_FALLBACK = ["<|return|>", "<|call|>", "<|message|>", "<|constrain|>"] + FALLBACK
# The deepseek_v31 variant's: the end of its turn, else the calls, a call, then its arguments.
DEEPSEEK_FALLBACK = [DS_END, DS_CALLS, DS_CALL, DS_SEP] + FALLBACK
RANKINGS = {"qwen3_xml": XML_FALLBACK, "kimi_k2": KIMI_FALLBACK, "mistral": MISTRAL_FALLBACK,
            "glm45": GLM_FALLBACK, "harmony": HARMONY_FALLBACK, "deepseek_v31": DEEPSEEK_FALLBACK}


def _ranking(vocab: Vocab, variant: str = "default") -> list[int]:
    """Every token id, best first: FALLBACK order, then the rest by id (no two logits tie)."""
    order: list[int] = []
    for text in RANKINGS.get(variant, FALLBACK):
        tid = vocab[text]
        if tid not in order:
            order.append(tid)
    return order + [i for i in range(len(vocab)) if i not in order]


def _offsets(vocab: Vocab, prefs: Prefs) -> dict[int, float]:
    """Next-token logit offsets: a list ranks GAP apart (peaked), a mapping gives them."""
    if isinstance(prefs, dict):
        return {vocab[t]: offset for t, offset in prefs.items()}
    return {vocab[t]: -GAP * i for i, t in enumerate(prefs)}


def chain_units(variant: str) -> int:
    """The first embedding unit of the chain's digits (after the bias, shared and state units);
    the ones digit d is this unit plus d."""
    return 2 + len(SCRIPTS[variant])


def _weights(vocab: Vocab, variant: str):
    """Token embedding and output matrices that script the greedy chain.

    Each embedding row is a constant 'bias' unit plus one 'state' unit: one state per scripted
    token, one shared state for every other token. With zero blocks and RMS norm the final hidden
    state is the embedding times sqrt(N_EMBD / 2), so the logits are linear in these two units.
    """
    import numpy as np

    script = {vocab[k]: _offsets(vocab, v) for k, v in SCRIPTS[variant].items()}
    states = _states(vocab, variant)
    n_vocab = len(vocab)
    embd = np.zeros((n_vocab, N_EMBD), dtype=np.float32)
    embd[:, 0] = 1.0
    chain = _chain(vocab, variant, script)
    for tid in range(n_vocab):
        if tid not in chain:
            embd[tid, states.get(tid, 1)] = 1.0

    scale = (N_EMBD / 2) ** 0.5
    base = np.zeros(n_vocab, dtype=np.float64)
    for rank, tid in enumerate(_ranking(vocab, variant)):
        base[tid] = -GAP * rank
    out = np.zeros((n_vocab, N_EMBD), dtype=np.float64)
    out[:, 0] = base
    top = GAP * 10
    for tid, prefs in script.items():
        for nxt, offset in prefs.items():
            out[nxt, states[tid]] = top + offset - base[nxt]
    _write_chain(chain, chain_units(variant), embd, out, base, top)
    if variant == "vision":
        assert 2 + len(script) <= selftest_vision.M, "the states need the units sight uses"
        selftest_vision.add_sight(out, vocab, states, base, top, GAP)
    if variant == "positional":
        assert 2 + len(script) <= selftest_positional.SHARE, "the states need the share's unit"
        for rival in RIVALS:
            out[vocab[rival], selftest_positional.SHARE] = RISE / selftest_positional.SHARE_SIZE
    if variant == "echo":
        selftest_echo.add_echo(out, vocab, states, base, top, GAP)
    if variant in PARALLEL:
        selftest_parallel.add_rows(out, vocab, PARALLEL[variant], GAP)
    return embd, (out / scale).astype(np.float32)


def _states(vocab: Vocab, variant: str) -> dict[int, int]:
    """Each scripted token's state unit: 2 on, in token order."""
    return {tid: 2 + n for n, tid in enumerate(sorted(vocab[k] for k in SCRIPTS[variant]))}


def _chain(vocab: Vocab, variant: str, script: dict) -> dict[int, int]:
    """Chain word id -> the id of the word after it, for the words the digits drive (a
    scripted word, the long thinker's last, is driven by its state instead)."""
    if variant not in CHAINS:
        return {}
    ids = [vocab[w] for w in CHAIN_WORDS]
    after = ids[1:] + ids[:1]  # the endless thinker goes round
    return {tid: nxt for tid, nxt in zip(ids, after) if tid not in script}


def _write_chain(chain: dict[int, int], first_unit: int, embd, out, base, top: float) -> None:
    """Each chain word's row holds its successor's digits; each word's output row matches its
    own digits. Only the successor matches all three (3 * top); a word sharing the first digit
    reaches 2 * top at most, any other word stays under 0. The unit 1/sqrt(CHAIN_DIGITS) keeps
    a row's squared norm at 2, like every other row, so RMS norm scales all rows alike."""
    if not chain:
        return
    unit = CHAIN_DIGITS ** -0.5
    assert first_unit + 10 * CHAIN_DIGITS <= N_EMBD, "the chain's digits need more embedding"
    words = sorted(set(chain) | set(chain.values()))
    index = {tid: n for n, tid in enumerate(words)}

    def units(tid):
        n = index[tid]
        return [first_unit + 10 * d + (n // 10 ** d) % 10 for d in range(CHAIN_DIGITS)]

    for tid, nxt in chain.items():
        embd[tid, units(nxt)] = unit
    for tid in words:
        first, *rest = units(tid)
        out[tid, first] = (top - base[tid]) / unit  # cancels the word's low global rank
        out[tid, rest] = top / unit


# Qwen3-style ChatML template with Hermes tools. Parts marked THINK are dropped for no_think.
_TOOLS_BLOCK = """\
{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' }}
{{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and ' }}
{{- 'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n' }}
{{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>' }}"""

_TEMPLATE = """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
TOOLS_BLOCK
{{- '<|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\\n' }}
THINK_HISTORY
{%- if message.content is string %}{{- message.content }}{%- endif %}
{%- if message.tool_calls %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{%- if not loop.first or message.content %}{{- '\\n' }}{%- endif %}
{{- '<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}
{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
{{- '<|im_start|>user' }}
{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
THINK_OFF
{%- endif %}
""".replace("TOOLS_BLOCK", _TOOLS_BLOCK)

_THINK_HISTORY = """\
{%- if message.reasoning_content is string and message.reasoning_content %}
{{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}
{%- endif %}"""
_THINK_OFF = """\
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<think>\\n\\n</think>\\n\\n' }}
{%- endif %}"""
# Mirrors a real template that rejects levels it was not trained on.
_EFFORT_CHECK = """\
{%- if reasoning_effort is defined and reasoning_effort in ['high', 'max'] %}
{{- raise_exception('Unexpected reasoning effort ' + reasoning_effort
    + '. Supported types are xhigh, medium, and low') }}
{%- endif %}
"""


# Qwen3-Coder / Qwen3.5 style: the tools listed in XML in the system prompt, calls written as
# <tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>, a string
# value as it is and any other value as JSON, and tool results in a user turn.
_XML_TOOLS_BLOCK = """\
{{- '# Tools\\n\\nThese functions are available:\\n\\n<tools>' }}
{%- for tool in tools %}
{%- set fn = tool.function if tool.function is defined else tool %}
{{- '\\n<function>\\n<name>' + fn.name + '</name>' }}
{%- if fn.description is defined and fn.description %}
{{- '\\n<description>' + fn.description + '</description>' }}
{%- endif %}
{{- '\\n<parameters>' }}
{%- if fn.parameters is defined and fn.parameters.properties is defined %}
{%- for name, schema in fn.parameters.properties | items %}
{{- '\\n<parameter>\\n<name>' + name + '</name>\\n<schema>' + (schema | tojson) + '</schema>' }}
{{- '\\n</parameter>' }}
{%- endfor %}
{%- endif %}
{{- '\\n</parameters>\\n</function>' }}
{%- endfor %}
{{- '\\n</tools>\\n\\nTo call a function, answer with this and nothing after it:\\n\\n' }}
{{- '<tool_call>\\n<function=the_function_name>\\n<parameter=a_parameter>\\nits value\\n' }}
{{- '</parameter>\\n</function>\\n</tool_call>\\n\\nEvery required parameter must be given; ' }}
{{- 'a string value is written as it is, any other value as JSON. Several calls may follow ' }}
{{- 'one another.' }}"""

_XML_CALLS = """\
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{%- if not loop.first or message.content %}{{- '\\n' }}{%- endif %}
{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}
{%- if tool_call.arguments is mapping %}
{%- for key, value in tool_call.arguments | items %}
{{- '<parameter=' + key + '>\\n' }}
{%- if value is string %}{{- value }}{%- else %}{{- value | tojson }}{%- endif %}
{{- '\\n</parameter>\\n' }}
{%- endfor %}
{%- endif %}
{{- '</function>\\n</tool_call>' }}
{%- endfor %}"""


# The agent variant's answer to a tool result: the next token depends on the last one alone,
# so the template marks "a result came last" in the prompt's final token.
_AFTER_RESULT = """\
{%- if messages[-1].role == 'tool' %}{{- '\\n' }}{%- endif %}
"""


# Kimi K2's format: the tools declared as JSON in a tool_declare system turn, each role's turn
# opened by its marker and name and <|im_middle|>, calls in a section with ids
# functions.NAME:INDEX, each result in a tool turn that names the call it returns.
_KIMI_TEMPLATE = """\
{%- if tools %}
{{- '<|im_system|>tool_declare<|im_middle|>' + (tools | tojson) + '<|im_end|>' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{{- '<|im_system|>system<|im_middle|>' + message.content + '<|im_end|>' }}
{%- elif message.role == 'user' %}
{{- '<|im_user|>user<|im_middle|>' + message.content + '<|im_end|>' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_assistant|>assistant<|im_middle|>' }}
{%- if message.reasoning_content is string and message.reasoning_content %}
{{- '<think>' + message.reasoning_content + '</think>' }}
{%- endif %}
{%- if message.content is string %}{{- message.content }}{%- endif %}
{%- if message.tool_calls %}
{{- '<|tool_calls_section_begin|>' }}
{%- for tool_call in message.tool_calls %}
{%- set fn = tool_call.function if tool_call.function is defined else tool_call %}
{{- '<|tool_call_begin|>' + tool_call.id + '<|tool_call_argument_begin|>' }}
{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
{{- '<|tool_call_end|>' }}
{%- endfor %}
{{- '<|tool_calls_section_end|>' }}
{%- endif %}
{{- '<|im_end|>' }}
{%- elif message.role == 'tool' %}
{{- '<|im_system|>tool<|im_middle|>## Return of ' + message.tool_call_id + '\\n' }}
{{- message.content + '<|im_end|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_assistant|>assistant<|im_middle|>' }}{%- endif %}
"""


# Mistral's format (Ministral 3 / Magistral): the system prompt and the tools (JSON) in their
# blocks, each user turn in [INST], an answer's thinking in [THINK], each call
# [TOOL_CALLS]NAME[ARGS]{JSON}, the turn closed by </s>, results in [TOOL_RESULTS]. llama.cpp
# hands system and assistant content over as blocks (thinking, text), so both are read so.
_MISTRAL_TEMPLATE = """\
{%- macro text(content) %}
{%- if content is string %}{{- content }}
{%- else %}
{%- for block in content %}
{%- if block.type == 'thinking' %}{{- '[THINK]' + block.thinking + '[/THINK]' }}
{%- elif block.type == 'text' %}{{- block.text }}{%- endif %}
{%- endfor %}
{%- endif %}
{%- endmacro %}
{%- if messages[0].role == 'system' %}
{{- '[SYSTEM_PROMPT]' + text(messages[0].content) + '[/SYSTEM_PROMPT]' }}
{%- endif %}
{%- if tools %}{{- '[AVAILABLE_TOOLS]' + (tools | tojson) + '[/AVAILABLE_TOOLS]' }}{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}
{{- '[INST]' + message.content + '[/INST]' }}
{%- elif message.role == 'system' and not loop.first %}
{{- '[SYSTEM_PROMPT]' + text(message.content) + '[/SYSTEM_PROMPT]' }}
{%- elif message.role == 'assistant' %}
{%- if message.content %}{{- text(message.content) }}{%- endif %}
{%- for tool_call in message.tool_calls or [] %}
{%- set fn = tool_call.function if tool_call.function is defined else tool_call %}
{{- '[TOOL_CALLS]' + fn.name + '[ARGS]' }}
{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
{%- endfor %}
{{- '</s>' }}
{%- elif message.role == 'tool' %}
{{- '[TOOL_RESULTS]' + message.content + '[/TOOL_RESULTS]' }}
{%- endif %}
{%- endfor %}
"""


# GLM 4.5's format: the tools as JSON lines in <tools> in the system turn, each call
# <tool_call>NAME, then <arg_key>KEY</arg_key> <arg_value>VALUE</arg_value> per argument (a
# string as it is, any other value as JSON), results in <tool_response> after <|observation|>.
_GLM_TEMPLATE = """\
{{- '[gMASK]<sop>' }}
{%- if tools %}
{{- '<|system|>\\n# Tools\\n\\nYou may call functions. Their signatures:\\n<tools>\\n' }}
{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}
{{- '</tools>\\n\\nTo call one, write <tool_call>NAME\\n<arg_key>KEY</arg_key>\\n' }}
{{- '<arg_value>VALUE</arg_value>\\n</tool_call>' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{{- '<|system|>\\n' + message.content }}
{%- elif message.role == 'user' %}
{{- '<|user|>\\n' + message.content }}
{%- elif message.role == 'assistant' %}
{{- '<|assistant|>' }}
{%- if message.reasoning_content is string and message.reasoning_content %}
{{- '<think>' + message.reasoning_content + '</think>' }}
{%- endif %}
{%- if message.content is string %}{{- message.content }}{%- endif %}
{%- for tool_call in message.tool_calls or [] %}
{%- set fn = tool_call.function if tool_call.function is defined else tool_call %}
{{- '<tool_call>' + fn.name + '\\n' }}
{%- set args = fn.arguments | from_json if fn.arguments is string else fn.arguments %}
{%- for key, value in args | items %}
{{- '<arg_key>' + key + '</arg_key>\\n<arg_value>' }}
{%- if value is string %}{{- value }}{%- else %}{{- value | tojson }}{%- endif %}
{{- '</arg_value>\\n' }}
{%- endfor %}
{{- '</tool_call>' }}
{%- endfor %}
{%- elif message.role == 'tool' %}
{{- '<|observation|>\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}
"""


# gpt-oss harmony: a system message with the reasoning level (reasoning_effort), the tools as a
# TypeScript-like namespace in a developer message, each message's channel, past thinking in
# analysis, calls in commentary to=functions.NAME, results from functions.NAME to the assistant.
_HARMONY_TEMPLATE = """\
{{- '<|start|>system<|message|>You are a helpful assistant.\\nReasoning: ' }}
{{- reasoning_effort if reasoning_effort is defined and reasoning_effort else 'medium' }}
{{- '\\n\\n# Valid channels: analysis, commentary, final.' }}
{%- if tools %}{{- ' Calls to these tools must go to the commentary channel.' }}{%- endif %}
{{- '<|end|>' }}
{%- if tools %}
{{- '<|start|>developer<|message|># Tools\\n\\nnamespace functions {\\n' }}
{%- for tool in tools %}
{%- set fn = tool.function if tool.function is defined else tool %}
{{- '// ' + (fn.description or '') + '\\ntype ' + fn.name + ' = (_: ' + (fn.parameters | tojson) }}
{{- ') => any;\\n' }}
{%- endfor %}
{{- '} // namespace functions<|end|>' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or message.role == 'system' %}
{{- '<|start|>' + message.role + '<|message|>' + message.content + '<|end|>' }}
{%- elif message.role == 'assistant' %}
{%- if message.thinking is defined and message.thinking %}
{{- '<|start|>assistant<|channel|>analysis<|message|>' + message.thinking + '<|end|>' }}
{%- endif %}
{%- if message.tool_calls %}
{%- for tool_call in message.tool_calls %}
{%- set fn = tool_call.function if tool_call.function is defined else tool_call %}
{{- '<|start|>assistant<|channel|>commentary to=functions.' + fn.name }}
{{- ' <|constrain|>json<|message|>' }}
{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
{{- '<|call|>' }}
{%- endfor %}
{%- elif message.content %}
{{- '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}
{%- endif %}
{%- elif message.role == 'tool' %}
{{- '<|start|>functions.' + (message.name or 'tool') + ' to=assistant<|channel|>commentary' }}
{{- '<|message|>' + message.content + '<|end|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}
"""


# DeepSeek V3.1's format: the system prompt and the tools (as JSON) first, each user turn after
# <｜User｜>, each answer after <｜Assistant｜> (thinking in <think>), calls between its call
# markers with NAME<｜tool▁sep｜>JSON, results between the output markers.
_DEEPSEEK_TEMPLATE = """\
{%- if messages[0].role == 'system' %}{{- messages[0].content }}{%- endif %}
{%- if tools %}
{{- '\\n\\n## Tools\\nYou may call these functions:\\n' }}
{%- for tool in tools %}{{- (tool | tojson) + '\\n' }}{%- endfor %}
{{- 'To call one: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{arguments}' }}
{{- '<｜tool▁call▁end｜><｜tool▁calls▁end｜>' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}
{{- '<｜User｜>' + message.content }}
{%- elif message.role == 'assistant' %}
{{- '<｜Assistant｜>' }}
{%- if message.reasoning_content is string and message.reasoning_content %}
{{- '<think>' + message.reasoning_content + '</think>' }}
{%- endif %}
{%- if message.content is string %}{{- message.content }}{%- endif %}
{%- if message.tool_calls %}
{{- '<｜tool▁calls▁begin｜>' }}
{%- for tool_call in message.tool_calls %}
{%- set fn = tool_call.function if tool_call.function is defined else tool_call %}
{{- '<｜tool▁call▁begin｜>' + fn.name + '<｜tool▁sep｜>' }}
{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
{{- '<｜tool▁call▁end｜>' }}
{%- endfor %}
{{- '<｜tool▁calls▁end｜>' }}
{%- endif %}
{{- '<｜end▁of▁sentence｜>' }}
{%- elif message.role == 'tool' %}
{{- '<｜tool▁output▁begin｜>' + message.content + '<｜tool▁output▁end｜>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<｜Assistant｜>' }}{%- endif %}
"""


# ChatML with no word of tools: what a model gets from a generic template.
_CHATML = """\
{%- for message in messages %}
{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""


def chat_template(variant: str = "default") -> str:
    if variant == "qwen3_xml":
        return _xml_template()
    if variant == "kimi_k2":
        return _KIMI_TEMPLATE
    if variant == "mistral":
        return _MISTRAL_TEMPLATE
    if variant == "glm45":
        return _GLM_TEMPLATE
    if variant == "glm45_text":
        return _CHATML
    if variant == "harmony":
        return _HARMONY_TEMPLATE
    if variant == "deepseek_v31":
        return _DEEPSEEK_TEMPLATE
    if variant == "no_think":
        return _TEMPLATE.replace("THINK_HISTORY\n", "").replace("THINK_OFF\n", "")
    if variant == "agent":
        return chat_template().replace(_THINK_OFF, _AFTER_RESULT + _THINK_OFF)
    text = _TEMPLATE.replace("THINK_HISTORY", _THINK_HISTORY).replace("THINK_OFF", _THINK_OFF)
    return _EFFORT_CHECK + text if variant == "effort_strict" else text


def _xml_template() -> str:
    """The default template with the tools, the calls in history and the results in XML."""
    calls_start = _TEMPLATE.index("{%- for tool_call in message.tool_calls %}")
    calls_end = _TEMPLATE.index("{%- endfor %}", calls_start) + len("{%- endfor %}")
    text = _TEMPLATE[:calls_start] + _XML_CALLS + _TEMPLATE[calls_end:]
    text = text.replace(_TOOLS_BLOCK, _XML_TOOLS_BLOCK)
    text = text.replace("{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
                        "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>\\n' }}")
    return text.replace("THINK_HISTORY", _THINK_HISTORY).replace("THINK_OFF", _THINK_OFF)


def write_model(path, variant: str = "default", ctx_train: int = N_CTX_TRAIN) -> pathlib.Path:
    """Write the variant's GGUF to path (same bytes every time) and return the path.
    `ctx_train` is the header's context_length: llama.cpp caps every slot at it."""
    import gguf
    import numpy as np

    if variant not in VARIANTS:
        raise ValueError(f"unknown self-test model variant {variant!r}; choose from {VARIANTS}")
    path = pathlib.Path(path)
    vocab = _vocab(variant)
    embd, out = _weights(vocab, variant)

    hybrid = variant in selftest_hybrid.VARIANTS
    arch = "gemma3" if variant == "swa" else selftest_hybrid.ARCH if hybrid else "llama"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"frank-selftest-{variant}")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(ctx_train)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(SWA["blocks"] if variant == "swa" else
                      selftest_hybrid.block_count(variant) if hybrid else N_LAYER)
    w.add_feed_forward_length(N_FF)
    if variant == "swa":
        _swa_shape(w)
    elif hybrid:
        selftest_hybrid.add_shape(w, variant)
    else:
        heads = selftest_positional.HEADS if variant == "positional" else N_HEAD
        w.add_head_count(heads)
        w.add_head_count_kv(heads)
        w.add_rope_dimension_count(N_EMBD // heads)
    w.add_layer_norm_rms_eps(1e-5)
    if variant == "vision":
        w.add_rope_freq_base(selftest_vision.ROPE_FREQ_BASE)
    if variant == "echo":
        w.add_rope_freq_base(selftest_echo.ROPE_FREQ_BASE)
    if variant in PARALLEL:
        w.add_rope_freq_base(selftest_parallel.ROPE_FREQ_BASE)
    w.add_vocab_size(len(vocab))

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab["<|endoftext|>"])
    end = END_OF_TURN.get(variant, "<|im_end|>")
    w.add_eos_token_id(vocab[end])
    w.add_eot_token_id(vocab[end])
    w.add_pad_token_id(vocab["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(chat_template(variant))

    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", out)
    if variant == "swa":
        for i in range(SWA["blocks"]):
            _add_gemma3_block(w, i)
    if hybrid:
        first = chain_units(variant)
        selftest_hybrid.add_blocks(w, variant, N_EMBD, N_FF, [first + d for d in range(10)])
    for i in range(0 if variant == "swa" or hybrid else N_LAYER):
        _add_block(w, i, _attention(variant, vocab) if i == 0 else None)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _vocab(variant: str) -> Vocab:
    """The variant's tokens: the shared ones, its words, then its special tokens; a family that
    makes parallel calls adds its second city's word and the question's marker last."""
    if variant not in PARALLEL:
        return Vocab(_extra_words(variant), FAMILY_SPECIALS.get(variant))
    return Vocab(_extra_words(variant) + (selftest_parallel.SECOND,),
                 {**FAMILY_SPECIALS.get(variant, {}), selftest_parallel.ASKED: 4})


def _attention(variant: str, vocab: Vocab):
    """Block 0's attention matrices where the variant has a head that does something."""
    if variant in PARALLEL:
        return selftest_parallel.attention(N_EMBD, PARALLEL[variant], vocab,
                                           _states(vocab, variant))
    if variant == "vision":
        return selftest_vision.attention(N_EMBD)
    if variant == "echo":
        states = _states(vocab, variant)
        return selftest_echo.attention(N_EMBD, [states[vocab[m]] for m in selftest_echo.MARKERS])
    return selftest_positional.attention(N_EMBD) if variant == "positional" else None


def _extra_words(variant: str) -> tuple[str, ...]:
    """The words a variant writes beyond the shared ones, appended after them."""
    if variant in ("flat", "positional"):
        return FLAT_WORDS
    if variant in CHAINS:
        return CHAIN_WORDS
    if variant == "qwen3_xml_text":
        return (XML_TEXT,)
    if variant == "qwen3_xml":
        return XML_PIECES + XML_JOB
    if variant == "kimi_k2_text":
        return (KIMI_TEXT,)
    if variant == "mistral_text":
        return (MISTRAL_TEXT,)
    if variant == "glm45":
        return (GLM_WORD,)
    if variant == "glm45_text":
        return (GLM_TEXT,)
    if variant == "harmony":
        return ("assistant", "commentary", " to=functions.")
    if variant == "harmony_text":
        return (HARMONY_TEXT,)
    if variant == "deepseek_v31_text":
        return (DS_TEXT,)
    return COLOUR_WORDS if variant == "vision" else ()


def _add_block(w, i: int, attention=None) -> None:
    """A transformer block that adds nothing to the residual stream, or only what the given
    attention matrices (Q, K, V, output) add."""
    import numpy as np

    zero = {
        "attn_q": (N_EMBD, N_EMBD),
        "attn_k": (N_EMBD, N_EMBD),
        "attn_v": (N_EMBD, N_EMBD),
        "attn_output": (N_EMBD, N_EMBD),
        "ffn_gate": (N_FF, N_EMBD),
        "ffn_up": (N_FF, N_EMBD),
        "ffn_down": (N_EMBD, N_FF),
    }
    w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    given = dict(zip(("attn_q", "attn_k", "attn_v", "attn_output"), attention or ()))
    for name, shape in zero.items():
        w.add_tensor(f"blk.{i}.{name}.weight", given.get(name, np.zeros(shape, dtype=np.float32)))


def _swa_shape(w) -> None:
    """Gemma 3's attention keys: heads wider than embedding / heads, and the window."""
    w.add_head_count(SWA["heads"])
    w.add_head_count_kv(SWA["heads"])
    w.add_key_length(SWA["head_dim"])
    w.add_value_length(SWA["head_dim"])
    w.add_sliding_window(SWA["window"])


def _add_gemma3_block(w, i: int) -> None:
    """A Gemma 3 block that adds nothing: zero projections, whose output its post-norms keep
    at zero (Gemma's norm weights are stored with the 1 added)."""
    import numpy as np

    qkv = SWA["heads"] * SWA["head_dim"]
    zero = {"attn_q": (qkv, N_EMBD), "attn_k": (qkv, N_EMBD), "attn_v": (qkv, N_EMBD),
            "attn_output": (N_EMBD, qkv), "ffn_gate": (N_FF, N_EMBD), "ffn_up": (N_FF, N_EMBD),
            "ffn_down": (N_EMBD, N_FF)}
    norms = {"attn_norm": N_EMBD, "attn_q_norm": SWA["head_dim"], "attn_k_norm": SWA["head_dim"],
             "post_attention_norm": N_EMBD, "ffn_norm": N_EMBD, "post_ffw_norm": N_EMBD}
    for name, size in norms.items():
        w.add_tensor(f"blk.{i}.{name}.weight", np.ones(size, dtype=np.float32))
    for name, shape in zero.items():
        w.add_tensor(f"blk.{i}.{name}.weight", np.zeros(shape, dtype=np.float32))


def default_cache_dir() -> pathlib.Path:
    user = os.environ.get("USER") or str(os.getuid() if hasattr(os, "getuid") else "user")
    return pathlib.Path(tempfile.gettempdir()) / f"pytest-frank-models-{user}"


def model_path(variant: str = "default", cache_dir=None) -> pathlib.Path:
    """The variant's GGUF in a cache dir, written on first use.

    The file name carries a digest of the generator's inputs, so a changed generator never
    serves a stale file. Writes go to a temp name then os.replace, so racing processes are safe.
    """
    return _cached(f"selftest-{variant}", variant, lambda tmp: write_model(tmp, variant),
                   cache_dir)


def projector_path(cache_dir=None) -> pathlib.Path:
    """The self-test projector GGUF (the one `vision` sees with), cached as model_path is."""
    return _cached("selftest-mmproj", "mmproj",
                   lambda tmp: selftest_vision.write_projector(tmp, N_EMBD), cache_dir)


def _cached(stem: str, key: str, write, cache_dir) -> pathlib.Path:
    folder = pathlib.Path(cache_dir) if cache_dir else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{stem}-{_digest(key)}.gguf"
    if target.exists():
        return target
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _digest(key: str) -> str:
    import hashlib

    # Every generator: the vision module writes part of the model and the whole projector, the
    # positional module the positional head, the hybrid module the hybrids' blocks, the echo
    # module the echo head.
    files = (__file__, selftest_vision.__file__, selftest_positional.__file__,
             selftest_hybrid.__file__, selftest_echo.__file__, selftest_parallel.__file__)
    source = b"".join(pathlib.Path(f).read_bytes() for f in files)
    return hashlib.sha256(source + key.encode()).hexdigest()[:12]


def main(argv) -> int:
    about = __doc__.splitlines()[0]
    parser = argparse.ArgumentParser(prog="frank selftest-model", description=about)
    parser.add_argument("path", help="where to write the GGUF")
    parser.add_argument("--variant", default="default", choices=VARIANTS)
    parser.add_argument("--mmproj", metavar="PATH",
                        help="also write the self-test projector GGUF here (--mmproj for "
                             "llama-server; the vision variant sees with it)")
    args = parser.parse_args(argv)
    print(write_model(args.path, args.variant))
    if args.mmproj:
        print(selftest_vision.write_projector(args.mmproj, N_EMBD))
    return 0
