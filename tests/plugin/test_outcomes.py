"""Outcomes are typed end to end: a test raises a `Failure` (line, fix, figures) or a `Skip`
whose class is its verdict, and the report's row is built from the exception pytest recorded,
never parsed back out of its message. The emulated run imitates a llama.cpp endpoint that is
healthy: what the tests raise is all that is judged."""

import json
import traceback

import pytest

from emulator import Emulator
from pytest_frank import plugin
from pytest_frank.plugin import rows
from pytest_frank.outcome.verdict import (Blocked, Failure, Inconclusive, Interrupted, NotAsked, Skip,
                                  Verdict)

pytestmark = pytest.mark.emulated  # an emulated endpoint and pytester's in-process runs


def said(exc: BaseException) -> tuple[str, str | None]:
    """The row's line and fix for `exc`, raised as a test would."""
    with pytest.raises(type(exc)) as raised:
        raise exc
    return rows.said(raised)


def test_a_failure_line_that_reads_like_a_fix_is_not_split():
    line = "finding one\n  fix: the first finding's own fix\nfinding two"
    assert said(Failure(line, "the last fix")) == (line, "the last fix")
    assert said(Failure("no fix known")) == ("no fix known", None)


def test_pytest_s_own_outcomes_and_a_plain_assert_keep_their_lines():
    with pytest.raises(pytest.fail.Exception) as failed:
        pytest.fail("x\n  fix: y")
    assert rows.said(failed) == ("x\n  fix: y", None)  # a message is never split for a fix
    with pytest.raises(AssertionError) as asserted:  # a plain assert, failing on purpose:
        one, two = 1, 2
        assert one == two, "one is not two"  # its rewritten message is the row's line
    assert rows.said(asserted) == (f"AssertionError: one is not two\nassert {one} == {two}", None)
    assert rows.said(None) == ("", None)


def test_a_skip_s_type_is_its_verdict():
    class Report:
        failed, passed, when = False, False, "call"

    for skip, verdict in ((Inconclusive, Verdict.INCONCLUSIVE), (NotAsked, Verdict.NOT_ASKED),
                          (Blocked, Verdict.BLOCKED), (Interrupted, Verdict.INTERRUPTED),
                          (Skip, Verdict.SKIPPED)):
        assert rows.verdict_of(Report(), skip("why")) is verdict  # type: ignore[arg-type]
        assert said(skip("why\n  fix: not one")) == ("why\n  fix: not one", None)
    assert rows.verdict_of(Report(), pytest.skip.Exception("plain")) is Verdict.SKIPPED  # type: ignore[arg-type]


def test_the_outcomes_print_as_pytest_s_own():
    """The terminal, JUnit XML and the page show "Failed: ..." as for pytest.fail."""
    assert traceback.format_exception_only(Failure("slow", "faster")) == [
        "Failed: slow\n  fix: faster\n"]
    assert traceback.format_exception_only(Skip("later")) == ["Skipped: later\n"]
    assert isinstance(Inconclusive("x"), pytest.skip.Exception)
    assert isinstance(Failure("x"), pytest.fail.Exception)


def test_a_rendered_failure_carries_its_parts():
    failed = Failure("wrong", "do this", {"rate": (0.5, "")}).rendered(first="the engine first")
    assert (failed.line, failed.fix, failed.figures) == ("the engine first\nwrong", "do this",
                                                         {"rate": (0.5, "")})
    assert failed.msg == "the engine first\nwrong\n  fix: do this"


CUSTOM = '''
import pytest

from pytest_frank.claims.checks import Check
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import Inconclusive, fail


def seen(target):
    return Observation()


def judge(obs, ctx):
    fail("two findings:\\n  fix: not the fix\\nthe second", "the fix", {"rate": (0.25, "ratio")})


JUDGED = Check("test_judged", "health", seen, judge)


def test_judged(endpoint):
    endpoint.verify(JUDGED)


def test_raises_a_failure(endpoint):
    fail("a line\\n  fix: still the line", "the real fix")


def test_pytest_fail(endpoint):
    pytest.fail("said plainly")


def test_plain_assert(endpoint):
    assert endpoint.name == "elsewhere"


def test_inconclusive(endpoint):
    raise Inconclusive("inconclusive: nothing to rate")
'''


def test_the_rows_of_a_run_come_from_what_each_test_raised(pytester, run_fleet):
    (pytester.path / "test_custom.py").write_text(CUSTOM)
    with Emulator("llamacpp", models=["m"]) as server:
        fleet = {"endpoints": {"e": {"url": server.url, "engine": "llamacpp",
                                     "expect": {"chat": False}}}}
        result = run_fleet(fleet, "test_custom.py", "--frank-no-battery", "--frank-json=run.json")
    result.assert_outcomes(failed=4, skipped=1)
    result.stdout.fnmatch_lines(
        ["FAILED test_custom.py::test_pytest_fail[[]e[]] - Failed: said plainly"])
    found = {row["key"].split("::")[1]: row
             for row in json.loads((pytester.path / "run.json").read_text())["rows"]}
    judged = found["test_judged[e]"]
    assert (judged["verdict"], judged["line"], judged["fix"]) == (
        "FAIL", "two findings:\n  fix: not the fix\nthe second", "the fix")
    assert judged["figures"] == {"rate": {"value": 0.25, "unit": "ratio"}}
    raised = found["test_raises_a_failure[e]"]
    assert (raised["line"], raised["fix"]) == ("a line\n  fix: still the line", "the real fix")
    assert (found["test_pytest_fail[e]"]["line"], found["test_pytest_fail[e]"]["fix"]) == (
        "said plainly", None)
    assert found["test_plain_assert[e]"]["line"].startswith("AssertionError: assert 'e' == ")
    assert (found["test_inconclusive[e]"]["verdict"], found["test_inconclusive[e]"]["line"]) == (
        "inconclusive", "inconclusive: nothing to rate")


def test_the_run_s_hooks_are_registered_only_with_a_fleet(pytester, run_fleet):
    """Without a fleet the plugin adds its options, markers and fixture, and none of the run's
    hooks; with one, they are on one object."""
    pytester.makepyfile(test_hooks=f'''
def test_hooks(request):
    print("hooks:", request.config.pluginmanager.get_plugin({plugin.FLEET_HOOKS!r}))
''')
    result = pytester.runpytest("-s", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*hooks: None"])
    with Emulator("llamacpp", models=["m"]) as server:
        fleet = {"endpoints": {"e": {"url": server.url, "engine": "llamacpp",
                                     "expect": {"chat": False}}}}
        result = run_fleet(fleet, "test_hooks.py", "--frank-no-battery", "-s")
    result.stdout.fnmatch_lines(["*hooks: <pytest_frank.plugin.session_hooks.FleetHooks object at *>"])


def test_plugin_py_keeps_only_the_module_level_hooks():
    hooks = sorted(name for name in vars(plugin) if name.startswith("pytest_"))
    assert hooks == ["pytest_addhooks", "pytest_addoption", "pytest_configure",
                     "pytest_unconfigure"]
