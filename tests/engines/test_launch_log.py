"""llama.cpp's log goes to a file per process, each launched server's part of it once in its
endpoint's report, and into no test's captured output; Python's own stderr is untouched."""

import re
import sys
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import httpx
import pytest

from pytest_frank.transport import http
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


def test_two_launched_endpoints_each_report_holds_only_its_own_log(run_fleet, pytester):
    """Each `launch:` server runs in a process of its own, with a log of its own: its endpoint's
    reports (the Markdown, the JSON record, the HTML page, its test_health attachment) hold its
    lines only, and no note says the log is shared. Each loads its own model file (its name in
    its load line), and only `long` is sent a prompt over its context (the params claim's
    context limit: llama.cpp's error line)."""
    fleet = {"endpoints": {name: {"alias": name, "launch": {
        "model": model, "alias": name, "verbosity": 3}, "expect": expect}
        for name, model, expect in (("long", "selftest:chatty", {"params": True, "chat": False}),
                                    ("short", "selftest", {}))}}
    result = run_fleet(fleet, "-k", "test_health or test_params_context_limit",
                       "--frank-report=run.md", "--frank-json=run.json", "--html=run.html",
                       "--self-contained-html")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes["passed"] == 3, outcomes
    from pytest_frank.record import results

    own = {"long": ("selftest-chatty-", "exceeds the available context size"),
           "short": ("selftest-default-", None)}
    record = results.read_run(pytester.path / "run.json")
    markdown = (pytester.path / "run.md").read_text()
    page = (pytester.path / "run.html").read_text()
    attached = {r.nodeid.split("[")[-1].rstrip("]"): a["data"]
                for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"
                for a in (getattr(r, "frank", None) or {}).get("attachments", [])
                if a["name"] == "llama.cpp log"}
    for name, (model, error) in own.items():
        other = "short" if name == "long" else "long"
        section = markdown.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        html = page.split(f">{name}</h2>", 1)[1].split("llama.cpp log (launched server)", 1)[1]
        html = html.split("</pre>", 1)[0]
        for where, text in (("json", record.endpoints[name].launch_log), ("markdown", section),
                            ("html", html), ("attachment", attached[name])):
            assert text and "loading model" in text, (name, where, text[-1500:])
            assert model in text and own[other][0] not in text, (name, where, text[-1500:])
            assert (error in text) if error else ("exceeds the available" not in text), \
                (name, where, text[-1500:])
            assert "[one llama.cpp log per process" not in text, (name, where)


def test_a_failed_start_quotes_the_log_and_keeps_it(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(launch.LaunchError, match="couldn't bind HTTP server socket") as err:
            launch.launch({"model": "selftest", "port": taken.getsockname()[1]})
    assert "couldn't bind HTTP server socket" in err.value.log.tail()


@pytest.mark.parametrize("fault", ["broken-gguf", "port-taken"])
def test_a_server_in_its_own_process_fails_to_start_in_the_same_words(tmp_path, fault):
    """A fleet's launch runs in a child process: a start that fails there reads as it reads in
    this process, one line with llama.cpp's own reason, and keeps the child's log."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broken = tmp_path / "broken.gguf"
        broken.write_bytes(b"GGUF\x03\x00\x00\x00" + b"not a model" * 4)
        spec = ({"model": str(broken)} if fault == "broken-gguf"
                else {"model": "selftest", "port": taken.getsockname()[1]})
        said = {}
        for own in (False, True):
            with pytest.raises(launch.LaunchError) as err:
                launch.launch(spec, own_process=own)
            said[own] = str(err.value)
            assert err.value.log is not None and err.value.log.tail()
    reason = "failed to load model" if fault == "broken-gguf" else "couldn't bind HTTP server"
    assert said[True] == said[False] and reason in said[True] and "\n" not in said[True], said


def test_where_stderr_cannot_be_redirected_the_log_stays_there(monkeypatch):
    monkeypatch.setattr(llama_log, "_stderr_slot", lambda: None)
    server = launch.launch({"model": "selftest"})
    try:
        assert httpx.get(f"{server.url}/health").status_code == 200
    finally:
        server.stop()
    assert server.log is None and server.log_path is None and server.log_tail() is None


def test_a_long_log_shows_its_end_inert_and_masked(fresh_state, tmp_path):
    from pytest_frank.base import redact

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


def test_a_cycle_of_two_lines_repeated_per_request_is_folded_too():
    """llama.cpp writes a pair per request on a slot that reuses its cache; alternating, no two
    neighbours are alike, and the pair filled 60% of a report."""
    pairs = [line for i in range(30) for line in (
        f"0.01.{i:03d}.000 W slot update_slots: id  0 | task {i} | need to evaluate at least 1 "
        f"token for each active slot (n_past = {70 + i}, task.n_tokens() = {70 + i})",
        f"0.01.{i:03d}.001 W slot update_slots: id  0 | task {i} | n_past was set to {69 + i}")]
    text = "\n".join(["0.00.000.001 I srv  init: build_info: b1", *pairs,
                      "0.02.000.000 E ctx exceeds the available context size"])
    assert llama_log.collapsed(text).split("\n") == [
        "0.00.000.001 I srv  init: build_info: b1", *pairs[:2],
        "[56 more line(s) like these]", *pairs[-2:],
        "0.02.000.000 E ctx exceeds the available context size"]
    # two cycles stay as they are; a run of one line is still one line and a count
    assert llama_log.collapsed("a 1\nb 1\na 2\nb 2\nc") == "a 1\nb 1\na 2\nb 2\nc"
    assert llama_log.collapsed("a 1\na 2\na 3\na 4") == "a 1\n[2 more line(s) like these]\na 4"


def test_the_markdown_keeps_the_note_that_the_log_is_shared():
    from pytest_frank.reports.markdown import _log_tail

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
