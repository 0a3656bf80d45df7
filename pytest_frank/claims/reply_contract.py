"""Every reply against its route's published contract and against its own request: pure
functions of one exchange (the request sent, the body that came back), run as the reply is
recorded (`digest`, while its body is still whole) for the contract claim to judge later.

The contract is the official SDKs' own types (openai's `ChatCompletion`, `ChatCompletionChunk`,
`responses.Response` and its stream events; anthropic's `Message` and its stream events),
validated strictly: the SDKs build replies with `construct`, which checks nothing, so a field
missing or of another type reaches the client as sent. Strict pydantic validation of the JSON
text (`model_validate_json(strict=True)`) is that contract as the SDK maintainers keep it, in
step with the installed SDK; an endpoint's extra fields are allowed, as the SDKs allow them.

Beside the schema: what the request set (the model, the token budget, n, tool_choice,
response_format, stop, stream_options.include_usage) is honoured; the reply agrees with itself
(finish or stop reason with the content, usage with its parts and with what streamed, ids across
a stream); and a stream is reassembled as client families do (`Assembled`): every delta appended,
as opencode and the AI SDK do, and the SDKs' own accumulators (the OpenAI SDK's
`ChatCompletionStreamState`, the Anthropic SDK's `MessageStream` accumulation), for the
streamed-equals-plain comparison."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterator

from pytest_frank.base import redact
from pytest_frank.claims import stream_rules as rules
from pytest_frank.claims.diagnosis import ENDED_EARLY
from pytest_frank.claims.replies import parsed_arguments, text_difference
from pytest_frank.transport.http import event_budget

if TYPE_CHECKING:
    # The SDKs' types are imported where a route's schema is first used (they load slowly).
    from anthropic.types import Message
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.responses import Response

APPENDED = "appended"  # every delta appended, as opencode and the AI SDK do
OPENAI_SDK = "openai_sdk"  # the OpenAI SDK's ChatCompletionStreamState
ANTHROPIC_SDK = "anthropic_sdk"  # the Anthropic SDK's MessageStream accumulation
PLAIN = "plain"
REASSEMBLY = {APPENDED: "appending every delta (as opencode and the AI SDK do)",
              OPENAI_SDK: "the OpenAI SDK's stream accumulator (ChatCompletionStreamState, "
                          "client.chat.completions.stream)",
              ANTHROPIC_SDK: "the Anthropic SDK's MessageStream accumulation"}
# Stream parts the stream claim judges under its own options (llama.cpp breaks each by design):
# left to it here, so an endpoint that turned them off there is not failed for them here.
STREAM_CLAIM_PARTS = ("created", "role", "block_order", "item_order")
BUDGET_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
KEPT = 40  # breaches kept per exchange, past the engine's known gaps
# Deltas with text a stream may carry beyond its generated tokens (a parser's flush at the end).
PIECES_SLACK = 2
MAX_JUDGED = 1024 * 1024  # characters of a body the contract reads (a long thinker's: 180 KB)


@dataclass(frozen=True)
class Breach:
    """One departure from the contract: the field, where in the reply, what is wrong, and its
    kind (schema: the SDK type; request: what the request set; agrees: one field against
    another; stream: the stream's wire rules)."""

    kind: str
    field: str
    where: str
    said: str
    missing: str | None = None  # a schema field absent: "<event type>:<path>", for engine gaps
    named: str | None = None  # the model a reply names where another was asked (one the
    # server serves under another of its names is no breach: the claim asks its model list)


@dataclass
class Assembled:
    """A reply as one client family reads it: the text fields, the calls, the finish and the
    server's counts; for a stream, the chunk each text piece came in, to name where a
    difference begins."""

    how: str
    content: str = ""
    reasoning: str = ""
    calls: list[tuple[Any, Any]] = field(default_factory=list)  # (name, arguments as sent)
    finish: str | None = None
    tokens: int | None = None  # generated (usage)
    prompt: int | None = None  # the prompt's tokens, cached ones included
    error: str | None = None  # the reassembly itself raised
    call_pieces: int = 0  # deltas that carried a piece of a call (a stream's)
    # field -> [(offset where a piece starts, its chunk)], for "content" and "reasoning"
    pieces: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def add(self, name: str, text: Any, chunk: int) -> None:
        if not isinstance(text, str) or not text:
            return
        self.pieces.setdefault(name, []).append((len(getattr(self, name)), chunk))
        setattr(self, name, getattr(self, name) + text)

    def chunk_at(self, name: str, offset: int) -> int | None:
        """The chunk whose piece holds character `offset` of `name` (a stream's)."""
        found = None
        for start, chunk in self.pieces.get(name, []):
            if start > offset:
                break
            found = chunk
        return found


@dataclass
class Digest:
    """What the contract claim keeps of one exchange: its breaches and, where it may have a
    twin, its reassemblies and the request that names it."""

    api: str
    route: str
    streamed: bool
    probe: str  # the probe that sent it (module.function)
    breaches: list[Breach] = field(default_factory=list)
    views: dict[str, Assembled] = field(default_factory=dict)  # how -> the reply so read
    twin_key: str | None = None  # the request less stream fields, where greedy
    prompt_key: str | None = None  # the request less what leaves its prompt as it is
    reply_id: str | None = None  # the id the reply gives itself (a stream's first one)
    frames: int = 0
    unjudged: str | None = None  # why it could not be read to judge
    exchange: Any = None  # the exchange, where it breaks the contract (its reproduce line)
    key: Any = None  # the probe's key (runtime.target.Key), for the test that judges it
    gaps: set[str] = field(default_factory=set)  # fields the engine is known to leave out


# -- the exchange as a whole ---------------------------------------------------------------------
def digest(api: str, route: str, request: Any, status: int | None, body: str,
           content_type: str, probe: str) -> Digest | None:
    """The contract's findings on one generation exchange; None where there is no answer to
    judge (an error status, a cut read: the claims judge those)."""
    if status != 200 or not isinstance(request, dict):
        return None
    streamed = request.get("stream") is True
    out = Digest(api, route, streamed, probe)
    if streamed:
        found = rules.parse(body)
        if rules.error_event(found) is not None:
            return None  # the answer failed mid-stream: the claims judge the error
        budget = _budget(request)
        if budget is not None and len(found.frames) > event_budget(budget[1]):
            return None  # cut as running past its budget: the claims judge that
        out.frames = len(found.frames)
        events = _frames_json(found)
        out.breaches += _stream_rules(api, found, request)
        out.breaches += SCHEMAS[api].stream(events)
        out.views = STREAMS[api](events)
    else:
        try:
            reply = json.loads(body)
        except (ValueError, RecursionError):
            out.breaches.append(Breach("schema", "(body)", "the reply",
                                       f"the body is not JSON ({_show(body, 60)}), as "
                                       f"`stream` was not asked"))
            return out
        out.breaches += SCHEMAS[api].whole(body)
        if not isinstance(reply, dict):
            return out
        out.views = {PLAIN: PLAINS[api](reply)}
    for how, view in out.views.items():
        if view.error:
            out.breaches.append(Breach("stream", "(stream)", REASSEMBLY.get(how, how),
                                       f"{REASSEMBLY.get(how, how)} raises on this stream: "
                                       f"{view.error}"))
    read = out.views.get(APPENDED) or out.views.get(PLAIN)
    if read is not None:
        out.breaches += against_request(api, request, read, streamed)
        out.breaches += agreement(api, read, streamed, request)
    out.breaches += _identity(api, request, body, streamed)
    out.breaches += _coherent(api, request, _objects(api, body, streamed), streamed)
    out.twin_key = twin_key(request)
    out.prompt_key = prompt_key(request)
    out.reply_id = reply_id(api, body, streamed)
    return out


def reply_id(api: str, body: str, streamed: bool) -> str | None:
    """The id a reply gives itself: the completion's, the message's, the response's (in a
    stream, the first event's that carries one)."""
    for _, obj in _objects(api, body, streamed):
        obj = _obj(obj)
        nested = obj.get("response") or obj.get("message") if api != "chat" else None
        found = (nested if isinstance(nested, dict) else obj).get("id")
        if isinstance(found, str) and found:
            return found
    return None


def crossed(digests: list[Digest]) -> None:
    """A reply whose id another reply, to another request, gave itself first: one request's
    answer handed to another (engines give every answer its own id). An id that three or more
    requests' replies share is the server's one id for every answer, not a crossing: two
    answers swapped or handed twice share theirs with one other request only."""
    asked: dict[str, set[object]] = {}
    for d in digests:
        if d.reply_id is not None:
            asked.setdefault(d.reply_id, set()).add(d.twin_key if d.twin_key is not None else id(d))
    first: dict[str, Digest] = {}
    for d in digests:
        if d.reply_id is None or len(asked[d.reply_id]) > 2:
            continue
        was = first.setdefault(d.reply_id, d)
        if was is d or (was.twin_key is not None and was.twin_key == d.twin_key):
            continue  # one greedy request asked twice: a cache's replay is the same answer
        if any(b.kind == "crossed" for b in d.breaches):
            continue  # judged once: the replies probe may be asked again
        d.breaches.insert(0, Breach(
            "crossed", "id", "the stream" if d.streamed else "the reply",
            f"its id {_show(d.reply_id, 40)} is the id of {was.probe}'s "
            f"{'streamed' if was.streamed else 'plain'} reply to another request: this is "
            f"that request's answer, not its own"))


# Request fields that leave the prompt as it is (sampling, budget, stop, streaming): two
# requests that differ in these alone send one prompt, and their replies count it alike.
PROMPT_KEPT = frozenset({"stream", "stream_options", "temperature", "top_p", "top_k", "min_p",
                         "seed", "stop", "stop_sequences", "presence_penalty",
                         "frequency_penalty", "repeat_penalty", "logprobs", "top_logprobs",
                         *BUDGET_KEYS})


def prompt_key(request: dict) -> str:
    return json.dumps({k: v for k, v in request.items() if k not in PROMPT_KEPT},
                      sort_keys=True, default=str)


def prompt_disagreements(digests: list[Digest]) -> None:
    """Replies to one prompt count it alike (their usage's prompt tokens, cached ones
    included): where they do not, the count that stands alone against the others' is named in
    its digest (all of them where no count has a majority)."""
    groups: dict[tuple[str, str], list[tuple[Digest, int]]] = {}
    for d in digests:
        view = d.views.get(APPENDED) or d.views.get(PLAIN)
        if d.prompt_key is not None and view is not None and view.prompt is not None:
            groups.setdefault((d.api, d.prompt_key), []).append((d, view.prompt))
    for (api, _), group in groups.items():
        counts: dict[int, int] = {}
        for _, n in group:
            counts[n] = counts.get(n, 0) + 1
        if len(counts) < 2:
            continue
        top = max(counts.values())
        common = [n for n, c in counts.items() if c == top]
        usual = common[0] if len(common) == 1 else None
        for d, n in group:
            if n == usual:
                continue
            others = sorted({m for _, m in group if m != n})
            if any(b.field == PROMPT_FIELD[api] and b.kind == "agrees" and "counted otherwise"
                   in b.said for b in d.breaches):
                continue  # judged once: the replies probe may be asked again
            d.breaches.append(Breach(
                "agrees", PROMPT_FIELD[api], "the stream" if d.streamed else "the reply",
                f"{PROMPT_FIELD[api]} counts {n} prompt tokens where {len(group) - 1} other "
                f"repl{'y' if len(group) == 2 else 'ies'} to the same prompt count "
                f"{', '.join(map(str, others))}: one prompt, counted otherwise"))


def ended_early(breaches: list[Breach]) -> Breach | None:
    """The breach that says a stream stopped before its end event, where one does."""
    return next((b for b in breaches if b.kind == "stream" and ENDED_EARLY.search(b.said)), None)


def twin_key(request: dict) -> str | None:
    """The request as its streamed or plain twin sends it (stream fields left out), where it is
    greedy (temperature 0): two answers to it must be one."""
    if request.get("temperature") != 0:
        return None
    rest = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
    return json.dumps(rest, sort_keys=True, default=str)


def _frames_json(found: rules.Frames) -> list[tuple[int, Any]]:
    out = []
    for i, frame in enumerate(found.frames):
        if frame.data.strip() == "[DONE]":
            continue
        try:
            out.append((i, json.loads(frame.data)))
        except (ValueError, RecursionError):
            continue  # the stream rules name a frame that is not JSON
    return out


def _stream_rules(api: str, found: rules.Frames, request: dict) -> list[Breach]:
    usage = (request.get("stream_options") or {}).get("include_usage") is True
    said = {"chat": lambda: rules.chat(found, usage_asked=usage),
            "messages": lambda: rules.messages(found),
            "responses": lambda: rules.responses(found)}[api]()
    events = _frames_json(found)
    opens_wide = _opens_wide(events) if api == "chat" else False
    out = [Breach("stream", b.rule, "the stream", b.said) for b in said
           if b.rule not in STREAM_CLAIM_PARTS or _own_role(b, opens_wide)]
    out += _once(api, events)
    if api == "chat":
        out += _after_finish(events)
        if usage and not any(_obj(e).get("usage") is not None for _, e in events):
            out.append(Breach("request", "usage", "the stream",
                              "stream_options.include_usage was sent and no chunk carried "
                              "usage: clients that count tokens from the stream get none"))
    return out


def _opens_wide(events: list[tuple[int, Any]]) -> bool:
    """Whether a chat stream's first text begins past ASCII (a character spanning tokens)."""
    for _, chunk in events:
        for choice in _list(_obj(chunk).get("choices")):
            delta = _obj(_obj(choice).get("delta"))
            text = next((delta[k] for k in ("content", "reasoning_content", "reasoning")
                         if isinstance(delta.get(k), str) and delta[k]), None)
            if text:
                return ord(text[0]) > 127
    return False


def _own_role(breach: rules.Breach, opens_wide: bool) -> bool:
    """A role breach the contract judges itself: a role repeated, or missing from a first delta
    whose text opens in ASCII (llama.cpp leaves it out only before a character spanning tokens,
    which the stream claim judges under its `role` option)."""
    return breach.rule == "role" and ("repeats" in breach.said or not opens_wide)


ONCE = {"messages": ("message_start", "message_delta", "message_stop"),
        "responses": ("response.created", *rules.RESPONSES_END)}


def _once(api: str, events: list[tuple[int, Any]]) -> list[Breach]:
    """The events a stream carries once (its start, its end): one sent again, as a gateway that
    replays the end does, ends or restarts the answer twice for a client."""
    out = []
    for kind in ONCE.get(api, ()):
        frames = [i for i, e in events if _obj(e).get("type") == kind]
        if len(frames) > 1:
            out.append(Breach("stream", kind, f"frames {', '.join(map(str, frames[:4]))}",
                              f"{kind} came {len(frames)} times (frames "
                              f"{', '.join(map(str, frames[:4]))}): a stream has one"))
    if api == "responses":
        ends = [i for i, e in events if _obj(e).get("type") in rules.RESPONSES_END]
        if len(ends) > 1:
            out.append(Breach("stream", "type", f"frame {ends[1]}",
                              f"{len(ends)} terminal events (frames {', '.join(map(str, ends))})"
                              f": a response ends once"))
    return out


def _after_finish(events: list[tuple[int, Any]]) -> list[Breach]:
    """Text or a call after a choice's finish_reason: the answer went on after it ended."""
    ended: dict[Any, int] = {}
    for i, chunk in events:
        for choice in _list(_obj(chunk).get("choices")):
            choice = _obj(choice)
            index = rules._key(choice.get("index"))
            delta = _obj(choice.get("delta"))
            carries = [k for k in ("content", "reasoning_content", "reasoning", "tool_calls")
                       if delta.get(k)]
            if index in ended and carries:
                return [Breach("stream", f"choices[{index}].delta.{carries[0]}", f"frame {i}",
                               f"choice {index}'s delta.{carries[0]} came in frame {i}, after its "
                               f"finish_reason in frame {ended[index]}: clients stop reading a "
                               f"choice at its finish and drop the rest")]
            if choice.get("finish_reason") is not None:
                ended.setdefault(index, i)
    return []


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def _show(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return redact.cut(redact.squeeze(redact.scrub(text), limit), limit)


# -- the schema: the SDKs' own types, strictly ---------------------------------------------------
class Schema:
    """One route's types: the whole reply's model and its stream events' models by `type`."""

    def __init__(self, whole: Callable[[], Any], events: Callable[[], dict[str, Any]],
                 chunk: Callable[[], Any] | None = None):
        self._whole, self._events, self._chunk = whole, events, chunk

    def whole(self, body: str) -> list[Breach]:
        return _validate(self._whole(), body, "the reply", "reply")

    def stream(self, events: list[tuple[int, Any]]) -> list[Breach]:
        out: list[Breach] = []
        seen: dict[str, int] = {}  # an event kind's errors, named once each
        for i, data in events:
            if self._chunk is not None:
                kind, model = "chunk", self._chunk()
            else:
                tag = data.get("type") if isinstance(data, dict) else None
                if tag in ("ping", "error"):
                    continue
                model = self._events().get(tag) if isinstance(tag, str) else None
                if model is None:
                    out.append(Breach("schema", "type", f"frame {i}",
                                      f"an event of type {_show(_json(tag))}, which the API does not "
                                      f"define: a client that dispatches on `type` drops it"))
                    continue
                kind = str(tag)
            for b in _validate(model, json.dumps(data), f"frame {i} ({kind})", kind):
                key = f"{kind} {b.field} {b.said}"
                if seen.get(key, 0) < 1:
                    seen[key] = 1
                    out.append(b)
        return out


def _validate(model: Any, text: str, where: str, kind: str) -> list[Breach]:
    import pydantic

    try:
        validate = model.model_validate_json if hasattr(model, "model_validate_json") else \
            _adapter(model).validate_json
        validate(text, strict=True)
        return []
    except pydantic.ValidationError as exc:
        errors: list[dict] = [dict(e) for e in exc.errors(include_url=False,
                                                          include_input=True)]
    except (ValueError, RecursionError):
        return []  # not JSON: named as such elsewhere
    out = []
    for err in _narrowed(errors):
        path = _path(err["loc"])
        if err["type"] == "missing":
            out.append(Breach("schema", path, where, f"`{path}` is missing (required)",
                              missing=f"{kind}:{path}"))
        else:
            got = err.get("input")
            out.append(Breach("schema", path, where, f"`{path}` is {_show(_json(got), 40)}: "
                                                     f"{err['msg'].lower()}"))
    return out


@lru_cache(maxsize=None)
def _adapter(model: Any) -> Any:
    import pydantic

    return pydantic.TypeAdapter(model)


MEMBER = re.compile(r"^[A-Z][A-Za-z0-9]+$")  # a union member's name in pydantic's error path


def _narrowed(errors: list[dict]) -> list[dict]:
    """Of a union's errors, those of the member the value's own `type` names: a member whose
    `type` literal does not match is not the one meant. Where no member is left, the value's
    type is none the union holds: one error, at the union."""
    wrong = {tuple(e["loc"][:-1]) for e in errors
             if e["loc"] and e["loc"][-1] == "type" and e["type"] == "literal_error"
             and len(e["loc"]) > 1 and isinstance(e["loc"][-2], str)
             and MEMBER.match(e["loc"][-2])}
    out: list[dict] = []
    unions: dict[tuple, list[dict]] = {}
    for e in errors:
        loc = tuple(e["loc"])
        member = next((loc[:i + 1] for i in range(len(loc) - 1, -1, -1)
                       if isinstance(loc[i], str) and MEMBER.match(loc[i])), None)
        if member is None:
            out.append(e)
            continue
        unions.setdefault(member[:-1], [])
        if not any(member[:len(w)] == w for w in wrong):
            unions[member[:-1]].append(e)
    for at, kept in unions.items():
        if kept:
            out += kept
        else:
            out.append({"loc": at + ("type",), "type": "union_tag",
                        "msg": "Its type is none the API defines here", "input": None})
    return out


def _path(loc: tuple) -> str:
    """pydantic's error location as a reply's field path: list indexes as [i], union members
    (class names) left out."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif MEMBER.match(str(part)) or str(part).startswith(("function-", "tagged-union")):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "(the reply)"


def _chat_types() -> Schema:
    def whole() -> type[ChatCompletion]:
        from openai.types.chat import ChatCompletion
        return ChatCompletion

    def chunk() -> type[ChatCompletionChunk]:
        from openai.types.chat import ChatCompletionChunk
        return ChatCompletionChunk

    return Schema(whole, dict, chunk)


@lru_cache(maxsize=None)
def _union_members(union_name: str) -> dict[str, Any]:
    """A stream event union's members by their `type` literal."""
    import typing

    if union_name == "responses":
        from openai.types.responses import ResponseStreamEvent as union
    else:
        from anthropic.types import RawMessageStreamEvent as union
    out = {}
    members = typing.get_args(typing.get_args(union)[0] if typing.get_origin(union) is
                              typing.Annotated else union)
    for model in members:
        tag = typing.get_args(model.model_fields["type"].annotation)
        if tag:
            out[tag[0]] = model
    return out


def _responses_types() -> Schema:
    def whole() -> type[Response]:
        from openai.types.responses import Response
        return Response

    return Schema(whole, lambda: _union_members("responses"))


def _messages_types() -> Schema:
    def whole() -> type[Message]:
        from anthropic.types import Message
        return Message

    return Schema(whole, lambda: _union_members("messages"))


SCHEMAS: dict[str, Schema] = {"chat": _chat_types(), "responses": _responses_types(),
                              "messages": _messages_types()}


# -- the reply, read as clients read it -----------------------------------------------------------
def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _chat_plain(reply: dict) -> Assembled:
    view = Assembled(PLAIN)
    choice = _obj(next(iter(_list(reply.get("choices"))), None))
    msg = _obj(choice.get("message"))
    view.content = _text(msg.get("content"))
    view.reasoning = next((msg[k] for k in ("reasoning_content", "reasoning")
                           if isinstance(msg.get(k), str)), "")
    view.calls = [(_obj(c).get("function", {}).get("name"), _obj(c).get("function", {})
                   .get("arguments")) for c in _list(msg.get("tool_calls"))]
    view.finish = choice.get("finish_reason")
    _chat_usage(view, reply.get("usage"))
    return view


def _chat_usage(view: Assembled, usage: Any) -> None:
    usage = _obj(usage)
    view.tokens, view.prompt = _int(usage.get("completion_tokens")), _int(usage.get("prompt_tokens"))


def _chat_stream(events: list[tuple[int, Any]]) -> dict[str, Assembled]:
    appended = Assembled(APPENDED)
    calls: dict[Any, list] = {}
    for i, chunk in events:
        chunk = _obj(chunk)
        if chunk.get("usage") is not None:
            _chat_usage(appended, chunk["usage"])
        for choice in _list(chunk.get("choices")):
            choice = _obj(choice)
            if choice.get("index", 0) != 0:
                continue
            delta = _obj(choice.get("delta"))
            appended.add("content", delta.get("content"), i)
            appended.add("reasoning", delta.get("reasoning_content", delta.get("reasoning")), i)
            for piece in _list(delta.get("tool_calls")):
                piece, fn = _obj(piece), _obj(_obj(piece).get("function"))
                at = calls.setdefault(rules._key(piece.get("index")), [None, ""])
                at[0] = at[0] or fn.get("name")
                if isinstance(fn.get("arguments"), str):
                    at[1] += fn["arguments"]
                    appended.call_pieces += bool(fn["arguments"])
            if choice.get("finish_reason") is not None:
                appended.finish = choice["finish_reason"]
    appended.calls = [(name, args) for name, args in calls.values()]
    return {APPENDED: appended, OPENAI_SDK: _openai_sdk(events)}


def _openai_sdk(events: list[tuple[int, Any]]) -> Assembled:
    """The OpenAI SDK's own accumulator, chunk by chunk, as `client.chat.completions.stream`
    runs it."""
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    view, state = Assembled(OPENAI_SDK), ChatCompletionStreamState()
    at = -1
    try:
        with warnings.catch_warnings():  # pydantic's on a field of another type: named above
            warnings.simplefilter("ignore")
            for i, chunk in events:
                at = i
                state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=chunk))  # type: ignore[arg-type]
            final = state.current_completion_snapshot
    except Exception as exc:  # what the SDK raises is what its users meet
        view.error = f"{type(exc).__name__} at frame {at}: {_show(str(exc), 120)}"
        return view
    choice = final.choices[0] if final.choices else None
    msg = choice.message if choice is not None else None
    view.content = (msg.content or "") if msg is not None and isinstance(msg.content, str) else ""
    extra = (msg.model_extra or {}) if msg is not None else {}
    view.reasoning = next((extra[k] for k in ("reasoning_content", "reasoning")
                           if isinstance(extra.get(k), str)), "")
    view.calls = [(c.function.name, c.function.arguments) for c in (msg.tool_calls or [])] \
        if msg is not None else []
    view.finish = choice.finish_reason if choice is not None else None
    usage = final.usage
    view.tokens = usage.completion_tokens if usage is not None else None
    view.prompt = usage.prompt_tokens if usage is not None else None
    return view


