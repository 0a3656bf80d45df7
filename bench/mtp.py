"""MTP on a real engine: the hybrid's acceptance against the share its head was built for, and
the memory model against llama.cpp's own load log.

Serves `selftest:hybrid` (Qwen3.5's architecture with its own MTP head) and
`selftest:hybrid_collapse` (a head that is always wrong) on real llama.cpp (xllamacpp, CPU) with
`--spec-type draft-mtp`, and runs the battery's spec_decode check on each N times
(`pytest --endpoints ... -m spec_decode`, fleet band 0.6-0.95). Per run: the acceptance the
battery measured from llama.cpp's own counters, against the one the head was built to give
(selftest_hybrid.built_acceptance, worked out by llama.cpp's drafting loop). A healthy endpoint
that fails is a false failure; the collapsing head must fail every run.

Then launches the hybrid at two context sizes and two slot counts, logging at debug level, and
compares each part of the memory model (attention KV, MTP draft KV, recurrent state) with what
llama.cpp's log says it allocated.

    python bench/mtp.py [--runs 10] [--draft-max 3] [--quick]

Goal: acceptance within 2 percentage points of the built share in every run, 0 false failures
on the healthy variant, the collapse caught in every run, every memory part within 5% of the
log. Prints its figures, then whether the goal is met; exits 1 when it is not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import quick
import yaml

from pytest_frank.local import llama_log, selftest_hybrid, selftest_model
from pytest_frank.local.launch import launch
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.vram.memory import MiB, ModelShape, Settings, estimate

BAND = {"min_acceptance": 0.6, "max_acceptance": 0.95}
ACCEPTANCE_SLACK = 0.02
MEMORY_TOLERANCE = 0.05
SHAPES = [(4096, 1), (4096, 2), (16384, 1), (16384, 2)]
PROBE_TOKENS = 128  # the spec_decode probe's max_tokens (claims.spec_decode.Options)


def battery_run(url: str, folder: Path, n: int) -> dict:
    """One `pytest -m spec_decode` on the served endpoint: its verdict and acceptance."""
    fleet = folder / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"endpoints": {"hybrid": {
        "url": url, "engine": "llamacpp", "expect": {"spec_decode": BAND}}}}))
    record = folder / f"run{n}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--endpoints", str(fleet), "-m", "spec_decode", "-q",
         "-p", "no:cacheprovider", "--frank-json", str(record)],
        cwd=folder, capture_output=True, text=True, timeout=300)
    rows = [r for r in json.loads(record.read_text())["rows"] if r["claim"] == "spec_decode"]
    row = rows[0]
    figure = row["figures"].get("acceptance", {}).get("value")
    return {"verdict": row["verdict"], "acceptance": figure, "line": row.get("line") or "",
            "rc": proc.returncode}


def acceptance_runs(variant: str, runs: int, draft_max: int) -> tuple[list[dict], float]:
    accepted, drafted = selftest_hybrid.built_acceptance(variant, draft_max, PROBE_TOKENS)
    built = accepted / drafted
    server = launch({"model": f"selftest:{variant}", "spec_type": "draft-mtp",
                     "draft_max": draft_max, "threads": 1})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = [battery_run(server.url, Path(tmp), n) for n in range(runs)]
    finally:
        server.stop()
    return results, built


def memory_parts(ctx_size: int, parallel: int, draft_max: int) -> list[tuple[str, float, float]]:
    """(part, modelled MiB, logged MiB) for the hybrid served with MTP at this shape."""
    before = llama_log.verbosity()
    try:
        server = launch({"model": "selftest:hybrid", "spec_type": "draft-mtp",
                         "draft_max": draft_max, "ctx_size": ctx_size, "parallel": parallel,
                         "verbosity": 4})
        server.stop()
    finally:
        if before is not None:
            llama_log.set_verbosity(before)
    text = server.log.text() if server.log else ""
    caches, states = llama_log.kv_caches(text), llama_log.recurrent_states(text)
    if len(caches) != 2 or len(states) != 1:
        raise SystemExit(f"expected the target's and the MTP context's KV caches and one "
                         f"recurrent state in llama.cpp's log, found {caches} and {states}")
    shape = ModelShape.from_gguf(selftest_model.model_path("hybrid"))
    est = estimate(shape, Settings(ctx_size=ctx_size, n_parallel=parallel, draft_max=draft_max))
    return [("attention KV", est.kv / MiB, caches[0].mib),
            ("MTP draft KV", est.mtp_kv / MiB, caches[1].mib),
            ("recurrent state", est.recurrent_state / MiB, states[0].mib)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--draft-max", type=int, default=3)
    quick.flag(ap)
    args = ap.parse_args(argv)
    misses = []
    # quick: one run of the healthy head (the collapsing one goes the same way) and the memory
    # model at one shape
    variants = [("hybrid", True)] if args.quick else [("hybrid", True), ("hybrid_collapse", False)]
    shapes = SHAPES[:1] if args.quick else SHAPES
    if args.quick:
        args.runs = 1

    print(f"spec_decode on real llama.cpp, draft-mtp, draft_max {args.draft_max}, "
          f"{args.runs} runs per variant, band {BAND['min_acceptance']}-{BAND['max_acceptance']}")
    for variant, healthy in variants:
        results, built = acceptance_runs(variant, args.runs, args.draft_max)
        rates = [r["acceptance"] for r in results]
        off = max((abs(a - built) for a in rates if a is not None), default=None)
        wrong = [r for r in results if (r["verdict"] == Verdict.PASS.value) != healthy]
        print(f"  {variant}: built {built:.3f}; measured "
              f"{', '.join('n/a' if a is None else f'{a:.3f}' for a in rates)}; "
              f"largest gap {'n/a' if off is None else f'{100 * off:.1f} pp'}; "
              f"{len(results) - len(wrong)}/{len(results)} runs "
              f"{'passed' if healthy else 'failed as they should'}")
        for r in wrong[:3]:
            print(f"    {r['verdict']}: {r['line'][:200]}")
        if off is None or off > ACCEPTANCE_SLACK or None in rates:
            misses.append(f"{variant}: acceptance off the built share")
        if wrong:
            kind = "false failure(s)" if healthy else "collapse(s) not caught"
            misses.append(f"{variant}: {len(wrong)} {kind}")

    print("memory model against llama.cpp's load log (selftest:hybrid, draft-mtp):")
    for ctx_size, parallel in shapes:
        for part, modelled, logged in memory_parts(ctx_size, parallel, args.draft_max):
            ratio = modelled / logged if logged else float("inf")
            print(f"  ctx {ctx_size:>6}, {parallel} slot(s), {part:<16} modelled "
                  f"{modelled:8.2f} MiB, logged {logged:8.2f} MiB, ratio {ratio:.3f}")
            if abs(ratio - 1) > MEMORY_TOLERANCE:
                misses.append(f"{part} at ctx {ctx_size} x {parallel}: ratio {ratio:.3f}")

    if args.quick:
        return quick.judged(not misses, args.quick)
    if misses:
        print("goal NOT met: " + "; ".join(misses))
        return 1
    print(f"goal met: acceptance within {100 * ACCEPTANCE_SLACK:.0f} pp of the built share, "
          f"0 false failures in {args.runs} healthy runs, the collapse caught every time, "
          f"memory within {100 * MEMORY_TOLERANCE:.0f}% of llama.cpp's log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
