"""reasoning_effort: every client level, sent as the value the fleet maps it to, is accepted by the
chat template and takes effect: answered with content, or cut by the budget while thinking (the
answer is not what this claim judges, so a handful of tokens is asked, ACCEPTED_TOKENS; a reply
that shows neither thinking nor answer in them is asked again with the claim's max_tokens).
Templates may raise on levels they do not know (Qwen3.8 accepts only xhigh|medium|low):
llama.cpp answers 500 or 400 naming Jinja, vLLM 400."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from pytest_frank.claims import Claim, in_folder, key_schemas, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.reasoning_effort.effort_map import EffortMapError, read_effort_map
from pytest_frank.claims.replies import cut_while_thinking, one_line, require_answer, require_budget
from pytest_frank.fleet import Endpoint, OptionError
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import fail
from pytest_frank.runtime.chat import Reply, Request, send

PROMPT = "Say hello in one short sentence."
LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")  # client levels, least to most
_SUPPORTED = re.compile(r"supported (?:types|values|levels) (?:are|is)\s*:?\s*([^.\n]+)", re.I)
_TEMPLATE_MSG = re.compile(r"(?:exception|error):\s*", re.I)
# Tokens a level is asked for: enough to see the engine start to answer it (its template took
# the level); what the level does to the thinking is test_reasoning_effort_trend's to judge.
ACCEPTED_TOKENS = 16


@dataclass(frozen=True)
class Options(ClaimOptions):
    map: dict[str, str] = option(factory=dict, about=(
        "Client level -> the value the endpoint receives (the seeds' compat.reasoningEffortMap); "
        "levels are `none minimal low medium high xhigh max`."), **{"$ref": "#/$defs/effort_map"})
    unmapped: bool = option(False, about=(
        "Also send every client level as is (`test_reasoning_effort_unmapped`), failing when the "
        "template rejects a level the map leaves out. Default: false."))
    max_tokens: int = option(512, minimum=1, about=(
        "The budget per level; a level answered with reasoning and cut before any content passes. "
        "Default: 512."))
    source: str | None = None  # the client config the map was read from (`from:`)
    trend: bool = option(False, about=(
        "Also ask `test_reasoning_effort_trend`: each distinct mapped value answers the same "
        "question (a full answer per level) and higher levels must think longer, measured in "
        "thinking tokens: the highest at least 1.25x the lowest, none under half of a lower one. "
        "Default: false."))

    # The keys that read the map from a client's config into `map` (the `from:` form).
    FROM: ClassVar[dict[str, dict[str, Any]]] = {
        "from": {"type": "string", "minLength": 1, "description": (
            "Read the map from the client's own models.json (pi's `compat.reasoningEffortMap`), "
            "relative to fleet.yaml, when the fleet loads.")},
        "model": {"type": "string", "minLength": 1, "description": (
            "The model id in `from:`'s file. Default: the endpoint's alias.")},
        "provider": {"type": "string", "minLength": 1, "description": (
            "The provider in `from:`'s file, only when several providers list that model id.")}}
    FROM_KEYS: ClassVar[tuple[str, ...]] = tuple(FROM)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The bare level map, `map:` with options, or `from:` with options."""
        keys = key_schemas(cls)
        rest = {k: v for k, v in keys.items() if k != "map"}
        return {"oneOf": [
            {"$ref": keys["map"]["$ref"]},
            {"type": "object", "additionalProperties": False, "required": ["map"],
             "properties": keys},
            {"type": "object", "additionalProperties": False, "required": ["from"],
             "properties": {**cls.FROM, **rest}}]}

    @classmethod
    def from_fleet(cls, value: Any, endpoint: Endpoint | None = None) -> Options:
        """The long form `{map: {...}, unmapped: bool, max_tokens: n}`, the form that reads the
        map `from:` a client's config (relative to the fleet file), or the bare level map."""
        value = dict(value) if isinstance(value, dict) else {}
        if "from" in value:
            source = in_folder(value.pop("from"), endpoint.folder if endpoint else None)
            model, provider = value.pop("model", None), value.pop("provider", None)
            return cls(**value, map=_client_map(source, model, provider, endpoint),
                       source=source)
        if not isinstance(value.get("map"), dict):
            return cls(map=value)
        return cls(**value)


CLAIM = Claim("reasoning_effort",
              "every client reasoning_effort level maps to one the template accepts", Options,
              order=50, asks="A mapping asks it: the effort map itself (client level -> the value "
              "sent), or `map:` or `from:` with options.",
              tests=("test_reasoning_effort", "test_reasoning_effort_unmapped",
                     "test_reasoning_effort_trend"))


def _client_map(path: str, model: str | None, provider: str | None,
                endpoint: Endpoint | None) -> dict[str, str]:
    model = model or (endpoint.alias if endpoint else None)
    if not model:
        raise OptionError("", "`from` needs the model's id in the client config: set "
                              "reasoning_effort.model or the endpoint's alias")
    try:
        return read_effort_map(path, model, endpoint.url if endpoint else None, provider)
    except EffortMapError as exc:
        raise OptionError("from", str(exc)) from None


@dataclass(kw_only=True)
class Efforts(Observation):
    replies: dict[str, Reply]  # level -> the answer to it (sent mapped, or raw when unmapped)
    sent: dict[str, str]  # level -> the value sent
    max_tokens: int


