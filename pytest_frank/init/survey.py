"""What one running server says of itself, read as fleet.yaml would ask it: its engine, the
models it serves, and each claim its own configuration implies, with the evidence.

The same probes the battery runs: the fingerprint, health, the model list, the slot shape, the
driver's reading of the template, /metrics, one short generation, one forced tool call, each
client profile that fits (both turns, judged as the battery judges them), the perf probe's
speed runs (several readings) and, on a server of more than one slot, the load ladder. What a
probe showed against a claim is kept too (Survey.notes), so the file says why a claim is not
written. Nothing here is written down yet (pytest_frank.init.fleet_file does that)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_frank.base import redact
from pytest_frank.fleet import Endpoint
from pytest_frank.init import clients, measured
from pytest_frank.init.chat_gate import require_chat
from pytest_frank.init.found import Found, InitError
from pytest_frank.outcome.observation import Unseen
from pytest_frank.runtime.chat import Request, send
from pytest_frank.transport import metrics
from pytest_frank.runtime.target import Target

MARGIN = 3.0  # perf bounds: a measured figure times this (or divided by it)
# One forced call of one small tool (the tools claim's own get_time): 42 tokens on the self-test
# model with its thinking, about 30 for a real model's call; a thinking model whose reasoning
# used them all is asked again with room. A model that answers in prose spends them all, under
# the tool grammar (SmolLM2-135M on a loaded 2-core CPU: 1 to 2 tokens a second).
TOOL_PROBE_TOKENS = 64
FORCED = "a forced call (tool_choice required)"


@dataclass
class Survey:
    url: str
    engine: str
    engine_why: str
    models: list[str]
    claims: dict[str, Found] = field(default_factory=dict)
    # claim -> why it is not written (or what its value leaves out): a comment in the file
    notes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def survey(url: str, api_key: str | None, timeout: float, ready_timeout: float,
           perf: bool = True, margin: float = MARGIN) -> Survey:
    start = time.monotonic()
    engine, why = identify(url, api_key, timeout)
    target = _target(url, engine, api_key, timeout, ready_timeout)
    try:
        found = Survey(url=url, engine=engine, engine_why=why, models=_models(target))
        _chats(target)
        _configured(target, found)
        _generated(target, found)
        _tools(target, found)
        clients.offer(target, found)
        if perf:
            measured.perf(target, found, margin)
        measured.load(target, lambda expect: _target(url, engine, api_key, timeout,
                                                     ready_timeout, expect), found)
    finally:
        target.close()
    found.seconds = time.monotonic() - start
    return found


def _chats(target: Target) -> None:
    """The chat check first: no file for a server that cannot answer a plain question."""
    require_chat(target)


def _gguf_file(path: str | Path) -> bool:
    """The vram claim models a GGUF file; a model folder (vLLM, SGLang) or an unreadable path
    gives it nothing to read."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _target(url, engine, api_key, timeout, ready_timeout=0.0, expect=None):
    from pytest_frank.claims import bind
    from pytest_frank.runtime.target import Target

    return Target(bind(Endpoint(name="init", engine=engine, url=url, api_key=api_key,
                                ready_timeout=ready_timeout, expect=dict(expect or {}))), timeout)


def identify(url: str, api_key: str | None, timeout: float) -> tuple[str, str]:
    """(engine, the sign that gave it away); InitError for a URL that is no LLM server."""
    from pytest_frank.runtime.identify import recognise
    from pytest_frank.runtime.probes import served

    target = _target(url, "openai", api_key, timeout)
    try:
        listed = target.get("/v1/models")
        if listed.status is None:
            raise InitError(f"{listed.url}: {target.driver.reason(listed)}")
        if listed.status in (401, 403):
            raise InitError(f"{listed.url} {target.driver.reason(listed)}: the server wants a "
                            "key; pass --api-key-env NAME, NAME being the environment variable "
                            "that holds it")
        seen = recognise(target)
        if seen.engine:
            return seen.engine, seen.sign
        models = served(target)
        if models.failure or not models.ids:
            said = models.failure or f"{listed.url} lists no model"
            raise InitError(f"{url}: not an LLM endpoint: {said}")
        return "openai", ("a model list on /v1/models and no engine's own sign: a generic "
                          "OpenAI-compatible server")
    finally:
        target.close()


def _models(target: Target) -> list[str]:
    from pytest_frank.runtime.probes import health, served

    up = health(target)
    if not up.ready:
        raise InitError(up.line())
    listed = served(target)
    if listed.failure or not listed.ids:
        raise InitError(listed.failure or f"{listed.url} lists no model")
    return listed.ids


