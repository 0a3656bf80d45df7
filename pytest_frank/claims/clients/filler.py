"""What a client's request is made of besides its layout: a tool set of the client's size with
the schema keywords its tools use, and prose to bring the request to the client's typical size.
All generated here (seeded, the same every run); none of it is any client's own text."""

from __future__ import annotations

import json
import random
from typing import Any

SCHEMA_2020 = "https://json-schema.org/draft/2020-12/schema"
VERBS = ("read", "write", "edit", "list", "find", "grep", "run", "fetch", "search", "plan",
         "note", "ask", "open", "close", "check", "move", "copy", "diff", "test", "build",
         "lint", "watch", "stop", "show")
NOUNS = ("file", "folder", "task", "page", "cell", "branch", "issue", "log", "job", "entry")
WORDS = ("the", "a", "each", "every", "change", "file", "folder", "answer", "tool", "call",
         "result", "line", "keep", "short", "small", "first", "read", "before", "after", "edit",
         "test", "run", "when", "where", "only", "never", "always", "user", "asks", "explain",
         "plan", "step", "project", "code", "review", "path", "value", "name", "check", "it",
         "them", "with", "from", "into", "and", "or", "then", "so", "is", "are", "be", "done")


def prose(size: int, seed: int) -> str:
    """About `size` characters of plain sentences, deterministic for `seed`."""
    pick, out, total = random.Random(seed), [], 0
    while total < size:
        words = [pick.choice(WORDS) for _ in range(pick.randint(6, 16))]
        sentence = " ".join(words).capitalize() + "."
        out.append(sentence)
        total += len(sentence) + 1
    return " ".join(out)[:max(size, 0)]


def _kinds(rich: bool) -> list[tuple[str, dict[str, Any], Any]]:
    """(name, schema, a valid value) for each kind of property; `rich` with the keywords a
    coding agent's tools carry (format, pattern, lengths, anyOf of consts, propertyNames)."""
    plain = [("path", {"type": "string", "description": "Where to act."}, "notes.txt"),
             ("count", {"type": "integer", "description": "How many."}, 3),
             ("recursive", {"type": "boolean"}, False)]
    if not rich:
        return plain
    return [("path", {"type": "string", "minLength": 1, "maxLength": 4096,
                      "description": "Where to act, relative to the project."}, "notes.txt"),
            ("mode", {"anyOf": [{"const": "fast"}, {"const": "full"}],
                      "description": "How thoroughly."}, "fast"),
            ("url", {"type": "string", "format": "uri"}, "https://example.org/a"),
            ("ref", {"type": "string", "pattern": "^[a-z][a-z0-9_-]*$", "maxLength": 64}, "main"),
            ("items", {"type": "array", "items": {"type": "string"}, "maxItems": 8}, ["a"]),
            ("timeout", {"type": "number", "exclusiveMinimum": 0}, 30),
            ("labels", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
                        "additionalProperties": {"type": "string"}}, {"kind": "doc"})]


def tools(count: int, rich: bool, strict: bool | None = None, seed: int = 7) -> list[dict]:
    """`count` function tools in the OpenAI form (the drivers translate): each requires its
    first property and allows some others; `rich` adds `$schema` 2020-12 and the keywords;
    `strict` is written into each function where the client sends it."""
    kinds, pick, out = _kinds(rich), random.Random(seed), []
    for n in range(count):
        name = f"{VERBS[n % len(VERBS)]}_{NOUNS[(n * 7) % len(NOUNS)]}"
        chosen = [kinds[0]] + pick.sample(kinds[1:], min(len(kinds) - 1, 1 + n % 3))
        params: dict[str, Any] = {"type": "object",
                                  "properties": {k: dict(s) for k, s, _ in chosen},
                                  "required": [chosen[0][0]], "additionalProperties": False}
        if rich:
            params = {"$schema": SCHEMA_2020, **params}
        function: dict[str, Any] = {"name": name, "description": prose(48, seed + n),
                                    "parameters": params}
        if strict is not None:
            function["strict"] = strict
        out.append({"type": "function", "function": function})
    return out


def example_arguments(tool: dict) -> dict:
    """Arguments valid against `tool`'s schema: what an earlier turn's call carried."""
    values = {k: v for k, _, v in _kinds(True) + _kinds(False)}
    params = tool["function"]["parameters"]
    return {k: values[k] for k in params.get("required", [])}


def size_of(*parts: Any) -> int:
    """Bytes of the parts as JSON: the request body's size, near enough."""
    return sum(len(json.dumps(p)) for p in parts)
