"""The one translator from jsonschema errors to sentences (pytest_frank.fleet.schema_errors), as the
fleet file, tool-call arguments and an endpoint's JSON all use it."""

from __future__ import annotations

import pytest

from pytest_frank.base import redact
from pytest_frank.fleet.schema_errors import dotted, problems

pytestmark = pytest.mark.unit

OBJECT = {"type": "object", "additionalProperties": False, "required": ["city", "days"],
          "properties": {"city": {"type": "string"},
                         "days": {"type": "integer", "minimum": 1},
                         "unit": {"enum": ["C", "F"]},
                         "tags": {"type": "array", "items": {"type": "string"}},
                         "url": {"type": "string", "pattern": "^https?://"}}}


@pytest.mark.parametrize("instance, kind, where, reason, names", [
    ({"city": "Paris"}, "missing", "", "'days' is required but missing", ("days",)),
    ({"city": "Paris", "days": 1, "colour": 1}, "unknown", "",
     "unknown key 'colour' (known keys: city, days, tags, unit, url)", ("colour",)),
    ({"city": 7, "days": 1}, "type", "city", "expected a string, got integer 7", ()),
    ({"city": "Paris", "days": "1"}, "type", "days", "expected an integer, got string '1'", ()),
    ({"city": "Paris", "days": 0}, "invalid", "days", "0 is not at least 1", ()),
    ({"city": "Paris", "days": 1, "unit": "K"}, "enum", "unit", "'K' is not one of C, F", ()),
    ({"city": "Paris", "days": 1, "tags": ["a", 2]}, "type", "tags[1]",
     "expected a string, got integer 2", ()),
    ({"city": "Paris", "days": 1, "url": "ftp://h"}, "invalid", "url",
     "'ftp://h' does not match ^https?://", ()),
    ([1, 2, 3], "type", "", "expected an object, got list [1, 2, 3]", ()),
    (None, "type", "", "expected an object, got empty value None", ()),
])
def test_each_error_reads_as_one_sentence(instance, kind, where, reason, names):
    (found,) = problems(OBJECT, instance)
    assert (found.kind, found.where, found.reason, found.names) == (kind, where, reason, names)


@pytest.mark.parametrize("schema, instance, reason", [
    ({"type": "object", "minProperties": 1}, {}, "must not be empty"),
    ({"anyOf": [{"required": ["unit"]}, {"required": ["script"]}]}, {"env": "x"},
     "needs one of unit, script"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, [1], "[1] has the wrong shape"),
    ({"type": ["boolean", "object"]}, 3, "expected true or false or an object, got integer 3"),
    ({"type": "object"}, "x" * 100, "expected an object, got string '" + "x" * 56 + "..."),
])
def test_the_combinators_and_long_values(schema, instance, reason):
    (found,) = problems(schema, instance)
    assert found.reason == reason


def test_the_caller_chooses_its_object_word_and_how_a_value_is_shown():
    (found,) = problems({"type": "object"}, [1], show=lambda value, path: "(not shown)",
                        object_word="a mapping")
    assert found.reason == "expected a mapping, got list (not shown)"
    (found,) = problems({"type": "array"}, {"a": 1}, object_word="a mapping")
    assert found.reason == "expected a list, got mapping {'a': 1}"


def test_shallow_problems_come_first_and_a_secret_is_masked(fresh_state):
    redact.register("sk-very-secret-0123")
    found = problems(OBJECT, {"days": "sk-very-secret-0123", "colour": 1})
    assert [p.kind for p in found] == ["missing", "unknown", "type"]
    assert "sk-very-secret" not in found[2].reason and "***" in found[2].reason


def test_dotted_paths():
    assert dotted(("endpoints", "a", "headers", 0)) == "endpoints.a.headers[0]"
    assert dotted(()) == ""
