"""JUnit XML: the battery's classnames are the same wherever pytest runs; node ids and test names
stay pytest's."""

import pytest
import xml.etree.ElementTree as ET

from emulator import Emulator
from fleets import one_endpoint
from pytest_frank.plugin import battery_dir

pytestmark = pytest.mark.emulated


def _testcases(path) -> list[tuple[str, str]]:
    return [(case.get("classname"), case.get("name")) for case in ET.parse(path).iter("testcase")]


def _passed(result) -> list[str]:
    return sorted(line.split(" ", 1)[1] for line in result.stdout.lines
                  if line.startswith("PASSED "))


def test_battery_classnames_do_not_depend_on_the_folder(run_fleet, pytester, monkeypatch):
    with Emulator("vllm", models=["m"]) as em:
        fleet = one_endpoint(em.url, "vllm", alias="m")
        here = run_fleet(fleet, "-m", "health or alias", "--junitxml", str(pytester.path / "a.xml"))
        # From a project whose rootdir holds the installed battery (a virtual environment in it).
        monkeypatch.chdir(pytester.mkdir("project"))
        there = run_fleet(fleet, "-m", "health or alias", "--rootdir", str(battery_dir().parents[1]),
                          "--junitxml", str(pytester.path / "b.xml"))
    here.assert_outcomes(passed=2)
    there.assert_outcomes(passed=2)
    assert _passed(here) != _passed(there)  # pytest's own ids (and classnames) follow the folder
    expected = [("pytest_frank.batteries.test_health", "test_health[ep]"),
                ("pytest_frank.batteries.test_alias", "test_alias[ep]")]
    assert _testcases(pytester.path / "a.xml") == _testcases(pytester.path / "b.xml") == expected


def test_own_checks_keep_pytests_classname_and_the_prefix_is_kept(run_fleet, pytester):
    pytester.makepyfile(test_mine="""
        import pytest

        @pytest.mark.health
        def test_models_answer(endpoint):
            assert endpoint.get("/v1/models").status == 200
    """)
    with Emulator("vllm", models=["m"]) as em:
        result = run_fleet(one_endpoint(em.url, "vllm"), "-m", "health", "--junit-prefix", "ci",
                           "--junitxml", str(pytester.path / "out.xml"),
                           str(pytester.path / "test_mine.py"))
    result.assert_outcomes(passed=2)
    assert sorted(_testcases(pytester.path / "out.xml")) == [
        ("ci.pytest_frank.batteries.test_health", "test_health[ep]"),
        ("ci.test_mine", "test_models_answer[ep]")]
