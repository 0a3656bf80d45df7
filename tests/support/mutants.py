"""Mutants of a real engine's replies, for measuring the verifier itself (bench/mutations.py).

Nothing here is a hand-written fault. The replies a real llama.cpp gave the battery (recorded
through the suite's proxy, `Applier(record=True)`) are walked field by field, on each route
(chat completions, Messages, Responses), plain and streamed, for text, reasoning and tool-call
replies, and every operator is applied to every field (or event) it fits:

- on a field, plain or streamed (in a stream, in every event that holds it): drop it, retype it
  (string, object, number, null), rename it, empty it, zero or inflate a count;
- on a plain reply: reverse a list (reorder), answer with the previous request's reply (swap);
- on a stream: repeat the field in every event of its type, send its event again at the end,
  accumulate a text delta instead of sending the piece, move its event before the one ahead,
  end the stream just before it, answer with the previous request's stream (swap).

A field's path names list elements by their `type` where they have one (`content[text].text`),
and in a stream starts with the event's type (`content_block_delta:delta.text`; chat chunks are
`chunk:`). Each operator plants one cause (`CAUSES`): a gateway's rewrite for a plain reply, the
stream path for a stream, a stream cut short, answers crossed between requests; the harness
compares it with the fix of the failure that killed the mutant.

The number of mutants is bounded by sampling, per route, streaming mode and operator, a few
candidates round-robin over the field kinds (`field_kind`), in an order seeded by `seed`: the
same recording and seed give the same mutants.

A mutant is declared equivalent by one of three stated rules, never by hand:
- `no-op`: on the recorded reply it changes no byte (not kept as a mutant at all);
- `unread`: a field-level operator (or a field repeated in every event) on a field no client
  family reads (not in `READ`) that makes no reply or event less valid against the route's
  published types (the OpenAI and Anthropic SDKs' own pydantic models, validated strictly: the
  SDKs themselves are lenient) than the engine's own reply was: llama.cpp's `timings`,
  `system_fingerprint` and the like;
- `reassembled alike`: two stream events of different parts of the reply (the text and a
  call, two blocks, two items; not one that opens, ends or finishes it) moved past each other
  (reorder), where every client family's reassembly (every delta appended, as opencode and
  the AI SDK do; the OpenAI SDK's ChatCompletionStreamState; the Anthropic SDK's
  accumulate_event) hands its user the same reply as the engine's own stream, and no event
  breaks the published types more: a call's first chunk sent before the text's last piece,
  one Responses item's done event before another item's last delta.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

ROUTES = {"chat": "/v1/chat/completions", "messages": "/v1/messages",
          "responses": "/v1/responses"}
KINDS = ("text", "reasoning", "tool")

FIELD_OPS = ("drop", "retype_string", "retype_object", "retype_number", "retype_null", "rename",
             "empty", "zero", "inflate")
PLAIN_OPS = (*FIELD_OPS, "reorder", "swap")
STREAM_OPS = (*FIELD_OPS, "repeat", "again", "accumulate", "reorder", "end_early", "swap")

# The cause each operator plants, and the words a fix that names it uses
CAUSES = {
    "gateway": ("a gateway or proxy in front rewrote the reply",
                r"gateway|proxy|in front|rewrit|between (the )?(client|engine)"),
    "stream": ("the stream path: the plain reply is right, the streamed one is not",
               r"stream|\bSSE\b|chunk|\bevents?\b|delta"),
    "cut": ("the stream ended early",
            r"(stream|connection|answer|events?).{0,80}(ended|ends|cut|short|early|before|stopp|"
            r"clos|truncat|incomplete|never)|\[DONE\]|message_stop|response\.completed"),
    "crossed": ("answers crossed between requests in flight",
                r"another request|other request|crossed|swapp|mixed|not (its|their) own|"
                r"belongs to|wrong request|in flight"),
}
# Words of a fix that blames the chat template: the wrong road where the template is not at fault
TEMPLATE_BLAME = r"--jinja|chat.template|the template"


def cause_of(operator: str, streamed: bool) -> str:
    if operator == "swap":
        return "crossed"
    if operator == "end_early":
        return "cut"
    return "stream" if streamed else "gateway"


# Keys some client family reads (the OpenAI SDK's stream accumulators, the Anthropic SDK's
# accumulate_event, the AI SDK and opencode, Codex on Responses): a field named otherwise is
# read by none of them, and a mutant of it is equivalent unless it breaks the published types.
READ = frozenset({
    # chat completions
    "choices", "index", "message", "delta", "role", "content", "reasoning_content", "reasoning",
    "tool_calls", "id", "type", "function", "name", "arguments", "finish_reason", "usage",
    "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
    "cached_tokens", "completion_tokens_details", "reasoning_tokens", "model", "refusal",
    # messages
    "content_block", "text", "thinking", "signature", "input", "partial_json", "stop_reason",
    "stop_sequence", "input_tokens", "output_tokens", "cache_read_input_tokens",
    "cache_creation_input_tokens",
    # responses
    "response", "output", "item", "item_id", "output_index", "content_index", "part", "call_id",
    "status", "summary", "encrypted_content", "sequence_number", "input_tokens_details",
    "output_tokens_details", "incomplete_details", "error",
})


def route_of(path: str) -> str | None:
    bare = path.split("?", 1)[0].rstrip("/")
    return next((name for name, suffix in ROUTES.items() if bare.endswith(suffix)), None)


# -- server-sent events ------------------------------------------------------------------------
@dataclass
class Event:
    name: str | None  # the `event:` line (Anthropic, Responses), None on chat chunks
    data: Any  # the parsed `data:` JSON, or its text ("[DONE]")


def parse_event(raw: bytes) -> Event:
    name, lines = None, []
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            lines.append(line[5:].strip())
    text = "\n".join(lines)
    try:
        return Event(name, json.loads(text))
    except ValueError:
        return Event(name, text)


def render_event(event: Event) -> bytes:
    data = event.data if isinstance(event.data, str) else json.dumps(event.data)
    head = f"event: {event.name}\n" if event.name else ""
    return f"{head}data: {data}\n\n".encode()


def event_type(event: Event) -> str:
    if isinstance(event.data, dict):
        kind = event.data.get("type")
        return kind if isinstance(kind, str) else "chunk"
    return event.data.strip() or "empty"


# -- paths -------------------------------------------------------------------------------------
def _segment_of(item: Any) -> str:
    kind = item.get("type") if isinstance(item, dict) else None
    return f"[{kind}]" if isinstance(kind, str) else "[]"


def walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) under `node`, containers included, the root not."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path, value
            yield from walk(value, path)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item, prefix + _segment_of(item))


def _split(path: str) -> list[str]:
    out: list[str] = []
    for part in path.split("."):
        while "[" in part:
            head, _, rest = part.partition("[")
            if head:
                out.append(head)
            selector, _, part = rest.partition("]")
            out.append(f"[{selector}]")
        if part:
            out.append(part)
    return out


def slots(node: Any, path: str) -> list[tuple[Any, Any]]:
    """The (container, key) pairs that `path` names in `node`: each dict holding the last key,
    or each list holding a selected element."""
    found: list[tuple[Any, Any]] = []

    def go(here: Any, rest: list[str]) -> None:
        head, tail = rest[0], rest[1:]
        if head.startswith("["):
            if not isinstance(here, list):
                return
            want = head[1:-1]
            for index, item in enumerate(here):
                if _segment_of(item) == head or (not want and _segment_of(item) == "[]"):
                    found.append((here, index)) if not tail else go(item, tail)
            return
        if isinstance(here, dict) and head in here:
            found.append((here, head)) if not tail else go(here[head], tail)

    parts = _split(path)
    if parts:
        go(node, parts)
    return found


def field_kind(path: str, value: Any) -> str:
    """What kind of field a path names, for sampling across kinds."""
    key = _split(path)[-1] if path else ""
    if key in ("type", "role", "object"):
        return "tag"
    if key in ("finish_reason", "stop_reason", "status", "stop_sequence", "incomplete_details"):
        return "reason"
    if key in ("id", "call_id", "item_id", "tool_use_id", "signature", "encrypted_content"):
        return "id"
    if key == "name":
        return "name"
    if key.endswith("index") or key == "sequence_number":
        return "index"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "count" if "token" in path or "usage" in path else "meta"
    if key in ("content", "text", "thinking", "reasoning_content", "reasoning", "arguments",
               "partial_json", "delta", "refusal", "input"):
        return "text"
    if isinstance(value, (dict, list)):
        return "container"
    return "meta"


# -- a recorded reply --------------------------------------------------------------------------
@dataclass
class Reply:
    route: str
    streamed: bool
    request: dict
    answer: Any  # the JSON answer, or the list of Events

    @property
    def kind(self) -> str:
        return reply_kind(self.answer if not self.streamed else [e.data for e in self.answer])

    def data(self) -> Any:
        return copy.deepcopy(self.answer)


def reply_kind(node: Any) -> str:
    """tool where the reply carries a call, reasoning where it carries thinking, else text."""
    reasoning = False
    for path, value in walk(node):
        key = _split(path)[-1]
        if key == "tool_calls" and value:
            return "tool"
        if key == "type" and value in ("tool_use", "function_call"):
            return "tool"
        if key in ("reasoning_content", "thinking") and isinstance(value, str) and value:
            reasoning = True
        if key == "type" and value in ("reasoning", "thinking_delta",
                                       "response.reasoning_text.delta"):
            reasoning = True
    return "reasoning" if reasoning else "text"


# -- the operators -----------------------------------------------------------------------------
MISSING = object()


def _renamed(key: str) -> str:
    if "_" in key:
        head, *rest = key.split("_")
        return head + "".join(word.title() for word in rest)
    return key + "_"


def _retyped(value: Any, to: str) -> Any:
    if to == "string":
        return MISSING if isinstance(value, str) else (
            str(value) if isinstance(value, (int, float)) else json.dumps(value))
    if to == "object":
        return MISSING if isinstance(value, dict) else {"value": value}
    if to == "number":
        return MISSING if isinstance(value, (int, float)) and not isinstance(value, bool) else 1
    return MISSING if value is None else None


def _field_edit(operator: str) -> Callable[[Any, Any], bool]:
    """An edit of (container, key) in place; False where the operator does not fit the value."""
    def edit(container: Any, key: Any) -> bool:
        value = container[key]
        if operator == "drop":
            if isinstance(container, list):
                return False
            del container[key]
            return True
        if operator.startswith("retype_"):
            new = _retyped(value, operator.removeprefix("retype_"))
            if new is MISSING:
                return False
            container[key] = new
            return True
        if operator == "rename":
            if isinstance(container, list):
                return False
            new_key = _renamed(key)
            items = [(new_key if k == key else k, v) for k, v in container.items()]
            container.clear()
            container.update(items)
            return True
        if operator == "empty":
            if not isinstance(value, (str, list, dict)) or not value:
                return False
            container[key] = type(value)()
            return True
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if operator == "zero":
            if value == 0:
                return False
            container[key] = 0
            return True
        if operator == "inflate":
            container[key] = int(value) * 10 + 100
            return True
        if operator == "reorder":
            return False
        raise ValueError(operator)
    return edit


def _clone(value: Any) -> Any:
    return json.loads(json.dumps(value))  # JSON through and through: faster than deepcopy


def mutate_plain(answer: Any, operator: str, path: str) -> Any:
    """The answer with `operator` applied at `path` (MISSING where it does not fit)."""
    out = _clone(answer)
    changed = False
    for container, key in slots(out, path):
        if operator == "reorder":
            value = container[key]
            if isinstance(value, list) and len(value) > 1 and value != value[::-1]:
                container[key] = value[::-1]
                changed = True
        elif _field_edit(operator)(container, key):
            changed = True
    return out if changed else MISSING


def _stream_path(path: str) -> tuple[str, str]:
    kind, _, rest = path.partition(":")
    return kind, rest


def _holds(event: Event, path: str) -> bool:
    kind, rest = _stream_path(path)
    if event_type(event) != kind:
        return False
    return not rest or bool(slots(event.data, rest))


def mutate_stream(events: list[Event], operator: str, path: str) -> list[Event] | Any:
    """The events with `operator` applied at `path` (MISSING where it does not fit)."""
    out = [Event(e.name, _clone(e.data)) for e in events]
    kind, rest = _stream_path(path)
    holding = [i for i, e in enumerate(out) if _holds(e, path)]
    if not holding:
        return MISSING
    if operator in ("end_early", "again", "reorder") and rest:
        # where the field is set: a finish_reason is in every chunk, null until the last one
        valued = [i for i in holding
                  if any(c[k] is not None for c, k in slots(out[i].data, rest))]
        holding = valued or holding
    if operator in FIELD_OPS:
        changed = False
        for i in holding:
            for container, key in slots(out[i].data, rest) if rest else []:
                changed = _field_edit(operator)(container, key) or changed
        return out if changed else MISSING
    if operator == "end_early":
        return out[:holding[0]]
    if operator == "again":
        last = holding[-1]
        return out[:-1] + [copy.deepcopy(out[last]), out[-1]] if len(out) > 1 else MISSING
    if operator == "reorder":
        first = holding[0]
        if first == 0 or out[first] == out[first - 1]:
            return MISSING
        out[first - 1], out[first] = out[first], out[first - 1]
        return out
    if not rest:
        return MISSING
    if operator == "repeat":
        values = [c[k] for i in holding for c, k in slots(out[i].data, rest) if c[k] is not None]
        parent, _, leaf = rest.rpartition(".")
        if not values or "[" in leaf:
            return MISSING
        changed = False
        for event in out:
            if event_type(event) != kind or not isinstance(event.data, dict):
                continue
            targets = [c[k] for c, k in slots(event.data, parent)] if parent else [event.data]
            for target in targets:
                if isinstance(target, dict) and target.get(leaf, MISSING) != values[0]:
                    target[leaf] = copy.deepcopy(values[0])
                    changed = True
        return out if changed else MISSING
    if operator == "accumulate":
        so_far, changed, seen = "", False, 0
        for i in holding:
            for container, key in slots(out[i].data, rest):
                piece = container[key]
                if not isinstance(piece, str):
                    continue
                seen += 1
                so_far += piece
                if so_far != piece:
                    container[key] = so_far
                    changed = True
        return out if changed and seen > 1 else MISSING
    raise ValueError(operator)


# -- the contract, for the `unread` rule -------------------------------------------------------
def _types(route: str, streamed: bool) -> Any:
    if route == "messages":
        from anthropic.types import Message, RawMessageStreamEvent
        return RawMessageStreamEvent if streamed else Message
    if route == "responses":
        from openai.types.responses import Response, ResponseStreamEvent
        return ResponseStreamEvent if streamed else Response
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    return ChatCompletionChunk if streamed else ChatCompletion


_ADAPTERS: dict[tuple[str, bool], Any] = {}  # built when first needed: the large unions cost seconds


def violations(route: str, streamed: bool, answer: Any) -> set[tuple]:
    """Where a reply (or each event) breaks its route's published types, strictly validated."""
    from pydantic import TypeAdapter, ValidationError

    adapter = _ADAPTERS.get((route, streamed))
    if adapter is None:
        adapter = _ADAPTERS[route, streamed] = TypeAdapter(_types(route, streamed))
    found: set[tuple] = set()
    items = [(event_type(e), e.data) for e in answer if isinstance(e.data, dict)] if streamed \
        else [("", answer)]
    for where, item in items:
        try:
            adapter.validate_python(item, strict=True)
        except ValidationError as error:
            found |= {(where, tuple(str(p) for p in e["loc"]), e["type"]) for e in error.errors()}
    return found


