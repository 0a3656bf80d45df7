"""pytest-frank: `pytest --endpoints fleet.yaml` runs the battery once per endpoint.

Here: the options, the hook specifications, loading the fleet (pytest_configure) and the
`endpoint` fixture. The run's own hooks are on one object (session_hooks.FleetHooks), registered
only when a fleet is loaded; so is the runtime (HTTP clients, drivers, probes) imported: any
other pytest run of a project that installs pytest-frank would pay for it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_frank import claims
from pytest_frank.base import hooks, redact, state
from pytest_frank.base.shard import Shard, ShardError
from pytest_frank.claims import CLAIMS
from pytest_frank.fleet import DEFAULT_TIMEOUT, Endpoint, FleetError, load
from pytest_frank.plugin.junit import StableClassnames
from pytest_frank.plugin.stash import RUN_STATE, SESSION
from pytest_frank.record.results import (
    SOURCE,
    Run,
    RunFileError,
    Source,
    UsageErrors,
    read_run,
)

if TYPE_CHECKING:
    from pytest_frank.plugin.under_test import EndpointUnderTest

__all__ = ["SESSION", "battery_dir", "endpoint"]
FLEET_HOOKS = "frank-fleet"  # the name the run's hooks object is registered under


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("frank", "LLM endpoint verification (pytest-frank)")
    group.addoption("--endpoints", metavar="FLEET_YAML", default=None,
                    help="fleet file of endpoints to verify (ini: frank_endpoints)")
    group.addoption("--frank-timeout", metavar="SECONDS", type=float, default=None,
                    help=f"per-request timeout (ini: frank_timeout; default {DEFAULT_TIMEOUT:g})")
    group.addoption("--frank-deadline", metavar="SECONDS", type=float, default=None,
                    help="no endpoint gets a request, or time to answer one, past this many "
                         "seconds from the start of the run")
    group.addoption("--frank-endpoint", metavar="NAME", action="append", default=[],
                    help="verify only this endpoint (its exact name; repeat for more): unlike "
                         "-k NAME it does not also pick NAME-draft")
    group.addoption("--frank-shard", metavar="I/N", default=None,
                    help="verify only shard I of N (1 to N): a stable split of the fleet by "
                         "endpoint name, for a CI matrix; `frank merge` joins the shards' "
                         "--frank-json records")
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
    group.addoption("--frank-history", metavar="DIR", default=None,
                    help="keep each run's JSON record in DIR (the last --frank-history-keep) "
                         "and draw each figure's trend over them in the page and the Markdown")
    group.addoption("--frank-history-keep", metavar="N", type=int, default=None,
                    help="how many runs --frank-history keeps, the oldest pruned (default 30)")
    group.addoption("--frank-fail-on-regression", action="store_true", default=False,
                    help="a regression against --frank-baseline fails the run")
    group.addoption("--frank-mask-env", metavar="NAME", action="append", default=[],
                    help="mask this environment variable's value in every output, whether or "
                         "not fleet.yaml uses it (repeat for more; ini: frank_mask_env); "
                         "credential-named variables fleet.yaml uses are masked already")
    parser.addini("frank_endpoints", "fleet file of endpoints to verify", default=None)
    parser.addini("frank_timeout", "per-request timeout in seconds", default=f"{DEFAULT_TIMEOUT:g}")
    parser.addini("frank_mask_env", "environment variables whose values every output masks",
                  type="args", default=[])


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


def pytest_configure(config: pytest.Config) -> None:
    with UsageErrors(config):  # kept for the reports, written all the same (exit 4)
        _configure(config)


def _configure(config: pytest.Config) -> None:
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
        fleet = load(fleet_path, claims=claims.declared(), offline=config.getoption("frank_offline"))
    except FleetError as exc:
        raise pytest.UsageError(f"pytest-frank: bad fleet file\n{redact.scrub(str(exc))}") from None
    _start(config, fleet_path, fleet)


def _start(config: pytest.Config, fleet_path: Path, fleet: dict[str, Endpoint]) -> None:
    """The run's session and its hooks, for the fleet loaded."""
    from pytest_frank.plugin.session_hooks import FleetHooks
    from pytest_frank.runtime.session import FrankSession  # the runtime: only for a run with a fleet

    from pytest_frank.plugin.xdist_scheduling import refusal

    refused = refusal(config)
    if refused:
        raise pytest.UsageError(f"pytest-frank: {refused}")
    shard = _shard(config)
    frank = FrankSession(fleet, _timeout(config), offline=config.getoption("frank_offline"),
                         baseline=_baseline(config))
    config.stash[SESSION] = frank
    config.stash[SOURCE] = Source(fleet_path, fleet)  # what the reports plugin reports on
    config.pluginmanager.register(StableClassnames(config, battery_dir()), "frank-junit")
    config.pluginmanager.register(FleetHooks(config, frank, battery_dir(), _probes_here(config),
                                             shard), FLEET_HOOKS)
    if not config.getoption("frank_no_battery"):
        _add_battery(config)
    run_deadline = config.getoption("frank_deadline")
    if run_deadline is not None:
        if run_deadline <= 0:
            raise pytest.UsageError("pytest-frank: --frank-deadline must be more than 0 seconds")
        frank.bound_run(run_deadline)
    if _probes_here(config):
        frank.warm()


