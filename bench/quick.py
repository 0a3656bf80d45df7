"""`--quick`, which every script in bench/ takes: the smallest run that still goes through the
script's code (one run, the fewest endpoints, cases and sizes), as the suite runs each script
(tests/package/test_bench_real.py) so that a change to what a script calls breaks the suite,
not the next person to measure. A quick run prints its figures but judges no target: at those
sizes they measure nothing, and the suite holds no timed assertion. It still exits non-zero
where the script itself broke."""

from __future__ import annotations

import argparse

HELP = ("the smallest run through the script's code (the suite's): figures printed, targets "
        "not judged")


def flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help=HELP)


def judged(met: bool, quick: bool) -> int:
    """The exit status of a run whose targets were `met`; a quick run's is 0 (it measures
    nothing), said so under its figures."""
    if quick:
        print("quick run: the code ran; its figures are not a measurement, its targets not judged")
        return 0
    return 0 if met else 1
