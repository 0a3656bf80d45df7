"""The reports (emulated endpoints: the failures here are faults no real engine here shows on
demand): the pytest-html page's static block, `--frank-report` Markdown, `--frank-json`, and
`--frank-baseline` regressions. The real-engine page in a browser is tests/reports/test_browser.py."""

import json
import re

import pytest

from emulator import Emulator, Reply, chat_chunks, chat_json, serve_chat, sse
from healthy_engines import KEY, healthy_chat

from pytest_frank.base.figures import number

pytestmark = pytest.mark.emulated

INJECTED = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def two_endpoints(good: Emulator, bad: Emulator) -> dict:
    expect = {"reasoning": True}
    return {"endpoints": {
        "good": {"url": good.url, "engine": "vllm", "alias": "model", "api_key": KEY,
                 "description": "the wiki's own model", "expect": expect},
        "bad": {"url": bad.url, "engine": "vllm", "alias": "model", "api_key": KEY,
                "expect": expect}}}


def no_reasoning(body):
    """A server without its reasoning parser: the thinking arrives inside the content, and
    the content is hostile markup."""
    return chat_json(f"<think>Thinking</think>{INJECTED}")


def _reports(run_fleet, pytester, fleet, *args):
    result = run_fleet(fleet, "--html=report.html", "--self-contained-html",
                       "--frank-report=wiki/report.md", "--frank-json=run.json", *args)
    files = {name: (pytester.path / name).read_text()
             for name in ("report.html", "wiki/report.md", "run.json")}
    for text in files.values():
        assert KEY not in text  # the key never reaches a report, whole or in part
        assert KEY[:12] not in text
    return result, files


def test_one_run_writes_the_matrix_figures_and_the_failure_everywhere(run_fleet, pytester):
    with Emulator("vllm", models=["model"], api_key=KEY) as good, \
            Emulator("vllm", models=["model"], api_key=KEY) as bad:
        serve_chat(good, healthy_chat("reasoning"))
        good.route("GET", "/version", lambda r: Reply(200, {"version": "0.32.0"}))  # vLLM's
        serve_chat(bad, no_reasoning)
        result, files = _reports(run_fleet, pytester, two_endpoints(good, bad))
    # health, alias, chat and the contract's two of both; good's reasoning
    result.assert_outcomes(passed=13, failed=3)
    md, page, data = files["wiki/report.md"], files["report.html"], json.loads(files["run.json"])

    # Markdown: the matrix as a table, the failure with its fix and curl in a code block
    assert "| good | pass | pass | pass | pass |" in md
    assert "| bad | pass | pass | pass | FAIL |" in md
    # what the battery cost each endpoint: in the terminal, the JSON, the Markdown and the page,
    # with the plan's minimum and the wall time from its first generation to its last answer
    spent = data["endpoints"]["good"]
    assert spent["generations"] >= 3 and spent["tokens"] >= spent["generations"], spent
    assert 0 < spent["min_tokens"] <= spent["tokens"] and spent["time_to_verdict_s"] > 0, spent
    cost = (f"{spent['generations']} generations, {spent['tokens']} tokens "
            f"({spent['tokens'] / spent['min_tokens']:.2f}x the plan's minimum of "
            f"{spent['min_tokens']}), {number(spent['time_to_verdict_s'], 3)} s to verdict")
    result.stdout.fnmatch_lines([f"good  cost: {cost}"])
    assert f"<td>{cost.replace(chr(39), '&#x27;')}</td>" in page
    assert re.search(r"\| good \| vllm \| 0\.32\.0 \| model \| http://127\.0\.0\.1:\d+ \| "
                     + re.escape(cost) + r" \| the wiki's own model \|", md)
    assert "fix: start vLLM with --reasoning-parser &lt;the model" in md
    assert re.search(r"  ```sh\n  curl -sS -X POST http://127.0.0.1:\d+/v1/chat/completions .*"
                     r"Bearer \$API_KEY", md)

    # the page: titled for the fleet, the static block with hash, matrix, fix; markup inert
    assert "<title id=\"head-title\">pytest-frank: fleet.yaml</title>" in page
    assert data["sha256"] in page and 'class="matrix"' in page
    cell = '<td class="v-FAIL"><a href="#frank-test-reasoning--test-reasoning-bad-">FAIL</a></td>'
    assert cell in page
    assert "fix: start vLLM with --reasoning-parser &amp;lt;the model" in page or \
        "fix: start vLLM with --reasoning-parser &lt;the model" in page
    assert "<script>document.title" not in page and "<img src=x" not in page

    # JSON: verdicts, figures and exchanges per row, in fleet order
    assert data["format"] == "pytest-frank/1" and list(data["endpoints"]) == ["bad", "good"]
    failing = [r for r in data["rows"] if r["verdict"] == "FAIL"]
    assert {r["key"] for r in failing} == {"test_reasoning::test_reasoning[bad]",
                                           "test_reasoning::test_reasoning_streamed[bad]",
                                           "test_reasoning::test_reasoning_off[bad]"}
    assert all(r["fix"] and r["curl"] and r["exchanges"] for r in failing)
    assert failing[0]["exchanges"][-1]["sent"]["model"] == "model"