# -- the mutants -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mutant:
    route: str
    streamed: bool
    kind: str  # the reply kind it applies to: text, reasoning or tool
    operator: str
    path: str  # "" for swap
    field_kind: str
    equivalent: str = ""  # the rule that makes it equivalent, with why; "" where it is not

    @property
    def cause(self) -> str:
        return cause_of(self.operator, self.streamed)

    @property
    def name(self) -> str:
        mode = "streamed" if self.streamed else "plain"
        where = f" {self.path}" if self.path else ""
        return f"{self.route} {mode} {self.kind}: {self.operator}{where}"


def _digest(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], Event):
        value = [[e.name, e.data] for e in value]
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def reassembled(route: str, events: list[Event]) -> list[tuple]:
    """A stream as each client family reassembles it (pytest_frank.claims.reply_contract: every
    delta appended, the OpenAI and Anthropic SDKs' own accumulators): what each hands its user."""
    from pytest_frank.claims.reply_contract import STREAMS

    views = STREAMS[route]([(i, e.data) for i, e in enumerate(events) if isinstance(e.data, dict)])
    return [(how, v.content, v.reasoning, v.calls, v.finish, v.tokens, v.prompt, v.error)
            for how, v in sorted(views.items())]


OPENING_OR_ENDING = ("message_start", "message_delta", "message_stop", "response.created",
                     "response.in_progress", "response.completed", "response.incomplete",
                     "response.failed")


