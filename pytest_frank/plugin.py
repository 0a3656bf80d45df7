"""pytest-frank: `pytest --endpoints fleet.yaml` runs the battery once per endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_frank import redact
from pytest_frank.claims import CLAIMS
from pytest_frank.fleet import FleetError, load

SESSION = pytest.StashKey["FrankSession"]()
PROBED = pytest.StashKey["object"]()


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
    parser.addini("frank_endpoints", "fleet file of endpoints to verify", default=None)
    parser.addini("frank_timeout", "per-request timeout in seconds", default="30")


def pytest_configure(config):
    for claim, about in CLAIMS.items():
        config.addinivalue_line("markers", f"{claim}: claim '{about}' (pytest-frank)")
    config.addinivalue_line("markers", "offline: a pytest-frank check that needs no live endpoint")
    fleet_path = config.getoption("endpoints") or config.getini("frank_endpoints")
    if not fleet_path:
        return
    fleet_path = _resolve(config, fleet_path)
    try:
        fleet = load(fleet_path)
    except FleetError as exc:
        raise pytest.UsageError(f"pytest-frank: bad fleet file\n{redact.scrub(str(exc))}") from None
    from pytest_frank.session import FrankSession

    config.stash[SESSION] = FrankSession(fleet, _timeout(config),
                                         offline=config.getoption("frank_offline"))
    if not config.getoption("frank_no_battery"):
        _add_battery(config)
    run_deadline = config.getoption("frank_deadline")
    if run_deadline is not None:
        if run_deadline <= 0:
            raise pytest.UsageError("pytest-frank: --frank-deadline must be more than 0 seconds")
        config.stash[SESSION].bound_run(run_deadline)
    if _probes_here(config):
        config.stash[SESSION].warm()


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
    import pytest_frank.batteries as battery

    return Path(battery.__file__).parent


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


def pytest_generate_tests(metafunc):
    if "endpoint" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash.get(SESSION, None)
    if session is None:
        return
    grouped = metafunc.config.pluginmanager.hasplugin("xdist")
    cases = _cases_of(metafunc)
    params = []
    for name, target in session.targets.items():
        # The group mark is on the parameter from the start: xdist's loadgroup reads it when
        # the worker collects, so one endpoint's checks all run in one process.
        marks = [pytest.mark.xdist_group(name)] if grouped else []
        if cases is None:
            params.append(pytest.param(name, marks=marks, id=name))
            continue
        for suffix, value in cases(target):
            params.append(pytest.param(name, value, marks=marks,
                                       id=f"{name}-{suffix}" if suffix else name))
    if cases is None:
        metafunc.parametrize("endpoint", params, indirect=True)
    else:
        metafunc.parametrize(("endpoint", "case"), params, indirect=["endpoint"])


def _cases_of(metafunc):
    """One test per case (a reasoning_effort level, an image form): ids read `name-case`.
    Returns target -> [(id suffix, case value)], or None for a check without cases."""
    if "case" not in metafunc.fixturenames:
        return None
    check = getattr(metafunc.function, "frank_check", None)
    if check is not None and check.cases is not None:
        def battery_cases(target):
            if not target.endpoint.asks(check.claim):
                return [(None, None)]  # one test, skipped as not asked
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
    claim = claim_of(request.node)
    if claim and not target.endpoint.asks(claim):
        pytest.skip(f"fleet.yaml does not ask {claim!r} of {target.name}")
    if claim != "health" and not request.node.get_closest_marker("offline"):
        session.probe_all([target.name])  # in an xdist worker: this endpoint, on first use
        _require_health(session, target.name)
    return handle


def _require_health(session, name: str) -> None:
    state = session.health(name)
    if not state.ready:
        # Points at the failure instead of copying it: one endpoint's 3 MiB error page must
        # not be repeated in every skipped check's reason.
        pytest.skip(redact.inert(f"{name} is not healthy, see test_health[{name}]: "
                                 f"{state.line()}", 200))


def claim_of(item) -> str | None:
    for mark in item.iter_markers():
        if mark.name in CLAIMS:
            return mark.name
    return None


def endpoint_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("endpoint") if callspec else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if config.stash.get(SESSION, None) is None:
        return
    _group_for_xdist(config, items)
    _only_endpoints(config, items)
    if config.getoption("frank_offline"):
        live = [item for item in items if not item.get_closest_marker("offline")]
        if live:
            config.hook.pytest_deselected(items=live)
            items[:] = [item for item in items if item.get_closest_marker("offline")]
    # Health first, then the claims in their listed order: a report reads top-down like a bring-up.
    order = {claim: i for i, claim in enumerate(CLAIMS)}
    items.sort(key=lambda item: order.get(claim_of(item), len(order)))


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


def _group_for_xdist(config, items) -> None:
    """pytest-xdist's loadgroup schedules by an `@group` suffix on each node id, which its worker
    sets through an attribute pytest 9.2 no longer reads; add the endpoint's group where missing."""
    if not (hasattr(config, "workerinput") and getattr(config.option, "loadgroup", False)):
        return
    for item in items:
        name = endpoint_of(item)
        if name and "@" not in item.nodeid:
            grouped = f"{item.nodeid}@{name}"
            if hasattr(item, "_id"):
                from _pytest.nodeid import coerce_node_id

                item._id = coerce_node_id(grouped)
            else:
                item._nodeid = grouped


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


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    frank = session.config.stash.get(SESSION, None)
    live = not (session.config.option.collectonly or session.config.getoption("frank_offline"))
    # An xdist worker does not know which endpoints it will get: it probes each on first use.
    worker = hasattr(session.config, "workerinput")
    if frank is not None and live and not worker:
        frank.probe_all(sorted(frank.plan))
    return (yield)