def _messages_plain(reply: dict) -> Assembled:
    view = Assembled(PLAIN)
    for block in _list(reply.get("content")):
        block = _obj(block)
        if block.get("type") == "text":
            view.content += _text(block.get("text"))
        elif block.get("type") == "thinking":
            view.reasoning += _text(block.get("thinking"))
        elif block.get("type") == "tool_use":
            view.calls.append((block.get("name"), block.get("input")))
    view.finish = reply.get("stop_reason")
    _messages_usage(view, reply.get("usage"))
    return view


def _messages_usage(view: Assembled, usage: Any) -> None:
    usage = _obj(usage)
    if _int(usage.get("output_tokens")) is not None:
        view.tokens = usage["output_tokens"]
    parts = [_int(usage.get(k)) for k in ("input_tokens", "cache_read_input_tokens",
                                          "cache_creation_input_tokens")]
    if parts[0] is not None:
        view.prompt = sum(p or 0 for p in parts)


def _messages_stream(events: list[tuple[int, Any]]) -> dict[str, Assembled]:
    appended = Assembled(APPENDED)
    blocks: dict[Any, list] = {}  # index -> [type, name, input or json text]
    for i, event in events:
        event = _obj(event)
        kind = event.get("type")
        if kind == "message_start":
            _messages_usage(appended, _obj(event.get("message")).get("usage"))
        elif kind == "content_block_start":
            block = _obj(event.get("content_block"))
            blocks[rules._key(event.get("index"))] = [block.get("type"), block.get("name"), ""]
            appended.add("content", block.get("text"), i)
            appended.add("reasoning", block.get("thinking"), i)
        elif kind == "content_block_delta":
            delta = _obj(event.get("delta"))
            appended.add("content", delta.get("text") if delta.get("type") == "text_delta"
                         else None, i)
            appended.add("reasoning", delta.get("thinking") if delta.get("type") ==
                         "thinking_delta" else None, i)
            held = blocks.get(rules._key(event.get("index")))
            if held is not None and isinstance(delta.get("partial_json"), str):
                held[2] += delta["partial_json"]
                appended.call_pieces += bool(delta["partial_json"])
        elif kind == "message_delta":
            appended.finish = _obj(event.get("delta")).get("stop_reason") or appended.finish
            usage = _obj(event.get("usage"))
            if _int(usage.get("output_tokens")) is not None:
                appended.tokens = usage["output_tokens"]
    for kind, name, text in blocks.values():
        if kind == "tool_use":
            appended.calls.append((name, parsed_arguments(text) if text else {}))
    return {APPENDED: appended, ANTHROPIC_SDK: _anthropic_sdk(events)}