def _part(event: Event) -> tuple | None:
    """The part of the reply an event carries (a chat choice's text or one call, a Messages
    block, a Responses item); None for an event that opens, closes or ends the reply, or
    carries its finish or usage, whose place clients rely on."""
    kind, data = event_type(event), event.data
    if not isinstance(data, dict) or kind in OPENING_OR_ENDING:
        return None
    if kind == "chunk":
        choices = data.get("choices")
        if data.get("usage") is not None or not isinstance(choices, list) or len(choices) != 1:
            return None
        choice = choices[0] if isinstance(choices[0], dict) else {}
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        if choice.get("finish_reason") is not None or delta.get("role"):
            return None
        calls = delta.get("tool_calls")
        if isinstance(calls, list) and calls and isinstance(calls[0], dict):
            return ("call", calls[0].get("index"))
        # the thinking and the answer are one part: the answer comes after its thinking
        return ("text",) if any(delta.get(k) is not None for k in (
            "content", "reasoning_content", "reasoning")) else None
    if kind.startswith("content_block_"):
        return ("block", data.get("index"))
    item = data.get("item") if isinstance(data.get("item"), dict) else {}
    found = data.get("item_id", item.get("id"))
    return ("item", found) if isinstance(found, str) else None


def _equivalent(reply: Reply, operator: str, path: str, mutated: Any) -> str:
    if reply.streamed and operator == "reorder":
        # two events of different parts of the reply (the text and a call, two items) moved
        # past each other, which every client reassembles into the same reply
        at = next((i for i, (a, b) in enumerate(zip(reply.answer, mutated)) if a != b), None)
        if at is None or at + 1 >= len(mutated):
            return ""
        parts = _part(mutated[at]), _part(mutated[at + 1])
        if None in parts or parts[0] == parts[1]:
            return ""
        if reassembled(reply.route, reply.answer) != reassembled(reply.route, mutated):
            return ""
        if violations(reply.route, True, mutated) - violations(reply.route, True, reply.answer):
            return ""
        return ("reassembled alike: every client family's reassembly of the stream (every delta "
                "appended; the OpenAI and Anthropic SDKs' accumulators) gives the same reply, "
                "and no event breaks the published types more than the engine's own did")
    if operator not in (*FIELD_OPS, "repeat"):  # the others move, cut or add whole events
        return ""
    key = _split(_stream_path(path)[1] if reply.streamed else path)[-1:]
    if not key or key[0] in READ or key[0].startswith("["):
        return ""
    before = violations(reply.route, reply.streamed, reply.answer)
    after = violations(reply.route, reply.streamed, mutated)
    if after - before:
        return ""
    return (f"unread: no client family reads '{key[0]}', and the reply breaks the published "
            "types no more than the engine's own did")


