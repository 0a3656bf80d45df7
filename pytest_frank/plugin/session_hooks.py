"""pytest's hooks for a run that verifies a fleet, on one object: the plugin registers it once
the fleet file is loaded (pytest_frank.plugin's pytest_configure), so no hook here asks whether
there is a fleet. Also what the `endpoint` fixture does before a test: the endpoint must be
healthy, measured before any interrupt, and not held back as too slow or by a refused key."""

from __future__ import annotations

import gc
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Generator

import pytest

from pytest_frank.base import redact
from pytest_frank.base.hosts import shared_line, shared_servers
from pytest_frank.base.shard import Shard
from pytest_frank.claims import CLAIMS, claim_of, health
from pytest_frank.claims.checks import Check, check_of
from pytest_frank.outcome.verdict import Blocked, Interrupted
from pytest_frank.plugin import rows
from pytest_frank.plugin.under_test import EndpointUnderTest
from pytest_frank.plugin.xdist_scheduling import by_server, scopes_of
from pytest_frank.plugin.xdist_scheduling import header as xdist_header
from pytest_frank.plugin.xdist_scheduling import under_xdist
from pytest_frank.record.results import UsageErrors, note
from pytest_frank.runtime.session import FrankSession
from pytest_frank.runtime.target import Target, key_of

PROBED: pytest.StashKey[EndpointUnderTest] = pytest.StashKey()
UNASKED = "(asked of no endpoint)"
Cases = Callable[[Target], "list[tuple[str | None, Any]]"]  # target -> [(id suffix, case value)]


class BatteryModule(pytest.Module):
    """A battery module collects its test_* functions whatever the project's python_functions
    and python_classes say: an ops repository's naming is for its own tests."""

    def funcnamefilter(self, name: str) -> bool:
        return name.startswith("test")

    def classnamefilter(self, name: str) -> bool:
        return name.startswith("Test")


def battery_module(parent: pytest.Collector, path: Path) -> BatteryModule:
    """A battery module whose node id is its file name (`test_perf.py::test_decode[NAME]`), not
    the installed path: that id, pasted after `pytest --endpoints fleet.yaml`, reruns the test
    (plugin._add_battery maps the name back to the battery)."""
    return BatteryModule.from_parent(parent, path=path, nodeid=path.name)