def _configured(target: Target, found: Survey) -> None:
    """Claims read from the server's configuration: slots, template, vision, drafting, vram."""
    from pytest_frank.runtime.probes import slot_shape

    driver = target.driver
    shape = target.need(slot_shape)
    payloads = {} if isinstance(shape, Unseen) else shape.payloads
    if not isinstance(shape, Unseen) and (shape.count or shape.ctx_per_slot):
        value = {k: v for k, v in (("count", shape.count), ("ctx_per_slot", shape.ctx_per_slot))
                 if v}
        found.claims["slots"] = Found(value, f"from {shape.source}")
    for claim, (yes, why) in driver.template.caps(payloads).items():
        if yes and claim != "tools":  # tools: after a forced call (_tools)
            found.claims[claim] = Found(_effort_levels() if claim == "reasoning_effort" else True,
                                        why)
    if driver.vision_advert_path:
        advert = payloads.get(driver.vision_advert_path)
        if advert is None:
            said = target.get(driver.vision_advert_path)
            advert = said.json() if said.ok else None
        if driver.vision_advertised(advert):
            found.claims["vision"] = Found(True, f"{driver.vision_advert_path} advertises vision "
                                                 "(a projector is loaded)")
    drafting = driver.metrics.speculative_live(payloads)
    if drafting:
        found.claims["spec_decode"] = Found(True, f"{driver.metrics.speculative_source} true")
    elif drafting is None:
        scraped = metrics.scrape(target, driver.metrics.path)
        names = scraped.names() if scraped.ok else set()
        series = next((s for s in driver.metrics.spec_series if {s.draft_tokens, s.rate_gauge} & names),
                      None)
        if series is not None:
            found.claims["spec_decode"] = Found(True, f"/metrics has {series.source}")
    model = driver.served_model_path(payloads)
    if model:
        _vram(found, model, None if isinstance(shape, Unseen) else shape)


def _vram(found: Survey, model: str, shape) -> None:
    """The served GGUF, written absolute: the battery reads expect.vram paths relative to the
    fleet file, not to the folder init ran in. A drafting server's draft file is named by no
    route: a serve file's command names it (with_serve), else a comment says it is left out."""
    path = Path(model).expanduser()
    if not _gguf_file(path):
        found.notes["vram"] = (f"not written: the engine reports the model {model}, not a GGUF "
                               "file readable here (the memory model reads its header)")
        return
    vram: dict[str, Any] = {"model": str(path.resolve())}
    if shape is not None and shape.count == 1 and shape.ctx_per_slot:
        vram["ctx_size"] = shape.ctx_per_slot  # one slot: its context is the whole
    live = "" if "ctx_size" in vram else " (the context is read live)"
    where = "" if path.is_absolute() else f" (the engine reports {model}, read from {os.getcwd()})"
    found.claims["vram"] = Found(vram, f"the served model file is readable here{where}{live}")
    if "spec_decode" in found.claims:
        found.notes["vram"] = (f"the draft is left out: the server drafts "
                               f"({found.claims['spec_decode'].why}) and no route names a draft "
                               "file; add draft: PATH (a draft model's GGUF) or mtp: true (an "
                               "MTP head), or pass its serve file with --serve")


def with_serve(found: Survey, serve: dict | None) -> None:
    """What a drafting server's serve file says its draft is, into the vram claim: no route
    names the draft file, and the memory model counts a draft model's weights and KV."""
    vram, parsed = found.claims.get("vram"), (serve or {}).get("parsed")
    if vram is None or parsed is None or "spec_decode" not in found.claims:
        return
    from pytest_frank.serve.gate import _local, _spec_types

    draft = parsed.get("draft") if "draft" in parsed.table.flags else None
    types = _spec_types(parsed)
    spec = f"--spec-type {','.join(sorted(types))} (--serve)"
    if draft is not None and draft.on and draft.text:
        said = f"{parsed.table.flags['draft'].name} {draft.text} (--serve)"
        path = _local(parsed, draft.text)
        if not _gguf_file(path):
            found.notes["vram"] = f"the draft is left out: {said} is not a GGUF file readable here"
            return
        vram.value["draft"], vram.why = str(path.resolve()), f"{vram.why}; the draft {said}"
    elif types & set(parsed.table.mtp_spec_values):
        vram.value["mtp"], vram.why = True, f"{vram.why}; {spec}"
    elif types and all(t.startswith("ngram") for t in types):
        vram.why += f"; {spec} drafts with no model"
    else:
        return
    found.notes.pop("vram", None)


def _effort_levels() -> dict[str, str]:
    """Each client level sent as itself: the map a fleet edits when its clients translate."""
    return {level: level for level in ("low", "medium", "high")}


def _generated(target: Target, found: Survey) -> None:
    """One short answer: whether reasoning comes separated."""
    reply = send(target, Request("Say hello.", 256))
    if not reply.ok:
        raise InitError(f"{reply.url} {reply.problem_line}: a plain chat request must work")
    if reply.reasoning.strip():
        found.claims["reasoning"] = Found(True, f"a reply carried reasoning in "
                                                f"{reply.reasoning_field or 'its own field'}")