def candidates(replies: list[Reply],
               witness: dict[Mutant, tuple[Reply, Any]] | None = None) -> list[Mutant]:
    """Every mutant the operators make of the recorded replies: one per (route, mode, reply
    kind, operator, field) whose effect on the first reply holding the field is a change, and
    not the same change as another's there."""
    found: dict[tuple, Mutant] = {}
    effects: set[tuple] = set()
    witness = {} if witness is None else witness  # each mutant's reply and what it made of it
    groups: dict[tuple[str, bool, str], list[Reply]] = {}
    for reply in replies:
        groups.setdefault((reply.route, reply.streamed, reply.kind), []).append(reply)
    for (route, streamed, kind), group in sorted(groups.items()):
        swap = Mutant(route, streamed, kind, "swap", "", "reply")
        found[(route, streamed, kind, "swap", "")] = swap
        for reply in group:
            if streamed:
                paths = {f"{event_type(e)}:": None for e in reply.answer}
                for event in reply.answer:
                    for path, value in walk(event.data):
                        paths.setdefault(f"{event_type(event)}:{path}", value)
            else:
                paths = dict(walk(reply.answer))
            ops = STREAM_OPS if streamed else PLAIN_OPS
            for path, value in paths.items():
                for operator in ops:
                    if operator == "swap" or (route, streamed, kind, operator, path) in found:
                        continue
                    if streamed and path.endswith(":") and operator not in (
                            "end_early", "again", "reorder"):
                        continue
                    mutated = (mutate_stream(reply.answer, operator, path) if streamed
                               else mutate_plain(reply.answer, operator, path))
                    if mutated is MISSING:
                        continue
                    effect = (route, streamed, kind, operator, _digest(mutated))
                    if effect in effects:
                        continue
                    effects.add(effect)
                    mutant = Mutant(route, streamed, kind, operator, path,
                                    field_kind(_stream_path(path)[1] if streamed else path, value))
                    if operator == "accumulate" and mutant.field_kind != "text":
                        continue  # a delta is text: another field accumulated is a repeat
                    found[(route, streamed, kind, operator, path)] = mutant
                    witness[mutant] = (reply, mutated)
    return list(found.values())