class FleetHooks:
    """The run's hooks: collecting the battery per endpoint, planning and running the probe
    phase, and each report's row."""

    def __init__(self, config: pytest.Config, frank: FrankSession, battery: Path,
                 probes: bool, shard: Shard | None = None) -> None:
        self.config, self.frank, self.battery = config, frank, battery
        self.probes = probes  # whether this process probes (see plugin._probes_here)
        self.shard = shard  # --frank-shard: this runner's share of the fleet, or all of it
        self.nothing_offline = False  # --frank-offline left no check: a valid fleet, exit 0

    # -- collection ------------------------------------------------------------------------------
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        """The battery's files, where the project's python_files would pass them over."""
        if self.battery not in file_path.parents or not fnmatch(file_path.name, "test_*.py"):
            return None
        if any(fnmatch(file_path.name, pattern) for pattern in self.config.getini("python_files")):
            return None  # pytest collects it, through pytest_pycollect_makemodule below
        return battery_module(parent, file_path)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(self, module_path: Path,
                                    parent: pytest.Collector) -> pytest.Module | None:
        if self.battery in module_path.parents:
            return battery_module(parent, module_path)
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "endpoint" not in metafunc.fixturenames:
            return
        cases = _cases_of(metafunc)
        claim = claim_of(metafunc.definition)
        check = getattr(metafunc.function, "frank_check", None)
        params = []
        for name, target in self.frank.targets.items():
            if claim and not target.endpoint.asks(claim):
                continue  # a claim fleet.yaml does not ask of this endpoint is no test of it
            if check is not None and not check.is_asked(target.endpoint):
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
    def pytest_make_collect_report(self, collector: pytest.Collector
                                   ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if report.result:
            report.result = [node for node in report.result if endpoint_of(node) != UNASKED]
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        with UsageErrors(config):
            self._only_endpoints(items)
        if config.getoption("frank_offline"):
            live = [item for item in items if not item.get_closest_marker("offline")]
            if live:
                config.hook.pytest_deselected(items=live)
                items[:] = [item for item in items if item.get_closest_marker("offline")]
            if live and not items:
                self._nothing_offline()
        # Health first, then the claims in their listed order: a report reads top-down like a
        # bring-up.
        order = {claim: i for i, claim in enumerate(CLAIMS)}
        items.sort(key=lambda item: order.get(claim_of(item) or "", len(order)))

    def _only_endpoints(self, items: list[pytest.Item]) -> None:
        wanted = self.config.getoption("frank_endpoint")
        known = self.frank.targets
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise pytest.UsageError(f"pytest-frank: --frank-endpoint {', '.join(unknown)}: no "
                                    f"such endpoint in the fleet (it has {', '.join(known)})")
        if self.shard is not None:
            wanted = [name for name in (wanted or known) if self.shard.holds(name)]
        elif not wanted:
            return
        dropped = [item for item in items if endpoint_of(item) not in (None, *wanted)]
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item not in dropped]

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Under xdist, whatever `--dist` asked: the checks of each server in one worker, so one
        process probes it (every fleet entry that reaches it) and starts a `launch:` server, and
        its limiter keeps one measurement at a time on it (`--dist each` is refused at
        configure). Scheduled by the endpoint in the test id, not by xdist's `@group` suffix on
        node ids, which pytest 9.2's node ids do not carry cleanly."""
        return by_server(config, log, scopes_of(
            {name: t.endpoint.server for name, t in self.frank.targets.items()}))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """After -k/-m selection: the probes the selected checks need, per endpoint."""
        for item in session.items:
            name, check = endpoint_of(item), check_of(item)
            if name is None:
                continue
            work = self.frank.plan.setdefault(name, [])
            target = self.frank.targets[name]
            if check is None or check.offline or not target.endpoint.asks(check.claim):
                continue
            if check.not_applying(target.endpoint, target.driver):
                continue
            job = (check.probe, case_of(item))
            if job not in work:
                work.append(job)
            target.judged.setdefault(key_of(*job), item.name)  # the test a slow answer points at

    # -- the run ---------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        frank = self.frank
        live = not (self.config.option.collectonly or self.config.getoption("frank_offline"))
        # An xdist worker does not know which endpoints it will get: it probes each on first use.
        worker = hasattr(self.config, "workerinput")
        if live and not worker:
            if self.probes:  # an xdist controller keeps pytest's own Ctrl-C
                frank.interrupts.install()  # until the reports are written (pytest_unconfigure)
            frank.probe_all(sorted(frank.plan))
        result = yield
        if frank.stop.why:
            # Every test has its verdict by now (the unmeasured ones read "interrupted"); pytest
            # writes the reports on its way out, and exits 2, as for its own KeyboardInterrupt.
            pytest.exit(f"{frank.stop.why}; the verdicts measured before it are kept",
                        returncode=pytest.ExitCode.INTERRUPTED)
        return result

    def _nothing_offline(self) -> None:
        self.nothing_offline = True
        note(self.config, "--frank-offline: nothing to check offline: every check asked needs a "
                          "live endpoint and was deselected (the offline checks are "
                          "expect.serve's files and expect.vram's memory fit, which no endpoint "
                          "selected asks)")

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before the reports build the run's record
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        self.frank.close()
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            if self.shard is not None and not self._sharded():
                session.exitstatus = pytest.ExitCode.OK  # a shard the hash left empty: no failure
            elif self._offline_left_nothing():
                session.exitstatus = pytest.ExitCode.OK  # the fleet loaded: valid, nothing offline
        return (yield)

    def _offline_left_nothing(self) -> bool:
        """Whether the offline gate deselected every check of a valid fleet. An xdist controller
        collects nothing (its workers do, and keep their deselections): there no test at all,
        without a -k, -m or --frank-no-battery of the user's own, is the gate's doing."""
        config = self.config
        if not self.nothing_offline and under_xdist(config) and config.getoption("frank_offline") \
                and not (config.option.keyword or config.option.markexpr
                         or config.getoption("frank_no_battery")):
            self._nothing_offline()
        return self.nothing_offline

    def _sharded(self) -> list[str]:
        """This runner's endpoints under --frank-shard, in fleet order."""
        shard = self.shard
        return [name for name in self.frank.targets if shard is None or shard.holds(name)]

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.frank.interrupts.restore()
        self.frank.warmed()  # a run that never probed (--markers, a collection error) ends here too
        if self.frank.stop.why:
            # Someone is waiting for the prompt: the interpreter's last garbage collection, of
            # every object the SDKs built, takes a second on a busy machine and frees nothing
            # that has anything left to write.
            gc.freeze()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        name = endpoint_of(item)
        if name and call.when == "setup":  # JUnit XML and the HTML report carry these per test
            item.user_properties += [("endpoint", name), ("claim", claim_of(item) or "")]
        report = yield
        _mask_report(report)
        probed = item.stash.get(PROBED, None)
        if name is None or (call.when == "setup" and report.passed):
            return report
        row = rows.row_of(item, report, name, probed, call.excinfo)
        report.frank = row  # type: ignore[attr-defined]
        if report.skipped and isinstance(report.longrepr, tuple):
            # The test's name, not the frame that raised: a site-packages path says nothing.
            report.longrepr = (item.name, None, f"Skipped: {row['line']}")  # type: ignore[assignment]
        if call.when == "call" and probed is not None:
            report.duration += probed.probe_s  # the probe phase did the test's work
        if call.when == "call" and probed is not None and report.failed:
            text = probed.text()  # evidence is shown for failures only: a pass does not build it
            if text and not _echoes(text, report.longreprtext):
                report.sections.append(("frank evidence", text))
        return report

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = [f"frank: {len(self.frank.targets)} endpoint(s): {', '.join(self.frank.targets)}"]
        xdist = xdist_header(config)
        if xdist:
            lines.append(f"frank: {xdist}")
        lines += [f"frank: {shared_line(server, names)}" for server, names in shared_servers(
            {name: t.endpoint.url or "" for name, t in self.frank.targets.items()
             if t.endpoint.server}).items()]
        if self.shard is not None:
            mine = self._sharded()
            others = len(self.frank.targets) - len(mine)
            lines.append(f"frank: shard {self.shard}: {', '.join(mine) or 'no endpoint'}; the "
                         f"other shards' {others} endpoint(s) deselected")
        return lines

    # -- the endpoint fixture's work -------------------------------------------------------------
    def endpoint(self, request: pytest.FixtureRequest) -> EndpointUnderTest:
        """The endpoint a test asks for, once it may be judged: a skip says why not (blocked by
        its health or by a slow answer, interrupted before it was measured)."""
        frank = self.frank
        target = frank.targets[request.param]
        handle = EndpointUnderTest(target)
        request.node.stash[PROBED] = handle
        claim = claim_of(request.node)  # an unasked claim is never collected for this endpoint
        if claim != health.CLAIM.name and not request.node.get_closest_marker("offline"):
            frank.probe_all([target.name])  # in an xdist worker: this endpoint, on first use
            _require_health(frank, target.name)
        check, case = check_of(request.node), case_of(request.node)
        _require_measured(frank, target, check, case)
        _require_pace(target, check, case)
        _require_key(target, check, case)
        _require_transport(target, check, case)
        return handle


