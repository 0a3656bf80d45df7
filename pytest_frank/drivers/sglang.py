"""SGLang's server."""

from __future__ import annotations

from pytest_frank.drivers.base import Driver


class SglangDriver(Driver):
    name = "sglang"
    label = "SGLang server"
    health_path = "/health"

    def alias_fix(self, alias):
        return f"serve it under that name: --served-model-name {alias}"
