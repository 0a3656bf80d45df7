"""pytest-frank: `pytest --endpoints fleet.yaml` runs the battery once per endpoint."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest

from pytest_frank import claims, redact, state
from pytest_frank.claims import CLAIMS, claim_of
from pytest_frank.fleet import FleetError, load
from pytest_frank.stash import RUN_STATE, SESSION
from pytest_frank.verdict import Verdict

PROBED: pytest.StashKey[object] = pytest.StashKey()
UNASKED = "(asked of no endpoint)"


def pytest_addoption(parser):
    group = parser.getgroup("frank", "LLM endpoint verification (pytest-frank)")
    group.addoption("--endpoints", metavar="FLEET_YAML", default=None,
                    help="fleet file of endpoints to verify (ini: frank_endpoints)")
    group.addoption("--frank-timeout", metavar="SECONDS", type=float, default=None,
                    help="per-request timeout (ini: frank_timeout; default 30)")
    group.addoption("--frank-deadline", metavar="SECONDS", type=float, default=None,
                    help="no endpoint gets a request, or time to answer one, past this many "
                         "seconds from the start of the run")
    group.addoption("--frank-endpoint", metavar="NAME", action="append", default=[],
                    help="verify only this endpoint (its exact name; repeat for more): unlike "
                         "-k NAME it does not also pick NAME-draft")
    group.addoption("--frank-no-battery", action="store_true", default=False,
                    help="do not collect the built-in battery, only the tests given")
    group.addoption("--frank-offline", action="store_true", default=False,
                    help="the config gate: run only the checks that need no live endpoint "
                         "(fleet.yaml and model headers), deselect the rest")
    group.addoption("--frank-report", metavar="PATH.md", default=None,
                    help="write the fleet's verdicts as a Markdown page (written when checks fail)")
    group.addoption("--frank-json", metavar="PATH", default=None,
                    help="write the run's verdicts, figures and evidence as JSON (secrets "
                         "redacted): the --frank-baseline of a later run")
    group.addoption("--frank-prometheus", metavar="PATH.prom", default=None,
                    help="write the run as Prometheus metrics, atomically, for node_exporter's "
                         "textfile collector")
    group.addoption("--frank-pushgateway", metavar="URL", default=None,
                    help="push the run's Prometheus metrics to this Pushgateway (job "
                         "pytest_frank, grouped by fleet)")
    group.addoption("--frank-baseline", metavar="PREV.json", default=None,
                    help="compare with a previous run's --frank-json and report what regressed")
    group.addoption("--frank-fail-on-regression", action="store_true", default=False,
                    help="a regression against --frank-baseline fails the run")
    group.addoption("--frank-mask-env", metavar="NAME", action="append", default=[],
                    help="mask this environment variable's value in every output, whether or "
                         "not fleet.yaml uses it (repeat for more; ini: frank_mask_env); "
                         "credential-named variables fleet.yaml uses are masked already")
    parser.addini("frank_endpoints", "fleet file of endpoints to verify", default=None)
    parser.addini("frank_timeout", "per-request timeout in seconds", default="30")
    parser.addini("frank_mask_env", "environment variables whose values every output masks",
                  type="args", default=[])


def pytest_addhooks(pluginmanager):
    from pytest_frank import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_configure(config):
    _user_claims(config)  # before the markers and the fleet: both know the registered claims
    for claim, about in CLAIMS.items():
        config.addinivalue_line("markers", f"{claim}: claim '{about}' (pytest-frank)")
    config.addinivalue_line("markers", "offline: a pytest-frank check that needs no live endpoint")
    _mask_env(config)  # before the fleet loads: its errors are masked too
    fleet_path = config.getoption("endpoints") or config.getini("frank_endpoints")
    if not fleet_path:
        return
    fleet_path = _resolve(config, fleet_path)
    try:
        fleet = load(fleet_path, bind=claims.bind)
    except FleetError as exc:
        raise pytest.UsageError(f"pytest-frank: bad fleet file\n{redact.scrub(str(exc))}") from None
    from pytest_frank.session import FrankSession

    config.stash[SESSION] = FrankSession(fleet, _timeout(config),
                                         offline=config.getoption("frank_offline"),
                                         baseline=_baseline(config))
    from pytest_frank.results import SOURCE, Source

    config.stash[SOURCE] = Source(fleet_path, fleet)  # what the reports plugin reports on
    from pytest_frank.junit import StableClassnames

    config.pluginmanager.register(StableClassnames(config, battery_dir()), "frank-junit")
    if not config.getoption("frank_no_battery"):
        _add_battery(config)
    run_deadline = config.getoption("frank_deadline")
    if run_deadline is not None:
        if run_deadline <= 0:
            raise pytest.UsageError("pytest-frank: --frank-deadline must be more than 0 seconds")
        config.stash[SESSION].bound_run(run_deadline)
    if _probes_here(config):
        config.stash[SESSION].warm()


def _baseline(config):
    """The --frank-baseline run, for probes that ask what it asked (the fingerprint's prompts);
    None where there is none or it cannot be read (the reports then say why, as a usage error)."""
    from pathlib import Path

    from pytest_frank.results import BaselineError, load

    path = config.getoption("frank_baseline")
    try:
        return load(Path(path)) if path else None
    except BaselineError:
        return None


def _user_claims(config) -> None:
    """The claims conftest.py files and plugins register (they are loaded by now)."""
    config.stash[RUN_STATE] = state.begin()  # this run's claims and secrets, till unconfigure
    try:
        config.hook.pytest_frank_claims(register=claims.register)
    except claims.ClaimError as exc:
        raise pytest.UsageError(f"pytest-frank: {exc}") from None


def _mask_env(config) -> None:
    """The values of the variables --frank-mask-env names are secrets, used or not."""
    import os

    for name in [*config.getini("frank_mask_env"), *config.getoption("frank_mask_env")]:
        redact.register(os.environ.get(name))


def _probes_here(config) -> bool:
    """Whether this process will run probes: not for --collect-only or the config gate, nor in
    an xdist controller (its workers probe)."""
    controller = getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")
    return not (config.option.collectonly or config.getoption("frank_offline") or controller)


def _resolve(config, path: str) -> Path:
    # An ini value is relative to the ini file; a command-line value to the current directory.
    if config.getoption("endpoints") or config.inipath is None:
        return Path(path)
    return Path(config.inipath).parent / path


def _timeout(config) -> float:
    raw = config.getoption("frank_timeout") or config.getini("frank_timeout")
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"pytest-frank: frank_timeout {raw!r} is not a number") from None
    if value <= 0:
        raise pytest.UsageError("pytest-frank: the timeout must be more than 0 seconds")
    return value


def battery_dir() -> Path:
    import importlib.util

    # pytest_frank.batteries is installed from the checkout's batteries/ (pyproject package-dir)
    spec = importlib.util.find_spec("pytest_frank.batteries")
    if spec is None or spec.origin is None:
        raise RuntimeError("pytest_frank.batteries is not installed: reinstall pytest-frank")
    return Path(spec.origin).parent


def _add_battery(config) -> None:
    """Collect the installed battery wherever pytest runs; explicit paths are kept beside it."""
    battery = battery_dir()
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(battery)]
        return
    given = [Path(arg.split("::")[0]) for arg in config.args]
    if not any(_is_battery(path, battery) for path in given):
        config.args.append(str(battery))


def _is_battery(path: Path, battery: Path) -> bool:
    # The installed battery, or this checkout's `batteries/` (an editable install points there).
    resolved = path.resolve()
    return resolved == battery or battery in resolved.parents or "batteries" in path.parts


class BatteryModule(pytest.Module):
    """A battery module collects its test_* functions whatever the project's python_functions
    and python_classes say: an ops repository's naming is for its own tests."""

    def funcnamefilter(self, name: str) -> bool:
        return name.startswith("test")

    def classnamefilter(self, name: str) -> bool:
        return name.startswith("Test")


def pytest_collect_file(file_path: Path, parent):
    """The battery's files, where the project's python_files would pass them over."""
    if not _in_battery(file_path, parent.config) or not fnmatch(file_path.name, "test_*.py"):
        return None
    if any(fnmatch(file_path.name, pattern) for pattern in parent.config.getini("python_files")):
        return None  # pytest collects it, through pytest_pycollect_makemodule below
    return BatteryModule.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    if _in_battery(module_path, parent.config):
        return BatteryModule.from_parent(parent, path=module_path)
    return None


def _in_battery(path: Path, config) -> bool:
    return config.stash.get(SESSION, None) is not None and battery_dir() in path.parents


def pytest_generate_tests(metafunc):
    if "endpoint" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash.get(SESSION, None)
    if session is None:
        return
    cases = _cases_of(metafunc)
    claim = claim_of(metafunc.definition)
    check = getattr(metafunc.function, "frank_check", None)
    params = []
    for name, target in session.targets.items():
        if claim and not target.endpoint.asks(claim):
            continue  # a claim fleet.yaml does not ask of this endpoint is no test of it
        if check is not None and check.asked and not check.asked(
                target.endpoint.options(check.claim)):
            continue  # nor is a test its options do not ask
        if cases is None:
            params.append(pytest.param(name, id=name))
            continue
        for suffix, value in cases(target):
            params.append(pytest.param(name, value, id=f"{name}-{suffix}" if suffix else name))
    if not params:  # asked of no endpoint: not collected at all
        params = [pytest.param(UNASKED, *([None] if cases else []), id="unasked")]
        # (pytest makes an empty parameter set a skipped test; the placeholder is dropped below)
    if cases is None:
        metafunc.parametrize("endpoint", params, indirect=True)
    else:
        metafunc.parametrize(("endpoint", "case"), params, indirect=["endpoint"])


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if report.result:
        report.result = [node for node in report.result if endpoint_of(node) != UNASKED]
    return report


def _cases_of(metafunc):
    """One test per case (a reasoning_effort level, an image form): ids read `name-case`.
    Returns target -> [(id suffix, case value)], or None for a check without cases."""
    if "case" not in metafunc.fixturenames:
        return None
    check = getattr(metafunc.function, "frank_check", None)
    if check is not None and check.cases is not None:
        def battery_cases(target):
            found = check.cases(target.endpoint.options(check.claim), target.driver)
            return [(c, c) for c in found] or [(None, None)]
        return battery_cases
    custom = getattr(metafunc.module, "frank_cases", None)
    if custom is None:
        return None
    from pytest_frank.endpoint import EndpointUnderTest

    return lambda target: list(custom(EndpointUnderTest(target)) or []) or [(None, None)]


@pytest.fixture
def endpoint(request):
    """The endpoint under test, as the fleet file describes it, with its probes and evidence."""
    session = request.config.stash.get(SESSION, None)
    if session is None:
        pytest.skip("no fleet given: run with --endpoints fleet.yaml")
    from pytest_frank.endpoint import EndpointUnderTest

    target = session.targets[request.param]
    handle = EndpointUnderTest(target)
    request.node.stash[PROBED] = handle
    claim = claim_of(request.node)  # an unasked claim is never collected for this endpoint
    if claim != "health" and not request.node.get_closest_marker("offline"):
        session.probe_all([target.name])  # in an xdist worker: this endpoint, on first use
        handle.verdict = Verdict.BLOCKED  # until health says otherwise
        _require_health(session, target.name)
        handle.verdict = None
    from pytest_frank.checks import check_of

    check, case = check_of(request.node), _case_of(request.node)
    handle.verdict = Verdict.INTERRUPTED
    _require_measured(session, target, check, case)
    handle.verdict = Verdict.BLOCKED
    _require_pace(target, check, case)
    handle.verdict = None
    return handle


def _require_health(session, name: str) -> None:
    from pytest_frank.claims import health

    if session.stop.why and not session.targets[name].measured(health.probe):
        return  # not known: the interrupt is the reason
    state = session.health(name)
    if not state.ready:
        # Points at the failure instead of copying it: one endpoint's 3 MiB error page must
        # not be repeated in every skipped check's reason.
        pytest.skip(redact.inert(f"{name} is not healthy, see test_health[{name}]: "
                                 f"{state.line()}", 200))


def _require_measured(session, target, check, case) -> None:
    """After an interrupt, only what was measured before it is judged."""
    if not session.stop.why:
        return
    if check is not None and (check.not_applying(target.endpoint, target.driver)
                              or target.measured(check.probe, case)):
        return
    pytest.skip(f"{session.stop.why} before this was measured")


def _require_pace(target, check, case) -> None:
    """After one answer cut as too slow, the endpoint's other generations were not sent."""
    from pytest_frank.target import key_of

    if check is None or key_of(check.probe, case) not in target.held:
        return
    slow = target.slow
    seen = target.judged.get(slow.key, "its first slow answer")
    pytest.skip(redact.inert(f"{target.name} answered too slowly, see {seen}: {slow.line}", 300))


def endpoint_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("endpoint") if callspec else None


def _case_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("case") if callspec else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if config.stash.get(SESSION, None) is None:
        return
    _only_endpoints(config, items)
    if config.getoption("frank_offline"):
        live = [item for item in items if not item.get_closest_marker("offline")]
        if live:
            config.hook.pytest_deselected(items=live)
            items[:] = [item for item in items if item.get_closest_marker("offline")]
    # Health first, then the claims in their listed order: a report reads top-down like a bring-up.
    order = {claim: i for i, claim in enumerate(CLAIMS)}
    items.sort(key=lambda item: order.get(claim_of(item) or "", len(order)))


def _only_endpoints(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("frank_endpoint")
    if not wanted:
        return
    known = config.stash[SESSION].targets
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise pytest.UsageError(f"pytest-frank: --frank-endpoint {', '.join(unknown)}: no such "
                                f"endpoint in the fleet (it has {', '.join(known)})")
    dropped = [item for item in items if endpoint_of(item) not in (None, *wanted)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` keeps each endpoint's checks in one worker: one process probes it and
    starts its `launch:` server. Scheduled by the endpoint in the test id, not by xdist's
    `@group` suffix on node ids, which pytest 9.2's node ids do not carry cleanly."""
    frank = config.stash.get(SESSION, None)
    if frank is None or config.getvalue("dist") != "loadgroup":
        return None
    from pytest_frank.xdist_scheduling import by_endpoint

    return by_endpoint(config, log, list(frank.targets))


def pytest_collection_finish(session):
    """After -k/-m selection: the probes the selected checks need, per endpoint."""
    frank = session.config.stash.get(SESSION, None)
    if frank is None:
        return
    from pytest_frank.checks import check_of

    for item in session.items:
        name, check = endpoint_of(item), check_of(item)
        if name is None:
            continue
        work = frank.plan.setdefault(name, [])
        target = frank.targets[name]
        if check is None or check.offline or not target.endpoint.asks(check.claim):
            continue
        if check.not_applying(target.endpoint, target.driver):
            continue
        job = (check.probe, item.callspec.params.get("case"))
        if job not in work:
            work.append(job)
        from pytest_frank.target import key_of

        target.judged.setdefault(key_of(*job), item.name)  # the test a slow answer points at


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    frank = session.config.stash.get(SESSION, None)
    live = not (session.config.option.collectonly or session.config.getoption("frank_offline"))
    # An xdist worker does not know which endpoints it will get: it probes each on first use.
    worker = hasattr(session.config, "workerinput")
    if frank is not None and live and not worker:
        if _probes_here(session.config):  # an xdist controller keeps pytest's own Ctrl-C
            frank.interrupts.install()  # until the reports are written (pytest_unconfigure)
        frank.probe_all(sorted(frank.plan))
    result = yield
    if frank is not None and frank.stop.why:
        # Every test has its verdict by now (the unmeasured ones read "interrupted"); pytest
        # writes the reports on its way out, and exits 2, as for its own KeyboardInterrupt.
        pytest.exit(f"{frank.stop.why}; the verdicts measured before it are kept",
                    returncode=pytest.ExitCode.INTERRUPTED)
    return result


def pytest_sessionfinish(session):
    frank = session.config.stash.get(SESSION, None)
    if frank is not None:
        frank.close()


def pytest_unconfigure(config):
    state.end(config.stash.get(RUN_STATE, None))  # the reports are written: its state goes
    frank = config.stash.get(SESSION, None)
    if frank is not None:
        frank.interrupts.restore()
        frank.warmed()  # a run that never probed (--markers, a collection error) ends here too
        if frank.stop.why:
            # Someone is waiting for the prompt: the interpreter's last garbage collection, of
            # every object the SDKs built, takes a second on a busy machine and frees nothing
            # that has anything left to write.
            import gc

            gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    name = endpoint_of(item)
    if name and call.when == "setup":  # JUnit XML and the HTML report carry these per test
        item.user_properties += [("endpoint", name), ("claim", claim_of(item) or "")]
    report = yield
    _mask_report(report)
    probed = item.stash.get(PROBED, None)
    if name is None or (call.when == "setup" and report.passed):
        return report
    from pytest_frank import rows

    report.frank = rows.row_of(item, call, report, name, probed)
    if report.skipped and isinstance(report.longrepr, tuple):
        # The test's name, not the frame that raised: a site-packages path says nothing.
        report.longrepr = (item.name, None, f"Skipped: {report.frank['line']}")
    if call.when == "call" and probed is not None and report.failed:
        text = probed.text()  # evidence is shown for failures only: a pass does not build it
        if text and not _echoes(text, report.longreprtext):
            report.sections.append(("frank evidence", text))
    return report


def _mask_report(report: pytest.TestReport) -> None:
    """What a test raised or printed passes the same mask as the battery's own lines: a custom
    check's assertion or a traceback may quote an answer with a key in it."""
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        text = report.longreprtext
        masked = redact.scrub(text)
        if masked != text:
            report.longrepr = masked
    report.sections = [(title, redact.scrub(body)) for title, body in report.sections]


def _echoes(evidence: str, message: str) -> bool:
    # A refused connection's evidence is the failure line itself: showing it twice is noise.
    return all(line.split(": ", 1)[-1] in message for line in evidence.splitlines())


def pytest_report_header(config):
    frank = config.stash.get(SESSION, None)
    if frank is not None:
        return f"frank: {len(frank.targets)} endpoint(s): {', '.join(frank.targets)}"
    return None
