"""What a claim asks of a driver, by capability: the facts a fix names, the routes the engine
serves beside generation, the wire a route generates on, and its /metrics. A claim's helper
takes the one it needs, so the type checker shows what it reads (and flags a member of another
capability read there); every driver answers all four (`Driver`, checked below)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pytest_frank.transport.http import Exchange
from pytest_frank.outcome.verdict import Setting, Wording
from pytest_frank.transport.wire import Logprob, Reply

if TYPE_CHECKING:
    from pytest_frank.drivers.base import Driver, Readiness


class Facts(Protocol):
    """What a fix names: the engine, the route it generates on, its server settings by role
    (`flags`) and the words that start it (`start`; None: not known here)."""

    name: str
    label: str
    api: str
    flags: dict[str, Setting]
    start: str | Wording | None


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
    """The route a driver generates on (chat, messages, responses): its official client, the
    request params it takes and how a reply and an agent's history read on it."""

    api: str
    api_shape: str
    sdk_modules: tuple[str, ...]
    image_forms: tuple[str, ...]
    reasoning_fields: tuple[str, ...]
    history_reasoning_fields: tuple[str, ...]
    shape_params: frozenset[str]
    budget_keys: tuple[str, ...]
    sampling_fields: tuple[str, ...]
    keep_generating: dict
    engine_keys: tuple[str, ...]
    # the request params a check adds, by what it asks (alphabetical; Driver says each one)
    effort: Callable[[str], dict]
    image_part: Callable[[str, str, str], dict]
    logprobs: Callable[[int], dict]
    response_format: Callable[[dict], dict]
    sampling: Callable[[dict], dict]
    stop_param: Callable[[str], dict]
    thinking_off: Callable[[], dict]
    thinking_on: Callable[[int], dict]
    # one request, an agent's next history and a prompt's count on this route
    converse: Callable[..., Reply]
    agent_history: Callable[[list[dict], Reply, list[str]], list[dict]]
    count_tokens: Callable[..., int | None]

    def engine_fields(self, extra: dict) -> dict: ...
    def unmeasured(self, token: Logprob) -> bool: ...


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


if TYPE_CHECKING:
    def _every_driver_answers_each(driver: Driver) -> tuple[Facts, Routes, Wire, Metrics]:
        """Never called: the type checker fails here where `Driver` stops answering one."""
        return driver, driver, driver, driver
