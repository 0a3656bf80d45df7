"""What an engine counts, as a part every driver holds (`driver.metrics`): its /metrics route and
the series it reports there (drafting, the prefix cache, load, the KV pool), and the counts one
reply or the slot routes carry of drafting and of the prompt served from the cache. The base
part is a generic server's: it looks for every engine's drafting series (any engine may sit
behind a proxy), reads a reply's own usage, and answers "unknown" (None, empty) for the rest."""

from __future__ import annotations

from typing import Any

from pytest_frank.transport.metrics import LLAMACPP_SPEC, SGLANG_SPEC, VLLM_SPEC


class Metrics:
    """A generic server's counts: /metrics, any engine's drafting series, usage's cache count."""

    path = "/metrics"
    off_statuses: tuple[int, ...] = ()  # statuses meaning "metrics are switched off"
    # Series to look for, first found wins: a generic server may be any engine behind a proxy.
    spec_series: tuple = (LLAMACPP_SPEC, VLLM_SPEC, SGLANG_SPEC)
    # Server-wide counters of prompt tokens looked up in / served from the prefix cache, read
    # where a reply carries no count: (hits, queries) pairs, the first one present wins.
    prefix_cache_counters: tuple[tuple[str, str], ...] = ()
    # Series in /metrics: requests running and requests queued for a slot (None: not reported).
    load_series: tuple[str, str] | None = None
    kv_pool_route: str | None = None  # where the engine describes a preallocated KV pool
    # Where one answer's draft counts are read on a drafting server: "reply" (each reply's own
    # engine fields) or "metrics" (the spec_series counters' growth in /metrics, server-wide);
    # draft_counts_where says it in words.
    draft_counts_from = "metrics"
    draft_counts_where = "the spec_decode counters in /metrics"
    speculative_source = "the server"  # where speculative_live reads it, for messages

    def cached_prompt(self, reply: Any) -> tuple[int, int, str] | None:
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

    def speculative_live(self, payloads: dict) -> bool | None:
        """Whether the running server drafts, from its slot routes; None where it doesn't say."""
        return None

    def kv_pool(self, metrics_text: str) -> Any:
        """A vram.KVPool from the engine's metrics text, where it preallocates one; else None."""
        return None
