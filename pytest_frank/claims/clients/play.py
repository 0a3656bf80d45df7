"""The probe: a client's first request, then its next one carrying a tool's result; and what
bounds them: the served context, the prompt's tokens (usage, else the numbers of a refusal,
else the server's tokenize route)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pytest_frank.claims.clients.filler import example_arguments
from pytest_frank.claims.clients.options import Options
from pytest_frank.claims.clients.profile import First, Profile
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.runtime.chat import Call, Reply, Request, send
from pytest_frank.runtime.probes import slot_shape
from pytest_frank.transport import http
from pytest_frank.runtime.target import Target

# A refusal that names the prompt's tokens: llama.cpp's "request (73695 tokens) exceeds the
# available context size (4096 tokens)"; vLLM's "maximum context length is 4096 tokens. However,
# you requested 105695 tokens (73695 in the messages, 32000 in the completion)", or "your request
# has 73695 input tokens".
PROMPT_WORDS = (re.compile(r"\((\d+) tokens?\) exceeds"), re.compile(r"(\d+) in the messages"),
                re.compile(r"has (\d+) input tokens"), re.compile(r"n_prompt_tokens\D{0,4}(\d+)"))


@dataclass
class Step:
    held: str  # what the request's history held, in the client's words
    reply: Reply
    results: list[str] = field(default_factory=list)
    sent: Request | None = None  # the request as sent


@dataclass(kw_only=True)
class Played(Observation):
    client: str
    first: First
    steps: list[Step] = field(default_factory=list)
    earlier_call: bool = False  # turn 1 answered in text: turn 2 carries an earlier turn's call
    carried: list[Call] = field(default_factory=list)  # the calls turn 2 carries results of
    context: int | None = None  # tokens one conversation gets, where the server says
    slots: int | None = None
    prompt_tokens: int | None = None
    counted_by: str = ""
    wait: float = 0.0  # seconds each request waited for its answer to begin, as the client does


def play(target: Target, case: str) -> Played:
    profile = PROFILES[case]
    choices = Options.on(target.endpoint).of(case)
    first = profile.first(choices)
    found = Played(client=case, first=first)
    shape = target.need(slot_shape)
    if not isinstance(shape, Unseen):
        found.context, found.slots = shape.ctx_per_slot, shape.count
    found.wait = http.first_answer_wait(target.timeout, profile.first_answer_s)
    with http.first_answer_within(found.wait):
        reply = send(target, first.request, api=profile.api)
    found.steps.append(Step(_held(first.request.messages or []), reply, sent=first.request))
    _count(target, found, reply)
    if not reply.ok:
        return found
    calls = reply
    if not reply.calls:  # as a client's history holds one: an earlier call and its result
        found.earlier_call = True
        calls = _earlier(profile, first)
    results = [json.dumps({"path": "notes.txt", "lines": 3, "text": "shopping list"})
               for _ in calls.calls]
    found.steps[0].results, found.carried = results, list(calls.calls)
    after = profile.then(target.driver_on(profile.api), first, calls, results)
    with http.first_answer_within(found.wait):  # the history as long again, and then some
        found.steps.append(Step(_held(after.messages or []),
                                send(target, after, api=profile.api), sent=after))
    return found


def _earlier(profile: Profile, first: First) -> Reply:
    tool = first.tools[0]
    name, args = tool["function"]["name"], example_arguments(tool)
    call = Call(name, json.dumps(args), "call_frank_1")
    return Reply(status=200, calls=[call], finish="tool_calls",
                 blocks=profile.echoed(call, args))


def _count(target: Target, found: Played, reply: Reply) -> None:
    """The first request's prompt tokens: by usage, a refusal's numbers, or /tokenize."""
    counted, by = prompt_count(target, reply, found.first.request)
    if counted is not None:
        found.prompt_tokens, found.counted_by = counted, by


def request_text(first: First | Request) -> str:
    """The request's text as JSON: what the tokenize route counts for it."""
    req = first.request if isinstance(first, First) else first
    return json.dumps([req.extra.get("system"), req.extra.get("instructions"), req.messages,
                       req.tools])


def prompt_count(target: Target, reply: Reply, sent: Request | None) -> tuple[int | None, str]:
    """A request's prompt tokens and who counted them: the reply's usage, the numbers of a
    refusal, else the server's tokenize route over the request's text; None where none can."""
    if reply.prompt_tokens is not None:
        return reply.prompt_tokens, "usage"
    said = reply.problem or ""
    for pattern in PROMPT_WORDS:
        match = pattern.search(said)
        if match:
            return int(match.group(1)), "the refusal"
    asked = target.driver.counting.tokenize_request(target.model_name(), request_text(sent)) \
        if sent is not None else None
    if asked is None:
        return None, ""
    ex = target.post(*asked)
    counted = target.driver.counting.token_count(ex.json()) if ex.ok else None
    return (counted, f"{asked[0]} (its text alone)") if counted is not None else (None, "")


def _held(messages: list[dict]) -> str:
    """The history's turns: role (or item type) and, for arrays, the block types."""
    out = []
    for m in messages:
        role = m.get("role") or m.get("type", "?")
        content = m.get("content")
        if isinstance(content, list):
            kinds = [str(b.get("type", "?")) for b in content if isinstance(b, dict)]
            role += f" [{', '.join(kinds)}]"
        if m.get("tool_calls"):
            role += f" ({len(m['tool_calls'])} tool_call(s))"
        out.append(role)
    return ", ".join(out)
