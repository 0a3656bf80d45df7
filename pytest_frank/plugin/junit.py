"""JUnit XML classnames for the battery that do not depend on where pytest ran.

pytest derives a testcase's classname from its node id, a path relative to the rootdir or to the
collected folder: the installed battery reads `batteries.test_health` from one folder and
`.venv.lib.python3.11.site-packages.pytest_frank.batteries.test_health` from a project whose
rootdir holds the virtual environment, so a CI dashboard that tracks tests by classname would see
new tests. Battery tests are named for their module in the package instead; node ids, test names
and everything else pytest reports stay as they are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = "pytest_frank.batteries"


class StableClassnames:
    """The classname is worked out where the item is known (an xdist worker, or this process)
    and carried on the report; junitxml's reporter gets it before it writes the testcase, and
    keeps it, as it keeps `record_xml_attribute` values."""

    def __init__(self, config: pytest.Config, battery: Path):
        self.config, self.battery = config, battery.resolve()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        report = yield
        classname = self.classname(item)
        if classname:
            report.frank_classname = classname
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        classname = getattr(report, "frank_classname", None)
        if xml is not None and classname:
            named = f"{xml.prefix}.{classname}" if xml.prefix else classname
            xml.node_reporter(report).add_attribute("classname", named)

    def classname(self, item: pytest.Item) -> str | None:
        """`pytest_frank.batteries.<module>[.<class>...]` for a battery test, else None."""
        if Path(item.path).resolve().parent != self.battery:
            return None
        classes = [node.name for node in item.listchain() if isinstance(node, pytest.Class)]
        return ".".join([f"{PACKAGE}.{Path(item.path).stem}", *classes])
