"""The OpenAI Responses wire (`POST /v1/responses`, as Codex talks): request params, a reply
read whole, a stream of typed events reassembled, and the input items of an agent's next turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pytest_frank.drivers import openai_chat
from pytest_frank.transport.wire import Call, Logprob, Reads, Reply, Request, typed

# Where the Responses API carries reasoning: a reasoning item's content (reasoning_text parts,
# what open engines send) or its summary (summary_text parts, what OpenAI's models send).
REASONING_PARTS = {"reasoning_text": "content", "summary_text": "summary"}
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
LOGPROBS_INCLUDE = "message.output_text.logprobs"


def params(model: str, req: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "store": False,
                           "input": items(req.messages) if req.messages else
                           [{"role": "user", "content": _content(req.content)}]}
    if req.budget_key:  # None: no budget sent, as Codex sends none
        out["max_output_tokens"] = req.max_tokens
    if req.tools is not None:
        out["tools"] = [_tool(t) for t in req.tools]
        if req.tool_choice is not None:
            out["tool_choice"] = _choice(req.tool_choice)
        if req.parallel is not None:
            out["parallel_tool_calls"] = req.parallel
    return {**out, **req.extra}


def items(messages: list[dict]) -> list[dict]:
    """Input items from a history: items already in the Responses shape pass as they are; chat
    messages (a probe's fixed turns) become the items a Responses client sends for them."""
    out = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if "type" in m or role is None:
            out.append(m)
        elif role == "assistant":
            text = content if isinstance(content, str) else ""
            out.append({"type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text}]})
        else:
            out.append({"role": role, "content": _content(content)})
    return out


def _content(content: Any) -> Any:
    """A user turn's content: text as is, chat content parts as input_text / input_image."""
    if not isinstance(content, list):
        return content
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
        elif kind == "image_url":
            url = part.get("image_url")
            parts.append({"type": "input_image", "detail": "auto",
                          "image_url": url.get("url") if isinstance(url, dict) else url})
        else:
            parts.append(part)
    return parts


def _tool(tool: dict) -> dict:
    fn = tool["function"]
    return {"type": "function", "name": fn["name"], "description": fn.get("description", ""),
            "parameters": fn["parameters"], "strict": fn.get("strict", False)}


def _choice(choice):
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice}


def converse(wire: Reads, sdk, model: str, req: Request, clock: Callable[[], float]) -> Reply:
    kwargs = params(model, req)
    if req.stream:
        with sdk.responses.create(stream=True, **kwargs) as stream:
            return _read_stream(wire, stream, req, clock)
    response = sdk.responses.create(**kwargs)
    reply = Reply(status=200)
    thoughts: dict[str, str] = {}
    reply.engine = wire.engine_fields(_extra(response))
    _close(reply, response)
    for n, item in enumerate(typed(getattr(response, "output", None), list, "output") or []):
        _item(reply, item, f"output[{n}]", thoughts)
    _reasoning(reply, thoughts, req)
    _finish(reply)
    return reply


def _extra(model) -> dict:
    extra = getattr(model, "model_extra", None)
    return extra if isinstance(extra, dict) else {}


def _close(reply: Reply, response, came: str = "the response came back with status") -> None:
    """The response's own verdict: its status (why incomplete), usage, and error if it failed
    (`came`: how the failure arrived, for the problem line)."""
    status = typed(getattr(response, "status", None), str, "response.status")
    reply.response_id = typed(getattr(response, "id", None), str, "response.id")
    reason = typed(getattr(getattr(response, "incomplete_details", None), "reason", None), str,
                   "incomplete_details.reason")
    # In the chat shape's words, which the claims read: a cut answer is "length".
    incomplete = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(
        reason or "", f"incomplete: {reason}" if reason else "incomplete")
    reply.finish = {"completed": "stop", "incomplete": incomplete}.get(status or "", status)
    if status == "failed":
        error = getattr(response, "error", None)
        said = typed(getattr(error, "message", None), str, "response.error.message")
        reply.problem = f"{came} failed: {said or 'no error message'}"
    usage = getattr(response, "usage", None)
    if usage is not None:
        reply.tokens = _count(getattr(usage, "output_tokens", None))
        reply.prompt_tokens = _count(getattr(usage, "input_tokens", None))
        reply.cached_tokens = _count(getattr(getattr(usage, "input_tokens_details", None),
                                             "cached_tokens", None))
        reply.reasoning_tokens = _count(getattr(getattr(usage, "output_tokens_details", None),
                                                "reasoning_tokens", None)) or None


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _finish(reply: Reply) -> None:
    """A completed turn that called tools finishes as a tool turn (the chat shape's word)."""
    if reply.finish == "stop" and reply.calls:
        reply.finish = "tool_calls"


def _reasoning(reply: Reply, thoughts: dict[str, str], req: Request) -> None:
    """The reasoning by the part it came in: fleet.yaml's field first, then content, summary."""
    for field in (req.reasoning_field, *REASONING_PARTS):
        said = thoughts.get(field or "", "")
        if said.strip():
            reply.reasoning, reply.reasoning_field = said, field
            return


def _item(reply: Reply, item, where: str, thoughts: dict[str, str] | None) -> None:
    """One output item, whole; its text and reasoning (into `thoughts`) only where `thoughts`
    is given: a stream takes them from the deltas."""
    kind = typed(getattr(item, "type", None), str, f"{where}.type")
    if kind == "message":
        for n, part in enumerate(typed(getattr(item, "content", None), list,
                                       f"{where}.content") or []):
            said = typed(getattr(part, "text", None), str, f"{where}.content[{n}].text") or ""
            reply.content += said if thoughts is not None else ""
            found = _logprobs(getattr(part, "logprobs", None), f"{where}.content[{n}]")
            if found:
                reply.logprobs = (reply.logprobs or []) + found
    elif kind == "reasoning" and thoughts is not None:
        for part_kind, field in REASONING_PARTS.items():
            parts = typed(getattr(item, field, None), list, f"{where}.{field}") or []
            thoughts[part_kind] = thoughts.get(part_kind, "") + "".join(
                typed(getattr(p, "text", None), str, f"{where}.{field}.text") or ""
                for p in parts if getattr(p, "type", None) == part_kind)
    elif kind == "function_call":
        reply.calls.append(Call(typed(getattr(item, "name", None), str, f"{where}.name"),
                                getattr(item, "arguments", None),
                                typed(getattr(item, "call_id", None), str, f"{where}.call_id"),
                                as_text=True))
    if kind is not None:
        reply.blocks.append(_as_dict(item))


def _as_dict(item) -> dict:
    """The item as it came, to echo (an endpoint's odd values as they are, unwarned)."""
    dump = getattr(item, "to_dict", None)
    found = dump(warnings=False) if callable(dump) else item
    return found if isinstance(found, dict) else {}


def _logprobs(tokens, where: str) -> list[Logprob]:
    out = []
    for i, t in enumerate(typed(tokens, list, f"{where}.logprobs") or []):
        top = typed(getattr(t, "top_logprobs", None), list, f"{where}.logprobs[{i}].top_logprobs")
        pairs = ((getattr(a, "token", None), getattr(a, "logprob", None)) for a in top or [])
        out.append(Logprob(typed(getattr(t, "token", None), str, f"{where}.logprobs[{i}].token")
                           or "", typed(getattr(t, "logprob", None), (int, float),
                                        f"{where}.logprobs[{i}].logprob"), len(top or ()),
                           tuple((tok, float(lp)) for tok, lp in pairs if isinstance(tok, str)
                                 and isinstance(lp, (int, float)))))
    return out


class _Stream:
    """A Responses event stream folded into a Reply as a client reads it: text from the deltas,
    items (calls, reasoning to echo) from output_item.done, the verdict from the last event."""

    DELTAS = {"response.output_text.delta": None,
              "response.reasoning_text.delta": "reasoning_text",
              "response.reasoning_summary_text.delta": "summary_text"}

    def __init__(self, wire: Reads, req: Request, clock: Callable[[], float]):
        self.wire, self.req, self.clock = wire, req, clock
        self.reply = Reply(status=200)
        self.texts: list[str] = []
        self.thoughts: dict[str, str] = {}
        self.arguments: dict[str, str] = {}  # function-call arguments by item id, from deltas
        # The done message items carry the logprobs whole; deltas, where a server sends them
        # only there.
        self.delta_logprobs: list[Logprob] = []
        self.ended: str | None = None  # the terminal event's type
        self.last: str | None = None

    def fold(self, n: int, event) -> None:
        kind = typed(getattr(event, "type", None), str, f"event {n}: type")
        self.last, self.reply.events = kind, self.reply.events + 1
        self.reply.engine.update(self.wire.engine_fields(_extra(event)))
        if kind in self.DELTAS:
            delta = typed(getattr(event, "delta", None), str, f"{kind} delta") or ""
            field = self.DELTAS[kind]
            if field is None:
                self.texts.append(delta)
                self.delta_logprobs += _logprobs(getattr(event, "logprobs", None), kind)
            else:
                self.thoughts[field] = self.thoughts.get(field, "") + delta
            if delta:
                self.reply.tick(self.clock())
        elif kind == "response.function_call_arguments.delta":
            key = typed(getattr(event, "item_id", None), str, f"{kind} item_id") or ""
            piece = typed(getattr(event, "delta", None), str, f"{kind} delta") or ""
            self.arguments[key] = self.arguments.get(key, "") + piece
        elif kind == "response.output_item.done":
            self._done(getattr(event, "item", None))
        elif kind in TERMINAL:
            self.ended = kind
            response = getattr(event, "response", None)
            _close(self.reply, response, f"the stream ended with {kind}: status")
            self.reply.usage_events.append(n)
        elif kind == "error":
            said = typed(getattr(event, "message", None), str, "error event message")
            self.reply.problem = f"the stream carried an error event: {said or 'no message'}"

    def _done(self, item) -> None:
        before = len(self.reply.calls)
        _item(self.reply, item, "output_item.done item", None)
        if len(self.reply.calls) > before and not self.reply.calls[-1].arguments:
            key = typed(getattr(item, "id", None), str, "function_call id") or ""
            self.reply.calls[-1].arguments = self.arguments.get(key, "")

    def result(self) -> Reply:
        reply = self.reply
        reply.content = "".join(self.texts)
        reply.logprobs = reply.logprobs or self.delta_logprobs or None
        _reasoning(reply, self.thoughts, self.req)
        if reply.problem is None and self.ended is None:
            reply.problem = (f"the event stream ended without response.completed (its last "
                             f"event: {self.last or 'none'}): a client waits for it, or "
                             f"reports the turn as failed")
        _finish(reply)
        return reply


def _read_stream(wire: Reads, stream, req: Request, clock: Callable[[], float]) -> Reply:
    import openai

    folded = _Stream(wire, req, clock)
    try:
        for n, event in enumerate(stream):
            if n > req.event_budget:
                folded.reply.problem = (f"the stream ran past {req.event_budget} events for "
                                        f"{req.max_tokens} max_output_tokens without ending")
                return folded.reply
            folded.fold(n, event)
    except openai.APIError as exc:
        if type(exc) is not openai.APIError:  # a status or the connection: send says which
            raise
        # The client raises on an event whose data holds an `error` object.
        folded.reply.problem = f"the stream carried an error event: {exc.message}"
        return folded.reply
    return folded.result()


def agent_history(messages: list[dict], reply: Reply, results: list[str]) -> list[dict]:
    """The next turn's input as Codex keeps it: the output items echoed (ids dropped, status
    completed; a reasoning item with its reasoning_text content, its summary and
    encrypted_content as they came), then one function_call_output per call, by call_id."""
    echoed = [e for e in (_echo(item) for item in reply.blocks) if e is not None]
    answers = [{"type": "function_call_output", "call_id": c.id, "output": result,
                "status": "completed"} for c, result in zip(reply.calls, results)]
    return [*items(messages), *echoed, *answers]


def _echo(item: dict) -> dict | None:
    kind = item.get("type")
    if kind == "message":
        parts = [{"type": "output_text", "text": p.get("text", "")}
                 for p in item.get("content") or [] if isinstance(p, dict)]
        return {"type": "message", "role": "assistant", "status": "completed", "content": parts}
    if kind == "function_call":
        return {"type": "function_call", "status": "completed", "name": item.get("name"),
                "arguments": item.get("arguments"), "call_id": item.get("call_id")}
    if kind == "reasoning":
        out: dict[str, Any] = {"type": "reasoning", "status": "completed",
                               "summary": item.get("summary") or []}
        content = item.get("content")
        # Codex sends the content only where it holds reasoning_text, and null where none came.
        if content is None or any(isinstance(p, dict) and p.get("type") == "reasoning_text"
                                  for p in content):
            out["content"] = content
        out["encrypted_content"] = item.get("encrypted_content")
        return out
    return None


@dataclass(frozen=True)
class ResponsesWire:
    """The Responses API, the route a driver holds as its wire (drivers.protocols.Wire;
    fleet.yaml `api: responses`, the route Codex uses)."""

    api = "responses"
    api_shape = "openai"
    sdk_modules = ("openai", "openai.resources.responses")
    image_forms = ("data_url",)
    reasoning_fields = tuple(REASONING_PARTS)
    history_reasoning_fields = ()  # reasoning items, judged by test_agent
    # No stop, no stream_options (every stream ends with its usage), no count route asked.
    shape_params = frozenset({"max_tokens", "response_format", "logprobs", "context_limit",
                              "sampling"})
    budget_keys = ("max_output_tokens",)
    sampling_fields = ("temperature", "top_p")  # no penalties, no n

    def engine_fields(self, extra: dict) -> dict:
        return openai_chat.engine_fields(extra)

    def sdk_client(self, endpoint, http_client, timeout):
        return openai_chat.client(endpoint, http_client, timeout)

    def image_part(self, b64, mime, form):
        return {"type": "input_image", "detail": "auto",
                "image_url": f"data:{mime};base64,{b64}"}

    def sampling(self, sampling):
        # The Responses API takes temperature and top_p; seed and top_k travel in the body,
        # where an open engine reads them as its chat route does.
        out: dict[str, Any] = {k: v for k, v in sampling.items()
                               if k in ("temperature", "top_p") and v is not None}
        body = {k: v for k, v in sampling.items() if k in ("seed", "top_k") and v is not None}
        return {**out, "extra_body": body} if body else out

    def converse(self, sdk, model, req, clock):
        return converse(self, sdk, model, req, clock)

    def stop_param(self, stop):
        # Not a Responses field (test_params_stop is not collected): the chat one, in the body.
        return {"extra_body": {"stop": [stop]}}

    def count_tokens(self, sdk, model, req):
        return None

    def agent_history(self, messages, reply, results):
        return agent_history(messages, reply, results)

    def thinking_on(self, max_tokens):
        # As Codex asks: a reasoning summary (what OpenAI's models send reasoning as).
        return {"extra_body": {"reasoning": {"summary": "auto"}}}

    def thinking_off(self):
        # reasoning.effort "none" is the API's switch; the template kwarg what llama.cpp reads.
        return {"extra_body": {"reasoning": {"effort": "none"},
                               "chat_template_kwargs": {"enable_thinking": False}}}

    def effort(self, value):
        return {"extra_body": {"reasoning": {"effort": value}}}

    def response_format(self, fmt):
        """text.format for the chat shape's response_format json_schema."""
        spec = fmt.get("json_schema") or {}
        return {"text": {"format": {"type": fmt.get("type"), "name": spec.get("name"),
                                    "schema": spec.get("schema"),
                                    "strict": spec.get("strict", False)}}}

    def logprobs(self, top):
        return {"top_logprobs": top, "include": [LOGPROBS_INCLUDE]}
