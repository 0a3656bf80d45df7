"""perf: time to first token, decode speed and the prefix-cache effect meet the fleet's floors.

Every figure is a median over a few sequential streamed runs (one request at a time, so a probe
never crowds an endpoint's slots). Time to first token runs to the first content or reasoning
text, not to the first SSE chunk (llama.cpp sends a role-only chunk before any work is done).
The prefix cache is judged by the server's own count of cached prompt tokens where it keeps one:
first-token times on a fast prefill measure network and scheduling jitter, not the cache.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_frank.base.figures import COUNT, number
from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.diagnosis import Evidence, diagnose
from pytest_frank.claims.evidence import facts
from pytest_frank.drivers import LlamaCppDriver, SglangDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts, Parts
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import Phrase, Text, fail, inconclusive
from pytest_frank.runtime import sizing
from pytest_frank.runtime.chat import Reply, Request, send
from pytest_frank.runtime.target import DecodeFloor, first_and_alone
from pytest_frank.transport import metrics
from pytest_frank.runtime.target import Target

CACHE_MAX_TOKENS = 16  # enough for a first visible token behind a `<think>` marker
PROMPT = "Write a long story about a lighthouse keeper."
FILLER = ("The keeper climbed the spiral stairs at dusk, trimmed the wick, wound the clockwork, "
          "and logged the ships that passed the reef in the old brass-bound book. ")
CACHED_SHARE = 0.5  # min_cached_share when fleet.yaml sets none
# Below this cold first token, a ratio of first tokens is jitter (as regression.ttft_noise_s).
TTFT_NOISE_S = 0.05
TEMPLATE_TOKENS = 64  # room kept in the slot for the chat template around the long prompt
LEAST_CACHE_TOKENS = 256  # shorter, and the template and the reply weigh as much as the prompt
COUNTER_LAG = 1.0  # seconds to wait once for server-wide counters that trail the reply


@dataclass(frozen=True)
class Options(ClaimOptions):
    max_ttft_s: float | None = option(None, exclusiveMinimum=0, about=(
        "Highest median time to first token, seconds."))
    min_decode_tps: float | None = option(None, exclusiveMinimum=0, about=(
        "Lowest median decode speed, tokens/s."))
    max_cached_ttft_ratio: float | None = option(None, exclusiveMinimum=0, about=(
        "The same long prompt sent twice: the second time to first token over the first must be "
        "at most this, where the engine counts nothing (the seeds measured 4.6 s -> 1.1 s, about "
        "0.25)."))
    # CACHED_SHARE when unset
    min_cached_share: float | None = option(None, minimum=0, maximum=1, about=(
        "The lowest share (0-1) of a repeated prompt served from the prefix cache, by the "
        "server's count (default 0.5 once the probe runs; a healthy llama.cpp or vLLM caches all "
        "but the last block)."))
    runs: int = option(3, "Runs per median (default 3).", minimum=1, maximum=20)
    max_tokens: int = option(64, "Tokens per speed run (default 64).", minimum=2)
    cache_prompt_words: int = option(1500, minimum=50, about=(
        "Length of the prefix-cache prompt in words (default 1500, about 2k tokens), at most half "
        "the slot."))


CLAIM = Claim("perf", "time to first token and decode speed meet the fleet's floors", Options, order=140,
              tests=("test_perf_ttft", "test_perf_decode", "test_perf_prefix_cache"))


if TYPE_CHECKING:  # the runtime waits for answers at min_decode_tps: the type checker keeps it
    _FLOOR: type[DecodeFloor] = Options


@dataclass(kw_only=True)
class Runs(Observation):
    runs: list[Reply] = field(default_factory=list)
    max_tokens: int
    backend: tuple[str, str] | None = None  # ("cpu" or "gpu", where read): what a fix names
    # A run whose usage counts fewer tokens than its stream carried text deltas: the engine's
    # own facts against that reply (claims.diagnosis), read from what was already fetched.
    evidence: Evidence | None = None


@dataclass(frozen=True)
class Counted:
    """The server's own count for one repeated prompt."""
    cached: float  # prompt tokens served from the cache
    prompt: float  # prompt tokens
    source: str

    @property
    def share(self) -> float:
        return self.cached / self.prompt if self.prompt else 0.0


