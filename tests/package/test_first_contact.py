"""First contact: the README's main command as a newcomer runs it, on a fresh virtual environment
with only the extras it names, in a copy of the checkout and from an ops repository that has its
own pytest configuration; and nothing in the plugin needs an optional dependency to load."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkout import ROOT
from pytest_frank.base.figures import number

pytestmark = pytest.mark.real

ENDPOINTS = ("frank-selftest", "frank-selftest-draft")
OPTIONAL = ("xdist", "hypothesis", "xllamacpp", "httpx", "pytest_asyncio")


def readme_commands() -> list[str]:
    """The sh blocks under README.md's "## Two commands", as written."""
    section = README.split("\n## Two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


README = (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def fresh_checkout(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of the checkout's tracked files, where the README's main command ran as written."""
    copy = tmp_path_factory.mktemp("checkout")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    main = readme_commands()[0]
    done = subprocess.run(["bash", "-c", main], cwd=copy, capture_output=True, text=True,
                          timeout=900)
    return copy, done


def test_the_readme_has_the_main_and_the_test_command():
    main, tests = readme_commands()
    assert "'.[launch]'" in main and "--endpoints examples/selftest.yaml" in main
    assert "'.[test]'" in tests and tests.endswith("pytest -q -n 3")


def test_the_main_command_passes_as_written_on_a_fresh_venv(fresh_checkout):
    copy, done = fresh_checkout
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert re.search(r"\d+ passed", out) and " failed" not in out
    assert "Warning" not in done.stdout, done.stdout  # no dependency's notice on the first line
    for report in ("report.html", "report.md"):
        text = (copy / report).read_text()
        assert all(name in text for name in ENDPOINTS), report
    # What it wrote beside the reports (charts, probe images) leaves a checkout's status clean.
    tracked = set(subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.split())
    written = [str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()
               and ".venv" not in p.parts and "__pycache__" not in p.parts
               and ".egg-info" not in str(p) and str(p.relative_to(copy)) not in tracked]
    assert any(name.endswith(".svg") for name in written), written
    shown = subprocess.run(["git", "check-ignore", "--no-index", "--verbose", "--non-matching",
                            *written], cwd=ROOT, capture_output=True, text=True).stdout
    assert not [line for line in shown.splitlines() if line.startswith("::")], shown
    # Green on a CPU machine: nothing the machine cannot show (vram without a GPU) is inconclusive.
    assert "**fleet ok: 3 endpoint(s): 0 failing, 0 inconclusive, 3 passing**" in \
        (copy / "report.md").read_text()
    installed = subprocess.run([str(copy / ".venv/bin/python"), "-c", "\n".join(
        f"import importlib.util as u; print('{m}', u.find_spec('{m}') is not None)"
        for m in OPTIONAL)], capture_output=True, text=True, check=True).stdout
    # The main command installs the launch extra (xllamacpp) and nothing the tests need.
    assert "xdist False" in installed and "hypothesis False" in installed, installed
    assert "pytest_asyncio False" in installed, installed


def test_the_main_command_runs_from_an_ops_repository(fresh_checkout, tmp_path):
    """An ops repository with its own pyproject.toml (its own test naming, warnings as errors,
    strict markers) and conftest.py: the battery still collects and passes there."""
    copy, done = fresh_checkout
    assert done.returncode == 0, done.stdout[-2000:]
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "ops-fleet"\nversion = "1"\n\n[tool.pytest.ini_options]\n'
        'testpaths = ["checks"]\npython_files = ["check_*.py"]\npython_functions = ["check_*"]\n'
        'python_classes = ["Check*"]\naddopts = "--strict-markers -ra"\n'
        'filterwarnings = ["error"]\nxfail_strict = true\n')
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef owner():\n    return 'ops'\n")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "check_disk.py").write_text("def check_disk(owner):\n"
                                                        "    assert owner == 'ops'\n")
    shutil.copy(copy / "examples" / "selftest.yaml", tmp_path / "fleet.yaml")
    ran = subprocess.run([str(copy / ".venv/bin/pytest"), "--endpoints", "fleet.yaml",
                          "--frank-report=wiki.md"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-4000:]
    assert "test_health" in (tmp_path / "wiki.md").read_text()
    passed = int(re.search(r"(\d+) passed", out).group(1))
    checkout = int(re.search(r"(\d+) passed", done.stdout).group(1))
    assert passed == checkout, out[-2000:]


def test_no_plugin_module_needs_an_optional_dependency_to_load():
    blocker = (
        "import sys, importlib, pkgutil\n"
        f"BLOCKED = {OPTIONAL!r}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ImportError(f'{name} is not installed')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pytest_frank\n"
        "for m in pkgutil.walk_packages(pytest_frank.__path__, 'pytest_frank.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('loaded')\n")
    done = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.stdout.strip() == "loaded", done.stderr[-2000:]


@pytest.mark.parametrize("value, digits, written", [
    (2186.4, 3, "2190"), (1918.6, 4, "1919"), (0.0024, 3, "0.0024"), (0.000012345, 3, "0.0000123"),
    (12, 3, "12"), (1234567, 15, "1234567"), (0.5, 3, "0.5"), (float("inf"), 3, "inf")])
def test_figures_print_as_people_write_them(value, digits, written):
    assert number(value, digits) == written
