"""SGLang's server."""

from __future__ import annotations

from pytest_frank import metrics
from pytest_frank.drivers.base import Driver


class SglangDriver(Driver):
    name = "sglang"
    label = "SGLang server"
    health_path = "/health"

    def alias_fix(self, alias):
        return f"serve it under that name: --served-model-name {alias}"

    # -- generation, /metrics, speculative decoding ----------------------------------------------
    keep_generating = {"extra_body": {"ignore_eos": True}}
    metrics_off_statuses = (404,)
    metrics_fix = "start SGLang with --enable-metrics"
    spec_series = (metrics.SGLANG_SPEC,)
    spec_engage_fix = ("start SGLang with --speculative-algorithm (EAGLE, EAGLE3, NEXTN) and "
                       "--speculative-num-draft-tokens")
    prefix_cache_fix = "remove --disable-radix-cache (the radix cache is SGLang's prefix cache)"
    spec_low_fix = ("the draft does not fit the model; lower --speculative-num-steps / "
                    "--speculative-num-draft-tokens")

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    reasoning_parser_fix = ("start SGLang with --reasoning-parser <the model's parser, e.g. qwen3, "
                            "deepseek-r1>")
    tool_parser_fix = ("start SGLang with --tool-call-parser <the parser for the model's format, "
                       "e.g. qwen25, qwen3_coder>; a wrong parser leaves the call in content")