@dataclass(kw_only=True)
class CacheRuns(Observation):
    pairs: list[tuple[Reply, Reply]] = field(default_factory=list)
    counts: list[Counted | None] = field(default_factory=list)  # per pair, the repeat's count
    words: int
    fitted: str = ""  # why fewer words were sent than cache_prompt_words asks
    tokens: int | None = None  # the prompt's size, where it was sized to the slot
    counted_by: str = ""


def speed(target: Target) -> Runs:
    """A few sequential streamed generations: time to first token and decode rate."""
    opts = Options.on(target.endpoint)
    out = Runs(max_tokens=opts.max_tokens, backend=target.backend())
    for _ in range(opts.runs):
        run = send(target, Request(PROMPT, opts.max_tokens, stream=True,
                                  extra=target.driver.keep_generating))
        out.runs.append(run)
        if not run.ok or run.first_token_s is None:
            break  # the verdict is known; no need to repeat a failure
    miscounted = next((r for r in out.runs if r.ok and _miscounted(r)), None)
    if miscounted is not None:
        out.evidence = Evidence(seen=_count_seen(miscounted), streamed=True,
                                **facts(target, miscounted))
    return out


def _miscounted(run: Reply) -> bool:
    """Usage counts fewer generated tokens than the stream carried text deltas (each delta
    carries at least one token): the count is wrong, whatever the decode did."""
    return run.tokens is not None and run.tokens < run.pieces


def _count_seen(run: Reply) -> str:
    return (f"usage.completion_tokens {run.tokens} in the stream from {run.url}, which carried "
            f"{run.pieces} text deltas")


@first_and_alone
def cache(target: Target) -> CacheRuns:
    """The same long prompt twice, per run, with nothing else in flight (a neighbour's prefill
    would read as a slow cache, a neighbour's tokens as cache hits); a fresh prefix per run so
    no earlier run warms it. The engine's count of cached tokens comes from the repeat's reply,
    else from server-wide counters scraped around it."""
    opts = Options.on(target.endpoint)
    target.model_name()  # any probe it needs runs before the endpoint is held
    fitted = sizing.fit(target, _long_prompt, opts.cache_prompt_words,
                        CACHE_MAX_TOKENS + TEMPLATE_TOKENS, LEAST_CACHE_TOKENS)
    out = CacheRuns(words=fitted.words, fitted=fitted.note, tokens=fitted.tokens,
                    counted_by=fitted.counted_by)
    if fitted.too_small:
        out.inconclusive = f"the prefix cache is not measured: {fitted.too_small}"
        return out
    with target.exclusive():
        for _ in range(opts.runs):
            prompt = _long_prompt(fitted.words)
            start = _counters(target)
            cold = send(target, Request(prompt, CACHE_MAX_TOKENS, stream=True))
            middle = _settled(target, start, cold)
            warm = send(target, Request(prompt, CACHE_MAX_TOKENS, stream=True))
            out.pairs.append((cold, warm))
            out.counts.append(_counted(target, warm, middle))
            if not (cold.ok and warm.ok):
                break
    return out


def _counters(target: Target) -> metrics.Scrape | None:
    """A scrape of the driver's prefix-cache counters, where it names any."""
    if not target.driver.metrics.prefix_cache_counters:
        return None
    scrape = metrics.scrape(target, target.driver.metrics.path)
    return scrape if scrape.ok and _series(target.driver, scrape) else None


def _series(driver: Parts, scrape: metrics.Scrape) -> tuple[str, str] | None:
    names = scrape.names()
    return next((pair for pair in driver.metrics.prefix_cache_counters if pair[1] in names), None)


def _settled(target: Target, start: metrics.Scrape | None, cold: Reply) -> metrics.Scrape | None:
    """The counters once the cold request is in them (they may trail its reply), so the
    repeat's growth is its own; None where the reply carries its count (nothing to scrape)."""
    if start is None or target.driver.metrics.cached_prompt(cold) or not cold.ok:
        return None
    after = metrics.scrape(target, target.driver.metrics.path)
    if after.ok and not _growth(target.driver, start, after)[1]:
        time.sleep(COUNTER_LAG)
        after = metrics.scrape(target, target.driver.metrics.path)
    return after if after.ok else None


