"""A battery test's id is `test_<module>.py::<test>[<endpoint>]` wherever pytest-frank is
installed, and that id pasted after `pytest --endpoints fleet.yaml` reruns exactly that test.
Here on this checkout's editable install, with an endpoint that refuses connections; from a
plain install in another folder, on a real llama.cpp, in tests/package/test_packaging.py."""

import re
from types import SimpleNamespace

import pytest

from pytest_frank.plugin import _battery_test, battery_dir

pytestmark = pytest.mark.unit

GONE = {"endpoints": {"gone": {"url": "http://127.0.0.1:9", "engine": "llamacpp", "alias": "m"},
                      "also": {"url": "http://127.0.0.1:9", "engine": "llamacpp", "alias": "m"}}}


def test_a_failed_lines_id_pasted_back_reruns_that_test(run_fleet):
    first = run_fleet(GONE)
    failed = re.findall(r"^FAILED (\S+)", first.stdout.str(), re.M)
    assert failed == ["test_health.py::test_health[also]", "test_health.py::test_health[gone]"]
    again = run_fleet(GONE, failed[1])
    again.assert_outcomes(failed=1)
    assert re.findall(r"^(?:PASSED|FAILED|SKIPPED|ERROR) (\S+)", again.stdout.str(), re.M) == \
        [failed[1]]


def test_a_pasted_id_maps_to_the_battery_unless_the_folder_has_that_file(tmp_path):
    config = SimpleNamespace(invocation_params=SimpleNamespace(dir=tmp_path))
    battery = battery_dir()
    perf = battery / "test_perf.py"
    assert _battery_test(config, "test_perf.py::test_decode[ep]", battery) == \
        f"{perf}::test_decode[ep]"
    assert _battery_test(config, "../test_perf.py::test_decode[ep]", battery) == \
        f"{perf}::test_decode[ep]"  # printed so from a folder below the rootdir
    assert _battery_test(config, "test_perf.py", battery) == str(perf)
    for kept in ("test_nothing.py::test_x", "tests/", "tests"):
        assert _battery_test(config, kept, battery) == kept
    (tmp_path / "test_perf.py").write_text("")  # the user's own file of that name is theirs
    assert _battery_test(config, "test_perf.py::test_decode[ep]", battery) == \
        "test_perf.py::test_decode[ep]"
