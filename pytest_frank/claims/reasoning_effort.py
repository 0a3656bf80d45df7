"""reasoning_effort: every client level, sent as the value the fleet maps it to, is accepted by the
chat template and answered with content. Templates may raise on levels they do not know (Qwen3.8
accepts only xhigh|medium|low): llama.cpp answers 500 or 400 naming Jinja, vLLM 400."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_frank.chat import Chat, Reply, Request
from pytest_frank.claims.replies import one_line, require_answer, require_budget
from pytest_frank.http import Exchange
from pytest_frank.verdict import fail

PROMPT = "Say hello in one short sentence."
DEFAULT_MAX_TOKENS = 512
LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")  # client levels, least to most
_SUPPORTED = re.compile(r"supported (?:types|values|levels) (?:are|is)\s*:?\s*([^.\n]+)", re.I)
_TEMPLATE_MSG = re.compile(r"(?:exception|error):\s*", re.I)


def options(endpoint) -> dict:
    """The long form `{map: {...}, unmapped: bool, max_tokens: n}` or the bare level map."""
    value = endpoint.expect.get("reasoning_effort") or {}
    return dict(value) if isinstance(value.get("map"), dict) else {"map": dict(value)}


def level_map(endpoint) -> dict[str, str]:
    return options(endpoint)["map"]


@dataclass
class Efforts:
    replies: dict[str, Reply]  # level -> the answer to it (sent mapped, or raw when unmapped)
    sent: dict[str, str]  # level -> the value sent
    max_tokens: int
    exchanges: list[Exchange] = field(default_factory=list)


def _ask(target, sent: dict[str, str]) -> Efforts:
    max_tokens = int(options(target.endpoint).get("max_tokens", DEFAULT_MAX_TOKENS))
    replies = {}
    with Chat(target) as chat:
        for level, value in sent.items():
            replies[level] = chat.send(Request(PROMPT, max_tokens,
                                               extra=target.driver.effort(value)))
    return Efforts(replies, sent, max_tokens, list(chat.exchanges))


def probe(target) -> Efforts:
    """Every mapped level, sent as its mapped value."""
    return _ask(target, level_map(target.endpoint))


def probe_unmapped(target) -> Efforts:
    """Every client level sent as is: what a client without the map would send."""
    return _ask(target, {level: level for level in LEVELS})


def judge_level(efforts: Efforts, level: str, driver) -> None:
    reply, value = efforts.replies[level], efforts.sent[level]
    doing = f"reasoning_effort {level!r} (sent as {value!r})"
    if reply.error and reply.status is not None and reply.status >= 400:
        said = template_message(reply.error)
        if said:
            accepted = supported(reply.error)
            fail(f"{doing} answered {reply.status}: the chat template rejects it: {said}",
                 map_fix([level], accepted))
    require_answer(reply, driver, doing)
    require_budget(reply, efforts.max_tokens, "expect.reasoning_effort.max_tokens")
    if not reply.content.strip():
        fail(f"{doing} answered 200 with empty content (finish_reason {reply.finish!r})")


def judge_unmapped(efforts: Efforts, mapping: dict[str, str], note) -> None:
    """Note what the template does with each raw level; fail when one it rejects is unmapped."""
    notes, missing, accepted = [], [], None
    for level, reply in efforts.replies.items():
        said = template_message(reply.error) if reply.error else None
        if not said:
            notes.append(f"{level}: accepted as is" if reply.ok else
                         f"{level}: {reply.status}: {one_line(reply.error, 120)}")
            continue
        accepted = accepted or supported(reply.error)
        mapped = f" (mapped to {mapping[level]!r})" if level in mapping else ""
        notes.append(f"{level}: rejected by the template{mapped}: {said}")
        if level not in mapping:
            missing.append(level)
    for line in notes:
        note(line)
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
    known = sorted((a for a in accepted if a in rank), key=rank.get)
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
