"""The tool-schema corpus: tools whose parameters use every JSON Schema keyword a client sends
(`$defs`/`$ref` with recursion, `anyOf`/`oneOf`/`allOf`, `enum`/`const`, ranges, string and
number formats, `additionalProperties: false`, arrays of arrays, nullable types), written by
this module rather than copied from any client. Each entry says whether it is sent strict and
whether it is streamed, so the first four cover every pairing; later entries vary the same
families (deeper nesting, other ranges, mutual recursion) for a fleet that asks a larger corpus.

Strict entries follow OpenAI's strict rules: every property required, `additionalProperties:
false` on every object, an optional value spelt as a type with "null"; a recursive field is an
array, which may be empty, so a finite call exists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

STRING, INTEGER, NUMBER, BOOLEAN = ({"type": t} for t in ("string", "integer", "number", "boolean"))


@dataclass(frozen=True)
class Entry:
    tool: dict[str, Any]  # the OpenAI function form, `strict` inside `function` where strict
    strict: bool
    stream: bool
    recursive: str | None = None  # the $defs entry that refers to itself (directly or not)

    @property
    def name(self) -> str:
        return self.tool["function"]["name"]

    @property
    def parameters(self) -> dict[str, Any]:
        return self.tool["function"]["parameters"]

    @property
    def label(self) -> str:
        return f"{self.name} ({'strict' if self.strict else 'not strict'}, " \
               f"{'streamed' if self.stream else 'whole'})"


def _obj(props: dict[str, Any], strict: bool, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object closed to other keys; in strict form every key is required and an optional
    one may be null instead."""
    if strict:
        props = {k: _nullable(v) if k in optional else v for k, v in props.items()}
        return {"type": "object", "properties": props, "required": list(props),
                "additionalProperties": False}
    return {"type": "object", "properties": props,
            "required": [k for k in props if k not in optional], "additionalProperties": False}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema.get("type"), str) and not {"enum", "const"} & set(schema):
        return {**schema, "type": [schema["type"], "null"]}  # an enum must list null itself
    return {"anyOf": [schema, {"type": "null"}]}


def _tool(name: str, description: str, parameters: dict[str, Any], strict: bool) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
    if strict:
        fn["strict"] = True
    return {"type": "function", "function": fn}


# -- the families: each builds one tool from a variant number and the strict flag --------------
def tree(n: int, strict: bool) -> tuple[dict[str, Any], str]:
    """A recursive `$defs` node: a folder holds folders through an optional `$ref` array; odd
    variants recurse through a second definition (mutual recursion)."""
    child = "folder" if n % 2 == 0 else "entry"
    folder = _obj({"name": {**STRING, "minLength": 1, "maxLength": 64},
                   "children": {"type": "array", "items": {"$ref": f"#/$defs/{child}"},
                                "maxItems": 8 + n}},
                  strict, optional=() if strict else ("children",))
    defs = {"folder": folder}
    if child == "entry":
        defs["entry"] = {"oneOf": [{"$ref": "#/$defs/folder"},
                                   _obj({"file": STRING, "bytes": {**INTEGER, "minimum": 0}},
                                        strict)]}
    params = {"$defs": defs, **_obj({"root": {"$ref": "#/$defs/folder"},
                                     "dry_run": {**BOOLEAN, "default": True}}, strict,
                                    optional=("dry_run",))}
    return _tool(f"make_tree_{n}", "Create a folder tree.", params, strict), "folder"