def test_markdown_is_written_when_checks_fail_and_escapes_what_the_model_said(run_fleet,
                                                                             pytester):
    with Emulator("vllm", models=["model"], api_key=KEY) as good, \
            Emulator("vllm", models=["model"], api_key=KEY) as bad:
        serve_chat(good, healthy_chat("reasoning"))
        serve_chat(bad, no_reasoning)
        result, files = _reports(run_fleet, pytester, two_endpoints(good, bad))
    assert result.ret == 1
    md = files["wiki/report.md"]
    for line in md.splitlines():
        if not line.startswith("  "):  # outside the indented code blocks
            assert "<script" not in line and "<img" not in line, line


def test_a_blocked_endpoint_reads_as_blocked_in_one_line(run_fleet, pytester):
    with Emulator("vllm", models=["model"]) as dead:
        dead.loading()
        result = run_fleet({"endpoints": {"down": {
            "url": dead.url, "engine": "vllm", "alias": "model", "ready_timeout": 0.5,
            "expect": {"reasoning": True}}}}, "--html=report.html", "--frank-report=r.md")
    result.assert_outcomes(failed=1, skipped=7)
    md = (pytester.path / "r.md").read_text()
    assert "| down | FAIL | blocked | blocked | blocked |" in md
    assert "- **blocked** `test_alias[down]`; down is not healthy, see test\\_health\\[down\\]" in md
    page = (pytester.path / "report.html").read_text()
    assert "site-packages" not in re.sub(r"(?s)<table id=\"environment\">.*?</table>", "", page) \
        .split('id="frank"')[1].split("</section>")[0]


# ----------------------------------------------------------------------- baselines

def paced(em: Emulator, gap: float) -> None:
    """A stream whose first text comes after `gap` seconds: time to first token is `gap`."""
    def chat(req):
        chunks = chat_chunks([f"w{i} " for i in range(8)])
        return sse([chunks[0], gap, *chunks[1:]], gap=0.002)
    em.route("POST", "/v1/chat/completions", chat)


