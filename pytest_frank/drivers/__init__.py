"""Engine drivers by name: the one place that knows how engines differ. `DRIVERS` is the engine
list: the schema's `engine` values (and fleet.ENGINES) are written from it by docs/gen.py."""

from __future__ import annotations

from pytest_frank.drivers.anthropic import AnthropicDriver
from pytest_frank.drivers.base import Driver, Readiness
from pytest_frank.drivers.llamacpp import LlamaCppDriver
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.drivers.protocols import Facts, Metrics, Routes, Wire
from pytest_frank.drivers.sglang import SglangDriver
from pytest_frank.drivers.vllm import VllmDriver

DRIVERS: dict[str, type[Driver]] = {
    "llamacpp": LlamaCppDriver,
    "vllm": VllmDriver,
    "sglang": SglangDriver,
    "anthropic": AnthropicDriver,
    "openai": OpenAIDriver,
}


def driver_for(engine: str) -> Driver:
    return DRIVERS[engine]()


__all__ = ["DRIVERS", "Driver", "Facts", "Metrics", "OpenAIDriver", "Readiness", "Routes", "Wire",
           "driver_for"]
