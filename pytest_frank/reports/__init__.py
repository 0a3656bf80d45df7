"""The run's reports: rows gathered from every test report (under xdist too: a row is plain
data on the report), then the terminal table, the pytest-html page, `--frank-report` Markdown,
`--frank-json` evidence and the `--frank-baseline` comparison, all from one `Run`."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_frank.base import redact
from pytest_frank.base.shard import Shard
from pytest_frank.outcome.verdict import Verdict
from pytest_frank.record.results import (
    FLEET,
    IDENTITY,
    LAUNCH_LOG,
    NOTES,
    ROWS,
    SOURCE,
    SPEND,
    USAGE_ERROR,
    EndpointInfo,
    Payload,
    Row,
    Run,
    RunFileError,
    UsageErrors,
    fleet_digest,
    read_run,
)

if TYPE_CHECKING:
    from pytest_frank.fleet import Endpoint
    from pytest_frank.reports.glance import Chart

SHORT = {Verdict.PASS: "ok", Verdict.FAIL: "FAIL", Verdict.ERROR: "ERROR", Verdict.SKIPPED: "skip"}


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Report a frank run: the glue has put its fleet under results.SOURCE by now."""
    with UsageErrors(config):  # kept for the reports, written all the same (exit 4)
        _configure(config)


def _configure(config: pytest.Config) -> None:
    source = config.stash.get(SOURCE, None)
    if source is None:
        return
    baseline = config.getoption("frank_baseline")
    if config.getoption("frank_fail_on_regression") and not baseline:
        raise pytest.UsageError("pytest-frank: --frank-fail-on-regression needs --frank-baseline "
                                "PREV.json (a previous run's --frank-json)")
    for option in OUTPUTS:
        problem = _unwritable(config.getoption(option))
        if problem:
            raise pytest.UsageError(f"pytest-frank: --{option.replace('_', '-')} "
                                    f"{redact.inert(config.getoption(option))}: {problem}")
    history = _history(config)
    try:
        previous = read_run(Path(baseline)) if baseline else None
    except RunFileError as exc:
        raise pytest.UsageError(f"pytest-frank: bad --frank-baseline\n{redact.inert(str(exc))}") \
            from None
    reports = Reports(config, source.fleet, source.fleet_path, previous)
    if history is not None:
        from pytest_frank.reports import history as kept

        keep = config.getoption("frank_history_keep") or kept.KEEP
        earlier = kept.runs(history)  # with this run, the last `keep`
        reports.history = earlier[max(len(earlier) - keep + 1, 0):]
    config.pluginmanager.register(reports, "frank-run-reports")


OUTPUTS = ("frank_json", "frank_report", "frank_prometheus")


def _unwritable(path: str | None) -> str | None:
    """Why PATH cannot be written, asked before any endpoint is probed rather than after."""
    if not path:
        return None
    target = Path(path)
    if target.is_dir():
        return "that is a folder; give a file name"
    folder = target.parent
    while not folder.exists():  # the nearest folder that exists must take the new ones
        folder = folder.parent
    if not folder.is_dir():
        return f"{redact.inert(str(folder))} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return "not writable here (permissions)"
    return None


def _history(config: pytest.Config) -> Path | None:
    """--frank-history's folder, asked before any probe: a folder that can be written."""
    keep = config.getoption("frank_history_keep")
    if keep is not None and keep < 1:
        raise pytest.UsageError(f"pytest-frank: --frank-history-keep {keep}: keep at least 1 run")
    folder = config.getoption("frank_history")
    if not folder:
        if keep is not None:
            raise pytest.UsageError("pytest-frank: --frank-history-keep needs --frank-history DIR")
        return None
    path = Path(folder)
    problem = (f"{redact.inert(folder)} is a file, not a folder" if path.is_file()
               else _unwritable(str(path / "frank-run.json")))
    if problem:
        raise pytest.UsageError(f"pytest-frank: --frank-history {redact.inert(folder)}: {problem}")
    return path


