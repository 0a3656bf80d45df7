"""params: the request parameters clients rely on are honoured, not just accepted. A server (or a
proxy in front of it) can answer 200 and quietly ignore a token cap, a stop string, a JSON schema,
logprobs, streamed usage or a prompt past its context; each test sends one parameter and judges
that it took effect. One test per parameter, so a fleet turns off what its clients never send
(`expect.params: {logprobs: false}`); the API shape says which parameters exist (the driver's
`shape_params`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pytest_frank.base.figures import COUNT, number
from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import (
    THINK_TAGS,
    one_line,
    reasoning_parser_fix,
    require_answer,
    require_thinking_ended,
)
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.openai_responses import LOGPROBS_INCLUDE
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import Alt, Phrase, Text, fail, inconclusive
from pytest_frank.runtime.chat import Reply, Request, send, think_through
from pytest_frank.runtime.sizing import PromptCount, count_chat
from pytest_frank.transport import metrics
from pytest_frank.runtime.target import Target

LONG = "Count from one to one hundred in words, separated by commas."
CAP = 16  # a cap far below the answer LONG asks for
COUNTER_LAG = 1.0  # seconds to wait once for /metrics draft counters that trail the answer
TRIES = 3  # asks at most per budget field: a terse model may end its answer under the cap
ANSWER = 512  # the first budget of an answer that is judged (asked again, larger, if cut thinking)
SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["colour", "code", "place"],
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "place": {"type": "object", "additionalProperties": False, "required": ["city"],
                  "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 40}}}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "city_card", "strict": True,
                                                 "schema": SCHEMA}}
JSON_PROMPT = ("Describe Paris as JSON: a colour (red, green or blue), a three-letter upper-case "
               "code, and place.city.")
# A schema no model writes of its own accord, asked with a prompt that says nothing of it: a
# model that follows the prompt above writes valid JSON where the server ignores the schema, so
# only this answer shows the schema enforced (llama.cpp PR 21537).
UNPROMPTED_SCHEMA = {"type": "object", "additionalProperties": False,
                     "required": ["frank_ticket", "frank_seat"],
                     "properties": {"frank_ticket": {"type": "string", "enum": ["FR-417"]},
                                    "frank_seat": {"type": "integer", "enum": [23]}}}
UNPROMPTED = {"type": "json_schema", "json_schema": {"name": "frank_ticket", "strict": True,
                                                     "schema": UNPROMPTED_SCHEMA}}
HELLO = "Say hello in one short sentence."
TOP = 2  # top_logprobs asked for
SYSTEM = "Answer in one short sentence."
COUNT_TOLERANCE = 0.1  # count_tokens may differ from usage by a tenth (templates add a few)
COUNT_SLACK = 8
# usage.prompt_tokens against the server's own count of the rendered prompt: equal, give or take
# the one BOS token a count route may add or leave out
PROMPT_SLACK = 1
ASKED = {"claude_code": "a system message inside `messages`", "count_tokens": "count_tokens",
         "stream_usage": "stream_options.include_usage", "context_limit": "the context limit"}


@dataclass(frozen=True)
class Options(ClaimOptions):
    max_tokens: bool = option(True, about=(
        "a small max_tokens (and max_completion_tokens) cuts the answer at the cap (default true)"))
    stop: bool = option(True, about=(
        "a stop string (stop_sequences) cuts the content before it, reasoning intact (default "
        "true)"))
    response_format: bool = option(True, about=(
        "json_schema (strict) output parses and validates, in the content (default true)"))
    logprobs: bool = option(True, about=(
        "logprobs with top_logprobs 2 come per token, of that width (default true)"))
    stream_usage: bool = option(True, about=(
        "stream_options.include_usage: usage once, last, equal to unstreamed; none unasked "
        "(default true)"))
    context_limit: bool = option(True, about=(
        "a prompt over the served context answers a 4xx naming the limit (default true)"))
    count_tokens: bool = option(True, about=(
        "Anthropic shape: count_tokens agrees with usage.input_tokens where the route exists "
        "(default true)"))
    claude_code: bool = option(False, about=(
        "Anthropic shape: a system message inside messages is accepted, as Claude Code sends it "
        "(default false)"))
    prompt_tokens: bool = option(True, about=(
        "a chat answer's usage.prompt_tokens equals the server's own count of the prompt its "
        "messages render to, give or take one token (llama.cpp /tokenize of /apply-template's "
        "prompt, vLLM /tokenize with the messages) (default true)"))
    # params/request_contract.py: malformed requests refused (asked: llama.cpp accepts them),
    # the response_format variants, the sampling fields
    validation: bool = option(False, about=(
        "chat shape: tool_choice \"required\" without tools or with tools [] and an unknown "
        "tool_choice answer a 4xx, never 200 nor 5xx; \"none\" and \"auto\" without tools are "
        "answered (default false: llama.cpp answers 200 to the first two)"))
    response_format_variants: bool = option(False, about=(
        "chat shape: json_schema formats without a name, with strict \"yes\" or a schema \"x\" "
        "answer a 4xx; text, json_object and json_schema with strict false are accepted and "
        "honoured (default false: llama.cpp answers 200 to the malformed ones)"))
    sampling: bool = option(True, about=(
        "temperature, top_p, presence_penalty and frequency_penalty (those the API shape has) are "
        "accepted, and n: 2 gives two choices where the route takes n (default true)"))


CLAIM = Claim("params",
              "request parameters (caps, stops, schemas, logprobs, usage, context) are honoured",
              Options, order=110,
              tests=("test_params_max_tokens", "test_params_stop", "test_params_response_format",
                     "test_params_logprobs", "test_params_stream_usage",
                     "test_params_context_limit", "test_params_count_tokens",
                     "test_params_system_message", "test_params_prompt_tokens",
                     "test_params_validation", "test_params_response_format_variants",
                     "test_params_sampling"))


@dataclass(kw_only=True)
class Sent(Observation):
    """Replies to requests that each carry the parameter under test (`what`, as sent)."""
    replies: dict[str, Reply] = field(default_factory=dict)
    reference: Reply = field(default_factory=Reply)  # the request without the parameter
    # max_tokens: the earlier asks that ended by themselves under their cap (each asked again
    # with a smaller one), first to last; `replies` holds the last ask
    under: dict[str, list[Reply]] = field(default_factory=dict)
    stop: str | None = None
    sent_words: int = 0
    context: int | None = None
    counted: int | None = None  # count_tokens' answer
    count_error: str | None = None
    drafting: bool | None = None  # logprobs: the server says it drafts (speculative decoding)
    drafted: Drafted | None = None  # response_format: drafting during the JSON answer
    prompt: PromptCount | None = None  # prompt_tokens: the server's count of the rendered prompt


@dataclass
class Drafted:
    """Where the endpoint drafts (speculative decoding): the draft tokens proposed and accepted
    while the schema-bound answer was written, and where they were read."""
    why: str  # why drafting is expected: the fleet asks it, or the server says it drafts
    counts: tuple[float, float] | None = None  # (draft tokens, accepted); None: not read
    source: str = ""


def _answer(target: Target, req: Request) -> Reply:
    return think_through(target, req)


# -- probes ---------------------------------------------------------------------------------
def capped(target: Target) -> Sent:
    """The long answer asked with each budget field the API shape has, set small; an answer that
    ends by itself under the cap shows nothing of it, so it is asked again under a cap half its
    length (a few times at most)."""
    obs = Sent()
    for key in target.driver.wire.budget_keys:
        cap, earlier = CAP, obs.under.setdefault(key, [])
        for _ in range(TRIES):
            reply = obs.replies[key] = send(target, Request(LONG, cap, budget_key=key))
            if not reply.ok or reply.cut or least_tokens(reply) > cap or cap == 1:
                break
            earlier.append(reply)
            cap = max(1, min(cap, least_tokens(reply)) // 2)
        if earlier and earlier[-1] is obs.replies[key]:
            earlier.pop()
    return obs


def least_tokens(r: Reply) -> int:
    """The reply's generated tokens: the server's count, else its words (each at least one
    token in any vocabulary)."""
    if r.tokens is not None:
        return r.tokens
    return len((r.reasoning + " " + r.content).split()) + len(r.calls)


def stopped(target: Target) -> Sent:
    """The answer once without a stop string, then with one taken from its middle."""
    ref = _answer(target, Request(LONG, ANSWER))
    obs = Sent(reference=ref)
    obs.stop = stop_string(ref.content, ref.reasoning)
    if ref.ok and obs.stop:
        stop = target.driver.wire.stop_param(obs.stop)
        obs.replies["stop"] = _answer(target, Request(LONG, ANSWER, extra=stop))
    return obs


def formatted(target: Target) -> Sent:
    """At the endpoint's default; again with thinking asked where the reasoning claim is asked
    (vLLM issue 44012: the schema escapes through the reasoning channel with a parser on); and
    a schema the prompt does not ask for, which only an enforced schema can write."""
    extra, driver = target.driver.wire.response_format(FORMAT), target.driver
    why = _drafts(target)
    before = metrics.scrape(target, driver.metrics.path) \
        if why and driver.metrics.draft_counts_from == "metrics" else None
    obs = Sent(replies={"response_format": _answer(target, Request(JSON_PROMPT, ANSWER,
                                                                   extra=extra))})
    if target.endpoint.asks("reasoning"):
        obs.replies["response_format thinking"] = _answer(
            target, Request(JSON_PROMPT, ANSWER, extra=extra, think=True))
    if why:
        obs.drafted = _drafted(target, why, list(obs.replies.values()), before)
    obs.replies["response_format unprompted"] = _answer(
        target, Request(HELLO, ANSWER, extra=target.driver.wire.response_format(UNPROMPTED)))
    return obs


def _drafts(target: Target) -> str | None:
    """Why the endpoint is expected to draft: the fleet asks spec_decode, or the server says
    it drafts; None where neither."""
    from pytest_frank.runtime.probes import slot_shape

    if target.endpoint.asks("spec_decode"):
        return "expect.spec_decode is asked"
    shape = target.need(slot_shape)
    if getattr(shape, "failure", True) is None and \
            target.driver.metrics.speculative_live(getattr(shape, "payloads", {})):
        return f"{target.driver.metrics.speculative_source} is true"
    return None


def _drafted(target: Target, why: str, replies: list[Reply], before: metrics.Scrape | None) -> Drafted:
    """The draft counts of the JSON answers: each reply's own where the engine reports them
    (llama.cpp's timings), else the growth of the /metrics counters over the answers (vLLM's:
    server-wide, so another client's drafting counts in too)."""
    driver = target.driver
    own = [c for c in (driver.metrics.draft_counts(r.engine) for r in replies if r.ok) if c]
    if own:
        return Drafted(why, (sum(c[0] for c in own), sum(c[1] for c in own)),
                       "the replies' timings.draft_n / draft_n_accepted")
    if before is None or not before.ok:
        return Drafted(why)
    found = Drafted(why)
    for wait in (0.0, COUNTER_LAG):  # counters may trail the reply (vLLM's engine loop)
        time.sleep(wait)
        after = metrics.scrape(target, driver.metrics.path)
        series = next((s for s in driver.metrics.spec_series if s.counters and after.ok
                       and s.draft_tokens in after.names()), None)
        if series is None or series.draft_tokens is None or series.accepted is None:
            break
        found.counts = (metrics.delta(before, after, series.draft_tokens) or 0.0,
                        metrics.delta(before, after, series.accepted) or 0.0)
        found.source = f"{series.source}, server-wide over the answers"
        if found.counts[0]:
            break
    return found


def with_logprobs(target: Target) -> Sent:
    """The capped answer with logprobs, and whether the server drafts: drafted tokens may come
    without their alternatives."""
    from pytest_frank.runtime.probes import slot_shape

    obs = Sent(replies={"logprobs": send(target, Request(LONG, CAP,
                                                        extra=target.driver.wire.logprobs(TOP)))})
    shape = target.need(slot_shape)
    if shape.failure is None:
        obs.drafting = target.driver.metrics.speculative_live(getattr(shape, "payloads", {}))
    return obs


def streamed_usage(target: Target) -> Sent:
    """The same capped request unstreamed, streamed with include_usage, and streamed without."""
    req = Request(LONG, CAP)
    return Sent(reference=send(target, req),
                replies={"asked": send(target, replace(req, stream=True)),
                         "unasked": send(target, replace(req, stream=True, stream_usage=False))})


def over_context(target: Target) -> Sent:
    """A prompt longer than the served context: a word is at least a token in any vocabulary."""
    context = target.served_context()
    obs = Sent(context=context)
    if context is None:
        obs.inconclusive = ("the endpoint does not say its context (/props, max_model_len), so "
                            "no prompt is known to be too long")
        return obs
    obs.sent_words = context + 256
    prompt = "Repeat the last word: " + "hello " * obs.sent_words
    obs.replies["long"] = send(target, Request(prompt, CAP))
    return obs


def counted(target: Target) -> Sent:
    """count_tokens for a prompt, and the usage of the same prompt answered."""
    req = Request(LONG, CAP)
    obs = Sent(replies={"usage": send(target, req)})
    try:
        obs.counted = target.driver.wire.count_tokens(target.sdk(), target.model_name(), req)
    except Exception as exc:  # the SDK's status error: 404 where the route does not exist
        status = getattr(exc, "status_code", None)
        obs.count_error = f"{status}" if status is not None else one_line(str(exc), 120)
    return obs


def prompt_counted(target: Target) -> Sent:
    """A short chat answer, and the server's own count of the prompt its messages render to."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": LONG}]
    obs = Sent(replies={"usage": send(target, Request(LONG, CAP, messages=messages))})
    obs.prompt = count_chat(target, messages)
    return obs


def system_in_messages(target: Target) -> Sent:
    return Sent(replies={"system": _answer(target, Request(
        "Say hello.", ANSWER, messages=[{"role": "system", "content": SYSTEM},
                                       {"role": "user", "content": "Say hello."}]))})


def field_name(params: dict) -> str:
    """A request field as a client names it: `response_format`, or `text.format` where the
    field sits in a one-key object."""
    key = next(iter(params))
    value = params[key]
    return f"{key}.{next(iter(value))}" if isinstance(value, dict) and len(value) == 1 else key


def stop_string(content: str, reasoning: str = "") -> str | None:
    """Four characters from the middle of an answer, no whitespace, not first met at its start,
    not in the reasoning where avoidable: a stop the answer is sure to meet."""
    middle = len(content) // 2
    found = None
    for start in list(range(middle, len(content) - 3)) + list(range(0, middle)):
        piece = content[start:start + 4]
        # Some answer before its first match, so the cut shows.
        if len(piece) == 4 and not any(c.isspace() for c in piece) and content.find(piece):
            if piece not in reasoning:
                return piece
            found = found or piece
    return found


# -- judges ---------------------------------------------------------------------------------
def judge_max_tokens(obs: Sent, ctx: Context[Options]) -> None:
    """A small max_tokens (and max_completion_tokens) ends the answer at the cap: finish_reason
    length (stop_reason max_tokens) and no more tokens than the cap. An answer that ends by
    itself under the cap is asked again under a smaller one; a model that stays under every
    cap leaves it inconclusive."""
    terse = []
    for key, r in obs.replies.items():
        tries = [*obs.under.get(key, []), r]
        for t in tries:
            require_answer(t, ctx.driver, f"a request with {key}={_cap(t)}")
            _over_cap(key, t, ctx)
        if r.tokens is None:
            ctx.note(f"{key}: the reply has no usage count; only finish_reason {r.finish!r} "
                     f"shows the cap")
        if r.cut:
            if len(tries) > 1:
                ctx.note(f"{key}: {_under(tries[:-1])}; cut at {key}={_cap(r)} "
                         f"(finish_reason {r.finish!r})")
            continue
        if r.tokens is not None and all(t.tokens == _cap(t) for t in tries):
            fail(f"{key}={_cap(r)} was sent and the answer stopped at exactly "
                 f"{r.tokens} tokens with finish_reason {r.finish!r} ({_under(tries)}): the cap "
                 f"cut it, but clients read the finish as a complete answer",
                 budget_cut_fix(ctx.driver))
        terse.append(f"{key}: {_under(tries)}")
    if terse:
        inconclusive(f"the model ended its answer by itself under every cap asked "
                     f"({'; '.join(terse)}): an answer under the cap shows nothing of it; this "
                     f"model answers the long request too tersely to show the cap")


def _over_cap(key: str, r: Reply, ctx: Context[Options]) -> None:
    cap, made = _cap(r), least_tokens(r)
    if made <= cap:
        return
    came = (f"{made} tokens came back" if r.tokens is not None else
            f"an answer of {made} words (at least as many tokens) came back")
    fail(f"{key}={cap} was sent and {came} (finish_reason {r.finish!r}): the cap is not "
         f"applied", _dropped(key, ctx))


def _cap(r: Reply) -> int:
    return r.max_tokens if r.max_tokens is not None else CAP


def _under(tries: list[Reply]) -> str:
    """How each ask that ended by itself came back: '6 tokens under a cap of 16, ...'."""
    unit = "token" if all(t.tokens is not None for t in tries) else "word"
    counts = [(least_tokens(t), _cap(t)) for t in tries]
    return ", ".join(f"{n} {unit}{'s' * (n != 1)} under a cap of {cap}" for n, cap in counts) + (
        f" (finish_reason {tries[-1].finish!r})")


def judge_stop(obs: Sent, ctx: Context[Options]) -> None:
    """A stop string from the middle of the answer cuts the content before it, is not in it,
    is reported as the reason, and leaves the reasoning intact."""
    ref, stop = obs.reference, obs.stop
    require_answer(ref, ctx.driver, "the answer without a stop string")
    require_thinking_ended(ref, ctx.driver, "expect.params")
    if stop is None:
        fail(f"the answer without a stop string is too short to take one from "
             f"({one_line(ref.content, 60)!r})")
    r, key = obs.replies["stop"], ctx.driver.wire.stop_param(stop)
    param = next(iter(key))
    require_answer(r, ctx.driver, f"a request with {param}")
    expected = ref.content[:ref.content.find(stop)]
    if stop in r.content:
        fail(f"{param}={[stop]} was sent and the content still holds it "
             f"({one_line(r.content, 80)!r}): the stop string is ignored", stop_fix(ctx.driver))
    if r.content.startswith(expected) and r.content != expected and stop.startswith(
            r.content[len(expected):]):
        fail(f"{param}={[stop]} cut the answer, but {r.content[len(expected):]!r} of the stop "
             f"string leaked into the content", stop_fix(ctx.driver))
    if ref.reasoning.strip() and not r.reasoning.strip():
        fail(f"{param}={[stop]} was sent and the reasoning came back empty (it was "
             f"{one_line(ref.reasoning, 60)!r} without): the stop cut the reasoning, not the "
             f"answer", stop_fix(ctx.driver))
    if r.cut or r.tool_finish:
        fail(f"{param}={[stop]}: the answer ended with {r.finish!r}, not at the stop string",
             stop_fix(ctx.driver))
    if "stop_sequences" in key:
        if r.finish != "stop_sequence" or r.stop_sequence != stop:
            fail(f"stop_sequences={[stop]} cut the answer but it came back as stop_reason "
                 f"{r.finish!r}, stop_sequence {r.stop_sequence!r}: clients look for "
                 f"stop_reason \"stop_sequence\" and the sequence that matched",
                 stop_fix(ctx.driver))
    elif r.finish != "stop":
        fail(f"stop={[stop]}: finish_reason {r.finish!r}, not \"stop\"", stop_fix(ctx.driver))


def judge_response_format(obs: Sent, ctx: Context[Options]) -> None:
    """response_format json_schema (strict; an enum, a pattern, a nested object): the content
    parses and validates, and the JSON is in the content, not the reasoning; with thinking asked
    too where the reasoning claim is asked."""
    for key, r in obs.replies.items():
        if key == "response_format unprompted":
            _judge_formatted(r, ctx, " that the prompt does not ask for", UNPROMPTED_SCHEMA)
        else:
            _judge_formatted(r, ctx, "" if key == "response_format" else " with thinking on")
    if obs.drafted is not None:
        _judge_drafted(obs.drafted, ctx, "response_format thinking" in obs.replies)


def _judge_drafted(d: Drafted, ctx: Context[Options], thinking: bool) -> None:
    """The schema held; whether it held while drafting too (vLLM PR 36138: structured output
    broke under speculative decoding) is shown only where drafts were made during the answers.
    Not shown is a note, not a failure: the answers themselves held."""
    answers = "the JSON answers (thinking on and off)" if thinking else "the JSON answer"
    if d.counts and d.counts[0]:
        ctx.note(f"drafting engaged during {answers} ({d.why}): {number(d.counts[0], COUNT)} "
                 f"draft tokens, {number(d.counts[1], COUNT)} accepted [{d.source}], and the "
                 f"schema held")
        return
    seen = (f"{d.source} show no draft tokens" if d.counts is not None else
            f"where the {ctx.driver.label} reports draft counts "
            f"({ctx.driver.metrics.draft_counts_where}) none came")
    ctx.note(f"drafting not shown during {answers}: {d.why}, yet {seen}; the schema held "
             f"without it, so whether it holds while drafting is not shown here "
             f"(test_spec_decode judges the drafting)")


def _judge_formatted(r: Reply, ctx: Context[Options], how: str,
                     schema: dict = SCHEMA) -> None:
    import jsonschema

    sent = f"{field_name(ctx.driver.wire.response_format(FORMAT))} json_schema{how}"
    require_answer(r, ctx.driver, f"a request with {sent}")
    require_thinking_ended(r, ctx.driver, "expect.params")
    if not r.content.strip() and r.reasoning.strip():
        fail(f"{sent}: the content is empty and the reasoning holds "
             f"{one_line(r.reasoning, 80)!r}: the schema went to the reasoning channel",
             structured_output_fix(ctx.driver))
    _thinking_in_json(r, ctx, sent, schema)
    try:
        value = json.loads(r.content)
    except ValueError:
        fail(f"{sent} was sent and the content is not JSON "
             f"({one_line(r.content, 80)!r}): the schema is not enforced"
             f"{_ANSWERED_PROMPT if schema is UNPROMPTED_SCHEMA else ''}",
             structured_output_fix(ctx.driver))
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=str)
    if errors:
        where = ".".join(str(p) for p in errors[0].absolute_path) or "the answer"
        fail(f"{sent} was sent and the content breaks it at {where}: "
             f"{one_line(errors[0].message, 120)} ({one_line(r.content, 80)!r})",
             structured_output_fix(ctx.driver))


# Said where the unprompted schema alone was not written: the prompted answer held by the model.
_ANSWERED_PROMPT = (": the model answered the prompt, so a schema the prompt spells out holds "
                    "only where the model follows it, and a client's schema is not kept")


def _thinking_in_json(r: Reply, ctx: Context[Options], sent: str,
                      schema: dict = SCHEMA) -> None:
    """Thinking left in content ahead of the JSON: the schema may well be enforced on the answer
    after it; what is broken is the split of thinking from content."""
    import jsonschema

    if not any(tag in r.content for tag in THINK_TAGS):
        return
    rest = r.content.rsplit(THINK_TAGS[1], 1)[-1].strip()
    try:
        valid = not any(jsonschema.Draft202012Validator(schema).iter_errors(json.loads(rest)))
    except ValueError:
        valid = False
    after = ("the JSON after it validates, so the schema is enforced" if valid
             else f"and what follows is no valid answer either ({one_line(rest, 60)!r})")
    fail(f"{sent}: the content holds the model's thinking ({one_line(r.content, 80)!r}); "
         f"{after}: the reasoning parser is off or wrong, so clients parse the thinking as the "
         f"JSON", reasoning_parser_fix(ctx.driver))


def judge_logprobs(obs: Sent, ctx: Context[Options]) -> None:
    """logprobs with top_logprobs=2: one entry per generated token, each with two alternatives,
    the tokens spelling the content."""
    r = obs.replies["logprobs"]
    require_answer(r, ctx.driver, "a request with logprobs")
    fix = logprobs_fix(ctx.driver)
    if not r.logprobs:
        sent = ", ".join(f"{k}: {json.dumps(v)}" for k, v in ctx.driver.wire.logprobs(TOP).items())
        fail(f"{sent} were sent and the reply has no logprobs "
             f"({'an empty list' if r.logprobs == [] else 'none at all'})", fix)
    narrow = [t for t in r.logprobs if t.top != TOP or t.logprob is None]
    if narrow:
        t = narrow[0]
        said = (f"top_logprobs: {TOP} was sent and token {t.token!r} came with {t.top} "
                f"alternatives (logprob {t.logprob})")
        if obs.drafting and t.top == 0:
            bare = sum(1 for n in narrow if n.top == 0)
            fail(f"{said}, {bare} of {len(r.logprobs)} tokens so: the server drafts "
                 f"({ctx.driver.metrics.speculative_source} true), and "
                 f"{drafted_logprobs(ctx.driver)}", drafted_logprobs_fix(ctx.driver))
        fail(said, fix)
    spelled = "".join(t.token for t in r.logprobs)
    if r.content.strip() and r.content.strip() not in spelled:
        fail(f"the logprobs' tokens spell {one_line(spelled, 80)!r}, not the content "
             f"{one_line(r.content, 80)!r}", fix)
    if r.tokens is not None and len(r.logprobs) > r.tokens:
        _undercounted(r, ctx.driver)
        fail(f"{len(r.logprobs)} logprobs for {r.tokens} generated tokens", fix)


def _undercounted(r: Reply, driver: Facts) -> None:
    """More logprobs than usage counts, on an answer that thought: the logprobs are all there
    (one per token, spelling the answer), so what is short is the count. Where it is exactly the
    answer's own tokens, the reasoning is what usage.completion_tokens leaves out: clients that
    budget or bill by it undercount every thinking answer."""
    if not r.reasoning.strip() or r.tokens is None or not r.logprobs:
        return
    answer, spelled = 0, ""
    for t in reversed(r.logprobs):  # the answer's tokens: the last ones, spelling the content
        if r.content.strip() and r.content.strip() in spelled:
            break
        answer, spelled = answer + 1, t.token + spelled
    left_out = len(r.logprobs) - r.tokens
    why = (f"exactly the answer's {answer}: the reasoning's {left_out} tokens are left out of it"
           if r.tokens == answer else
           f"{left_out} fewer than were generated, on an answer with reasoning (the reasoning "
           f"is likely left out of it)")
    fail(f"usage.completion_tokens counts {r.tokens} tokens and {len(r.logprobs)} logprobs came "
         f"back, one per generated token, spelling the reasoning and the answer: the count is "
         f"{why}; the logprobs themselves are whole", usage_fix(driver))


def judge_stream_usage(obs: Sent, ctx: Context[Options]) -> None:
    """stream_options.include_usage: usage once, in the last chunk, equal to the same request
    unstreamed; without it, no usage."""
    plain, asked, unasked = obs.reference, obs.replies["asked"], obs.replies["unasked"]
    for r, doing in ((plain, "the request unstreamed"), (asked, "the stream with usage"),
                     (unasked, "the stream without usage")):
        require_answer(r, ctx.driver, doing)
    fix = ("update the engine; a proxy in front must pass stream_options through, and add "
           "usage only where it was asked")
    if not asked.usage_events:
        fail("stream_options.include_usage was sent and no chunk carried usage: clients that "
             "bill or budget by it see nothing", fix)
    if len(asked.usage_events) > 1 or asked.usage_events[-1] != asked.events - 1:
        fail(f"stream_options.include_usage: usage came in chunk(s) {asked.usage_events[:5]} "
             f"of {asked.events}, not once in the last", fix)
    if (asked.tokens, asked.prompt_tokens) != (plain.tokens, plain.prompt_tokens):
        _count_differs(plain, asked, ctx.driver)
        fail(f"the streamed usage ({asked.tokens} completion, {asked.prompt_tokens} prompt "
             f"tokens) is not the unstreamed one ({plain.tokens}, {plain.prompt_tokens}) for the "
             f"same request", fix)
    if unasked.usage_events:
        fail(f"a stream without stream_options.include_usage carried usage in "
             f"{len(unasked.usage_events)} chunk(s): strict clients do not expect it", fix)


def _count_differs(plain: Reply, streamed: Reply, driver: Facts) -> None:
    """The same prompt counted alike and the completions not, on an answer that thought: one
    of the two counts is what leaves the reasoning out (a server or gateway that counts only the
    answer in one path), not the stream's passing of stream_options."""
    thought = plain.reasoning.strip() or streamed.reasoning.strip()
    if (not thought or plain.prompt_tokens != streamed.prompt_tokens
            or plain.tokens is None or streamed.tokens is None):
        return
    low, high = sorted([("streamed", streamed.tokens), ("unstreamed", plain.tokens)],
                       key=lambda named: named[1])
    fail(f"usage.completion_tokens is {high[1]} {high[0]} and {low[1]} {low[0]} for the same "
         f"request, whose prompt both count as {plain.prompt_tokens}, on an answer with "
         f"reasoning: the {low[0]} count leaves {high[1] - low[1]} tokens out, likely the "
         f"reasoning's", usage_fix(driver))


def judge_context_limit(obs: Sent, ctx: Context[Options]) -> None:
    """A prompt over the served context answers a 4xx that names the limit: not a 200 with
    nothing, not a silent truncation."""
    r, context = obs.replies["long"], obs.context
    sent = f"a prompt of at least {obs.sent_words} tokens over a {context}-token context"
    if r.status is None:
        fail(f"{sent}: {r.problem}")
    if r.ok:
        if r.prompt_tokens is not None and r.prompt_tokens < obs.sent_words:
            fail(f"{sent} answered 200 with usage.prompt_tokens {r.prompt_tokens}: the prompt "
                 f"was silently truncated, and the client never knows", CONTEXT_FIX)
        fail(f"{sent} answered 200 ({one_line(r.content, 60)!r}, finish_reason {r.finish!r}) "
             f"instead of refusing it", CONTEXT_FIX)
    said = r.problem or ""
    if not 400 <= r.status < 500:
        fail(f"{sent} answered {r.status}: {one_line(said)}; a client cannot tell its own "
             f"mistake from a server fault", CONTEXT_FIX)
    if not any(word in said.lower() for word in ("context", "token", "length", str(context))):
        fail(f"{sent} answered {r.status} without naming the limit: {one_line(said)}",
             CONTEXT_FIX)
    ctx.note(f"refused with {r.status}: {one_line(said, 160)}")


def judge_count_tokens(obs: Sent, ctx: Context[Options]) -> None:
    """/v1/messages/count_tokens counts the prompt as usage.input_tokens does (within a tenth),
    where the route exists."""
    r = obs.replies["usage"]
    require_answer(r, ctx.driver, "the message whose prompt is counted")
    if obs.count_error in ("404", "405"):
        ctx.note(f"/v1/messages/count_tokens answered {obs.count_error}: the route does not "
                 f"exist here; clients that size prompts by it fall back to estimates")
        return
    if obs.count_error is not None or obs.counted is None:
        fail(f"/v1/messages/count_tokens failed: {obs.count_error or 'no input_tokens'}",
             "a proxy must forward count_tokens to the engine or count with its tokenizer")
    if r.prompt_tokens is None:
        fail("the message's usage has no input_tokens to compare count_tokens with")
    gap = abs(obs.counted - r.prompt_tokens)
    if gap > max(COUNT_SLACK, COUNT_TOLERANCE * r.prompt_tokens):
        fail(f"count_tokens says {obs.counted} tokens, the same prompt's usage "
             f"{r.prompt_tokens} (input plus cache tokens): clients that trim to fit are misled",
             "a proxy must count with the served model's tokenizer and chat template")
    ctx.note(f"count_tokens {obs.counted}, usage {r.prompt_tokens}")


def judge_prompt_tokens(obs: Sent, ctx: Context[Options]) -> None:
    """usage.prompt_tokens of a chat answer is the server's own count of the prompt its
    messages render to (give or take one token: a BOS the count route may add or not)."""
    r, counted = obs.replies["usage"], obs.prompt
    require_answer(r, ctx.driver, "the chat answer whose prompt is counted")
    if counted is None or counted.tokens is None:
        inconclusive(f"the server's own count of the prompt could not be had: "
                     f"{counted.problem if counted else 'no route counts it'}")
    if r.prompt_tokens is None:
        fail("the chat answer's usage has no prompt_tokens: clients that trim their history to "
             "fit the context, and billing, have nothing to read",
             "a proxy in front must pass the engine's usage through")
    said, want = r.prompt_tokens, counted.tokens
    ctx.note(f"usage.prompt_tokens {said}; the server's count {want} ({counted.by})")
    if abs(said - want) <= PROMPT_SLACK:
        return
    cached = r.cached_tokens or 0
    why = ""
    if cached and abs(said + cached - want) <= PROMPT_SLACK:
        why = (f": it leaves out the {cached} token(s) served from the prefix cache, which "
               f"usage.prompt_tokens includes")
    fail(f"usage.prompt_tokens says {said}, the server's own count of the rendered prompt is "
         f"{want} ({counted.by}){why}; clients that size their history by usage are misled",
         "a proxy or gateway that rewrites usage must pass the engine's prompt_tokens through "
         "(cached tokens included); one that counts itself must count the prompt the served "
         "chat template renders, with the served model's tokenizer")


def judge_system_message(obs: Sent, ctx: Context[Options]) -> None:
    """A system-role message inside `messages` (newer Claude Code sends one) is accepted and
    answered."""
    r = obs.replies["system"]
    if not r.ok and r.status is not None and 400 <= r.status < 500:
        fail(f"a system message inside `messages` answered {r.status}: {one_line(r.problem)}; "
             f"Claude Code clients that send one get errors",
             "the proxy must accept system-role messages in `messages` (move them to the "
             "top-level `system`); update it or the engine")
    require_answer(r, ctx.driver, "a message list with a system message")
    require_thinking_ended(r, ctx.driver, "expect.params")
    if not r.content.strip():
        fail(f"a system message inside `messages` answered 200 with empty content (finish "
             f"{r.finish!r})")


def _dropped(key: str, ctx: Context[Options]) -> str:
    return (f"update the engine ({key} must cap the answer, reasoning included); a proxy in "
            f"front must pass {key} through")


def _asked(param: str) -> Callable[[Options, Driver], str | None]:
    """Applies where the API shape has the parameter and fleet.yaml does not turn it off."""
    def applies(opts: Options, driver: Driver) -> str | None:
        if param not in driver.wire.shape_params:
            shape = "Responses" if driver.api == "responses" else driver.wire.api_shape
            return f"{ASKED.get(param, param)} is not part of the {shape} API shape"
        if param == "claude_code":
            return None if opts.claude_code else "expect.params.claude_code is not set"
        return None if getattr(opts, param) else f"expect.params.{param} is false"
    return applies


MAX_TOKENS = Check("test_params_max_tokens", "params", capped, judge_max_tokens,
                   applies=_asked("max_tokens"))
STOP = Check("test_params_stop", "params", stopped, judge_stop, applies=_asked("stop"))
RESPONSE_FORMAT = Check("test_params_response_format", "params", formatted,
                        judge_response_format, applies=_asked("response_format"))
LOGPROBS = Check("test_params_logprobs", "params", with_logprobs, judge_logprobs,
                 applies=_asked("logprobs"))
STREAM_USAGE = Check("test_params_stream_usage", "params", streamed_usage, judge_stream_usage,
                     applies=_asked("stream_usage"))
CONTEXT_LIMIT = Check("test_params_context_limit", "params", over_context, judge_context_limit,
                      applies=_asked("context_limit"))
COUNT_TOKENS = Check("test_params_count_tokens", "params", counted, judge_count_tokens,
                     applies=_asked("count_tokens"))


def _counted(opts: Options, driver: Driver) -> str | None:
    """Asked on the chat route where the engine counts a conversation or renders it."""
    if not opts.prompt_tokens:
        return "expect.params.prompt_tokens is false"
    if driver.api != "chat":
        return "usage.prompt_tokens is compared on the chat route (the count renders chat messages)"
    if driver.counting.chat_count_route is None and driver.counting.render_route is None:
        return f"a {driver.label} neither counts a conversation nor renders one on request"
    return None


PROMPT_TOKENS = Check("test_params_prompt_tokens", "params", prompt_counted, judge_prompt_tokens,
                      applies=_counted)
SYSTEM_MESSAGE = Check("test_params_system_message", "params", system_in_messages,
                       judge_system_message, applies=_asked("claude_code"))


# -- advice: each parameter by engine and by route (the route's wire has the last word) ---------
CONTEXT_FIX = ("the engine must refuse a prompt longer than its context (a 400 that names the "
               "limit), not truncate it or answer empty: update it, or turn off prompt "
               "truncation in the proxy or server")


def stop_fix(driver: Facts) -> Text:
    return advise(
        driver, "update the engine (stop strings are applied to the answer, and cut from it); a "
                "proxy in front must pass `stop` through",
        {VllmDriver: "update vLLM: stop strings must apply to the answer, not the reasoning, "
                     "with a --reasoning-parser; a proxy in front must pass `stop` through"},
        api={"messages": "the server must take stop_sequences and report the match as "
                         "stop_reason \"stop_sequence\" with stop_sequence set (update it, or "
                         "the engine behind a proxy)",
             "responses": "the Responses API has no stop strings: a client that needs them "
                          "talks chat completions"})


def budget_cut_fix(driver: Facts) -> Text:
    return advise(
        driver, "update the engine, or the proxy in front that rewrites finish_reason: an answer "
                "cut by the budget must end with finish_reason \"length\" (stop_reason "
                "\"max_tokens\")",
        api={"responses": "update the engine, or the proxy in front that rewrites the status: "
                          "an answer cut by the budget must end with status \"incomplete\" and "
                          "incomplete_details.reason \"max_output_tokens\""})


def structured_output_fix(driver: Facts) -> Text:
    return advise(
        driver, "update the engine: it accepts response_format without enforcing it; a proxy "
                "in front must pass the field through",
        {LlamaCppDriver: lambda d: Phrase(
            "update llama.cpp (json_schema is turned into a grammar; a schema it cannot convert "
            "must be refused, not ignored)", Alt(" and serve with ", d.flags["jinja"]), "; a proxy "
            "in front must pass response_format through"),
         VllmDriver: "pass a structured-output backend (--structured-outputs-config "
                     "'{\"backend\": \"xgrammar\"}', or guidance); with a --reasoning-parser, a "
                     "vLLM whose schema holds for the content after the reasoning; a proxy in "
                     "front must pass response_format through"},
        api={"responses": "the server accepts text.format without enforcing it: update the "
                          "engine (its /v1/responses must read text.format as chat reads "
                          "response_format); a proxy in front must pass it through"})


def logprobs_fix(driver: Facts) -> Text:
    return advise(
        driver, "update the engine; a proxy in front must pass logprobs and top_logprobs through",
        api={"responses": "update the engine: its /v1/responses must take top_logprobs with "
                          f"include [\"{LOGPROBS_INCLUDE}\"] and send the logprobs with the "
                          "output_text; a proxy in front must pass both through"})


def usage_fix(driver: Facts) -> Text:
    """Where usage counts fewer tokens than were generated: the server's usage accounting."""
    return advise(driver, "the server's usage accounting: usage.completion_tokens must count "
                          "every generated token, the reasoning's included (as OpenAI's does, "
                          "itemising them in completion_tokens_details.reasoning_tokens): "
                          "update the engine, or the proxy in front that rewrites usage")


def drafted_logprobs(driver: Facts) -> Text:
    """What drafting does to logprobs."""
    # llama.cpp tools/server: a token the draft proposed and the model accepted is sent with
    # its logprob as 0.0 and no top_logprobs (seen on xllamacpp with any draft model)
    return advise(driver, "drafted tokens may come without their top_logprobs alternatives",
                  {LlamaCppDriver: "llama.cpp sends the tokens the draft proposed with logprob 0.0 and "
                                   "no alternatives"})


def drafted_logprobs_fix(driver: Facts) -> Text:
    """What a client that needs logprobs can do where the server drafts."""
    # The draft settings named, never valued: a valued one would read as asking for it, and be
    # dropped as already in effect on the very server that drafts.
    return advise(
        driver, "serve clients that need top_logprobs from an endpoint without speculative "
                "decoding; where none sends top_logprobs, set expect.params.logprobs: false",
        {LlamaCppDriver: lambda d: Phrase(
            "serve clients that need top_logprobs from a server that does not draft (without ",
            d.flags["draft_model"], " or ", d.flags["spec_type"], "); where no client sends "
            "top_logprobs, set expect.params.logprobs: false")})
