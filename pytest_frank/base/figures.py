"""The figures a run measures, one entry each, and how their numbers are written (2190 tok/s,
0.0024 s, never 2.19e+03). An entry says what every reader of the record needs: its name in the
record, its unit, which way is better, the fleet's `regression:` key that bounds a change
against a baseline (with its default), the chart and trend that draw it and its Prometheus
series. The baseline, the page's and the Markdown's charts, the Prometheus metrics and the
schema's `regression` block (docs/gen.py) all read FIGURES and TOLERANCES, so a new figure is
one entry here and the claim that measures it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

COUNT = 15  # significant digits that print any count a server reports in full
AT = "_at_"  # a figure per level of the load ladder: `decode_tps_at_4`, at 4 in flight


def number(value: float, digits: int = 3) -> str:
    """`value` rounded to `digits` significant digits, in positional notation."""
    if not math.isfinite(value):
        return str(value)
    return format(Decimal(f"{value:.{digits}g}"), "f")


@dataclass(frozen=True)
class Tolerance:
    """A key of the fleet's `regression:` block: how much worse a figure may get against
    `--frank-baseline` before it is reported."""

    key: str
    default: float
    about: str  # the schema's description
    absolute: bool = False  # a difference (0.80 -> 0.74), not a ratio of the old value
    most: float | None = None  # the largest value the schema accepts
    floor: str | None = None  # the key of a change too small to count, whatever its ratio


TOLERANCES = {t.key: t for t in (
    Tolerance("acceptance_drop", 0.05, "absolute drop in draft acceptance (default 0.05)",
              absolute=True, most=1),
    # ...and by more than ttft_noise_s: at a few milliseconds, a doubling is the scheduler,
    # not the server
    Tolerance("ttft_rise", 0.25, "relative rise in time to first token (default 0.25: 25%)",
              floor="ttft_noise_s"),
    Tolerance("ttft_noise_s", 0.05, "a time-to-first-token rise of at most this many seconds is "
              "noise, whatever its ratio (default 0.05)"),
    # Reruns of an unchanged llama.cpp with one CPU-bound process beside it decoded 22-24%
    # slower (docs/reports.md): 20% cried wolf on a shared CI runner; a server 40% slower is
    # still past it.
    Tolerance("tok_s_drop", 0.30, "relative drop in decode tok/s (default 0.30: 30%)", most=1),
    # the count moves with the cache's block size and the template, not with timing, so the
    # band is narrow
    Tolerance("cached_share_drop", 0.10, "absolute drop in the share of a repeated prompt "
              "served from the prefix cache (default 0.10)", absolute=True, most=1),
    # a template or effort change; clients' budgets follow
    Tolerance("thinking_rise", 0.5, "relative rise in the tokens a reply spends thinking "
              "(default 0.5: 50%)"),
    # a model thinking longer, or a plan asking more
    Tolerance("tokens_rise", 0.25, "relative rise in the tokens the battery generated on the "
              "endpoint (its cost), or in its time to verdict (default 0.25: 25%)"),
    # the fingerprint claim: a relaunch on one build repeats its greedy tokens exactly
    Tolerance("fingerprint_agreement", 1.0, "the least share of a fingerprint prompt's recorded "
              "tokens that must match the baseline's before the first divergence (default 1)",
              absolute=True, most=1),
    Tolerance("logprob_drift", 0.05, "the largest mean absolute logprob difference on a "
              "fingerprint's common prefix (default 0.05)", absolute=True),
)}


@dataclass(frozen=True)
class Bars:
    """A chart of this run's values, a bar per row (and bounds): `name` is its file name's part;
    figures that share a chart (memory, modelled and measured) share its name, each bar
    labelled with its `word`."""

    name: str
    title: str
    word: str = ""


@dataclass(frozen=True)
class Figure:
    name: str  # the record's key; a levelled one's stem (`decode_tps` of `decode_tps_at_4`)
    label: str  # how a regression names it
    unit: str  # as recorded: "s", "tok/s", "tokens", "MiB", "" for a ratio
    higher_better: bool
    top: float | None = None  # its charts' fixed end (a share's 1.0), else the largest value
    tolerance: str | None = None  # its key in TOLERANCES: compared with a baseline's
    chart: Bars | None = None  # drawn for this run
    trend: str | None = None  # the title of its line over the kept history
    metric: str | None = None  # its Prometheus series
    about: str = ""  # the series' help
    factor: float = 1.0  # to the series' base unit (MiB to bytes)
    levelled: bool = False  # one per level of the load ladder: the level a suffix, `_at_4`

    def at(self, level: int) -> str:
        """A levelled figure's name in the record at `level` in flight: `decode_tps_at_4`."""
        return f"{self.name}{AT}{level}"


