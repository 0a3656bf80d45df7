"""stream: a streamed answer keeps its API shape's wire format, frame by frame. The other claims
read streams through the official SDKs, which reassemble what they can; this one judges the
frames themselves (pytest_frank.claims.stream_rules), as a strict client meets them.

One streamed answer per API shape asked (`apis`: the endpoint's own route by default), and a
streamed tool call where the endpoint has tools. What llama.cpp itself breaks (a chat stream's
`created` moving on, its first delta without `role` where the answer opens with a character
that spans tokens, the Messages stream's blocks left open, the Responses stream's reasoning
item closed late) is each a part of its own, asked by default: ops who accept it turn that
part off under `expect.stream`, and it is then noted, not failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims import stream_rules as rules
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import require_answer
from pytest_frank.claims.tools import PROMPTS, TOOLS
from pytest_frank.drivers import LlamaCppDriver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import Text, fail
from pytest_frank.runtime.chat import Reply, Request, send
from pytest_frank.runtime.known_errors import known_fix

ROUTES = {"chat": "/v1/chat/completions", "messages": "/v1/messages",
          "responses": "/v1/responses"}
# A greeting in two scripts: characters of two and three UTF-8 bytes, which a byte-level
# tokenizer splits across tokens, so a server that flushes bytes early shows it.
PROMPT = "Write hello in Japanese (こんにちは) and in French (bonjour), in one short line."
PARTS = ("created", "role", "block_order", "item_order")  # the parts ops may stop asking
SHOWN = 3  # breaches named in one failure


@dataclass(frozen=True)
class Options(ClaimOptions):
    apis: list[str] | None = option(
        None, minItems=1, uniqueItems=True, items={"enum": ["chat", "messages", "responses"]}, about=(
        "The API shapes whose streams are judged, one test each: `chat` (/v1/chat/completions), "
        "`messages` (/v1/messages), `responses` (/v1/responses). Default: the endpoint's own "
        "route (`api:`)."))
    tools: bool | None = option(None, about=(
        "Also stream a forced tool call (tool_choice required) and judge its chunks. Default: "
        "where the endpoint asks the tools claim."))
    max_tokens: int = option(256, "The budget of each streamed request. Default: 256.", minimum=1)
    created: bool = option(True, about=(
        "Chat: every chunk carries the first one's `created`. llama.cpp stamps each chunk with "
        "the second it sends it; false notes that instead of failing. Default: true."))
    role: bool = option(True, about=(
        "Chat: `role` in each choice's first delta and in no other. llama.cpp leaves it out where "
        "the answer opens with a character that spans tokens (Japanese, an emoji); false notes "
        "that instead of failing. Default: true."))
    block_order: bool = option(True, about=(
        "Messages: each content block is closed before the next one opens. llama.cpp keeps every "
        "block open until the end; false notes that instead of failing. Default: true."))
    item_order: bool = option(True, about=(
        "Responses: each output item is done before the next is added (the reasoning item before "
        "the message item). llama.cpp finishes the reasoning item last; false notes that instead "
        "of failing. Default: true."))

    def asks(self, rule: str) -> bool:
        return getattr(self, rule) if rule in PARTS else True


CLAIM = Claim("stream",
              "a streamed answer keeps its API shape's wire format, frame by frame", Options,
              order=120,
              tests=("test_stream_wire",))


@dataclass
class Streamed:
    """One streamed request: the reply as the SDK read it, and the frames as they came."""

    what: str  # "a plain answer" | "a tool call"
    reply: Reply
    frames: rules.Frames
    budget: int  # the events a stream of its max_tokens may take (Request.event_budget)


@dataclass(kw_only=True)
class Wire(Observation):
    api: str
    streams: list[Streamed] = field(default_factory=list)


def apis(opts: Options, driver: Facts) -> list[str]:
    return list(opts.apis) if opts.apis else [driver.api]


def streamed(target, api: str) -> Wire:
    """A plain answer streamed on `api`'s route (thinking asked for where the reasoning claim
    is), and a forced tool call where the endpoint has tools."""
    opts = Options.on(target.endpoint)
    think = target.endpoint.asks("reasoning")
    asks = [("a plain answer", Request(PROMPT, opts.max_tokens, stream=True, think=think))]
    if opts.tools if opts.tools is not None else target.endpoint.asks("tools"):
        asks.append(("a tool call", Request(PROMPTS["required"], opts.max_tokens, tools=TOOLS,
                                            tool_choice="required", stream=True, think=think)))
    return Wire(api=api, streams=[_stream(target, what, req, api) for what, req in asks])


def _stream(target, what: str, req: Request, api: str) -> Streamed:
    reply = send(target, req, api)
    body = reply.exchange.body if reply.exchange is not None else ""
    return Streamed(what, reply, rules.parse(body), req.event_budget)


CHECKS: dict[str, Callable[[Streamed], list[rules.Breach]]] = {
    "chat": lambda s: rules.chat(s.frames, usage_asked=True),
    "messages": lambda s: rules.messages(s.frames),
    "responses": lambda s: rules.responses(s.frames),
}


def judge(seen: Wire, ctx: Context[Options]) -> None:
    """A streamed answer (and tool call) keeps its API shape's wire format, frame by frame."""
    route = ROUTES[seen.api]
    asked: list[tuple[str, rules.Breach]] = []
    unasked: list[tuple[str, rules.Breach]] = []
    for s in seen.streams:
        doing = f"{s.what} streamed on {route}"
        ex = s.reply.exchange
        if ex is None or ex.status != 200 or ex.error or len(s.frames.frames) > s.budget:
            require_answer(s.reply, ctx.driver, doing)  # not read whole: nothing to judge
        broke = rules.error_event(s.frames)
        if broke is not None:  # the answer failed: no format to judge
            fail(f"{doing} broke off with the server's error at frame {broke[0]}: {broke[1]}",
                 known_fix(ctx.driver, broke[1]))
        for breach in _kind(ex.headers if ex is not None else {}) + CHECKS[seen.api](s):
            (asked if ctx.options.asks(breach.rule) else unasked).append((s.what, breach))
    for what, breach in unasked:
        ctx.note(f"{what}, not asked (expect.stream.{breach.rule}: false): {breach.said}")
    if asked:
        said = "; ".join(f"{what}: {b.said}" for what, b in asked[:SHOWN])
        more = f" (and {len(asked) - SHOWN} more)" if len(asked) > SHOWN else ""
        fail(f"the {route} stream breaks its wire format: {said}{more}",
             fix(asked[0][1].rule, ctx.driver))
    for s in seen.streams:  # frames well formed, yet the SDK could not read them
        require_answer(s.reply, ctx.driver, f"{s.what} streamed on {route}")
        ctx.note(_summary(s))


