"""perf: time to first token, decode speed and the prefix-cache effect meet the fleet's floors.

Every figure is a median over a few sequential streamed runs (one request at a time, so a probe
never crowds an endpoint's slots). Time to first token runs to the first content or reasoning
text, not to the first SSE chunk (llama.cpp sends a role-only chunk before any work is done).
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass, field

from pytest_frank.chat import Reply, Request
from pytest_frank.checks import Check, Context
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.observation import Observation
from pytest_frank.verdict import fail
from pytest_frank.figures import number

CACHE_MAX_TOKENS = 16  # enough for a first visible token behind a `<think>` marker
PROMPT = "Write a long story about a lighthouse keeper."
FILLER = ("The keeper climbed the spiral stairs at dusk, trimmed the wick, wound the clockwork, "
          "and logged the ships that passed the reef in the old brass-bound book. ")


@dataclass(frozen=True)
class Options(ClaimOptions):
    max_ttft_s: float | None = None
    min_decode_tps: float | None = None
    max_cached_ttft_ratio: float | None = None
    runs: int = 3
    max_tokens: int = 64
    cache_prompt_words: int = 1500  # ~2k tokens, the prefix the seeds measured


@dataclass(kw_only=True)
class Runs(Observation):
    runs: list[Reply] = field(default_factory=list)
    max_tokens: int


@dataclass(kw_only=True)
class CacheRuns(Observation):
    pairs: list[tuple[Reply, Reply]] = field(default_factory=list)
    words: int


def speed(target) -> Runs:
    """A few sequential streamed generations: time to first token and decode rate."""
    opts = target.endpoint.options("perf")
    out = Runs(max_tokens=opts.max_tokens)
    for _ in range(opts.runs):
        run = target.chat(Request(PROMPT, opts.max_tokens, stream=True,
                                  extra=target.driver.keep_generating))
        out.runs.append(run)
        if not run.ok or run.first_token_s is None:
            break  # the verdict is known; no need to repeat a failure
    return out


def cache(target) -> CacheRuns:
    """The same long prompt twice, per run, with nothing else in flight (a neighbour's prefill
    would read as a slow cache); a fresh prefix per run so no earlier run warms it."""
    opts = target.endpoint.options("perf")
    out = CacheRuns(words=opts.cache_prompt_words)
    target.model_name()  # any probe it needs runs before the endpoint is held
    with target.exclusive():
        for _ in range(opts.runs):
            prompt = _long_prompt(out.words)
            cold = target.chat(Request(prompt, CACHE_MAX_TOKENS, stream=True))
            warm = target.chat(Request(prompt, CACHE_MAX_TOKENS, stream=True))
            out.pairs.append((cold, warm))
            if not (cold.ok and warm.ok):
                break
    return out


def _long_prompt(words: int) -> str:
    filler = FILLER.split()
    text = " ".join(filler[i % len(filler)] for i in range(words))
    return f"Log {uuid.uuid4().hex}.\n{text}\nSummarise the log in one line."


def judge_ttft(runs: Runs, ctx: Context) -> None:
    """The median time to first token is within max_ttft_s."""
    ttft = statistics.median(_first_tokens(runs.runs))
    ctx.figure("ttft_s", ttft, "s")
    ctx.note(f"time to first token: median {ttft:.3f}s over {len(runs.runs)} runs "
             f"({_list(r.first_token_s for r in runs.runs)})")
    floor = ctx.options.max_ttft_s
    if floor is not None and ttft > floor:
        fail(f"time to first token {ttft:.3f}s (median of {len(runs.runs)}) is over max_ttft_s "
             f"{floor:g}s", "check the load on the server, the prompt-processing batch size "
             "and that the model runs on the GPU; or relax expect.perf.max_ttft_s")


def judge_decode(runs: Runs, ctx: Context) -> None:
    """The median decode rate after the first token is at least min_decode_tps."""
    _first_tokens(runs.runs)
    rates = [r.decode_rate() for r in runs.runs]
    if any(rate is None for rate in rates):
        short = next(r for r, rate in zip(runs.runs, rates) if rate is None)
        fail(f"only {short.generated} token(s) streamed from {short.url}: no decode "
             f"rate can be measured (asked for {runs.max_tokens})")
    rate = statistics.median(rates)
    ctx.figure("tok_s", rate, "tok/s")
    server = [(r.engine.get("timings") or {}).get("predicted_per_second") for r in runs.runs]
    seen = f"; the server's own timings: {_list(server)} tok/s" if any(server) else ""
    ctx.note(f"decode: median {rate:.1f} tok/s over {len(rates)} runs ({_list(rates)}){seen}")
    floor = ctx.options.min_decode_tps
    if floor is not None and rate < floor:
        fail(f"decode speed {rate:.1f} tok/s (median of {len(rates)}, {runs.runs[0].generated} "
             f"tokens each) is under min_decode_tps {floor:g}",
             "check that every layer is offloaded to the GPU (-ngl), that speculative decoding "
             "is engaged, and that no other load shares the card; or relax "
             "expect.perf.min_decode_tps")


def judge_cache(cache: CacheRuns, ctx: Context) -> None:
    """A repeated long prompt answers its first token at most max_cached_ttft_ratio of cold."""
    cold = [c for c, _ in cache.pairs]
    warm = [w for _, w in cache.pairs]
    ratios = [w / c for c, w in zip(_first_tokens(cold), _first_tokens(warm))]
    ratio = statistics.median(ratios)
    ctx.figure("cached_ttft_ratio", ratio, "")
    ctx.note(f"prefix cache: a {cache.words}-word prompt, first token cold "
             f"{_list(c.first_token_s for c in cold)}s, repeated "
             f"{_list(w.first_token_s for w in warm)}s; median ratio {ratio:.2f}")
    ceiling = ctx.options.max_cached_ttft_ratio
    if ratio > ceiling:
        fail(f"a repeated {cache.words}-word prompt answers its first token at {ratio:.2f} of the "
             f"cold time (median of {len(ratios)}), over max_cached_ttft_ratio {ceiling:g}: "
             f"the prefix cache does not help", ctx.driver.prefix_cache_fix)


def _first_tokens(runs: list[Reply]) -> list[float]:
    for run in runs:
        if not run.ok:
            fail(f"the streamed request to {run.url} failed: {run.said}")
        if run.first_token_s is None:
            body = run.exchange.snippet(200) if run.exchange else ""
            fail(f"the stream from {run.url} carried no content or reasoning text: {body}")
    return [run.first_token_s for run in runs]


def _list(values) -> str:
    return ", ".join("n/a" if v is None else number(v) for v in values)


TTFT = Check("test_perf_ttft", "perf", speed, judge_ttft)
DECODE = Check("test_perf_decode", "perf", speed, judge_decode)
PREFIX_CACHE = Check("test_perf_prefix_cache", "perf", cache, judge_cache,
                     applies=lambda opts, driver: None if opts.max_cached_ttft_ratio is not None
                     else "no expect.perf.max_cached_ttft_ratio in fleet.yaml: the prefix-cache "
                          "probe (a long prompt sent twice) is not run")
