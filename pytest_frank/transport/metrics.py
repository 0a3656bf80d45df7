"""Prometheus `/metrics`: scrape, parse (prometheus_client's parser), and read counter deltas."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank.transport.http import Exchange


@dataclass
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Scrape:
    exchange: Exchange
    samples: list[Sample] = field(default_factory=list)
    problem: str | None = None  # why there are no samples (HTTP status, unparsable text)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def total(self, name: str) -> float | None:
        """The sum of one series over all its labels (engines label by model, engine, ...)."""
        values = [s.value for s in self.samples if s.name == name]
        return sum(values) if values else None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """One series summed per value of a label, e.g. accepted tokens per draft position."""
        out: dict[str, float] = {}
        for s in self.samples:
            if s.name == name and label in s.labels:
                out[s.labels[label]] = out.get(s.labels[label], 0.0) + s.value
        return out


def parse(text: str) -> list[Sample]:
    """Every sample in a Prometheus text exposition; raises ValueError on text that is not one."""
    from prometheus_client.parser import text_string_to_metric_families

    return [Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples]


def scrape(target, path: str) -> Scrape:
    ex = target.get(path)
    if not ex.ok:
        return Scrape(ex, problem=target.driver.reason(ex))
    try:
        return Scrape(ex, parse(ex.body))
    except (ValueError, TypeError) as exc:
        return Scrape(ex, problem=f"is not Prometheus text ({exc}): {ex.snippet(120)}")


def delta(before: Scrape, after: Scrape, name: str) -> float | None:
    """How much a counter grew between two scrapes; None when the series is missing."""
    end = after.total(name)
    if end is None:
        return None
    return end - (before.total(name) or 0.0)


def label_deltas(before: Scrape, after: Scrape, name: str, label: str) -> dict[str, float]:
    start = before.by_label(name, label)
    return {k: v - start.get(k, 0.0) for k, v in after.by_label(name, label).items()}


@dataclass(frozen=True)
class SpecSeries:
    """Where an engine counts speculative decoding. Counters (llama.cpp, vLLM) are judged by their
    growth over one probe; gauges (SGLang) hold the latest window's figures."""

    source: str  # how the report names it, e.g. "llamacpp:spec_decode_* counters"
    drafts: str | None = None
    draft_tokens: str | None = None
    accepted: str | None = None
    per_position: str | None = None  # labelled by `position`
    rate_gauge: str | None = None
    length_gauge: str | None = None

    @property
    def counters(self) -> bool:
        return self.draft_tokens is not None


def spec_counters(prefix: str) -> SpecSeries:
    """The counter family llama.cpp (Aug 2026+) and vLLM share, under their own prefix."""
    return SpecSeries(f"{prefix}spec_decode_* counters",
                      drafts=f"{prefix}spec_decode_num_drafts_total",
                      draft_tokens=f"{prefix}spec_decode_num_draft_tokens_total",
                      accepted=f"{prefix}spec_decode_num_accepted_tokens_total",
                      per_position=f"{prefix}spec_decode_num_accepted_tokens_per_pos_total")


LLAMACPP_SPEC = spec_counters("llamacpp:")
VLLM_SPEC = spec_counters("vllm:")
SGLANG_SPEC = SpecSeries("sglang:spec_accept_* gauges", rate_gauge="sglang:spec_accept_rate",
                         length_gauge="sglang:spec_accept_length")