def _growth(driver: Driver, before: metrics.Scrape, after: metrics.Scrape) -> tuple[float, float]:
    pair = _series(driver, after)
    if pair is None:
        return 0.0, 0.0
    return (metrics.delta(before, after, pair[0]) or 0.0,
            metrics.delta(before, after, pair[1]) or 0.0)


def _counted(target: Target, warm: Reply, before: metrics.Scrape | None) -> Counted | None:
    driver = target.driver
    found = driver.metrics.cached_prompt(warm)
    if found:
        return Counted(*found)
    if before is None or not warm.ok:
        return None
    after = metrics.scrape(target, driver.metrics.path)
    if after.ok and not _growth(driver, before, after)[1]:
        time.sleep(COUNTER_LAG)
        after = metrics.scrape(target, driver.metrics.path)
    pair = _series(driver, after) if after.ok else None
    if pair is None:
        return None
    hits, queries = _growth(driver, before, after)
    if not queries:  # the counters are there, yet an answered prompt looked nothing up
        return Counted(0, warm.prompt_tokens or 0, f"{pair[1]} did not grow over the repeat: "
                                                   "nothing was looked up in the prefix cache")
    return Counted(hits, queries, f"{pair[0]} / {pair[1]} growth over the repeat")


def _long_prompt(words: int) -> str:
    filler = FILLER.split()
    text = " ".join(filler[i % len(filler)] for i in range(words))
    return f"Log {uuid.uuid4().hex}.\n{text}\nSummarise the log in one line."


def judge_ttft(runs: Runs, ctx: Context[Options]) -> None:
    """The median time to first token is within max_ttft_s."""
    firsts = _first_tokens(runs.runs)
    ttft = statistics.median(firsts)
    ctx.figure("ttft_s", ttft, "s", high=ctx.options.max_ttft_s, runs=firsts)
    ctx.note(f"time to first token: median {ttft:.3f}s over {len(runs.runs)} runs "
             f"({_list(r.first_token_s for r in runs.runs)})")
    floor = ctx.options.max_ttft_s
    if floor is not None and ttft > floor:
        on, check = _hardware(runs, ctx)
        fail(f"time to first token {ttft:.3f}s (median of {len(runs.runs)}) is over max_ttft_s "
             f"{floor:g}s{on}", "check the load on the server and the prompt-processing batch "
             "size; " + check + "; or relax expect.perf.max_ttft_s")


def judge_decode(runs: Runs, ctx: Context[Options]) -> None:
    """The median decode rate after the first token is at least min_decode_tps."""
    _first_tokens(runs.runs)
    rates = [r.decode_rate() for r in runs.runs]
    short = next((r for r, rate in zip(runs.runs, rates) if rate is None), None)
    if short is not None and _miscounted(short) and runs.evidence is not None:
        found = diagnose(runs.evidence, ctx.driver)
        fail(f"{_count_seen(short)}: the reply's count of its tokens is wrong, so no decode "
             f"rate can be measured from it (the tokens came); {found.line}", found.fix)
    if short is not None:
        fail(f"only {short.generated} token(s) streamed from {short.url}: no decode "
             f"rate can be measured (asked for {runs.max_tokens})")
    measured = [rate for rate in rates if rate is not None]
    rate = statistics.median(measured)
    ctx.figure("tok_s", rate, "tok/s", low=ctx.options.min_decode_tps, runs=measured)
    server = [(r.engine.get("timings") or {}).get("predicted_per_second") for r in runs.runs]
    seen = f"; the server's own timings: {_list(server)} tok/s" if any(server) else ""
    ctx.note(f"decode: median {rate:.1f} tok/s over {len(rates)} runs ({_list(rates)}){seen}")
    floor = ctx.options.min_decode_tps
    if floor is not None and rate < floor:
        on, check = _hardware(runs, ctx)
        fail(f"decode speed {rate:.1f} tok/s (median of {len(rates)}, {runs.runs[0].generated} "
             f"tokens each) is under min_decode_tps {floor:g}{on}",
             check + "; or relax expect.perf.min_decode_tps")


