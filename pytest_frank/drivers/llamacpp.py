"""llama.cpp's llama-server."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

from pytest_frank.base import redact
from pytest_frank.drivers.base import Driver, reply_claims
from pytest_frank.drivers.counting import Counting
from pytest_frank.drivers.launch import Launch
from pytest_frank.drivers.metrics import Metrics
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.drivers.openai_chat import ChatWire
from pytest_frank.drivers.template import Template
from pytest_frank.local import stay_up
from pytest_frank.local.launch import DEFAULT_CTX_SIZE
from pytest_frank.outcome.verdict import FLEET, SERVER, Setting, Spelling, Wording
from pytest_frank.serve.flags import Flag, Need, ServeFlags
from pytest_frank.transport.metrics import LLAMACPP_SPEC
from pytest_frank.transport.http import Exchange
from pytest_frank.transport.wire import Reply

# llama-server's flags as fleet.yaml `launch:` keys: advice for a launched endpoint names the keys.
ALIAS = Setting("--alias", "launch.alias")
THREADS = Setting("--threads", "launch.threads")
PARALLEL = Setting("--parallel", "launch.parallel")
CTX_SIZE = Setting("--ctx-size", "launch.ctx_size")
KV_UNIFIED = Setting("--kv-unified", "launch.kv_unified: true", switch=True)
METRICS = Setting("--metrics", "launch.metrics: true", switch=True)
JINJA = Setting("--jinja", "launch.jinja: true", switch=True)
REASONING_FORMAT = Setting("--reasoning-format", "launch.reasoning_format")
MMPROJ = Setting("--mmproj", "launch.mmproj")
TEMPLATE = Setting("--chat-template-file", "launch.chat_template_file")
DRAFT_MODEL = Setting("--spec-draft-model", "launch.draft_model")
DRAFT_MAX = Setting("--spec-draft-n-max", "launch.draft_max")
SPEC_TYPE = Setting("--spec-type", "launch.spec_type")
# What lets a slot continue a conversation from its cache (common/arg.cpp, common.h): a hybrid
# (recurrent) or sliding-window model can only go back to a saved checkpoint, --ctx-checkpoints
# per slot (32); --swa-full keeps the whole window's KV instead; --cache-ram MiB (8192) keeps the
# prompts of slots taken by other requests in host memory to restore them. Without a checkpoint
# llama-server logs "forcing full prompt re-processing due to lack of cache data" (xllamacpp
# 2026.10.11549 on selftest:hybrid_plain with --ctx-checkpoints 0: turn 2 of an agent loop
# cached 0 of its 1906 prompt tokens, 1064 with the default 32).
CTX_CHECKPOINTS = Setting("--ctx-checkpoints", "launch.ctx_checkpoints")
SWA_FULL = Setting("--swa-full")  # named, never asked of a launch (no launch key)
CACHE_RAM = Setting("--cache-ram")
# Past the training context: src/llama-context.cpp re-adjusts n_ctx_train to --yarn-orig-ctx /
# rope scale under custom YaRN scaling (llama.cpp PR 28030, for issue 17459), so
# `--rope-scaling yarn --rope-scale F` lifts the slot cap; older builds also need
# `--override-kv <arch>.context_length=int:N`.
ROPE_SCALING = Setting("--rope-scaling")
ROPE_SCALE = Setting("--rope-scale")
START = Wording("start llama-server with ", "set in fleet.yaml ")
# --spec-type draft-mtp on a GGUF with nextn_predict_layers 0: llama_init_from_model warns
# "context type MTP requested but model doesn't contain MTP layers", then the errors say only
# "failed to create MTP context" and "exiting due to model loading error" (observed with
# xllamacpp 2026.10.11549 on selftest:hybrid_plain).
NO_MTP_HEAD = "context type MTP requested but model doesn't contain MTP layers"


class LlamaCppLaunch(Launch):
    """llama-server started from its command line, by `frank launch` or by fleet.yaml
    `launch:` (pytest_frank.local)."""

    def started_by(self, endpoint: Any) -> Spelling:
        """`launch:` keys for a server the battery launches; `frank launch`'s flags for one a
        `frank launch` of this machine serves (its record, pytest_frank.local.stay_up);
        llama-server's flags otherwise."""
        if getattr(endpoint, "launch", None):
            return FLEET
        return stay_up.FRANK_LAUNCH if stay_up.serves(getattr(endpoint, "url", None)) else SERVER

    launch_settings = {"alias": ALIAS, "ctx_size": CTX_SIZE, "parallel": PARALLEL,
                       "kv_unified": KV_UNIFIED, "metrics": METRICS, "jinja": JINJA,
                       "reasoning_format": REASONING_FORMAT, "mmproj": MMPROJ,
                       "chat_template_file": TEMPLATE, "draft_model": DRAFT_MODEL,
                       "draft_max": DRAFT_MAX, "spec_type": SPEC_TYPE, "threads": THREADS}
    launch_defaults = {"ctx_size": DEFAULT_CTX_SIZE, "parallel": 1, "metrics": True,
                       "jinja": True}

    def backend(self, payloads: dict, log: str) -> tuple[str, str] | None:
        # The load log (info level): common_params_print_info's device_info lists the devices
        # ("  - CPU : ...", "  - CUDA0 : ..."); load_tensors says "offloaded N/M layers to GPU".
        offloaded = re.findall(r"offloaded (\d+)/(\d+) layers to GPU", log)
        if offloaded:
            n, total = offloaded[-1]
            return ("gpu" if int(n) else "cpu"), f"the log: offloaded {n}/{total} layers to GPU"
        listed = re.findall(r"device_info:\s*\n((?:.*\s-\s+\S+\s*:.*\n)+)", log)
        names = re.findall(r"\s-\s+(\S+)\s*:", listed[-1]) if listed else []
        if names:
            gpu = any(not n.upper().startswith("CPU") for n in names)
            return ("gpu" if gpu else "cpu"), f"the log's device_info: {', '.join(names)}"
        return None

    def start_failure(self, log: str) -> str | None:
        if NO_MTP_HEAD in log:
            return (f"the model file has no MTP head (nextn_predict_layers 0), so "
                    f"{SPEC_TYPE('draft-mtp')} has nothing to draft from (the log: "
                    f"\"{NO_MTP_HEAD}\")")
        return None

    # -- the serve command line: llama-server and ik_llama.cpp's, same spellings ----------------
    # Each rule with where llama.cpp says so: common/arg.cpp (the add_opt entry of the flag),
    # common/common.h (struct common_params defaults), tools/server/server*.cpp.
    serve_flags: ServeFlags = ServeFlags(
        programs=(("llama-server",),),
        example="llama-server",
        flags={
            "model": Flag(("--model", "-m")),
            "ctx": Flag(("--ctx-size", "-c")),
            # arg.cpp {"-np", "--parallel"}: "number of server slots (default: -1 = auto)";
            # server.cpp: n_parallel < 0 -> 4 slots with kv_unified = true
            "parallel": Flag(("--parallel", "-np")),
            # arg.cpp {"-kvu", "--kv-unified"}, {"-no-kvu", "--no-kv-unified"}
            "kv_unified": Flag(("--kv-unified", "-kvu"), "none", ("-no-kvu", "--no-kv-unified")),
            # arg.cpp {"-ub", "--ubatch-size"} (common.h n_ubatch = 512) and {"--swa-full"}:
            # they size the sliding-window KV cache (src/llama-kv-cache-iswa.cpp)
            "ubatch": Flag(("--ubatch-size", "-ub")),
            "swa_full": Flag(("--swa-full",), "none"),
            # arg.cpp {"-a", "--alias"}: "set model name aliases, comma-separated"
            "alias": Flag(("--alias", "-a")),
            "port": Flag(("--port",)),
            "host": Flag(("--host",)),
            # common.h use_jinja = true (on by default); arg.cpp {"--jinja"}, {"--no-jinja"}
            "jinja": Flag(("--jinja",), "none", ("--no-jinja",)),
            "reasoning_format": Flag(("--reasoning-format",)),
            # common.h endpoint_metrics = false: /metrics answers 501 without --metrics
            "metrics": Flag(("--metrics",), "none"),
            "mmproj": Flag(("--mmproj", "-mm"), off=("--no-mmproj",)),
            # arg.cpp {"-md", "--model-draft"} is a live alias of --spec-draft-model
            "draft": Flag(("--model-draft", "--spec-draft-model", "--draft-model", "-md")),
            # arg.cpp {"--spec-type"}: a comma-separated list, appended to speculative.types
            "spec_type": Flag(("--spec-type",)),
            "cache_k": Flag(("--cache-type-k", "-ctk")),
            "cache_v": Flag(("--cache-type-v", "-ctv")),
            "chat_template_file": Flag(("--chat-template-file",)),
            "chat_template": Flag(("--chat-template",)),
            "grammar_file": Flag(("--grammar-file",)),
            # common.h cache_prompt = true
            "cache_prompt": Flag(("--cache-prompt",), "none", ("--no-cache-prompt",)),
            "api_key": Flag(("--api-key",)),
            "gpu_layers": Flag(("--gpu-layers", "--n-gpu-layers", "-ngl")),
            "threads": Flag(("--threads", "-t")),
            "draft_max": Flag(("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n")),
            "draft_min": Flag(("--spec-draft-n-min", "--draft-min", "--draft-n-min")),
        },
        # common.h: port = 8080, hostnames = {"127.0.0.1"}, cache_type_k/v = GGML_TYPE_F16
        defaults={"port": "8080", "host": "127.0.0.1", "cache_k": "f16", "cache_v": "f16"},
        # arg.cpp arg_removed: "the argument has been removed. use --spec-draft-n-max or
        # --spec-ngram-mod-n-max" (and -n-min); llama-server exits with that error
        removed={"--draft-max": "--spec-draft-n-max N", "--draft": "--spec-draft-n-max N",
                 "--draft-n": "--spec-draft-n-max N", "--draft-min": "--spec-draft-n-min N",
                 "--draft-n-min": "--spec-draft-n-min N"},
        needs={
            # tools/server oaicompat_chat_params_parse(): without use_jinja a request with tools
            # throws "tools param requires --jinja flag" (HTTP 500)
            "tools": (Need("jinja", "tools need the chat template to render them (without "
                           "--jinja: HTTP 500 'tools param requires --jinja flag')",
                           "add --jinja (pin it even where the build defaults it on)"),),
            "agent": (Need("jinja", "an agent step sends tools and role tool results, which only "
                           "the chat template renders (without --jinja: HTTP 500 'tools param "
                           "requires --jinja flag')", "add --jinja (pin it even where the build "
                           "defaults it on)"),),
            # common/common.h struct common_params: reasoning_format =
            # COMMON_REASONING_FORMAT_DEEPSEEK (the help says "default: auto", which is the same
            # split); only `none` leaves the thinking in content.
            "reasoning": (Need("reasoning_format", "the thinking then stays inside content",
                               "--reasoning-format deepseek (or auto)",
                               bad=("none",), default_serves="llama-server splits the "
                               "thinking out into reasoning_content by default (deepseek); "
                               "builds before that default kept it in content"),),
            # reasoning_effort reaches the template as a chat template kwarg: Jinja only
            "reasoning_effort": (Need("jinja", "the chat template reads reasoning_effort only "
                                      "with --jinja", "add --jinja"),),
            "spec_decode": (
                # common.h speculative.types defaults to {NONE}: a draft model alone is loaded
                # and never drafts (/slots speculative false)
                Need("spec_type", "a draft model without --spec-type is loaded but never used",
                     "add --spec-type draft-mtp (an -mtp GGUF) or draft-simple with "
                     "--spec-draft-model FILE", bad=("none",)),
                Need("metrics", "the acceptance counters live on /metrics, which is off "
                     "without --metrics", "add --metrics"),
            ),
            "vision": (Need("mmproj", "images need the vision projector",
                            "add --mmproj FILE (the model's projector GGUF)"),),
        },
        files=("model", "mmproj", "draft", "chat_template_file", "grammar_file"),
        gguf=("model", "mmproj", "draft"),
        alias_separator=",",
        # src/llama-context.cpp: n_ctx_seq = kv_unified ? n_ctx : n_ctx / n_seq_max
        slots_split_ctx=True,
        # ggml/CMakeLists.txt option GGML_CUDA_FA_ALL_QUANTS (FlashAttention kernels for every
        # KV quant; without it a quantized cache falls off the fast path)
        quantized_kv_build="GGML_CUDA_FA_ALL_QUANTS",
        # "draft-mtp" is llama.cpp's name (COMMON_SPECULATIVE_TYPE_DRAFT_MTP); "mtp" is none of
        # llama.cpp's, kept so a fork spelling it so still reads as MTP
        mtp_spec_values=("draft-mtp", "mtp"),
        native_binary=True,
    )


