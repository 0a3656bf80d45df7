"""Stopping a run, and endpoints too slow to wait for. Each case runs pytest in a child process
(signals, exit codes and peak memory belong to a process) against emulated endpoints whose chat
answers drip one byte a second, as an overloaded or swapped-out server does: no read ever times
out, and no answer ends in useful time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from emulator import Emulator, drip, endless_line, serve_chat
from healthy_engines import ALL, healthy_chat

from pytest_frank.runtime.broken import REPEATS

pytestmark = pytest.mark.real

REPORTS = ("junit.xml", "report.html", "report.md", "report.json")
EVERY_CLAIM = {**ALL, "perf": {"runs": 1, "max_cached_ttft_ratio": 0.5}, "spec_decode": True,
               "vision": True, "slots": {"count": 1}}


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml", "-p", "no:cacheprovider",
            "-p", "no:hypothesispytest", "-p", "no:randomly", "--junitxml=junit.xml",
            "--html=report.html", "--self-contained-html", "--frank-report=report.md",
            "--frank-json=report.json", *args]


def _start(folder: Path, fleet: dict, *args: str, env: dict | None = None) -> subprocess.Popen:
    (folder / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    return subprocess.Popen(_command(*args), cwd=folder, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})


def _until(condition, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "the run never got there"
        time.sleep(0.05)


def _chats(em: Emulator) -> int:
    return sum(r.path == "/v1/chat/completions" for r in em.requests)


def _rows(folder: Path) -> dict[str, dict]:
    data = json.loads((folder / "report.json").read_text())
    return {row["key"].split("::")[-1]: row for row in data["rows"]}


def _two_endpoints(quick: Emulator, slow: Emulator) -> dict:
    """A healthy endpoint and one whose chat answers drip; both asked for reasoning."""
    serve_chat(quick, healthy_chat())
    serve_chat(slow, lambda body: drip())
    return {"endpoints": {"quick": {"url": quick.url, **ASK}, "drip": {"url": slow.url, **ASK}}}


ASK = {"engine": "vllm", "alias": "model", "timeout": 30, "expect": {"reasoning": True}}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_in_the_probe_phase_keeps_what_was_measured(tmp_path, sig):
    with Emulator("vllm") as quick, Emulator("vllm") as slow:
        run = _start(tmp_path, _two_endpoints(quick, slow))
        # The quick endpoint's four generations (chat, then reasoning's three) are done and the
        # drip's first is in flight.
        _until(lambda: _chats(quick) == 4 and _chats(slow) == 1)
        time.sleep(0.5)
        run.send_signal(sig)
        sent = time.monotonic()
        out, _ = run.communicate(timeout=60)
        took = time.monotonic() - sent
        chats = _chats(slow)
    assert run.returncode == 2, out[-3000:]  # pytest's INTERRUPTED
    # The answer in flight was cut by the signal, not waited for: its stream's wait for a
    # token is the fleet's timeout (30 s), which a busy machine's slow exit stays far within.
    assert took < ASK["timeout"], (took, out[-3000:])
    print(f"{sig.name} to exit: {took:.2f}s")
    assert chats == 1  # nothing more was sent after the signal
    for report in REPORTS:
        assert (tmp_path / report).stat().st_size > 0, report
    rows = _rows(tmp_path)
    verdicts = {test: row["verdict"] for test, row in rows.items()}
    assert {verdicts[f"{t}[quick]"] for t in ("test_health", "test_alias", "test_chat",
                                              "test_reasoning",
                                              "test_reasoning_streamed",
                                              "test_reasoning_off")} == {"pass"}
    # The model list is read first (where a refused key is met, at one request), then the chat
    # check runs before the other generations: what waits behind its dripping answer was never
    # measured, and the alias, measured before it, keeps its verdict.
    assert verdicts["test_health[drip]"] == verdicts["test_alias[drip]"] == "pass"
    for test in ("test_chat", "test_reasoning", "test_reasoning_streamed", "test_reasoning_off"):
        assert verdicts[f"{test}[drip]"] == "interrupted", rows[f"{test}[drip]"]
        assert rows[f"{test}[drip]"]["line"] == f"interrupted by {sig.name} before this was " \
                                                "measured"
    assert "drip   health ok  alias ok  chat interrupted  reasoning interrupted" in out
    assert "quick  health ok  alias ok  chat ok  reasoning ok" in out
    assert "| drip | pass | pass | interrupted | interrupted |" in \
        (tmp_path / "report.md").read_text()
    page = (tmp_path / "report.html").read_text()
    assert '<td class="v-interrupted">' in page and "<b>interrupted</b>" in page
    junit = (tmp_path / "junit.xml").read_text()
    # the drip's chat and reasoning's three, and the contract's two that judge their replies
    assert junit.count(f'message="interrupted by {sig.name} before this was measured"') == 6


def test_a_second_interrupt_ends_at_once(tmp_path):
    # Reports that take their time: the second Ctrl-C must not wait for them.
    (tmp_path / "slow_reports.py").write_text(
        "import pathlib, time\n\n\n"
        "def pytest_sessionfinish(session):\n"
        "    pathlib.Path('reporting').touch()\n"
        "    time.sleep(60)\n")
    with Emulator("vllm") as quick, Emulator("vllm") as slow:
        run = _start(tmp_path, _two_endpoints(quick, slow), "-p", "slow_reports",
                     env={"PYTHONPATH": str(tmp_path)})
        _until(lambda: _chats(slow) == 1)
        run.send_signal(signal.SIGINT)
        _until(lambda: (tmp_path / "reporting").exists(), 10)
        run.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, _ = run.communicate(timeout=90)
        took = time.monotonic() - sent
    assert run.returncode == 128 + signal.SIGINT, out[-3000:]
    # It did not wait for the reports, whose hook sleeps 60 s.
    assert took < 30, took
    print(f"second SIGINT to exit: {took:.2f}s")
    assert "SIGINT again: ending now, without reports" in out


def test_a_dripping_endpoint_costs_one_slow_answer(tmp_path):
    timeout, ready = 2, 2
    with Emulator("vllm") as slow:
        serve_chat(slow, lambda body: drip())
        fleet = {"endpoints": {"drip": {"url": slow.url, "engine": "vllm", "alias": "model",
                                        "timeout": timeout, "ready_timeout": ready,
                                        "expect": EVERY_CLAIM}}}
        start = time.monotonic()
        run = _start(tmp_path, fleet)
        out, _ = run.communicate(timeout=120)
        took = time.monotonic() - start
        chats = _chats(slow)
    assert run.returncode == 1, out[-3000:]
    print(f"dripping endpoint, every claim asked: {took:.1f}s")
    # The bound (ready_timeout + 4 x timeout + 5 s) is its parts: one answer was waited for,
    # not twenty, and that one for no longer than an answer may take (4 x timeout; a whole
    # one that drips is cut `timeout` after it began). Judged on the requests and the
    # answer's own clock, not on the process's wall time, which a busy machine stretches.
    assert chats == 1
    rows = _rows(tmp_path)
    waited = rows["test_chat[drip]"]["exchanges"][-1]
    assert waited["request"].startswith("POST ") and waited["elapsed_s"] < 4 * timeout, waited
    # The chat check is the endpoint's first generation: its answer is the one waited for.
    assert rows["test_chat[drip]"]["verdict"] == "FAIL", rows["test_chat[drip]"]
    held = {test: row for test, row in rows.items() if "answered too slowly" in row["line"]}
    generations = {"test_reasoning", "test_reasoning_streamed", "test_reasoning_off",
                   "test_reasoning_effort", "test_tools_required", "test_tools_streamed",
                   "test_vision", "test_perf_ttft", "test_perf_decode", "test_perf_prefix_cache",
                   "test_spec_decode"}
    assert generations <= {test.split("[")[0] for test in held}, sorted(held)
    for test, row in held.items():
        assert row["verdict"] == "blocked", (test, row)
        # A whole answer that begins and then drips is cut `timeout` after it began.
        assert row["line"].startswith("drip answered too slowly, see test_chat[drip]: "
                                      "POST /v1/chat/completions: the answer began but was still "
                                      f"arriving {timeout:g}s later ("), row

    assert rows["test_health[drip]"]["verdict"] == rows["test_alias[drip]"]["verdict"] == "pass"


def test_a_500_mb_line_keeps_memory_bounded(tmp_path):
    """One SSE line of 500 MB with no newline, on every generation of every claim: the reader's
    cap ends each after 4 MiB, and what is kept of the cut answers stays small. Plain and
    streamed, the route's first two answers run past the cap alike: one root cause, so one
    test fails with it and no further generation is sent (runtime.broken)."""
    with Emulator("vllm") as em:
        serve_chat(em, lambda body: endless_line(500 * 1024 * 1024))
        (tmp_path / "fleet.yaml").write_text(yaml.safe_dump({"endpoints": {"huge": {
            "url": em.url, "engine": "vllm", "alias": "model", "expect": EVERY_CLAIM}}}))
        # A parent of its own, so the peak read is this pytest's and no other child's.
        measure = ("import resource, subprocess, sys\n"
                   "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
                   "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
        done = subprocess.run([sys.executable, "-c", measure, *_command()], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        chats = _chats(em)
    peak_mib = int(done.stdout.split()[-1]) / 1024
    assert chats == 2 * REPEATS  # the route's first answers, plain and streamed, 4 MiB each
    rows = _rows(tmp_path)
    cut = [test for test, row in rows.items() if row["verdict"] == "FAIL"
           and "ran past" in row["line"]]
    assert cut == ["test_chat[huge]"], cut  # (slots fails apart: the emulator shows no slots)
    assert "the answer ran past 4194304 bytes" in rows["test_chat[huge]"]["line"]
    pointer = ("huge: every request on POST /v1/chat/completions (plain and streamed) broke "
               "alike (answer past the cap), see test_chat[huge]: ")
    assert rows["test_reasoning[huge]"]["verdict"] == "blocked"
    assert rows["test_reasoning[huge]"]["line"].startswith(pointer), rows["test_reasoning[huge]"]
    assert peak_mib < 300, peak_mib
    print(f"a 500 MB line on every generation: peak RSS {peak_mib:.0f} MiB")