def _hardware(runs: Runs, ctx: Context[Options]) -> tuple[str, Text]:
    """What the server runs on, as the diagnosis ends (with where that was read: a device list
    is a finding, and kept out of the fix it would stretch), and what to check of it (unknown:
    both)."""
    kind, where = runs.backend or (None, "")
    gpu, cpu = slow_gpu_hint(ctx.driver), slow_cpu_hint(ctx.driver)
    if kind == "cpu":
        return f", on the CPU, whose cores and memory bandwidth bound it ({where})", cpu
    if kind == "gpu":
        return f", on a GPU ({where})", f"check {gpu}"
    return "", f"on a GPU, check {gpu}; if it runs on the CPU, " + cpu


def judge_cache(cache: CacheRuns, ctx: Context[Options]) -> None:
    """A repeated long prompt is served from the prefix cache: by the server's own count of
    cached tokens, or where it keeps none, by its first-token time against the cold one."""
    cold = [c for c, _ in cache.pairs]
    warm = [w for _, w in cache.pairs]
    cold_s, warm_s = _first_tokens(cold), _first_tokens(warm)
    ratio = statistics.median(w / c for c, w in zip(cold_s, warm_s))
    ctx.figure("cached_ttft_ratio", ratio, "")
    times = (f"first token cold {_list(cold_s)}s, repeated {_list(warm_s)}s; median ratio "
             f"{ratio:.2f}")
    sized = (f" ({number(cache.tokens, COUNT)} tokens by {cache.counted_by})"
             if cache.tokens is not None else "")
    ctx.note(f"prefix cache: a {cache.words}-word prompt{sized}, {times}")
    if cache.fitted:
        ctx.note(cache.fitted)
    if all(cache.counts):
        _judge_count(cache, ctx)
        return
    _judge_times(cache, ctx, cold_s, ratio, times)


def _judge_count(cache: CacheRuns, ctx: Context[Options]) -> None:
    counts = [c for c in cache.counts if c]
    share = statistics.median(c.share for c in counts)
    cached = statistics.median(c.cached for c in counts)
    ctx.figure("cached_share", share, "")
    ctx.figure("cached_tokens", cached, "tokens")
    listed = ", ".join(f"{number(c.cached, COUNT)} of {number(c.prompt, COUNT)}" for c in counts)
    seen = (f"the repeated {cache.words}-word prompt was {share:.2f} served from the cache "
            f"(median of {len(counts)}; cached tokens {listed}) [source: {counts[0].source}]")
    ctx.note(seen)
    floor = ctx.options.min_cached_share
    floor = CACHED_SHARE if floor is None else floor
    if share < floor:
        fail(f"{seen}, under min_cached_share {floor:g}: the prefix cache does not help",
             prefix_cache_fix(ctx.driver))


def _judge_times(cache: CacheRuns, ctx: Context[Options], cold_s: list[float], ratio: float,
                 times: str) -> None:
    """Where the engine counts nothing: the ratio of first-token times, above a noise floor."""
    ctx.note(f"no cached-token count: {cache_count_hint(ctx.driver)}; judged by first-token time")
    ceiling = ctx.options.max_cached_ttft_ratio
    if ceiling is None:
        inconclusive(f"inconclusive: the engine reports no cached-token count "
                     f"({cache_count_hint(ctx.driver)}) and no expect.perf.max_cached_ttft_ratio is set "
                     f"to judge the first-token times ({times})")
    cold = statistics.median(cold_s)
    if cold < TTFT_NOISE_S:
        inconclusive(f"inconclusive: the engine reports no cached-token count "
                     f"({cache_count_hint(ctx.driver)}) and the cold first token "
                     f"({cold:.3f}s, median) is under {TTFT_NOISE_S * 1000:g} ms, where a ratio of "
                     f"first tokens measures jitter, not the cache ({times}); raise "
                     f"expect.perf.cache_prompt_words (now {cache.words}) for a longer prefill")
    if ratio > ceiling:
        fail(f"a repeated {cache.words}-word prompt answers its first token at {ratio:.2f} of the "
             f"cold time (median of {len(cache.pairs)}), over max_cached_ttft_ratio {ceiling:g}: "
             f"the prefix cache does not help", prefix_cache_fix(ctx.driver))


