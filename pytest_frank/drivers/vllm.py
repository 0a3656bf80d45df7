"""vLLM's OpenAI-compatible server."""

from __future__ import annotations

import secrets

from pytest_frank import metrics
from pytest_frank.drivers.base import Driver
from pytest_frank.serve.flags import Flag, Need, ServeFlags
from pytest_frank.verdict import Phrase, Setting


class VllmDriver(Driver):
    name = "vllm"
    label = "vLLM server"
    owned_by = "vllm"
    metrics_prefix = "vllm:"
    health_path = "/health"  # 200 with an empty body when the engine lives
    build_route = ("/version", "version")

    def alias_fix(self, alias, served):
        names = " ".join(dict.fromkeys([*served, alias]))
        return ("add it to --served-model-name, keeping the names served now: "
                f"--served-model-name {names}")

    def uncached(self):
        # No request switches the prefix cache off (--enable-prefix-caching is server-wide); a
        # fresh `cache_salt` (ChatCompletionRequest, V1 engine) salts the request's block
        # hashes, so no block of an earlier request matches and the prompt is computed whole.
        return {"extra_body": {"cache_salt": secrets.token_urlsafe(16)}}

    parallel_flag = Setting("--max-num-seqs")
    edited_template_fix = "serve the edited template: vllm serve --chat-template <the edited file>"
    unify_hint = "raise --max-model-len"

    def more_context_fix(self, per_slot, count):
        # max_model_len bounds every request, prompt plus max_tokens; the KV cache is shared.
        return Phrase("serve with ", Setting("--max-model-len")(per_slot),
                      " (the model must hold it; the KV cache must fit it)")

    # -- generation, /metrics, speculative decoding, vision --------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    metrics_fix = "let /metrics through to the vLLM server (it is on by default)"
    structured_output_fix = ("pass a structured-output backend (--structured-outputs-config "
                             "'{\"backend\": \"xgrammar\"}', or guidance); with a "
                             "--reasoning-parser, a vLLM whose schema holds for the content after "
                             "the reasoning; a proxy in front must pass response_format through")
    stop_fix = ("update vLLM: stop strings must apply to the answer, not the reasoning, with a "
                "--reasoning-parser; a proxy in front must pass `stop` through")
    spec_series = (metrics.VLLM_SPEC,)
    spec_engage_fix = ("pass --speculative-config, e.g. "
                       "'{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'")
    spec_low_fix = ("the draft does not fit the model, or num_speculative_tokens is too high for "
                    "it; lower num_speculative_tokens in --speculative-config")
    spec_high_fix = ("acceptance this close to 1 means the draft is the model itself: check the "
                     "draft model in --speculative-config")
    prefix_cache_fix = ("pass --enable-prefix-caching (vLLM keeps it opt-in for hybrid "
                        "models such as Qwen3-Next/3.8)")
    # usage carries cached_tokens only with --enable-prompt-tokens-details; the counters always
    # run (named gpu_prefix_cache_* before v0.11)
    prefix_cache_counters = (("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
                             ("vllm:gpu_prefix_cache_hits_total",
                              "vllm:gpu_prefix_cache_queries_total"))
    cache_count_hint = ("vLLM sends cached_tokens in usage only with "
                        "--enable-prompt-tokens-details, and /metrics has no prefix_cache "
                        "counters")
    no_projector_markers = ("is not a multimodal model",)
    vision_fix = ("serve the model's multimodal checkpoint (with its vision tower; llama.cpp "
                  "would need --mmproj) and do not set --limit-mm-per-prompt image=0")

    # -- load: the scheduler's gauges (vllm/v1/metrics/loggers.py) ---------------------------------
    load_series = ("vllm:num_requests_running", "vllm:num_requests_waiting")

    # -- vram: vLLM preallocates gpu_memory_utilization of the GPU; the KV pool fills the rest
    kv_pool_route = "/metrics"
    vram_high_fix = ("another process on the GPU, or --gpu-memory-utilization higher than "
                     "intended (vLLM takes that fraction of the whole GPU at start)")
    vram_low_fix = ("vLLM took less than gpu_memory_utilization of the GPU: the KV pool was "
                    "clamped (a co-tenant held memory at start); free the GPU or lower "
                    "--max-model-len / --max-num-seqs, then restart")

    def served_model_path(self, payloads):
        # vllm/entrypoints/openai/serving_models.py show_available_models():
        # ModelCard(id=base_model.name, root=base_model.model_path, ...): root is the model path.
        cards = (payloads.get("/v1/models") or {}).get("data") if isinstance(
            payloads.get("/v1/models"), dict) else None
        roots = [c.get("root") for c in cards or [] if isinstance(c, dict)]
        return next((r for r in roots if isinstance(r, str) and r), None)

    def kv_pool(self, metrics_text):
        from pytest_frank.vram.plan import KVPool
        from pytest_frank.vram.sources import parse_vllm_cache_config

        info = parse_vllm_cache_config(metrics_text)
        if not info:
            return None
        blocks, size = info.get("num_gpu_blocks"), info.get("block_size")
        tokens = blocks * size if isinstance(blocks, int) and isinstance(size, int) else None
        frac = info.get("gpu_memory_utilization")
        # A fraction of the GPU, or nothing: NaN or 7.5 would model nonsense (or no number).
        fraction = frac if isinstance(frac, float) and 0 < frac <= 1 else None
        return KVPool(tokens, fraction,
                      f"vllm:cache_config_info num_gpu_blocks {blocks} x block_size {size}, "
                      f"gpu_memory_utilization {frac}")

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    reasoning_fields = ("reasoning", "reasoning_content")  # renamed in v0.16
    reasoning_parser_fix = ("start vLLM with --reasoning-parser <the model's parser, e.g. qwen3, "
                            "deepseek_r1>")
    thinking_missing_fix = ("start vLLM with --reasoning-parser <the model's parser> and a chat "
                            "template that opens a thinking block")
    tool_parser_fix = ("start vLLM with --enable-auto-tool-choice --tool-call-parser <the parser "
                       "for the model's format: hermes, qwen3_xml, qwen3_coder, ...>; a wrong "
                       "parser leaves the call in content")
    forced_tools_fix = ("something forces tool-call output on plain chat: check for a server-wide "
                        "structured-output default (--guided-decoding-*, generation config) or a "
                        "template that always emits a tool call")

    # -- the serve command line: `vllm serve MODEL` or the api_server module ---------------------
    # Flags from vllm/entrypoints/openai/cli_args.py (frontend: host, port, api key, tool and
    # reasoning parsers, chat template) and vllm/engine/arg_utils.py EngineArgs (model, context,
    # sequences, cache, speculative config).
    serve_flags = ServeFlags(
        programs=(("vllm", "serve"), ("-m", "vllm.entrypoints.openai.api_server")),
        example="vllm serve",
        positional="model",
        flags={
            "model": Flag(("--model",)),
            "alias": Flag(("--served-model-name",), "many"),
            "ctx": Flag(("--max-model-len",)),
            "parallel": Flag(("--max-num-seqs",)),
            "port": Flag(("--port",)),
            "host": Flag(("--host",)),
            "auto_tool_choice": Flag(("--enable-auto-tool-choice",), "none"),
            "tool_parser": Flag(("--tool-call-parser",)),
            "reasoning_parser": Flag(("--reasoning-parser",)),
            "spec_config": Flag(("--speculative-config",)),
            "prefix_cache": Flag(("--enable-prefix-caching",), "none",
                                 ("--no-enable-prefix-caching",)),
            "chat_template": Flag(("--chat-template",)),
            "cache_k": Flag(("--kv-cache-dtype",)),
            "api_key": Flag(("--api-key",)),
            "gpu_memory": Flag(("--gpu-memory-utilization",)),
            "tensor_parallel": Flag(("-tp", "--tensor-parallel-size")),
            "mm_limit": Flag(("--limit-mm-per-prompt",)),
            "max_logprobs": Flag(("--max-logprobs",)),
        },
        # cli_args.py: port 8000; host None, which binds every interface
        defaults={"port": "8000", "host": "0.0.0.0"},
        needs={
            # serving_chat.py: tool_choice "auto" without both flags is refused, '"auto" tool
            # choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            "tools": (
                Need("auto_tool_choice", "clients send tool_choice \"auto\", which vLLM "
                     "answers with HTTP 400 unless auto tool choice is on",
                     "add --enable-auto-tool-choice"),
                Need("tool_parser", "without a parser the call stays in content",
                     "add --tool-call-parser <the model's parser: hermes, qwen3_xml, "
                     "qwen3_coder, ...>"),
            ),
            "params": (Need("max_logprobs", "clients asking top_logprobs above it get HTTP 400 "
                            "(test_params_logprobs asks 2)", "raise --max-logprobs to at least 2 "
                            "(vLLM's default is 20)", bad=("0", "1"), required=False),),
            "agent": (
                Need("auto_tool_choice", "an agent's answering turn sends tool_choice \"auto\", "
                     "which vLLM answers with HTTP 400 unless auto tool choice is on",
                     "add --enable-auto-tool-choice"),
                Need("tool_parser", "without a parser the call stays in content and no result "
                     "can answer it", "add --tool-call-parser <the model's parser: hermes, "
                     "qwen3_xml, qwen3_coder, ...>"),
            ),
            "reasoning": (Need("reasoning_parser", "without a reasoning parser the thinking "
                               "stays inside content", "add --reasoning-parser <the model's "
                               "parser, e.g. qwen3, deepseek_r1>"),),
            "spec_decode": (Need("spec_config", "vLLM drafts only with a speculative config",
                                 "add --speculative-config '{\"method\": \"mtp\", "
                                 "\"num_speculative_tokens\": 2}' (or ngram, draft_model)"),),
        },
        files=("chat_template",),
    )
