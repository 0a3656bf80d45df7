"""llama.cpp's log goes to a file per process, each launched server's part of it once in its
endpoint's report, and into no test's captured output; Python's own stderr is untouched."""

import re
import sys
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import httpx
import pytest

from pytest_frank import http
from pytest_frank.local import launch, llama_log

pytestmark = pytest.mark.real

# llama.cpp's log lines: "0.00.004.100 I srv          init: build_info: b0-unknown"
LLAMA_LINE = re.compile(r"^\d+\.\d\d\.\d{3}\.\d{3} [IWED] ", re.M)
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(autouse=True)
def _xllamacpp():
    pytest.importorskip("xllamacpp")


def test_the_log_leaves_pythons_stderr_alone(capfd):
    server = launch.launch({"model": "selftest", "verbosity": 3})  # its own part, from its start
    try:
        print("python's own line", file=sys.stderr)
        assert httpx.post(f"{server.url}/v1/chat/completions", json=CHAT).status_code == 200
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert "python's own line" in err
    assert not LLAMA_LINE.search(err), err[-2000:]
    tail = server.log_tail()
    assert server.log_path and "init:" in tail and "print_timing" in tail, tail[-2000:]


def test_a_launched_endpoints_log_is_one_attachment_not_in_every_row(run_fleet, pytester):
    # A check of one's own that asks the server during the test: llama.cpp logs meanwhile.
    pytester.makepyfile(test_live="""
        def test_live_chat(endpoint):
            assert endpoint.post("/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "hi"}],
                                  "max_tokens": 4}).status == 200
    """)
    fleet = {"endpoints": {"ep": {"alias": "ep", "launch": {"model": "selftest", "alias": "ep",
                                                           "verbosity": 3}}}}
    junit = pytester.path / "out.xml"
    result = run_fleet(fleet, "--junitxml", str(junit), "-o", "junit_logging=all",
                       str(pytester.path / "test_live.py"))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes["passed"] >= 3, outcomes
    rows = result.reprec.getreports("pytest_runtest_logreport")
    for report in rows:
        for title, text in report.sections:
            assert not LLAMA_LINE.search(text), f"{report.nodeid} {title}: {text[-500:]}"
    for case in ET.parse(junit).iter("testcase"):
        for kept in ("system-out", "system-err"):
            text = "".join(case.find(kept).itertext()) if case.find(kept) is not None else ""
            assert not LLAMA_LINE.search(text), f"{case.get('name')} {kept}: {text[-500:]}"
    logs = [(r.nodeid, a["data"]) for r in rows if r.when == "call"
            for a in (getattr(r, "frank", None) or {}).get("attachments", [])
            if a["name"] == "llama.cpp log"]
    assert [nodeid.split("::")[-1] for nodeid, _ in logs] == ["test_health[ep]"]
    assert "init:" in logs[0][1] and LLAMA_LINE.search(logs[0][1])


def test_a_failed_start_quotes_the_log_and_keeps_it(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(launch.LaunchError, match="couldn't bind HTTP server socket") as err:
            launch.launch({"model": "selftest", "port": taken.getsockname()[1]})
    assert "couldn't bind HTTP server socket" in err.value.log.tail()


def test_where_stderr_cannot_be_redirected_the_log_stays_there(monkeypatch):
    monkeypatch.setattr(llama_log, "_stderr_slot", lambda: None)
    server = launch.launch({"model": "selftest"})
    try:
        assert httpx.get(f"{server.url}/health").status_code == 200
    finally:
        server.stop()
    assert server.log is None and server.log_path is None and server.log_tail() is None


def test_a_long_log_shows_its_end_inert_and_masked(fresh_state, tmp_path):
    from pytest_frank import redact

    redact.register("sk-in-a-log-line-0003")
    path = tmp_path / "llama.log"
    lines = [f"0.00.000.{i:03d} I line {i}\n" for i in range(200)]
    path.write_text("".join(lines) + "0.00.001.000 E key sk-in-a-log-line-0003 \x1b[31mred\n")
    tail = llama_log.ServerLog(str(path), 0, end=path.stat().st_size).tail(limit=300)
    assert tail.startswith("[") and "earlier bytes not shown]\n0.00.000." in tail
    assert "line 199" in tail and "line 0\n" not in tail
    assert "sk-in-a-log-line-0003" not in tail and "\x1b" not in tail and "\\x1b[31mred" in tail


def test_a_run_of_lines_alike_but_for_numbers_is_one_line_and_a_count(tmp_path):
    path = tmp_path / "llama.log"
    repeated = [f"0.01.{i:03d}.000 W slot operator(): id  0 | task {i} | n_past was set to "
                f"{60 + i}\n" for i in range(40)]
    path.write_text("0.00.000.001 I srv  init: build_info: b1\n" + "".join(repeated)
                    + "0.02.000.000 E ctx exceeds the available context size\n")
    tail = llama_log.ServerLog(str(path), 0, end=path.stat().st_size, shared=True).tail()
    assert tail.splitlines() == [
        llama_log.MIXED, "0.00.000.001 I srv  init: build_info: b1", repeated[0].rstrip(),
        "[38 more line(s) like these]", repeated[-1].rstrip(),
        "0.02.000.000 E ctx exceeds the available context size"]
    assert llama_log.collapsed("a 1\na 2\nb") == "a 1\na 2\nb"  # two alike stay as they are


def test_the_markdown_keeps_the_note_that_the_log_is_shared():
    from pytest_frank.markdown import _log_tail

    log = llama_log.MIXED + "\n" + "".join(f"line {chr(97 + i % 26)} {i}\n" for i in range(900))
    shown = _log_tail(log)
    assert shown.startswith(llama_log.MIXED + "\n[...]\nline ") and shown.endswith("899\n")
    assert len(shown) < 4200


@pytest.mark.parametrize("key", [None, "sk-launch-7781"], ids=["open", "keyed"])
def test_launch_returns_once_the_task_loop_answers(key):
    """llama.cpp answers /health before its task loop has begun, and a server stopped in that
    moment never ends (the loop's start clears the stop: xllamacpp's destructor then waits for
    ever); so launch returns only once the loop has answered /slots, behind the key if any."""
    with http.recording() as seen:
        server = launch.launch({"model": "selftest", **({"api_key": key} if key else {})})
    server.stop()
    asked = [(urlsplit(ex.url).path, ex.status) for ex in seen]
    assert asked[-1] == ("/slots", 200), asked
    assert ("/health", 200) in asked
