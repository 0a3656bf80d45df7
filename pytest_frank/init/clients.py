"""Which client profiles a fleet file offers (expect.clients): those whose route the server
answers (one short generation per route, the client's own: chat, messages, responses) and whose
typical first request plus output budget fits the context the server serves each conversation.
Clients send tools on every request, so none is offered where tools are not written."""

from __future__ import annotations

from pytest_frank.claims.clients.judge import ROUTES
from pytest_frank.claims.clients.play import request_text
from pytest_frank.claims.clients.profile import Choices
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.init.found import Found
from pytest_frank.outcome.observation import Unseen
from pytest_frank.runtime.chat import Request, send

PROBE_TOKENS = 8
BYTES_PER_TOKEN = 4  # where the server cannot count: a real tokenizer's usual rate on prose


def offer(target, found) -> None:
    """found.claims["clients"] with the profiles that would be answered; the others noted."""
    from pytest_frank.runtime.probes import slot_shape

    if "tools" not in found.claims:
        found.notes["clients"] = "not written: coding clients send tools on every request"
        return
    shape = target.need(slot_shape)
    context = None if isinstance(shape, Unseen) else shape.ctx_per_slot
    answered: dict[str, str | None] = {}
    offered, left = [], []
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
        offered.append(name)
    routes = sorted({ROUTES[PROFILES[n].api] for n in offered})
    if offered:
        fits = f"; each fits the {context}-token context per slot" if context else ""
        found.claims["clients"] = Found(offered, f"{', '.join(routes)} answered{fits}")
    if left:
        found.notes["clients"] = f"left out: {'; '.join(left)}"


def _route(target, api: str) -> str | None:
    """None where a short request on the route is answered; else what came back."""
    reply = send(target, Request("Say hello.", PROBE_TOKENS, sampling=False), api=api)
    return None if reply.ok else reply.problem_line


def _need(target, profile) -> int:
    """Tokens of the client's typical first request (the server's count where it has a tokenize
    route, else an estimate) plus its output budget."""
    first = profile.first(Choices())
    counted = None
    asked = target.driver.tokenize_request(target.model_name(), request_text(first))
    if asked is not None:
        ex = target.post(*asked)
        counted = target.driver.token_count(ex.json()) if ex.ok else None
    return (counted if counted is not None else first.size // BYTES_PER_TOKEN) + (
        first.budget or 0)
