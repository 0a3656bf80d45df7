"""A claim of the user's own, exactly as docs/own-checks.md's "## Claims of your own" writes it:
a conftest.py registers `lora`, a test module checks it, fleet.yaml asks it. Run against the
loopback emulator imitating llama.cpp, whose `/lora-adapters` lists the adapters it loaded."""

import json
import re

import pytest

from emulator import Emulator, Reply
from checkout import ROOT

pytestmark = pytest.mark.emulated

PAGE = (ROOT / "docs" / "own-checks.md").read_text()
ADAPTER = "support-v2.gguf"


def docs_example() -> dict[str, str]:
    """The section's python blocks, by the file name on their first line (`# conftest.py`)."""
    section = PAGE.split("\n## Claims of your own", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n# (\S+\.py)\n(.*?)\n```", section, re.S)
    return {name: code + "\n" for name, code in blocks}


def llamacpp(adapters: list[str]) -> Emulator:
    em = Emulator("llamacpp", models=["m"])
    em.route("GET", "/lora-adapters", lambda r: Reply(200, [
        {"id": i, "path": f"/models/{path}", "scale": 1.0} for i, path in enumerate(adapters)]))
    return em


@pytest.fixture
def example(pytester):
    for name, code in docs_example().items():
        (pytester.path / name).write_text(code)
    return pytester.path


@pytest.fixture
def fleet(example):
    """`good` loaded the adapter, `bad` did not, `plain` does not ask the claim. The emulated
    servers generate nothing: the built-in chat check is turned off."""
    with llamacpp([ADAPTER]) as good, llamacpp([]) as bad:
        lora = {"lora": {"adapter": ADAPTER}, "chat": False}
        yield {"endpoints": {
            "good": {"url": good.url, "engine": "llamacpp", "expect": lora},
            "bad": {"url": bad.url, "engine": "llamacpp", "expect": lora},
            "plain": {"url": good.url, "engine": "llamacpp", "expect": {"chat": False}}}}


def test_the_docs_example_is_a_conftest_and_a_test_module():
    assert set(docs_example()) == {"conftest.py", "lora.py", "test_lora.py"}
    assert "lora: {adapter:" in PAGE.split("\n## Claims of your own", 1)[1]


def test_the_claim_passes_where_loaded_and_fails_with_the_fix_where_not(fleet, example,
                                                                       run_fleet):
    result = run_fleet(fleet, "test_lora.py", "--html=page.html", "--self-contained-html",
                       "--frank-report=report.md", "--frank-json=run.json")
    result.assert_outcomes(passed=4, failed=1)  # health of all three, lora of good and bad
    result.stdout.fnmatch_lines([
        "*_ test_lora_loaded?bad? _*",
        f"adapter {ADAPTER} is not loaded (loaded: none)",
        f"  fix: start llama-server with --lora {ADAPTER}",
    ])
    result.stdout.fnmatch_lines(["*frank verdicts*", "bad *health ok  lora FAIL",
                                 "good *health ok  lora ok", "plain *health ok"])
    markdown = (example / "report.md").read_text()
    assert re.search(r"^\|.*\| health \| lora \|", markdown, re.M), markdown
    assert "<th>health</th><th>lora</th>" in (example / "page.html").read_text()
    run = json.loads((example / "run.json").read_text())
    rows = {(row["endpoint"], row["claim"]): row for row in run["rows"]}
    assert rows["good", "lora"]["verdict"] == "pass"
    assert rows["good", "lora"]["figures"] == {"lora_adapters": {"value": 1, "unit": ""}}
    assert rows["bad", "lora"]["verdict"] == "FAIL"
    assert ("plain", "lora") not in rows


def test_the_probe_runs_in_the_probe_phase(fleet, run_fleet, example):
    """The check is found in the user's module, so its probe is planned with the battery's."""
    (example / "conftest.py").write_text((example / "conftest.py").read_text() + '''

import pytest


@pytest.hookimpl(trylast=True)  # after the plugin's, which plans the probes
def pytest_collection_finish(session):
    from pytest_frank.plugin import SESSION

    plan = session.config.stash[SESSION].plan
    print("planned:", sorted(name for name, work in plan.items()
                             if any(probe.__name__ == "adapters" for probe, _ in work)))
''')
    result = run_fleet(fleet, "test_lora.py", "-s")
    result.stdout.fnmatch_lines(["planned: ?'bad', 'good'?"])


def test_collect_only_lists_it_for_the_endpoints_that_ask_it(fleet, run_fleet):
    result = run_fleet(fleet, "test_lora.py", "--collect-only", "-q")
    out = result.stdout.str()
    assert "test_lora.py::test_lora_loaded[good]" in out
    assert "test_lora.py::test_lora_loaded[bad]" in out
    assert "test_lora_loaded[plain]" not in out


def test_an_unknown_key_of_the_claim_is_a_fleet_error(fleet, run_fleet):
    fleet["endpoints"]["good"]["expect"]["lora"] = {"adaptor": ADAPTER}
    result = run_fleet(fleet, "test_lora.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*endpoints.good.expect.lora*adaptor*"])


def test_a_claim_named_like_a_built_in_is_a_usage_error(fleet, run_fleet, example):
    conftest = example / "conftest.py"
    conftest.write_text(conftest.read_text().replace('register("lora"', 'register("tools"'))
    result = run_fleet(fleet, "test_lora.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*claim 'tools' is a built-in claim*"])