def _first_tokens(runs: list[Reply]) -> list[float]:
    for run in runs:
        if not run.ok:
            fail(f"the streamed request to {run.url} failed: {run.problem_line}", run.fix)
        if run.first_token_s is None:
            body = run.exchange.snippet(200) if run.exchange else ""
            fail(f"the stream from {run.url} carried no content or reasoning text: {body}")
    return [run.first_token_s for run in runs if run.first_token_s is not None]


def _list(values: Iterable[float | None]) -> str:
    return ", ".join("n/a" if v is None else number(v) for v in values)


TTFT = Check("test_perf_ttft", "perf", speed, judge_ttft)
DECODE = Check("test_perf_decode", "perf", speed, judge_decode)
PREFIX_CACHE = Check("test_perf_prefix_cache", "perf", cache, judge_cache,
                     applies=lambda opts, driver: None if (
                         opts.min_cached_share is not None
                         or opts.max_cached_ttft_ratio is not None)
                     else "no expect.perf.min_cached_share or max_cached_ttft_ratio in "
                          "fleet.yaml: the prefix-cache probe (a long prompt sent twice) is not "
                          "run")


# -- advice: speed and the prefix cache by engine, named by the driver's flags ------------------
def slow_gpu_hint(driver: Facts) -> str:
    """What a slow server on a GPU is told to check."""
    return str(advise(
        driver, "that every layer runs on the GPU, that speculative decoding is engaged, and "
                "that no other load shares the card",
        {LlamaCppDriver: "that every layer is offloaded to the GPU (-ngl), that speculative decoding is "
                         "engaged, and that no other load shares the card"}))


def slow_cpu_hint(driver: Facts) -> Text:
    """What a slow server on the CPU (bound by its cores and memory bandwidth) is told to do."""
    return advise(
        driver, "give it more threads (the physical cores), serve a smaller quant or model, or "
                "move it to a GPU; check that no other load shares the machine",
        # llama.cpp's prompt threads follow --threads unless set apart (and launch: sets both),
        # so the one setting in the launcher's spelling is the whole fix
        {LlamaCppDriver: lambda d: Phrase(
            "set ", d.flags["threads"], " to the physical cores, serve a smaller quant or model, "
            "or move it to a GPU; check that no other load shares the machine")})


def prefix_cache_fix(driver: Facts) -> Text:
    return advise(
        driver, "turn on the server's prefix (prompt) cache, and keep the start of the prompt "
                "stable between turns (no timestamps in the system prompt)",
        {LlamaCppDriver: lambda d: Phrase("llama-server reuses a slot's cached prompt unless the "
                                          "request says \"cache_prompt\": false: find the client "
                                          "or proxy that sends it and drop it; check too that "
                                          "--no-cache-prompt is not set, that ",
                                          d.flags["parallel"], " slots are large enough to hold "
                                          "the prompt, and that the start of the prompt is stable "
                                          "between turns (--cache-reuse N also reuses a prefix "
                                          "that moved)"),
         VllmDriver: "pass --enable-prefix-caching (vLLM keeps it opt-in for hybrid models such "
                     "as Qwen3-Next/3.8)",
         SglangDriver: "remove --disable-radix-cache (the radix cache is SGLang's prefix cache)"})


def cache_count_hint(driver: Facts) -> Text:
    """Why no reply says how much of its prompt came from the cache."""
    return advise(
        driver, "the server sends no usage.prompt_tokens_details.cached_tokens",
        {VllmDriver: "vLLM sends cached_tokens in usage only with --enable-prompt-tokens-details, and "
                     "/metrics has no prefix_cache counters",
         SglangDriver: "SGLang sends cached_tokens in usage only with --enable-cache-report"})
