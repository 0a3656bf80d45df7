"""One module per claim. Each declares its `Options` (built once from the fleet entry), its
probes (network and file work) and its checks (`pytest_frank.checks.Check`: probe + judge).
A conftest.py or a plugin adds claims of its own with `register` (the `pytest_frank_claims`
hook, pytest_frank.hooks)."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, fields
from typing import Any

# Claim names are marker names and fleet.yaml `expect:` keys: a public interface (`-m tools`).
CLAIMS = {
    "health": "the health route answers ready",
    "alias": "the intended alias is served by /v1/models",
    "reasoning": "chat returns content and reasoning",
    "reasoning_effort": "every client reasoning_effort level maps to one the template accepts",
    "tools": "tool calls are well formed and validate against their schema",
    "agent": "a tool result sent back gets a final answer, as agent clients loop",
    "spec_decode": "speculative decoding is engaged with a sane acceptance rate",
    "vision": "the model sees the image it is sent",
    "perf": "time to first token and decode speed meet the fleet's floors",
    "slots": "the live slot shape matches the intended one",
    "vram": "GPU memory used matches the model's own header",
    "serve": "the serve config (unit, env, script) holds what the claims need, and is what runs",
}
BUILT_IN = frozenset(CLAIMS)
MARKER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a claim's name is a marker's: `-m lora`


@dataclass(frozen=True)
class Options:
    """A claim's options, from its fleet.yaml value: `true` or `{}` mean the defaults."""

    @classmethod
    def from_fleet(cls, value: Any) -> Options:
        return cls(**value) if isinstance(value, dict) else cls()

    @classmethod
    def keys(cls) -> set[str]:
        return {f.name for f in fields(cls)}


class ClaimError(Exception):
    """A claim that cannot be registered; the message names it."""


# The registered claims' options and `expect:` schema fragments, by name; they last as long as
# the pytest configuration that registered them (`reset`).
_OPTIONS: dict[str, type[Options]] = {}
SCHEMAS: dict[str, dict[str, Any]] = {}


def register(name: str, about: str, options: type[Options] = Options,
             schema: dict[str, Any] | None = None) -> None:
    """Add a claim: its marker, its fleet.yaml `expect:` key (validated by `schema`, a JSON
    schema fragment for its value; by default `true` or a mapping) and its matrix column."""
    if name in BUILT_IN:
        raise ClaimError(f"claim {name!r} is a built-in claim: name yours otherwise")
    if name in CLAIMS:
        raise ClaimError(f"claim {name!r} is registered twice")
    if not MARKER.match(name):
        raise ClaimError(f"claim {name!r}: a claim's name is a marker's, letters, digits and _")
    if not (isinstance(options, type) and issubclass(options, Options)):
        raise ClaimError(f"claim {name!r}: options must be a pytest_frank.claims.Options class")
    CLAIMS[name] = about  # after the built-ins: its column comes after theirs
    _OPTIONS[name] = options
    SCHEMAS[name] = schema if schema is not None else {"type": ["boolean", "object"]}


def reset() -> None:
    """Only the built-in claims again (CLAIMS is changed in place: modules hold it by name)."""
    for name in [name for name in CLAIMS if name not in BUILT_IN]:
        del CLAIMS[name]
    _OPTIONS.clear()
    SCHEMAS.clear()


def options_type(claim: str) -> type[Options]:
    if claim in _OPTIONS:
        return _OPTIONS[claim]
    module = importlib.import_module(f"pytest_frank.claims.{claim}")
    return getattr(module, "Options", Options)
