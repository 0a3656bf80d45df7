"""The battery must work from a normal install: every package ships, run from any folder."""

import pytest
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from checkout import ROOT

pytestmark = pytest.mark.real


def test_every_subpackage_is_listed_for_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "pytest_frank").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert "pytest_frank.batteries" in listed


def test_the_version_is_written_once():
    """pyproject reads it from pytest_frank.__version__: the two cannot disagree."""
    from importlib.metadata import version

    import pytest_frank

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert version("pytest-frank") == pytest_frank.__version__


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
    from pytest_frank import __version__

    assert (target / f"pytest_frank-{__version__}.dist-info").is_dir()  # pyproject's, read
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
    # The FAILED line's id names the battery module, not the install: pasted back, it reruns
    # exactly that test.
    failed = re.findall(r"^FAILED (\S+)", out, re.M)
    assert failed == ["test_health.py::test_health[gone]", "test_alias.py::test_alias[wrong]"]
    again = subprocess.run([sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml",
                            failed[1], "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                            "-rA"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert re.findall(r"^(PASSED|FAILED|SKIPPED|ERROR) (\S+)", again.stdout, re.M) == \
        [("FAILED", failed[1])], again.stdout + again.stderr
    assert "1 failed in" in again.stdout and str(target) not in again.stdout
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


def test_a_checkout_tests_itself_after_a_plain_install(tmp_path):
    """The README's install (`pip install '.[test]'`, not editable), then `python -m pytest` in
    the checkout: the checkout's own package comes first on the path and finds its battery
    beside it (an install maps top-level batteries/ into the package; the checkout does not)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(ROOT)],
                   check=True, capture_output=True)
    # The dependencies from this venv: a .pth line adds the folder only, so this venv's
    # editable install (its own .pth) stays out.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = str(venv / "bin" / "python")
    _collects(python, "-m", "pytest")
    assert _battery_of_checkout(python) == ROOT / "batteries" / "__init__.py"


def test_a_checkout_tests_itself_after_an_editable_install():
    """This venv's install is editable: `python -m pytest` and `pytest` both collect."""
    _collects(sys.executable, "-m", "pytest")
    _collects(str(Path(sys.executable).parent / "pytest"))
    assert _battery_of_checkout(sys.executable) == ROOT / "batteries" / "__init__.py"


def _collects(*command: str) -> None:
    done = subprocess.run([*command, "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/package/test_contract.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_every_battery_test_is_a_declared_check_named_for_itself" in done.stdout


def _battery_of_checkout(python: str) -> Path:
    code = "import pytest_frank.batteries as b; print(b.__file__)"
    return Path(subprocess.run([python, "-c", code], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.strip())