def pytest_sessionfinish(session):
    frank = session.config.stash.get(SESSION, None)
    if frank is not None:
        frank.close()


def pytest_unconfigure(config):
    frank = config.stash.get(SESSION, None)
    if frank is not None:
        frank.warmed()  # a run that never probed (--markers, a collection error) ends here too


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    name = endpoint_of(item)
    if name and call.when == "setup":  # JUnit XML and the HTML report carry these per test
        item.user_properties += [("endpoint", name), ("claim", claim_of(item) or "")]
    report = yield
    probed = item.stash.get(PROBED, None)
    if probed is None or call.when != "call":
        return report
    if report.failed:  # evidence is shown for failures only: a pass does not build it
        text = probed.text()
        if text and not _echoes(text, report.longreprtext):
            report.sections.append(("frank evidence", text))
    _html_extras(item, report, probed)
    if report.passed:  # tables (text/markdown evidence) of passing checks go in the summary
        report.frank_tables = [(a["name"], a["data"]) for a in probed.attachments
                               if a["mime"] == "text/markdown"]
    return report


def _echoes(evidence: str, message: str) -> bool:
    # A refused connection's evidence is the failure line itself: showing it twice is noise.
    return all(line.split(": ", 1)[-1] in message for line in evidence.splitlines())


def _html_extras(item, report, probed) -> None:
    # Only pytest-html reads extras, and only when it writes a report: without --html, building
    # them (a JSON round trip through the redactor) is work per test for nobody.
    config = item.config
    if not (config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None)):
        return
    import pytest_html

    extras = getattr(report, "extras", [])
    extras.append(pytest_html.extras.json(json.loads(redact.scrub(json.dumps(probed.records()))),
                                          name="evidence"))
    for a in probed.attachments:
        if a["mime"].startswith("image/"):
            extras.append(pytest_html.extras.image(a["data"], mime_type=a["mime"], name=a["name"]))
        else:
            extras.append(pytest_html.extras.text(redact.inert(a["data"], 20 * redact.MAX_MESSAGE),
                                                  name=a["name"]))
    report.extras = extras


def pytest_report_header(config):
    frank = config.stash.get(SESSION, None)
    if frank is not None:
        return f"frank: {len(frank.targets)} endpoint(s): {', '.join(frank.targets)}"
    return None


def pytest_terminal_summary(terminalreporter, config):
    frank = config.stash.get(SESSION, None)
    if frank is None:
        return
    from pytest_frank.summary import verdict_table

    _tables(terminalreporter)
    table = verdict_table(terminalreporter.stats)
    if table:
        terminalreporter.write_sep("=", "frank verdicts")
        for line in table:
            terminalreporter.write_line(line)


def _tables(terminalreporter) -> None:
    shown = [(r, t) for r in terminalreporter.stats.get("passed", ())
             for t in getattr(r, "frank_tables", ())]
    if not shown:
        return
    terminalreporter.write_sep("=", "frank tables")
    for report, (name, text) in shown:
        terminalreporter.write_line(f"{report.nodeid.split('::')[-1]}: {name}")
        for line in redact.inert(text, 20 * redact.MAX_MESSAGE).splitlines():
            terminalreporter.write_line(line)
