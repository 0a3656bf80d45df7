"""Engine drivers by name: the facts of each engine (its routes, its server settings), behind
the capabilities claims ask for (drivers.protocols), and the parts it holds (its wire, chat
template, prompt counting, launch and /metrics: drivers.template, .counting, .launch,
.metrics). What a claim advises per engine lives with the claim, keyed by driver class
(claims.advice). `DRIVERS` is the engine list: docs/gen.py writes the schema's `engine` values
from it, in its order, and fleet.ENGINES reads them back."""

from __future__ import annotations

from pytest_frank.drivers.anthropic import AnthropicDriver
from pytest_frank.drivers.base import Driver, Readiness
from pytest_frank.drivers.llamacpp import LlamaCppDriver
from pytest_frank.drivers.openai import OpenAIDriver
from pytest_frank.drivers.metrics import Metrics
from pytest_frank.drivers.protocols import Facts, Routes, Wire
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
