"""An Anthropic Messages API proxy (for example one in front of llama.cpp)."""

from __future__ import annotations

from pytest_frank.drivers.anthropic_messages import ANTHROPIC_VERSION
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.openai import OpenAIDriver


class AnthropicDriver(Driver):
    name = "anthropic"
    label = "Anthropic Messages proxy"
    _default_api = "messages"
    health_path = "/health"
    _other_routes = OpenAIDriver

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers
