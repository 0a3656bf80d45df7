"""The wire rules of a streamed answer, per API shape: pure functions of the frames a stream
carried (its body as the recorder kept it), each breach a `Breach` naming its rule.

The SDKs reassemble what they can, so a stream that breaks these rules often reads fine to
the battery's other checks; a stricter client (one that starts a call on every chunk with an
id, renders one content block at a time, or decodes each frame on its own) does not."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from pytest_frank.base import redact

FIELDS = ("event", "data", "id", "retry")  # what an SSE line may name
CONSTANT = ("id", "model", "created")  # every chunk of one completion carries the same
RESPONSES_END = ("response.completed", "response.incomplete", "response.failed")
EOL = re.compile(r"\r\n|\r|\n")
BROKEN_CHAR = re.compile("[\ufffd\ud800-\udfff]")  # a replacement char, half a surrogate pair


@dataclass(frozen=True)
class Frame:
    """One server-sent event: its `event:` name (None where it had none) and its data lines."""

    event: str | None
    data: str


@dataclass
class Frames:
    frames: list[Frame] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)  # the first line that is no SSE field
    strays: int = 0  # how many such lines (a body of them is not kept line by line)


@dataclass(frozen=True)
class Breach:
    rule: str  # framing, done, constant, created, role, finish, continuation, multibyte, usage,
    # order, block_order, item_order
    said: str


def parse(body: str) -> Frames:
    """The events of an SSE body, as a client's parser dispatches them (a blank line ends one)."""
    out = Frames()
    event: str | None = None
    data: list[str] = []
    for line in _lines(body):
        if not line:
            if data:
                out.frames.append(Frame(event, "\n".join(data)))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue  # a comment: keep-alive
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name not in FIELDS:
            out.strays += 1
            out.stray = out.stray or [line]
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:  # no blank line after the last event: a client dispatches it all the same
        out.frames.append(Frame(event, "\n".join(data)))
    return out


def _lines(body: str) -> Iterator[str]:
    """The body's lines, one at a time (a list of them could outweigh the body many times)."""
    start = 0
    for end in EOL.finditer(body):
        yield body[start:end.start()]
        start = end.end()
    yield body[start:]


def _json(frame: Frame) -> Any:
    try:
        return json.loads(frame.data)
    except (ValueError, RecursionError):
        return None


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _key(value: Any) -> Any:
    """An index or id as a dict key: a list or object an endpoint sent there, as its text."""
    return value if isinstance(value, (str, int, float, type(None))) else _show(value)


def _show(value: Any, limit: int = 80) -> str:
    return redact.cut(json.dumps(value) if not isinstance(value, str) else repr(value), limit)


def _stray(found: Frames) -> list[Breach]:
    if not found.stray:
        return []
    return [Breach("framing", f"{found.strays} line(s) that are no SSE field (data:, "
                              f"event:, id:, retry: or a : comment), the first "
                              f"{_show(found.stray[0])}")]


def _broken(piece: Any, where: str) -> list[Breach]:
    """A text piece holding a replacement character or half a surrogate pair: a character whose
    bytes were sent before they were whole."""
    found = BROKEN_CHAR.search(piece) if isinstance(piece, str) else None
    if found is None:
        return []
    char = found.group()
    how = "U+FFFD (its bytes cut apart)" if char == "\ufffd" else \
        f"half a UTF-16 surrogate pair (\\u{ord(char):04x})"
    return [Breach("multibyte", f"{where} carries {how}: a character split across frames "
                                f"instead of sent whole, in {_show(piece, 40)}")]


def non_ascii(pieces: list[str]) -> int:
    """Characters past ASCII among the text pieces: what a split could have broken."""
    return sum(1 for piece in pieces for c in piece if ord(c) > 127 and c != "\ufffd")


def error_event(found: Frames) -> tuple[int, str] | None:
    """The first frame that carries the server's error instead of the answer (an OpenAI-shape
    `{"error": ...}` chunk, an Anthropic or Responses `error` event): (frame, its message)."""
    for i, frame in enumerate(found.frames):
        data = _obj(_json(frame))
        if data.get("type") == "error" or data.get("error") is not None:
            error = data.get("error") or data
            said = _obj(error).get("message", error)
            return i, redact.cut(said if isinstance(said, str) else json.dumps(said), 300)
    return None


# -- OpenAI chat completions -----------------------------------------------------------------------
def chat(found: Frames, usage_asked: bool) -> list[Breach]:
    """`data:` frames of chat.completion.chunk objects, then `data: [DONE]`."""
    out = _stray(found)
    frames = found.frames
    done = [i for i, f in enumerate(frames) if f.data.strip() == "[DONE]"]
    if not done:
        out.append(Breach("done", "the stream ended without its `data: [DONE]` terminator"))
    elif done[0] != len(frames) - 1:
        out.append(Breach("done", f"{len(frames) - 1 - done[0]} frame(s) came after "
                                  f"`data: [DONE]`"))
    chunks = []
    for i, frame in enumerate(frames[:done[0]] if done else frames):
        chunk = _json(frame)
        if not isinstance(chunk, dict):
            out.append(Breach("framing", f"frame {i} is not a JSON object: {_show(frame.data)}"))
            continue
        chunks.append((i, chunk))
    out += _constant(chunks)
    out += _choices(chunks)
    if usage_asked:
        out += _usage(chunks)
    return out


