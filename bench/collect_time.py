"""Start-up cost: `pytest --endpoints fleet.yaml --collect-only` on a fleet of 50 endpoints.

Prints the median wall time of a few runs, a bare `pytest --collect-only` on an empty folder for
scale, and the ratio to the 2 s target.
Run: python bench/collect_time.py [--endpoints N] [--runs K] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quick

from pytest_frank.drivers import DRIVERS

TARGET_S = 2.0
ENGINES = list(DRIVERS)


def write_fleet(folder: Path, count: int) -> Path:
    lines = ["endpoints:"]
    for i in range(count):
        lines += [f"  ep-{i:03d}:", f"    url: http://127.0.0.1:{20000 + i}/v1",
                  f"    engine: {ENGINES[i % len(ENGINES)]}", f"    alias: model-{i}",
                  "    expect: {reasoning: true, tools: {trials: 3}}"]
    path = folder / "fleet.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


# pytest keeps the plugin's assert-rewritten modules in __pycache__; an environment that sets
# PYTHONDONTWRITEBYTECODE (some containers do) rewrites every plugin module on every run, about
# 0.6 s here. The bench measures the usual case and says when the caller's setting differs.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd,
                          capture_output=True, text=True, env=ENV)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 5):
        sys.exit(f"pytest failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.endpoints, opts.runs = 2, 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fleet = write_fleet(folder, opts.endpoints)
        # hypothesis is a test dependency of this checkout, not of the plugin: its pytest plugin
        # alone imports for ~1.5 s, so it is switched off to measure what users pay.
        quiet = ["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
        bare = statistics.median(timed(quiet, folder) for _ in range(opts.runs))
        runs = [timed(["--endpoints", str(fleet), *quiet], folder) for _ in range(opts.runs)]
    median = statistics.median(runs)
    print(f"fleet of {opts.endpoints} endpoints, {opts.runs} runs"
          + (" (PYTHONDONTWRITEBYTECODE unset for them)" if len(ENV) < len(os.environ) else ""))
    print(f"bare pytest --collect-only:      {bare:.2f} s")
    print(f"pytest --endpoints --collect-only: {median:.2f} s (min {min(runs):.2f}, "
          f"max {max(runs):.2f})")
    print(f"ratio to bare pytest: {median / bare:.2f}x")
    print(f"ratio to the {TARGET_S:.0f} s target: {median / TARGET_S:.2f} "
          f"({'within' if median <= TARGET_S else 'OVER'} target)")
    quick.judged(True, opts.quick)


if __name__ == "__main__":
    main()
