"""vLLM's OpenAI-compatible server."""

from __future__ import annotations

from pytest_frank.drivers.base import Driver


class VllmDriver(Driver):
    name = "vllm"
    label = "vLLM server"
    health_path = "/health"  # 200 with an empty body when the engine lives

    def alias_fix(self, alias):
        return f"add it to --served-model-name (one card per name): --served-model-name {alias}"
