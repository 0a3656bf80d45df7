"""llama.cpp's llama-server."""

from __future__ import annotations

from pytest_frank import metrics
from pytest_frank.drivers.base import Driver
from pytest_frank.serve.flags import Flag, Need, ServeFlags
from pytest_frank.verdict import Phrase, Setting, Wording

# llama-server's flags as fleet.yaml `launch:` keys: advice for a launched endpoint names the keys.
ALIAS = Setting("--alias", "launch.alias")
PARALLEL = Setting("--parallel", "launch.parallel")
CTX_SIZE = Setting("--ctx-size", "launch.ctx_size")
KV_UNIFIED = Setting("--kv-unified", "launch.kv_unified: true")
METRICS = Setting("--metrics", "launch.metrics: true")
JINJA = Setting("--jinja", "launch.jinja: true")
REASONING_FORMAT = Setting("--reasoning-format", "launch.reasoning_format")
MMPROJ = Setting("--mmproj", "launch.mmproj")
TEMPLATE = Setting("--chat-template-file", "launch.chat_template_file")
DRAFT_MODEL = Setting("--spec-draft-model", "launch.draft_model")
DRAFT_MAX = Setting("--spec-draft-n-max", "launch.draft_max")
SPEC_TYPE = Setting("--spec-type", "launch.draft_model (a spec type is set with it)")
START = Wording("start llama-server with ", "set in fleet.yaml ")


