"""jsonschema's errors as sentences, in one vocabulary for every schema the plugin validates
against: fleet.yaml, a tool call's arguments, the JSON an endpoint sends. Callers put the place
and their own prefix around the sentence; the value shown is the caller's choice (`show`), so a
secret never reaches a sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pytest_frank.base import redact

Path = tuple[Any, ...]  # keys and list indexes, from the document's top
Show = Callable[[Any, Path], str]

# JSON Schema's type names, as a sentence says what was expected; `object` is the caller's word.
EXPECTED = {"array": "a list", "string": "a string", "number": "a number",
            "integer": "an integer", "boolean": "true or false", "null": "nothing"}
# What a value is, as a sentence says what came instead.
GOT = {list: "list", str: "string", int: "integer", float: "number",
       bool: "boolean", type(None): "empty value"}


@dataclass(frozen=True)
class SchemaProblem:
    path: Path  # where in the document
    kind: str  # unknown | missing | type | enum | invalid
    reason: str  # the sentence, without the place: "expected a number, got string 'soon'"
    names: tuple[str, ...] = ()  # the keys an unknown or missing problem is about
    keyword: str = ""  # the schema keyword that failed (pattern, propertyNames, ...)
    shown: str = ""  # the value, as `show` quotes it
    expected: tuple[str, ...] = ()  # a type problem: the JSON Schema types the value may have

    @property
    def where(self) -> str:
        return dotted(self.path)


def problems(schema: dict, instance: Any, show: Show | None = None,
             object_word: str = "an object") -> list[SchemaProblem]:
    """Every way `instance` breaks `schema`, shallowest first."""

    show = show or short
    # jsonschema reports `required` once per missing key, each naming every key missing: one
    # problem each, not the same sentence twice.
    found = dict.fromkeys(_problem(e, show, object_word)
                          for e in _validator(schema).iter_errors(instance))
    return sorted(found, key=lambda p: (len(p.path), [str(k) for k in p.path], p.reason))


def _validator(schema: dict):
    """The schema's own draft (2020-12 unless `$schema` says), checking `format` as strict
    clients do (a tool's "uri" argument of "" is refused by them)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def dotted(path: Path) -> str:
    """`endpoints.a.headers[0]`; "" for the top."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")


def short(value: Any, path: Path = ()) -> str:
    """A value as a sentence quotes it: masked, on one line, at most 60 characters."""
    text = redact.scrub(repr(value))  # an echoed key is masked whole, not cut in half
    return text if len(text) <= 60 else redact.cut(text, 57)


def _problem(error, show: Show, object_word: str) -> SchemaProblem:
    path, kind, value = tuple(error.absolute_path), error.validator, error.instance
    in_names = "propertyNames" in error.schema_path
    if kind == "additionalProperties" and isinstance(value, dict):
        known = sorted(error.schema.get("properties", {}))
        unknown = tuple(sorted(str(k) for k in set(value) - set(known)))
        hint = f" (known keys: {', '.join(known)})" if known else ""
        return SchemaProblem(path, "unknown", f"unknown key {_names(unknown)}{hint}", unknown)
    if kind == "required" and isinstance(value, dict):
        missing = tuple(k for k in error.validator_value if k not in value)
        return SchemaProblem(path, "missing", f"{_names(missing)} is required but missing",
                             missing)
    if kind == "type":
        expected = _expected(error.validator_value, object_word)
        got = object_word.split()[-1] if isinstance(value, dict) else \
            GOT.get(type(value), type(value).__name__)
        listed = error.validator_value
        return SchemaProblem(path, "type", f"expected {expected}, got {got} {show(value, path)}",
                             expected=tuple(map(str, listed if isinstance(listed, list)
                                                else [listed])))
    if kind == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return SchemaProblem(path, "enum", f"{show(value, path)} is not one of {allowed}")
    return SchemaProblem(path, "invalid", _invalid(error, show, path),
                         keyword="propertyNames" if in_names else kind, shown=show(value, path))


def _invalid(error, show: Show, path: Path) -> str:
    kind, value = error.validator, error.instance
    if kind == "minProperties" and error.validator_value == 1:
        return "must not be empty"
    if kind == "anyOf" and all("required" in alt for alt in error.validator_value):
        return f"needs one of {', '.join(k for alt in error.validator_value for k in alt['required'])}"
    if kind in ("oneOf", "anyOf"):
        return f"{show(value, path)} has the wrong shape"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bound = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than",
                 "exclusiveMaximum": "less than"}[kind]
        return f"{show(value, path)} is not {bound} {error.validator_value}"
    if kind == "pattern":
        return f"{show(value, path)} does not match {error.validator_value}"
    return redact.cut(error.message, 200, "")


def _expected(types: Any, object_word: str) -> str:
    words = {**EXPECTED, "object": object_word}
    listed = types if isinstance(types, list) else [types]
    return " or ".join(words.get(t, str(t)) for t in listed)


def _names(keys: tuple[str, ...]) -> str:
    return ", ".join(repr(k) for k in keys)
