"""The battery must work from a normal install: every package ships, run from any folder."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_for_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "pytest_frank").rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert "pytest_frank.batteries" in listed


def test_non_editable_install_runs_the_battery_outside_the_checkout(tmp_path):
    """`pip install <checkout>` (a wheel, no deps: they are in this venv) then pytest elsewhere."""
    target, work = tmp_path / "site", tmp_path / "elsewhere"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(ROOT)], check=True, capture_output=True)
    assert (target / "pytest_frank" / "batteries" / "test_health.py").exists()
    (work / "fleet.yaml").write_text(
        "endpoints:\n  gone: {url: 'http://127.0.0.1:9', engine: llamacpp, alias: m}\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-m", "pytest", "--endpoints", "fleet.yaml", "-v",
                           "-p", "no:cacheprovider", "-p", "no:hypothesispytest"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "test_health.py::test_health[gone] FAILED" in out
    assert "test_alias.py::test_alias[gone] SKIPPED" in out
    assert "connection refused" in out
    assert str(target) in _battery_location(work, env)


def _battery_location(cwd, env) -> str:
    code = "import pytest_frank.plugin as p; print(p.battery_dir())"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, check=True).stdout
