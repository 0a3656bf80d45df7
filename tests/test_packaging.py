"""The battery must work from a normal install: every package ships, run from any folder."""

import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_for_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "pytest_frank").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert "pytest_frank.batteries" in listed


def test_non_editable_install_runs_the_battery_outside_the_checkout(tmp_path, llama):
    """`pip install <checkout>` (a wheel; deps are in this venv), then pytest in another folder,
    against a live llama.cpp: the right alias passes, a wrong one fails test_alias only."""
    server = llama(alias=["frank-default-large", "qwen-large"])
    target, work = tmp_path / "site", tmp_path / "elsewhere"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(ROOT)],
                   check=True, capture_output=True)
    assert (target / "pytest_frank" / "batteries" / "test_health.py").exists()
    (work / "fleet.yaml").write_text(
        "endpoints:\n"
        f"  good: {{url: '{server.url}', engine: llamacpp, alias: qwen-large}}\n"
        f"  wrong: {{url: '{server.url}/v1', engine: llamacpp, alias: frank-default-small}}\n"
        "  gone: {url: 'http://127.0.0.1:9', engine: llamacpp, alias: m}\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml", "-v",
                           "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                           "--junitxml", "out.xml", "--frank-report", "wiki.md"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert str(target) in _battery_location(work, env)
    for passed in ("test_health[good]", "test_alias[good]", "test_health[wrong]"):
        assert f"test_health.py::{passed} PASSED" in out or f"test_alias.py::{passed} PASSED" in out
    assert "test_alias.py::test_alias[wrong] FAILED" in out
    assert ("alias 'frank-default-small' is not served by" in out
            and "it serves 'frank-default-large', 'qwen-large'" in out)
    assert "test_health.py::test_health[gone] FAILED" in out and "connection refused" in out
    assert "test_alias.py::test_alias[gone] SKIPPED" in out
    assert " 3 failed" not in out and "2 failed" in out
    matrix = (work / "wiki.md").read_text()
    assert "| good | pass | pass |" in matrix and "| gone | FAIL | blocked |" in matrix
    # From a project whose rootdir holds the install, pytest's path-made classname would differ.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    subprocess.run([sys.executable, "-m", "pytest", "--endpoints", "elsewhere/fleet.yaml", "-q",
                    "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-m", "health",
                    "--junitxml", "out.xml"],
                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    for run in (work, tmp_path):
        health = [c for c in ET.parse(run / "out.xml").iter("testcase")
                  if c.get("name") == "test_health[good]"]
        assert [c.get("classname") for c in health] == ["pytest_frank.batteries.test_health"]


def _battery_location(cwd, env) -> str:
    code = "import pytest_frank.plugin as p; print(p.battery_dir())"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True).stdout
