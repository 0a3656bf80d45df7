"""bench/mutations.py still works: its quick mode (real llama.cpp behind the proxy, the fleet
`frank init` writes, built without running init, one recorded run of test_chat, one mutant per
route, about 15 s of CPU) prints its table and its goal line, and
every mutant it made reached the battery. Whether the goal is met is the script's own figure,
not this test's: the test fails when the script breaks, never on a survivor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from checkout import ROOT
from mutants import CAUSES, ROUTES

pytestmark = pytest.mark.real

STATUSES = {"killed", "survived", "equivalent", "unreached"}


def test_mutation_harness_quick_runs_end_to_end(tmp_path):
    pytest.importorskip("xllamacpp")
    out = tmp_path / "mutants.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "mutations.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    # the goal line, then bench/quick.py's word that a quick run judges no target
    assert lines[-1].startswith("quick run: the code ran"), done.stdout[-3000:]
    assert lines[-2].startswith(("goal met: ", "goal not met: ")), done.stdout[-3000:]
    outcomes = json.loads(out.read_text())
    assert sorted(o["route"] for o in outcomes) == sorted(ROUTES), outcomes
    for route in ROUTES:
        assert route in lines, done.stdout[-3000:]
    for o in outcomes:
        assert o["status"] in STATUSES and o["cause"] in CAUSES, o
        # the proxy applied it: a mutant of a reply test_chat gets changes one of its replies
        assert o["fired"] > 0, o
        assert o["status"] != "killed" or o["failures"], o