def generate(replies: list[Reply], per_group: int, seed: int) -> list[Mutant]:
    """The sampled mutants of the recorded replies, each with its equivalence decided."""
    witness: dict[Mutant, tuple[Reply, Any]] = {}
    chosen = sample(candidates(replies, witness), per_group, seed)
    out = []
    for mutant in chosen:
        if mutant not in witness:  # swap: whole replies, never equivalent
            out.append(mutant)
            continue
        reply, mutated = witness[mutant]
        why = _equivalent(reply, mutant.operator, mutant.path, mutated)
        out.append(replace(mutant, equivalent=why) if why else mutant)
    return out


def sample(mutants: list[Mutant], per_group: int, seed: int) -> list[Mutant]:
    """Up to `per_group` mutants per (route, mode, operator), taken round-robin over the field
    kinds (and so across reply kinds), in an order the seed fixes."""
    groups: dict[tuple, dict[str, list[Mutant]]] = {}
    for mutant in sorted(mutants, key=lambda m: (m.route, m.streamed, m.operator, m.field_kind,
                                                 m.kind, m.path)):
        key = (mutant.route, mutant.streamed, mutant.operator)
        groups.setdefault(key, {}).setdefault(mutant.field_kind, []).append(mutant)
    chosen = []
    for key, by_kind in sorted(groups.items()):
        rng = random.Random(f"{seed}:{key}")
        queues = [by_kind[k] for k in sorted(by_kind)]
        for queue in queues:
            rng.shuffle(queue)
        rng.shuffle(queues)
        picked: list[Mutant] = []
        while len(picked) < per_group and any(queues):
            for queue in queues:
                if queue and len(picked) < per_group:
                    picked.append(queue.pop())
        chosen.extend(picked)
    return chosen