def test_a_second_run_reports_what_regressed_against_the_first(run_fleet, pytester):
    perf = {"perf": {"runs": 1, "max_ttft_s": 5}}
    with Emulator("vllm", models=["model"]) as em:
        fleet = {"endpoints": {"ep": {"url": em.url, "engine": "vllm", "alias": "model",
                                      "expect": perf}}}
        paced(em, 0.05)
        first = run_fleet(fleet, "--frank-json=first.json", "-m", "alias or perf")
        first.assert_outcomes(passed=3, skipped=1)  # the prefix cache is not asked
        em.models = ["other"]  # the alias check now fails
        paced(em, 0.4)  # and the first token comes 8x later
        second = run_fleet(fleet, "--frank-baseline=first.json", "--frank-report=r.md",
                           "--html=report.html", "-m", "alias or perf")
        gated = run_fleet(fleet, "--frank-baseline=first.json", "--frank-fail-on-regression",
                          "-m", "perf")
    second.stdout.fnmatch_lines([
        "*frank regressions since the baseline*",
        "test_alias[[]ep[]]: passed before, FAIL now: *",
        "test_perf_ttft[[]ep[]]: time to first token 0.0* -> 0.4* s (up *%, tolerance 25%)"])
    second.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_perf_prefix_cache[[]ep[]]: no expect.perf*"])
    assert second.ret == 1  # the alias failure itself; the regressions only report
    # at least the alias and the time to first token; a busy machine may slow decode past its
    # tolerance as well, so the count is read, not fixed
    line = next(x for x in second.stdout.lines if x.startswith("frank: baseline first.json"))
    assert re.fullmatch(r"frank: baseline first\.json \(the run of .+\): \d+ test\(s\) and \d+ "
                        r"figure\(s\) compared, [2-9] regression\(s\)", line), line
    assert "## Regressions since the baseline" in (pytester.path / "r.md").read_text()
    assert "Regressions since the baseline" in (pytester.path / "report.html").read_text()
    gated.assert_outcomes(passed=2, skipped=1)
    assert gated.ret == 1  # every check passed, but TTFT regressed and the flag was given


def test_figures_within_tolerance_are_no_regression(run_fleet, pytester):
    perf = {"perf": {"runs": 1, "max_ttft_s": 5}}
    with Emulator("vllm", models=["model"]) as em:
        # The decode speed of 2 ms gaps is the machine's load, not the endpoint's: a busy
        # machine moved it 22% between runs, so its tolerance is left wide here.
        fleet = {"defaults": {"regression": {"ttft_rise": 20.0, "tok_s_drop": 0.9}},
                 "endpoints": {"ep": {"url": em.url, "engine": "vllm", "expect": perf}}}
        paced(em, 0.05)
        run_fleet(fleet, "--frank-json=first.json", "-m", "perf")
        paced(em, 0.4)
        again = run_fleet(fleet, "--frank-baseline=first.json", "--frank-fail-on-regression",
                          "-m", "perf", "--frank-report=r.md", "--frank-json=again.json",
                          "--junitxml=junit.xml", "--html=report.html")
    assert again.ret == 0
    assert "regressions" not in again.stdout.str()
    # the comparison is said all the same, 0 included: the baseline was read
    said = "baseline first.json (the run of *): 3 test(s) and 2 figure(s) compared, 0 regression(s)"
    again.stdout.fnmatch_lines([f"frank: {said}"])
    compared = json.loads((pytester.path / "again.json").read_text())["baseline"]
    assert compared["file"] == "first.json" and compared["regressions"] == 0
    assert compared["tests"] == 3 and compared["figures"] == 2, compared
    line = next(line for line in again.stdout.lines if line.startswith("frank: baseline"))[7:]
    assert line in (pytester.path / "r.md").read_text()
    assert line in (pytester.path / "report.html").read_text()
    assert line in (pytester.path / "junit.xml").read_text()


