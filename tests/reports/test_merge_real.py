"""A fleet split over three runners (`--frank-shard I/N`) and put back together (`frank merge`)
reads as one run of the whole fleet: on a real llama.cpp server, two endpoints that pass and
one that is down."""

import re

import pytest

from pytest_frank.reports import merge

pytestmark = pytest.mark.real

ROW = re.compile(r'<div class="row (v-[\w-]+)" id="([^"]+)"><b>([^<]+)</b> <code>([^<]+)</code>'
                 r"(?:<pre>([^<]*)</pre>)?")


def fleet(server) -> dict:
    # beta, good and gone fall in shards 1, 2 and 3 of 3 (tests/reports/test_merge.py pins that)
    ep = {"url": server.url, "engine": "llamacpp", "alias": "qwen-large"}
    return {"endpoints": {"good": ep, "beta": ep,
                          "gone": {"url": "http://127.0.0.1:9", "engine": "llamacpp",
                                   "alias": "m"}}}


def section(page: str) -> str:
    """The run's own block of a page: pytest-html's or the merge's."""
    return page.split('<section class="frank" id="frank">', 1)[1].split("</section>", 1)[0]


def rows(page: str) -> list[tuple[str, ...]]:
    return [m.groups() for m in ROW.finditer(section(page))]


def test_three_shards_merge_into_the_page_of_one_unsharded_run(run_fleet, pytester, llama,
                                                                  capsys):
    server = llama(alias=["frank-default-large", "qwen-large"])
    whole = run_fleet(fleet(server), "--html=whole.html", "--self-contained-html")
    whole.assert_outcomes(passed=8, failed=1, skipped=3)
    records = []
    for i in (1, 2, 3):
        shard = run_fleet(fleet(server), f"--frank-shard={i}/3", f"--frank-json=shard{i}.json")
        mine = ["beta", "good", "gone"][i - 1]
        shard.stdout.fnmatch_lines([f"frank: shard {i}/3: {mine}; the other shards' 2 "
                                    "endpoint(s) deselected", "*8 deselected*"])
        records.append(str(pytester.path / f"shard{i}.json"))
    capsys.readouterr()
    code = merge.main([*records, "--html", str(pytester.path / "merged.html"),
                       "--frank-report", str(pytester.path / "merged.md")])
    assert code == 1  # gone's health failed, as in the whole run
    assert "3 records, 12 tests, 1 failed, 3 endpoints" in capsys.readouterr().out

    page, merged = (pytester.path / "whole.html").read_text(), \
        (pytester.path / "merged.html").read_text()
    expected = rows(page)
    assert len(expected) == 12 and rows(merged) == expected  # row for row, in the same order
    assert ("v-FAIL", "frank-test-health--test-health-gone-", "FAIL", "test_health[gone]",
            "http://127.0.0.1:9/health: connection refused (nothing listens on that port: is "
            "the server running?)") in expected
    matrix = re.compile(r'<table class="matrix">.*?</table>', re.S)
    assert matrix.search(section(merged)).group() == matrix.search(section(page)).group()
    assert "| gone | FAIL | blocked | blocked |" in (pytester.path / "merged.md").read_text()


def test_a_shard_and_k_select_together(run_fleet, llama):
    server = llama(alias=["frank-default-large", "qwen-large"])
    result = run_fleet(fleet(server), "--frank-shard=2/3", "-k", "alias or health")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["PASSED test_health.py::test_health[good]",
                                 "PASSED test_alias.py::test_alias[good]",
                                 "*2 passed, 10 deselected*"])