def _tools(target: Target, found: Survey) -> None:
    """tools and agent only where one forced call came back as a call a strict client can use
    (the tools claim's own judge); a template that cannot carry tools is not asked."""
    from pytest_frank.claims.tools import CLOCK, PROMPTS, call_reply_problems, template_family
    from pytest_frank.runtime.chat import think_through

    said = target.driver.template.caps(_payloads(target)).get("tools")
    if said is not None and not said[0]:
        _no_tools(found, f"{said[1]}: the served template cannot carry tools (they would be "
                         "dropped from the prompt)")
        return
    reply = think_through(target, Request(PROMPTS["named"], TOOL_PROBE_TOKENS, tools=[CLOCK],
                                          tool_choice="required"))
    if not reply.ok:
        _no_tools(found, f"{FORCED}: {reply.problem_line}")
        return
    problems = call_reply_problems(reply, tools=[CLOCK])
    if problems:
        _no_tools(found, f"{FORCED} came back {_unusable(reply, problems)}"
                  + _family_fix(target.driver, reply.content))
        return
    why = f"{FORCED} came back as a valid {reply.calls[0].name} call"
    if said is None:  # the engine says nothing of its template: the battery asks auto too
        auto = send(target, Request(PROMPTS["named"], TOOL_PROBE_TOKENS, tools=[CLOCK],
                                   tool_choice="auto"))
        if not auto.ok:
            _no_tools(found, f"{why}, but tool_choice auto: {auto.problem_line}")
            return
        why += "; tool_choice auto answered 200"
    found.claims["tools"] = Found(True, f"{said[1]}; {why}" if said else why)
    family = template_family(target.driver, _payloads(target))
    if family:  # its own comment line: the evidence's line has no room left for it
        found.notes["tools"] = family
    found.claims["agent"] = Found(True, "tools are served: a tool result sent back must get an "
                                        "answer")
    _none(target, found)


def _none(target: Target, found: Survey) -> None:
    """tool_choice none, asked and judged as the battery does (test_tools_none): `tools: true`
    asks it, so a server that answers none with a call, or with the call written as text (the
    tools rendered into the prompt under none, as llama.cpp does), gets `none: false` and a
    comment with what it said, not a file whose first run fails on a claim init never tried."""
    from pytest_frank.claims import contract, tools
    from pytest_frank.claims.checks import Context
    from pytest_frank.claims.tools.choice_none import NONE
    from pytest_frank.outcome.verdict import Failure, Inconclusive

    seen = target.need(contract.tool_choice_none)
    try:
        if isinstance(seen, Unseen):
            raise Failure(seen.failure or "the probe broke")
        NONE.judge(seen, Context(target.endpoint, target.driver,
                                 tools.Options.on(target.endpoint)))
    except Inconclusive:
        return  # still thinking at the budget: the battery says so, and a run may settle it
    except Failure as failed:
        tried = found.claims["tools"]
        tried.value = {"none": False}
        fix = _said(failed.fix) if failed.fix else "see the tools claim's page"
        family = found.notes.get("tools")  # the family's line stays first
        found.notes["tools"] = (f"{family}\n" if family else "") + (
            f"none: false, as test_tools_none fails here:\n{_said(failed.line)}\n"
            f"fix, to ask it again: {fix}")


def _said(text) -> str:
    return " ".join(str(text).split())


def _unusable(reply, problems: list[str]) -> str:
    from pytest_frank.claims.replies import one_line
    from pytest_frank.claims.tools import NO_CALL

    if reply.thinking_cut:
        return f"cut while thinking, at {reply.generated} tokens, before any call"
    if getattr(problems[0], "cause", None) == NO_CALL:
        return (f"as text ({one_line(reply.content, 60)!r}, {reply.generated} tokens, "
                f"finish_reason {reply.finish!r}): the model never opened a call")
    return f"with no usable call: {'; '.join(problems)}"


def _family_fix(driver, content: str) -> str:
    """Where the content holds a call of a family the claim knows, its fix: the parser that
    family needs."""
    from pytest_frank.claims.tools import leaked_family, tool_parser_fix

    if leaked_family(content) is None:
        return ""
    fix = tool_parser_fix(driver, content)
    return f"\nfix: {_said(fix if isinstance(fix, str) else fix.render())}"


def _no_tools(found: Survey, why: str) -> None:
    found.notes["tools"] = f"not written: {why}"
    found.notes["agent"] = "not written: an agent step needs tools"


def _payloads(target: Target) -> dict:
    from pytest_frank.runtime.probes import slot_shape

    shape = target.need(slot_shape)
    return {} if isinstance(shape, Unseen) else shape.payloads


def inert(text: str, limit: int = 300) -> str:
    """Evidence for a YAML comment: one line, masked, no control characters."""
    return " ".join(redact.inert(text, limit).split())
