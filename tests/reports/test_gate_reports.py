"""The CI gate's exit codes and reports: the offline gate on a valid fleet with nothing to check
offline exits 0 and says so in every report; a usage error (exit 4) still writes the reports it
asked for, with the error in them (pytester's in-process runs; nothing is sent: the fleets'
URLs are a closed port)."""

import json
import xml.etree.ElementTree as ElementTree

import pytest

pytestmark = pytest.mark.emulated  # pytester's in-process runs, no endpoint

REPORTS = ("--frank-report=report.md", "--frank-json=run.json", "--junitxml=junit.xml",
           "--html=page.html")
LIVE = {"endpoints": {"chat": {"url": "http://127.0.0.1:9/v1", "engine": "llamacpp",
                               "expect": {"reasoning": True, "perf": {"runs": 1}}}}}
NOTHING = ("--frank-offline: nothing to check offline: every check asked needs a live endpoint "
           "and was deselected")


def _properties(path):
    return [p.get("value") for p in ElementTree.parse(path).iter("property")
            if p.get("name") == "frank"]


def test_offline_gate_on_a_fleet_of_live_claims_exits_0_and_says_why(run_fleet, pytester):
    result = run_fleet(LIVE, "--frank-offline", *REPORTS)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"frank: {NOTHING}*", "*deselected*"])
    said = json.loads((pytester.path / "run.json").read_text())["notes"]
    assert len(said) == 1 and said[0].startswith("--frank-offline: nothing to check offline")
    words = said[0].split(":", 1)[1][:60]
    assert words.replace("_", "\\_") in (pytester.path / "report.md").read_text()
    assert words in (pytester.path / "page.html").read_text()
    assert _properties(pytester.path / "junit.xml") == said


def test_offline_gate_under_xdist_exits_0_and_says_why(run_fleet, pytester):
    """The controller collects nothing (its workers deselect): it says the same, exits the same."""
    pytest.importorskip("xdist")
    result = run_fleet(LIVE, "--frank-offline", "-n", "2", "--frank-json=run.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"frank: {NOTHING}*"])
    assert json.loads((pytester.path / "run.json").read_text())["notes"][0].startswith(NOTHING)


def test_offline_gate_still_exits_5_where_a_selection_left_nothing(run_fleet):
    """-k that matches no test is the user's selection, not the gate's: pytest's 5 stands."""
    result = run_fleet(LIVE, "--frank-offline", "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "nothing to check offline" not in result.stdout.str()


def test_offline_gate_with_checks_says_no_such_line(run_fleet, pytester):
    from pytest_frank.local.selftest_model import model_path

    vram = {"model": str(model_path()), "ctx_size": 4096, "gpu_mib": 1024, "fixed_mib": 64}
    fleet = {"endpoints": {"ep": {**LIVE["endpoints"]["chat"], "expect": {"vram": vram}}}}
    result = run_fleet(fleet, "--frank-offline", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "run.json").read_text())["notes"] == []


@pytest.mark.parametrize("fleet, args, said", [
    ({"endpoints": {"chat": {"url": "http://127.0.0.1:9/v1", "engine": "llamacpp",
                             "expect": {"perf": {"runs": "three"}}}}}, (), "bad fleet file"),
    (LIVE, ("--frank-endpoint", "nosuch"), "--frank-endpoint nosuch: no such endpoint"),
    (LIVE, ("--frank-baseline", "missing.json"), "bad --frank-baseline"),
], ids=["fleet", "collection", "baseline"])
def test_a_usage_error_still_writes_every_report_with_the_error(run_fleet, pytester, fleet,
                                                                args, said):
    """At configure (a bad fleet value, a missing baseline) or at collection (an unknown
    --frank-endpoint): exit 4, and report.md, the JSON, JUnit and the page hold the error."""
    result = run_fleet(fleet, *args, *REPORTS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    run = json.loads((pytester.path / "run.json").read_text())
    assert said in run["error"] and run["rows"] == [], run
    assert said in (pytester.path / "report.md").read_text().replace("\\", "")
    assert "usage error (exit 4)" in (pytester.path / "report.md").read_text()
    page = (pytester.path / "page.html").read_text()
    assert "usage error (exit 4)" in page and said in page.replace("&#x27;", "'")
    junit = ElementTree.parse(pytester.path / "junit.xml")
    errors = [e.text for e in junit.iter("error")]
    assert len(errors) == 1 and said in errors[0]
    assert junit.getroot().find("testsuite").get("errors") == "1"


def test_a_usage_error_without_reports_asked_writes_none(run_fleet, pytester):
    result = run_fleet({"endpoints": {"chat": {"url": "http://127.0.0.1:9/v1",
                                               "engine": "nosuch"}}})
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert sorted(p.name for p in pytester.path.iterdir()) == ["fleet.yaml"]


def _offline_step() -> list[str]:
    """The offline job's pytest command in the example GitHub Actions workflow, as written."""
    import shlex

    import yaml
    from checkout import ROOT

    workflow = yaml.safe_load((ROOT / "examples/ci/github-actions.yml").read_text())
    command = next(step["run"] for step in workflow["jobs"]["offline"]["steps"]
                   if str(step.get("run", "")).startswith("pytest "))
    return shlex.split(command)[1:]


@pytest.mark.parametrize("fleet, code", [
    (LIVE, pytest.ExitCode.OK),
    ({"endpoints": {"chat": {"url": "http://127.0.0.1:9/v1", "engine": "nosuch"}}},
     pytest.ExitCode.USAGE_ERROR),
], ids=["nothing-offline", "bad-fleet"])
def test_the_ci_examples_offline_step_leaves_what_its_report_steps_read(pytester, fleet, code):
    """docs/ci.md's workflow: its report steps read report.md and junit.xml after the gate,
    green or red."""
    (pytester.path / "fleet.yaml").write_text(json.dumps(fleet))
    result = pytester.runpytest(*_offline_step(), "-p", "no:cacheprovider")
    assert result.ret == code, result.stdout.str()
    assert (pytester.path / "report.md").is_file() and (pytester.path / "junit.xml").is_file()
