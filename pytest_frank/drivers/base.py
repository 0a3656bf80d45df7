"""What every engine driver answers; a check asks the driver and never names an engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_frank import metrics, schema_errors
from pytest_frank.drivers import openai_chat
from pytest_frank.drivers.anthropic_messages import MessagesWire
from pytest_frank.drivers.openai_responses import ResponsesWire
from pytest_frank.http import Exchange
from pytest_frank.verdict import InEffect, Phrase, Setting, Text
from pytest_frank.wire import Logprob

STATUS_FIXES = {
    401: "the server wants a key: set `api_key` for this endpoint in fleet.yaml (e.g. "
         "api_key: ${ENDPOINT_KEY}), or check the one set there",
    403: "the server refused the key: check `api_key` for this endpoint in fleet.yaml",
    404: "nothing of the engine's answers on that path: check `url` in fleet.yaml (host, port, "
         "and whether a proxy expects a path before /v1) and `engine`",
    **dict.fromkeys((301, 302, 303, 307, 308), "set `url` in fleet.yaml to where the redirect "
                    "points, if that host is the endpoint"),
}


@dataclass
class Readiness:
    state: str  # "ready" | "loading" | "down"
    problem: str | None = None  # why it is not ready: the last answer, or why none came


class Driver:
    """The generic OpenAI-compatible server; engines override what differs."""

    name = "openai"
    label = "OpenAI-compatible server"
    # How the engine gives itself away (pytest_frank.identify): /v1/models owned_by and its
    # /metrics prefix. None for shapes any engine may wear (a generic server, a proxy).
    owned_by: str | None = None
    metrics_prefix: str | None = None
    health_path = "/v1/models"  # a generic server has no health route; a model list is the proof
    models_path = "/v1/models"
    alias_flag = "the server's model name setting"
    # Where the engine says which build it is, and the key that holds it (the reports' header).
    build_route: tuple[str, str] | None = None

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def readiness(self, ex: Exchange) -> Readiness:
        if ex.error:
            return Readiness("down", self.reason(ex))
        if ex.status == 200:
            return Readiness("ready")
        if self.is_loading(ex):
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
    shapes: dict[str, dict] = {
        "/v1/models": {"type": "object", "required": ["data"], "properties": {"data": {
            "type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "string"}, "max_model_len": {"type": "integer"}}}}}},
    }

    def shape_problem(self, route: str, payload) -> str | None:
        """Why a route's JSON is not the shape this driver reads; None when it is."""
        schema = self.shapes.get(route)
        if schema is None:
            return None
        if payload is None:
            return f"GET {route}: not JSON"
        found = schema_errors.problems(schema, payload)
        if not found:
            return None
        return f"GET {route}: {found[0].where or 'the body'}: {found[0].reason}"

    def is_loading(self, ex: Exchange) -> bool:
        return False

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
        return " ".join(str(text).split()) if text else None

    def alias_fix(self, alias: str, served: list[str]) -> Text:
        """Serve `alias` beside the names served now (clients may use those too)."""
        return f"serve it under that name ({self.alias_flag} {alias})"

    # -- slots: how many conversations at once, and the context each one gets ------------------
    slot_routes: tuple[str, ...] = ("/v1/models",)
    parallel_flag = Setting("the server's concurrency setting")
    unify_hint: Text = "give each sequence the whole context"

    # fleet.yaml `launch:` keys as the server settings they make, with launch's defaults:
    # what a launched endpoint has in effect, so no fix asks for it again.
    launch_settings: dict[str, Setting] = {}
    launch_defaults: dict[str, Any] = {}

    def settings_in_effect(self, launch: dict | None, parsed=None) -> InEffect:
        """Server flag -> value in effect (None for a switch that is on), from a `launch:`
        block and a parsed serve command (serve.flags.Parsed)."""
        found: dict[str, str | None] = {}
        for key, setting in self.launch_settings.items() if launch else ():
            value = (launch or {}).get(key, self.launch_defaults.get(key))
            if value is None or value is False:
                continue
            value = ",".join(map(str, value)) if isinstance(value, list) else value
            found[setting.flag] = None if setting.switch else str(value)
        for role in parsed.values if parsed is not None else ():
            v, flag = parsed.get(role), parsed.table.flags[role]
            if v is not None and v.on:
                found.update(dict.fromkeys(flag.names, None if flag.takes == "none" else v.text))
        return found

    def slots_fix(self, count: int, per_slot: int | None) -> Text:
        """How to serve `count` conversations at once, each keeping `per_slot` of context."""
        return Phrase("set ", self.parallel_flag(count))

    def more_context_fix(self, per_slot: int, count: int | None) -> Text:
        """How to give each of `count` conversations `per_slot` tokens of context."""
        return self.slots_fix(count or 1, per_slot)

    # What the engine does with a slot context past the model's training context, where it
    # caps it (then `ctx_train` reads the training context; None: not capped, or not said).
    ctx_train_cap: str | None = None

    def ctx_train(self, payloads: dict) -> int | None:
        """The model's training context from the slot routes' payloads, where reported."""
        return None

    def ctx_train_fix(self, ctx_train: int, want: int) -> Text:
        return (f"serve a model trained on at least {want} tokens, or set "
                f"expect.slots.ctx_per_slot to {ctx_train} (what this model holds)")

    def slot_shape(self, payloads: dict) -> tuple[int | None, int | None, str]:
        """(slot count, context per slot, where it was read); None where the engine doesn't say."""
        cards = (payloads.get("/v1/models") or {}).get("data") or []
        lengths = [n for c in cards
                   if isinstance(c, dict) and isinstance(n := c.get("max_model_len"), int)]
        return None, (max(lengths) if lengths else None), "/v1/models max_model_len"

    # -- sizing and load: the server's own token count, how busy it is, how soon it drops a
    # request given up on ---------------------------------------------------------------------
    # Series in /metrics: requests running and requests queued for a slot (None: not reported).
    load_series: tuple[str, str] | None = None
    load_slots_route: str | None = None  # where the engine lists its slots, busy or idle
    # Seconds with no traffic the engine needs to notice a closed connection and stop the
    # generation (0: it notices at once).
    abandon_quiet_s = 0.0

    def tokenize_request(self, model: str, text: str) -> tuple[str, dict] | None:
        """(route, body) that asks the server to count `text` in its own tokens; None where it
        cannot."""
        return None

    def token_count(self, payload) -> int | None:
        """The count from the tokenize route's answer; None when it is not one."""
        return None

    def busy_slots(self, payload) -> tuple[int, int] | None:
        """(slots busy, slots) from the slots route's answer; None when it is not one."""
        return None

    def backend(self, payloads: dict, log: str) -> tuple[str, str] | None:
        """("cpu" or "gpu", where read) from the slot routes' payloads or the server's log;
        None where neither says."""
        return None

    # What a slow server is told to check, by what it runs on.
    slow_gpu_hint = ("that every layer runs on the GPU, that speculative decoding is engaged, "
                     "and that no other load shares the card")
    slow_cpu_hint = ("the server runs on the CPU, where speed is bound by cores and memory "
                     "bandwidth: give it more threads (the physical cores), serve a smaller "
                     "quant or model, or move it to a GPU; check that no other load shares the "
                     "machine")

    def decoded_tokens(self, payload) -> int | None:
        """Tokens the busy slots have generated so far, from the slots route; None: unsaid."""
        return None

    # -- vram: the model file the engine loaded, its KV pool, what unexpected memory means ------
    kv_pool_route: str | None = None  # where the engine describes a preallocated KV pool
    vram_high_fix: Text = ("the usual causes: a draft that loads the whole model a second time (a "
                     "draft model pointed at a file that already carries an MTP head), mmap off "
                     "(weights copied into anonymous memory), or another process on the GPU")
    vram_low_fix: Text = ("the KV pool is smaller than configured (the server clamped the context or "
                    "cache to fit), layers run on the CPU, or the cache types are smaller than "
                    "expect.vram says; read the server's load log for the context it allocated")

    # Routes the drift check reads beside the slot and model routes (SGLang's server info).
    drift_routes: tuple[str, ...] = ()

    def served_model_path(self, payloads: dict) -> str | None:
        """The model file the engine reports loading, from the routes the drift check read."""
        return None

    def kv_pool(self, metrics_text: str):
        """A vram.KVPool from the engine's metrics text, where it preallocates one; else None."""
        return None

    # -- generation: the official client and wire format of the API shape ---------------------
    api = "chat"  # the route it generates on by default: chat, messages or responses
    api_shape = "openai"  # which official client speaks to it: "openai" or "anthropic"

    def with_api(self, api: str | None) -> Driver:
        """This driver generating on another route (fleet.yaml `api:`, a client profile): the
        route's wire replaces the default one; an engine whose own route is not chat lends the
        others to a generic server (a proxy's other routes are the generic shape's)."""
        if api is None or api == self.api:
            return self
        base = type(self) if self.api == "chat" else Driver
        wire = _wires().get(api)
        if wire is None:
            return base()
        return type(f"{base.__name__}On{wire.__name__}", (wire, base), {})()
    keep_generating: dict = {}  # request params that keep a model writing past its natural end
    engine_keys: tuple[str, ...] = ("timings",)  # reply fields past the API (llama.cpp's timings)

    # -- params: the request parameters of the API shape, and where each one is lost ---------
    shape_params = frozenset({"max_tokens", "stop", "response_format", "logprobs",
                              "stream_usage", "context_limit"})
    budget_keys: tuple[str, ...] = ("max_tokens", "max_completion_tokens")
    structured_output_fix: Text = ("update the engine: it accepts response_format without "
                                   "enforcing it; a proxy in front must pass the field through")
    stop_fix: Text = ("update the engine (stop strings are applied to the answer, and cut from it); "
                      "a proxy in front must pass `stop` through")
    budget_cut_fix: Text = ("update the engine, or the proxy in front that rewrites finish_reason: "
                            "an answer cut by the budget must end with finish_reason \"length\" "
                            "(stop_reason \"max_tokens\")")
    logprobs_fix: Text = ("update the engine; a proxy in front must pass logprobs and "
                          "top_logprobs through")
    context_fix: Text = ("the engine must refuse a prompt longer than its context (a 400 that "
                         "names the limit), not truncate it or answer empty: update it, or "
                         "turn off prompt truncation in the proxy or server")

    def stop_param(self, stop: str) -> dict:
        return {"stop": [stop]}

    def response_format(self, fmt: dict) -> dict:
        """Request params for a chat-shaped response_format (json_schema)."""
        return {"response_format": fmt}

    def logprobs(self, top: int) -> dict:
        """Request params that ask each token's logprob and `top` alternatives."""
        return {"logprobs": True, "top_logprobs": top}

    def count_tokens(self, sdk, model: str, req) -> int | None:
        """The prompt's tokens by the API's own counting route; None: the shape has none (the
        OpenAI shape; test_params_count_tokens is not collected for it)."""
        return None

    # What sdk_client and the first request import: a fleet takes them ahead (FrankSession.warm).
    sdk_modules: tuple[str, ...] = ("openai", "openai.resources.chat")

    def sdk_client(self, endpoint, http_client, timeout: float):
        return openai_chat.client(endpoint, http_client, timeout)

    def converse(self, sdk, model: str, req, clock):
        """One request on the wire; returns a wire.Reply (errors raise, as the SDK raises)."""
        return openai_chat.converse(self, sdk, model, req, clock)

    def agent_history(self, messages: list[dict], reply, results: list[str]) -> list[dict]:
        """The history of an agent's next turn: `messages` so far, the assistant `reply` that
        called tools, and each call's result (JSON text), in this API shape."""
        return openai_chat.agent_history(messages, reply, results)

    def sampling(self, sampling: dict) -> dict:
        """Request params for fleet.yaml's sampling (a None seed sends none)."""
        out = {k: v for k, v in sampling.items() if k in ("temperature", "top_p", "seed")
               and v is not None}
        if sampling.get("top_k") is not None:
            out["extra_body"] = {"top_k": sampling["top_k"]}
        return out

    def engine_fields(self, extra: dict) -> dict:
        return {k: v for k, v in extra.items() if k in self.engine_keys and isinstance(v, dict)}

    # -- /metrics and speculative decoding -------------------------------------------------------
    metrics_path = "/metrics"
    metrics_off_statuses: tuple[int, ...] = ()  # statuses meaning "metrics are switched off"
    metrics_fix: Text = "turn on the server's Prometheus /metrics endpoint"
    # Series to look for, first found wins: a generic server may be any engine behind a proxy.
    spec_series: tuple = (metrics.LLAMACPP_SPEC, metrics.VLLM_SPEC, metrics.SGLANG_SPEC)
    spec_engage_fix: Text = "turn speculative decoding on in the server's configuration"
    spec_low_fix: Text = ("the draft does not fit the served model (a head or draft model from another "
                    "quant or finetune, another tokenizer), or drafts run too long; check the "
                    "draft file and lower the draft length")
    spec_high_fix: Text = ("acceptance this close to 1 means the draft is the model itself: point the "
                     "draft at a real draft/MTP head, not at the served weights")
    prefix_cache_fix: Text = ("turn on the server's prefix (prompt) cache, and keep the start of the "
                        "prompt stable between turns (no timestamps in the system prompt)")
    # Server-wide counters of prompt tokens looked up in / served from the prefix cache, read
    # where a reply carries no count: (hits, queries) pairs, the first one present wins.
    prefix_cache_counters: tuple[tuple[str, str], ...] = ()
    cache_count_hint = "the server sends no usage.prompt_tokens_details.cached_tokens"

    def cached_prompt(self, reply) -> tuple[int, int, str] | None:
        """(prompt tokens served from the cache, prompt tokens, where read) from one reply."""
        if reply.cached_tokens is not None and reply.prompt_tokens:
            return (reply.cached_tokens, reply.prompt_tokens,
                    "usage.prompt_tokens_details.cached_tokens")
        return None

    def draft_counts(self, engine: dict) -> tuple[int, int] | None:
        """(draft tokens, accepted) from one reply's engine fields (`timings`), where reported."""
        timings = engine.get("timings") if isinstance(engine, dict) else None
        if not isinstance(timings, dict):
            return None
        drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted", 0)
        if not isinstance(drafted, int) or not isinstance(accepted, int):
            return None
        return drafted, accepted

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
    image_forms: tuple[str, ...] = ("data_url",)
    vision_advert_path: str | None = None  # where the engine says whether it can see
    no_projector_markers: tuple[str, ...] = ("image input is not supported",
                                             "is not a multimodal model")
    vision_fix: Text = ("load the model's vision projector (llama.cpp: --mmproj FILE) or serve a "
                  "multimodal checkpoint")

    def vision_advertised(self, payload) -> bool | None:
        return None

    # -- what the served chat template can do (frank init) -------------------------------------
    def template_caps(self, payloads: dict) -> dict[str, tuple[bool, str]]:
        """claim -> (whether the served template supports it, where that was read), for
        `tools` and `reasoning_effort`, from the slot routes' payloads; {} where unsaid."""
        return {}

    def template_thinks(self, payloads: dict) -> tuple[bool, str] | None:
        """Whether the served chat template opens thinking at all, and where that was read,
        from the slot routes' payloads; None where the engine does not say."""
        return None

    # -- chat: the template the server renders a conversation with ----------------------------
    # What the engine serves where the model file carries no template: the template's text and
    # a line saying so (None: it refuses, or does not say); the usual fixes for a template that
    # is missing or another family's.
    fallback_template: str | None = None
    template_fallback: str | None = None
    no_template_fix: Text = ("serve the model with its own chat template, or an instruct "
                             "checkpoint that carries one")
    wrong_template_fix: Text = "serve the model with its own chat template"
    # How a chat template edited by hand is served (a template that raises on what clients send).
    edited_template_fix: Text = "serve the edited template with the server's chat template setting"

    def served_template(self, payloads: dict) -> tuple[str | None, str | None]:
        """(the chat template the server renders with, the model's end-of-turn token), from the
        slot routes' payloads; None where the engine does not say."""
        return None, None

    def image_part(self, b64: str, mime: str, form: str) -> dict:
        url = b64 if form == "base64" else f"data:{mime};base64,{b64}"
        return {"type": "image_url", "image_url": {"url": url}}

    def no_projector(self, reply) -> bool:
        """An error answer to an image that says the model has no vision at all."""
        text = (reply.problem or "").lower()
        return reply.status is not None and reply.status >= 400 and any(
            m in text for m in self.no_projector_markers)

    # -- generation battery: reasoning, reasoning_effort, tools (pytest_frank.chat) -------------
    # Where a chat reply carries reasoning, in the order read; fleet.yaml `reasoning.field` wins.
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    honours_named_tool_choice = True  # OpenAI's {"type":"function","function":{"name":...}}
    reasoning_parser_fix: Text = ("turn on the server's reasoning parser (llama.cpp --reasoning-format "
                            "deepseek, vLLM/SGLang --reasoning-parser <the model's>)")
    thinking_missing_fix: Text = ("serve the model with a template that opens a thinking block and a "
                            "reasoning parser that splits it out")
    thinking_off_fix = ("the chat template ignores chat_template_kwargs.enable_thinking: serve the "
                        "model's own template (it honours the switch)")
    tool_parser_fix: Text = ("turn on the server's tool-call parser for this model's format (vLLM "
                       "--enable-auto-tool-choice --tool-call-parser <name>; llama.cpp --jinja "
                       "with the model's own template)")
    tools_template_fix: Text = ("serve a model whose chat template renders tools (or give this "
                                "model one that does), or turn expect.tools (and expect.agent) "
                                "off for this endpoint")
    forced_tools_fix = ("something forces tool-call output on every request: drop a server-wide "
                        "grammar (llama.cpp --grammar-file) or structured-output default and pass "
                        "grammars per request")
    parallel_fix = ("the server cut parallel calls to one: enable parallel tool calls in the "
                    "template/parser (llama.cpp: a template with supports_parallel_tool_calls; "
                    "vLLM: a parser that splits several calls), or drop expect.tools.parallel")
    # Error answers with a known cause: (text in the server's message, fix).
    known_errors: tuple[tuple[str, Text], ...] = (
        ("tools param requires --jinja", "start llama-server with --jinja (the chat template "
         "renders the tools; a wrapper or an old build turned it off)"),
        ('"auto" tool choice requires --enable-auto-tool-choice',
         "start vLLM with --enable-auto-tool-choice --tool-call-parser <the model's parser, "
         "e.g. hermes, qwen3_xml, qwen3_coder>"),
        ("requires --tool-call-parser", "start vLLM with --tool-call-parser <the model's parser>"),
        ("invalid tool_choice", "this server accepts only tool_choice auto, none or required"),
    )

    endless_thinking_fix = ("lower the reasoning effort clients send, switch thinking off in the "
                            "chat template where clients may (chat_template_kwargs "
                            "enable_thinking: false), or serve a model that does not loop; if "
                            "this model really thinks longer, raise max_thinking_tokens (and the "
                            "served context)")
    budget_cap_fix: Text = ("look for what lowers max_tokens on the way: a proxy or gateway that "
                            "rewrites it, a server-side cap on generated tokens, or a served "
                            "context too small for the prompt and the answer")
    no_thinking_template_fix: Text = ("serve a thinking model (with its own chat template, which "
                                      "opens a thinking block), or turn expect.reasoning off "
                                      "for this endpoint: this model answers without thinking")
    thinking_switched_off_fix: Text = ("the template thinks, so something switches it off: a "
                                       "server-wide default (chat_template_kwargs "
                                       "enable_thinking: false) or a proxy that drops the "
                                       "reasoning field")
    no_reasoning_said = "although thinking is on by default"  # after "answered X with no reasoning"

    def thinking_on(self, max_tokens: int) -> dict:
        """Request params that ask for thinking, where the API wants it asked (not here)."""
        return {}

    def thinking_off(self) -> dict:
        """Request params that switch thinking off (chat template kwargs, as Qwen3 templates read)."""
        return {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}

    def effort(self, value: str) -> dict:
        """Request params that send a reasoning_effort level."""
        return {"reasoning_effort": value}

    def template_line(self, message: str | None) -> str | None:
        """Where in the chat template an error answer says it raised ("line 3, column 12:
        <the source there>"); None where the engine's words do not say."""
        return None

    def known_fix(self, message: str | None, status: int | None = None) -> Text | None:
        """The usual fix for an error answer: by the server's words, else by its status."""
        lower = (message or "").lower()
        found = next((fix for needle, fix in self.known_errors if needle.lower() in lower), None)
        return found or (STATUS_FIXES.get(status) if status is not None else None)

    # -- the serve command line (pytest_frank.serve): None where the engine is not started here
    serve_flags: Any = None  # a serve.flags.ServeFlags

    speculative_source = "the server"  # where speculative_live reads it, for messages
    # What drafting does to logprobs, and what a client that needs them can do.
    drafted_logprobs = "drafted tokens may come without their top_logprobs alternatives"
    drafted_logprobs_fix: Text = ("serve clients that need top_logprobs from an endpoint without "
                                  "speculative decoding; where none sends top_logprobs, set "
                                  "expect.params.logprobs: false")

    def speculative_live(self, payloads: dict) -> bool | None:
        """Whether the running server drafts, from its slot routes; None where it doesn't say."""
        return None


def _wires() -> dict[str, type]:
    """The routes besides chat, each a mixin of the members its wire replaces."""
    return {"messages": MessagesWire, "responses": ResponsesWire}
