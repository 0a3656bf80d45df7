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
