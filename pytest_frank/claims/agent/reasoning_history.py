"""agent, the previous turn's reasoning sent back, black-box: one agent history (the question, the
assistant's reasoning and tool call, the tool's result) is asked for one token without the
reasoning and with it in each field clients send it in (reasoning_content, reasoning), and the
server's own prompt counts (usage.prompt_tokens) are compared. Where the served template keeps
an agent's reasoning, a field the engine reads lengthens the prompt; one that leaves it as long
as no reasoning does was dropped on the way (LiteLLM's hosted_vllm stripped reasoning_content,
41392; vLLM 0.20 read only `reasoning`, 38488), and the model goes on with the loop without
the thinking that chose its call. It holds on every engine, not only where POST
/apply-template shows the prompt (test_agent_template). On the Messages route the reasoning is
the assistant turn's thinking block, which the API takes only as its server signed it: the
history is test_agent's own first turn sent back with and without its block, counted by
usage.input_tokens.

Which fields an engine reads is the driver's fact (`history_reasoning_read`). Whether the
template keeps reasoning at all is what the counts show (a field that lengthens the prompt);
where none does, the fleet's `expect.agent.reasoning_history`, else the served template
rendered here (where the engine shows it) says; where nothing says it keeps reasoning, the
template drops earlier reasoning by design (R1-style, plain ChatML): a note."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field, replace

from pytest_frank.claims.advice import advise
from pytest_frank.claims.agent import Options
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line
from pytest_frank.claims.tools import PROMPTS, TOOLS
from pytest_frank.drivers import VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.openai_chat import agent_history
from pytest_frank.drivers.protocols import Facts, Wire
from pytest_frank.local.render import render
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Text, fail, inconclusive, not_applicable
from pytest_frank.runtime.chat import Request, send
from pytest_frank.runtime.known_errors import known_fix
from pytest_frank.transport.wire import Call, Reply
from pytest_frank.runtime.target import Target

NONE = ""  # the history without reasoning, among the counts by field
BLOCKS = ("thinking",)  # the Messages API's field: the assistant turn's thinking blocks


@dataclass(kw_only=True)
class Counted(Observation):
    counts: dict[str, int | None] = field(default_factory=dict)  # field ("": none) -> prompt
    refused: dict[str, str] = field(default_factory=dict)  # field -> what came back instead
    unasked: str | None = None  # why no history was asked (no thinking block to send back)
    # Whether the served template keeps an agent's reasoning, and where that was read (the
    # template rendered here with the same history); None where it is not shown.
    keeps: tuple[bool, str] | None = None


def _said(tag: str, reasoning_field: str | None) -> Reply:
    """The assistant's turn 1 as the server would have sent it: a call, and its reasoning in
    `reasoning_field` (None: without reasoning)."""
    thought = (f"The user asks for the weather in Paris, and get_weather answers that for a "
               f"city, so I call it with Paris (note-{tag})." if reasoning_field else "")
    return Reply(reasoning=thought, reasoning_field=reasoning_field,
                 calls=[Call("get_weather", json.dumps({"city": "Paris"}), f"c{tag}")])


def _blocks(target: Target) -> tuple[Reply | None, str | None]:
    """The Messages API's turn 1 with its thinking block, for sending it back with and without
    that block: the server's own (test_agent's first turn, one reply for both), since a block
    made up here carries no signature the API takes. (None, why) where none came."""
    from pytest_frank.claims.agent import first_call

    if not target.endpoint.asks("reasoning"):
        return None, "reasoning is not claimed, so the agent's turn asks no thinking block"
    turn = first_call(target)
    if not turn.ok or not turn.calls:
        return None, ("the agent's forced call came back "
                      f"{'with no call' if turn.ok else one_line(turn.problem_line, 200)} "
                      "(test_agent judges it)")
    if not any(b.get("type") == "thinking" for b in turn.blocks):
        return None, "the agent's turn with a call came back without a thinking block"
    return turn, None


def _without_thinking(turn: Reply) -> Reply:
    return replace(turn, reasoning="", reasoning_field=None,
                   blocks=[b for b in turn.blocks
                           if b.get("type") not in ("thinking", "redacted_thinking")])


def counted(target: Target) -> Counted:
    """The same history, one token asked, without the reasoning and with it in each field."""
    driver, tag = target.driver, secrets.token_hex(4)
    result = json.dumps({"city": "Paris", "forecast": "sunny, 21 C", "reference": f"ref-{tag}"})
    question = [{"role": "user", "content": PROMPTS["required"]}]
    found, turn = Counted(), None
    if driver.wire.history_reasoning_fields == BLOCKS:
        turn, found.unasked = _blocks(target)
        if turn is None:
            return found
    for name in (NONE, *driver.wire.history_reasoning_fields):
        said = _said(tag, name or None) if turn is None else \
            turn if name else _without_thinking(turn)
        history = driver.wire.agent_history(question, said, [result] * len(said.calls))
        # As the agent's answering turn asks (tools, "auto", thinking asked where claimed), so
        # the template renders the history as it would then; one token: only the prompt counts.
        reply = send(target, Request(PROMPTS["required"], 1, tools=TOOLS, tool_choice="auto",
                                     messages=history, think=target.endpoint.asks("reasoning")))
        if not reply.ok:  # judged on the refusal: the other variants would tell no more
            found.refused[name] = one_line(reply.problem_line, 240)
            found.fix = reply.fix or known_fix(driver, reply.problem, reply.status)
            if name == NONE and turn is not None:
                continue  # the Messages API refuses a thinking turn's call without its block
            return found
        found.counts[name] = reply.prompt_tokens
    # Where no field changed the prompt, whether the template keeps reasoning decides.
    if len(set(found.counts.values())) == 1 and None not in found.counts.values():
        found.keeps = _keeps(target, tag, result)
    return found


def _keeps(target: Target, tag: str, result: str) -> tuple[bool, str] | None:
    """Whether the served template (where the engine shows it) keeps the reasoning of an agent's
    history, by rendering it here with the history in the field the template reads."""
    from pytest_frank.runtime.probes import slot_shape

    shape = target.need(slot_shape)
    if isinstance(shape, Unseen) or shape.failure is not None:
        return None
    template = target.driver.template.served(shape.payloads)[0]
    if template is None:
        return None
    sent = agent_history([{"role": "user", "content": PROMPTS["required"]}],
                         _said(tag, "reasoning_content"), [result])
    here = render(template, sent, TOOLS)
    if here is None:
        return None
    kept = f"note-{tag}" in here
    return kept, ("the served template, rendered here with the same history, "
                  f"{'keeps' if kept else 'drops'} it")


def judge(found: Counted, ctx: Context[Options]) -> None:
    """A field the engine reads lengthens the prompt wherever the template keeps reasoning."""
    driver = ctx.driver
    if found.unasked:
        if not ctx.endpoint.asks("reasoning"):
            not_applicable(found.unasked)
        inconclusive(f"{found.unasked}: whether a history's thinking block reaches the prompt "
                     f"is not measured")
    if _required_block(found, ctx):
        return
    _require_counts(found, driver)
    counts = {k: v for k, v in found.counts.items() if v is not None}
    bare, unit = counts[NONE], _unit(driver.wire)
    grew = {name: n - bare for name, n in counts.items() if name != NONE}
    ctx.note(f"the same agent history, one token asked: {bare} {unit} without the "
             f"previous turn's reasoning; "
             + "; ".join(f"{counts[name]} with it in {_names([name])}" for name in grew))
    read = _read(driver)
    kept = [name for name, more in grew.items() if more]
    if kept:
        dropped = [name for name in grew if not grew[name] and read is not None and name in read]
        if dropped:
            fail(f"the previous turn's reasoning in {_names(dropped)} left the prompt at "
                 f"{bare} tokens, as long as without it, while in {_names(kept)} it reached "
                 f"the template (+{grew[kept[0]]}): {_reads(driver)}, so it was dropped on the "
                 f"way and the model goes on without the thinking that chose its call",
                 dropped_fix(driver, dropped))
        unread = [name for name in grew if not grew[name]]
        if unread:
            ctx.note(f"{_names(unread)} does not reach the prompt ({_reads(driver)}): a "
                     f"client that sends the reasoning back only there loses it")
        ctx.note(f"the template keeps an agent's reasoning, and {_names(kept)} reaches it")
        return
    keeps = _said_keeps(found, ctx.options)
    if keeps is None or not keeps[0]:
        why = keeps[1] if keeps else "no field changes the prompt"
        ctx.note(f"the template keeps no earlier reasoning in an agent's history ({why}), so "
                 f"none is asked for")
        return
    named = [name for name in grew if read is None or name in read] or list(grew)
    fail(f"the previous turn's reasoning left the prompt at {bare} {unit} in every field "
         f"clients send it in ({_names(list(grew))}), as long as without it, though "
         f"{keeps[1]}: {_reads(driver)}, so it was dropped on the way and the model goes on "
         f"without the thinking that chose its call", dropped_fix(driver, named))


def _required_block(found: Counted, ctx: Context[Options]) -> bool:
    """The Messages API (Anthropic's own) refuses a thinking turn's tool call sent back without
    its thinking block: refused without it and answered with it, the block reached the server."""
    if set(found.refused) != {NONE} or found.counts.get(BLOCKS[0]) is None:
        return False
    ctx.note(f"the agent's history without the turn's thinking block was refused "
             f"({found.refused[NONE]}) and answered with it ({found.counts[BLOCKS[0]]} "
             f"{_unit(ctx.driver.wire)}): the server requires the block, so it reached the server")
    return True


def _require_counts(found: Counted, driver: Driver) -> None:
    if found.refused:
        # The last one asked: the Messages API's history with its thinking block, where the
        # one without was refused too
        name, said = list(found.refused.items())[-1]
        how = f"with the previous turn's reasoning in {_names([name])}" if name else \
            "without the previous turn's reasoning"
        # Refused with the thinking block as without it: the block did not arrive
        lost = (name, NONE) == (BLOCKS[0], next(iter(found.refused)))
        fail(f"an agent's history (user, assistant with a tool call, tool) {how} was not "
             f"answered{', as without it' if lost else ''}: {said}",
             found.fix or (dropped_fix(driver, [name]) if lost else None))
    missing = [name or "none" for name, n in found.counts.items() if n is None]
    if missing:
        inconclusive(f"the server sent no {_count_field(driver.wire)} for an agent's history "
                     f"(reasoning in: {', '.join(missing)}): whether the previous turn's "
                     f"reasoning reaches the prompt is not measured")


def _said_keeps(found: Counted, opts: Options) -> tuple[bool, str] | None:
    """Whether the template keeps reasoning, where no field lengthened the prompt: the fleet's
    word first (it knows the model), then the served template."""
    if opts.reasoning_history is not None:
        return opts.reasoning_history, (f"fleet.yaml says the template "
                                        f"{'keeps' if opts.reasoning_history else 'drops'} it "
                                        f"(expect.agent.reasoning_history)")
    return found.keeps


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}` blocks" if (n,) == BLOCKS else f"`{n}`" for n in names)


def _unit(wire: Wire) -> str:
    return "input tokens" if wire.history_reasoning_fields == BLOCKS else "prompt tokens"


def _count_field(wire: Wire) -> str:
    return "usage.input_tokens" if wire.history_reasoning_fields == BLOCKS else \
        "usage.prompt_tokens"


def _read(driver: Driver) -> tuple[str, ...] | None:
    """Of the fields asked on this route, those the engine reads (its driver's fact)."""
    read = driver.template.history_reasoning_read
    return None if read is None else \
        tuple(n for n in read if n in driver.wire.history_reasoning_fields)


def _reads(driver: Driver) -> str:
    read = _read(driver)
    if read is None:
        return f"which fields the {driver.label} reads is not known here"
    if not read:
        return f"the {driver.label} reads none of them"
    return f"the {driver.label} reads {_names(list(read))}"


def dropped_fix(driver: Facts, names: list[str]) -> Text:
    fields = _names(names)
    if tuple(names) == BLOCKS:
        return (f"a proxy or gateway in front strips the {fields} from the history's assistant "
                f"turns: make it forward each assistant turn's content blocks as the client "
                f"sent them, thinking blocks and their signatures included")
    gateway = (f"a proxy or gateway in front strips {fields} from the history's assistant "
               f"messages (LiteLLM's hosted_vllm provider did): make it forward them as the "
               f"client sent them")
    return advise(
        driver, f"{gateway}; where the engine itself drops them, update it",
        {VllmDriver: f"{gateway}; a vLLM from 0.20 until its fix read only `reasoning` and "
                     f"dropped `reasoning_content` (vLLM 38488): update it, or have the client "
                     f"send `reasoning`"})


def _applies(opts: Options, driver: Driver) -> str | None:
    if opts.reasoning_history is False:
        return "expect.agent.reasoning_history is false"
    if not driver.wire.history_reasoning_fields:
        return (f"the {driver.api} API sends the previous turn's reasoning back as items of "
                f"its own (reasoning items), which test_agent plays")
    return None


HISTORY = Check("test_agent_reasoning_history", "agent", counted, judge, applies=_applies,
                when="on the chat route")
