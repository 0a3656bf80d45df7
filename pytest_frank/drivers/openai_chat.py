"""The OpenAI chat-completions wire: request params, a reply read whole, a stream reassembled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pytest_frank.transport.http import NO_KEY
from pytest_frank.transport.wire import Call, Logprob, Reads, Reply, Request, Unreadable, typed


def client(endpoint, http_client, timeout: float):
    """The official openai client on the recorded HTTP client: chat and Responses routes alike."""
    import openai

    return openai.OpenAI(base_url=endpoint.api_base, api_key=endpoint.api_key or NO_KEY,
                         http_client=http_client, max_retries=0, timeout=timeout,
                         default_headers=dict(endpoint.headers) or None)


def params(model: str, req: Request) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model,
                           "messages": req.messages or [{"role": "user", "content": req.content}]}
    if req.budget_key:  # None: no budget sent, the server's default decides (as Open WebUI)
        out[req.budget_key] = req.max_tokens
    if req.tools is not None:
        out["tools"] = req.tools
        if req.tool_choice is not None:
            out["tool_choice"] = _choice(req.tool_choice)
        if req.parallel is not None:
            out["parallel_tool_calls"] = req.parallel
    return {**out, **req.extra}


def converse(wire: Reads, sdk, model: str, req: Request, clock: Callable[[], float]) -> Reply:
    kwargs = params(model, req)
    if req.stream:
        if req.stream_usage:
            kwargs.setdefault("stream_options", {"include_usage": True})
        with sdk.chat.completions.create(stream=True, **kwargs) as stream:
            return _read_stream(wire, stream, req, clock)
    completion = sdk.chat.completions.create(**kwargs)
    choices = typed(getattr(completion, "choices", None), list, "choices")
    if not choices:
        raise Unreadable(f"the reply has no choices (choices is {choices!r}): no answer in it")
    choice = choices[0]
    msg = getattr(choice, "message", None)
    content = typed(getattr(msg, "content", None), str, "choices[0].message.content")
    reply = Reply(status=200, content=content or "",
                  finish=typed(getattr(choice, "finish_reason", None), str, "finish_reason"))
    reply.reasoning, reply.reasoning_field = _reasoning(_fields(wire, req), _extra(msg))
    reply.engine = wire.engine_fields(_extra(completion))
    _usage(reply, getattr(completion, "usage", None))
    reply.logprobs = _logprobs(getattr(choice, "logprobs", None))
    calls = typed(getattr(msg, "tool_calls", None), list, "choices[0].message.tool_calls")
    for i, tc in enumerate(calls or []):
        fn = getattr(tc, "function", None)
        reply.calls.append(Call(typed(getattr(fn, "name", None), str, f"tool_calls[{i}].name"),
                                getattr(fn, "arguments", None), getattr(tc, "id", None),
                                as_text=True))
    return reply


def _logprobs(logprobs) -> list[Logprob] | None:
    """choices[0].logprobs.content: a token, its logprob and top_logprobs each."""
    tokens = typed(getattr(logprobs, "content", None), list, "choices[0].logprobs.content")
    if tokens is None:
        return None
    out = []
    for i, t in enumerate(tokens):
        top = typed(getattr(t, "top_logprobs", None), list, f"logprobs.content[{i}].top_logprobs")
        out.append(Logprob(typed(getattr(t, "token", None), str, f"logprobs.content[{i}].token")
                           or "", typed(getattr(t, "logprob", None), (int, float),
                                        f"logprobs.content[{i}].logprob"), len(top or ()),
                           _alternatives(top or [])))
    return out


def _alternatives(top: list) -> tuple[tuple[str, float], ...]:
    """The alternatives that name a token and a number (a malformed one is left out)."""
    pairs = ((getattr(a, "token", None), getattr(a, "logprob", None)) for a in top)
    return tuple((t, float(lp)) for t, lp in pairs
                 if isinstance(t, str) and isinstance(lp, (int, float)))


def _extra(model) -> dict:
    """Fields past the API's (reasoning, llama.cpp timings), where the reply is an object."""
    extra = getattr(model, "model_extra", None)
    return extra if isinstance(extra, dict) else {}


