"""SGLang's server."""

from __future__ import annotations

import secrets

from pytest_frank.drivers.launch import Launch
from pytest_frank.drivers.metrics import Metrics
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.serve.flags import Flag, Need, ServeFlags
from pytest_frank.transport.metrics import SGLANG_SPEC


class SglangLaunch(Launch):
    """`python -m sglang.launch_server` or `sglang serve` (pytest_frank.serve)."""

    # Each flag is a python/sglang/srt/server_args.py ServerArgs field (the flag is the field's
    # name, --model an alias of model_path); `sglang serve` is python/sglang/cli/serve.py.
    serve_flags = ServeFlags(
        programs=(("-m", "sglang.launch_server"), ("sglang", "serve")),
        example="python -m sglang.launch_server",
        flags={
            "model": Flag(("--model-path", "--model")),  # Arg(aliases=["--model"])
            "alias": Flag(("--served-model-name",)),  # one name (Optional[str]), not a list
            "ctx": Flag(("--context-length",)),
            "parallel": Flag(("--max-running-requests",)),
            "port": Flag(("--port",)),
            "host": Flag(("--host",)),
            "tool_parser": Flag(("--tool-call-parser",)),
            "reasoning_parser": Flag(("--reasoning-parser",)),
            "spec_algorithm": Flag(("--speculative-algorithm",)),
            "metrics": Flag(("--enable-metrics",), "none"),
            "radix_cache_off": Flag(("--disable-radix-cache",), "none"),
            "chat_template": Flag(("--chat-template",)),
            "cache_k": Flag(("--kv-cache-dtype",)),
            "api_key": Flag(("--api-key",)),
        },
        defaults={"port": "30000", "host": "127.0.0.1"},  # ServerArgs host, port
        needs={
            "tools": (Need("tool_parser", "without a parser the call stays in content",
                           "add --tool-call-parser <the model's parser, e.g. qwen25, "
                           "qwen3_coder>"),),
            "agent": (Need("tool_parser", "without a parser the call stays in content and no "
                           "result can answer it", "add --tool-call-parser <the model's parser, "
                           "e.g. qwen25, qwen3_coder>"),),
            # reasoning_parser and tool_call_parser are None by default (no parsing)
            "reasoning": (Need("reasoning_parser", "without a reasoning parser the thinking "
                               "stays inside content", "add --reasoning-parser <the model's "
                               "parser, e.g. qwen3, deepseek-r1>"),),
            "spec_decode": (
                # speculative_algorithm = None by default: EAGLE, EAGLE3, NEXTN, STANDALONE,
                # NGRAM, ...; enable_metrics = False: /metrics only with the flag
                Need("spec_algorithm", "SGLang drafts only with a speculative algorithm",
                     "add --speculative-algorithm EAGLE (or EAGLE3, NEXTN)"),
                Need("metrics", "the acceptance gauges live on /metrics, off without "
                     "--enable-metrics", "add --enable-metrics"),
            ),
        },
    )


class SglangMetrics(Metrics):
    """SGLang's /metrics (404 without --enable-metrics): its drafting and load series."""

    off_statuses = (404,)
    spec_series = (SGLANG_SPEC,)
    # the scheduler's gauges (sglang/srt/metrics/collector.py)
    load_series = ("sglang:num_running_reqs", "sglang:num_queue_reqs")


class SglangDriver(OpenAIDriver):
    name = "sglang"
    label = "SGLang server"
    owned_by = "sglang"
    metrics_prefix = "sglang:"
    health_path = "/health"
    build_route = ("/get_server_info", "version")
    start = "start SGLang with "

    # The model path is not on the model card: python/sglang/srt/entrypoints/http_server.py
    # available_models() builds ModelCard(id=served_model_name, root=served_model_name, ...), so
    # `root` is the served name. get_server_info() returns dataclasses.asdict(server_args),
    # whose model_path is the --model-path the server was started with.
    drift_routes = ("/get_server_info",)

    def served_model_path(self, payloads):
        info = payloads.get("/get_server_info")
        path = info.get("model_path") if isinstance(info, dict) else None
        return path if isinstance(path, str) and path else None

    def uncached(self):
        # No request switches the radix cache off (--disable-radix-cache is server-wide); a
        # fresh `cache_salt` (ChatCompletionRequest, joined into the radix key's extra_key)
        # matches no cached prefix. An SGLang older than the field ignores it: there a radix
        # hit may move the logprobs, and the logprob_drift tolerance must cover that.
        return {"extra_body": {"cache_salt": secrets.token_urlsafe(16)}}

    # -- generation ------------------------------------------------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    launch = SglangLaunch()
    metrics = SglangMetrics()
