"""`-n 2 --dist loadgroup`: every check of one endpoint runs in one worker, and a `launch:`
server starts only in the worker that verifies its endpoint (real llama.cpp servers)."""

import json
import re
from collections import defaultdict

import pytest

pytestmark = pytest.mark.real

LAUNCH_LOG = """
import os
from pathlib import Path

import pytest_frank.local.launch as launcher

_launch = launcher.launch


def _logged(spec):
    with open(Path(__file__).parent / "launches.log", "a") as log:
        log.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {spec['alias']}\\n")
    return _launch(spec)


launcher.launch = _logged
"""


def _launched(name):
    return {"engine": "llamacpp", "alias": name, "ready_timeout": 30,
            "launch": {"model": "selftest", "alias": name, "metrics": True},
            "expect": {"reasoning": True, "slots": {"count": 1}}}


def test_each_endpoint_runs_in_one_worker_with_one_server(run_fleet, pytester):
    pytest.importorskip("xdist")
    pytest.importorskip("xllamacpp")
    pytester.makeconftest(LAUNCH_LOG)
    fleet = {"endpoints": {"one": _launched("one"), "two": _launched("two")}}
    result = run_fleet(fleet, "-n", "2", "--dist", "loadgroup", "-v", "--frank-json=run.json")
    outcomes = result.parseoutcomes()
    # per endpoint: health, alias, chat, 3 reasoning, slots and the slot's context
    assert outcomes["passed"] == 16 and "failed" not in outcomes, outcomes
    workers = defaultdict(set)
    for line in result.stdout.lines:
        found = re.search(r"\[(gw\d)\].*(?:PASSED|SKIPPED) .*\[(one|two)[-\]@]", line)
        if found:
            workers[found.group(2)].add(found.group(1))
    assert set(workers) == {"one", "two"} and all(len(w) == 1 for w in workers.values()), workers
    launches = (pytester.path / "launches.log").read_text().split()
    starts = dict(zip(launches[1::2], launches[0::2]))
    assert sorted(launches[1::2]) == ["one", "two"], launches  # one server per endpoint
    assert {name: {gw} for name, gw in starts.items()} == dict(workers)  # where it is verified
    # the controller's reports hold the workers' rows and each launched server's identity
    run = json.loads((pytester.path / "run.json").read_text())
    assert sum(row["verdict"] == "pass" for row in run["rows"]) == 16
    assert [(e["build"], e["url"][:17]) for e in run["endpoints"].values()] == [
        ("b0-unknown", "http://127.0.0.1:")] * 2
