"""Which client profiles a fleet file offers (expect.clients): only those the server was shown
to answer as the battery asks. A profile's route must answer a short request; its typical first
request plus output budget must fit the context the server serves each conversation (counted
first, cheaply, so a profile far too big is not sent); then the profile is played, both turns,
and judged by the clients claim's own judge, and every turn's prompt (the tool result's turn
too: it carries the call and its result, and is the longer) plus the output budget must fit the
context. Clients send tools on every request, so none is offered where tools are not written."""

from __future__ import annotations

from pytest_frank.claims.clients import Options
from pytest_frank.claims.clients.judge import ROUTES, judge
from pytest_frank.claims.clients.play import Played, play, prompt_count, request_text
from pytest_frank.claims.clients.profile import Choices
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.claims.checks import Context
from pytest_frank.init.found import Found
from pytest_frank.outcome.observation import Unseen
from pytest_frank.outcome.verdict import Failure, Skip
from pytest_frank.runtime.chat import Request, send
from pytest_frank.runtime.target import Target

PROBE_TOKENS = 8
BYTES_PER_TOKEN = 4  # where the server cannot count: a real tokenizer's usual rate on prose


def offer(target: Target, found) -> None:
    """found.claims["clients"] with the profiles that were answered; the others noted."""
    from pytest_frank.runtime.probes import slot_shape

    if "tools" not in found.claims:
        found.notes["clients"] = "not written: coding clients send tools on every request"
        return
    shape = target.need(slot_shape)
    context = None if isinstance(shape, Unseen) else shape.ctx_per_slot
    answered: dict[str, str | None] = {}
    offered, left, sizes = [], [], []
    for name, profile in PROFILES.items():
        if profile.api not in answered:
            answered[profile.api] = _route(target, profile.api)
        refused = answered[profile.api]
        if refused is not None:
            left.append(f"{name} ({ROUTES[profile.api]} {refused})")
            continue
        need = _need(target, profile)
        if context is not None and need > context:
            left.append(f"{name} (its typical first request and output budget need ~{need} "
                        f"tokens, over the {context}-token context per slot)")
            continue
        played = play(target, name)
        counts, over = _counted(target, played, context)
        why = over or _judged(target, played)
        if why is not None:
            left.append(f"{name} ({why})")
            continue
        offered.append(name)
        sizes.append(f"{name} {', '.join(str(n) for n in counts)}")
    routes = sorted({ROUTES[PROFILES[n].api] for n in offered})
    if offered:
        fits = (f"; every turn fits the {context}-token context per slot (prompt tokens by "
                f"turn: {', '.join(sizes)})") if context else ""
        found.claims["clients"] = Found(offered, f"{', '.join(routes)} answered; each played "
                                                 f"and passed here{fits}")
    if left:
        found.notes["clients"] = "\n".join(["left out:", *left])  # a comment line each


def _route(target: Target, api: str) -> str | None:
    """None where a short request on the route is answered; else what came back."""
    reply = send(target, Request("Say hello.", PROBE_TOKENS, sampling=False), api=api)
    return None if reply.ok else reply.problem_line


def _need(target: Target, profile) -> int:
    """Tokens of the client's typical first request (the server's count where it has a tokenize
    route, else an estimate) plus its output budget."""
    first = profile.first(Choices())
    counted = None
    asked = target.driver.counting.tokenize_request(target.model_name(), request_text(first))
    if asked is not None:
        ex = target.post(*asked)
        counted = target.driver.counting.token_count(ex.json()) if ex.ok else None
    return (counted if counted is not None else first.size // BYTES_PER_TOKEN) + (
        first.budget or 0)


def _judged(target: Target, played: Played) -> str | None:
    """What the clients claim's judge says of the play: None where it passes."""
    try:
        judge(played, Context(target.endpoint, target.driver, Options.on(target.endpoint),
                              played.client))
    except Failure as failed:
        return "test_client fails here: " + " ".join(failed.message().split())
    except Skip as skipped:
        return f"test_client has no verdict here: {skipped.line}"
    return None


def _counted(target: Target, played: Played, context: int | None) -> tuple[list[int], str | None]:
    """Each turn's prompt tokens, as the clients claim counts the first's, and the first turn
    whose prompt plus the client's output budget outgrows the context per slot (None: none)."""
    budget, counts = played.first.budget or 0, list[int]()
    for n, step in enumerate(played.steps, 1):
        counted, by = prompt_count(target, step.reply, step.sent)
        if counted is None:
            return counts, f"turn {n}'s prompt could not be counted (no usage, no tokenize route)"
        counts.append(counted)
        if context is not None and counted + budget > context:
            return counts, (f"turn {n} needs {counted + budget} tokens ({counted} of prompt, counted by "
                            f"{by}{f' plus its output budget {budget}' if budget else ''}), "
                            f"over the {context}-token context per slot")
    return counts, None
