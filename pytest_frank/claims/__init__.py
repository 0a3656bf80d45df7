"""One module per claim. Each declares its `Options` (built once from the fleet entry), its
probes (network and file work) and its checks (`pytest_frank.checks.Check`: probe + judge)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from typing import Any

# Claim names are marker names and fleet.yaml `expect:` keys: a public interface (`-m tools`).
CLAIMS = {
    "health": "the health route answers ready",
    "alias": "the intended alias is served by /v1/models",
    "reasoning": "chat returns content and reasoning",
    "reasoning_effort": "every client reasoning_effort level maps to one the template accepts",
    "tools": "tool calls are well formed and validate against their schema",
    "spec_decode": "speculative decoding is engaged with a sane acceptance rate",
    "vision": "the model sees the image it is sent",
    "perf": "time to first token and decode speed meet the fleet's floors",
    "slots": "the live slot shape matches the intended one",
    "vram": "GPU memory used matches the model's own header",
    "serve": "the serve config (unit, env, script) holds what the claims need, and is what runs",
}


@dataclass(frozen=True)
class Options:
    """A claim's options, from its fleet.yaml value: `true` or `{}` mean the defaults."""

    @classmethod
    def from_fleet(cls, value: Any) -> Options:
        return cls(**value) if isinstance(value, dict) else cls()

    @classmethod
    def keys(cls) -> set[str]:
        return {f.name for f in fields(cls)}


def options_type(claim: str) -> type[Options]:
    module = importlib.import_module(f"pytest_frank.claims.{claim}")
    return getattr(module, "Options", Options)