def _ask(target, sent: dict[str, str]) -> Efforts:
    """Each level asked for a handful of tokens: the engine starting to answer it (thinking or
    answering) shows it accepted. A reply cut showing neither is asked again with the claim's
    budget, as a reply that shows nothing at the start may still answer later."""
    max_tokens = Options.on(target.endpoint).max_tokens
    few = min(ACCEPTED_TOKENS, max_tokens)
    replies = {}
    for level, value in sent.items():
        req = Request(PROMPT, few, extra=target.driver.wire.effort(value))
        reply = send(target, req)
        if few < max_tokens and _shows_nothing(reply):
            reply = send(target, replace(req, max_tokens=max_tokens))
        replies[level] = reply
    return Efforts(replies=replies, sent=sent, max_tokens=max_tokens)


def _shows_nothing(reply: Reply) -> bool:
    return (reply.ok and reply.cut and not reply.thinking_cut and not reply.calls
            and not reply.content.strip())


def level(target, case: str) -> Efforts:
    """One client level, sent as the value the fleet maps it to."""
    return _ask(target, {case: Options.on(target.endpoint).map[case]})


def unmapped(target) -> Efforts:
    """Every client level sent as is: what a client without the map would send."""
    return _ask(target, {lv: lv for lv in LEVELS})


def judge_level(efforts: Efforts, ctx: Context[Options]) -> None:
    """The level, sent as mapped, is accepted by the template and answered with content (or
    cut while thinking)."""
    ((lv, reply),) = efforts.replies.items()  # the one level this case asked
    value = efforts.sent[lv]
    doing = f"reasoning_effort {lv!r} (sent as {value!r})"
    if reply.problem and reply.status is not None and reply.status >= 400:
        said = template_message(reply.problem)
        if said:
            fail(f"{doing} answered {reply.status}: the chat template rejects it: {said}",
                 map_fix([lv], supported(reply.problem)))
    require_answer(reply, ctx.driver, doing)
    if cut_while_thinking(reply, ctx, doing):
        return
    require_budget(reply, reply.max_tokens or efforts.max_tokens,
                   "expect.reasoning_effort.max_tokens", ctx.driver)
    if not reply.content.strip():
        fail(f"{doing} answered 200 with empty content (finish_reason {reply.finish!r})")


def judge_unmapped(efforts: Efforts, ctx: Context[Options]) -> None:
    """Note what the template does with each raw level; fail when one it rejects is unmapped."""
    mapping = ctx.options.map
    missing: list[str] = []
    accepted: list[str] = []  # the levels the template says it takes, once one says
    for lv, reply in efforts.replies.items():
        said = template_message(reply.problem) if reply.problem else None
        if not said:
            ctx.note(f"{lv}: accepted as is" if reply.ok else
                     f"{lv}: {reply.status}: {one_line(reply.problem, 120)}")
            continue
        accepted = accepted or supported(reply.problem)
        mapped = f" (mapped to {mapping[lv]!r})" if lv in mapping else ""
        ctx.note(f"{lv}: rejected by the template{mapped}: {said}")
        if lv not in mapping:
            missing.append(lv)
    if missing:
        fail(f"the template rejects client level(s) {', '.join(missing)} and the fleet's "
             f"reasoning_effort map leaves them out; a client sending them gets an error",
             map_fix(missing, accepted))


def template_message(error: str | None) -> str | None:
    """The template's own words when an error is a template rejecting the level."""
    text = error or ""
    lower = text.lower()
    if not any(w in lower for w in ("reasoning effort", "reasoning_effort", "jinja", "template")):
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    # "... Error: Jinja Exception: Unexpected reasoning effort high ..." -> the template's words
    return one_line(_TEMPLATE_MSG.split(lines[-1])[-1] if lines else text, 200)


def supported(error: str | None) -> list[str]:
    """Levels a template says it accepts ('Supported types are xhigh (default), medium, and low')."""
    found = _SUPPORTED.search(error or "")
    if not found:
        return []
    words = re.split(r",|\band\b|\bor\b|\|", re.sub(r"\([^)]*\)", "", found.group(1)))
    return [w.strip(" '\"`") for w in words if w.strip(" '\"`")]


def suggest(level: str, accepted: list[str]) -> str | None:
    """The nearest accepted level at or above the client's, else the highest one below it."""
    if not accepted:
        return None
    rank = {name: i for i, name in enumerate(LEVELS)}
    known = sorted((a for a in accepted if a in rank), key=lambda a: rank[a])
    if not known:
        return accepted[0]
    want = rank.get(level, 0)
    return next((a for a in known if rank[a] >= want), known[-1])


def map_fix(levels: list[str], accepted: list[str]) -> str:
    entries = [f"{lv}: {suggest(lv, accepted)}" for lv in levels if suggest(lv, accepted)]
    if entries:
        return (f"map it to a level the template accepts ({', '.join(accepted)}): "
                f"`{', '.join(entries)}` in the client's effort map and expect.reasoning_effort")
    return ("map it to a level the template accepts (see its message) in the client's effort map "
            "and expect.reasoning_effort")


LEVEL = Check("test_reasoning_effort", "reasoning_effort", level, judge_level,
              cases=lambda opts, driver: list(opts.map),
              per="LEVEL", when="one per mapped level")
UNMAPPED = Check("test_reasoning_effort_unmapped", "reasoning_effort", unmapped, judge_unmapped,
                 applies=lambda opts, driver: (None if opts.unmapped else
                                               "expect.reasoning_effort.unmapped is not set"))
