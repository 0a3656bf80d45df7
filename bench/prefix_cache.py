"""Prefix-cache verdicts under jitter: the self-test endpoint's test_perf_prefix_cache, N times,
behind a loopback proxy that delays every answer by a random 0-30 ms.

Starts the self-test llama.cpp server once (examples/selftest.yaml's `frank-selftest` launch
block and its expect.perf), puts tests/support/proxy.py in front of it, and runs
`pytest --endpoints fleet.yaml -k test_perf_prefix_cache` N times against the proxy. The server
is healthy, so every run should pass; the script prints each run's verdict with the cached share
and first-token ratio it measured, then the tally ("50 of 50 passed" is the target).

    python bench/prefix_cache.py [--runs 50] [--jitter 0.03] [--quick]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
from proxy import Proxy  # noqa: E402

import quick  # noqa: E402

EXAMPLE = HERE.parent / "examples" / "selftest.yaml"


def selftest() -> tuple[dict, dict]:
    """The self-test endpoint's launch block and expect.perf, as the example ships them."""
    endpoint = yaml.safe_load(EXAMPLE.read_text())["endpoints"]["frank-selftest"]
    return endpoint["launch"], endpoint["expect"]["perf"]


def run_once(folder: Path, index: int, timeout: float) -> dict:
    report = folder / f"run-{index:02d}.json"
    args = [sys.executable, "-m", "pytest", "--endpoints", str(folder / "fleet.yaml"), "-q",
            "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
            "-k", "test_perf_prefix_cache", "--frank-json", str(report)]
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1) or not report.exists():
        sys.exit(f"run {index}: pytest exited {done.returncode} without a report:\n"
                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rows = json.loads(report.read_text())["rows"]
    return next(r for r in rows if "test_perf_prefix_cache" in r["key"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--jitter", type=float, default=0.03, help="most seconds added")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.runs = 1

    from pytest_frank.local.launch import launch

    spec, perf = selftest()
    verdicts = collections.Counter()
    server = launch(spec)
    try:
        with Proxy(server.url, jitter_s=opts.jitter) as proxy, \
                tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            fleet = {"endpoints": {"frank-selftest": {
                "engine": "llamacpp", "url": proxy.url, "alias": "frank-selftest",
                "expect": {"perf": perf}}}}
            (folder / "fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))
            for i in range(1, opts.runs + 1):
                start = time.monotonic()
                row = run_once(folder, i, opts.timeout)
                verdicts[row["verdict"]] += 1
                fig = row["figures"]
                share = fig.get("cached_share", {}).get("value")
                ratio = fig.get("cached_ttft_ratio", {}).get("value")
                print(f"run {i:2d}/{opts.runs}: {row['verdict']}, cached share {share}, "
                      f"first-token ratio {ratio} ({time.monotonic() - start:.0f}s)"
                      + (f": {row['line'].splitlines()[0]}" if row["line"] else ""), flush=True)
            delays = proxy.delays
    finally:
        server.stop()
    print(f"\n{verdicts.get('pass', 0)} of {opts.runs} passed "
          f"({', '.join(f'{n} {v}' for v, n in sorted(verdicts.items()))}); "
          f"{len(delays)} answers delayed {min(delays):.3f}-{max(delays):.3f}s")
    return quick.judged(verdicts.get("pass", 0) == opts.runs, opts.quick)


if __name__ == "__main__":
    raise SystemExit(main())