class Reports:
    def __init__(self, config: pytest.Config, fleet: dict[str, Endpoint], fleet_path: Path,
                 baseline: Run | None):
        self.config = config
        self.fleet = fleet
        self.fleet_path = fleet_path
        self.baseline = baseline
        self.rows: dict[str, Row] = {}
        self.identities: dict[str, dict] = {}
        self.spends: dict[str, dict] = {}  # endpoint -> Spend.record()
        self.history: list[Run] = []  # --frank-history's kept runs, oldest first
        self._run: Run | None = None
        self._charts: list[Chart] | None = None
        self.started = time.time()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The fleet in pytest-html's environment table too (pytest-metadata's, drawn by script)."""
        try:
            from pytest_metadata.plugin import metadata_key
        except ImportError:
            return
        from pytest_frank import __version__

        meta = self.config.stash.get(metadata_key, None)
        if meta is not None:
            meta["pytest-frank"] = __version__
            meta["Fleet file"] = f"{self.fleet_path} (sha256 {fleet_digest(self.fleet_path)})"
            meta["Endpoints"] = ", ".join(f"{n} ({ep.engine})" for n, ep in self.fleet.items())

    # -- gathering ---------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "frank", None)
        if data is None or hasattr(self.config, "workerinput"):
            return  # an xdist worker sends its reports on; the controller gathers them
        sent = Payload.of(data)
        name = sent.row.endpoint
        if sent.identity is not None and ("build" in sent.identity or name not in self.identities):
            self.identities[name] = sent.identity  # a measured one wins over a bare URL
        if sent.spend and sent.spend["generations"] >= self.spends.get(name, {}).get(
                "generations", -1):
            self.spends[name] = sent.spend  # a snapshot: the latest, largest one is the run's
        if report.when == "teardown":
            row = self.rows.get(sent.row.key)
            if row is not None and report.failed:
                row.verdict, row.line = Verdict.ERROR, row.line or sent.row.line
            return
        self.rows[sent.row.key] = sent.row

    def run(self) -> Run:
        """The finished run (built once, after the last test)."""
        if self._run is None:
            from pytest_frank import __version__

            shard = self._shard()
            run = Run(fleet=fleet_label(self.fleet_path), sha256=fleet_digest(self.fleet_path),
                      version=__version__, endpoints=self._endpoints(shard),
                      rows=list(self.rows.values()), started=round(self.started, 3),
                      duration_s=round(time.time() - self.started, 3),
                      fleet_endpoints=list(self.fleet), shard=str(shard) if shard else None)
            run.notes = run_notes(self.config)
            run.error = self.config.stash.get(USAGE_ERROR, None)
            if self.baseline is not None:
                from pytest_frank.reports.baseline import Tolerances, compare, compared

                tolerances = {name: Tolerances.from_fleet(ep.regression)
                              for name, ep in self.fleet.items()}
                run.regressions = compare(self.baseline, run, tolerances, run.noise)
                run.baseline = {"file": self.config.getoption("frank_baseline"),
                                "started": self.baseline.started,
                                **compared(self.baseline, run),
                                "regressions": len(run.regressions), "noise": len(run.noise)}
            self._run = run
        return self._run

    def _shard(self) -> Shard | None:
        spec = self.config.getoption("frank_shard")
        return Shard.parse(spec) if spec else None  # the glue refused a bad one at configure

    def _endpoints(self, shard: Shard | None) -> dict[str, EndpointInfo]:
        found = {}
        for name, ep in self.fleet.items():
            if shard is not None and not shard.holds(name):
                continue  # another shard's: its record reports it
            seen = self.identities.get(name, {})
            found[name] = EndpointInfo.seen({
                FLEET: {"name": name, "engine": ep.engine, "description": ep.description},
                IDENTITY: {**seen, "url": redact.scrub(seen.get("url") or ep.url or "(launched)")},
                SPEND: self.spends.get(name, {}), ROWS: {"launch_log": self._launch_log(name)}})
        return found

    def _launch_log(self, name: str) -> str | None:
        return next((a["data"] for row in self.rows.values() if row.endpoint == name
                     for a in row.attachments if a["name"] == LAUNCH_LOG), None)

    # -- writing -----------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)  # before junitxml writes: the run's lines are its properties
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput") or self.config.option.collectonly:
            return  # the controller writes, once
        if USAGE_ERROR in self.config.stash:
            return  # written at unconfigure, as for an error before the run began
        from pytest_frank.reports.writers import WRITERS

        run = self.run()
        _junit_properties(self.config, run)
        for option in ("frank_json", "frank_report"):  # the textfile goes with the push
            path = self.config.getoption(option)
            if path:
                self._saved(session, option, partial(WRITERS[option], run, Path(path),
                                                     self.charts()))
        folder = self.config.getoption("frank_history")
        if folder:
            from pytest_frank.reports import history

            keep = self.config.getoption("frank_history_keep") or history.KEEP
            self._saved(session, "frank_history", partial(history.save, Path(folder), run, keep))
        self._metrics(session, run)
        if run.regressions and self.config.getoption("frank_fail_on_regression") \
                and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _saved(self, session: pytest.Session, option: str, write) -> None:
        """Write one report; a disk that refuses it is a red line and a non-zero exit, not a trace."""
        try:
            write()
        except OSError as exc:
            path = redact.inert(self.config.getoption(option))
            self._say(f"pytest-frank: --{option.replace('_', '-')} {path}: not written "
                      f"({redact.inert(exc.strerror or str(exc))})", red=True)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _say(self, line: str, **markup: bool) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(line, **markup)

    def _metrics(self, session: pytest.Session, run: Run) -> None:
        textfile, gateway = (self.config.getoption("frank_prometheus"),
                             self.config.getoption("frank_pushgateway"))
        if not (textfile or gateway):
            return
        from pytest_frank.reports import prometheus

        if textfile:
            from pytest_frank.reports.writers import WRITERS

            self._saved(session, "frank_prometheus",
                        partial(WRITERS["frank_prometheus"], run, Path(textfile), []))
        if gateway:
            redact.register_url(gateway)  # a password in it is never shown
            try:
                prometheus.push(run, gateway)
            except (OSError, ValueError) as exc:  # a gateway down must not turn a gate red
                said = redact.inert(f"{type(exc).__name__}: {exc}")
                self._say(f"pytest-frank: --frank-pushgateway {redact.scrub(gateway)}: the push "
                          f"failed ({said}); the verdicts stand, the metrics were not pushed",
                          yellow=True)

    def charts(self) -> list[Chart]:
        """This run's figures, and their trends over the kept history and this run (drawn once,
        for the page and the Markdown)."""
        if self._charts is None:
            from pytest_frank.reports import glance

            run = self.run()
            self._charts = glance.figure_charts(run) + glance.trends([*self.history, run])
        return self._charts

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if USAGE_ERROR in self.config.stash:
            return  # pytest prints the error; the reports carry it
        run = self.run()
        # Passing checks' tables only, as documented: a failure's message holds its own, and an
        # unjudged check's (no GPU size) has "-" in every cell it would judge; the reports keep
        # every row's table.
        tables = [(r, a) for r in run.rows if r.verdict is Verdict.PASS for a in r.attachments
                  if a["mime"] == "text/markdown"]
        if tables:
            terminalreporter.write_sep("=", "frank tables")
            for row, a in tables:
                terminalreporter.write_line(f"{row.test}: {a['name']}")
                for line in redact.inert(a["data"], 20 * redact.MAX_MESSAGE).splitlines():
                    terminalreporter.write_line(line)
        lines = verdict_lines(run)
        if lines:
            terminalreporter.write_sep("=", "frank verdicts")
            for line in lines + cost_lines(run):
                terminalreporter.write_line(line)
        from pytest_frank.reports.glance import run_lines

        for line in run_lines(run):
            terminalreporter.write_line(redact.inert(f"frank: {line}", 20 * redact.MAX_MESSAGE))
        if run.regressions:
            terminalreporter.write_sep("=", "frank regressions since the baseline")
            for r in run.regressions:
                terminalreporter.write_line(redact.inert(f"{r['test']}: {r['what']}"))
        if run.noise:
            terminalreporter.write_sep("=", "frank noise since the baseline (not regressions)")
            for r in run.noise:
                terminalreporter.write_line(redact.inert(f"{r['test']}: {r['what']}"))

    # -- pytest-html (optional: `-p no:html` leaves these hooks without a caller) -------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report) -> None:
        report.title = f"pytest-frank: {self.fleet_path.name}"

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix, summary, postfix, session) -> None:
        from pytest_frank.reports.page import render

        prefix.append(render(self.run(), self.charts()))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report, cells) -> None:
        data = getattr(report, "frank", None)
        if data is not None:  # the test's name, not a path that depends on where pytest ran
            from html import escape

            cells[1] = f'<td class="col-testId">{escape(data["key"])}</td>'

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_html(self, report, data) -> None:
        if report.skipped and getattr(report, "frank", None) is not None:
            from html import escape

            data[:] = [escape(report.frank["line"])]  # one line, not a (path, line, reason)


def run_notes(config: pytest.Config) -> list[str]:
    """The lines the glue noted for the run's reports (results.note)."""
    kept: list[str] = config.stash.get(NOTES, [])
    return list(kept)


