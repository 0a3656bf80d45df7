"""`-n 2 --dist loadgroup`: every check of one endpoint runs in one worker, and a `launch:`
server starts only in the worker that verifies its endpoint (real llama.cpp servers)."""

import importlib.metadata
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


def _logged(spec, **how):
    with open(Path(__file__).parent / "launches.log", "a") as log:
        log.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {spec['alias']}\\n")
    return _launch(spec, **how)


launcher.launch = _logged


def pytest_unconfigure(config):
    launcher.launch = _launch  # the run is in-process: later runs in this process launch as usual
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
    # per endpoint: health, alias, chat, 3 reasoning, slots and the slot's context, and the
    # contract's two (every reply against its route's contract, streamed against plain)
    assert outcomes["passed"] == 20 and "failed" not in outcomes, outcomes
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
    assert sum(row["verdict"] == "pass" for row in run["rows"]) == 20
    # llama.cpp in xllamacpp has no build number of its own: the package's version names it
    package = f"xllamacpp {importlib.metadata.version('xllamacpp')} (b0-unknown)"
    assert [(e["build"], e["url"][:17]) for e in run["endpoints"].values()] == [
        (package, "http://127.0.0.1:")] * 2


def _route(url: str, api: str) -> dict:
    return {"url": url, "engine": "llamacpp", "alias": "one-slot", "api": api,
            "expect": {"perf": {"runs": 1, "max_tokens": 48}}}


def overlapping(spans: list[tuple[float, float, str, str]]) -> list[tuple]:
    """Pairs of generations that were in the server at once."""
    posts = sorted(s for s in spans if s[2] == "POST")
    return [(a, b) for a, b in zip(posts, posts[1:]) if b[0] < a[1]]


def test_routes_of_one_server_run_in_one_worker_one_generation_at_a_time(llama, run_fleet,
                                                                         pytester):
    """Ten times the three routes of one 1-slot llama.cpp (written with `localhost` and
    `127.0.0.1`), thirty fleet entries, and one entry of another server: under `-n 2 --dist
    loadgroup` the thirty go to one worker, by the server they reach, not by their names, so
    no generation of a perf probe waits in the slot behind another worker's; the other server
    gets the other worker; the header says which entries are one server. Each server is a
    proxy in front of the same llama.cpp that records when each request was in it (llama.cpp
    keeps no log of them): thirty generations through the first, never two at once."""
    pytest.importorskip("xdist")
    from proxy import Proxy

    server = llama(alias="one-slot", parallel=1)
    with Proxy(server.url) as one, Proxy(server.url) as other:
        port = one.url.rsplit(":", 1)[1]
        routes = {"chat": one.url, "messages": f"http://localhost:{port}/v1",
                  "responses": one.url}
        entries = {f"{api}-{i}": _route(url, api) for i in range(10) for api, url in routes.items()}
        fleet = {"endpoints": {**entries, "elsewhere": _route(other.url, "chat")}}
        result = run_fleet(fleet, "-n", "2", "--dist", "loadgroup", "-v", "-m", "perf",
                           "-k", "ttft", "--frank-report=run.md", "--html=run.html")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 31 and "failed" not in outcomes, result.stdout.str()[-3000:]
    workers = defaultdict(set)
    for line in result.stdout.lines:
        found = re.search(r"\[(gw\d)\].*PASSED .*\[([a-z]+)-?\d*\]", line)
        if found:
            workers[found.group(2) == "elsewhere"].add(found.group(1))
    assert all(len(w) == 1 for w in workers.values()) and workers[True] != workers[False], workers
    posts = [s for s in one.spans if s[2] == "POST"]
    assert len(posts) == 30 and not overlapping(one.spans), one.spans
    said = (f"{', '.join(sorted(entries))} reach one server, 127.0.0.1:{port}: checked as one "
            "(in one worker under xdist, one measurement at a time)")
    result.stdout.fnmatch_lines([f"frank: {said}"])
    # and the reports' headers, once (the other server has one entry: nothing to say)
    assert (pytester.path / "run.md").read_text().count(said.replace("_", "\\_")) == 1
    assert (pytester.path / "run.html").read_text().count(f'<p class="shared">{said}</p>') == 1


def test_two_entries_of_one_server_share_a_worker_under_plain_n2(llama, run_fleet):
    """Two fleet entries of one 1-slot llama.cpp under `-n 2` and no `--dist` (xdist's `load`
    then splits tests over workers one by one): pytest-frank schedules by server anyway, so
    both entries run in one worker, their perf generations never overlap in the slot (the
    proxy in front records each request's span), perf passes on both, and the header says
    how xdist ran them."""
    pytest.importorskip("xdist")
    from proxy import Proxy

    server = llama(alias="one-slot", parallel=1)
    with Proxy(server.url) as one:
        fleet = {"endpoints": {name: _route(one.url, "chat") for name in ("first", "second")}}
        result = run_fleet(fleet, "-n", "2", "-v", "-m", "perf")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 2 and "failed" not in outcomes, result.stdout.str()[-3000:]
    workers = {found.group(1) for line in result.stdout.lines
               if (found := re.search(r"\[(gw\d)\].*PASSED .*\[(first|second)", line))}
    assert len(workers) == 1, result.stdout.str()[-3000:]
    posts = [s for s in one.spans if s[2] == "POST"]
    assert posts and not overlapping(one.spans), one.spans
    result.stdout.fnmatch_lines([
        "frank: xdist: the checks of each server go to one worker, one measurement at a time "
        "(pytest-frank schedules by server, in place of --dist load)",
        "frank: first, second reach one server, *: checked as one (in one worker under xdist, "
        "one measurement at a time)"])


def test_dist_each_is_refused_naming_the_flag(run_fleet):
    """`--dist each` would run every check in every worker, each measuring the one server at
    once: a usage error that says to leave --dist out, before any request."""
    pytest.importorskip("xdist")
    fleet = {"endpoints": {"ep": _route("http://127.0.0.1:9", "chat")}}
    result = run_fleet(fleet, "-n", "2", "--dist", "each")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dist each runs every check in every worker*leave --dist "
                                 "out*"])
