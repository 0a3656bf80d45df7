"""agent, as the template renders it: where the engine renders a conversation with its chat template
on request (llama.cpp's POST /apply-template), an agent's history is rendered without a generation
(the question; the assistant's reasoning and its tool call, with an id; the tool's result) and
the prompt is read. The result must be in it; the call's id and the reasoning where the served
template shows them by design: the template (/props) is rendered here too (pytest_frank.local.render)
with the same history, and what it shows here the server's prompt must show. Templates that drop
earlier reasoning (R1-style, plain ChatML) or never print ids (Qwen3, Hermes) are not asked for
them. Where the template cannot be rendered here, what its text reads decides (tool_call_id,
reasoning_content). Each part carries a marker the model cannot have made up."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass

from pytest_frank.claims.agent import (
    LOST_RESULTS,
    LOST_RESULTS_FIX,
    TEMPLATE_FIX,
    TEMPLATE_WORDS,
    Options,
)
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line
from pytest_frank.claims.tools import PROMPTS, TOOLS
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.openai_chat import ChatWire, agent_history
from pytest_frank.local.render import render
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import fail, inconclusive
from pytest_frank.transport.wire import Call, Reply
from pytest_frank.runtime.target import Target

# What a template's text reads when it shows each part (HF chat templates, whatever the engine).
SHOWS_ID = re.compile(r"tool_call_id|tool_call\.id\b|\[\s*['\"]id['\"]\s*\]|\bcall\.id\b")
KEEPS_REASONING = re.compile(r"reasoning_content")
GONE_STATUSES = (404, 405, 501)  # the route is not served here (a proxy that forwards the API)


@dataclass(kw_only=True)
class Rendered(Observation):
    sent: list[dict]  # the chat-shaped history rendered
    markers: dict[str, str]  # result | id | reasoning -> the text that shows it arrived
    route: str
    prompt: str | None = None
    status: int | None = None  # the render route's answer where it gave no prompt
    said: str | None = None  # its words then
    template: str | None = None  # the served template's text, where the engine shows it
    here: str | None = None  # that template rendered here with the same history, where it could be


def history() -> tuple[list[dict], dict[str, str]]:
    """An agent's history after one call, chat-shaped (the render route takes chat messages
    whatever the endpoint's API), with a fresh marker in each part."""
    tag = secrets.token_hex(4)
    # Nine letters and digits: Mistral's templates refuse any other call id.
    call_id = f"c{tag}"
    reasoning = f"The user asks for the weather in Paris; get_weather answers that (note-{tag})."
    result = json.dumps({"city": "Paris", "forecast": "sunny, 21 C", "reference": f"ref-{tag}"})
    said = Reply(reasoning=reasoning, reasoning_field=ChatWire.reasoning_fields[0],
                 calls=[Call("get_weather", json.dumps({"city": "Paris"}), call_id)])
    sent = agent_history([{"role": "user", "content": PROMPTS["required"]}], said, [result])
    return sent, {"result": f"ref-{tag}", "id": call_id, "reasoning": f"note-{tag}"}


def rendered(target: Target) -> Rendered:
    """The history rendered by the server, and the template it renders with."""
    from pytest_frank.runtime.probes import slot_shape

    driver, (sent, markers) = target.driver, history()
    asked = driver.counting.render_request(target.model_name(), sent, TOOLS)
    assert asked is not None  # the check applies only where the engine renders (_applies)
    route, body = asked
    found = Rendered(sent=sent, markers=markers, route=route)
    ex = target.post(route, body)
    found.prompt = driver.counting.rendered_prompt(ex.json()) if ex.ok else None
    if found.prompt is None:
        found.status = ex.status
        found.said = driver.error_message(ex) or ex.error or ex.snippet(200)
    shape = target.need(slot_shape)
    if not isinstance(shape, Unseen) and shape.failure is None:
        found.template = driver.template.served(shape.payloads)[0]
    found.here = render(found.template, sent, TOOLS) if found.template else None
    return found


def judge(found: Rendered, ctx: Context[Options]) -> None:
    """The rendered history holds the tool result; the call's id where the template shows ids;
    the reasoning where the template keeps it."""
    _require_prompt(found)
    prompt, markers = found.prompt or "", found.markers
    ctx.note(f"POST {found.route}: {len(prompt)} characters rendered from: user, assistant "
             f"(reasoning_content, 1 tool_call id {markers['id']}), tool")
    if markers["result"] not in prompt:
        fail(f"the rendered prompt lacks the tool result ({markers['result']}) sent as a role "
             f"tool message: the model answers without what the tool said"
             f"{_by_design(found)}", _lost_result_fix(found))
    ctx.note("the tool result is in the prompt")
    wanted = _wanted(found, ctx)
    missing = [part for part in wanted if markers[part] not in prompt]
    if missing:
        fail(f"the rendered prompt lacks the {' and the '.join(_WHAT[p] for p in missing)} the "
             f"history carried, though the served template {_why(missing)}: "
             f"{_tail(prompt, markers)}", _lost_fix(missing))
    for part in wanted:
        ctx.note(f"the {_WHAT[part]} is in the prompt")