def _junit_properties(config: pytest.Config, run: Run) -> None:
    """The run's own lines as properties of --junitxml's test suite: a run that checked nothing
    (the offline gate on a fleet with no offline claim) says why there too."""
    from pytest_frank.reports.glance import run_lines

    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pytest's junitxml plugin is off (-p no:junitxml)
        return
    xml = config.stash.get(xml_key, None)
    if xml is not None:
        for line in run_lines(run):
            xml.add_global_property("frank", line)


def pytest_unconfigure(config: pytest.Config) -> None:
    """A usage error stopped the run (exit 4): the reports it asked for are written all the
    same, with the error in them, so a CI step that shows them shows why."""
    error = config.stash.get(USAGE_ERROR, None)
    fleet = config.getoption("endpoints", None) or config.getini("frank_endpoints")
    if error is None or not fleet or hasattr(config, "workerinput"):
        return
    from pytest_frank import __version__
    from pytest_frank.reports.writers import WRITERS, junit_error

    path = Path(fleet)
    readable = path.is_file()
    run = Run(fleet=fleet_label(path), sha256=fleet_digest(path) if readable else "",
              version=__version__, error=error, notes=run_notes(config))
    asked = {"frank_json": config.getoption("frank_json"),
             "frank_report": config.getoption("frank_report"),
             "html": config.getoption("htmlpath", None)}
    for option, where in asked.items():
        if where and not _unwritable(where):
            try:
                WRITERS[option](run, Path(where), [])
            except OSError:
                pass  # the usage error is the news: pytest prints it, exit 4
    junit = config.getoption("xmlpath", None)
    if junit and not _unwritable(junit):
        try:
            junit_error(run, Path(junit))
        except OSError:
            pass


