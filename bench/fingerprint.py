"""Fingerprints across relaunches, and the margin by which each configuration change is caught.

Runs `pytest --endpoints fleet.yaml -m fingerprint --frank-json` RUNS times, each run launching
its own llama.cpp server, and compares every run's recorded fingerprint with the first one's:
the distribution of agreement and logprob drift over relaunches, which the default tolerances
must sit beyond. Then one run per change, compared with the same first run: whether it is
caught, and by what margin. Two subjects: `selftest:flat` (logprobs that are not peaked) for
another GGUF under the same alias and a chat template edit; `selftest:positional` (logprobs
that follow RoPE attention, heads a quantized K cache fits) for a rope frequency base and a
q8_0 or q4_0 K cache.

    python bench/fingerprint.py [--runs 50] [--threads 1]
    python bench/fingerprint.py --model SmolLM2-135M-Instruct.Q4_1.gguf --runs 20 --threads 2
    python bench/fingerprint.py --quick     # one run of selftest:flat and its template edit

Later runs are compared with the first through `--frank-baseline`, so they ask its prompts.
`relaunches(model_path, n)` is the real-model series for bench/real_model.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quick
import yaml

from pytest_frank.reports.baseline import Tolerances
from pytest_frank.claims.fingerprint import comparable, compare, read

FLAT = {"model": "selftest:flat", "alias": "frank", "ctx_size": 2048}
POSITIONAL = {**FLAT, "model": "selftest:positional"}
SWITCH = "{%- if enable_thinking is defined and enable_thinking is false %}"


def run_once(folder: Path, name: str, launch: dict, timeout: float,
             baseline: Path | None = None) -> dict | str:
    """The recorded fingerprint of one launched run, or why there is none; with `baseline`,
    the run asks that run's prompts again (as `--frank-baseline` does)."""
    fleet = {"endpoints": {"ep": {"alias": "frank", "launch": launch, "timeout": timeout,
                                  "expect": {"fingerprint": True}}}}
    (folder / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    report = folder / f"{name}.json"
    args = [sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml", "-q", "-m",
            "fingerprint", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
            "--frank-json", str(report)]
    if baseline is not None:
        args += ["--frank-baseline", str(baseline)]
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=timeout)
    if not report.exists():
        return f"pytest exited {done.returncode}: {done.stdout.strip().splitlines()[-1:]}"
    row = next(r for r in json.loads(report.read_text())["rows"] if "test_fingerprint" in r["key"])
    return read(row["attachments"]) or f"{row['verdict']}: {row['line'][:200]}"


def worst(before: dict, now: dict) -> tuple[float, float]:
    """The lowest agreement and the highest drift over the prompts both asked alike (a
    divergence at a near tie counts as full agreement, as the baseline counts it)."""
    diffs = [compare(before[p], now[p]) for p in before
             if p in now and comparable(before[p], now[p])]
    return (min(1.0 if d.tie is not None else d.agreement for d in diffs),
            max(d.drift or 0.0 for d in diffs))


def template(folder: Path, threads: int) -> Path:
    """The self-test template with its thinking-off switch cut out."""
    import httpx

    from pytest_frank.local.launch import launch

    server = launch({**FLAT, "threads": threads})
    try:
        text = httpx.get(f"{server.url}/props").json()["chat_template"]
    finally:
        server.stop()
    path = folder / "edited.jinja"
    path.write_text(text.replace(SWITCH, "{%- if false %}"))
    return path


def series(folder: Path, base: dict, runs: int, timeout: float,
           tol: Tolerances) -> tuple[dict, list[dict]]:
    """Relaunch one configuration `runs` times: the first run's fingerprint, and one row per
    later run compared with it (run, seconds, agreement, drift, regression)."""
    started = time.monotonic()
    first = run_once(folder, "run-00", base, timeout)
    if isinstance(first, str):
        sys.exit(f"the first run of {base['model']} recorded nothing: {first}")
    rows = [{"run": 0, "seconds": round(time.monotonic() - started, 1)}]
    for i in range(1, runs):
        began = time.monotonic()
        now = run_once(folder, f"run-{i:02d}", base, timeout, folder / "run-00.json")
        if isinstance(now, str):
            sys.exit(f"run {i}: {now}")
        a, d = worst(first, now)
        rows.append({"run": i, "seconds": round(time.monotonic() - began, 1), "agreement": a,
                     "drift": d, "regression": a < tol.fingerprint_agreement
                     or d > tol.logprob_drift})
    return first, rows