def _anthropic_sdk(events: list[tuple[int, Any]]) -> Assembled:
    """The Anthropic SDK's own accumulation (what `MessageStream` runs on every event)."""
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    view, snapshot = Assembled(ANTHROPIC_SDK), None
    bufs: dict[int, bytes] = {}
    at = -1
    try:
        with warnings.catch_warnings():  # pydantic's on a field of another type: named above
            warnings.simplefilter("ignore")
            for i, event in events:
                at = i
                if _obj(event).get("type") in ("ping", "error"):
                    continue
                typed = construct_type(type_=RawMessageStreamEvent, value=event)
                snapshot = accumulate_event(event=typed, current_snapshot=snapshot,  # type: ignore[arg-type]
                                            json_bufs=bufs)
    except Exception as exc:  # what the SDK raises is what its users meet
        view.error = f"{type(exc).__name__} at frame {at}: {_show(str(exc), 120)}"
        return view
    if snapshot is None:
        view.error = "no message_start: the accumulator has no message"
        return view
    for block in snapshot.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            view.content += getattr(block, "text", "") or ""
        elif kind == "thinking":
            view.reasoning += getattr(block, "thinking", "") or ""
        elif kind == "tool_use":
            view.calls.append((getattr(block, "name", None), getattr(block, "input", None)))
    view.finish = snapshot.stop_reason
    usage = snapshot.usage
    view.tokens = getattr(usage, "output_tokens", None)
    parts = [getattr(usage, k, None) for k in ("input_tokens", "cache_read_input_tokens",
                                               "cache_creation_input_tokens")]
    view.prompt = sum(p or 0 for p in parts) if isinstance(parts[0], int) else None
    return view