def test_the_history_keeps_the_last_runs_and_draws_each_figures_trend(run_fleet, pytester):
    """Three runs into one --frank-history folder that keeps two: the oldest is pruned, and the
    third run's Markdown shows the TTFT trend over the two kept runs as an .svg beside it."""
    perf = {"perf": {"runs": 1, "max_ttft_s": 5}}
    with Emulator("vllm", models=["model"]) as em:
        fleet = {"endpoints": {"ep": {"url": em.url, "engine": "vllm", "expect": perf}}}
        for gap in (0.01, 0.05, 0.1):
            paced(em, gap)
            run_fleet(fleet, "-m", "perf", "--frank-history=hist", "--frank-history-keep=2",
                      "--frank-report=wiki/r.md", "--frank-json=run.json").assert_outcomes(
                passed=2, skipped=1)
    kept = sorted((pytester.path / "hist").glob("frank-run-*.json"))
    assert len(kept) == 2 and json.loads(kept[-1].read_text())["rows"] == \
        json.loads((pytester.path / "run.json").read_text())["rows"]
    ttfts = [next(r["figures"]["ttft_s"]["value"] for r in json.loads(k.read_text())["rows"]
                  if "ttft_s" in r["figures"]) for k in kept]
    assert ttfts[0] >= 0.05 and ttfts[1] >= 0.1  # the first run (0.01 s) was pruned
    md = (pytester.path / "wiki/r.md").read_text()
    assert "(r-trend-ttft_s.svg)" in md and "(r-ttft_s.svg)" in md
    trend = (pytester.path / "wiki/r-trend-ttft_s.svg").read_text()
    assert re.findall(r'<circle class="point" data-label="ep" data-run="[^"]+" data-value="([^"]+)"',
                      trend) == [repr(v) for v in ttfts]
    bar = (pytester.path / "wiki/r-ttft_s.svg").read_text()
    assert f'data-value="{ttfts[1]!r}" data-high="5.0"' in bar