_WHAT = {"id": "call id", "reasoning": "earlier reasoning"}


def _require_prompt(found: Rendered) -> None:
    if found.prompt is not None:
        return
    said = one_line(found.said or "", 240)
    if found.status in GONE_STATUSES:
        inconclusive(f"POST {found.route} answered {found.status} ({said}): the endpoint does "
                     f"not render templates on request here (a proxy in front that forwards "
                     f"only the API routes)")
    if found.status is None:
        fail(f"POST {found.route}: {said}")
    if any(w in said.lower() for w in LOST_RESULTS):
        fail(f"POST {found.route} answered {found.status}: an agent's history was sent with "
             f"its tool result (user, assistant with a tool call, tool) but did not arrive "
             f"whole: {said}", LOST_RESULTS_FIX)
    if any(w in said.lower() for w in TEMPLATE_WORDS):
        fail(f"POST {found.route} answered {found.status}: the chat template could not render "
             f"an agent's history (user, assistant with reasoning and a tool call, tool): {said}",
             TEMPLATE_FIX)
    fail(f"POST {found.route} answered {found.status}: {said}")


def _wanted(found: Rendered, ctx: Context[Options]) -> list[str]:
    """The parts beyond the result that the served template shows by design, each with a note:
    what it showed rendered here, else what its text reads."""
    template, here = found.template, found.here
    if template is None:
        ctx.note("the served template is not shown (/props): the call id and the reasoning are "
                 "not judged")
        return []
    if here is not None:
        ctx.note("the served template rendered here with the same history decides what it shows")
    wanted = []
    shows = (lambda part: found.markers[part] in here) if here is not None else (
        lambda part: bool(_READS[part].search(template)))
    if shows("id"):
        wanted.append("id")
    else:
        ctx.note("the template shows no call id (tool_call_id): ids are not asked for")
    if shows("reasoning"):
        wanted.append("reasoning")
    else:
        ctx.note("the template keeps no earlier reasoning (reasoning_content) by design, so none "
                 "is asked for")
    return wanted


_READS = {"id": SHOWS_ID, "reasoning": KEEPS_REASONING}


def _why(missing: list[str]) -> str:
    shows = {"id": "shows call ids (tool_call_id)", "reasoning": "keeps reasoning_content"}
    return " and ".join(shows[p] for p in missing)


def _by_design(found: Rendered) -> str:
    """Whether the served template itself drops the result, where it was rendered here."""
    if found.here is None:
        return ""
    if found.markers["result"] in found.here:
        return "; the served template, rendered here with the same history, shows it"
    return "; the served template drops it itself (rendered here with the same history: no result)"


def _tail(prompt: str, markers: dict[str, str]) -> str:
    """Where the history should show: the prompt from the result back, or its end."""
    at = prompt.find(markers["result"])
    return repr(one_line(prompt[max(0, at - 200):at + 40] if at >= 0 else prompt[-240:], 240))


def _lost_result_fix(found: Rendered) -> str:
    own = ("serve the model's own chat template (llama.cpp --jinja with --chat-template-file "
           "<the model's>, vLLM --chat-template), one that renders tool results")
    if found.here is not None and found.markers["result"] in found.here:
        return ("the result was lost before the template: a proxy or gateway in front dropped "
                "the role tool message (or its content); make it forward the history as the "
                "client sent it")
    if found.here is not None:
        return f"the template drops role tool messages: {own}"
    said = "the served template is not shown" if found.template is None else \
        "the served template could not be rendered here"
    return f"{said}: {own}; behind a proxy, check that it forwards role tool messages"


def _lost_fix(missing: list[str]) -> str:
    parts = {"id": "the tool_call_id of role tool messages and the ids of tool_calls",
             "reasoning": "the assistant's reasoning_content"}
    return (f"a proxy or gateway in front rewrote the history: make it forward "
            f"{' and '.join(parts[p] for p in missing)} as the client sent them; where the "
            f"engine itself drops them, update it")


def _applies(opts: Options, driver: Driver) -> str | None:
    if not opts.template:
        return "expect.agent.template is false"
    if driver.counting.render_route is None:
        return f"a {driver.label} renders no chat template on request"
    return None


TEMPLATE = Check("test_agent_template", "agent", rendered, judge, applies=_applies,
                 when="where the engine renders templates on request")