# -- in the proxy ------------------------------------------------------------------------------
@dataclass
class Applier:
    """The proxy's `mutant`: applies one Mutant (or none) to the replies on its route, counts
    the replies it changed, and with `record` keeps every reply as it came."""
    mutant: Mutant | None = None
    record: bool = False
    replies: list[Reply] = field(default_factory=list)
    fired: int = 0
    _last: dict[tuple[str, bool], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _applies(self, route: str | None, streamed: bool, reply: Reply) -> bool:
        m = self.mutant
        return m is not None and route == m.route and streamed == m.streamed and \
            reply.kind == m.kind

    def answer(self, path: str, request: dict, answer: Any) -> Any:
        route = route_of(path)
        if route is None:
            return answer
        reply = Reply(route, False, request, answer)
        with self._lock:
            if self.record:
                self.replies.append(reply)
            previous, self._last[route, False] = self._last.get((route, False)), answer
            if not self._applies(route, False, reply):
                return answer
            assert self.mutant is not None
            if self.mutant.operator == "swap":
                out = answer if previous is None else previous
            else:
                out = mutate_plain(answer, self.mutant.operator, self.mutant.path)
                out = answer if out is MISSING else out
            self.fired += out != answer
            return out

    def stream(self, path: str, request: dict, raw: list[bytes]) -> list[bytes]:
        route = route_of(path)
        if route is None:
            return raw
        events = [parse_event(piece) for piece in raw]
        reply = Reply(route, True, request, events)
        with self._lock:
            if self.record:
                self.replies.append(reply)
            previous, self._last[route, True] = self._last.get((route, True)), raw
            if not self._applies(route, True, reply):
                return raw
            assert self.mutant is not None
            if self.mutant.operator == "swap":
                self.fired += previous is not None and previous != raw
                return raw if previous is None else previous
            out = mutate_stream(events, self.mutant.operator, self.mutant.path)
            if out is MISSING:
                return raw
            self.fired += 1
            return [render_event(event) for event in out]