@pytest.mark.parametrize("args,reason", [
    (["--frank-history-keep=0", "--frank-history=h"], "--frank-history-keep 0: keep at least 1"),
    (["--frank-history-keep=3"], "--frank-history-keep needs --frank-history DIR"),
    (["--frank-history=blocker"], "--frank-history blocker: blocker is a file, not a folder"),
])
def test_a_bad_history_option_is_a_usage_error(run_fleet, pytester, args, reason):
    (pytester.path / "blocker").write_text("in the way")
    result = run_fleet({"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "vllm"}}},
                       *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{reason}*"])


@pytest.mark.parametrize("content,reason", [
    (None, "no such file"),
    ("{not json", "not a pytest-frank JSON file"),
    ('{"rows": []}', 'no "format"'),
    ('{"format": "pytest-frank/1", "rows": [{"key": "a::b", "endpoint": "e", "claim": "c", '
     '"verdict": "great"}]}', "unknown verdict 'great'"),
])
def test_a_bad_baseline_is_a_usage_error_naming_the_file(run_fleet, pytester, content, reason):
    if content is not None:
        (pytester.path / "prev.json").write_text(content)
    result = run_fleet({"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "vllm"}}},
                       "--frank-baseline=prev.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*prev.json: *{reason}*"])
    assert "Traceback" not in result.stderr.str()


def test_fail_on_regression_needs_a_baseline(run_fleet):
    result = run_fleet({"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "vllm"}}},
                       "--frank-fail-on-regression")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--frank-fail-on-regression needs --frank-baseline*"])


OWN_CHECK = """
import pytest

@pytest.mark.perf
def test_models_answer_fast(endpoint):
    ex = endpoint.get("/v1/models")
    endpoint.figure("models_s", ex.elapsed, "s")
    assert ex.status == 200
"""


def test_a_check_of_ones_own_shows_its_figures_in_every_report(run_fleet, pytester):
    pytester.makepyfile(test_own=OWN_CHECK)
    with Emulator("vllm", models=["m"]) as em:
        run_fleet({"endpoints": {"ep": {"url": em.url, "engine": "vllm",
                                        "expect": {"perf": {"runs": 1}}}}},
                  "test_own.py", "-m", "perf", "-k", "own", "--frank-report=r.md",
                  "--frank-json=r.json", "--html=r.html").assert_outcomes(passed=1)
    row = next(r for r in json.loads((pytester.path / "r.json").read_text())["rows"]
               if r["key"] == "test_own::test_models_answer_fast[ep]")
    assert row["figures"]["models_s"]["unit"] == "s" and row["verdict"] == "pass"
    assert re.search(r"`test_models_answer_fast\[ep\]` \(models\\_s 0\.\d+ s\)",
                     (pytester.path / "r.md").read_text())
    assert re.search(r'<p class="figures">figures: models_s 0\.\d+ s</p>',
                     (pytester.path / "r.html").read_text())


def test_a_probe_image_is_inline_and_a_bad_one_is_not_markup():
    from pytest_frank.reports.page import row_html
    from pytest_frank.record.results import Row

    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
           "RU5ErkJggg==")
    row = Row(key="test_vision::test_vision[ep-data_url]", endpoint="ep", claim="vision",
              verdict="pass", attachments=[
                  {"name": "data_url-red.png", "mime": "image/png", "data": png},
                  {"name": "evil.png", "mime": "image/png", "data": '" onerror="alert(1)'}])
    html = row_html(row)
    assert f'<img alt="data_url-red.png" src="data:image/png;base64,{png}">' in html
    assert "onerror" not in html and "evil.png: not base64, not shown" in html


@pytest.mark.parametrize("option,value,reason", [
    ("--frank-json", "blocker/run.json", "blocker is a file, not a folder"),
    ("--frank-prometheus", "blocker/deeper/frank.prom", "blocker is a file, not a folder"),
    ("--frank-report", ".", "that is a folder; give a file name"),
])
def test_a_report_path_that_cannot_be_written_is_a_usage_error_before_any_probe(
        run_fleet, pytester, option, value, reason):
    (pytester.path / "blocker").write_text("in the way")
    result = run_fleet({"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "vllm"}}},
                       f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option} {value}: {reason}*"])
    assert "Traceback" not in result.stderr.str() and "test_health" not in result.stdout.str()


def test_a_report_folder_made_later_is_created(run_fleet, pytester):
    result = run_fleet({"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "vllm"}}},
                       "--frank-json=out/nightly/run.json", "--frank-prometheus=out/frank.prom")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (pytester.path / "out/nightly/run.json").is_file()
    assert (pytester.path / "out/frank.prom").is_file()


def test_a_report_the_disk_refuses_at_the_end_is_a_red_line_and_a_failed_exit(run_fleet, pytester):
    # The path is fine at start; the file is turned into a folder while the run goes on.
    pytester.makepyfile(in_the_way="""
        import os
        def pytest_runtest_teardown(item):
            os.makedirs("late.json", exist_ok=True)
    """)
    pytester.syspathinsert()
    result = run_fleet({"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "vllm"}}},
                       "--frank-json=late.json", "-k", "health", "-p", "in_the_way")
    result.stdout.fnmatch_lines(["*--frank-json late.json: not written (Is a directory)*"])
    assert result.ret != pytest.ExitCode.OK and "Traceback" not in result.stdout.str()


def test_a_tests_duration_counts_the_probes_it_reads(run_fleet, pytester):
    """The work happens in the probe phase, before any test: each test's duration (pytest's
    --durations, JUnit's time, pytest-html) counts the probes it reads, not only its judging."""
    import xml.etree.ElementTree as ET

    with Emulator("vllm", models=["model"]) as em:
        paced(em, 0.5)
        fleet = {"endpoints": {"ep": {"url": em.url, "engine": "vllm", "alias": "model",
                                      "expect": {"perf": {"runs": 1, "max_ttft_s": 5}}}}}
        result = run_fleet(fleet, "-m", "perf or alias", "--junitxml=junit.xml",
                           "--durations=0", "--durations-min=0")
    result.assert_outcomes(passed=3, skipped=1)
    times = {case.get("name"): float(case.get("time"))
             for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert times["test_perf_ttft[ep]"] >= 0.5 and times["test_perf_decode[ep]"] >= 0.5, times
    assert times["test_alias[ep]"] < 0.5, times  # its model list came at once
    result.stdout.fnmatch_lines(["*s call *test_perf_ttft[[]ep[]]*"])
