"""The type checker guards the seams: the plugin passes it, and a probe's observation read
without handling a failed probe does not, nor a claim's option read with a misspelt name."""

import pytest
import subprocess
import sys
from pathlib import Path

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parent.parent


def _mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_mypy_passes_on_the_plugin():
    done = _mypy("pytest_frank")
    assert done.returncode == 0, done.stdout + done.stderr


def test_reading_a_failed_probe_as_its_observation_is_flagged():
    done = _mypy("tests/typecheck/bad_need.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Item "Failed" of "Seen | Failed" has no attribute "engine"' in done.stdout


def test_a_misspelt_option_is_flagged():
    done = _mypy("tests/typecheck/bad_option.py")
    assert done.returncode == 1, done.stdout + done.stderr
    for line, wrong in ((12, "run"), (16, "min_decode_tp"), (20, "max_ttft")):
        assert f'bad_option.py:{line}: error: "Options" has no attribute "{wrong}"' in done.stdout, \
            done.stdout
