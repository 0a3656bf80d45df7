"""The `endpoint` fixture: one endpoint as one test sees it, collecting that test's evidence.

    def test_models_list_is_short(endpoint):
        ex = endpoint.get("/v1/models")          # recorded as this test's evidence
        assert ex.status == 200, ex.summary()

`endpoint.probe(fn)` shares a probe's observation across the session (and shows its exchanges);
`endpoint.verify(check)` is what every battery test does: probe, then judge.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Callable, Sequence
from urllib.parse import urlsplit

import pytest

from pytest_frank.base import redact
from pytest_frank.claims import health
from pytest_frank.claims.checks import Check, Context
from pytest_frank.outcome.observation import Unseen
from pytest_frank.outcome.verdict import Failure, Inconclusive, NotApplicable, NotAsked
from pytest_frank.record.results import LAUNCH_LOG
from pytest_frank.runtime.target import key_of
from pytest_frank.transport import http

if TYPE_CHECKING:
    from pytest_frank.fleet import Endpoint
    from pytest_frank.outcome.observation import Obs
    from pytest_frank.runtime.target import Target


CURL_SHOWN = 1500  # a reproduce line's characters the terminal shows; the reports hold it whole


def terminal_curl(curl: str) -> str:
    """A reproduce line as the terminal shows it: a client profile's is tens of KB of filler
    prompt, which would bury the failure above it; cut, it says where the whole line is."""
    if len(curl) <= CURL_SHOWN:
        return curl
    return (f"{curl[:CURL_SHOWN]} ... [{len(curl) - CURL_SHOWN} more characters: cut here, so "
            "not runnable as shown; the whole line is in the reports (--frank-report, --html, "
            "--frank-json)]")


class EndpointUnderTest:
    def __init__(self, target: Target):
        self._target = target
        self.name = target.name
        self.entry = target.endpoint  # its fleet.yaml entry
        self.driver = target.driver
        self.exchanges: list[http.Exchange] = []
        self.notes: list[str] = []
        self.attachments: list[dict[str, Any]] = []  # {"name", "mime", "data" (base64 or text)}
        self.figures: dict[str, dict[str, Any]] = {}  # name -> {"value", "unit"}: for baselines
        self._route: str | None = None  # the route its judgement read, where a probe says
        # the wall time of the probes it reads, which ran in the probe phase before any test:
        # its duration in --durations, JUnit and the HTML report counts them
        self.probe_s = 0.0

    @property
    def config(self) -> Endpoint:
        """The fleet entry under its first name, which read as pytest's config: use `entry`."""
        warnings.warn("endpoint.config is endpoint.entry (the fleet entry)", DeprecationWarning,
                      stacklevel=2)
        return self.entry

    # -- requests and probes --------------------------------------------------------------------
    def get(self, path: str) -> http.Exchange:
        return self._show(self._target.get(path))

    def post(self, path: str, body: Any) -> http.Exchange:
        return self._show(self._target.post(path, body))

    def probe(self, fn: Callable[..., Obs], case: str | None = None) -> Obs | Unseen:
        """`fn(target)`'s observation, run once per session; its exchanges become evidence."""
        obs = self._target.need(fn, case)
        for ex in obs.exchanges:
            self._show(ex)
        self._route = obs.route or self._route
        self.probe_s += self._target.took.get(key_of(fn, case), 0.0)
        return obs

    def options(self, claim: str) -> Any:
        """The claim's parsed options by its name (a check's own: `Options.on(endpoint.entry)`,
        typed)."""
        return self.entry.options(claim)

    def verify(self, check: Check[Any, Any], case: str | None = None) -> None:
        """Probe, then judge: fail with the observation's failure, else with the judge's."""
        why_not = check.not_applying(self.entry, self.driver)
        if why_not:
            raise NotAsked(why_not)
        obs = self.probe(check.probe, case)
        key = key_of(check.probe, case)
        refusal = self._target.refused_by(key)
        if refusal is not None and refusal.key == key:  # the one test a refused key fails
            # in the server's words and with the fix naming the key, whatever the check's own
            # probe made of the answer (a perf probe's stream error names no key)
            raise self._diagnosis(Failure(refusal.failure, refusal.fix), check)
        broken = self._target.broken_by(key)
        if broken is not None and broken.key == key:  # the one test a broken transport fails
            self._show(broken.ex)  # its evidence, whichever probe's request it was
            raise self._diagnosis(Failure(broken.failure, broken.fix), check)
        if check.claim == health.CLAIM.name:  # once per endpoint: a launched server's log, in this row
            self._attach_launch_log()
        try:
            if obs.failure or isinstance(obs, Unseen):
                raise Failure(obs.failure or "", obs.fix)
            if obs.not_applicable:
                raise NotApplicable(f"not applicable: {obs.not_applicable}")
            if obs.inconclusive:
                raise Inconclusive(f"inconclusive: {obs.inconclusive}")
            check.judge(obs, Context(self.entry, self.driver, check.options(self.entry), case,
                                     self.note, self.attach, self.figure))
        except Failure as failed:
            diagnosed = self._diagnosis(failed, check)
        except pytest.fail.Exception as failed:  # a custom judge's own pytest.fail
            diagnosed = self._diagnosis(Failure(failed.msg or ""), check)
        else:
            return
        raise diagnosed  # outside the except: no chained traceback

    def _diagnosis(self, failed: Failure, check: Check[Any, Any]) -> Failure:
        """A failure as the operator should read it: the engine first where fleet.yaml names
        the wrong one, and its settings spelt as the endpoint's launcher takes them (fleet.yaml
        keys for a launched endpoint, `frank launch`'s flags for a server it runs)."""
        from pytest_frank.runtime import identify

        target = self._target
        stopped = target.stop.why and not target.measured(identify.engine)
        wrong = None
        if check.claim != health.CLAIM.name and not target.offline and not stopped:  # nothing to ask
            # Read without showing: the evidence and its curl line stay the failing request's.
            wrong = identify.contradiction(self._target.need(identify.engine), target)
        spelling = self.driver.launch.started_by(self.entry) if check.fleet_terms else None
        return failed.rendered(spelling, first=wrong,
                               settings=self._in_effect())

    def _in_effect(self):
        """The server settings a fix must not ask for again: the `launch:` block's, and the
        serve command's where fleet.yaml names one and it could be read."""
        parsed = None
        if self.entry.serve and self.driver.launch.serve_flags is not None:
            from pytest_frank.claims.serve import config
            from pytest_frank.serve.flags import parse

            read = self._target.need(config)
            command = getattr(read, "command", None)
            parsed = parse(command, self.driver.launch.serve_flags) if command is not None else None
        return self.driver.launch.settings_in_effect(self.entry.launch, parsed)

    # -- evidence -------------------------------------------------------------------------------
    def note(self, text: str) -> None:
        self.notes.append(text)

    def attach(self, name: str, mime: str, data: str) -> None:
        self.attachments.append({"name": name, "mime": mime, "data": data})

    def figure(self, name: str, value: float, unit: str = "", low: float | None = None,
               high: float | None = None, runs: Sequence[float] | None = None) -> None:
        """A measured number a later run is compared with (`--frank-baseline`), the bounds it
        was judged against (`min`, `max` in the record, where set) and, for a median, each
        run's value (`runs`: the spread a rerun on an unchanged server moves within)."""
        self.figures[name] = {"value": round(float(value), 4), "unit": unit}
        for key, bound in (("min", low), ("max", high)):
            if bound is not None:
                self.figures[name][key] = round(float(bound), 4)
        if runs:
            self.figures[name]["runs"] = [round(float(v), 4) for v in runs]

    def _attach_launch_log(self) -> None:
        text = self._target.launch_log()
        if text:
            self.attach(LAUNCH_LOG, "text/plain", text)

    def _show(self, ex: http.Exchange) -> http.Exchange:
        if ex not in self.exchanges:
            self.exchanges.append(ex)
        return ex

    def text(self) -> str:
        lines = [ex.summary() for ex in self.exchanges]
        last = self._reproduced()
        if last is not None:
            lines.append(f"reproduce: {terminal_curl(self._curl(last))}")
        lines += self.notes
        return redact.inert("\n".join(lines), 20 * redact.MAX_MESSAGE)

    def evidence(self, exchanges: bool = True) -> dict[str, Any]:
        """What the reports show of this test, as plain data (it crosses xdist's wire); without
        `exchanges`, only what the terminal shows (notes, figures, tables)."""
        last = self._reproduced()
        return {"notes": [redact.inert(n) for n in self.notes], "figures": dict(self.figures),
                "attachments": [dict(a) for a in self.attachments],
                "exchanges": [ex.record() for ex in self.exchanges] if exchanges else [],
                "curl": self._curl(last) if last is not None and exchanges else None}

    def _curl(self, ex: http.Exchange) -> str:
        """The reproduce line; a server this run launched says so first (a shell comment): its
        port was its own and it stopped with the run, so the line runs once it is up again."""
        if not self.entry.launch:
            return ex.curl()
        return (f"# {self.name} was launched by this run (fleet.yaml launch:) on a port of its "
                "own and stopped at its end: start it again, e.g. with launch.port set, and use "
                f"its port\n{ex.curl()}")

    def _reproduced(self) -> http.Exchange | None:
        """The exchange a reproduce line repeats: the last answered one of the route the
        judgement read, where the probe says which (a slot shape read from /props, not the model
        list read after it), else the last answered one, else the last sent (a refused
        connection: the line shows the same refusal)."""
        answered = [ex for ex in self.exchanges if ex.status is not None]
        read = [ex for ex in answered
                if self._route and urlsplit(ex.url).path.endswith(self._route)]
        chosen = read or answered or self.exchanges
        return chosen[-1] if chosen else None

    def records(self) -> dict[str, Any]:
        return {"endpoint": self.name, "engine": self.entry.engine,
                "exchanges": [ex.record() for ex in self.exchanges], "notes": list(self.notes)}