class LlamaCppDriver(Driver):
    name = "llamacpp"
    label = "llama.cpp server"
    owned_by = "llamacpp"
    metrics_prefix = "llamacpp:"
    health_path = "/health"
    alias_flag = "llama-server --alias"
    build_route = ("/props", "build_info")  # "b<number>-<commit>"

    def is_loading(self, ex):
        # While the model loads, every route answers 503 "Loading model".
        return ex.status == 503 and "loading model" in ex.body.lower()

    def served_ids(self, payload):
        ids = super().served_ids(payload)
        for card in payload["data"]:
            aliases = card.get("aliases") if isinstance(card, dict) else None
            if isinstance(aliases, list):
                ids += [a for a in aliases if isinstance(a, str) and a not in ids]
        return ids

    def alias_fix(self, alias, served):
        names = ",".join(dict.fromkeys([*served, alias]))
        return Phrase("add it to ", ALIAS, ", keeping the names served now: ", ALIAS(names))

    shapes = {
        **Driver.shapes,
        "/props": {"type": "object", "properties": {
            "total_slots": {"type": "integer"}, "model_path": {"type": "string"},
            "modalities": {"type": "object"},
            "default_generation_settings": {"type": "object",
                                            "properties": {"n_ctx": {"type": "integer"}}}}},
        "/slots": {"type": "array", "items": {"type": "object", "properties": {
            "n_ctx": {"type": "integer"}, "speculative": {"type": "boolean"}}}},
    }
    slot_routes = ("/props", "/slots")
    parallel_flag = PARALLEL
    unify_hint = Phrase("add ", KV_UNIFIED, " (every slot then sees the whole ", CTX_SIZE, ")")

    def slots_fix(self, count, per_slot):
        if not per_slot:
            return Phrase(PARALLEL(count))
        # --ctx-size is the total, divided among the slots (unless --kv-unified).
        return Phrase(PARALLEL(count), " ", CTX_SIZE(count * per_slot), f" (each of the {count} "
                      f"slots keeps {per_slot} tokens; or ", PARALLEL(count), " ", KV_UNIFIED, ")")

    def slot_shape(self, payloads):
        props, slots = payloads.get("/props") or {}, payloads.get("/slots")
        count = props.get("total_slots")
        ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        source = "/props total_slots, default_generation_settings.n_ctx"
        if isinstance(slots, list) and slots:
            count = count or len(slots)
            ctx = ctx or max(s.get("n_ctx", 0) for s in slots if isinstance(s, dict))
            source += "; /slots"
        return count, ctx, source

    # -- sizing and load ------------------------------------------------------------------------
    load_series = ("llamacpp:requests_processing", "llamacpp:requests_deferred")
    load_slots_route = "/slots"  # is_processing per slot
    # tools/server: a non-streamed request's HTTP thread checks its connection only when
    # server_response::recv_with_timeout(..., HTTP_POLLING_SECONDS = 1) times out, and every
    # result sent to any request (another slot's token, a /slots or /metrics answer) restarts
    # that wait; the server stops a request given up on once it has been left a second alone.
    abandon_quiet_s = 1.5

    def tokenize_request(self, model, text):
        return "/tokenize", {"content": text}  # {"tokens": [...]}, no template, no BOS

    def token_count(self, payload):
        tokens = payload.get("tokens") if isinstance(payload, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    def busy_slots(self, payload):
        slots = [s for s in payload if isinstance(s, dict)] if isinstance(payload, list) else []
        flags = [s.get("is_processing") for s in slots]
        if not flags or not all(isinstance(f, bool) for f in flags):
            return None
        return sum(f is True for f in flags), len(flags)

    def served_model_path(self, payloads):
        path = (payloads.get("/props") or {}).get("model_path")
        return path if isinstance(path, str) and path else None

    vram_high_fix = Phrase("the usual causes: --model-draft/-md pointed at the -mtp GGUF (the "
                           "whole model loads twice; use ", SPEC_TYPE("draft-mtp"), " alone), mmap "
                           "off (--no-mmap, or an -ot/-ncmoe override that silently disables "
                           "it), or another process on the GPU")
    vram_low_fix = Phrase("the KV pool is smaller than configured: check the load log's n_ctx and "
                          "n_ctx_slot (a --fit or a lower ", CTX_SIZE, " clamps it), -ngl below all "
                          "layers (part of the model on the CPU), or --cache-type-k/-v smaller than "
                          "expect.vram")

    # -- generation, /metrics, speculative decoding, vision --------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    metrics_off_statuses = (501,)
    metrics_fix = Phrase(START, METRICS, " (and send the API key, if one is set)")
    spec_series = (metrics.LLAMACPP_SPEC,)
    spec_engage_fix = Phrase(START, SPEC_TYPE, ": draft-mtp for an -mtp GGUF (no ", DRAFT_MODEL,
                             "), draft-simple with ", DRAFT_MODEL("FILE"), "; a draft model "
                             "without ", SPEC_TYPE, " is loaded but never used (/slots: "
                             "speculative false)")
    spec_low_fix = Phrase("the draft does not fit the model (an MTP head or draft from another "
                          "quant or finetune); lower ", DRAFT_MAX, " or raise --spec-draft-p-min")
    spec_high_fix = Phrase("acceptance this close to 1 means the draft is the model itself: never "
                           "point --spec-draft-model/-md at the -mtp file (it loads the model "
                           "twice); use ", SPEC_TYPE("draft-mtp"), " alone")
    image_forms = ("data_url", "base64")
    vision_advert_path = "/props"
    no_projector_markers = ("image input is not supported",)
    vision_fix = Phrase(START, MMPROJ("FILE"), " (the model's vision projector GGUF)")
    prefix_cache_fix = Phrase("llama-server reuses a slot's cached prompt unless the request says "
                        "\"cache_prompt\": false: find the client or proxy that sends it and "
                        "drop it; check too that --no-cache-prompt is not set, that ", PARALLEL,
                        " slots are large enough to hold the prompt, and that the start of the "
                        "prompt is stable between turns (--cache-reuse N also reuses a prefix "
                        "that moved)")

    def cached_prompt(self, reply):
        # timings: cache_n tokens reused, prompt_n evaluated; usage says the same on new builds
        timings = reply.engine.get("timings") if isinstance(reply.engine, dict) else None
        cached, evaluated = (timings or {}).get("cache_n"), (timings or {}).get("prompt_n")
        if isinstance(cached, int) and isinstance(evaluated, int) and cached + evaluated > 0:
            return cached, cached + evaluated, "timings.cache_n / prompt_n"
        return super().cached_prompt(reply)

    def vision_advertised(self, payload):
        modalities = payload.get("modalities") if isinstance(payload, dict) else None
        return bool(modalities.get("vision")) if isinstance(modalities, dict) else None

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    honours_named_tool_choice = False  # the object form is silently treated as "auto"
    reasoning_parser_fix = Phrase(START, REASONING_FORMAT("deepseek"), " (or auto); 'none' "
                                  "leaves the thinking inside content")
    thinking_missing_fix = Phrase("serve with ", JINJA, " and the model's own template (", TEMPLATE,
                                  ") so thinking opens; --reasoning-budget -1 keeps it unlimited")
    tool_parser_fix = Phrase("llama.cpp reads the tool-call format from the chat template: serve "
                             "with ", JINJA, " and the model's own template (", TEMPLATE, ") so "
                             "the autoparser recognises the model's tool markup")
    known_errors = (("tools param requires --jinja", Phrase(
        START, JINJA, " (the chat template renders the tools; a wrapper or an old build turned "
        "it off)")), *Driver.known_errors)
    forced_tools_fix = ("drop --grammar-file from the server command: a global grammar forces "
                        "tool-call output on plain chat (pass grammars per request)")

    # -- the serve command line: llama-server and ik_llama.cpp's, same spellings ----------------
    serve_flags = ServeFlags(
        programs=(("llama-server",),),
        example="llama-server",
        flags={
            "model": Flag(("--model", "-m")),
            "ctx": Flag(("--ctx-size", "-c")),
            "parallel": Flag(("--parallel", "-np")),
            "kv_unified": Flag(("--kv-unified", "-kvu"), "none", ("-no-kvu", "--no-kv-unified")),
            "alias": Flag(("--alias", "-a")),
            "port": Flag(("--port",)),
            "host": Flag(("--host",)),
            "jinja": Flag(("--jinja",), "none", ("--no-jinja",)),
            "reasoning_format": Flag(("--reasoning-format",)),
            "metrics": Flag(("--metrics",), "none"),
            "mmproj": Flag(("--mmproj", "-mm"), off=("--no-mmproj",)),
            "draft": Flag(("--model-draft", "--spec-draft-model", "--draft-model", "-md")),
            "spec_type": Flag(("--spec-type",)),
            "cache_k": Flag(("--cache-type-k", "-ctk")),
            "cache_v": Flag(("--cache-type-v", "-ctv")),
            "chat_template_file": Flag(("--chat-template-file",)),
            "chat_template": Flag(("--chat-template",)),
            "grammar_file": Flag(("--grammar-file",)),
            "cache_prompt": Flag(("--cache-prompt",), "none", ("--no-cache-prompt",)),
            "api_key": Flag(("--api-key",)),
            "gpu_layers": Flag(("--gpu-layers", "--n-gpu-layers", "-ngl")),
            "threads": Flag(("--threads", "-t")),
            "draft_max": Flag(("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n")),
        },
        defaults={"port": "8080", "host": "127.0.0.1", "cache_k": "f16", "cache_v": "f16"},
        needs={
            "tools": (Need("jinja", "tools need the chat template to render them (without "
                           "--jinja: HTTP 500 'tools param requires --jinja flag')",
                           "add --jinja (pin it even where the build defaults it on)"),),
            "reasoning": (Need("reasoning_format", "thinking stays inside content unless a "
                               "reasoning format splits it out", "add --reasoning-format "
                               "deepseek", bad=("none",)),),
            "reasoning_effort": (Need("jinja", "the chat template reads reasoning_effort only "
                                      "with --jinja", "add --jinja"),),
            "spec_decode": (
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
        slots_split_ctx=True,
        quantized_kv_build="GGML_CUDA_FA_ALL_QUANTS",
        mtp_spec_values=("draft-mtp", "mtp"),
        native_binary=True,
    )

    speculative_source = "/slots speculative"

    def speculative_live(self, payloads):
        slots = payloads.get("/slots")
        flags = [s.get("speculative") for s in slots or [] if isinstance(s, dict)]
        return any(flags) if flags and all(isinstance(f, bool) for f in flags) else None
