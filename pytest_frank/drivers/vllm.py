"""vLLM's OpenAI-compatible server."""

from __future__ import annotations

from pytest_frank import metrics
from pytest_frank.drivers.base import Driver


class VllmDriver(Driver):
    name = "vllm"
    label = "vLLM server"
    health_path = "/health"  # 200 with an empty body when the engine lives

    def alias_fix(self, alias):
        return f"add it to --served-model-name (one card per name): --served-model-name {alias}"

    parallel_flag = "--max-num-seqs"
    unify_hint = "raise --max-model-len"

    # -- generation, /metrics, speculative decoding, vision --------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    metrics_fix = "let /metrics through to the vLLM server (it is on by default)"
    spec_series = (metrics.VLLM_SPEC,)
    spec_engage_fix = ("pass --speculative-config, e.g. "
                       "'{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'")
    spec_low_fix = ("the draft does not fit the model, or num_speculative_tokens is too high for "
                    "it; lower num_speculative_tokens in --speculative-config")
    spec_high_fix = ("acceptance this close to 1 means the draft is the model itself: check the "
                     "draft model in --speculative-config")
    prefix_cache_fix = ("pass --enable-prefix-caching (vLLM keeps it opt-in for hybrid "
                        "models such as Qwen3-Next/3.8)")
    no_projector_markers = ("is not a multimodal model",)
    vision_fix = ("serve the model's multimodal checkpoint (with its vision tower; llama.cpp "
                  "would need --mmproj) and do not set --limit-mm-per-prompt image=0")

    # -- vram: vLLM preallocates gpu_memory_utilization of the GPU; the KV pool fills the rest
    kv_pool_route = "/metrics"
    vram_high_fix = ("another process on the GPU, or --gpu-memory-utilization higher than "
                     "intended (vLLM takes that fraction of the whole GPU at start)")
    vram_low_fix = ("vLLM took less than gpu_memory_utilization of the GPU: the KV pool was "
                    "clamped (a co-tenant held memory at start); free the GPU or lower "
                    "--max-model-len / --max-num-seqs, then restart")

    def kv_pool(self, metrics_text):
        from pytest_frank.vram import KVPool
        from pytest_frank.vram_sources import parse_vllm_cache_config

        info = parse_vllm_cache_config(metrics_text)
        if not info:
            return None
        blocks, size = info.get("num_gpu_blocks"), info.get("block_size")
        tokens = blocks * size if isinstance(blocks, int) and isinstance(size, int) else None
        frac = info.get("gpu_memory_utilization")
        return KVPool(tokens, frac if isinstance(frac, float) else None,
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
