"""The type checker guards the seams: the plugin passes it, and a probe's observation read
without handling a failed probe does not, nor a claim's option read with a misspelt name (the
battery's, and one of the user's own as docs/own-checks.md writes it)."""

import pytest
import subprocess
import sys
from checkout import ROOT
from test_docs_examples import blocks

pytestmark = pytest.mark.real


BAD = ("tests/package/typecheck/bad_need.py", "tests/package/typecheck/bad_option.py",
       "tests/package/typecheck/bad_capability.py")


@pytest.fixture(scope="module")
def own_claim(tmp_path_factory) -> tuple[str, str]:
    """docs/own-checks.md's lora.py as written, and with its option misspelt."""
    code = next(b.code for b in blocks(ROOT / "docs" / "own-checks.md") if b.file == "lora.py")
    folder = tmp_path_factory.mktemp("own_claim")
    (folder / "lora_as_written.py").write_text(code)
    (folder / "lora_misspelt.py").write_text(code.replace("ctx.options.adapter",
                                                          "ctx.options.adaptor"))
    return str(folder / "lora_as_written.py"), str(folder / "lora_misspelt.py")


@pytest.fixture(scope="module")
def checked(own_claim) -> subprocess.CompletedProcess:
    """One mypy run over the plugin, the planted mistakes and the docs' claim of one's own:
    each run is a cold one of about half a minute, and their errors read apart by file."""
    return subprocess.run([sys.executable, "-m", "mypy", "pytest_frank", *BAD, *own_claim],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def errors_in(done: subprocess.CompletedProcess, path: str) -> list[str]:
    return [line for line in done.stdout.splitlines() if line.startswith(path)]


def test_mypy_passes_on_the_plugin(checked):
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr  # 2: mypy itself failed
    assert not errors_in(checked, "pytest_frank"), checked.stdout


def test_reading_a_failed_probe_as_its_observation_is_flagged(checked):
    assert errors_in(checked, BAD[0]) == [
        'tests/package/typecheck/bad_need.py:11: error: Item "Unseen" of "Seen | Unseen" has no '
        'attribute "engine"  [union-attr]'], checked.stdout


def test_a_misspelt_option_is_flagged(checked):
    found = "\n".join(errors_in(checked, BAD[1]))
    for line, wrong in ((12, "run"), (16, "min_decode_tp"), (20, "max_ttft")):
        assert f'bad_option.py:{line}: error: "Options" has no attribute "{wrong}"' in found, \
            checked.stdout


def test_a_member_of_another_driver_capability_is_flagged(checked):
    found = "\n".join(errors_in(checked, BAD[2]))
    for line, protocol, member in ((14, "Metrics", "flags"), (18, "Facts", "sampling")):
        assert f'bad_capability.py:{line}: error: "{protocol}" has no attribute "{member}"' \
            in found, checked.stdout
    # an engine's fix is keyed by its driver class, not its name
    assert "bad_capability.py:22: error: Dict entry 0 has incompatible type" in found, \
        checked.stdout


def test_a_claim_of_ones_own_is_typed_by_its_options(checked):
    # read by file name: mypy's cache may name a module by the folder it was first seen in
    assert "lora_as_written.py:" not in checked.stdout, checked.stdout
    found = [line for line in checked.stdout.splitlines() if "lora_misspelt.py:" in line]
    assert len(found) == 1 and 'error: "Lora" has no attribute "adaptor"' in found[0], \
        checked.stdout


def test_the_old_name_of_an_unseen_observation_still_imports_with_a_warning():
    from pytest_frank.outcome import observation

    with pytest.warns(DeprecationWarning, match="observation.Unseen"):
        assert observation.Failed is observation.Unseen  # type: ignore[attr-defined]