def _responses_finish(response: dict, calls: bool) -> str | None:
    status = response.get("status")
    if status == "incomplete":
        return "length"
    if status == "completed":
        return "tool_calls" if calls else "stop"
    return status if isinstance(status, str) else None


def _responses_plain(reply: dict) -> Assembled:
    view = Assembled(PLAIN)
    for item in _list(reply.get("output")):
        _responses_item(view, _obj(item))
    view.finish = _responses_finish(reply, bool(view.calls))
    _responses_usage(view, reply.get("usage"))
    return view


def _responses_item(view: Assembled, item: dict) -> None:
    if item.get("type") == "message":
        for part in _list(item.get("content")):
            view.content += _text(_obj(part).get("text"))
    elif item.get("type") == "reasoning":
        for part in _list(item.get("content")) + _list(item.get("summary")):
            view.reasoning += _text(_obj(part).get("text"))
    elif item.get("type") == "function_call":
        view.calls.append((item.get("name"), item.get("arguments")))


def _responses_usage(view: Assembled, usage: Any) -> None:
    usage = _obj(usage)
    view.tokens, view.prompt = _int(usage.get("output_tokens")), _int(usage.get("input_tokens"))


def _responses_stream(events: list[tuple[int, Any]]) -> dict[str, Assembled]:
    appended = Assembled(APPENDED)
    calls: dict[Any, list] = {}
    for i, event in events:
        event = _obj(event)
        kind = event.get("type")
        if kind == "response.output_text.delta":
            appended.add("content", event.get("delta"), i)
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            appended.add("reasoning", event.get("delta"), i)
        elif kind == "response.output_item.added":
            item = _obj(event.get("item"))
            if item.get("type") == "function_call":
                calls[rules._key(item.get("id"))] = [item.get("name"), ""]
        elif kind == "response.function_call_arguments.delta":
            held = calls.get(rules._key(event.get("item_id")))
            if held is not None and isinstance(event.get("delta"), str):
                held[1] += event["delta"]
                appended.call_pieces += bool(event["delta"])
        elif kind in rules.RESPONSES_END:
            response = _obj(event.get("response"))
            appended.finish = _responses_finish(response, bool(calls))
            _responses_usage(appended, response.get("usage"))
    appended.calls = [(name, args) for name, args in calls.values()]
    return {APPENDED: appended}


