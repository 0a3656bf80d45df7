"""The battery on a model that thinks a thousand tokens: no false failure, and what it costs.

Starts one real llama.cpp (xllamacpp, CPU) serving `selftest:long_think` (about 1,000 tokens of
thinking, then "Hello!"), and runs the whole battery on it N times at the default options, with
reasoning, the seeds' reasoning_effort map and tools asked, through the OpenAI shape and, with
--anthropic, also through llama.cpp's own /v1/messages. The endpoint is healthy, so any failed
check is a false failure. Per run it prints the verdicts, the wall time, and the tokens the
server generated for the battery (its /metrics counter, read before and after), then the totals.

    python bench/long_thinker.py [--runs 10] [--anthropic] [-k EXPR]
    python bench/long_thinker.py --quick     # one run of test_reasoning, judged by no target
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import quick
import yaml

MODEL = "selftest:long_think"
SEEDS_MAP = {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "max": "xhigh"}
EXPECT = {"reasoning": True, "reasoning_effort": SEEDS_MAP, "tools": True}
PREDICTED = re.compile(r"^llamacpp:tokens_predicted_total\s+(\S+)", re.M)


def fleet(url: str, engine: str, timeout: float | None) -> dict:
    endpoint = {"url": url, "engine": engine, "alias": "frank-long", "expect": EXPECT}
    return {"endpoints": {f"long-thinker-{engine}": {
        **endpoint, **({"timeout": timeout} if timeout else {})}}}


def generated(url: str) -> float:
    """Tokens the server generated so far (llama.cpp's own counter)."""
    found = PREDICTED.search(httpx.get(f"{url}/metrics", timeout=10).text)
    return float(found.group(1)) if found else float("nan")


def run_once(folder: Path, url: str, engine: str, timeout: float,
             extra: list[str], wait: float | None) -> tuple[str, float, float]:
    """(pytest's summary line, seconds, tokens generated) for one battery run."""
    path = folder / f"fleet-{engine}.yaml"
    path.write_text(yaml.safe_dump(fleet(url, engine, wait), sort_keys=False))
    report = folder / f"run-{engine}.xml"
    args = [sys.executable, "-m", "pytest", "--endpoints", str(path), "-q", "-p", "no:randomly",
            "-p", "no:cacheprovider", "-p", "no:hypothesispytest", f"--junitxml={report}",
            *extra]
    before, start = generated(url), time.monotonic()
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    seconds, tokens = time.monotonic() - start, generated(url) - before
    if done.returncode not in (0, 1):
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return verdicts(ET.parse(report).getroot()), seconds, tokens


def verdicts(root: ET.Element) -> str:
    """'14 passed, 3 skipped', then each failure's test and first line."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    for case in root.iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            counts["failed"] += 1
            text = (bad.get("message") or "").removeprefix("Failed: ").splitlines()
            failures.append(f"\n    {case.get('name')}: {text[0][:200] if text else ''}")
        else:
            counts["skipped" if case.find("skipped") is not None else "passed"] += 1
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) + "".join(failures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--anthropic", action="store_true",
                        help="also run the battery through /v1/messages, once per run")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per battery run")
    parser.add_argument("--endpoint-timeout", type=float, metavar="S",
                        help="the endpoint's `timeout` (default: fleet.yaml's default); on a "
                             "loaded box a non-streamed thousand-token answer takes longer")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (run part of the battery)")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.runs, opts.keyword = 1, opts.keyword or "test_reasoning and not streamed and not off"
    extra = ["-k", opts.keyword] if opts.keyword else []
    from pytest_frank.local.launch import launch

    server = launch({"model": MODEL, "alias": "frank-long", "metrics": True})
    engines = ["llamacpp", "anthropic"] if opts.anthropic else ["llamacpp"]
    totals = {e: [0, 0.0, 0.0] for e in engines}  # runs with a failure, seconds, tokens
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(1, opts.runs + 1):
                for engine in engines:
                    said, seconds, tokens = run_once(Path(tmp), server.url, engine, opts.timeout,
                                                     extra, opts.endpoint_timeout)
                    total = totals[engine]
                    total[0] += " failed" in said
                    total[1] += seconds
                    total[2] += tokens
                    print(f"run {i:2d}/{opts.runs} {engine}: {said} ({seconds:.0f}s, "
                          f"{tokens:.0f} tokens generated)", flush=True)
    finally:
        server.stop()
    print()
    for engine, (bad, seconds, tokens) in totals.items():
        print(f"{engine}: {bad} of {opts.runs} runs had a false failure; per run on average "
              f"{seconds / opts.runs:.0f}s and {tokens / opts.runs:.0f} tokens generated "
              f"(serving {MODEL})")
    return quick.judged(not any(t[0] for t in totals.values()), opts.quick)


if __name__ == "__main__":
    sys.exit(main())
