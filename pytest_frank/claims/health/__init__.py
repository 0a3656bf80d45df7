"""health: the engine's health route answers ready; a model still loading is waited for."""

from __future__ import annotations

from pytest_frank.claims import Claim, Options
from pytest_frank.claims.checks import Check, Context
from pytest_frank.outcome.verdict import fail
from pytest_frank.runtime.probes import Health
from pytest_frank.runtime.probes import health as probe

CLAIM = Claim("health", "the health route answers ready", order=10, always=True,
              tests=("test_health",))


def judge(health: Health, ctx: Context[Options]) -> None:
    """The health route answers ready."""
    if health.state == "loading":
        # Polled until the deadline, so the wait is the configured one (a loaded machine may
        # add a fraction of a second that would only confuse the line).
        fail(f"{health.url} is still loading after {ctx.endpoint.ready_timeout:g}s "
             f"(ready_timeout {ctx.endpoint.ready_timeout:g}s); last answer: {health.problem}",
             "wait for the model to finish loading, or raise ready_timeout in fleet.yaml")
    if health.state == "down":
        fail(health.line(), health.fix or down_fix(health, ctx.driver.health_path))


# What a health route that is down usually needs, by what the probe saw (transport.http's words
# for a request that got no answer); the first that the problem names wins.
NO_ANSWER = (
    ("connection refused", "start the server, or correct `url` in fleet.yaml: nothing listens "
                           "on that host and port (the reproduce line asks the same)"),
    ("dns lookup failed", "correct the host name in fleet.yaml's `url`, or make it resolve on "
                          "this machine (DNS, /etc/hosts)"),
    ("connection timed out", "let this machine reach the port (a firewall or security group "
                             "drops the packets), or correct the host in fleet.yaml's `url`"),
    ("no answer within", "the server took the connection and did not answer its health route: "
                         "it may be stuck (see its log, restart it), or only slow (raise "
                         "`timeout` in fleet.yaml)"),
    ("broke the connection", "the server closed the connection without an answer: see its log "
                             "for a crash, and check that `url`'s scheme (http or https) is "
                             "the one it serves"),
)


def down_fix(health: Health, route: str) -> str:
    """The fix a health check that is down gives where no known error names one."""
    if health.launched:
        return ("read llama.cpp's own log, attached to this row: the server stopped before it "
                "listened; fix what it names in fleet.yaml's launch:")
    problem = (health.problem or "").lower()
    if health.status is None:
        return next((fix for needle, fix in NO_ANSWER if needle in problem),
                    "check that the server runs and that fleet.yaml's `url` (scheme, host, port) "
                    "reaches it from this machine")
    if health.status >= 500:
        return (f"the server answers {route} with an error of its own: its log says why (the "
                f"reproduce line shows the answer); restart it once that is fixed")
    return (f"the server answers {route} with {health.status}, not ready: run the reproduce line "
            f"to see the answer, and check that fleet.yaml's `url` and `engine` name this server")


HEALTH = Check("test_health", "health", probe, judge)