def _cases_of(metafunc: pytest.Metafunc) -> Cases | None:
    """One test per case (a reasoning_effort level, an image form): ids read `name-case`.
    Returns target -> [(id suffix, case value)], or None for a check without cases."""
    if "case" not in metafunc.fixturenames:
        return None
    check = getattr(metafunc.function, "frank_check", None)
    if check is not None and check.cases is not None:
        def battery_cases(target: Target) -> list[tuple[str | None, Any]]:
            found = check.cases(target.endpoint.options(check.claim), target.driver)
            return [(c, c) for c in found] or [(None, None)]
        return battery_cases
    custom = getattr(metafunc.module, "frank_cases", None)
    if custom is None:
        return None
    return lambda target: list(custom(EndpointUnderTest(target)) or []) or [(None, None)]


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


def _require_health(frank: FrankSession, name: str) -> None:
    if frank.stop.why and not frank.targets[name].measured(health.probe):
        return  # not known: the interrupt is the reason
    state = frank.health(name)
    if not state.ready:
        # Points at the failure instead of copying it: one endpoint's 3 MiB error page must
        # not be repeated in every skipped check's reason.
        raise Blocked(redact.inert(f"{name} is not healthy, see {health.HEALTH.test}[{name}]: "
                                   f"{state.line()}", 200))


def _require_measured(frank: FrankSession, target: Target, check: Check[Any, Any] | None,
                      case: str | None) -> None:
    """After an interrupt, only what was measured before it is judged."""
    if not frank.stop.why:
        return
    if check is not None and (check.not_applying(target.endpoint, target.driver)
                              or target.measured(check.probe, case)):
        return
    raise Interrupted(f"{frank.stop.why} before this was measured")


def _require_pace(target: Target, check: Check[Any, Any] | None, case: str | None) -> None:
    """After one answer cut as too slow, the endpoint's other generations were not sent."""
    if check is None or key_of(check.probe, case) not in target.pacing.held:
        return
    slow = target.pacing.slow
    assert slow is not None  # a probe is held only after an answer was cut as too slow
    seen = target.judged.get(slow.key, "its first slow answer")
    raise Blocked(redact.inert(f"{target.name} answered too slowly, see {seen}: {slow.line}", 300))


def _require_key(target: Target, check: Check[Any, Any] | None, case: str | None) -> None:
    """After the endpoint refused the key, its other requests were not sent: one test fails
    with the refusal (EndpointUnderTest.verify), the others that met it point there."""
    if check is None:
        return
    key = key_of(check.probe, case)
    refusal = target.refused_by(key)
    if refusal is None or refusal.key == key:
        return
    seen = target.judged.get(refusal.key, "its first refused request")
    why = ("wants an API key and fleet.yaml gives none" if target.endpoint.api_key is None
           else "refused the API key fleet.yaml gives")
    raise Blocked(redact.inert(f"{target.name} {why}, see {seen}: {refusal.line}", 300))


def _require_transport(target: Target, check: Check[Any, Any] | None, case: str | None) -> None:
    """After a route (or every route) broke alike on every request, its other requests were
    not sent: one test fails with the fault (EndpointUnderTest.verify), the others that met it
    point there."""
    if check is None:
        return
    key = key_of(check.probe, case)
    broken = target.broken_by(key)
    if broken is None or broken.key == key:
        return
    seen = target.judged.get(broken.key, "its first broken request")
    raise Blocked(redact.inert(f"{target.name}: every request on {broken.where} broke alike "
                               f"({broken.fault}), see {seen}: {broken.line}", 300))


def endpoint_of(item: pytest.Item | pytest.Collector) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("endpoint") if callspec else None


def case_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("case") if callspec else None
