"""Every script in bench/ runs, in its quick mode (`--quick`, bench/quick.py: the smallest run
through its code), so a change to what a script calls (a module moved, a probe's signature, a
check the emulated fleet no longer passes) fails here and not in the hands of the next person
to measure. The figures are the script's to print: a quick run judges no target, and nothing
here reads them. Several launch real llama.cpp (the self-test models); none starts vLLM
(families.py's vLLM rows are left out of its quick run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from checkout import ROOT

pytestmark = pytest.mark.real

BENCH = ROOT / "bench"
# What bench/ holds beside the scripts, and the script that uses each.
HELPERS = {"quick.py": "every script", "phase_timer.py": "fleet.py", "rss_of.py": "hostile.py"}
# A script whose quick run has a test of its own that reads more of it than its exit status.
OWN_TEST = {"mutations.py": "tests/robustness/test_mutations_real.py"}
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in HELPERS)
QUICK = [s for s in SCRIPTS if s not in OWN_TEST]


def test_each_helper_is_used_by_its_scripts():
    for helper, user in HELPERS.items():
        users = [s for s in SCRIPTS if helper.removesuffix(".py") in (BENCH / s).read_text()]
        wanted = SCRIPTS if user == "every script" else [user]
        assert set(wanted) <= set(users), f"bench/{helper} is not used by {user}: a script of " \
                                          f"its own is run here with --quick"


@pytest.mark.parametrize("script", QUICK)
def test_a_bench_script_runs_in_its_quick_mode(script, tmp_path):
    # the child pytest runs of a script are their own: no worker id or options of this run
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, str(BENCH / script), "--quick"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    said = f"bench/{script} --quick exited {done.returncode}:\n{done.stdout[-3000:]}\n" \
           f"{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    assert "quick run: the code ran" in done.stdout, said


def test_a_script_left_out_here_has_its_own_quick_test():
    for script, test in OWN_TEST.items():
        assert (BENCH / script).exists() and "--quick" in (ROOT / test).read_text(), (script, test)
