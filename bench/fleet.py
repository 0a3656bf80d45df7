"""The probe phase at fleet scale: emulated vLLM endpoints whose generations take a fixed latency,
the whole battery, one plain pytest process (no xdist).

For fleets of 1, 8 and 32 endpoints it prints the wall time of the run (the whole pytest
process) against the single endpoint's; the probe phase against the critical path (the longest
serial chain of requests on one endpoint: its generations times the latency, divided by
`concurrency`) and the overhead of the run's loop (probe phase plus judging) over that path; and
the peak number of requests each endpoint had in flight (counted by the emulator) against its
`concurrency`. Targets: 8 endpoints within 1.3x the wall of one, 32 within 1.6x, overhead within
15%, peak never above `concurrency`.
Run: python bench/fleet.py [--latency S] [--sizes 1 8 32] [--concurrency N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
from emulator import Emulator, Reply, metrics_text, serve_chat  # noqa: E402
from healthy_engines import healthy_chat  # noqa: E402

import quick  # noqa: E402

EXPECT = {
    "reasoning": True,
    "reasoning_effort": {"low": "low", "high": "high"},
    "tools": {"trials": 1},
    "spec_decode": {"min_acceptance": 0.5},
    "perf": {"runs": 2, "max_ttft_s": 30},
    "slots": {"ctx_per_slot": 32768},
}
TARGETS = {8: 1.3, 32: 1.6}


def healthy(em: Emulator) -> None:
    """A healthy vLLM: the suite's healthy engine (reasoning, the tool each request names or
    offers first, with the arguments each check asks for), and spec_decode counters that grow
    per reply."""
    drafted = {"n": 0}
    chat = healthy_chat("reasoning")

    def answer(body):
        drafted["n"] += 1
        return chat(body)

    def metrics(_req):
        n = drafted["n"]
        return Reply(200, metrics_text({"vllm:spec_decode_num_drafts_total": 10 * n,
                                        "vllm:spec_decode_num_draft_tokens_total": 30 * n,
                                        "vllm:spec_decode_num_accepted_tokens_total": 24 * n}))

    serve_chat(em, answer)
    em.route("GET", "/metrics", metrics)


def run(size: int, latency: float, concurrency: int) -> dict:
    ems = [Emulator("vllm", latency=latency).start() for _ in range(size)]
    try:
        for em in ems:
            healthy(em)
        fleet = {"endpoints": {f"ep-{i:02d}": {"url": em.url, "engine": "vllm", "alias": "model",
                                               "concurrency": concurrency, "expect": EXPECT}
                               for i, em in enumerate(ems)}}
        with tempfile.TemporaryDirectory() as tmp:
            path, phases = Path(tmp) / "fleet.yaml", Path(tmp) / "phases.json"
            path.write_text(yaml.safe_dump(fleet))
            env = {**os.environ, "FRANK_PHASES": str(phases),
                   "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
            start = time.monotonic()
            out = subprocess.run([sys.executable, "-m", "pytest", "--endpoints", str(path), "-q",
                                  "-p", "no:randomly", "-p", "no:cacheprovider", "-p",
                                  "phase_timer"],
                                 cwd=tmp, capture_output=True, text=True, env=env)
            wall = time.monotonic() - start
            timed = json.loads(phases.read_text()) if phases.exists() else {}
        tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:]
        if out.returncode != 0:
            raise SystemExit(f"the battery did not pass on a healthy fleet of {size}:\n"
                             f"{out.stdout[-3000:]}")
        posts = max(sum(r.method == "POST" for r in em.requests) for em in ems)
        return {"size": size, "wall": wall, "probe": timed["judging"], "loop": timed["end"],
                "tail": tail, "critical": posts * latency / concurrency, "posts": posts,
                "peak": max(em.peak_in_flight for em in ems)}
    finally:
        for em in ems:
            em.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.4)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--concurrency", type=int, default=1)
    quick.flag(parser)
    args = parser.parse_args()
    if args.quick:  # one endpoint, generations that take no time
        args.sizes, args.latency = [1], 0.01
    rows = [run(size, args.latency, args.concurrency) for size in args.sizes]
    one = rows[0]["wall"]
    print(f"latency {args.latency}s per generation, concurrency {args.concurrency}")
    print(f"{'endpoints':>9} {'wall s':>7} {'x one':>6} {'target':>6} {'critical s':>10} "
          f"{'probes s':>8} {'loop s':>7} {'overhead':>8} {'peak/conc':>9}  result")
    ok = True
    for r in rows:
        ratio, overhead = r["wall"] / one, r["loop"] / r["critical"] - 1
        target = TARGETS.get(r["size"])
        good = ((target is None or ratio <= target) and overhead <= 0.15
                and r["peak"] <= args.concurrency)
        ok &= good
        print(f"{r['size']:>9} {r['wall']:>7.2f} {ratio:>6.2f} "
              f"{'-' if target is None else f'{target:.1f}':>6} {r['critical']:>10.2f} "
              f"{r['probe']:>8.2f} {r['loop']:>7.2f} {overhead:>8.0%} "
              f"{r['peak']:>4}/{args.concurrency:<4}  {r['tail']}")
    print("all targets met" if ok else "TARGETS MISSED")
    return quick.judged(ok, args.quick)


if __name__ == "__main__":
    sys.exit(main())
