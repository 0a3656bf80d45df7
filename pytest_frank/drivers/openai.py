"""The generic OpenAI-compatible server: chat completions and a model list, nothing known of
the engine behind it (any engine may wear this shape, a proxy too)."""

from __future__ import annotations

from pytest_frank.drivers.base import Driver


class OpenAIDriver(Driver):
    name = "openai"
    label = "OpenAI-compatible server"
    health_path = "/v1/models"  # a generic server has no health route; a model list is the proof
