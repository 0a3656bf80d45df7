"""The load claim's ladder against a bare loop sending the same requests.

Starts the self-test model `selftest:echo` (each request of the pool answered with its own marker
word) on real llama.cpp with `--parallel 4` (4 slots of 4096 tokens),
behind tests/support/proxy.py letting its tokens out at `--pace` seconds each (default 0.01: a 100 tok/s
endpoint; the self-test model alone answers in milliseconds, where any client's own cost per
request is the whole of the wall). It runs the load claim's probe and judge in-process
(expect.load, with tools and reasoning asked: plain, streamed, tool-forced and thinking
requests), then sends the very same request bodies, burst by burst, with httpx from as many
threads as the burst, and reads each answer whole; `--runs` times, one after the other. It
prints, per level, the requests, the tokens the server counted and the wall time of each, and
the claim's overhead: its best wall over the bare loop's best (target: at most 1.1x).

    python bench/load.py [--requests 60] [--runs 3] [--pace 0.01]
    python bench/load.py --quick     # one run of 8 requests, judged by no target
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from proxy import Proxy  # noqa: E402

import quick  # noqa: E402


def ladder(url: str, requests: int):
    """The claim's probe and judge, as the battery runs them; (observation, verdict, seconds)."""
    from pytest_frank.claims.checks import Context
    from pytest_frank.claims import bind, load
    from pytest_frank.fleet import Endpoint
    from pytest_frank.runtime.target import Target

    ep = bind(Endpoint("bench", "llamacpp", url=url, timeout=120,
                       expect={"load": {"requests": requests}, "tools": True, "reasoning": True}))
    target = Target(ep)
    target.model_name(), target.need(load.slot_shape)  # what the probe phase reads first
    start = time.monotonic()
    seen = load.ladder(target)
    verdict = "pass"
    try:
        load.judge(seen, Context(ep, target.driver, ep.options("load")))
    except BaseException as outcome:  # a verdict, not a crash: printed
        verdict = str(outcome).splitlines()[0]
    return seen, verdict, time.monotonic() - start


def bare(url: str, seen) -> list[float]:
    """The same bodies, burst by burst, each burst from as many threads; per level, the wall."""
    client = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=64))
    walls = []
    for level in seen.levels:
        bodies = [s.reply.exchange.request_json for s in level.sent]
        wall = 0.0
        for at in range(0, len(bodies), level.width):
            burst = bodies[at:at + level.width]
            threads = [threading.Thread(target=_ask, args=(client, url, body)) for body in burst]
            start = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall += time.monotonic() - start
        walls.append(wall)
    client.close()
    return walls


def _ask(client: httpx.Client, url: str, body: dict) -> None:
    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as answer:
        for _ in answer.iter_bytes():
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pace", type=float, default=0.01, help="seconds per token")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.requests, opts.runs = 8, 1

    from pytest_frank.local.launch import launch

    # the echo model: each request of the pool answered its own way, as the claim judges it
    server = launch({"model": "selftest:echo", "parallel": 4, "ctx_size": 16384})
    claims, loops = [], []
    try:
        with Proxy(server.url, pace_s=opts.pace) as proxy:
            for run in range(1, opts.runs + 1):
                seen, verdict, took = ladder(proxy.url, opts.requests)
                walls = bare(proxy.url, seen)
                claims.append(took)
                loops.append(sum(walls))
                _report(run, seen, verdict, took, walls)
    finally:
        server.stop()
    best = min(claims) / min(loops)
    print(f"\nthe claim's wall over the bare loop's, best of {opts.runs} each: {min(claims):.3f} s "
          f"over {min(loops):.3f} s, {best:.2f}x (target: at most 1.1x) "
          f"{'met' if best <= 1.1 else 'NOT met'}")
    return quick.judged(best <= 1.1, opts.quick)


def _report(run: int, seen, verdict: str, took: float, walls: list[float]) -> None:
    claim = sum(level.wall_s for level in seen.levels)
    loop = sum(walls)
    print(f"run {run}: {verdict}")
    for level, wall in zip(seen.levels, walls):
        tokens = sum(s.reply.generated for s in level.sent)
        print(f"  {level.width} in flight: {len(level.sent)} requests, {tokens} tokens, "
              f"claim {level.wall_s:.3f} s, bare loop {wall:.3f} s "
              f"({level.wall_s / wall:.2f}x)")
    print(f"  ladder {claim:.3f} s of bursts, {took:.3f} s with its set-up and judge; "
          f"bare loop {loop:.3f} s: {took / loop:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
