"""The config gate: how an endpoint is started (a systemd unit, env files, a serve script or a
command line), read without running anything, and judged against what fleet.yaml asks of it
(`findings`) and against what the running server reports (`drift`)."""

from __future__ import annotations

from pytest_frank.serve.command import Arg, ServeCommand, ServeError, read
from pytest_frank.serve.drift import drift
from pytest_frank.serve.gate import Finding, findings, unit_policy
from pytest_frank.serve.script import Site

__all__ = ["Arg", "Finding", "ServeCommand", "ServeError", "Site", "drift", "findings", "read",
           "unit_policy"]