class LlamaCppCounting(Counting):
    """/tokenize counts a text, /apply-template renders a conversation as the chat route
    would (llama.cpp has no route that counts a conversation whole)."""

    def tokenize_request(self, model: str, text: str,
                         special: bool = False) -> tuple[str, dict] | None:
        # {"tokens": [...]}, no template; special tokens in the text are parsed either way, and
        # add_special adds the BOS the chat route adds to a rendered prompt (where the model has
        # one): so counted, a rendered prompt is the chat's usage.prompt_tokens exactly.
        return "/tokenize", {"content": text, **({"add_special": True} if special else {})}

    def token_count(self, payload: Any) -> int | None:
        tokens = payload.get("tokens") if isinstance(payload, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    # tools/server: POST /apply-template takes the chat body and answers {"prompt": ...}, the
    # text the chat route would tokenize (the generation prompt included)
    render_route = "/apply-template"

    def render_request(self, model: str, messages: list[dict],
                       tools: list[dict] | None = None) -> tuple[str, dict] | None:
        return self.render_route, {"messages": messages, **({"tools": tools} if tools else {})}

    def rendered_prompt(self, payload: Any) -> str | None:
        prompt = payload.get("prompt") if isinstance(payload, dict) else None
        return prompt if isinstance(prompt, str) else None


class LlamaCppTemplate(Template):
    """/props shows the served chat template, its end-of-turn token and its caps."""

    # /props chat_template_caps (llama.cpp's own reading of the template), else the template text
    _CAPS = {"tools": ("supports_tools", "tools"),
            "reasoning_effort": ("supports_reasoning_effort", "reasoning_effort")}

    def caps(self, payloads: dict) -> dict[str, tuple[bool, str]]:
        props = payloads.get("/props") or {}
        caps, template = props.get("chat_template_caps"), props.get("chat_template")
        found = {}
        for claim, (cap, word) in self._CAPS.items():
            if isinstance(caps, dict) and isinstance(caps.get(cap), bool):
                found[claim] = (caps[cap], f"/props chat_template_caps.{cap} "
                                           f"{str(caps[cap]).lower()}")
            elif isinstance(template, str) and template:
                said = word in template
                found[claim] = (said, f"/props chat_template {'reads' if said else 'never names'}"
                                      f" {word}")
        return found

    # A template that thinks opens a block (<think>, <seed:think>, <|START_THINKING|>), reads
    # the enable_thinking switch or renders reasoning_content / thinking in the history.
    _THINKING = re.compile(r"<[^<>\s]*think[^<>\s]*>|enable_thinking|reasoning_content|"
                          r"\bthinking\b", re.IGNORECASE)

    def thinks(self, payloads: dict) -> tuple[bool, str] | None:
        props = payloads.get("/props") or {}
        caps, template = props.get("chat_template_caps"), props.get("chat_template")
        if isinstance(caps, dict) and isinstance(caps.get("supports_thinking"), bool):
            said = str(caps["supports_thinking"]).lower()
            return caps["supports_thinking"], f"/props chat_template_caps.supports_thinking {said}"
        if not isinstance(template, str) or not template:
            return None
        found = self._THINKING.search(template)
        if found:
            return True, f"/props chat_template reads {found.group(0)!r}"
        return False, ("/props chat_template names no thinking block, enable_thinking or "
                       "reasoning_content")

    # common/chat.cpp common_chat_templates_init(): a GGUF without tokenizer.chat_template (and
    # no --chat-template) gets CHATML_TEMPLATE_SRC, which /props chat_template shows verbatim
    fallback = (
        "{%- for message in messages -%}\n"
        "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
        "{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}\n"
        "  {{- '<|im_start|>assistant\n' -}}\n"
        "{%- endif -%}")
    fallback_line = "llama.cpp fell back to its built-in ChatML template, a guess"

    # The Jinja engine's trace (common/jinja): "While executing CallExpression at line 1, column
    # 106 in source:\n...and not loop.first %}{{- raise_exception(...", then a caret line (the
    # client may have folded the lines into one).
    _TEMPLATE_WHERE = re.compile(r"at line (\d+), column (\d+) in source:\s*(.+?)\s+\^", re.S)

    def raised_at(self, message: str | None) -> str | None:
        found = self._TEMPLATE_WHERE.search(message or "")
        if found is None:
            return None
        line, column, source = found.groups()
        return f"line {line}, column {column}: {source.strip()}"

    def served(self, payloads: dict) -> tuple[str | None, str | None]:
        props = payloads.get("/props") or {}
        template, eos = props.get("chat_template"), props.get("eos_token")
        return (template if isinstance(template, str) and template else None,
                eos if isinstance(eos, str) and eos else None)

    # The chat route reads an assistant message's reasoning_content into the template and
    # ignores `reasoning`: an agent's history came to 672 prompt tokens without reasoning and
    # with it in `reasoning`, 712 with it in reasoning_content (xllamacpp 2026.10.11549). Its
    # /v1/messages turns an assistant turn's thinking blocks into reasoning_content: the
    # self-test agent model's own turn sent back came to 1255 input tokens without its
    # thinking block, 1268 with it, on the same build.
    history_reasoning_read = ("reasoning_content", "thinking")
    # llama.cpp picks its parser from the served template, not a flag: a template holding all
    # of a family's markers gets that family's handler (calls parsed and, under tool_choice
    # "required", written by its grammar); any other template leaves such a call text in
    # content. Qwen3 XML: the Qwen3-Coder handler; a Hermes JSON template's grammar forces JSON
    # after <tool_call>, and an XML call without its <tool_call> opener stays text under either.
    # Kimi K2: its handler ("Kimi K2 Thinking"), which also wants the template's generation
    # prompt to end <|im_assistant|>assistant<|im_middle|>. Mistral: the Ministral 3 /
    # Magistral handler (a template with [CALL_ID] too, Mistral Small 3.2's, goes to the
    # autoparser instead). gpt-oss harmony: its GPT-OSS handler, for any template holding
    # <|channel|>, whose grammar wakes at "<|start|>assistant<|channel|>commentary to" (or
    # analysis). GLM 4.5: no handler of its own; the differential autoparser reads
    # the format from how the template renders a call, so the template must render calls with
    # <tool_call>, <arg_key> and <arg_value>; DeepSeek V3.1 the same, with its call markers and
    # <｜tool▁sep｜> (xllamacpp 2026.10.11549,
    # tests/claims/tools/test_tool_formats_real.py).
    call_family_markers = MappingProxyType({
        "qwen3_xml": ("<tool_call>", "<function=", "<parameter="),
        "kimi_k2": ("<|tool_calls_section_begin|>", "<|tool_call_begin|>"),
        "mistral": ("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"),
        "glm45": ("<tool_call>", "<arg_key>", "<arg_value>"),
        "harmony": ("<|channel|>",),
        "deepseek_v31": ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>")})

    def call_family(self, payloads: dict) -> tuple[str, str] | None:
        template = (payloads.get("/props") or {}).get("chat_template")
        if not isinstance(template, str):
            return None
        for family, markers in self.call_family_markers.items():
            if all(m in template for m in markers):
                return family, f"/props chat_template holds {', '.join(markers)}"
        return None


class LlamaCppMetrics(Metrics):
    """llama-server's /metrics (with --metrics), its /slots drafting flag, and the counts each
    reply carries in its own timings (drafting, the prompt served from the cache)."""

    off_statuses = (501,)  # /metrics answers 501 without --metrics
    spec_series = (LLAMACPP_SPEC,)
    load_series = ("llamacpp:requests_processing", "llamacpp:requests_deferred")
    speculative_source = "/slots speculative"
    # Each reply carries its own draft counts (timings.draft_n / draft_n_accepted, the JSON
    # answer under a grammar included: 135 drafted, 4 accepted on the self-test model drafting
    # itself, xllamacpp 2026.10.11549); /metrics counts them server-wide.
    draft_counts_from = "reply"
    draft_counts_where = "each reply's timings.draft_n / draft_n_accepted"

    def speculative_live(self, payloads: dict) -> bool | None:
        slots = payloads.get("/slots")
        flags = [s.get("speculative") for s in slots or [] if isinstance(s, dict)]
        return any(flags) if flags and all(isinstance(f, bool) for f in flags) else None

    def cached_prompt(self, reply: Reply) -> tuple[int, int, str] | None:
        # timings: cache_n tokens reused, prompt_n evaluated; usage says the same on new builds
        timings = reply.engine.get("timings") if isinstance(reply.engine, dict) else None
        cached, evaluated = (timings or {}).get("cache_n"), (timings or {}).get("prompt_n")
        if isinstance(cached, int) and isinstance(evaluated, int) and cached + evaluated > 0:
            return cached, cached + evaluated, "timings.cache_n / prompt_n"
        return super().cached_prompt(reply)


class LlamaCppDriver(OpenAIDriver):
    name = "llamacpp"
    label = "llama.cpp server"
    owned_by = "llamacpp"
    metrics_prefix = "llamacpp:"
    health_path = "/health"
    build_route = ("/props", "build_info")  # "b<number>-<commit>"
    # A build outside llama.cpp's git checkout (xllamacpp's wheels, some distro packages) has
    # neither number nor commit compiled in.
    unversioned_build = "b0-unknown"
    flags = {"alias": ALIAS, "parallel": PARALLEL, "ctx": CTX_SIZE, "kv_unified": KV_UNIFIED,
             "metrics": METRICS, "jinja": JINJA, "reasoning_format": REASONING_FORMAT,
             "mmproj": MMPROJ, "template": TEMPLATE, "draft_model": DRAFT_MODEL,
             "draft_max": DRAFT_MAX, "spec_type": SPEC_TYPE, "ctx_checkpoints": CTX_CHECKPOINTS,
             "swa_full": SWA_FULL, "cache_ram": CACHE_RAM, "rope_scaling": ROPE_SCALING,
             "rope_scale": ROPE_SCALE, "threads": THREADS}
    start = START

    launch: LlamaCppLaunch = LlamaCppLaunch()
    counting = LlamaCppCounting()
    metrics = LlamaCppMetrics()

    def _is_loading(self, ex: Exchange) -> bool:
        # While the model loads, every route answers 503 "Loading model".
        return ex.status == 503 and "loading model" in ex.body.lower()

    _names_served_model = True  # the alias, whatever the request's `model` said

    def reply_disagrees(self, body: str, payloads: dict) -> tuple[list[tuple[str, str]], list[str]]:
        """Beside the model: the build the reply names (system_fingerprint) against /props
        build_info, and the reply's usage against llama.cpp's own count in the same reply
        (timings.predicted_n), which it sends alike in a whole answer and a stream's last chunk."""
        found, compared = super().reply_disagrees(body, payloads)
        claims = reply_claims(body)
        build = (payloads.get("/props") or {}).get("build_info")
        said = claims.get("system_fingerprint")
        if isinstance(build, str) and build and said is not None:
            compared.append("the build the reply names against /props build_info")
            if said != build:
                found.append((f"/props build_info is {build!r}",
                              f"the reply's system_fingerprint is {redact.cut(str(said), 40)!r}"))
        usage, timings = claims.get("usage"), claims.get("timings")
        counted = usage.get("completion_tokens") if isinstance(usage, dict) else None
        own = timings.get("predicted_n") if isinstance(timings, dict) else None
        if isinstance(own, int) and not isinstance(own, bool) and counted is not None:
            compared.append("the reply's usage against llama.cpp's own timings.predicted_n")
            if counted != own:
                found.append((f"llama.cpp's own count in the reply (timings.predicted_n) is {own}",
                              f"its usage.completion_tokens is {redact.cut(repr(counted), 40)}"))
        # the prompt tokens the cache held: one counter in llama.cpp, sent in both places
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        held = timings.get("cache_n") if isinstance(timings, dict) else None
        if isinstance(held, int) and not isinstance(held, bool) and cached is not None:
            compared.append("the reply's cached prompt tokens against llama.cpp's own "
                            "timings.cache_n")
            if cached != held:
                found.append((f"llama.cpp's own count in the reply (timings.cache_n) is {held}",
                              f"its usage.prompt_tokens_details.cached_tokens is "
                              f"{redact.cut(repr(cached), 40)}"))
        return found, compared

    def served_ids(self, payload: Any) -> list[str]:
        ids = super().served_ids(payload)
        for card in payload["data"]:
            aliases = card.get("aliases") if isinstance(card, dict) else None
            if isinstance(aliases, list):
                ids += [a for a in aliases if isinstance(a, str) and a not in ids]
        return ids

    _shapes = {
        **Driver._shapes,
        "/props": {"type": "object", "properties": {
            "total_slots": {"type": "integer"}, "model_path": {"type": "string"},
            "modalities": {"type": "object"},
            "default_generation_settings": {"type": "object",
                                            "properties": {"n_ctx": {"type": "integer"}}}}},
        "/slots": {"type": "array", "items": {"type": "object", "properties": {
            "n_ctx": {"type": "integer"}, "speculative": {"type": "boolean"}}}},
    }
    slot_routes = ("/props", "/slots", "/v1/models")  # the model card's meta: n_ctx_train
    # tools/server/server-context.cpp load_model(): n_ctx_slot = llama_n_ctx_seq(ctx), and
    # "if (n_ctx_slot > n_ctx_train) { SRV_WRN(... - capping); n_ctx_slot = n_ctx_train; }"
    ctx_train_cap = "llama.cpp caps every slot at the model's training context"
    # server-context.cpp: 400 exceed_context_size_error "request (7519 tokens) exceeds the
    # available context size (1024 tokens), try increasing it" (with n_prompt_tokens, n_ctx)
    _context_refused = re.compile(r"available context size \((\d+) tokens\)")

    def ctx_train(self, payloads: dict) -> int | None:
        cards = (payloads.get("/v1/models") or {}).get("data") if isinstance(
            payloads.get("/v1/models"), dict) else None
        found = [(c.get("meta") or {}).get("n_ctx_train") for c in cards or []
                 if isinstance(c, dict) and isinstance(c.get("meta"), dict)]
        props = payloads.get("/props")
        found.append(props.get("n_ctx_train") if isinstance(props, dict) else None)
        return next((n for n in found if isinstance(n, int) and not isinstance(n, bool)
                     and n > 0), None)

    def slot_shape(self, payloads: dict) -> tuple[int | None, int | None, str]:
        props, slots = payloads.get("/props") or {}, payloads.get("/slots")
        count = props.get("total_slots")
        ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        source = "/props total_slots, default_generation_settings.n_ctx"
        if isinstance(slots, list) and slots:
            count = count or len(slots)
            ctx = ctx or max(s.get("n_ctx", 0) for s in slots if isinstance(s, dict))
            source += "; /slots"
        if not ctx:  # a proxy in front that serves no /props or /slots, or vLLM's model card
            _, ctx, source = super().slot_shape(payloads)
        return count, ctx or None, source

    # -- sizing and load ------------------------------------------------------------------------
    load_slots_route = "/slots"  # is_processing per slot
    # tools/server: a non-streamed request's HTTP thread checks its connection only when
    # server_response::recv_with_timeout(..., HTTP_POLLING_SECONDS = 1) times out, and every
    # result sent to any request (another slot's token, a /slots or /metrics answer) restarts
    # that wait; the server stops a request given up on once it has been left a second alone.
    abandon_quiet_s = 1.5

    def busy_slots(self, payload: Any) -> tuple[int, int] | None:
        slots = [s for s in payload if isinstance(s, dict)] if isinstance(payload, list) else []
        flags = [s.get("is_processing") for s in slots]
        if not flags or not all(isinstance(f, bool) for f in flags):
            return None
        return sum(f is True for f in flags), len(flags)

    def decoded_tokens(self, payload: Any) -> int | None:
        # /slots: "next_token": [{"n_decoded": ...}] per slot (a dict on older builds)
        found = []
        for slot in payload if isinstance(payload, list) else []:
            if not isinstance(slot, dict) or slot.get("is_processing") is not True:
                continue
            nxt = slot.get("next_token")
            nxt = nxt[0] if isinstance(nxt, list) and nxt else nxt
            n = nxt.get("n_decoded") if isinstance(nxt, dict) else None
            if isinstance(n, int) and not isinstance(n, bool):
                found.append(n)
        return sum(found) if found else None

    def served_model_path(self, payloads: dict) -> str | None:
        path = (payloads.get("/props") or {}).get("model_path")
        return path if isinstance(path, str) and path else None

    # -- generation, vision ---------------------------------------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    vision_advert_path = "/props"
    _no_projector_markers = ("image input is not supported",)

    def uncached(self) -> dict:
        # A slot reuses the cached prefix of its last prompt and evaluates only the rest, in
        # other batches, so the logits move: on SmolLM2 a 945-token prompt's first token came
        # back at -1.8504 from the cache and -1.9383 every time without it (bit for bit).
        return {"extra_body": {"cache_prompt": False}}

    def vision_advertised(self, payload: Any) -> bool | None:
        modalities = payload.get("modalities") if isinstance(payload, dict) else None
        return bool(modalities.get("vision")) if isinstance(modalities, dict) else None

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    honours_named_tool_choice = False  # the object form is silently treated as "auto"
    template = LlamaCppTemplate()
    # /v1/chat/completions takes an image's bare base64 as well as a data URL, and n: 1 only:
    # n: 2 is its 400 "Field 'n': Value must be between 1 <= value <= 1, but got 2" (xllamacpp
    # 2026.10.11549); the penalties are documented.
    _chat_wire = ChatWire(image_forms=("data_url", "base64"),
                         sampling_fields=("temperature", "top_p", "presence_penalty",
                                          "frequency_penalty"))
    # Observed on xllamacpp 2026.10.11549: tool_choice "required" without tools, or with
    # tools [], answers 200 with a plain answer (an unknown tool_choice is its 400 "Invalid
    # tool_choice"); a json_schema format without a name, without a schema, with strict "yes"
    # or a schema "x" answers 200 (the first three held to some JSON, the last unconstrained).
    lenient_requests = frozenset({"required_without_tools", "required_empty_tools",
                                  "format_no_name", "format_no_schema", "format_strict_text",
                                  "format_schema_text"})
    # Observed on xllamacpp 2026.10.11549 against openai 3.63's and anthropic 2.17's types: its
    # Messages stream opens a thinking block without `signature` and a tool_use block without
    # `input` (the SDK's accumulator fills both in); its Responses replies leave out the echo of
    # the request (tools, tool_choice, parallel_tool_calls), two usage details, and in the
    # stream every event's sequence_number and output/content index, the logprobs of text
    # events, and the created_at, model and output of the opening response. Codex reads the
    # stream by item ids and copes.
    contract_gaps = MappingProxyType({
        "messages": ("content_block_start:content_block.signature",
                     "content_block_start:content_block.input"),
        "responses": ("*:sequence_number", "*:output_index", "*:content_index",
                      "response.output_text.*:logprobs",
                      "reply:tools", "reply:tool_choice", "reply:parallel_tool_calls",
                      "*:response.tools", "*:response.tool_choice",
                      "*:response.parallel_tool_calls",
                      "*usage.input_tokens_details.cache_write_tokens",
                      "*usage.output_tokens_details",
                      "response.created:response.created_at", "response.created:response.model",
                      "response.created:response.output",
                      "response.in_progress:response.created_at",
                      "response.in_progress:response.model",
                      "response.in_progress:response.output",
                      "response.content_part.*:part.annotations"),
    })
