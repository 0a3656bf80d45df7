"""perf: time to first token, decode speed and the prefix-cache effect meet the fleet's floors.

Every figure is a median over a few sequential streamed runs (one request at a time, so a probe
never crowds an endpoint's slots). Time to first token runs to the first content or reasoning
text, not to the first SSE chunk (llama.cpp sends a role-only chunk before any work is done).
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass, field

from pytest_frank import generate
from pytest_frank.http import Exchange
from pytest_frank.verdict import fail

RUNS = 3
MAX_TOKENS = 64
CACHE_PROMPT_WORDS = 1500  # ~2k tokens, the prefix the seeds measured (4.6 s cold, 1.1 s warm)
CACHE_MAX_TOKENS = 16  # enough for a first visible token behind a `<think>` marker
PROMPT = "Write a long story about a lighthouse keeper."
FILLER = ("The keeper climbed the spiral stairs at dusk, trimmed the wick, wound the clockwork, "
          "and logged the ships that passed the reef in the old brass-bound book. ")


@dataclass
class Runs:
    runs: list[generate.Streamed] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)


@dataclass
class CacheRuns:
    pairs: list[tuple[generate.Streamed, generate.Streamed]] = field(default_factory=list)
    words: int = CACHE_PROMPT_WORDS
    exchanges: list[Exchange] = field(default_factory=list)


def _options(target) -> dict:
    return target.endpoint.options("perf")


def probe_speed(target) -> Runs:
    """A few sequential generations: time to first token and decode rate."""
    opts, out = _options(target), Runs()
    for _ in range(int(opts.get("runs", RUNS))):
        run = generate.stream(target, PROMPT, int(opts.get("max_tokens", MAX_TOKENS)),
                              **target.driver.keep_generating)
        out.runs.append(run)
        out.exchanges.append(run.exchange)
        if not run.exchange.ok or run.first_token_s is None:
            break  # the verdict is known; no need to repeat a failure
    return out


def probe_cache(target) -> CacheRuns:
    """The same long prompt twice, per run; a fresh prefix per run so no earlier run warms it."""
    opts = _options(target)
    out = CacheRuns(words=int(opts.get("cache_prompt_words", CACHE_PROMPT_WORDS)))
    for _ in range(int(opts.get("runs", RUNS))):
        prompt = _long_prompt(out.words)
        cold = generate.stream(target, prompt, CACHE_MAX_TOKENS)
        warm = generate.stream(target, prompt, CACHE_MAX_TOKENS)
        out.pairs.append((cold, warm))
        out.exchanges += [cold.exchange, warm.exchange]
        if not (cold.exchange.ok and warm.exchange.ok):
            break
    return out


def _long_prompt(words: int) -> str:
    filler = FILLER.split()
    text = " ".join(filler[i % len(filler)] for i in range(words))
    return f"Log {uuid.uuid4().hex}.\n{text}\nSummarise the log in one line."


def judge_ttft(runs: Runs, options: dict, driver, note=lambda text: None) -> float:
    ttft = statistics.median(_first_tokens(runs.runs, driver))
    note(f"time to first token: median {ttft:.3f}s over {len(runs.runs)} runs "
         f"({_list(r.first_token_s for r in runs.runs)})")
    floor = options.get("max_ttft_s")
    if floor is not None and ttft > floor:
        fail(f"time to first token {ttft:.3f}s (median of {len(runs.runs)}) is over max_ttft_s "
             f"{floor:g}s", "check the load on the server, the prompt-processing batch size "
             "and that the model runs on the GPU; or relax expect.perf.max_ttft_s")
    return ttft


def judge_decode(runs: Runs, options: dict, driver, note=lambda text: None) -> float:
    _first_tokens(runs.runs, driver)
    rates = [r.decode_rate() for r in runs.runs]
    if any(rate is None for rate in rates):
        short = next(r for r, rate in zip(runs.runs, rates) if rate is None)
        fail(f"only {short.generated} token(s) streamed from {short.exchange.url}: no decode "
             f"rate can be measured (asked for {options.get('max_tokens', MAX_TOKENS)})")
    rate = statistics.median(rates)
    server = [r.extra.get("timings", {}).get("predicted_per_second") for r in runs.runs]
    seen = f"; the server's own timings: {_list(server)} tok/s" if any(server) else ""
    note(f"decode: median {rate:.1f} tok/s over {len(rates)} runs ({_list(rates)}){seen}")
    floor = options.get("min_decode_tps")
    if floor is not None and rate < floor:
        fail(f"decode speed {rate:.1f} tok/s (median of {len(rates)}, {runs.runs[0].generated} "
             f"tokens each) is under min_decode_tps {floor:g}",
             "check that every layer is offloaded to the GPU (-ngl), that speculative decoding "
             "is engaged, and that no other load shares the card; or relax "
             "expect.perf.min_decode_tps")
    return rate


def judge_cache(cache: CacheRuns, options: dict, driver, note=lambda text: None) -> float:
    cold = [c for c, _ in cache.pairs]
    warm = [w for _, w in cache.pairs]
    ratios = [w / c for c, w in zip(_first_tokens(cold, driver), _first_tokens(warm, driver))]
    ratio = statistics.median(ratios)
    note(f"prefix cache: a {cache.words}-word prompt, first token cold "
         f"{_list(c.first_token_s for c in cold)}s, repeated {_list(w.first_token_s for w in warm)}"
         f"s; median ratio {ratio:.2f}")
    ceiling = options.get("max_cached_ttft_ratio")
    if ceiling is not None and ratio > ceiling:
        fail(f"a repeated {cache.words}-word prompt answers its first token at {ratio:.2f} of the "
             f"cold time (median of {len(ratios)}), over max_cached_ttft_ratio {ceiling:g}: "
             f"the prefix cache does not help", driver.prefix_cache_fix)
    return ratio


def _first_tokens(runs: list[generate.Streamed], driver) -> list[float]:
    for run in runs:
        ex = run.exchange
        if ex.error:
            fail(f"the streamed request to {ex.url} failed: {ex.error}")
        if not ex.ok:
            reason = driver.error_message(ex) or ex.snippet(200)
            fail(f"the streamed request to {ex.url} answered {ex.status}: {reason}")
        if run.first_token_s is None:
            fail(f"the stream from {ex.url} carried no content or reasoning text: "
                 f"{ex.snippet(200)}")
    return [run.first_token_s for run in runs]


def _list(values) -> str:
    return ", ".join("n/a" if v is None else f"{v:.3g}" for v in values)