PLAINS: dict[str, Callable[[dict], Assembled]] = {
    "chat": _chat_plain, "messages": _messages_plain, "responses": _responses_plain}
STREAMS: dict[str, Callable[[list[tuple[int, Any]]], dict[str, Assembled]]] = {
    "chat": _chat_stream, "messages": _messages_stream, "responses": _responses_stream}


# -- against its own request ------------------------------------------------------------------
TOOL_FINISH = {"chat": "tool_calls", "messages": "tool_use", "responses": "tool_calls"}
CUT = ("length", "max_tokens")
FINISH_FIELD = {"chat": "choices[0].finish_reason", "messages": "stop_reason",
                "responses": "status"}
TOKENS_FIELD = {"chat": "usage.completion_tokens", "messages": "usage.output_tokens",
                "responses": "usage.output_tokens"}


def _budget(request: dict) -> tuple[str, int] | None:
    for key in BUDGET_KEYS:
        if _int(request.get(key)) is not None:
            return key, request[key]
    return None


def against_request(api: str, request: dict, view: Assembled, streamed: bool) -> list[Breach]:
    """What the request set, honoured (or refused, which is no 200): the budget, tool_choice,
    response_format and stop."""
    out: list[Breach] = []
    where = "the stream" if streamed else "the reply"
    budget = _budget(request)
    tokens, finish = view.tokens, view.finish
    if budget is not None and tokens is not None:
        key, cap = budget
        if tokens > cap:
            out.append(Breach("request", TOKENS_FIELD[api], where,
                              f"{TOKENS_FIELD[api]} is {tokens}, past the {key}={cap} the "
                              f"request set: the cap was not applied, or the count is wrong"))
        elif finish in CUT and tokens < cap and tokens == 0:
            out.append(Breach("request", TOKENS_FIELD[api], where,
                              f"{FINISH_FIELD[api]} {finish!r} with {TOKENS_FIELD[api]} 0 of "
                              f"the {key}={cap} asked: a cut reply that counted nothing"))
    calls = [c for c in view.calls]
    choice = request.get("tool_choice")
    tools = request.get("tools")
    kind = choice.get("type") if isinstance(choice, dict) else choice
    if kind == "none" and calls:
        out.append(Breach("request", "tool_calls", where,
                          f"tool_choice none was sent and the reply calls "
                          f"{', '.join(str(n) for n, _ in calls)}: a client that forbade "
                          f"calls receives one"))
    if kind in ("required", "any", "tool", "function") and tools and not calls \
            and finish not in CUT:
        out.append(Breach("request", "tool_calls", where,
                          f"tool_choice {_show(_json(choice), 60)} was sent and the reply holds no "
                          f"call ({FINISH_FIELD[api]} {finish!r}): the forced call was not "
                          f"made, nor was the request refused"))
    named = _named_choice(api, choice)
    if named and calls and any(n != named for n, _ in calls):
        out.append(Breach("request", "tool_calls[0].function.name", where,
                          f"tool_choice names {named!r} and the reply calls "
                          f"{', '.join(str(n) for n, _ in calls)}"))
    # Chat's response_format only: llama.cpp's Responses route answers text.format with free
    # text (xllamacpp 2026.10), which the params claim judges where it is asked
    fmt = _obj(request.get("response_format"))
    # a json_schema format with no schema object is malformed: whether it is refused is the
    # params claim's (an engine may let it through and answer free text)
    schema = _obj(fmt.get("json_schema")).get("schema", fmt.get("schema"))
    held = fmt.get("type") == "json_object" or (fmt.get("type") == "json_schema"
                                                and isinstance(schema, dict))
    if held and finish not in CUT and not calls and view.content.strip():
        try:
            json.loads(view.content)
        except (ValueError, RecursionError):
            out.append(Breach("request", "content", where,
                              f"response_format {fmt['type']} was sent and the content is not "
                              f"JSON ({_show(view.content, 60)})"))
    stops = request.get("stop") or request.get("stop_sequences")
    stops = [stops] if isinstance(stops, str) else _list(stops)
    for stop in stops:
        if isinstance(stop, str) and stop and stop in view.content:
            out.append(Breach("request", "content", where,
                              f"stop {stop!r} was sent and the content holds it "
                              f"({_show(view.content, 60)}): the answer must end before it"))
    return out


