"""False failures: the full battery, run N times on healthy endpoints that sample.

Writes a fleet like examples/selftest.yaml but serving `selftest:flat` (a model whose answers vary
at the server's default temperature and sometimes end after one word), plus the same model as
its own draft for spec_decode, and runs `pytest --endpoints` on it N times, each run launching
fresh servers. The endpoints are healthy, so every failed check is a false failure: the script
prints, per test, in how many runs it failed and the distinct first lines of its messages, then
the total ("0 of 20 runs had a false failure" is the target).

    python bench/false_failures.py [--runs 20] [--sampling '{"temperature": 0.8}'] [-k EXPR]
    python bench/false_failures.py --quick     # one run of test_chat, judged by no target

The probes are greedy and seeded unless fleet.yaml says otherwise, so by default each endpoint
gets `sampling: {temperature: null, seed: null}`: the probes send no sampling and the server's
own (temperature 0.8) decides, the roughest subject. --sampling replaces that mapping.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import quick
import yaml

MODEL = "selftest:flat"
SERVER_SAMPLING = {"temperature": None, "seed": None}  # send none: the server's default decides
NOT_ASKED = "fleet.yaml does not ask"
# examples/selftest.yaml's expectations, on the flat model: every claim the self-test can show.
EXPECT = {
    "perf": {"max_ttft_s": 5, "min_decode_tps": 20, "max_cached_ttft_ratio": 0.5,
             "cache_prompt_words": 150},
    "reasoning": True,
    "reasoning_effort": {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh",
                         "max": "xhigh"},
    "tools": {"trials": 2},
    "slots": {"count": 2, "ctx_per_slot": 4096},
    "vram": {"ctx_size": 4096, "parallel": 2, "kv_unified": True,
             "contexts": [2048, 4096, 16384, 65536], "gpu_mib": 1024, "fixed_mib": 64,
             "headroom_mib": 64},
}


def fleet(sampling: dict | None) -> dict:
    flat = {"engine": "llamacpp", "alias": "frank-flat", "ready_timeout": 30,
            "launch": {"model": MODEL, "alias": ["frank-flat", "flat-local"], "ctx_size": 4096,
                       "parallel": 2, "kv_unified": True, "metrics": True},
            "expect": EXPECT}
    draft = {"engine": "llamacpp", "alias": "frank-flat", "ready_timeout": 30,
             "launch": {"model": MODEL, "alias": "frank-flat", "draft_model": MODEL,
                        "metrics": True},
             "expect": {"spec_decode": {"min_acceptance": 0.5, "max_acceptance": 0.99}}}
    endpoints = {"frank-flat": flat, "frank-flat-draft": draft}
    for ep in endpoints.values():
        ep["sampling"] = SERVER_SAMPLING if sampling is None else sampling
    return {"endpoints": endpoints}


def run_once(folder: Path, index: int, extra: list[str], timeout: float) -> tuple[ET.Element, str]:
    report = folder / f"run-{index:02d}.xml"
    args = [sys.executable, "-m", "pytest", "--endpoints", str(folder / "fleet.yaml"), "-q",
            "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
            f"--junitxml={report}", *extra]
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1) or not report.exists():
        sys.exit(f"run {index}: pytest exited {done.returncode} without a report:\n"
                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return ET.parse(report).getroot(), done.stdout


def outcomes(root: ET.Element) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, first line of the message) for every test case in a JUnit report."""
    out = {}
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                text = (found.get("message") or found.text or "").strip()
                out[name] = (tag, _headline(text))
                break
        else:
            out[name] = ("passed", "")
    return out


def _headline(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line.removeprefix("Failed: ")[:240]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sampling", type=json.loads, default=None, metavar="JSON",
                        help="a sampling: mapping for each endpoint, e.g. '{\"temperature\": 0.8}'")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (run part of the battery)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--keep", type=Path, help="folder to keep the fleet and JUnit reports in")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.runs, opts.keyword = 1, opts.keyword or "test_chat"
    extra = ["-k", opts.keyword] if opts.keyword else []

    failed_in = collections.Counter()
    messages: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    skipped, runs_with_failure, seen = collections.Counter(), 0, set()
    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "fleet.yaml").write_text(yaml.safe_dump(fleet(opts.sampling), sort_keys=False))
        for i in range(1, opts.runs + 1):
            start = time.monotonic()
            root, _ = run_once(folder, i, extra, opts.timeout)
            results = outcomes(root)
            seen |= set(results)
            bad = {name: msg for name, (kind, msg) in results.items()
                   if kind in ("failure", "error")}
            for name, (kind, msg) in results.items():
                if kind == "skipped" and not msg.startswith(NOT_ASKED):
                    skipped[name, msg] += 1
            for name, msg in bad.items():
                failed_in[name] += 1
                messages[name][msg] += 1
            runs_with_failure += bool(bad)
            print(f"run {i:2d}/{opts.runs}: {len(results)} tests, {len(bad)} failed "
                  f"({time.monotonic() - start:.0f}s){': ' + ', '.join(sorted(bad)) if bad else ''}",
                  flush=True)
    report(failed_in, messages, skipped, seen, runs_with_failure, opts.runs)
    return quick.judged(runs_with_failure == 0, opts.quick)


def report(failed_in, messages, skipped, seen, runs_with_failure: int, runs: int) -> None:
    print()
    print(f"{len(seen)} tests per run, {runs} runs, endpoints serving {MODEL}")
    if failed_in:
        print("false failures per test:")
        for name, count in failed_in.most_common():
            print(f"  {name}: failed in {count} of {runs} runs")
            for msg, n in messages[name].most_common(3):
                print(f"    {n}x {msg}")
    if skipped:
        print("skipped although asked (not a failure, but not a verdict either):")
        for (name, msg), n in sorted(skipped.items()):
            print(f"  {name}: {n} of {runs} runs: {msg}")
    print(f"{runs_with_failure} of {runs} runs had a false failure "
          f"({sum(failed_in.values())} failed checks in all)")


if __name__ == "__main__":
    sys.exit(main())