def _baseline(config: pytest.Config) -> Run | None:
    """The --frank-baseline run, for probes that ask what it asked (the fingerprint's prompts);
    None where there is none or it cannot be read (the reports then say why, as a usage error)."""
    path = config.getoption("frank_baseline")
    try:
        return read_run(Path(path)) if path else None
    except RunFileError:
        return None


def _shard(config: pytest.Config) -> Shard | None:
    spec = config.getoption("frank_shard")
    try:
        return Shard.parse(spec) if spec is not None else None
    except ShardError as exc:
        raise pytest.UsageError(f"pytest-frank: --frank-shard {redact.inert(str(exc))}") from None


def _user_claims(config: pytest.Config) -> None:
    """The claims conftest.py files and plugins register (they are loaded by now)."""
    config.stash[RUN_STATE] = state.begin()  # this run's claims and secrets, till unconfigure
    try:
        config.hook.pytest_frank_claims(register=claims.register)
    except claims.ClaimError as exc:
        raise pytest.UsageError(f"pytest-frank: {exc}") from None


def _mask_env(config: pytest.Config) -> None:
    """The values of the variables --frank-mask-env names are secrets, used or not."""
    for name in [*config.getini("frank_mask_env"), *config.getoption("frank_mask_env")]:
        redact.register(os.environ.get(name))


def _probes_here(config: pytest.Config) -> bool:
    """Whether this process will run probes: not for --collect-only or the config gate, nor in
    an xdist controller (its workers probe)."""
    controller = getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")
    return not (config.option.collectonly or config.getoption("frank_offline") or controller)


def _resolve(config: pytest.Config, path: str) -> Path:
    # An ini value is relative to the ini file; a command-line value to the current directory.
    if config.getoption("endpoints") or config.inipath is None:
        return Path(path)
    return Path(config.inipath).parent / path


def _timeout(config: pytest.Config) -> float:
    raw = config.getoption("frank_timeout") or config.getini("frank_timeout")
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"pytest-frank: frank_timeout {raw!r} is not a number") from None
    if value <= 0:
        raise pytest.UsageError("pytest-frank: the timeout must be more than 0 seconds")
    return value


def battery_dir() -> Path:
    # pytest_frank.batteries is installed from the checkout's batteries/ (pyproject package-dir)
    spec = importlib.util.find_spec("pytest_frank.batteries")
    if spec is None or spec.origin is None:
        raise RuntimeError("pytest_frank.batteries is not installed: reinstall pytest-frank")
    return Path(spec.origin).parent


def _add_battery(config: pytest.Config) -> None:
    """Collect the installed battery wherever pytest runs; explicit paths are kept beside it."""
    battery = battery_dir()
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(battery)]
        return
    config.args[:] = [_battery_test(config, arg, battery) for arg in config.args]
    given = [Path(arg.split("::")[0]) for arg in config.args]
    if not any(_is_battery(path, battery) for path in given):
        config.args.append(str(battery))


def _battery_test(config: pytest.Config, arg: str, battery: Path) -> str:
    """A battery test's id as the run printed it (`test_perf.py::test_decode[NAME]`, or
    `../test_perf.py::...` from a folder below the rootdir), pasted back: the installed module
    of that name. A file of that name in the user's folder is theirs, and kept."""
    path, sep, rest = arg.partition("::")
    if not path.endswith(".py") or (config.invocation_params.dir / path).exists():
        return arg
    module = battery / Path(path).name
    return f"{module}{sep}{rest}" if module.is_file() else arg


def _is_battery(path: Path, battery: Path) -> bool:
    # The installed battery, or this checkout's `batteries/` (an editable install points there).
    resolved = path.resolve()
    return resolved == battery or battery in resolved.parents or "batteries" in path.parts


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> EndpointUnderTest:
    """The endpoint under test, as the fleet file describes it, with its probes and evidence."""
    fleet = request.config.pluginmanager.get_plugin(FLEET_HOOKS)
    if fleet is None:
        pytest.skip("no fleet given: run with --endpoints fleet.yaml")
    return fleet.endpoint(request)


def pytest_unconfigure(config: pytest.Config) -> None:
    state.end(config.stash.get(RUN_STATE, None))  # the reports are written: its state goes
