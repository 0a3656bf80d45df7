"""The tool-schema corpus (every keyword a client sends, valid Draft 2020-12, every pairing of
strict and streamed), the trigger F1 as K2 Vendor Verifier scores it, and the nesting depth a
recursing call is diagnosed by."""

import jsonschema
import pytest

from pytest_frank.claims.tools.schemas import MOST, PAIRINGS, corpus, keywords
from pytest_frank.claims.tools.breadth import depth, f1

pytestmark = pytest.mark.unit

CLIENT_KEYWORDS = {"$defs", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "minimum",
                   "maximum", "exclusiveMinimum", "multipleOf", "format", "pattern", "minLength",
                   "maxLength", "minItems", "maxItems", "uniqueItems", "additionalProperties",
                   "required", "items", "properties", "type", "default", "description"}


def test_the_default_handful_covers_every_keyword_and_pairing():
    entries = corpus(4)
    used = set().union(*(keywords(e.parameters) for e in entries))
    assert CLIENT_KEYWORDS <= used, CLIENT_KEYWORDS - used
    assert {(e.strict, e.stream) for e in entries} == set(PAIRINGS)
    assert [e.recursive for e in entries] == ["folder", None, None, None]
    formats = {f for e in entries for f in _formats(e.parameters)}
    assert {"date", "date-time", "time", "uuid", "int32", "int64", "float", "double"} <= formats


def _formats(schema):
    if isinstance(schema, dict):
        if isinstance(schema.get("format"), str):
            yield schema["format"]
        for v in schema.values():
            yield from _formats(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from _formats(v)


def test_every_entry_is_a_valid_schema_and_strict_ones_follow_the_strict_rules():
    entries = corpus(MOST + 10)
    assert len(entries) == MOST and len({e.name for e in entries}) == MOST
    for e in entries:
        jsonschema.Draft202012Validator.check_schema(e.parameters)
        assert e.tool["function"].get("strict", False) is e.strict
        if e.strict:
            for obj in _objects(e.parameters):
                assert obj["additionalProperties"] is False
                assert sorted(obj["required"]) == sorted(obj["properties"]), e.name
    # every family meets every pairing within the corpus
    for family in ("make_tree", "book_trip", "search_records", "set_alarm"):
        assert {(e.strict, e.stream) for e in entries
                if e.name.startswith(family)} == set(PAIRINGS), family
    assert any(e.recursive and "entry" in e.parameters["$defs"] for e in entries)  # mutual


def _objects(schema):
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield schema
        for v in schema.values():
            yield from _objects(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from _objects(v)


def test_a_finite_call_exists_for_every_entry():
    # The smallest call each schema allows validates: a recursing model is a choice, not forced.
    finite = {"make_tree": {"root": {"name": "a", "children": []}, "dry_run": None},
              "book_trip": {"travellers": 1, "budget": 1.5, "bags": None, "ratio": None,
                            "legs": [{"from": "CDG", "to": "LHR", "date": "2026-01-02",
                                      "cabin": None}]},
              "search_records": {"filter": {"kind": "text", "query": "x"}, "limit": None,
                                 "tags": None, "grid": None, "cursor": None},
              "set_alarm": {"start": {"at": "2026-01-02T07:00:00Z", "zone": "Europe/Paris"},
                            "snooze": None, "daily_at": None, "volume": 1, "vibrate": None}}
    for e in corpus(8):
        if e.strict:
            args = finite[e.name.rsplit("_", 1)[0]]
            assert not list(jsonschema.Draft202012Validator(e.parameters).iter_errors(args)), \
                e.name


@pytest.mark.parametrize("mine,truth,expected", [
    ([True, True, False, False], [True, True, False, False], (1.0, 1.0, 1.0)),
    ([False] * 4, [False] * 4, (1.0, 1.0, 1.0)),  # nothing triggered on either side
    ([False] * 4, [True, True, False, False], (0.0, 0.0, 0.0)),
    ([True, False, True, False], [True, True, False, False], (0.5, 0.5, 0.5)),
    ([True, True, True, True], [True, True, True, False], (0.75, 1.0, 6 / 7)),
])
def test_trigger_f1(mine, truth, expected):
    assert f1(mine, truth) == pytest.approx(expected)


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', 1), ('{"a": [{"b": "}}}{{{"}]}', 3),
    ('{"root":{"name":"x","children":[{"name":"x","children":[{"name', 6),
    ('{"s": "a\\"[["}', 1), ("", 0)])
def test_depth_of_a_cut_call(text, expected):
    assert depth(text) == expected
