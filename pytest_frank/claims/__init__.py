"""A package per built-in claim (claims/<name>/, holding every check of the claim), beside the
modules claims share (`checks`, `advice`, `replies`, `diagnosis`, ...). Each claim declares
itself once, as its `CLAIM` (`Claim`: its name, which is its marker and its fleet.yaml `expect:`
key, what it proves, its place in the reports, how it is asked, its `Options` and its docs page),
its `Options` (each key an `option` whose metadata holds its description and its JSON schema:
fleet.schema.json's `$defs.expect` is written from them by docs/gen.py; parsed from the fleet
entry by the fleet loader, handed `declared()`, read back typed by a probe with
`Options.on(endpoint)` and by a judge as `ctx.options`), its probes (network and file work)
and its checks
(`pytest_frank.claims.checks.Check`: probe + judge), each declared in a module of the claim's
package and named, in the battery's order, by its `CLAIM`'s `tests`: batteries/test_<claim>.py
makes each a test. The built-in claims are the packages here that declare a `CLAIM`. A
conftest.py or a plugin adds claims of its own with `register` (the `pytest_frank_claims` hook,
pytest_frank.base.hooks), for the run that loads it (pytest_frank.base.state)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import types
import typing
from dataclasses import KW_ONLY, MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Iterator, Mapping, TypeVar

from pytest_frank.base import state
from pytest_frank.fleet import Endpoint, OptionError, asks, expect_schemas, with_claims

if typing.TYPE_CHECKING:
    import pytest

    from pytest_frank.claims.checks import Check

# Claim names are marker names and fleet.yaml `expect:` keys: a public interface (`-m tools`).
# How a claim is asked besides its own `expect:` key (every other claim is asked by that key
# alone, `false` turning it off): health and chat always, unless turned off under expect
# (`expect: {chat: false}`); alias and serve by an endpoint key of their own (`alias:`,
# `serve:`), unless turned off under expect. Each claim says so in its `Claim`.
MARKER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a claim's name is a marker's: `-m lora`
Opts = TypeVar("Opts", bound="Options")


def option(default: Any = MISSING, about: str = "", *, factory: Callable[[], Any] | None = None,
           **schema: Any) -> Any:
    """A claim's fleet.yaml key: its default (or `factory`), what it means (`about`, the
    schema's description and the docs' key table) and its JSON schema keywords beyond the type,
    which is read from the field's annotation (`minimum=1`, `enum=[...]`, `items={...}`)."""
    metadata = {"about": about, "schema": schema}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


# JSON Schema's type of a key, by the annotation's type (`X | None` is X's: fleet.yaml leaves a
# key out rather than writing null).
JSON_TYPES: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string",
                              list: "array", tuple: "array", dict: "object"}


def json_type(annotation: Any) -> str | None:
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)] \
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union \
        else [annotation]
    names = {JSON_TYPES.get(typing.get_origin(k) or k) for k in kinds}
    return names.pop() if len(names) == 1 else None


def key_schemas(cls: type) -> dict[str, dict[str, Any]]:
    """The JSON schema of each key of `cls` declared with `option`, in declaration order; a field
    declared otherwise is no fleet.yaml key (a value the parsing fills in)."""
    hints = typing.get_type_hints(cls)
    found = {}
    for f in fields(cls):
        if "about" not in f.metadata:
            continue
        node: dict[str, Any] = {}
        keywords = f.metadata["schema"]
        if not {"type", "enum", "$ref", "oneOf", "anyOf"} & set(keywords):
            kind = json_type(hints[f.name])
            if kind is not None:
                node["type"] = kind
        found[f.name] = {**node, **keywords, "description": f.metadata["about"]}
    return found


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
    def schema(cls) -> dict[str, Any]:
        """The JSON schema of the claim's `expect:` value, from its keys (`option`): `true` or
        a mapping of them; `true` alone for a claim without options."""
        keys = key_schemas(cls)
        if not keys:
            return {"type": "boolean"}
        return {"type": ["boolean", "object"], "additionalProperties": False, "properties": keys}

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