MIB = 2**20
FIGURES = {f.name: f for f in (
    Figure("ttft_s", "time to first token", "s", higher_better=False, tolerance="ttft_rise",
           chart=Bars("ttft_s", "time to first token (median) against max_ttft_s"),
           trend="time to first token", metric="frank_ttft_seconds",
           about="median time to first token"),
    Figure("tok_s", "decode speed", "tok/s", higher_better=True, tolerance="tok_s_drop",
           chart=Bars("tok_s", "decode speed (median) against min_decode_tps"),
           trend="decode speed", metric="frank_decode_tokens_per_second",
           about="median decode speed"),
    Figure("acceptance", "draft acceptance", "", higher_better=True, top=1.0,
           tolerance="acceptance_drop",
           chart=Bars("acceptance", "draft acceptance inside its band"),
           trend="draft acceptance", metric="frank_spec_decode_acceptance_ratio",
           about="draft tokens accepted / drafted"),
    Figure("thinking_tokens", "thinking length", "tokens", higher_better=False,
           tolerance="thinking_rise",
           chart=Bars("thinking_tokens", "thinking tokens (longest reply)"),
           trend="thinking tokens", metric="frank_thinking_tokens",
           about="tokens of reasoning before the answer"),
    Figure("vram_modelled_mib", "memory modelled", "MiB", higher_better=False,
           chart=Bars("memory", "memory, modelled against measured", word="modelled"),
           metric="frank_vram_modelled_bytes", about="GPU memory the memory model expects",
           factor=MIB),
    Figure("vram_used_mib", "memory used", "MiB", higher_better=False,
           chart=Bars("memory", "memory, modelled against measured", word="measured"),
           trend="memory used", metric="frank_vram_used_bytes",
           about="GPU memory the source reports used", factor=MIB),
    Figure("cached_ttft_ratio", "cached first token over cold", "", higher_better=False,
           metric="frank_prefix_cache_ttft_ratio",
           about="time to first token of a repeated prompt over the first"),
    Figure("cached_share", "prefix-cache share", "", higher_better=True, top=1.0,
           tolerance="cached_share_drop", trend="prefix-cache share",
           metric="frank_prefix_cache_hit_ratio",
           about="share of a repeated prompt served from the prefix cache"),
    Figure("cached_tokens", "cached tokens", "tokens", higher_better=True),
    Figure("error_rate", "load error rate", "", higher_better=False,
           metric="frank_load_error_ratio",
           about="share of the load ladder's requests that failed"),
    Figure("reasoning_only_rate", "load replies of reasoning only", "", higher_better=False,
           metric="frank_load_reasoning_only_ratio",
           about="share of the load ladder's replies that carried reasoning only"),
    Figure("trigger_f1", "tool trigger F1", "", higher_better=True),
    # the load claim's ladder: each level compared with the same level before
    Figure("decode_tps", "decode speed per request", "tok/s", higher_better=True,
           tolerance="tok_s_drop", levelled=True,
           chart=Bars("load_decode_tps", "decode speed per request under load (median), by "
                      "requests in flight"),
           metric="frank_load_decode_tokens_per_second",
           about="median per-request decode speed at the level"),
    Figure("ttft_p90_s", "time to first token P90", "s", higher_better=False,
           tolerance="ttft_rise", levelled=True,
           chart=Bars("load_ttft_p90_s", "time to first token under load (P90), by requests in "
                      "flight"),
           metric="frank_load_ttft_p90_seconds", about="time to first token, P90, at the level"),
    Figure("ttft_p50_s", "time to first token P50", "s", higher_better=False, levelled=True,
           metric="frank_load_ttft_p50_seconds", about="time to first token, P50, at the level"),
    Figure("aggregate_tps", "tokens per second together", "tok/s", higher_better=True,
           tolerance="tok_s_drop", levelled=True, metric="frank_load_tokens_per_second",
           about="tokens per second of the level's replies together"),
)}


def lookup(name: str) -> tuple[Figure, int | None] | None:
    """The entry of a recorded figure's name and its level (`decode_tps_at_4`: 4), None for
    one not in FIGURES (a check of one's own records its own)."""
    if name in FIGURES and not FIGURES[name].levelled:
        return FIGURES[name], None
    stem, _, level = name.rpartition(AT)
    figure = FIGURES.get(stem)
    if figure is not None and figure.levelled and level.isdigit():
        return figure, int(level)
    return None


def regression_schema() -> dict:
    """The fleet schema's `$defs.regression`, from TOLERANCES (docs/gen.py writes it)."""
    properties = {}
    for t in TOLERANCES.values():
        node: dict = {"type": "number", "minimum": 0}
        if t.most is not None:
            node["maximum"] = t.most
        properties[t.key] = {**node, "description": t.about}
    return {"type": "object", "description": "How much worse a figure may get against "
            "--frank-baseline before it is a regression", "additionalProperties": False,
            "properties": properties}
