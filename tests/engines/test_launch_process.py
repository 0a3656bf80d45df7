"""Each `launch:` server runs in a child process of its own, which lives as long as the run
that launched it: stopped at its end, on Ctrl-C, with xdist's workers, and when pytest itself
dies without a word (SIGKILL): its stdin closes, and it stops its server and exits. Real
llama.cpp servers in real pytest processes (signals and process lifetimes belong to them)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.real

# Each endpoint's test says where its server is; the last one (every one, under xdist, where
# each worker holds its own) then waits a while, long enough to be interrupted in.
WAITING = """
import os, pathlib, time

def test_wait(endpoint):
    pathlib.Path(f"up-{endpoint.entry.name}").write_text(endpoint.entry.url)
    if os.environ.get("PYTEST_XDIST_WORKER") or endpoint.entry.name == "two":
        time.sleep(3)
"""


@pytest.fixture(autouse=True)
def _xllamacpp():
    pytest.importorskip("xllamacpp")


def _marked(mark: str) -> list[int]:
    """The processes whose environment carries the mark: the run's own and its children."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"FRANK_RUN_MARK={mark}".encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass  # gone, or not ours
    return found


def _servers(mark: str) -> list[int]:
    """The launched servers' processes (python -m pytest_frank.local.launch) of the run."""
    return [pid for pid in _marked(mark)
            if b"pytest_frank.local.launch" in _read(f"/proc/{pid}/cmdline")]


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def _until(condition, seconds: float) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "not within the time"
        time.sleep(0.05)
    return time.monotonic() - start


def _launched(name: str) -> dict:
    return {"engine": "llamacpp", "alias": name, "ready_timeout": 30,
            "launch": {"model": "selftest", "alias": name}, "expect": {"chat": False}}


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill", "xdist-sigkill"])
def test_launched_servers_end_with_the_run(tmp_path, how):
    """Ctrl-C (SIGINT to the run's process group, as a terminal sends it), or pytest killed
    outright: either way no server process outlives the run, and none holds its port."""
    if how.startswith("xdist"):
        pytest.importorskip("xdist")
    mark = uuid.uuid4().hex
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(
        {"endpoints": {"one": _launched("one"), "two": _launched("two")}}))
    (tmp_path / "test_wait.py").write_text(WAITING)
    xdist = ["-n", "2", "--dist", "loadgroup"] if how.startswith("xdist") else []
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-k", "test_wait", *xdist, "test_wait.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "FRANK_RUN_MARK": mark}, start_new_session=True)
    out, urls = "", []
    try:
        _until(lambda: len(list(tmp_path.glob("up-*"))) == 2 or run.poll() is not None, 90)
        if run.poll() is not None:
            out = run.communicate()[0]
            pytest.fail(f"the run ended before its tests: {out[-3000:]}")
        servers = _servers(mark)
        assert len(servers) == 2, servers
        # each server in a session of its own: the terminal's Ctrl-C is the run's to handle
        assert all(os.getsid(pid) != os.getsid(run.pid) for pid in servers)
        urls = [path.read_text() for path in tmp_path.glob("up-*")]
        if how.endswith("ctrl-c"):
            os.killpg(run.pid, signal.SIGINT)
        else:
            os.kill(run.pid, signal.SIGKILL)
        gone = _until(lambda: not _servers(mark), 30)
        print(f"{how}: the servers' processes ended {gone:.2f}s after the signal")
        if how.endswith("ctrl-c"):
            out = run.communicate(timeout=60)[0]  # the run ends as interrupted runs end
    finally:
        if run.poll() is None and not out:
            os.killpg(run.pid, signal.SIGKILL)
        out = out or run.communicate()[0]
        for pid in _marked(mark):  # nothing left behind, whatever failed above
            os.kill(pid, signal.SIGKILL)
    if how.endswith("ctrl-c"):
        assert run.returncode == 2, out[-3000:]
    import httpx

    for url in urls:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/health", timeout=2)
