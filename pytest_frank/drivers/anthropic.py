"""An Anthropic Messages API proxy (for example one in front of llama.cpp)."""

from __future__ import annotations

from pytest_frank.drivers.base import NO_KEY, Driver

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicDriver(Driver):
    name = "anthropic"
    label = "Anthropic Messages proxy"
    health_path = "/health"
    alias_flag = "the proxy's model mapping for"

    def auth_headers(self, api_key):
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def alias_fix(self, alias, served):
        return f"map the model name {alias!r} in the proxy's model list"

    # -- generation: the Messages shape (vision as base64 image blocks) ---------------------------
    image_forms = ("anthropic",)

    def image_part(self, b64, mime, form):
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64}}

    sdk_modules = ("anthropic", "anthropic.resources.messages")

    def sdk_client(self, endpoint, http_client, timeout):
        import anthropic

        return anthropic.Anthropic(base_url=endpoint.root, api_key=endpoint.api_key or NO_KEY,
                                   http_client=http_client, max_retries=0, timeout=timeout,
                                   default_headers=dict(endpoint.headers) or None)

    def sampling(self, sampling):
        # The Messages API has no seed (temperature 0 is as repeatable as it goes), and the
        # client no longer takes sampling arguments: they travel in the body.
        body = {k: v for k, v in sampling.items() if k in ("temperature", "top_p", "top_k")
                and v is not None}
        return {"extra_body": body} if body else {}

    def converse(self, sdk, model, req, clock):
        from pytest_frank.drivers import anthropic_messages

        return anthropic_messages.converse(sdk, model, req, clock)

    # -- params: the Messages API's own parameters --------------------------------------------
    shape_params = frozenset({"max_tokens", "stop", "count_tokens", "claude_code",
                              "context_limit"})
    budget_keys = ("max_tokens",)
    stop_fix = ("the proxy must pass stop_sequences through and report the match as "
                "stop_reason \"stop_sequence\" with stop_sequence set (update it, or the engine "
                "behind it)")

    def stop_param(self, stop):
        return {"stop_sequences": [stop]}

    def count_tokens(self, sdk, model, req):
        from pytest_frank.drivers import anthropic_messages

        return anthropic_messages.count_tokens(sdk, model, req)

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    api_shape = "anthropic"
    reasoning_fields = ("thinking",)  # thinking content blocks
    reasoning_parser_fix = ("the upstream server must split thinking out (llama.cpp "
                            "--reasoning-format deepseek, vLLM --reasoning-parser) so the proxy "
                            "can send thinking blocks")
    tool_parser_fix = ("the proxy passes tool calls through only when the upstream parses them: "
                       "turn on the upstream's tool-call parser (llama.cpp --jinja with the "
                       "model's template, vLLM --tool-call-parser)")

    endless_thinking_fix = ("lower the effort clients send (output_config.effort), or switch "
                            "thinking off (thinking.type disabled) where clients may, or serve a "
                            "model that does not loop; if this model really thinks longer, raise "
                            "max_thinking_tokens (and the upstream's context)")
    no_reasoning_said = ("although the request asked for thinking (thinking.type enabled): the "
                         "proxy dropped the reasoning")

    def thinking_on(self, max_tokens):
        # As Claude Code asks when thinking is on: the Messages API sends thinking blocks only
        # then. The budget stays under max_tokens (the API requires it; 1024 at least upstream).
        return {"thinking": {"type": "enabled", "budget_tokens": max(1, max_tokens - 1)}}

    def thinking_off(self):
        # The Messages API switch, and the template kwarg a llama.cpp upstream actually reads.
        return {"thinking": {"type": "disabled"},
                **super().thinking_off()}

    def effort(self, value):
        # output_config.effort is the Messages API field; a llama.cpp upstream reads the kwarg.
        return {"extra_body": {"output_config": {"effort": value},
                               "chat_template_kwargs": {"reasoning_effort": value}}}