def _kind(headers: dict[str, str]) -> list[rules.Breach]:
    """A stream sent as something other than server-sent events (a whole JSON answer to
    `stream: true`, a proxy's own content type)."""
    kind = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if "text/event-stream" in kind.lower():
        return []
    return [rules.Breach("framing", f"the answer's content-type is {kind or 'missing'!r}, not "
                                    f"text/event-stream")]


def _summary(s: Streamed) -> str:
    r = s.reply
    texts = [r.content, r.reasoning, *(str(c.arguments) for c in r.calls)]
    wide = rules.non_ascii(texts)
    chars = f", {wide} character(s) past ASCII came whole" if wide else ", all ASCII"
    return (f"{s.what}: {len(s.frames.frames)} frames, finish {r.finish!r}"
            f"{', ' + str(len(r.calls)) + ' call(s)' if r.calls else ''}{chars}")


STREAM_WIRE = Check("test_stream_wire", "stream", streamed, judge, cases=apis,
                    per="SHAPE", when="one per API shape: `chat`, `messages`, `responses`")


# -- advice: what each rule protects, and the engine that breaks it -------------------------------
def fix(rule: str, driver: Facts) -> Text:
    return FIXES[rule](driver)


def _created(driver: Facts) -> Text:
    return advise(
        driver, "every chunk of one completion carries the first chunk's `created` (OpenAI: "
                "each chunk has the same timestamp); the server or a gateway re-stamps chunks",
        {LlamaCppDriver: "llama.cpp stamps each chunk with the second it sends it, so a stream that "
                         "crosses a second boundary changes `created`; clients that group chunks by "
                         "`id` are unaffected: where yours do, stop asking this part "
                         "(expect.stream.created: false)"})


