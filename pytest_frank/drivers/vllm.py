"""vLLM's OpenAI-compatible server."""

from __future__ import annotations

import secrets
from types import MappingProxyType
from typing import Any

from pytest_frank.drivers.counting import Counting
from pytest_frank.drivers.launch import Launch
from pytest_frank.drivers.metrics import Metrics
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.drivers.openai_chat import ChatWire
from pytest_frank.drivers.template import Template
from pytest_frank.outcome.verdict import Setting
from pytest_frank.serve.flags import Flag, Need, ServeFlags
from pytest_frank.transport.metrics import VLLM_SPEC


class VllmCounting(Counting):
    """The server's own count of a conversation: /tokenize renders the messages with the chat
    template (add_generation_prompt true by default, special tokens as the chat route adds
    them) and answers {"count": n, "tokens": [...], "max_model_len"}."""

    chat_count_route = "/tokenize"

    def chat_tokenize_request(self, model: str, messages: list[dict],
                              tools: list[dict] | None = None) -> tuple[str, dict] | None:
        body = {"model": model, "messages": messages, "add_generation_prompt": True}
        return self.chat_count_route, {**body, **({"tools": tools} if tools else {})}

    def token_count(self, payload: Any) -> int | None:
        count = payload.get("count") if isinstance(payload, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None


class VllmTemplate(Template):
    """vLLM shows no template; what it reads into one is known."""

    # chat_completion/protocol.py (0.32.0) renames an assistant message's reasoning_content to
    # reasoning before the template, which gets both: each reaches the prompt.
    history_reasoning_read = ("reasoning", "reasoning_content")


class VllmLaunch(Launch):
    """`vllm serve MODEL` or the api_server module (pytest_frank.serve)."""

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


class VllmMetrics(Metrics):
    """vLLM's /metrics: its drafting and prefix-cache counters, its load gauges and its KV pool."""

    spec_series = (VLLM_SPEC,)
    # A reply carries no draft counts: one answer's drafting is the growth of the
    # spec_decode counters over it (server-wide)
    draft_counts_from = "metrics"
    draft_counts_where = "the vllm:spec_decode_* counters in /metrics"
    # usage carries cached_tokens only with --enable-prompt-tokens-details; the counters always
    # run (named gpu_prefix_cache_* before v0.11)
    prefix_cache_counters = (("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
                             ("vllm:gpu_prefix_cache_hits_total",
                              "vllm:gpu_prefix_cache_queries_total"))
    # the scheduler's gauges (vllm/v1/metrics/loggers.py)
    load_series = ("vllm:num_requests_running", "vllm:num_requests_waiting")
    # vLLM preallocates gpu_memory_utilization of the GPU; the KV pool fills the rest
    kv_pool_route = "/metrics"

    def kv_pool(self, metrics_text: str) -> Any:
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


class VllmDriver(OpenAIDriver):
    name = "vllm"
    label = "vLLM server"
    owned_by = "vllm"
    metrics_prefix = "vllm:"
    health_path = "/health"  # 200 with an empty body when the engine lives
    build_route = ("/version", "version")
    flags = {"parallel": Setting("--max-num-seqs"), "ctx": Setting("--max-model-len"),
             "auto_tool_choice": Setting("--enable-auto-tool-choice", switch=True),
             "tool_parser": Setting("--tool-call-parser")}
    start = "start vLLM with "
    _names_served_model = True  # the served name asked for

    def uncached(self):
        # No request switches the prefix cache off (--enable-prefix-caching is server-wide); a
        # fresh `cache_salt` (ChatCompletionRequest, V1 engine) salts the request's block
        # hashes, so no block of an earlier request matches and the prompt is computed whole.
        return {"extra_body": {"cache_salt": secrets.token_urlsafe(16)}}

    # -- generation, vision ---------------------------------------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    _no_projector_markers = ("is not a multimodal model",)
    # --reasoning-parser by family, where the thinking's markup is the family's own
    reasoning_parsers = MappingProxyType({"harmony": "openai_gptoss"})
    # A gpt_oss model's reply is read by harmony channel whatever the flags (0.32.0
    # vllm/parser/harmony.py): with tools offered and no --tool-call-parser it answers 200 (any
    # other model's tools are its 400), and a commentary message to=functions.NAME becomes a
    # call only through the openai tool parser; without it the call is dropped, no content
    # either (tests/vllm/test_tool_families_vllm_real.py, HARMONY_BARE).
    drops_unparsed_calls = "harmony"

    counting = VllmCounting()
    launch = VllmLaunch()
    metrics = VllmMetrics()

    def served_model_path(self, payloads):
        # vllm/entrypoints/openai/serving_models.py show_available_models():
        # ModelCard(id=base_model.name, root=base_model.model_path, ...): root is the model path.
        cards = (payloads.get("/v1/models") or {}).get("data") if isinstance(
            payloads.get("/v1/models"), dict) else None
        roots = [c.get("root") for c in cards or [] if isinstance(c, dict)]
        return next((r for r in roots if isinstance(r, str) and r), None)

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    # its chat route sends reasoning in `reasoning` (reasoning_content until v0.16)
    _chat_wire = ChatWire(reasoning_fields=("reasoning", "reasoning_content"))
    template = VllmTemplate()
    # tool_parsers/__init__.py (0.32.0): qwen3_xml and qwen3_coder name one parser
    # (Qwen3EngineToolParser), which reads <tool_call><function=NAME><parameter=KEY> and types
    # each value by the tool's schema; hermes reads JSON only and leaves such a call in content
    # (tests/vllm/test_tool_families_vllm_real.py). The other families' parsers by their names in
    # 0.32's registry (harmony's is openai); qwen3_xml and openai are proven on real vLLM here.
    call_family_parsers = MappingProxyType({"qwen3_xml": "qwen3_xml", "kimi_k2": "kimi_k2",
                                            "mistral": "mistral", "glm45": "glm45",
                                            "harmony": "openai", "deepseek_v31": "deepseek_v31"})
    # chat_completion/protocol.py check_tool_usage(): any tool_choice but "none" without tools
    # is its 400 "When using `tool_choice`, `tools` must be set." (seen on 0.32.0)
    refused_requests = frozenset({"auto_without_tools"})
    # generate/base/protocol.py JsonSchemaResponseFormat.strict is a pydantic bool in lax mode,
    # which reads "yes" as true: 200 (0.32.0; no name, no schema and schema "x" are its 400s)
    lenient_requests = frozenset({"format_strict_text"})
