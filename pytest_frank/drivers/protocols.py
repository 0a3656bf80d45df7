"""What a claim asks of a driver, by capability: the facts a fix names, how the engine gives
itself away, the routes it serves beside generation, what its running server says, what it is
known to do with a request, and the parts it holds (the wire a route generates on, its chat
template, its prompt counting, how it is started, what it counts in /metrics). A claim's helper
takes the one it needs, so the type checker shows what it reads (and flags a member of another
capability read there). Every member of a driver read outside drivers/ is one of these, and
every member read of a part is its type's (tests/package/test_driver_members.py holds both).
Every driver answers each protocol (checked in drivers.base); a part an engine lacks answers
"unknown" (drivers.template, .counting, .launch, .metrics)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_frank.drivers.counting import Counting
from pytest_frank.drivers.launch import Launch
from pytest_frank.drivers.metrics import Metrics
from pytest_frank.drivers.template import Template
from pytest_frank.outcome.verdict import Setting, Wording
from pytest_frank.transport.http import Exchange
from pytest_frank.transport.wire import Logprob, Reply, Request


@dataclass
class Readiness:
    state: str  # "ready" | "loading" | "down"
    problem: str | None = None  # why it is not ready: the last answer, or why none came


class Facts(Protocol):
    """What a fix names: the engine, the route it generates on, its server settings by role
    (`flags`) and the words that start it (`start`; None: not known here)."""

    name: str
    label: str
    flags: dict[str, Setting]
    start: str | Wording | None

    @property
    def api(self) -> str: ...  # the route its wire generates on


class Routes(Protocol):
    """The engine's routes beside generation: health, models, slots, drift, vision; None where
    the engine has no such route (counting and rendering a prompt: the `counting` part)."""

    health_path: str
    models_path: str
    slot_routes: tuple[str, ...]
    drift_routes: tuple[str, ...]
    vision_advert_path: str | None

    def auth_headers(self, api_key: str | None) -> dict[str, str]: ...
    def readiness(self, ex: Exchange) -> Readiness: ...
    def reason(self, ex: Exchange) -> str: ...
    def error_message(self, ex: Exchange) -> str | None: ...
    def served_ids(self, payload: Any) -> list[str]: ...
    def shape_problem(self, route: str, payload: Any) -> str | None: ...


class Wire(Protocol):
    """The route a driver generates on (chat, messages, responses), a part the driver holds
    (`driver.wire`): its official client, the request params it takes and how a reply and an
    agent's history read on it. Read-only: one wire serves every endpoint of its engine."""

    @property
    def api(self) -> str: ...  # the route: chat, messages or responses
    @property
    def api_shape(self) -> str: ...  # which official client speaks it: openai or anthropic
    # What sdk_client and the first request import: a fleet takes them ahead (FrankSession.warm).
    @property
    def sdk_modules(self) -> tuple[str, ...]: ...
    @property
    def image_forms(self) -> tuple[str, ...]: ...  # an image's forms: data_url, base64, anthropic
    # Where a reply carries reasoning, in the order read; fleet.yaml `reasoning.field` wins.
    @property
    def reasoning_fields(self) -> tuple[str, ...]: ...
    # The fields of an assistant message clients send a previous turn's reasoning back in
    # (test_agent_reasoning_history asks each; `thinking`: the Messages API's thinking blocks);
    # empty where the route's history carries it otherwise (the Responses API's reasoning items).
    @property
    def history_reasoning_fields(self) -> tuple[str, ...]: ...
    @property
    def shape_params(self) -> frozenset[str]: ...  # the request parameters of the API shape
    @property
    def budget_keys(self) -> tuple[str, ...]: ...  # the fields an answer's budget may be sent in
    # The sampling fields the route takes (n: several choices)
    @property
    def sampling_fields(self) -> tuple[str, ...]: ...

    # The official client on the recorded HTTP client (endpoint, http_client, timeout).
    def sdk_client(self, endpoint: Any, http_client: Any, timeout: float) -> Any: ...
    # One request on the wire (errors raise, as the SDK raises).
    def converse(self, sdk: Any, model: str, req: Request,
                 clock: Callable[[], float]) -> Reply: ...
    # (messages so far, the assistant reply that called tools, each call's result as JSON text):
    # the history of an agent's next turn in this API shape
    def agent_history(self, messages: list[dict], reply: Reply,
                      results: list[str]) -> list[dict]: ...
    def count_tokens(self, sdk: Any, model: str, req: Request) -> int | None: ...  # API's route
    # The request params a check adds, by what it asks (alphabetical): a reasoning_effort level,
    # an image part (b64, mime, form), each token's logprob with `top` alternatives, a
    # chat-shaped response_format, fleet.yaml's sampling, a stop string, thinking switched off
    # or asked for (max_tokens)
    def effort(self, value: str) -> dict: ...
    def image_part(self, b64: str, mime: str, form: str) -> dict: ...
    def logprobs(self, top: int) -> dict: ...
    def response_format(self, fmt: dict) -> dict: ...
    def sampling(self, sampling: dict) -> dict: ...
    def stop_param(self, stop: str) -> dict: ...
    def thinking_off(self) -> dict: ...
    def thinking_on(self, max_tokens: int) -> dict: ...