def summary(label: str, rows: list[dict], tol: Tolerances) -> list[str]:
    """How the later runs compare with the first: agreement, drift, false regressions."""
    later = [r for r in rows if "agreement" in r]
    if not later:
        return [f"{label}: one run, nothing to compare"]
    agreements, drifts = [r["agreement"] for r in later], [r["drift"] for r in later]
    spent = statistics.mean(r["seconds"] for r in rows)
    return [f"{len(rows)} relaunches of {label}, {spent:.1f} s a run; each compared with the "
            f"first:",
            f"  agreement: min {min(agreements):.3f}, median {statistics.median(agreements):.3f}"
            f" (tolerance: at least {tol.fingerprint_agreement:g})",
            f"  drift: max {max(drifts):.2e}, median {statistics.median(drifts):.2e} "
            f"(tolerance: at most {tol.logprob_drift:g})",
            f"  false regressions: {sum(r['regression'] for r in later)} of {len(later)}"]


def relaunches(model_path: str | Path, n: int = 20, timeout: float = 600,
               **launch: object) -> list[dict]:
    """Relaunch a real GGUF (SmolLM2) `n` times, each a fingerprint run of its own with a
    fresh llama.cpp server, and compare each later run with the first: one row per run
    ({"run", "seconds", "agreement", "drift", "regression"}; the first has run and seconds
    only). `launch` adds fleet.yaml launch keys (ctx_size 2048, threads 2 by default)."""
    base = {"model": str(model_path), "alias": "frank", "ctx_size": 2048, "threads": 2,
            **launch}
    with tempfile.TemporaryDirectory() as tmp:
        return series(Path(tmp), base, n, timeout, Tolerances())[1]


def relaunched(folder: Path, base: dict, runs: int, timeout: float, tol: Tolerances) -> dict:
    """Relaunch one configuration `runs` times, print how the later runs compare with the
    first, and return the first run's fingerprint."""
    first, rows = series(folder, base, runs, timeout, tol)
    label = f"{base['model']} ({base['threads']} thread(s))"
    print("\n".join(summary(label, rows, tol)))
    return first


def changes(folder: Path, first: dict, runs: dict, timeout: float, tol: Tolerances) -> None:
    """One run per change, each compared with the first run: caught or not, and the margin."""
    for label, launch in runs.items():
        now = run_once(folder, "change", launch, timeout)
        if isinstance(now, str):
            print(f"  {label}: no fingerprint ({now[:160]})")
            continue
        a, d = worst(first, now)
        caught = a < tol.fingerprint_agreement or d > tol.logprob_drift
        margin = (f"agreement {a:.2f} ({tol.fingerprint_agreement - a:+.2f} below the "
                  f"tolerance), drift {d:.4f} ({d / tol.logprob_drift:.1f}x the tolerance)")
        print(f"  {label}: {'caught' if caught else 'NOT caught'}: {margin}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="relaunches of each subject")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120, help="seconds per run")
    parser.add_argument("--model", metavar="GGUF", help="relaunch this real model (e.g. "
                        "SmolLM2) --runs times instead of the self-test subjects and changes")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.runs = 1
    tol = Tolerances()
    if opts.model:
        rows = relaunches(opts.model, opts.runs, opts.timeout, threads=opts.threads)
        print("\n".join(summary(Path(opts.model).name, rows, tol)))
        return quick.judged(not any(r.get("regression") for r in rows), opts.quick)
    flat = {**FLAT, "threads": opts.threads}
    positional = {**POSITIONAL, "threads": opts.threads}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        first = relaunched(folder, flat, opts.runs, opts.timeout, tol)
        print("changes, each compared with the first run of selftest:flat:")
        edited = {"chat template edit (thinking-off switch cut)": {
            **flat, "chat_template_file": str(template(folder, opts.threads))}}
        changes(folder, first, edited if opts.quick else {
            "another GGUF under the alias (selftest)": {**flat, "model": "selftest"},
            **edited,
            "4 threads instead of 1 (not a change of model)": {**flat, "threads": 4},
        }, opts.timeout, tol)
        if opts.quick:  # the positional subject goes the same way
            return quick.judged(True, opts.quick)
        first = relaunched(folder, positional, opts.runs, opts.timeout, tol)
        print("changes, each compared with the first run of selftest:positional:")
        changes(folder, first, {
            "rope_freq_base 1000 (10000 before)": {**positional, "rope_freq_base": 1000.0},
            "rope_freq_base 20000": {**positional, "rope_freq_base": 20000.0},
            "cache_type_k q8_0 (f16 before)": {**positional, "cache_type_k": "q8_0"},
            "cache_type_k q4_0": {**positional, "cache_type_k": "q4_0"},
            "4 threads instead of 1 (not a change of model)": {**positional, "threads": 4},
        }, opts.timeout, tol)
    return 0


if __name__ == "__main__":
    sys.exit(main())