def fleet_label(path: Path, here: Path | None = None) -> str:
    """The fleet file as every report and the Prometheus `fleet` label name it: one name however
    it was given (`fleet.yaml`, `./fleet.yaml`, its absolute path, an ini file's relative one),
    relative to the folder pytest runs in where it lies below it."""
    whole = Path(os.path.abspath(path))
    try:
        return whole.relative_to(Path(os.path.abspath(here or Path.cwd()))).as_posix()
    except ValueError:
        return str(whole)


def verdict_lines(run: Run) -> list[str]:
    """The closing table: one line per endpoint, one verdict per claim it was asked."""
    cells = {name: claims for name, claims in run.matrix().items() if claims}
    if not cells:
        return []
    width = max(len(n) for n in cells)
    return [f"{name:<{width}}  " + "  ".join(f"{c} {SHORT.get(v, v)}" for c, v in claims.items())
            for name, claims in cells.items()]


def cost_lines(run: Run) -> list[str]:
    """Under the verdicts: what the battery cost each endpoint that generated anything."""
    spent = {n: i for n, i in run.endpoints.items() if i.generations}
    if not spent:
        return []
    width = max(len(n) for n in spent)
    return [f"{name:<{width}}  cost: {i.cost()}" for name, i in spent.items()]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """The row as the page shows it, inline: no data: links, images in place. Outermost, so
    the row the glue put on the report is there."""
    report = yield
    if getattr(report, "frank", None) is not None and call.when != "teardown":
        _html_extras(item, report)
    return report


def _html_extras(item, report) -> None:
    # Only pytest-html reads extras, and only when it writes a report: without --html, building
    # them is work per test for nobody.
    config = item.config
    if not (config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None)):
        return
    import pytest_html

    from pytest_frank.reports.page import row_html

    row = Payload.of(report.frank).row
    report.extras = [*getattr(report, "extras", []), pytest_html.extras.html(row_html(row))]
