"""One module per claim. Each declares its `Options` (parsed from the fleet entry by `bind`, read
back typed by a probe with `Options.on(endpoint)` and by a judge as `ctx.options`), its probes
(network and file work) and its checks (`pytest_frank.checks.Check`: probe + judge).
A conftest.py or a plugin adds claims of its own with `register` (the `pytest_frank_claims`
hook, pytest_frank.hooks), for the run that loads it (pytest_frank.state)."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Iterator, Mapping, TypeVar

from pytest_frank import state
from pytest_frank.fleet import Endpoint, OptionError, expect_schemas

# Claim names are marker names and fleet.yaml `expect:` keys: a public interface (`-m tools`).
_BUILT_IN = MappingProxyType({
    "health": "the health route answers ready",
    "alias": "the intended alias is served by /v1/models",
    "chat": "a plain question gets a plain answer that ends by itself",
    "reasoning": "chat returns content and reasoning",
    "reasoning_effort": "every client reasoning_effort level maps to one the template accepts",
    "tools": "tool calls are well formed and validate against their schema",
    "agent": "a tool result sent back gets a final answer, as agent clients loop",
    "clients": "each coding client's own requests (Claude Code, Codex, pi, opencode, Open WebUI) "
               "are answered",
    "spec_decode": "speculative decoding is engaged with a sane acceptance rate",
    "vision": "the model sees the image it is sent",
    "params": "request parameters (caps, stops, schemas, logprobs, usage, context) are honoured",
    "stream": "a streamed answer keeps its API shape's wire format, frame by frame",
    "fingerprint": "greedy answers to fixed prompts are the baseline's: the same model computes",
    "perf": "time to first token and decode speed meet the fleet's floors",
    "load": "with many requests in flight at once, each reply is whole and its own, and errors "
            "and speed stay within the floors",
    "slots": "the live slot shape matches the intended one",
    "vram": "GPU memory used matches the model's own header",
    "serve": "the serve config (unit, env, script) holds what the claims need, and is what runs",
})
BUILT_IN = frozenset(_BUILT_IN)
# How a claim is asked besides its own `expect:` key (every other claim is asked by that key
# alone, `false` turning it off): health and chat always, unless turned off under expect
# (`expect: {chat: false}`); alias and
# serve by an endpoint key of their own (`alias:`, `serve:`), unless turned off under expect.
ALWAYS = frozenset({"health", "chat"})
ASKED_BY = {"alias": "alias", "serve": "serve"}
MARKER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a claim's name is a marker's: `-m lora`
Opts = TypeVar("Opts", bound="Options")


@dataclass(frozen=True)
class Options:
    """A claim's options, from its fleet.yaml value: `true` or `{}` mean the defaults. The keys
    in PATHS name files, relative to the fleet file (a URL stays as written)."""

    PATHS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_fleet(cls, value: Any, endpoint: Endpoint | None = None) -> Options:
        """Parse `expect.<claim>`; raises fleet.OptionError naming the key and the reason."""
        if not isinstance(value, dict):
            return cls()
        unknown = sorted(set(value) - cls.keys())
        if unknown:  # a registered claim's schema may allow what its class does not take
            raise OptionError(str(unknown[0]), f"unknown option (known: "
                                               f"{', '.join(sorted(cls.keys())) or 'none'})")
        folder = endpoint.folder if endpoint is not None else None
        return cls(**{k: in_folder(v, folder) if k in cls.PATHS else v for k, v in value.items()})

    @classmethod
    def keys(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    @classmethod
    def on(cls: type[Opts], endpoint: Endpoint) -> Opts:
        """The endpoint's options of this claim, as fleet.yaml's entry was parsed when the fleet
        loaded: what a probe reads (`perf.Options.on(target.endpoint).runs`), typed, so a
        misspelt option is the type checker's error, not a run's."""
        return endpoint.options_of(cls)


def in_folder(value: Any, folder: Path | None) -> Any:
    """A file named in fleet.yaml, relative to the fleet file's folder; `~` expanded, URLs and
    absolute paths as they are."""
    if not isinstance(value, str) or not value or "://" in value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() or folder is None else folder / path)


class ClaimError(Exception):
    """A claim that cannot be registered; the message names it."""


class Registered:
    """The claims one run registered (its `expect:` schema fragments are the fleet's
    ExpectSchemas): part of the run's state, gone with the run."""

    def __init__(self) -> None:
        self.about: dict[str, str] = {}  # in the order registered: their columns come after
        self.options: dict[str, type[Options]] = {}


def _registered() -> Registered:
    return state.current().part(Registered)


class _Claims(Mapping[str, str]):
    """Name -> what it proves, for every claim of the run under way: the built-in ones in their
    order (health first: a report reads like a bring-up), then the ones it registered."""

    def __getitem__(self, name: str) -> str:
        return _BUILT_IN[name] if name in _BUILT_IN else _registered().about[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*_BUILT_IN, *_registered().about])

    def __len__(self) -> int:
        return len(_BUILT_IN) + len(_registered().about)


CLAIMS: Mapping[str, str] = _Claims()  # read-only: `register` adds a claim to the run


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
    registered = _registered()
    registered.about[name] = about
    registered.options[name] = options
    expect_schemas()[name] = schema if schema is not None else {"type": ["boolean", "object"]}


def options_type(claim: str) -> type[Options]:
    registered = _registered().options
    if claim in registered:
        return registered[claim]
    module = importlib.import_module(f"pytest_frank.claims.{claim}")
    return getattr(module, "Options", Options)


def asked(claim: str, endpoint: Endpoint) -> bool:
    """Whether the fleet entry asks the claim (ALWAYS, ASKED_BY, else its `expect:` key)."""
    value = endpoint.expect.get(claim)
    if value is False:
        return False
    if claim in ASKED_BY:
        return bool(getattr(endpoint, ASKED_BY[claim]))
    return claim in ALWAYS or value is not None


def claim_of(item) -> str | None:
    """The claim a test item's marks name (a battery test carries its claim's mark)."""
    for mark in item.iter_markers():
        if mark.name in CLAIMS:
            return mark.name
    return None


def bind(endpoint: Endpoint) -> Endpoint:
    """Read every claim's options from the entry, and which claims it asks, into it (what
    fleet.load's `bind` does); raises fleet.OptionError naming the claim's key."""
    options = {}
    for claim in CLAIMS:
        try:
            options[claim] = options_type(claim).from_fleet(endpoint.expect.get(claim), endpoint)
        except OptionError as exc:
            raise exc.under(claim) from None
    endpoint.bind(options, [claim for claim in CLAIMS if asked(claim, endpoint)])
    return endpoint
