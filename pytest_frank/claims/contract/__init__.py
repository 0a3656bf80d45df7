"""The contract claim: every reply any probe received keeps its route's published contract and
its own request, and a streamed reply reassembles into its plain twin (judged after the other
probes, over what pytest_frank.claims.reply_contract kept of each generation: no request of its
own).

Below it, the request side of the contract: what a server must refuse, accept and honour in a
request, beside what params and tools judge of the answer. A malformed request (a tool_choice no
tool can honour, a json_schema format that is not one) gets a 4xx naming the field, never a 200
that hides the client's mistake nor a 5xx that reads as the server's fault; the valid variants
beside them are accepted and honoured; the sampling fields the API shape documents are accepted,
and n: 2 gives two choices; tool_choice "none" gives an answer with no call in it.

Those checks belong to the params claim (validation, response format variants, sampling) and the
tools claim (tool_choice none); each malformed request is a case the driver may know its engine
accepts (`lenient_requests`), so the failure names the engine and not a proxy."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from urllib.parse import urlsplit

from pytest_frank.claims import Claim, Options, params, tools
from pytest_frank.claims import reply_contract as rc
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import (
    cut_while_thinking,
    one_line,
    require_answer,
    require_no_think_tags,
    require_thinking_ended,
)
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts, Wire
from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import Inconclusive, Text, fail
from pytest_frank.runtime import probes
from pytest_frank.runtime.chat import Reply, Request, combine, send, think_through
from pytest_frank.runtime.target import Key, after_all
from pytest_frank.transport.http import Exchange
from pytest_frank.runtime.target import Target

SHORT = 16  # a request judged by its status alone: a short answer where one is given
PROMPT = "Say hello in one short sentence."
JSON_ASK = "Describe Paris as a JSON object with one field, city."
CITY = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
SAMPLED = {"temperature": 0.7, "top_p": 0.9, "presence_penalty": 0.5, "frequency_penalty": 0.5}
CHOICES = 2  # n asked for


@dataclass(frozen=True)
class Case:
    """One request: its key (the driver's `lenient_requests` name), how a failure names it, and
    the fields it sends."""
    key: str
    sent: str
    fields: dict


def _format(**schema: object) -> dict:
    return {"response_format": {"type": "json_schema", "json_schema": schema}}


# tool_choice: malformed (a 4xx), and the values that need no tools (accepted)
CHOICE_MALFORMED = (
    Case("required_without_tools", 'tool_choice "required" without tools',
         {"tool_choice": "required"}),
    Case("required_empty_tools", 'tool_choice "required" with tools []',
         {"tools": [], "tool_choice": "required"}),
    Case("unknown_choice", 'tool_choice "sometimes" (no such value)',
         {"tools": tools.TOOLS, "tool_choice": "sometimes"}),
)
CHOICE_ACCEPTED = (
    Case("none_without_tools", 'tool_choice "none" without tools', {"tool_choice": "none"}),
    Case("auto_without_tools", 'tool_choice "auto" without tools', {"tool_choice": "auto"}),
)
# response_format: malformed json_schema formats (a 4xx), one either way (OpenAI's reference
# makes `schema` optional: a 4xx or an answer both keep the contract, a 5xx does not), and the
# valid variants beside the strict schema test_params_response_format sends
FORMAT_MALFORMED = (
    Case("format_no_name", "a json_schema format without a name",
         _format(strict=True, schema=CITY)),
    Case("format_strict_text", 'a json_schema format with strict "yes"',
         _format(name="city", strict="yes", schema=CITY)),
    Case("format_schema_text", 'a json_schema format whose schema is "x"',
         _format(name="city", schema="x")),
)
FORMAT_EITHER = (Case("format_no_schema", "a json_schema format without a schema",
                      _format(name="city")),)
FORMAT_ACCEPTED = (
    Case("format_text", "response_format text", {"response_format": {"type": "text"}}),
    Case("format_json_object", "response_format json_object",
         {"response_format": {"type": "json_object"}}),
    Case("format_loose_schema", "response_format json_schema with strict false",
         _format(name="city", strict=False, schema=CITY)),
)


@dataclass(kw_only=True)
class Asked(Observation):
    """Replies by case key (a sampling field's name, `together`, `n`)."""
    replies: dict[str, Reply] = field(default_factory=dict)
    sampled: tuple[str, ...] = ()  # sampling: the fields sent, as the driver documents them
    choices: int | None = None  # n: the choices the answer held


# -- probes ---------------------------------------------------------------------------------
def _ask(target: Target, cases: Sequence[Case], prompt: str = PROMPT) -> dict[str, Reply]:
    return {c.key: send(target, Request(prompt, SHORT, extra=dict(c.fields))) for c in cases}


def malformed_choices(target: Target) -> Asked:
    return Asked(replies=_ask(target, CHOICE_MALFORMED + CHOICE_ACCEPTED))


def format_variants(target: Target) -> Asked:
    obs = Asked(replies=_ask(target, FORMAT_MALFORMED + FORMAT_EITHER + FORMAT_ACCEPTED[:1],
                             JSON_ASK))
    for case in FORMAT_ACCEPTED[1:]:  # judged by the JSON they hold: the answer whole
        obs.replies[case.key] = think_through(
            target, Request(JSON_ASK, params.ANSWER, extra=dict(case.fields)))
    return obs


def sampled(target: Target) -> Asked:
    """The documented sampling fields together, each alone where together they are refused,
    and n: 2 where the route takes n."""
    fields = tuple(f for f in target.driver.wire.sampling_fields if f != "n")
    together = send(target, Request(PROMPT, SHORT, sampling=False,
                                    extra=_sampling(target.driver.wire, fields)))
    obs = Asked(sampled=fields, replies={"together": together})
    if together.status is not None and 400 <= together.status < 500:
        for f in fields:
            obs.replies[f] = send(target, Request(PROMPT, SHORT, sampling=False,
                                                  extra=_sampling(target.driver.wire, (f,))))
    if "n" in target.driver.wire.sampling_fields:
        r = obs.replies["n"] = send(target, Request(PROMPT, SHORT, sampling=False,
                                                    extra={"n": CHOICES}))
        body = r.exchange.json() if r.ok and r.exchange is not None else None
        found = body.get("choices") if isinstance(body, dict) else None
        obs.choices = len(found) if isinstance(found, list) else None
    return obs


def _sampling(wire: Wire, fields: tuple[str, ...]) -> dict:
    """The fields as the route's client sends them: temperature and top_p where the route's
    wire puts the fleet's sampling (the Anthropic client takes them in the body), the rest as
    they are."""
    own = {f: SAMPLED[f] for f in fields if f in ("temperature", "top_p")}
    return combine(wire.sampling(own), {f: SAMPLED[f] for f in fields if f not in own})


def tool_choice_none(target: Target) -> Asked:
    opts = tools.Options.on(target.endpoint)
    return Asked(replies={"none": think_through(target, Request(
        tools.PROMPTS["required"], opts.max_tokens, tools=tools.TOOLS, tool_choice="none"))})


# -- judges ---------------------------------------------------------------------------------
def judge_validation(obs: Asked, ctx: Context[params.Options]) -> None:
    """Malformed tool_choice requests (required without tools or with tools [], an unknown
    value) answer a 4xx, never 200 nor 5xx; tool_choice none and auto without tools are
    answered."""
    _judge_requests(obs, ctx, CHOICE_MALFORMED, CHOICE_ACCEPTED, (), "validation")


def judge_format_variants(obs: Asked, ctx: Context[params.Options]) -> None:
    """Malformed json_schema formats (no name, strict "yes", schema "x") answer a 4xx, never 200
    nor 5xx; one without a schema a 4xx or an answer; text, json_object and json_schema with
    strict false are accepted, the JSON ones holding JSON."""
    _judge_requests(obs, ctx, FORMAT_MALFORMED, FORMAT_ACCEPTED[:1], FORMAT_EITHER,
                    "response_format_variants")
    text = obs.replies["format_text"]
    if not cut_while_thinking(text, ctx, "response_format text") and not text.content.strip():
        fail(f"response_format text answered 200 with empty content (finish_reason "
             f"{text.finish!r})")
    for case in FORMAT_ACCEPTED[1:]:
        _judge_json(obs.replies[case.key], case, ctx)


def _judge_requests(obs: Asked, ctx: Context[params.Options], malformed: Sequence[Case],
                    accepted: Sequence[Case], either: Sequence[Case], option: str) -> None:
    """The worst first: a 5xx, no answer, a valid request refused, a malformed one accepted
    (`either`: a 4xx or an answer)."""
    for case in (*malformed, *accepted, *either):
        r = obs.replies[case.key]
        if r.status is not None and r.status >= 500:
            fail(f"{case.sent} {r.problem_line}: a malformed or unusual request must be refused "
                 f"with a 4xx that names the field; a 5xx reads as the server's fault, and "
                 f"clients retry it", server_error_fix(ctx.driver))
        if r.status is None:
            fail(f"{case.sent}: {r.problem}", r.fix)
    for case in (*malformed, *either):  # what each said, before any failure below
        r = obs.replies[case.key]
        if not r.ok or case in either:
            ctx.note(f"{case.sent}: {'answered' if r.ok else r.problem_line}")
    for case in accepted:
        r = obs.replies[case.key]
        if not r.ok:
            known = case.key in ctx.driver.refused_requests
            engine = (f": the {ctx.driver.label} refuses it itself (the engine's own behaviour, "
                      f"not a proxy's)" if known else "")
            fail(f"{case.sent} {r.problem_line}: a valid request clients send is refused"
                 f"{engine}", refused_fix(ctx.driver, option) if known else REFUSED_FIX)
    let_through = [c for c in malformed if obs.replies[c.key].ok]
    if not let_through:
        return
    shown = "; ".join(f"{c.sent} answered 200 ({_answered(obs.replies[c.key])})"
                      for c in let_through)
    known = all(c.key in ctx.driver.lenient_requests for c in let_through)
    engine = (f": the {ctx.driver.label} answers {'these' if len(let_through) > 1 else 'it'} "
              f"with 200 itself (the engine's own behaviour, not a proxy's)" if known else "")
    fail(f"{shown}: a malformed request is accepted, so a client's mistake goes unnoticed"
         f"{engine}", lenient_fix(ctx.driver if known else None, option))


def _answered(r: Reply) -> str:
    said = one_line(r.content, 40)
    return repr(said) if said else f"finish_reason {r.finish!r}"


def _judge_json(r: Reply, case: Case, ctx: Context[params.Options]) -> None:
    import jsonschema

    require_answer(r, ctx.driver, case.sent)
    require_thinking_ended(r, ctx.driver, "expect.params")
    require_no_think_tags(r, ctx.driver)
    try:
        found = json.loads(r.content)
    except ValueError:
        fail(f"{case.sent} was sent and the content is not JSON ({one_line(r.content, 80)!r}): "
             f"the format is not enforced", params.structured_output_fix(ctx.driver))
    if not isinstance(found, dict):
        fail(f"{case.sent} was sent and the content is a JSON {type(found).__name__}, not an "
             f"object ({one_line(r.content, 80)!r})", params.structured_output_fix(ctx.driver))
    schema = case.fields["response_format"].get("json_schema", {}).get("schema")
    if schema is not None and not jsonschema.Draft202012Validator(schema).is_valid(found):
        ctx.note(f"{case.sent}: {one_line(r.content, 80)!r} does not follow the schema, which "
                 f"strict false makes a hint")


def judge_sampling(obs: Asked, ctx: Context[params.Options]) -> None:
    """temperature, top_p, presence_penalty and frequency_penalty, where the API shape has them,
    are accepted (together, else each alone); n: 2, where the route takes n, gives two
    choices."""
    together, sent = obs.replies["together"], _fields(obs.sampled)
    # only a 4xx was asked again field by field: an unreadable 2xx fails as it is, not as a
    # refusal of fields nobody asked alone
    if together.status is None or not 400 <= together.status < 500:
        require_answer(together, ctx.driver, sent)
    if not together.ok:
        refused = [f for f in obs.sampled if not obs.replies[f].ok]
        if refused:
            r = obs.replies[refused[0]]
            fail(f"{_fields(tuple(refused))} {r.problem_line}: the API documents "
                 f"{'it' if len(refused) == 1 else 'them'} and clients send "
                 f"{'it' if len(refused) == 1 else 'them'}", sampling_fix(ctx.driver))
        ctx.note(f"{sent} together {together.problem_line}; each alone is accepted")
    else:
        ctx.note(f"{sent}: accepted")
    if "n" not in ctx.driver.wire.sampling_fields:
        ctx.note(f"n is not asked: a {ctx.driver.label} on this route takes one choice a request")
        return
    r = obs.replies["n"]
    if not r.ok:
        fail(f"n: {CHOICES} {r.problem_line}: clients that ask several choices at once get an "
             f"error", n_fix(ctx.driver))
    if obs.choices != CHOICES:
        fail(f"n: {CHOICES} was sent and {obs.choices or 'no'} choice(s) came back: clients "
             f"that sample several answers at once get fewer", n_fix(ctx.driver))
    ctx.note(f"n: {CHOICES}: {CHOICES} choices")


def _fields(names: tuple[str, ...]) -> str:
    return ", ".join(f"{f}: {SAMPLED[f]}" for f in names)


def judge_tool_choice_none(obs: Asked, ctx: Context[tools.Options]) -> None:
    """tool_choice "none" with tools offered: the answer is text, with no call, no
    finish_reason tool_calls and no call markup in the content."""
    r, doing = obs.replies["none"], 'tool_choice "none"'
    require_answer(r, ctx.driver, doing)
    require_thinking_ended(r, ctx.driver, "expect.tools.max_tokens")
    if r.calls or r.tool_finish:
        shown = ", ".join(f"{c.name}({one_line(str(c.arguments), 60)})" for c in r.calls)
        fail(f"{doing} was sent with tools offered and the answer called "
             f"{shown or 'a tool'} (finish_reason {r.finish!r}): the server ignores none, and "
             f"a client that forbade calls receives one", none_ignored_fix(ctx.driver))
    if tools.MARKUP.search(r.content):
        fail(f"{doing} was sent with tools offered and the content holds a tool call written "
             f"as text ({one_line(r.content, 100)!r}): no call was made, but the tools still "
             f"reached the model's prompt and a client shows the markup as the answer",
             none_markup_fix(ctx.driver))
    thought = r.thinking_tokens if r.reasoning.strip() else 0
    if not r.content.strip() and (r.tokens or 0) > thought + 1:
        # More than an end token counted beyond the thinking, nothing shown: the tools stayed
        # in the prompt, the model wrote a call, and the tool parser took it out of the answer
        # and, under none, sent nothing in its place (vLLM 0.32.0's qwen3_xml parser, and its
        # harmony parser after gpt-oss's analysis, seen here).
        of_them = f", {thought} of them thinking" if thought else ""
        fail(f"{doing} answered empty content (finish_reason {r.finish!r}) though the model "
             f"wrote {r.tokens} tokens{of_them}: with the tools still in the prompt it wrote a "
             f"call, which the server's tool-call parser took out of the answer and did not send, "
             f"as none allows no call; a client gets an empty answer",
             none_markup_fix(ctx.driver))
    if not r.content.strip():
        fail(f"{doing} answered empty content (finish_reason {r.finish!r})")


def _asked(param: str, default: bool) -> Callable[[params.Options, Driver], str | None]:
    """Applies where the API shape has the request field and fleet.yaml asks it."""
    def applies(opts: params.Options, driver: Driver) -> str | None:
        if param not in driver.wire.shape_params:
            shape = "Responses" if driver.api == "responses" else driver.wire.api_shape
            return f"{WORDS[param]} {'are' if param != 'validation' else 'is'} not part of " \
                   f"the {shape} API shape as asked here"
        if getattr(opts, param):
            return None
        return f"expect.params.{param} is {'false' if default else 'not set'}"
    return applies


WORDS = {"validation": "tool_choice validation", "response_format_variants":
         "response_format variants", "sampling": "sampling fields"}


# -- advice ---------------------------------------------------------------------------------
UNCHECKED = {"validation": "tool_choice against the tools sent",
             "response_format_variants": "a json_schema format's fields"}


def lenient_fix(driver: Facts | None, option: str) -> Text:
    """The engine's words only where its driver knows it answers so (else the generic ones)."""
    return advise(
        driver, f"the server, or a proxy in front, must refuse a malformed request with a 400 "
                f"that names the field: update it, or put a gateway that validates requests in "
                f"front; where no client sends such requests, set expect.params.{option}: false",
        {LlamaCppDriver: f"llama.cpp does not check {UNCHECKED[option]}: put a gateway that validates "
                         f"requests in front of it, or, where no client sends such requests, set "
                         f"expect.params.{option}: false"})


def server_error_fix(driver: Facts) -> Text:
    return advise(driver, "update the engine: it fails on a request it must refuse; a proxy in "
                          "front must pass the engine's 4xx on, not turn it into a 5xx")


REFUSED_FIX = ("update the engine, or the proxy in front that refuses it: the request is valid "
               "and clients send it (tool_choice none and auto need no tools; clients that "
               "always send tool_choice send them without)")


def refused_fix(driver: Facts, option: str) -> Text:
    """Where the engine itself refuses a valid request (its driver's `refused_requests`)."""
    return advise(
        driver, REFUSED_FIX,
        {VllmDriver: f"vLLM refuses every tool_choice but none without tools: have clients send "
                     f"tool_choice only with tools (LiteLLM issue 6228 did), or a gateway in front drop "
                     f"it; where no client sends it, set expect.params.{option}: false"})


def sampling_fix(driver: Facts) -> Text:
    return advise(driver, "update the engine; a proxy in front must pass the sampling fields "
                          "through, not refuse them")


def n_fix(driver: Facts) -> Text:
    return advise(driver, "update the engine, or the proxy in front that keeps the first choice "
                          "only; where no client sends n, set expect.params.sampling: false")


def none_ignored_fix(driver: Facts) -> Text:
    return advise(driver, "update the engine, or the proxy in front that drops or rewrites "
                          "tool_choice: none must forbid calls")


def none_markup_fix(driver: Facts) -> Text:
    """Where the tools reach the prompt under none."""
    return advise(
        driver, "leave the tools out of the prompt when tool_choice is none (vLLM "
                "--exclude-tools-when-tool-choice-none), or have clients send no tools with "
                "none; else set expect.tools.none: false",
        {LlamaCppDriver: "llama.cpp renders the tools into the prompt under tool_choice none: have "
                         "clients (or a gateway in front) send no tools with none, or set "
                         "expect.tools.none: false",
         VllmDriver: lambda d: f"{d.start}--exclude-tools-when-tool-choice-none (vLLM keeps the tools "
                               "in the prompt under none by default)"})


# -- every reply against its contract (the contract claim) ---------------------------------------
CLAIM = Claim("contract",
              "every reply keeps its API's published contract and its own request, and a "
              "stream adds up to its plain twin", order=190, always=True,
              tests=("test_contract_replies", "test_contract_stream_twins"))
ROUTE_NAMES = {"chat": "OpenAI chat completions", "messages": "Anthropic Messages",
               "responses": "OpenAI Responses"}
SHOWN = 3  # breaches named in one failure


def keep(api: str, ex: Exchange, key: Key, driver: Driver) -> rc.Digest | None:
    """What the contract judges of one generation, kept while its body is whole; the fields
    the engine itself is known to leave out (its driver's contract_gaps) set apart."""
    kind = next((v for k, v in ex.headers.items() if k.lower() == "content-type"), "")
    probe = key[0].rsplit(".", 1)[-1] + (f"[{key[1]}]" if key[1] else "")
    if len(ex.body) > rc.MAX_JUDGED:  # read whole, a hostile answer would cost its size again
        return rc.Digest(api, urlsplit(ex.url).path, False, probe, key=key,
                         unjudged=f"its body of {len(ex.body):,} characters is past the "
                                  f"{rc.MAX_JUDGED:,} the contract reads")
    try:
        found = rc.digest(api, urlsplit(ex.url).path, ex.request_json, ex.status, ex.body, kind,
                          probe)
    except Exception as exc:  # the reply is too odd to read: said, not raised in the probe
        found = rc.Digest(api, ex.url, False, probe, unjudged=f"{type(exc).__name__}: {exc}")
    if found is None:
        return None
    found.key = key
    found.breaches += _engine_count(ex.body, found.streamed, driver)
    gaps = driver.contract_gaps.get(api, ())
    for breach in list(found.breaches):
        if breach.missing and any(fnmatch(breach.missing, g) for g in gaps):
            found.breaches.remove(breach)
            found.gaps.add(breach.missing)
    del found.breaches[rc.KEPT:]
    found.exchange = ex if found.breaches else None  # its evidence, and the reproduce line
    return found


def _engine_count(body: str, streamed: bool, driver: Driver) -> list[rc.Breach]:
    """The reply's usage against the engine's own count in the same reply, where its driver
    knows one (llama.cpp's timings.predicted_n): two counts of one generation that differ were
    changed after the engine made them. No route is read for it (no payloads)."""
    try:
        found, _ = driver.reply_disagrees(body, {})
    except (ValueError, TypeError, AttributeError):
        return []
    where = "the stream" if streamed else "the reply"
    return [rc.Breach("agrees", "usage", where, f"{reply}, where {engine}: the count was changed "
                                                f"between the engine and the client")
            for engine, reply in found]


@dataclass(kw_only=True)
class Replies(Observation):
    digests: list[rc.Digest] = field(default_factory=list)
    tests: dict[Key, str] = field(default_factory=dict)  # a probe -> the test that judges it


@after_all(keep)
def replies(target: Target) -> Replies:
    """Every generation the endpoint's other probes received, as `keep` digested it; sends
    nothing."""
    with target.lock():
        digests = list(target.digests)
    if not digests:
        return Replies(inconclusive="no generation of the battery's to judge: no other check "
                                    "that generates was asked (the contract sends nothing of "
                                    "its own)")
    rc.prompt_disagreements(digests)
    rc.crossed(digests)
    named = {b.named for d in digests for b in d.breaches if b.named is not None}
    if named:  # a model named otherwise than asked: no breach where the server serves it
        listed = target.need(probes.served)
        ids = set(listed.ids) if isinstance(listed, probes.Served) else set()
        for d in digests:
            d.breaches = [b for b in d.breaches if b.named is None or b.named not in ids]
    broken = [d.exchange for d in digests if d.breaches and d.exchange is not None]
    return Replies(digests=digests, tests=dict(target.judged), exchanges=broken[:SHOWN])


def _named(d: rc.Digest, obs: Replies) -> str:
    """The reply as a reader finds it: the test whose probe received it, streamed or not."""
    test = obs.tests.get(d.key, d.probe) if d.key is not None else d.probe
    return f"{test}'s {'streamed' if d.streamed else 'plain'} reply on {d.route}"


def judge_replies(obs: Replies, ctx: Context[Options]) -> None:
    """Every reply and stream event the battery received keeps its route's published contract
    (the SDKs' own types, strictly), honours what its request set (the budget, tool_choice,
    response_format, stop, usage asked) and agrees with itself (finish with content, usage
    with what came, one model and one id)."""
    found = [(d, b) for d in obs.digests for b in d.breaches]
    unjudged = [d for d in obs.digests if d.unjudged]
    for d in unjudged[:SHOWN]:
        ctx.note(f"{_named(d, obs)} could not be read to judge: {d.unjudged}")
    gaps = sorted({g for d in obs.digests for g in d.gaps})
    if gaps:
        ctx.note(f"the {ctx.driver.label} leaves out {len(gaps)} field(s) its API's contract "
                 f"requires, known of the engine and not failed: {', '.join(gaps[:12])}"
                 f"{' ...' if len(gaps) > 12 else ''}")
    if found:
        kinds = sorted({b.kind for _, b in found}, key=KINDS.index)
        shown = "; ".join(f"{_named(d, obs)}, {b.where}: {b.said}" for d, b in found[:SHOWN])
        more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
        replies_ = len({id(d) for d, _ in found})
        fail(f"{replies_} of {len(obs.digests)} replies break their contract: {shown}{more}. "
             f"Who breaks on it: {BREAKS[kinds[0]](found[0][0].api)}",
             contract_fix(kinds[0], ctx.driver, where_at_fault(obs, [d for d, _ in found])))
    routes = sorted({d.route for d in obs.digests})
    streams = sum(d.streamed for d in obs.digests)
    ctx.note(f"{len(obs.digests)} replies on {', '.join(routes)} ({streams} streamed, "
             f"{sum(d.frames for d in obs.digests)} events) keep the contract: the SDK types, "
             f"their requests, and agree with themselves")


def twins(obs: Replies) -> list[tuple[rc.Digest, rc.Digest]]:
    """Each streamed reply with a plain one to the same greedy request (the probes that send
    both already), the plain one sent nearest before it."""
    out, plain = [], {}
    for d in obs.digests:
        if d.twin_key is not None and not d.streamed and rc.PLAIN in d.views:
            plain[(d.api, d.twin_key)] = d
    for d in obs.digests:
        twin = plain.get((d.api, d.twin_key)) if d.streamed and d.twin_key else None
        if twin is not None:
            out.append((d, twin))
    return out


def judge_stream_twins(obs: Replies, ctx: Context[Options]) -> None:
    """Each streamed reply, reassembled as client families do (every delta appended; the
    OpenAI SDK's and the Anthropic SDK's own accumulators), equals its plain twin to the same
    greedy request field by field: reasoning, content, calls, finish, usage."""
    pairs = twins(obs)
    if not pairs:
        raise Inconclusive("inconclusive: no request of the battery's was sent both streamed "
                           "and plain at temperature 0 (the contract sends none of its own)")
    for streamed, plain in pairs:
        diffs = rc.differences(streamed.views, plain.views[rc.PLAIN])
        if not diffs:
            continue
        first = diffs[0]
        chunk = f" (from frame {first.chunk} of the stream)" if first.chunk is not None else ""
        hows = ", ".join(rc.REASSEMBLY[d.how] for d in diffs)
        fail(f"{_named(streamed, obs)} differs from its plain twin to the same greedy request "
             f"in {first.field}{chunk}: {first.said}; read by {hows}, a client gets another "
             f"answer streamed than whole", twin_fix(first, ctx.driver, streamed, plain))
    ways = sorted({how for s, _ in pairs for how in s.views})
    ctx.note(f"{len(pairs)} streamed replies equal their plain twins, reassembled "
             f"{len(ways)} ways ({', '.join(rc.REASSEMBLY[w] for w in ways)})")


# The claims whose probes generate (the others read routes, files or the log): an endpoint that
# asks none has no reply to judge, and its contract tests are not collected.
GENERATING = ("chat", "reasoning", "reasoning_effort", "tools", "agent", "vision", "spec_decode",
              "params", "stream", "fingerprint", "perf", "load", "clients")
# Those that already send one greedy request both streamed and plain (the twins compared).
TWINNED = ("reasoning", "tools", "agent", "params")


def _asking(claims: tuple[str, ...]) -> Callable[[Endpoint], bool]:
    return lambda endpoint: any(endpoint.asks(c) for c in claims)


REPLIES = Check("test_contract_replies", "contract", replies, judge_replies,
                asked=lambda opts: False, asked_of=_asking(GENERATING))
STREAM_TWINS = Check("test_contract_stream_twins", "contract", replies, judge_stream_twins,
                     asked=lambda opts: False, asked_of=_asking(TWINNED))

KINDS = ["crossed", "schema", "request", "ids", "agrees", "order", "stream"]


def _validating(api: str) -> str:
    sdk = "Anthropic" if api == "messages" else "OpenAI"
    return (f"clients that validate a reply against the API's schema (the AI SDK behind "
            f"opencode checks each reply and chunk) refuse it; the {sdk} SDKs do not validate, "
            f"so their users meet the field as sent (None, or the wrong type where it is read)")


BREAKS = {
    "schema": _validating,
    "request": lambda api: ("every client: the request it sent was not honoured, and nothing "
                            "(no 4xx) said so"),
    "agrees": lambda api: ("agent clients that loop on the finish reason (opencode, pi, Claude "
                           "Code) and those that count usage: one field says another thing "
                           "than the rest"),
    "stream": lambda api: ("clients that read the stream event by event (the SDKs' stream "
                           "helpers, the AI SDK)"),
    "crossed": lambda api: ("every client: it receives another request's answer as its "
                            "own, and nothing says so"),
    "ids": lambda api: ("agent clients, which answer a call by its id (tool_call_id, "
                        "tool_use_id, call_id) and send it back by its tool's name, and the "
                        "clients that follow a reply or its items by id (the Responses stream's "
                        "item_id, previous_response_id, request logs): an empty one matches "
                        "nothing"),
    "order": lambda api: ("clients that show the output in order and send it back as the next "
                          "turn (Claude Code and the Anthropic SDK's users with thinking on, "
                          "which the API refuses unless the turn starts with its thinking; "
                          "Codex on Responses, which replays the output items as they came)"),
}


WRONG = {
    "schema": "a field of the reply is missing or of another type than the API publishes",
    "request": "the reply does not honour its request (the budget, tool_choice, "
               "response_format, stop); a request the server cannot honour must get a 4xx",
    "ids": "an id or a call's name is empty",
    "agrees": "one field of the reply says another thing than the rest (the finish with the "
              "content, usage with what came or with the engine's own count, the model asked, "
              "the stop sequence)",
    "order": "the output is out of the order the API gives it",
    "stream": "the stream breaks its API's event rules",
}


def where_at_fault(obs: Replies, broken: list[rc.Digest]) -> str:
    """Where the evidence puts the fault: the stream path where only streamed replies break
    the contract (their plain twins, where the battery sent one, keep it), the path of whole
    replies where only plain ones do, either where both do."""
    streamed, ids = {d.streamed for d in broken}, {id(d) for d in broken}
    cut = next((b for d in broken if (b := rc.ended_early(d.breaches)) is not None), None)
    if streamed == {True} and cut is not None:
        return (f"the stream ended before its end event ({cut.said}): a proxy or load balancer "
                f"in front that cuts streams short (an idle or total timeout), or the engine's "
                f"stream writer; raise the timeouts in front, and compare the engine's own "
                f"stream without what is in front")
    if streamed == {True}:
        kept = [d for d, plain in twins(obs) if id(d) in ids and not plain.breaches]
        seen = (f"the same greedy request{'s' if len(kept) > 1 else ''} unstreamed keep"
                f"{'' if len(kept) > 1 else 's'} it, so the stream path is at fault: "
                if kept else "only streamed replies break it: ")
        return seen + ("the engine's stream writer, or a proxy in front that rewrites, "
                       "re-chunks or cuts streams; pass the engine's stream through unchanged, "
                       "compare the engine's own stream without what is in front, and update "
                       "the engine")
    if streamed == {False}:
        kept = [s for s, plain in twins(obs) if id(plain) in ids and not s.breaches]
        seen = ("the same greedy request streamed keeps it, so what writes whole replies is at "
                "fault: " if kept else "only whole (unstreamed) replies break it: ")
        return seen + ("a gateway or proxy in front that rewrites replies, or the engine's "
                       "reply writer; pass replies through unchanged, compare the engine's own "
                       "reply without what is in front, and update the engine")
    return ("replies break it streamed and whole: a gateway or proxy in front that rewrites "
            "replies and streams, or the engine itself; compare the engine's own replies "
            "without what is in front, and update the engine")


CROSSED_FIX = ("answers crossed between requests in flight: a reply came back to a request "
               "it does not belong to (its id is another request's answer's); a gateway, cache "
               "or load balancer in front mixes up the requests it holds, or the engine its "
               "slots: point a run at the engine itself to tell which, and fix what mixes them")


def contract_fix(kind: str, driver: Facts, where: str) -> Text:
    if kind == "crossed":
        return advise(driver, CROSSED_FIX)
    return advise(driver, f"{WRONG[kind]}; {where}")


def twin_fix(diff: rc.Difference, driver: Facts, streamed: rc.Digest | None = None,
             plain: rc.Digest | None = None) -> Text:
    """Which of the two is wrong, where their own contracts tell: the plain reply where it
    breaks its contract and the stream keeps its own (a gateway that rewrites whole replies);
    else the stream path, the usual suspect where the engine's stream writer or a re-chunking
    proxy adds it up to another answer."""
    if any(b.kind == "crossed" for d in (streamed, plain) if d is not None for b in d.breaches):
        return advise(driver, CROSSED_FIX)
    cut = rc.ended_early(streamed.breaches) if streamed is not None else None
    if cut is not None:
        return advise(driver, f"the stream ended before its end event ({cut.said}), so it adds "
                              f"up to less than the plain reply: a proxy or load balancer in "
                              f"front that cuts streams short (an idle or total timeout), or "
                              f"the engine's stream writer; raise the timeouts in front, and "
                              f"compare the engine's own stream without what is in front")
    if plain is not None and streamed is not None and plain.breaches and not streamed.breaches:
        return advise(driver, "the plain reply is the one at fault: it breaks its own contract "
                              f"({plain.breaches[0].said}) where the streamed one keeps it; a "
                              "gateway or proxy in front that rewrites whole replies, or the "
                              "engine's reply writer: pass replies through unchanged, compare "
                              "the engine's own reply without what is in front, and update the "
                              "engine")
    return advise(driver, "the stream path is at fault where the plain reply is right: the "
                          "engine's streaming parser (reasoning or tool calls), or a proxy that "
                          "re-chunks, repeats or accumulates deltas; compare the engine's own "
                          "stream without the proxy, and update the engine")
