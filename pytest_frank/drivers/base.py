"""What every engine driver answers; a check asks the driver and never names an engine."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pytest_frank.base import redact
from pytest_frank.drivers.anthropic_messages import MessagesWire
from pytest_frank.drivers.counting import Counting
from pytest_frank.drivers.launch import Launch
from pytest_frank.drivers.metrics import Metrics
from pytest_frank.drivers.openai_chat import ChatWire
from pytest_frank.drivers.openai_responses import ResponsesWire
from pytest_frank.drivers.protocols import (Behaviour, Facts, Identity, Parts, Readiness, Routes,
                                            Server, Wire)
from pytest_frank.drivers.template import Template
from pytest_frank.fleet import schema_errors
from pytest_frank.outcome.verdict import Setting, Wording
from pytest_frank.transport.http import Exchange
from pytest_frank.transport.wire import Logprob

# The routes a driver generates on besides chat (whose wire is the engine's own: _chat_wire).
WIRES: dict[str, type[Wire]] = {"messages": MessagesWire, "responses": ResponsesWire}


class Driver:
    """What every engine shares: identity, routes, auth, readiness, the engine's facts, and the
    wire of the route it generates on, held as a part (`wire`); each engine's driver sets or
    overrides what differs."""

    name: str  # fleet.yaml `engine:`
    label: str
    # How the engine gives itself away (pytest_frank.runtime.identify): /v1/models owned_by and its
    # /metrics prefix. None for shapes any engine may wear (a generic server, a proxy).
    owned_by: str | None = None
    metrics_prefix: str | None = None
    health_path: str
    models_path = "/v1/models"
    # The engine's server settings a claim's advice names, by role (parallel, ctx, jinja, ...),
    # and the words that ask for one ("start llama-server with "); None: not known here.
    flags: dict[str, Setting] = {"parallel": Setting("the server's concurrency setting")}
    start: str | Wording | None = None
    # Where the engine says which build it is, and the key that holds it (the reports' header).
    build_route: tuple[str, str] | None = None
    # What that key holds where the build carries no version (one made outside the engine's own
    # source tree); None: every build says its version.
    unversioned_build: str | None = None

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def readiness(self, ex: Exchange) -> Readiness:
        if ex.error:
            return Readiness("down", self.reason(ex))
        if ex.status == 200:
            return Readiness("ready")
        if self._is_loading(ex):
            return Readiness("loading", f"{ex.status} {self.error_message(ex) or ex.snippet(120)}")
        return Readiness("down", self.reason(ex))

    def reason(self, ex: Exchange) -> str:
        """One line: why an exchange is not the answer wanted (no answer, or an error status)."""
        if ex.error and ex.status is None:
            return ex.error
        if ex.status is not None and 300 <= ex.status < 400:
            where = ex.headers.get("location", "nowhere (no Location header)")
            return (f"answered {ex.status}, a redirect to {where}: not followed (a key must "
                    "not travel to a host fleet.yaml does not name)")
        said = self.error_message(ex) or ex.snippet(200).strip()
        if ex.error:  # an answer that began and was cut: say both, the cut last
            return f"answered {ex.status}: {said} [{ex.error}]" if said else \
                f"answered {ex.status}, then {ex.error}"
        return f"answered {ex.status}: {said or '(empty body)'}"

    # JSON shapes of the routes the driver reads, checked before use: an endpoint that sends a
    # list, a number or "lots" where an object or integer belongs gets one line that says where.
    _shapes: dict[str, dict] = {
        "/v1/models": {"type": "object", "required": ["data"], "properties": {"data": {
            "type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "string"}, "max_model_len": {"type": "integer"}}}}}},
    }

    def shape_problem(self, route: str, payload) -> str | None:
        """Why a route's JSON is not the shape this driver reads; None when it is."""
        schema = self._shapes.get(route)
        if schema is None:
            return None
        if payload is None:
            return f"GET {route}: not JSON"
        found = schema_errors.problems(schema, payload)
        if not found:
            return None
        return f"GET {route}: {found[0].where or 'the body'}: {found[0].reason}"

    def _is_loading(self, ex: Exchange) -> bool:
        return False

    # -- the engine's own facts against what a reply claims (a gateway in front rewrites one) ---
    # Whether the engine's replies name the model as its models route serves it (llama.cpp names
    # its alias whatever was asked; vLLM the served name asked for): a reply that names another
    # went through something that renamed it. False where proxies and generic servers may name
    # any model.
    _names_served_model = False

    def reply_disagrees(self, body: str, payloads: dict) -> tuple[list[tuple[str, str]], list[str]]:
        """The engine's own facts (`payloads`: its slot routes' JSON, as the slot shape read
        them) that a reply's body (JSON, or an event stream) contradicts, each as (what the
        engine says, what the reply says), and the facts that were compared."""
        claims, found, compared = reply_claims(body), [], []
        models = payloads.get(self.models_path)
        try:
            served = self.served_ids(models) if models is not None else []
        except ValueError:
            served = []
        named = claims.get("model")
        if self._names_served_model and served and isinstance(named, str):
            compared.append(f"the model the reply names against {self.models_path}")
            if named not in served:
                found.append((f"{self.models_path} serves {', '.join(map(repr, served[:4]))}",
                              f"the reply names {redact.cut(named, 60)!r}"))
        return found, compared

    def served_ids(self, payload) -> list[str]:
        """The model names a client may ask for, from the models route."""
        cards = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(cards, list):
            raise ValueError("no `data` list of model cards")
        return [c["id"] for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)]

    def error_message(self, ex: Exchange) -> str | None:
        """The server's own error text from an OpenAI-style `{"error": {"message": ...}}` body."""
        body = ex.json()
        if not isinstance(body, dict):
            return None
        err = body.get("error", body.get("detail"))
        if isinstance(err, dict):
            err = err.get("message")
        text = err or body.get("message")
        return redact.squeeze(str(text)) if text else None

    # -- slots: how many conversations at once, and the context each one gets ------------------
    slot_routes: tuple[str, ...] = ("/v1/models",)

    # The context a refusal of a long prompt names: OpenAI's words, which vLLM copies ("This
    # model's maximum context length is 4096 tokens. However, you requested ..."); engines that
    # word it otherwise say so in their driver.
    _context_refused = re.compile(r"maximum context length is (\d+) tokens")

    def context_cap(self, message: str | None) -> int | None:
        """The context a refused long prompt's answer names, where it names one."""
        found = self._context_refused.search(message or "")
        return int(found.group(1)) if found else None

    # What the engine does with a slot context past the model's training context, where it
    # caps it (then `ctx_train` reads the training context; None: not capped, or not said).
    ctx_train_cap: str | None = None

    def ctx_train(self, payloads: dict) -> int | None:
        """The model's training context from the slot routes' payloads, where reported."""
        return None

    def slot_shape(self, payloads: dict) -> tuple[int | None, int | None, str]:
        """(slot count, context per slot, where it was read); None where the engine doesn't say."""
        cards = (payloads.get("/v1/models") or {}).get("data") or []
        lengths = [n for c in cards
                   if isinstance(c, dict) and isinstance(n := c.get("max_model_len"), int)]
        return None, (max(lengths) if lengths else None), "/v1/models max_model_len"

    # -- load: how busy it is, how soon it drops a request given up on -------------------------
    load_slots_route: str | None = None  # where the engine lists its slots, busy or idle
    # Seconds with no traffic the engine needs to notice a closed connection and stop the
    # generation (0: it notices at once).
    abandon_quiet_s = 0.0

    def busy_slots(self, payload) -> tuple[int, int] | None:
        """(slots busy, slots) from the slots route's answer; None when it is not one."""
        return None

    def decoded_tokens(self, payload) -> int | None:
        """Tokens the busy slots have generated so far, from the slots route; None: unsaid."""
        return None

    # -- vram and drift: the model file the engine loaded --------------------------------------
    # Routes the drift check reads beside the slot and model routes (SGLang's server info).
    drift_routes: tuple[str, ...] = ()

    def served_model_path(self, payloads: dict) -> str | None:
        """The model file the engine reports loading, from the routes the drift check read."""
        return None

    # -- parts: what an engine has or has not, each answering "unknown" where it has not ------
    # The chat template it serves (drivers.template), the routes that count a prompt
    # (drivers.counting), how it is started (drivers.launch) and what it counts in /metrics and
    # its replies (drivers.metrics). Every driver holds each: a reader asks every engine alike,
    # and the base part's "unknown" (None, {}) is what it already handles for an engine that
    # does not say, so no call site branches on a missing part.
    template: Template = Template()
    metrics: Metrics = Metrics()
    counting: Counting = Counting()
    launch: Launch = Launch()

    # -- generation: the route it generates on, a part the driver holds (`wire`, a
    # drivers.protocols.Wire), chosen by fleet.yaml `api:` ------------------------------------
    _default_api = "chat"  # the route it generates on where fleet.yaml names none
    # Its chat completions route as this engine serves it: an engine whose chat route differs
    # (how an image may travel, where reasoning comes, the sampling fields) passes its own.
    _chat_wire = ChatWire()
    # The driver that serves this one's other routes: its own engine (None), or the generic
    # shape for a driver whose own route is not chat (a proxy's other routes are generic).
    _other_routes: type[Driver] | None = None

    def __init__(self, api: str | None = None) -> None:
        route = api or self._default_api
        self.wire: Wire = WIRES[route]() if route in WIRES else self._chat_wire

    @property
    def api(self) -> str:
        return self.wire.api

    def with_api(self, api: str | None) -> Driver:
        """This driver generating on another route (fleet.yaml `api:`, a client profile): the
        same engine holding that route's wire."""
        if api is None or api == self.api:
            return self
        return (self._other_routes or type(self))(api)

    keep_generating: dict = {}  # request params that keep a model writing past its natural end

    # -- fingerprint: a repeat of a greedy request computed as the first one was -----------------
    def uncached(self) -> dict:
        """Request params that keep one request off the prefix another one left cached, so a
        repeat is computed from scratch as the first was; {} where the API has no switch (the
        fingerprint's tolerance then covers what a reused prefix moves)."""
        return {}

    def unmeasured(self, token: Logprob) -> bool:
        """A token that came without a logprob of its own: asked for an alternative, it has
        none, and its logprob is exactly 0.0. llama.cpp sends the tokens a drafting server took
        from its draft that way (a proxy in front passes them on as they are)."""
        return token.logprob == 0.0 and token.top == 0

    # -- vision --------------------------------------------------------------------------------
    vision_advert_path: str | None = None  # where the engine says whether it can see
    _no_projector_markers: tuple[str, ...] = ("image input is not supported",
                                             "is not a multimodal model")

    def vision_advertised(self, payload) -> bool | None:
        return None

    def no_projector(self, reply) -> bool:
        """An error answer to an image that says the model has no vision at all."""
        text = (reply.problem or "").lower()
        return reply.status is not None and reply.status >= 400 and any(
            m in text for m in self._no_projector_markers)

    # -- generation battery: reasoning, reasoning_effort, tools (pytest_frank.runtime.chat) ----
    honours_named_tool_choice = True  # OpenAI's {"type":"function","function":{"name":...}}
    # The tool-call parser a server flag names for each call family the tools claim recognises
    # in leaked markup (pytest_frank.claims.tools FAMILIES); empty where the engine's parsers
    # are not known here, or where the template, not a flag, picks the parser.
    call_family_parsers: Mapping[str, str] = MappingProxyType({})
    # Family -> the server's reasoning parser for it, where a flag picks one per family.
    reasoning_parsers: Mapping[str, str] = MappingProxyType({})
    # The call family whose calls the engine takes out of the reply and sends nowhere when no
    # tool-call parser is set (it answers such a request 200 instead of refusing the tools).
    drops_unparsed_calls: str | None = None
    # The malformed requests (pytest_frank.claims.contract's case keys) the engine itself is
    # known to answer 200: where one comes back so, the failure names the engine, not a proxy.
    lenient_requests: frozenset[str] = frozenset()
    refused_requests: frozenset[str] = frozenset()  # and the valid ones it refuses
    # The fields of its API's published contract (the SDKs' types) the engine itself is known
    # to leave out, as "<event type or reply>:<field path>" patterns (fnmatch) per route: the
    # contract claim notes these instead of failing them. Only absence: a field sent of
    # another type is judged all the same.
    contract_gaps: Mapping[str, tuple[str, ...]] = MappingProxyType({})