def _named_choice(api: str, choice: Any) -> str | None:
    """The one tool a named tool_choice forces (chat and Responses; llama.cpp's Messages route
    ignores a named choice by design, which the tools claim judges)."""
    choice = _obj(choice)
    if api == "chat" and choice.get("type") == "function":
        name = _obj(choice.get("function")).get("name")
        return name if isinstance(name, str) else None
    if api == "responses" and choice.get("type") == "function":
        return choice.get("name") if isinstance(choice.get("name"), str) else None
    return None


def agreement(api: str, view: Assembled, streamed: bool, request: dict) -> list[Breach]:
    """Each field of the reply agrees with the rest: the finish with the content, the usage
    with what came."""
    out: list[Breach] = []
    where = "the stream" if streamed else "the reply"
    tool_finish = TOOL_FINISH[api]
    if view.finish == tool_finish and not view.calls and api != "responses":
        out.append(Breach("agrees", FINISH_FIELD[api], where,
                          f"{FINISH_FIELD[api]} is {tool_finish!r} and the reply holds no "
                          f"call: a client waits for a call to run that never came"))
    if view.calls and view.finish not in (tool_finish, *CUT) and api != "responses":
        out.append(Breach("agrees", FINISH_FIELD[api], where,
                          f"the reply holds {len(view.calls)} call(s) and "
                          f"{FINISH_FIELD[api]} is {view.finish!r}, not {tool_finish!r}: "
                          f"agent clients that loop on the finish reason end the turn and "
                          f"never run the call"))
    if view.finish is None:
        out.append(Breach("agrees", FINISH_FIELD[api], where,
                          f"no {FINISH_FIELD[api]}: a client cannot tell a whole answer from "
                          f"a cut one"))
    text = view.content.strip() or view.reasoning.strip() or view.calls
    if view.tokens == 0 and text:
        out.append(Breach("agrees", TOKENS_FIELD[api], where,
                          f"{TOKENS_FIELD[api]} is 0, yet the {where.split()[-1]} carried "
                          f"text: clients that bill or budget by usage count nothing"))
    pieces = sum(len(p) for p in view.pieces.values()) + view.call_pieces
    if streamed and view.tokens and pieces > view.tokens + PIECES_SLACK:
        out.append(Breach("agrees", TOKENS_FIELD[api], where,
                          f"{TOKENS_FIELD[api]} is {view.tokens}, yet {pieces} deltas carried "
                          f"text: a token makes one delta at most, so the count is short"))
    return out