def _tokens(usage) -> int | None:
    return typed(getattr(usage, "completion_tokens", None), int, "usage.completion_tokens")


def _read_stream(wire: Reads, stream, req: Request, clock: Callable[[], float]) -> Reply:
    reply = Reply(status=200)
    texts: list[str] = []
    thoughts: dict[str, str] = {}  # reasoning text by the field it came in
    calls: dict[int, Call] = {}  # tool calls by their index, grown piece by piece
    for n, chunk in enumerate(stream):
        if n > req.event_budget:
            reply.problem = (f"the stream ran past {req.event_budget} events for "
                             f"{req.max_tokens} max_tokens without ending")
            break
        reply.engine.update(wire.engine_fields(_extra(chunk)))
        reply.events += 1
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            reply.usage_events.append(n)
        if _tokens(usage) is not None:
            _usage(reply, usage)
        for choice in typed(getattr(chunk, "choices", None), list, f"chunk {n}: choices") or []:
            delta = getattr(choice, "delta", None)
            if delta is not None and _take(_fields(wire, req), delta, texts, thoughts, calls):
                reply.tick(clock())
            finish = typed(getattr(choice, "finish_reason", None), str, "finish_reason")
            reply.finish = finish or reply.finish
    reply.content = "".join(texts)
    reply.reasoning, reply.reasoning_field = _reasoning(_fields(wire, req), thoughts)
    reply.calls = [calls[i] for i in sorted(calls)]
    return reply


def _usage(reply: Reply, usage) -> None:
    """The counts the server gives: tokens made, of them thinking; the prompt, of it cached."""
    reply.tokens = _tokens(usage)
    prompt = getattr(usage, "prompt_tokens", None)
    cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    thought = getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", None)
    reply.prompt_tokens, reply.cached_tokens = _count(prompt), _count(cached)
    reply.reasoning_tokens = _count(thought) or None


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fields(wire: Reads, req: Request) -> tuple[str, ...]:
    # fleet.yaml may name the field; the wire's usual ones are still read, so a check can
    # say where the reasoning went instead of calling it missing.
    named = (req.reasoning_field,) if req.reasoning_field else ()
    return named + tuple(f for f in wire.reasoning_fields if f not in named)


def _take(fields: tuple[str, ...], delta, texts: list, thoughts: dict, calls: dict) -> bool:
    """Fold one delta in; True when it carried content or reasoning text."""
    text = typed(getattr(delta, "content", None), str, "delta.content") or ""
    texts.append(text)
    carried = bool(text)
    for name, value in _extra(delta).items():
        if name in fields and isinstance(value, str):
            thoughts[name] = thoughts.get(name, "") + value
            carried = carried or bool(value)
    for tc in typed(getattr(delta, "tool_calls", None), list, "delta.tool_calls") or []:
        _add_fragment(calls, tc)
    return carried


def _reasoning(fields: tuple[str, ...], found: dict) -> tuple[str, str | None]:
    """The first non-empty reasoning field, in the order read."""
    for name in fields:
        value = found.get(name)
        if isinstance(value, str) and value.strip():
            return value, name
    return "", None


def _choice(choice):
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _add_fragment(calls: dict, tc) -> None:
    """The first delta of a call has id and name; later ones argument pieces."""
    index = typed(getattr(tc, "index", None), int, "delta.tool_calls[].index")
    index = len(calls) if index is None else index
    call = calls.setdefault(index, Call(None, "", None, as_text=True))
    call.id = call.id or getattr(tc, "id", None)
    fn = getattr(tc, "function", None)
    if fn is not None:
        call.name = call.name or typed(getattr(fn, "name", None), str, "tool call name")
        piece = getattr(fn, "arguments", None)
        if piece is None:
            return
        if isinstance(piece, str) and isinstance(call.arguments, str):
            call.arguments += piece
        elif not isinstance(piece, str):
            # An object (or list, number) where the wire sends text: kept as it came, for the
            # judges to name; a client that JSON.parses the fragments breaks on it.
            call.arguments = piece