if TYPE_CHECKING:
    def _every_driver_answers_each(driver: Driver) -> tuple[
            Facts, Identity, Routes, Server, Behaviour, Parts, Wire]:
        """Never called: the type checker fails here where `Driver` stops answering one."""
        return driver, driver, driver, driver, driver, driver, driver.wire

    def _every_wire_answers(chat: ChatWire, messages: MessagesWire,
                            responses: ResponsesWire) -> tuple[Wire, Wire, Wire]:
        """Never called: the type checker fails here where a route's wire stops answering
        `Wire` (`driver.wire` is typed as the protocol, so this is where each is held to it)."""
        return chat, messages, responses


def reply_claims(body: str) -> dict[str, Any]:
    """What a reply says of itself, from a JSON body or an event stream's chunks (the first
    value of each key; usage and engine fields from the last chunk that has them): `model`,
    `system_fingerprint`, `usage`, `timings`."""
    import json

    chunks: list[Any] = []
    text = body.strip()
    if text.startswith("{"):
        try:
            chunks = [json.loads(text)]
        except (ValueError, RecursionError):
            chunks = []
    else:
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    chunks.append(json.loads(line[5:]))
                except (ValueError, RecursionError):
                    continue
    out: dict[str, Any] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        # a Messages stream's message_start holds its message, a Responses stream's events
        # their response
        inner: dict = next((chunk[k] for k in ("message", "response") if isinstance(chunk.get(k), dict)),
                     {})
        for key in ("model", "system_fingerprint"):
            value = chunk.get(key, inner.get(key))
            if key not in out and value is not None:
                out[key] = value
        for key in ("usage", "timings"):
            if isinstance(chunk.get(key), dict):
                out[key] = chunk[key]
    return out