class Identity(Protocol):
    """How the engine gives itself away (runtime.identify): its /v1/models owned_by, its
    /metrics prefix, where it says its build and what an unversioned build says; None for a
    shape any engine may wear (a generic server, a proxy)."""

    owned_by: str | None
    metrics_prefix: str | None
    build_route: tuple[str, str] | None
    unversioned_build: str | None


class Server(Protocol):
    """What the running server's own routes say of it: slots and the context of each, the
    training context, a refusal's context, how busy it is, the model file it loaded, whether
    it can see, and the facts a reply claims against them; None where the engine does not say."""

    ctx_train_cap: str | None
    load_slots_route: str | None
    abandon_quiet_s: float

    def slot_shape(self, payloads: dict) -> tuple[int | None, int | None, str]: ...
    def ctx_train(self, payloads: dict) -> int | None: ...
    def context_cap(self, message: str | None) -> int | None: ...
    def busy_slots(self, payload: Any) -> tuple[int, int] | None: ...
    def decoded_tokens(self, payload: Any) -> int | None: ...
    def served_model_path(self, payloads: dict) -> str | None: ...
    def vision_advertised(self, payload: Any) -> bool | None: ...
    def reply_disagrees(self, body: str,
                        payloads: dict) -> tuple[list[tuple[str, str]], list[str]]: ...


class Behaviour(Protocol):
    """What the engine is known to do with a request: the params that keep it writing or keep a
    request off the cache, a token it sends unmeasured, an image refused for want of vision,
    the tool and reasoning parsers a flag names per call family, the malformed requests it
    takes and the valid ones it refuses, and the contract fields it leaves out."""

    keep_generating: dict
    honours_named_tool_choice: bool
    call_family_parsers: Mapping[str, str]
    reasoning_parsers: Mapping[str, str]
    drops_unparsed_calls: str | None
    lenient_requests: frozenset[str]
    refused_requests: frozenset[str]
    contract_gaps: Mapping[str, tuple[str, ...]]

    def uncached(self) -> dict: ...
    def unmeasured(self, token: Logprob) -> bool: ...
    def no_projector(self, reply: Any) -> bool: ...


class Parts(Protocol):
    """The parts a driver holds, each one an engine has or answers "unknown" for: the wire of
    the route it generates on, its chat template, its prompt counting, how it is started and
    what it counts (/metrics); and the same engine on another route's wire."""

    wire: Wire
    template: Template
    counting: Counting
    launch: Launch
    metrics: Metrics

    def with_api(self, api: str | None) -> Parts: ...