def _constant(chunks: list[tuple[int, dict]]) -> list[Breach]:
    out = []
    for key in CONSTANT:
        seen = [(i, c.get(key)) for i, c in chunks]
        other = next(((i, v) for i, v in seen if v != seen[0][1]), None)
        if other is not None:
            out.append(Breach("created" if key == "created" else "constant",
                              f"`{key}` changes across frames: {_show(seen[0][1])} in frame "
                              f"{seen[0][0]}, {_show(other[1])} in frame {other[0]}"))
    return out


def _choices(chunks: list[tuple[int, dict]]) -> list[Breach]:
    """Per choice index: role in its first delta only, one finish_reason, tool calls whose
    continuation chunks carry only their index and argument text, whole characters."""
    out: list[Breach] = []
    deltas: dict[Any, int] = {}  # choice index -> deltas seen
    finishes: dict[Any, list[int]] = {}
    calls: dict[tuple, int] = {}  # (choice index, call index) -> pieces seen
    for i, chunk in chunks:
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            index = _key(choice.get("index"))
            if choice.get("finish_reason") is not None:
                finishes.setdefault(index, []).append(i)
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            first = deltas.get(index, 0) == 0
            deltas[index] = deltas.get(index, 0) + 1
            if first and delta.get("role") is None:
                out.append(Breach("role", f"choice {index}'s first delta (frame {i}) has no "
                                          f"`role`"))
            elif not first and delta.get("role") is not None:
                out.append(Breach("role", f"choice {index}'s delta in frame {i} repeats `role` "
                                          f"{_show(delta['role'])}: it belongs in the first "
                                          f"delta only"))
            for key in ("content", "reasoning_content", "reasoning"):
                out += _broken(delta.get(key), f"frame {i}'s delta.{key}")
            pieces = delta.get("tool_calls")
            for call in pieces if isinstance(pieces, list) else []:
                out += _call_piece(call, index, i, calls)
    for index in deltas:
        seen = finishes.get(index, [])
        if len(seen) != 1:
            said = "no finish_reason" if not seen else \
                f"{len(seen)} finish_reasons (frames {', '.join(map(str, seen[:4]))})"
            out.append(Breach("finish", f"choice {index} has {said}; it needs exactly one"))
    return out


def _call_piece(call: Any, choice: Any, i: int, calls: dict[tuple, int]) -> list[Breach]:
    if not isinstance(call, dict):
        return [Breach("framing", f"frame {i}'s tool_calls holds {_show(call)}, not an object")]
    key = (choice, _key(call.get("index")))
    first = calls.get(key, 0) == 0
    calls[key] = calls.get(key, 0) + 1
    fn = _obj(call.get("function"))
    out = _broken(fn.get("arguments"), f"frame {i}'s tool call arguments")
    if first:
        missing = [k for k, v in (("id", call.get("id")), ("function.name", fn.get("name")))
                   if not v]
        if missing:
            out.append(Breach("continuation", f"tool call {call.get('index')}'s first chunk "
                                              f"(frame {i}) has no {' or '.join(missing)}"))
        return out
    extra = sorted({k for k, v in call.items() if v is not None} - {"index", "function"} |
                   {f"function.{k}" for k, v in fn.items() if v is not None and k != "arguments"})
    if extra:
        out.append(Breach("continuation", f"tool call {call.get('index')}'s continuation chunk "
                                          f"(frame {i}) carries {', '.join(extra)} again "
                                          f"({_show(call, 160)}): only the index and the "
                                          f"argument text belong there"))
    return out


def _usage(chunks: list[tuple[int, dict]]) -> list[Breach]:
    """With include_usage: usage only in the last chunk (where any came: test_params_stream_usage
    judges whether it comes)."""
    carried = [i for i, c in chunks if c.get("usage") is not None]
    early = [i for i in carried if i != chunks[-1][0]]
    if not early:
        return []
    return [Breach("usage", f"usage came in frame(s) {', '.join(map(str, early[:4]))}, before "
                            f"the last chunk (frame {chunks[-1][0]}): asked with "
                            f"stream_options.include_usage, it belongs in the last one alone")]


# -- typed events (Anthropic Messages, OpenAI Responses) -------------------------------------------
def _events(found: Frames) -> tuple[list[tuple[int, dict]], list[Breach]]:
    """The frames as typed events (`event:` line and data `type` alike); pings dropped."""
    out, breaches = [], _stray(found)
    for i, frame in enumerate(found.frames):
        data = _json(frame)
        kind = data.get("type") if isinstance(data, dict) else None
        if not isinstance(kind, str):
            breaches.append(Breach("framing", f"frame {i} is not a typed JSON event: "
                                              f"{_show(frame.data)}"))
            continue
        if frame.event is not None and frame.event != kind:
            breaches.append(Breach("framing", f"frame {i} is named `event: {frame.event}` but "
                                              f"its data is a {kind} event"))
        if kind != "ping":
            out.append((i, data))
    return out, breaches


def messages(found: Frames) -> list[Breach]:
    """message_start; per block content_block_start, deltas, content_block_stop, one block
    closed before the next opens; message_delta with stop_reason; message_stop."""
    events, out = _events(found)
    if not events:
        return out + [Breach("order", "the stream carried no events")]
    out += _bounds(events, "message_start", ("message_stop",), "message_stop")
    open_: dict[Any, tuple[str, int]] = {}  # block index -> (type, frame it opened at)
    started, stop_reason = 0, None
    for i, event in events:
        kind, index = event["type"], _key(event.get("index"))
        if kind == "content_block_start":
            block = _obj(event.get("content_block"))
            if index != started:
                out.append(Breach("order", f"block {index} opened (frame {i}) where block "
                                           f"{started} was next"))
            for held, (held_kind, _) in open_.items():
                out.append(Breach("block_order", f"block {index} ({block.get('type')}) opened "
                                                 f"at frame {i} while block {held} ({held_kind}) "
                                                 f"was still open (its content_block_stop came "
                                                 f"at frame {_stop_of(events, held)})"))
            open_[index], started = (str(block.get("type")), i), started + 1
        elif kind in ("content_block_delta", "content_block_stop") and index not in open_:
            out.append(Breach("order", f"{kind} for block {index} at frame {i}, which is not "
                                       f"open"))
        elif kind == "content_block_delta":
            delta = _obj(event.get("delta"))
            for key in ("text", "thinking", "partial_json"):
                out += _broken(delta.get(key), f"frame {i}'s {delta.get('type')}")
        elif kind == "content_block_stop":
            open_.pop(index)
        elif kind == "message_delta":
            if open_:
                out.append(Breach("order", f"message_delta at frame {i} while block(s) "
                                           f"{', '.join(map(str, open_))} were open"))
            delta = _obj(event.get("delta"))
            stop_reason = delta.get("stop_reason") or stop_reason
    if open_:
        out.append(Breach("order", f"block(s) {', '.join(map(str, open_))} never closed"))
    if stop_reason is None:
        out.append(Breach("order", "no message_delta carried a stop_reason"))
    return out


def _bounds(events: list[tuple[int, dict]], first: str, last: tuple[str, ...],
            last_said: str) -> list[Breach]:
    """The event a stream must begin with, and those it may end with."""
    out = []
    if events[0][1]["type"] != first:
        out.append(Breach("order", f"the stream begins with {events[0][1]['type']}, not {first}"))
    if events[-1][1]["type"] not in last:
        out.append(Breach("order", f"the stream ends with {events[-1][1]['type']}, not "
                                   f"{last_said}"))
    return out


def _stop_of(events: list[tuple[int, dict]], index: Any) -> str:
    found = [i for i, e in events
             if e["type"] == "content_block_stop" and _key(e.get("index")) == index]
    return str(found[0]) if found else "never"


def responses(found: Frames) -> list[Breach]:
    """response.created first, a terminal event last; output items added and done in order,
    one at a time (the reasoning item done before the message item is added)."""
    events, out = _events(found)
    if not events:
        return out + [Breach("order", "the stream carried no events")]
    out += _bounds(events, "response.created", RESPONSES_END,
                   "response.completed (or incomplete, failed)")
    open_: dict[Any, tuple[str, int]] = {}  # item id -> (type, frame it was added at)
    for i, event in events:
        kind = event["type"]
        item = _obj(event.get("item"))
        if kind == "response.output_item.added":
            for held, (held_kind, at) in open_.items():
                out.append(Breach("item_order", f"the {item.get('type')} item was added at "
                                                f"frame {i} while the {held_kind} item (added at "
                                                f"frame {at}) was still open: it was done only "
                                                f"at frame {_done_of(events, held)}"))
            open_[_key(item.get("id"))] = (str(item.get("type")), i)
        elif kind == "response.output_item.done":
            if open_.pop(_key(item.get("id")), None) is None:
                out.append(Breach("order", f"output_item.done at frame {i} for the "
                                           f"{item.get('type')} item {_show(item.get('id'))}, "
                                           f"which was never added"))
        elif kind.endswith(".delta"):
            if "item_id" in event and _key(event["item_id"]) not in open_:
                out.append(Breach("order", f"{kind} at frame {i} for item "
                                           f"{_show(event['item_id'])}, which is not open"))
            out += _broken(event.get("delta"), f"frame {i}'s {kind}")
        elif kind in RESPONSES_END and open_:
            out.append(Breach("order", f"{kind} at frame {i} while the "
                                       f"{', '.join(k for k, _ in open_.values())} item(s) "
                                       f"were open"))
    return out


def _done_of(events: list[tuple[int, dict]], item_id: Any) -> str:
    found = [i for i, e in events if e["type"] == "response.output_item.done"
             and _key(_obj(e.get("item")).get("id")) == item_id]
    return str(found[0]) if found else "never"
