"""What a claim asks of a driver, by capability: the facts a fix names, the routes the engine
serves beside generation, the wire a route generates on, and its /metrics. A claim's helper
takes the one it needs, so the type checker shows what it reads (and flags a member of another
capability read there); every driver answers Facts, Routes and Metrics and holds its Wire as a
part, `driver.wire`, one per route (each checked in drivers.base)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_frank.outcome.verdict import Setting, Wording
from pytest_frank.transport.http import Exchange
from pytest_frank.transport.wire import Reply, Request


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
    """The engine's routes beside generation: health, models, slots, rendering and counting a
    prompt; None where the engine has no such route."""

    health_path: str
    models_path: str
    slot_routes: tuple[str, ...]
    drift_routes: tuple[str, ...]
    render_route: str | None
    chat_count_route: str | None
    vision_advert_path: str | None

    def auth_headers(self, api_key: str | None) -> dict[str, str]: ...
    def readiness(self, ex: Exchange) -> Readiness: ...
    def reason(self, ex: Exchange) -> str: ...
    def error_message(self, ex: Exchange) -> str | None: ...
    def served_ids(self, payload: Any) -> list[str]: ...
    def shape_problem(self, route: str, payload: Any) -> str | None: ...
    def tokenize_request(self, model: str, text: str,
                         special: bool = False) -> tuple[str, dict] | None: ...
    def chat_tokenize_request(self, model: str, messages: list[dict],
                              tools: list[dict] | None = None) -> tuple[str, dict] | None: ...
    def token_count(self, payload: Any) -> int | None: ...
    def render_request(self, model: str, messages: list[dict],
                       tools: list[dict] | None = None) -> tuple[str, dict] | None: ...
    def rendered_prompt(self, payload: Any) -> str | None: ...


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


class Metrics(Protocol):
    """The engine's /metrics and what it counts: drafting, the prefix cache, load, the KV pool;
    None or empty where the engine does not report it."""

    metrics_path: str
    metrics_off_statuses: tuple[int, ...]
    spec_series: tuple
    prefix_cache_counters: tuple[tuple[str, str], ...]
    load_series: tuple[str, str] | None
    kv_pool_route: str | None
    draft_counts_from: str
    draft_counts_where: str
    speculative_source: str

    def draft_counts(self, engine: dict) -> tuple[int, int] | None: ...
    def cached_prompt(self, reply: Any) -> tuple[int, int, str] | None: ...
    def speculative_live(self, payloads: dict) -> bool | None: ...
    def kv_pool(self, metrics_text: str) -> Any: ...
