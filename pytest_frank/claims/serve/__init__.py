"""serve: the files that start an endpoint (a systemd unit, env files, a serve script or a
command line, fleet.yaml `serve:`) hold what its claims need (offline, the config gate), and the
running server still runs what they say (live: an edit without a restart shows as drift)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.checks import Check, Context
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import fail

if TYPE_CHECKING:
    from pytest_frank.drivers.protocols import Routes
    from pytest_frank.runtime.target import Target
    from pytest_frank.serve import Finding, ServeCommand


@dataclass(frozen=True)
class Options(ClaimOptions):
    unit_policy: bool = option(False, about=(
        "Also check the unit's policy: `Restart=on-failure`, `RestartSec`, "
        "`LimitMEMLOCK=infinity` (a native CUDA binary) and `[Install] WantedBy=`, each named "
        "with its line. Default: false."))


CLAIM = Claim("serve",
              "the serve config (unit, env, script) holds what the claims need, and is what runs",
              Options, order=180, asked_by="serve",
              tests=("test_serve_config", "test_serve_drift"))


if TYPE_CHECKING:  # the config gate reads these options too: the type checker keeps them in step
    from pytest_frank.serve import gate

    _GATE: type[gate.ServeWants] = Options


@dataclass(kw_only=True)
class ServeConfig(Observation):
    command: ServeCommand | None = None
    findings: list[Finding] = field(default_factory=list)


@dataclass(kw_only=True)
class Drift(Observation):
    findings: list[Finding] = field(default_factory=list)


def _read(target: Target) -> ServeConfig:
    from pytest_frank import serve

    flags = target.driver.launch.serve_flags
    try:
        command = serve.read(target.endpoint.serve or {},
                             is_server=lambda argv: flags is not None and flags.start(argv) is not None)
    except serve.ServeError as exc:
        return ServeConfig(failure=f"the serve files cannot be read: {exc}",
                           fix="fix the file, or point fleet.yaml serve: at the right one")
    return ServeConfig(command=command)


def config(target: Target) -> ServeConfig:
    """The parsed serve command and what is wrong with it for the claims asked (files only)."""
    from pytest_frank import serve

    obs = _read(target)
    if obs.command is not None:
        obs.findings = serve.findings(obs.command, target.endpoint, target.driver)
    return obs


def drift(target: Target) -> Drift:
    """What the running server reports against the command that should have started it."""
    from pytest_frank import serve

    read = target.need(config)
    if isinstance(read, Unseen) or read.command is None:
        return Drift(failure=read.failure, fix=read.fix)
    driver: Routes = target.driver  # the drift check reads the engine's routes alone
    live = {}
    routes = (*driver.slot_routes, driver.models_path, driver.vision_advert_path,
              *driver.drift_routes)
    for route in dict.fromkeys(r for r in routes if r):
        ex = target.get(route)
        if ex.ok and ex.json() is not None:
            live[route] = ex.json()
    if not live:
        return Drift(failure=f"none of {', '.join(dict.fromkeys(r for r in routes if r))} "
                             f"answered on {target.endpoint.root}: nothing to compare")
    return Drift(findings=serve.drift(read.command, live, driver))


def judge_config(obs: ServeConfig, ctx: Context[Options]) -> None:
    """The serve files start the endpoint with every flag its claims need."""
    for line in obs.command.unresolved if obs.command else ():
        ctx.note(f"not resolved: {line}")
    _judge(obs.findings, ctx)


def judge_drift(obs: Drift, ctx: Context[Options]) -> None:
    """The running server runs what the serve files say."""
    _judge(obs.findings, ctx)


def _judge(found: list[Finding], ctx: Context[Options]) -> None:
    for finding in found:
        if finding.severity != "fail":
            ctx.note(f"{finding.where}: {finding.what} ({finding.fix})")
    failed = [f for f in found if f.severity == "fail"]
    if not failed:
        return
    *first, last = failed  # each finding with its own fix, the last one's closing the message
    lines = "".join(f"{f.where}: {f.what}\n  fix: {f.fix}\n" for f in first)
    fail(f"{lines}{last.where}: {last.what}", last.fix)


CONFIG = Check("test_serve_config", "serve", config, judge_config, offline=True, fleet_terms=False)
DRIFT = Check("test_serve_drift", "serve", drift, judge_drift, fleet_terms=False)