def _role(driver: Facts) -> Text:
    return advise(
        driver, "`role` belongs in a choice's first delta, and there alone: a client that "
                "reads the message's role from the first chunk finds none, one that starts a "
                "message on each role sees several",
        {LlamaCppDriver: "llama.cpp sends the role with the answer's first piece of text, and leaves it "
                         "out where that piece waited for a character spanning tokens (an answer that "
                         "opens in Japanese, Chinese or with an emoji); clients that default the role "
                         "to assistant cope: where yours do, stop asking this part "
                         "(expect.stream.role: false)"})


def _block_order(driver: Facts) -> Text:
    return advise(
        driver, "close each content block (content_block_stop) before the next one starts, as "
                "the Messages API does: a client that renders the open block (a thinking pane, "
                "then the answer) puts text in the wrong one",
        {LlamaCppDriver: "llama.cpp's /v1/messages keeps every content block open until the answer "
                         "ends (thinking, text and tool_use close together); the Anthropic SDKs, which "
                         "accumulate by index, cope, clients that follow the open block do not: serve "
                         "those through the chat route or a gateway that re-sequences the events, or "
                         "stop asking this part (expect.stream.block_order: false)"})


def _item_order(driver: Facts) -> Text:
    return advise(
        driver, "finish each output item (response.output_item.done) before the next is "
                "added, the reasoning item before the message item, as the Responses API does",
        {LlamaCppDriver: "llama.cpp's /v1/responses finishes the reasoning item only after the message "
                         "item has streamed (every output_item.done comes at the end); clients that key "
                         "items by id (Codex, the OpenAI SDK) cope, clients that take an added item as "
                         "the end of the last one do not: serve those through the chat route, or stop "
                         "asking this part (expect.stream.item_order: false)"})


def _said(text: str) -> Callable[[Facts], Text]:
    return lambda driver: text


FIXES: dict[str, Callable[[Facts], Text]] = {
    "framing": _said("the body is not clean server-sent events: a proxy or logging layer "
                     "between the engine and the client rewrites or buffers lines; pass the "
                     "engine's stream through unchanged"),
    "done": _said("an OpenAI stream ends with `data: [DONE]`, and nothing after it: clients "
                  "that wait for it hang or report a cut answer; a proxy cut the stream, or the "
                  "server leaves it out"),
    "constant": _said("every chunk of one completion carries the first chunk's id and model: a "
                      "gateway that splices streams or renames the model per chunk breaks "
                      "clients that group chunks by id"),
    "created": _created,
    "role": _role,
    "finish": _said("each choice ends with exactly one finish_reason: none means the stream was "
                    "cut before its end, several that a proxy repeated or merged final chunks"),
    "continuation": _said("a tool call's first chunk carries its id, type and name; every later "
                          "chunk only its index and a piece of the arguments: clients that start "
                          "a call on every chunk with an id split one call into many"),
    "multibyte": _said("the server sent a token's bytes before the character was whole: it "
                       "must hold back an incomplete UTF-8 sequence until the next token "
                       "completes it (a proxy that re-chunks the body must cut between events)"),
    "usage": _said("with stream_options.include_usage, usage comes once, in one last chunk "
                   "before [DONE] (choices empty): clients that sum or overwrite it per chunk "
                   "count wrong"),
    "order": _said("the events must come in their API's order (Messages: message_start, per "
                   "block content_block_start, deltas, content_block_stop, message_delta with "
                   "stop_reason, message_stop; Responses: response.created, each item added "
                   "then done, response.completed): the SDKs' stream readers raise or drop "
                   "content otherwise"),
    "block_order": _block_order,
    "item_order": _item_order,
}