def _identity(api: str, request: dict, body: str, streamed: bool) -> list[Breach]:
    """The model the reply names is the one asked (or another name the server serves it
    under: llama.cpp answers with a model's first alias); a stream's ids do not change; usage's total
    is its parts'."""
    out: list[Breach] = []
    asked = request.get("model")
    objects = []
    if streamed:
        for i, data in _frames_json(rules.parse(body)):
            data = _obj(data)
            inner = _obj(data.get("response") or data.get("message")) if api != "chat" else data
            objects.append((f"frame {i}", inner))
    else:
        try:
            objects.append(("the reply", _obj(json.loads(body))))
        except (ValueError, RecursionError):
            return out
    for where, obj in objects:
        model = obj.get("model")
        if isinstance(asked, str) and isinstance(model, str) and model != asked:
            out.append(Breach("agrees", "model", where,
                              f"`model` is {model!r} where {asked!r} was asked, and the "
                              f"server's model list names no such model: a gateway routed "
                              f"the request to another model, or renamed it", named=model))
            break
    for where, obj in objects:
        usage = _obj(obj.get("usage"))
        parts = ("prompt_tokens", "completion_tokens") if api == "chat" else \
            ("input_tokens", "output_tokens")
        total = _int(usage.get("total_tokens"))
        counts = [_int(usage.get(p)) for p in parts]
        if total is not None and None not in counts and total != sum(c or 0 for c in counts):
            out.append(Breach("agrees", "usage.total_tokens", where,
                              f"usage.total_tokens is {total}, not {parts[0]} {counts[0]} + "
                              f"{parts[1]} {counts[1]}"))
            break
    if streamed and api == "messages":
        ids = [(w, o.get("id")) for w, o in objects if o.get("id") is not None]
        out += _same_id(ids, "message.id")
    if streamed and api == "responses":
        ids = [(w, o.get("id")) for w, o in objects if o.get("id") is not None]
        out += _same_id(ids, "response.id")
    return out


def _objects(api: str, body: str, streamed: bool) -> list[tuple[str, Any]]:
    """The reply as (where, JSON object): the whole reply, or each event of the stream."""
    if streamed:
        return [(f"frame {i}", data) for i, data in _frames_json(rules.parse(body))]
    try:
        return [("the reply", json.loads(body))]
    except (ValueError, RecursionError):
        return []


# Keys whose value identifies the reply, a call or an output item: a client answers a call by
# its id and follows a stream's items by theirs, so an empty one matches nothing.
ID_KEYS = ("id", "call_id", "item_id", "tool_use_id")
# usage: (a part, the whole it is part of), by route
USAGE_PARTS = {"chat": (("prompt_tokens_details.cached_tokens", "prompt_tokens"),
                        ("completion_tokens_details.reasoning_tokens", "completion_tokens")),
               "responses": (("input_tokens_details.cached_tokens", "input_tokens"),
                             ("output_tokens_details.reasoning_tokens", "output_tokens"))}
PROMPT_FIELD = {"chat": "usage.prompt_tokens", "responses": "usage.input_tokens",
                "messages": "usage.input_tokens (with cache_read_input_tokens and "
                            "cache_creation_input_tokens)"}


def _coherent(api: str, request: dict, objects: list[tuple[str, Any]],
              streamed: bool) -> list[Breach]:
    """What the reply's own fields must say of each other and of its request, beyond the
    SDK types (which accept any string and any count): ids that identify something, calls that
    name a tool, usage no part of which exceeds its whole and a prompt counted, Messages'
    stop_sequence with its stop_reason, and the order clients read the output in."""
    out = _ids_named(objects)
    out += _usage_parts(api, request, objects)
    if api == "messages":
        out += _stop_sequence(request, objects, streamed)
    if api in REASONING_FIRST and not streamed:
        out += _reasoning_first(api, objects)
    return out


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            at = f"{path}.{key}" if path else str(key)
            yield at, key, value
            yield from _walk(value, at)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


def _ids_named(objects: list[tuple[str, Any]]) -> list[Breach]:
    """Every id the reply gives is a non-empty string, and every call names its tool (an id of
    another type or a name missing are the schema's)."""
    for where, obj in objects:
        for path, key, value in _walk(obj):
            if not isinstance(value, str) or value.strip() or "delta.tool_calls" in path:
                continue  # a chat stream's call pieces: the stream rules judge its first one
            if key in ID_KEYS:
                return [Breach("ids", path, where, f"`{path}` is empty: an id identifies the "
                                                   f"reply, a call or an item, and an empty one "
                                                   f"matches none")]
            if key == "name" and _is_call(path):
                return [Breach("ids", path, where, f"`{path}` is empty: a call names the tool "
                                                   f"it calls")]
    return []


def _is_call(path: str) -> bool:
    """Whether a `name` at `path` is a call's (a chat tool call's function, a tool_use block, a
    function_call item): the request's echo of its tools is not judged here."""
    if re.search(r"(^|\.)tools\[", path):
        return False
    return path.endswith((".function.name", "].name", "content_block.name", "item.name"))