def trip(n: int, strict: bool) -> tuple[dict[str, Any], None]:
    """Enums, ranges (inclusive, exclusive, multipleOf), number and string formats, an object
    in an array in an object."""
    leg = _obj({"from": {**STRING, "pattern": "^[A-Z]{3}$", "description": "IATA code"},
                "to": {**STRING, "pattern": "^[A-Z]{3}$"},
                "date": {**STRING, "format": "date"},
                "cabin": {"type": "string", "enum": ["economy", "premium", "business"][:2 + n % 2]}},
               strict, optional=("cabin",))
    params = _obj({"travellers": {**INTEGER, "minimum": 1, "maximum": 9 + n, "format": "int32"},
                   "budget": {**NUMBER, "exclusiveMinimum": 0, "maximum": 10_000 * (n + 1),
                              "format": "double"},
                   "bags": {**INTEGER, "minimum": 0, "multipleOf": 1, "format": "int64"},
                   "ratio": {**NUMBER, "minimum": 0, "maximum": 1, "format": "float"},
                   "legs": {"type": "array", "items": leg, "minItems": 1, "maxItems": 4}},
                  strict, optional=("bags", "ratio"))
    return _tool(f"book_trip_{n}", "Book a trip over one or more legs.", params, strict), None


def search(n: int, strict: bool) -> tuple[dict[str, Any], None]:
    """anyOf and oneOf (a const discriminator), a type list with null, string lengths and
    patterns, unique items, arrays of arrays."""
    by_text = _obj({"kind": {"const": "text"}, "query": {**STRING, "minLength": 1}}, strict)
    by_id = _obj({"kind": {"const": "id"}, "id": {**STRING, "format": "uuid"}}, strict)
    params = _obj({"filter": {"oneOf": [by_text, by_id]},
                   "limit": {"anyOf": [{**INTEGER, "minimum": 1, "maximum": 100 + n},
                                       {"type": "null"}]},
                   "tags": {"type": "array", "items": {**STRING, "maxLength": 16},
                            "uniqueItems": True, "maxItems": 5},
                   "grid": {"type": "array", "items": {"type": "array", "items": NUMBER,
                                                       "maxItems": 3}, "maxItems": 3},
                   "cursor": {"type": ["string", "null"], "pattern": "^[a-z0-9]*$"}},
                  strict, optional=("tags", "grid", "cursor"))
    return _tool(f"search_records_{n}", "Search stored records.", params, strict), None


def alarm(n: int, strict: bool) -> tuple[dict[str, Any], None]:
    """A shared `$defs` type used twice (no recursion), allOf, date-time and time formats,
    a boolean and an integer enum."""
    moment = _obj({"at": {**STRING, "format": "date-time"},
                   "zone": {**STRING, "description": "IANA zone"}}, strict)
    params = {"$defs": {"moment": moment},
              **_obj({"start": {"$ref": "#/$defs/moment"},
                      "snooze": {"allOf": [{"$ref": "#/$defs/moment"},
                                           {"description": "when to ring again"}]},
                      "daily_at": {**STRING, "format": "time"},
                      "volume": {"type": "integer", "enum": [1, 5, 10][: 2 + n % 2]},
                      "vibrate": BOOLEAN},
                     strict, optional=("snooze", "daily_at", "vibrate"))}
    return _tool(f"set_alarm_{n}", "Set an alarm.", params, strict), None


FAMILIES: list[Callable[[int, bool], tuple[dict[str, Any], str | None]]] = [tree, trip, search,
                                                                             alarm]
MOST = 32  # the largest corpus a fleet may ask (expect.tools.schemas)
# The first four: each family once, and each pairing of strict and streamed once.
PAIRINGS = [(True, False), (False, True), (True, True), (False, False)]


def corpus(size: int) -> list[Entry]:
    """The first `size` entries: family by position, its variant by round; strict and streamed
    turn by position so every family meets every pairing."""
    out = []
    for i in range(min(size, MOST)):
        family, variant = FAMILIES[i % len(FAMILIES)], i // len(FAMILIES)
        strict, stream = PAIRINGS[(i + variant) % len(PAIRINGS)]
        tool, recursive = family(variant, strict)
        out.append(Entry(tool, strict, stream, recursive))
    return out


def keywords(schema: Any) -> set[str]:
    """Every schema keyword a corpus uses (the test of the corpus says it covers them)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            inner = value.values() if key in ("properties", "$defs") else [value]
            for v in inner:
                found |= keywords(v)
    elif isinstance(schema, list):
        for v in schema:
            found |= keywords(v)
    return found