@dataclass(frozen=True)
class Claim:
    """A built-in claim, declared once in its module as `CLAIM`; everything else about it is read
    from here: its marker (its name; pytest_frank.plugin registers one per claim), the `expect:`
    schema fragment (`fragment`), the reports' order, the docs' claim table and nav, and its
    checks (`checks`: the `Check`s naming it, each made a test by batteries/test_<name>.py)."""

    name: str  # its marker and its fleet.yaml `expect:` key: a public interface (`-m tools`)
    about: str  # what it proves, as the reports' column and the docs' table say it
    options: type[Options] = Options
    _: KW_ONLY
    # Its place in the reports and the docs, lowest first (health first: a report reads like a
    # bring-up); spaced by ten, so a new claim finds room between two.
    order: int
    always: bool = False  # asked of every endpoint, unless `expect: {<name>: false}`
    asked_by: str | None = None  # or asked by an endpoint key of its own (`serve:`)
    expect_key: bool = True  # whether it has an `expect:` key (alias is asked by `alias:` alone)
    asks: str = ""  # how fleet.yaml asks it, where the options' shape says it otherwise
    # Its tests, each a `Check` declared in a module of its package, in the battery's order:
    # the one place a claim lists its checks (the battery and the docs' test table follow).
    tests: tuple[str, ...] = ()

    def checks(self) -> tuple[Check[Any, Any], ...]:
        """Its checks, in the order of its `tests`: the `Check`s naming it that the modules of its
        package (claims/<name>/) declare; batteries/test_<name>.py makes each a test."""
        from pytest_frank.claims.checks import Check

        package = importlib.import_module(f"{__name__}.{self.name}")
        found: dict[str, Check[Any, Any]] = {}
        for module in [package, *(importlib.import_module(info.name) for info in
                                  pkgutil.walk_packages(package.__path__, f"{package.__name__}."))]:
            for value in vars(module).values():
                if isinstance(value, Check) and value.claim == self.name:
                    found.setdefault(value.test, value)
        unlisted = sorted(set(found) - set(self.tests))
        if unlisted:
            raise ClaimError(f"claim {self.name!r}: {', '.join(unlisted)} declared in its package "
                             f"but not in its CLAIM's tests")
        missing = [test for test in self.tests if test not in found]
        if missing:
            raise ClaimError(f"claim {self.name!r}: no Check in its package for {', '.join(missing)}")
        return tuple(found[test] for test in self.tests)

    @property
    def page(self) -> str:
        """Its docs page, relative to docs/."""
        return f"claims/{self.name}.md"

    def fragment(self) -> dict[str, Any]:
        """Its `$defs.expect` fragment of fleet.schema.json (docs/gen.py writes them there)."""
        schema = self.options.schema()
        asks = self.asks or (
            f"Asked when the endpoint has `{self.asked_by}:`; `false` turns it off."
            if self.asked_by else
            "Asked always; `false` turns it off" + (
                ", a mapping sets its options." if schema["type"] != "boolean" else ".")
            if self.always else
            "`true` or a mapping of options asks it; `false` turns it off.")
        return {**schema, "description": f"The {self.name} claim: {self.about}. {asks}"}


@lru_cache(maxsize=1)
def built_in() -> Mapping[str, Claim]:
    """The package's claims, in their order: every module of this package with a `CLAIM`."""
    declared = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        claim = vars(module).get("CLAIM")
        if isinstance(claim, Claim):
            declared.append(claim)
    return MappingProxyType({c.name: c for c in sorted(declared, key=lambda c: c.order)})


def battery(name: str) -> dict[str, Callable[..., None]]:
    """The tests of a built-in claim, by name, in its `tests` order: batteries/test_<name>.py is
    `globals().update(battery("<name>"))`, so the battery holds every check of the claim and
    nothing else."""
    from pytest_frank.claims.checks import battery_test

    return {check.test: battery_test(check) for check in built_in()[name].checks()}


def expect_schema() -> dict[str, Any]:
    """fleet.schema.json's `$defs.expect`, from the built-in claims."""
    return {"type": "object", "additionalProperties": False,
            "properties": {c.name: c.fragment() for c in built_in().values() if c.expect_key}}


def __getattr__(name: str) -> Any:
    """The names read from the built-in claims: BUILT_IN (their names), ALWAYS, ASKED_BY."""
    if name == "BUILT_IN":
        return frozenset(built_in())
    if name == "ALWAYS":
        return frozenset(c.name for c in built_in().values() if c.always)
    if name == "ASKED_BY":
        return {c.name: c.asked_by for c in built_in().values() if c.asked_by}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        own = built_in()
        return own[name].about if name in own else _registered().about[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*built_in(), *_registered().about])

    def __len__(self) -> int:
        return len(built_in()) + len(_registered().about)


CLAIMS: Mapping[str, str] = _Claims()  # read-only: `register` adds a claim to the run


def register(name: str, about: str, options: type[Options] = Options,
             schema: dict[str, Any] | None = None) -> None:
    """Add a claim: its marker, its fleet.yaml `expect:` key (validated by `schema`, a JSON
    schema fragment for its value; by default the one its `options` declare with `option`, as a
    built-in claim's, else `true` or any mapping) and its matrix column."""
    if name in built_in():
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
    if schema is None:
        schema = options.schema() if key_schemas(options) else {"type": ["boolean", "object"]}
    expect_schemas()[name] = schema


def options_type(claim: str) -> type[Options]:
    registered = _registered().options
    if claim in registered:
        return registered[claim]
    return built_in()[claim].options


def asked(claim: str, endpoint: Endpoint) -> bool:
    """Whether the fleet entry asks the claim (always, by an endpoint key of its own, else by
    its `expect:` key)."""
    return asks(claim, declared().get(claim), endpoint)


def claim_of(item: pytest.Item) -> str | None:
    """The claim a test item's marks name (a battery test carries its claim's mark)."""
    for mark in item.iter_markers():
        if mark.name in CLAIMS:
            return mark.name
    return None


# A claim a run registers comes after the built-in ones (their order is spaced by ten from 10).
REGISTERED_ORDER = 10_000


def declared() -> Mapping[str, Claim]:
    """Every claim of the run under way by name, built-in and registered, as the fleet loader
    reads them (`fleet.load(path, claims=declared())`): each parses its own options there."""
    registered = _registered()
    return {**built_in(), **{name: Claim(name, about, registered.options[name],
                                         order=REGISTERED_ORDER)
                             for name, about in registered.about.items()}}


def bind(endpoint: Endpoint) -> Endpoint:
    """The entry with every claim's options read from it, and which claims it asks (what the
    fleet loader does with `declared()`); raises fleet.OptionError naming the claim's key."""
    return with_claims(endpoint, declared())