def _dig(node: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _usage_parts(api: str, request: dict, objects: list[tuple[str, Any]]) -> list[Breach]:
    """No part of usage counts more than its whole (cached prompt tokens of the prompt,
    reasoning tokens of the generated ones), and the prompt is counted: every request sends
    one, and the chat template alone adds tokens to it."""
    for where, obj in objects:
        obj = _obj(obj)
        nested = obj.get("response") or obj.get("message") if api != "chat" else None
        inner = nested if isinstance(nested, dict) else obj  # a stream's event holds it
        usage = inner.get("usage")
        if not isinstance(usage, dict):
            continue
        for part, whole in USAGE_PARTS.get(api, ()):
            a, b = _int(_dig(usage, part)), _int(usage.get(whole))
            if a is not None and b is not None and a > b:
                return [Breach("agrees", f"usage.{part}", where,
                               f"usage.{part} is {a}, more than the usage.{whole} ({b}) it is "
                               f"part of")]
        counts = [_int(usage.get(k)) for k in (("prompt_tokens",) if api == "chat" else
                                                ("input_tokens", "cache_read_input_tokens",
                                                 "cache_creation_input_tokens"))]
        if counts[0] is not None and not sum(c or 0 for c in counts) and \
                (api != "messages" or where == "the reply" or obj.get("type") ==
                 "message_start"):
            return [Breach("agrees", PROMPT_FIELD[api], where,
                           f"{PROMPT_FIELD[api]} is 0, yet the request sent a prompt: every "
                           f"prompt has tokens (the chat template alone adds some), so the "
                           f"count is wrong")]
    return []


def _stop_sequence(request: dict, objects: list[tuple[str, Any]],
                   streamed: bool) -> list[Breach]:
    """Messages: `stop_sequence` is sent where the stop is (null where none matched; the SDK
    fills a missing one in, clients reading the JSON do not), `stop_reason` "stop_sequence"
    names the sequence, and a sequence named is one the request sent."""
    sent = request.get("stop_sequences")
    sent = [s for s in sent if isinstance(s, str)] if isinstance(sent, list) else []
    for where, obj in objects:
        obj = _obj(obj)
        if streamed and obj.get("type") not in ("message_start", "message_delta"):
            continue
        holder, at = (obj, "")
        if streamed:
            at = "delta." if obj["type"] == "message_delta" else "message."
            holder = _obj(obj.get(at[:-1]))
        if "stop_sequence" not in holder:
            return [Breach("agrees", f"{at}stop_sequence", where,
                           f"`{at}stop_sequence` is missing: the API sends it with the stop "
                           f"reason (null where no sequence matched)")]
        said, reason = holder["stop_sequence"], holder.get("stop_reason")
        if reason == "stop_sequence" and not (isinstance(said, str) and said):
            return [Breach("agrees", f"{at}stop_sequence", where,
                           f"`{at}stop_reason` is \"stop_sequence\" and `{at}stop_sequence` is "
                           f"{_show(_json(said), 30)}: it names the sequence that matched")]
        if isinstance(said, str) and said not in sent:
            return [Breach("agrees", f"{at}stop_sequence", where,
                           f"`{at}stop_sequence` is {_show(_json(said), 30)}, which the "
                           f"request's stop_sequences ({_show(_json(sent), 60)}) do not hold")]
    return []


# Where a reply lists its parts, the kinds of part that reason, those they lead to, and the
# part's name: Messages' content blocks (the API refuses an assistant turn sent back with
# thinking on that does not start with its thinking), Responses' output items (clients show
# the output in order and send it back so as the next turn's input)
REASONING_FIRST = {"messages": ("content", ("thinking", "redacted_thinking"),
                                ("text", "tool_use"), "block"),
                   "responses": ("output", ("reasoning",), ("message", "function_call"),
                                 "item")}


def _reasoning_first(api: str, objects: list[tuple[str, Any]]) -> list[Breach]:
    """A whole reply's reasoning comes before the answer or call it led to."""
    key, reasons, answers, noun = REASONING_FIRST[api]
    for where, obj in objects:
        kinds = [_obj(b).get("type") for b in _list(_obj(obj).get(key))]
        reasoning = [i for i, k in enumerate(kinds) if k in reasons]
        other = [i for i, k in enumerate(kinds) if k in answers]
        if reasoning and other and reasoning[0] > other[0]:
            a, b = reasoning[0], other[0]
            return [Breach("order", f"{key}[{a}]", where,
                           f"the {kinds[a]} {noun} {key}[{a}] comes after the {kinds[b]} {noun} "
                           f"{key}[{b}]: the reasoning comes before what it led to")]
    return []


def _same_id(ids: list[tuple[str, Any]], name: str) -> list[Breach]:
    other = next(((w, v) for w, v in ids if v != ids[0][1]), None) if ids else None
    if other is None:
        return []
    return [Breach("agrees", name, other[0],
                   f"`{name}` is {_show(_json(other[1]), 40)} where {ids[0][0]} said "
                   f"{_show(_json(ids[0][1]), 40)}: one answer, two ids")]


# -- streamed equals plain -----------------------------------------------------------------------
@dataclass(frozen=True)
class Difference:
    field: str
    chunk: int | None
    how: str  # the reassembly it breaks
    said: str


def differences(streamed: dict[str, Assembled], plain: Assembled) -> list[Difference]:
    """Each reassembly of a stream against its plain twin, field by field: reasoning and
    content (their ends' whitespace aside; as far as both go where either was cut), the calls,
    the finish and the server's counts."""
    out = []
    for how, view in streamed.items():
        if view.error:
            continue  # named as the reassembly's own failure
        found = _difference(view, plain)
        if found is not None:
            out.append(Difference(found[0], found[1], how, found[2]))
    return out


def _difference(a: Assembled, b: Assembled) -> tuple[str, int | None, str] | None:
    cut = a.finish in CUT or b.finish in CUT
    for name in ("reasoning", "content"):
        text = getattr(a, name)
        found = text_difference(name, text, getattr(b, name), cut)
        if found is not None:
            lead = len(text) - len(text.lstrip())
            return name, a.chunk_at(name, found[0] + lead), found[1]
    if cut:
        return None
    names_a, names_b = [n for n, _ in a.calls], [n for n, _ in b.calls]
    if names_a != names_b:
        return "calls", None, f"the calls differ: streamed {names_a}, plain {names_b}"
    for (name, x), (_, y) in zip(a.calls, b.calls):
        if parsed_arguments(x) != parsed_arguments(y):
            return ("arguments", None, f"{name}'s arguments differ: streamed "
                    f"{_show(parsed_arguments(x), 80)}, plain {_show(parsed_arguments(y), 80)}")
    if a.finish != b.finish:
        return "finish", None, f"the finish differs: streamed {a.finish!r}, plain {b.finish!r}"
    if a.tokens is not None and b.tokens is not None and a.tokens != b.tokens:
        return ("usage", None, f"the generated tokens differ: streamed usage says {a.tokens}, "
                f"plain {b.tokens}, for one greedy answer")
    if a.prompt is not None and b.prompt is not None and a.prompt != b.prompt:
        return ("usage", None, f"the prompt's tokens differ: streamed usage says {a.prompt}, "
                f"plain {b.prompt}, for one prompt")
    return None
