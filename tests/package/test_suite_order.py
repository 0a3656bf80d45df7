"""The order the suite runs its real-vLLM tests in (tests/support/vllm_server.py): grouped by the
configurations they declare, so that with MAX_LIVE servers up none starts twice, and the next
configuration in line planned to start early; and the tier guards of tests/conftest.py."""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import vllm_server
from checkout import ROOT
from vllm_scheduling import VllmFirst
from vllm_server import CONFIGS, MAX_LIVE, in_config_order, plan_early_starts

pytestmark = pytest.mark.emulated  # in-process runs of a planted module


@dataclass
class Item:
    name: str
    configs: tuple = ()
    fixturenames: list = field(default_factory=lambda: ["vllm"])
    module: str = "tests/vllm/test_vllm_real.py"

    @property
    def nodeid(self) -> str:
        return f"{self.module}::{self.name}"

    def get_closest_marker(self, name):
        return pytest.mark.vllm_config(*self.configs).mark if self.configs else None


def starts(items) -> int:
    """How many servers the pool starts for these tests in this order (least recently used
    stopped first)."""
    live, count = [], 0
    for item in items:
        for name in item.configs:
            if name in live:
                live.remove(name)
            else:
                live, count = live[-(MAX_LIVE - 1):], count + 1
            live.append(name)
    return count


# The suite's own shape, in file order: FULL in four files, the pairs in the middle.
SUITE = [Item("clients", ("FULL",)), Item("bare", ("BARE",)), Item("pair", ("FULL", "BARE")),
         Item("ngram", ("NGRAM",)), Item("twin", ("NGRAM", "CHATTY")), Item("draft", ("DRAFT",)),
         Item("long", ("LONG",)), Item("params", ("CHATTY",)), Item("agent", ("FULL",)),
         Item("agent400", ("BARE",)), Item("responses", ("FULL",)),
         Item("xml", ("QWEN3_XML",)), Item("xml_hermes", ("LONG",)),
         Item("harmony", ("HARMONY",)), Item("harmony_bare", ("HARMONY_BARE",)),
         Item("plain", fixturenames=["llama"])]


def test_each_configuration_starts_once_in_the_suites_order():
    ordered = in_config_order(SUITE)
    assert starts(SUITE) > len(CONFIGS)  # as the files ask: FULL and BARE twice
    assert starts(ordered) == len(CONFIGS)
    assert ordered[0].name == "plain"  # the rest first, vLLM last
    assert [i.name for i in ordered[1:4]] == ["clients", "agent", "responses"]


def test_the_next_configuration_starts_once_the_first_test_on_one_has_run():
    plan_early_starts(in_config_order(SUITE))
    then = {nodeid.split("::")[1]: name for nodeid, name in vllm_server._THEN.items()}
    assert then == {"clients": "BARE", "pair": "NGRAM", "ngram": "CHATTY", "twin": "DRAFT",
                    "draft": "LONG", "long": "QWEN3_XML", "xml": "HARMONY",
                    "harmony": "HARMONY_BARE"}


def test_a_test_on_vllm_without_its_configuration_stops_collection():
    with pytest.raises(pytest.UsageError, match="declare its configurations"):
        in_config_order([Item("undeclared")])
    with pytest.raises(pytest.UsageError, match="unknown: SHARP"):
        in_config_order([Item("misspelt", ("SHARP",))])
    with pytest.raises(pytest.UsageError, match='move it to a module whose file name holds "vllm"'):
        in_config_order([Item("elsewhere", ("FULL",), module="tests/engines/test_responses_real.py")])


class Node:
    """An xdist worker as its scheduler sees it: the test indexes it was sent."""

    def __init__(self, name: str) -> None:
        self.gateway, self.sent, self.shutting_down = SimpleNamespace(id=name), [], False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


def test_xdist_gives_every_vllm_test_to_one_worker_first_and_the_real_tier_next():
    ids = ["tests/test_a.py::t1", "tests/test_b_real.py::t2", "tests/test_c.py::t3",
           "tests/vllm/test_vllm_real.py::v1", "tests/vllm/test_vllm_real.py::v2",
           "tests/vllm/test_init_vllm_real.py::v3", "tests/test_d_real.py::t4",
           "tests/claims/clients/test_real_clients.py::c1",
           "tests/claims/clients/test_real_clients.py::c2"]
    config = SimpleNamespace(getvalue={"tx": ["2*popen"]}.get,
                             option=SimpleNamespace(loadscopereorder=True))
    scheduler, workers = VllmFirst(config), [Node("gw0"), Node("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, ids)
    scheduler.schedule()
    assert [ids[i] for i in workers[0].sent] == ids[3:6]  # all of vLLM, in the suite's order
    # the real tier first: the real clients' module as one unit (xdist sends the larger unit
    # first), then one test at a time
    assert [ids[i] for i in workers[1].sent] == [ids[7], ids[8], ids[1]]
    for index in list(workers[1].sent):
        scheduler.mark_test_complete(workers[1], index)
    assert [ids[i] for i in workers[1].sent[3:]] == [ids[6], ids[0], ids[2]]


def test_the_suite_declares_only_known_configurations(request):
    # the tests collected with this one (the whole suite, in a full run) in their run order
    served = [i for i in request.session.items if "vllm" in getattr(i, "fixturenames", ())]
    assert in_config_order(served) == served


CONFTEST = (ROOT / "tests" / "conftest.py").read_text()


@pytest.mark.parametrize("module, error", [
    ("def test_x():\n    pass\n", "names no tier"),
    ("import pytest\npytestmark = pytest.mark.emulated\ndef test_x(llama):\n    pass\n",
     "asks for a real server (llama) but is marked emulated"),
    ("import pytest\npytestmark = pytest.mark.unit\n@pytest.mark.real\ndef test_x():\n    pass\n",
     "marks a test real: the tier is the module's"),
], ids=["untiered", "real-fixture", "test-mark"])
def test_a_module_out_of_its_tier_stops_collection(pytester, module, error):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted_emulated=module)
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines([f"*test_planted_emulated.py::test_x: its module {error}*"])


def test_a_launch_outside_the_real_tier_fails_and_names_the_test(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted="import pytest\nfrom pytest_frank.local import launch\n"
                        "pytestmark = pytest.mark.emulated\ndef test_x():\n"
                        "    launch.launch({'model': 'selftest'})\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_planted.py::test_x launches a real llama.cpp server: "
                                 "mark its module pytest.mark.real*"])
