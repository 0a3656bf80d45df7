"""An Anthropic Messages API proxy (for example one in front of llama.cpp)."""

from __future__ import annotations

from pytest_frank.drivers.anthropic_messages import ANTHROPIC_VERSION, MessagesWire
from pytest_frank.drivers.base import Driver


class AnthropicDriver(MessagesWire, Driver):
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

    # -- generation battery: what a proxy's upstream must do ------------------------------------
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