def agent_history(messages: list[dict], reply: Reply, results: list[str]) -> list[dict]:
    """The next turn's history as an agent client keeps it: the assistant message with its
    tool_calls as the server sent them (and its reasoning, in the field it came in), then one
    `role: tool` message per call, answered by its id."""
    said: dict[str, Any] = {"role": "assistant", "content": reply.content or None,
                            "tool_calls": [{"id": c.id, "type": "function",
                                            "function": {"name": c.name,
                                                         "arguments": _text(c.arguments)}}
                                           for c in reply.calls]}
    if reply.reasoning and reply.reasoning_field:
        said[reply.reasoning_field] = reply.reasoning
    answers = [{"role": "tool", "tool_call_id": c.id, "content": result}
               for c, result in zip(reply.calls, results)]
    return [*messages, said, *answers]


def _text(arguments) -> str:
    import json

    return arguments if isinstance(arguments, str) else json.dumps(arguments)


# Reply fields past the API that a reader keeps whole in Reply.engine: llama.cpp's timings (its
# draft and prompt cache counts), wherever the engine behind a route sends them.
ENGINE_KEYS = ("timings",)


def engine_fields(extra: dict) -> dict:
    return {k: v for k, v in extra.items() if k in ENGINE_KEYS and isinstance(v, dict)}


@dataclass(frozen=True)
class ChatWire:
    """Chat completions, the route a driver holds as its wire (drivers.protocols.Wire): the
    OpenAI-family engines' own route (the generic shape, llama.cpp, vLLM, SGLang), and the chat
    route a proxy's generic shape lends. What differs by engine on it (how an image may travel,
    where reasoning comes, the sampling fields it takes) is the engine driver's, passed in
    (`Driver.chat_wire`)."""

    api = "chat"
    api_shape = "openai"
    sdk_modules = ("openai", "openai.resources.chat")
    # What clients echo: the field the reasoning came in (llama.cpp, DeepSeek: reasoning_content;
    # vLLM since v0.16, OpenRouter: reasoning).
    history_reasoning_fields = ("reasoning_content", "reasoning")
    shape_params = frozenset({"max_tokens", "stop", "response_format", "logprobs",
                              "stream_usage", "context_limit", "sampling", "validation",
                              "response_format_variants"})
    budget_keys = ("max_tokens", "max_completion_tokens")
    image_forms: tuple[str, ...] = ("data_url",)
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    # The sampling fields the API documents: what test_params_sampling sends (n: 2 asks for two
    # choices); an engine that documents fewer says so in its driver.
    sampling_fields: tuple[str, ...] = ("temperature", "top_p", "presence_penalty",
                                        "frequency_penalty", "n")

    def engine_fields(self, extra: dict) -> dict:
        return engine_fields(extra)

    def sdk_client(self, endpoint, http_client, timeout: float):
        return client(endpoint, http_client, timeout)

    def converse(self, sdk, model: str, req: Request, clock: Callable[[], float]) -> Reply:
        return converse(self, sdk, model, req, clock)

    def agent_history(self, messages: list[dict], reply: Reply, results: list[str]) -> list[dict]:
        return agent_history(messages, reply, results)

    def count_tokens(self, sdk, model: str, req: Request) -> int | None:
        # The OpenAI shape has no counting route (test_params_count_tokens is not collected).
        return None

    def sampling(self, sampling: dict) -> dict:
        """Request params for fleet.yaml's sampling (a None seed sends none)."""
        out = {k: v for k, v in sampling.items() if k in ("temperature", "top_p", "seed")
               and v is not None}
        if sampling.get("top_k") is not None:
            out["extra_body"] = {"top_k": sampling["top_k"]}
        return out

    def stop_param(self, stop: str) -> dict:
        return {"stop": [stop]}

    def response_format(self, fmt: dict) -> dict:
        return {"response_format": fmt}

    def logprobs(self, top: int) -> dict:
        return {"logprobs": True, "top_logprobs": top}

    def thinking_on(self, max_tokens: int) -> dict:
        return {}  # thinking is the template's default: nothing to ask

    def thinking_off(self) -> dict:
        # chat template kwargs, as Qwen3 templates read them
        return {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}

    def effort(self, value: str) -> dict:
        return {"reasoning_effort": value}

    def image_part(self, b64: str, mime: str, form: str) -> dict:
        url = b64 if form == "base64" else f"data:{mime};base64,{b64}"
        return {"type": "image_url", "image_url": {"url": url}}
