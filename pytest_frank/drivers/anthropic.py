"""An Anthropic Messages API proxy (for example one in front of llama.cpp)."""

from __future__ import annotations

from pytest_frank.drivers.base import Driver

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

    def alias_fix(self, alias):
        return f"map the model name {alias!r} in the proxy's model list"

    # -- generation: the Messages shape (vision as base64 image blocks) ---------------------------
    chat_path = "/v1/messages"
    stream_options = {"stream": True}
    image_forms = ("anthropic",)

    def image_part(self, b64, mime, form):
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64}}

    def reply_text(self, payload):
        blocks = payload.get("content") if isinstance(payload, dict) else None
        if not isinstance(blocks, list):
            return None, None
        text = "".join(b.get("text", "") for b in blocks
                       if isinstance(b, dict) and b.get("type") == "text")
        return text, payload.get("stop_reason")

    def stream_text(self, event):
        if not isinstance(event, dict) or event.get("type") != "content_block_delta":
            return ""
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return ""
        text = delta.get("text") or delta.get("thinking") or ""
        return text if isinstance(text, str) else ""

    def stream_tokens(self, event):
        usage = event.get("usage") if isinstance(event, dict) else None
        return usage.get("output_tokens") if isinstance(usage, dict) else None

    # -- generation battery: reasoning, reasoning_effort, tools --------------------------------
    api_shape = "anthropic"
    reasoning_fields = ("thinking",)  # thinking content blocks
    reasoning_parser_fix = ("the upstream server must split thinking out (llama.cpp "
                            "--reasoning-format deepseek, vLLM --reasoning-parser) so the proxy "
                            "can send thinking blocks")
    tool_parser_fix = ("the proxy passes tool calls through only when the upstream parses them: "
                       "turn on the upstream's tool-call parser (llama.cpp --jinja with the "
                       "model's template, vLLM --tool-call-parser)")

    def thinking_off(self):
        # The Messages API switch, and the template kwarg a llama.cpp upstream actually reads.
        return {"thinking": {"type": "disabled"},
                **super().thinking_off()}

    def effort(self, value):
        # output_config.effort is the Messages API field; a llama.cpp upstream reads the kwarg.
        return {"extra_body": {"output_config": {"effort": value},
                               "chat_template_kwargs": {"reasoning_effort": value}}}
