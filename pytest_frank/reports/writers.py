"""The files a run's end and `frank merge` write from a record, one writer each by the option
that asks for it: the JSON record, the Markdown with its charts and the probes' images beside
it, the Prometheus textfile and the page as a file of its own. Both hand the same record and
charts (glance) to the same writer, so a merged report reads like a run's."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from typing import Callable

from pytest_frank.record.results import Run
from pytest_frank.reports import glance, markdown, page, prometheus
from pytest_frank.reports.glance import Chart

Writer = Callable[[Run, Path, list[Chart]], None]


def text(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


def record(run: Run, path: Path, charts: list[Chart]) -> None:
    """`--frank-json`: the record, a later run's `--frank-baseline`."""
    text(path, run.to_json())


def report(run: Run, path: Path, charts: list[Chart]) -> None:
    """`--frank-report`: the Markdown, its charts as .svg files beside it (wikis show those as
    images), and the probes' images beside it too, each named after the page."""
    for chart in charts:
        text(path.with_name(f"{path.stem}-{chart.name}.svg"), chart.svg)
    path.parent.mkdir(parents=True, exist_ok=True)
    for picture in glance.pictures(run):
        path.with_name(f"{path.stem}-{picture.file}").write_bytes(base64.b64decode(picture.data))
    text(path, markdown.render(run, [(c.title, f"{path.stem}-{c.name}.svg") for c in charts],
                               f"{path.stem}-"))


def metrics(run: Run, path: Path, charts: list[Chart]) -> None:
    """`--frank-prometheus`: the textfile, replaced whole."""
    prometheus.write(run, path)


def document(run: Run, charts: list[Chart]) -> str:
    """The page as a file of its own: the run's static block, no script, no external asset."""
    title = escape(f"pytest-frank: {Path(run.fleet.split(', ')[0]).name}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"</head><body>\n{page.render(run, charts)}\n</body></html>\n")


def html(run: Run, path: Path, charts: list[Chart]) -> None:
    """`frank merge --html`: the page (a run's is pytest-html's, with the same block on top)."""
    text(path, document(run, charts))


def junit_error(run: Run, path: Path) -> None:
    """`--junitxml` for a run a usage error stopped before pytest's own writer began: one
    errored test case that holds the error, so a CI's test report shows why nothing ran."""
    from xml.etree import ElementTree

    suites = ElementTree.Element("testsuites", name="pytest tests")
    suite = ElementTree.SubElement(suites, "testsuite", name="pytest", errors="1", failures="0",
                                   skipped="0", tests="1", time="0")
    properties = ElementTree.SubElement(suite, "properties")
    for line in glance.run_lines(run):
        ElementTree.SubElement(properties, "property", name="frank", value=line)
    case = ElementTree.SubElement(suite, "testcase", classname="pytest_frank", name="usage_error",
                                  time="0")
    error = ElementTree.SubElement(case, "error", message=(run.error or "").splitlines()[0]
                                   if run.error else "usage error")
    error.text = run.error
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


# option -> its writer, in the order they are written
WRITERS: dict[str, Writer] = {"frank_json": record, "frank_report": report,
                              "frank_prometheus": metrics, "html": html}
