"""health and alias against emulated engines (shapes and faults a real tiny llama.cpp can't show)."""

import re
import threading
import time

import pytest

from fleets import one_endpoint
from emulator import DROP, Emulator, Reply

pytestmark = pytest.mark.emulated


@pytest.fixture
def run_fleet(run_fleet):
    """Only this module's claims: other battery claims would add skips to the counts."""
    return lambda fleet, *args, **kw: run_fleet(fleet, "-m", "health or alias", *args, **kw)


@pytest.mark.parametrize("engine", ["llamacpp", "vllm", "sglang", "anthropic", "openai"])
def test_every_engine_shape_passes_when_healthy(engine, run_fleet):
    with Emulator(engine, models=["served-a", "served-b"]) as em:
        result = run_fleet(one_endpoint(em.url, engine, alias="served-b"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*frank verdicts*", "ep  health ok  alias ok"])


def test_llamacpp_aliases_list_counts(run_fleet):
    # llama.cpp names only the alphabetically first alias as `id`; the rest are in `aliases`.
    with Emulator("llamacpp", models=["zeta", "alpha"]) as em:
        result = run_fleet(one_endpoint(em.url + "/v1", alias="zeta"))
    result.assert_outcomes(passed=2)


def test_wrong_alias_fails_naming_what_is_served(run_fleet):
    with Emulator("vllm", models=["qwen3-35b"]) as em:
        result = run_fleet(one_endpoint(em.url, "vllm", alias="frank-default-small"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*alias 'frank-default-small' is not served by http://127.0.0.1:*/v1/models; "
        "it serves 'qwen3-35b'",
        "*fix: add it to --served-model-name*",
    ])


def test_loading_model_is_waited_for_until_ready(run_fleet):
    with Emulator("llamacpp", models=["m"], loading_for=1.0) as em:
        start = time.monotonic()
        result = run_fleet(one_endpoint(em.url, alias="m", ready_timeout=10))
    result.assert_outcomes(passed=2)
    assert time.monotonic() - start >= 1.0
    assert sum(r.path == "/health" for r in em.requests) >= 2


def test_stuck_loading_fails_after_ready_timeout_with_last_status(run_fleet):
    with Emulator("llamacpp", models=["m"], loading_for=60) as em:
        result = run_fleet(one_endpoint(em.url, alias="m", ready_timeout=1))
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*is still loading after *s (ready_timeout 1s); last answer: 503 Loading model",
        "*fix: wait for the model to finish loading, or raise ready_timeout*",
    ])


def test_hanging_socket_fails_at_the_timeout_and_skips_the_rest(run_fleet):
    with Emulator("vllm", hang=True) as em:
        start = time.monotonic()
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m"), "--frank-timeout", "1")
    assert time.monotonic() - start < 10
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*/health: no answer within 1s (the server accepted*",
                                 "  fix: the server took the connection and did not answer its "
                                 "health route: it may be stuck*",
                                 "reproduce: curl *",
                                 "*ep is not healthy, see test_health[[]ep[]]*"])


@pytest.mark.parametrize("drops, outcome", [(2, {"passed": 2}), (3, {"failed": 1, "skipped": 1})])
def test_a_dropped_health_connection_is_asked_again_twice(run_fleet, drops, outcome):
    """A connection taken and closed with no answer (a busy llama.cpp drafting SmolLM2 dropped
    one /health so): asked again up to twice, then the endpoint is down, saying why."""
    with Emulator("llamacpp", models=["m"]) as em:
        healthy = em.answer
        asked = []

        def answer(req):
            if req.path == "/health":
                asked.append(req)
                if len(asked) <= drops:
                    return DROP
            return healthy(req)

        em.answer = answer
        result = run_fleet(one_endpoint(em.url, alias="m"))
    result.assert_outcomes(**outcome)
    assert len(asked) == min(drops, 2) + 1
    if "failed" in outcome:
        result.stdout.fnmatch_lines(["*/health: the server broke the connection: Server "
                                     "disconnected without sending a response*"])


def test_closed_port_fails_fast_with_one_line(run_fleet):
    fleet = {"endpoints": {f"dead{i}": {"url": f"http://127.0.0.1:{9 + i}", "engine": "llamacpp",
                                        "alias": "x"} for i in range(5)}}
    start = time.monotonic()
    result = run_fleet(fleet)
    assert time.monotonic() - start < 8
    result.assert_outcomes(failed=5, skipped=5)
    result.stdout.fnmatch_lines([
        "*connection refused (nothing listens on that port*",
        "  fix: start the server, or correct `url` in fleet.yaml: nothing listens on that host "
        "and port (the reproduce line asks the same)",
        "reproduce: curl -sS -X GET http://127.0.0.1:9/health"])


def test_unknown_host_is_named_as_dns(run_fleet):
    result = run_fleet(one_endpoint("http://no-such-host.invalid:8080", "vllm"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no-such-host.invalid:8080/health: DNS lookup failed*",
                                 "  fix: correct the host name in fleet.yaml's `url`*",
                                 "reproduce: curl *http://no-such-host.invalid:8080/health"])


def test_a_health_route_answering_500_names_the_servers_log(run_fleet):
    """What no engine here does on demand: a health route that answers 500 (a server whose
    model failed after it listened). The fix points at its log, the curl line at the answer."""
    with Emulator("llamacpp", models=["m"]) as em:
        em.route("GET", "/health", lambda r: Reply(500, {"error": {"message": "model crashed"}}))
        result = run_fleet(one_endpoint(em.url, alias="m"))
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*/health: answered 500: model crashed",
        "  fix: the server answers /health with an error of its own: its log says why*",
        f"reproduce: curl -sS -X GET {em.url}/health*"])


def test_hostile_models_body_is_a_clear_failure(run_fleet):
    with Emulator("openai") as em:
        em.route("GET", "/v1/models", lambda r: Reply(200, "<html>hi"))
        result = run_fleet(one_endpoint(em.url, "openai", alias="m"))
    # A generic OpenAI server's health is its model list: a non-list answer is noticed at once.
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*/v1/models not a model list (not JSON): <html>hi"])


def test_api_key_is_sent_and_never_printed(run_fleet):
    secret = "sk-very-secret-0123456789"
    with Emulator("anthropic", models=["claude-local"], api_key=secret) as em:
        ok = run_fleet(one_endpoint(em.url, "anthropic", alias="claude-local",
                                    api_key="${PROXY_KEY}"), env={"PROXY_KEY": secret})
        bad = run_fleet(one_endpoint(em.url, "anthropic", alias="nope", api_key="${PROXY_KEY}"),
                        "-vv", env={"PROXY_KEY": secret})
    ok.assert_outcomes(passed=2)
    assert em.requests[-1].headers["x-api-key"] == secret
    assert em.requests[-1].headers["anthropic-version"] == "2023-06-01"
    bad.assert_outcomes(passed=1, failed=1)
    output = bad.stdout.str() + bad.stderr.str()
    assert secret not in output
    # the reproduce line keeps the key in the environment, named as fleet.yaml names it
    assert "x-api-key: $PROXY_KEY" in output and "$API_KEY" not in output


def test_wrong_key_fails_alias_with_the_servers_words(run_fleet):
    with Emulator("vllm", models=["m"], api_key="right-key-123") as em:
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", api_key="wrong-key-456"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*/v1/models answered 401: Invalid API Key"])
    assert "wrong-key-456" not in result.stdout.str()


def test_claim_not_asked_is_not_collected(run_fleet):
    with Emulator("vllm", models=["m"]) as em:
        fleet = {"endpoints": {"plain": {"url": em.url, "engine": "vllm"},
                               "named": {"url": em.url, "engine": "vllm", "alias": "m"}}}
        result = run_fleet(fleet)
        listed = run_fleet(fleet, "--collect-only", "-q")
    result.assert_outcomes(passed=3)  # health twice, alias once: no skip row for "plain"
    assert "test_alias[plain]" not in result.stdout.str()
    assert sorted(line.split("::")[-1] for line in listed.stdout.lines if "::" in line) == [
        "test_alias[named]", "test_health[named]", "test_health[plain]"]


def test_selection_by_endpoint_name_and_marker(run_fleet):
    with Emulator("vllm", models=["m"]) as em:
        fleet = {"endpoints": {n: {"url": em.url, "engine": "vllm", "alias": "m"}
                               for n in ("frank-default-large", "frank-default-small")}}
        by_name = run_fleet(fleet, "-k", "frank-default-large", "--strict-markers")
        by_marker = run_fleet(fleet, "-m", "alias", "--strict-markers")
    by_name.assert_outcomes(passed=2)
    by_name.stdout.fnmatch_lines(["PASSED *test_alias.py::test_alias[[]frank-default-large[]]"])
    by_marker.assert_outcomes(passed=2)
    by_marker.stdout.fnmatch_lines(["PASSED *test_alias[[]frank-default-large[]]",
                                    "PASSED *test_alias[[]frank-default-small[]]"])


def test_junit_xml_carries_endpoint_and_claim(run_fleet, pytester):
    with Emulator("vllm", models=["m"]) as em:
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m"), "--junitxml=out.xml")
    result.assert_outcomes(passed=2)
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="endpoint" value="ep"' in xml and 'name="claim" value="alias"' in xml


def test_html_report_carries_evidence_without_the_key(run_fleet, pytester):
    secret = "sk-html-secret-778899"
    with Emulator("vllm", models=["m"], api_key=secret) as em:
        result = run_fleet(one_endpoint(em.url, "vllm", alias="other", api_key=secret),
                           "--html=report.html", "--self-contained-html")
    result.assert_outcomes(passed=1, failed=1)
    html = (pytester.path / "report.html").read_text()
    # The evidence is inline HTML, not a data: link (which opens blank in a browser).
    assert "data:application/json" not in html
    assert re.search(r"<code>GET http://127\.0\.0\.1:\d+/v1/models</code> &rarr; 200", html)
    assert secret not in html


def test_the_sdks_are_imported_ahead_only_where_probes_run(run_fleet, monkeypatch):
    """The fleet's SDKs are imported in a thread from configure on; --collect-only does not start
    it, and a run ends with it ended (an in-process run's modules are unloaded after it)."""
    from pytest_frank.runtime.session import FrankSession

    started, warm = [], FrankSession.warm
    monkeypatch.setattr(FrankSession, "warm", lambda self: started.append(1) or warm(self))
    with Emulator("vllm", models=["m"]) as em:
        fleet = one_endpoint(em.url, "vllm", alias="m")
        run_fleet(fleet, "--collect-only")
        assert not started
        run_fleet(fleet).assert_outcomes(passed=2)
    assert started == [1]
    assert not [t for t in threading.enumerate() if t.name == "frank-warm"]


def test_endless_models_body_is_cut_and_named(run_fleet):
    """A hostile /v1/models answering megabytes of junk: read up to the cap, then judged."""
    with Emulator("vllm") as em:
        em.route("GET", "/v1/models", lambda r: Reply(200, "x" * (6 * 1024 * 1024)))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*/v1/models answered 200: xxx*... ?the answer ran past 4194304 "
                                 "bytes; read no further?; every request on GET /v1/models broke "
                                 "so, answer past the cap *"])


def test_xdist_groups_run_endpoints_side_by_side(run_fleet):
    """Emulated vLLMs: with `-n 2 --dist loadgroup` the two endpoints are probed at once. Each
    model list waits for the other's to arrive, so the proof is the meeting, not a timing: a busy
    machine may start the second worker seconds after the first."""
    pytest.importorskip("xdist")
    both_in_flight = threading.Barrier(2, timeout=15)
    met = {}

    def meeting(name):
        def answer(r):
            try:
                both_in_flight.wait()
                met[name] = True
            except threading.BrokenBarrierError:  # the other never came while this one waited
                met[name] = False
            return Reply(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
        return answer

    with Emulator("vllm") as a, Emulator("vllm") as b:
        a.route("GET", "/v1/models", meeting("one"))
        b.route("GET", "/v1/models", meeting("two"))
        fleet = {"endpoints": {"one": {"url": a.url, "engine": "vllm", "alias": "m"},
                               "two": {"url": b.url, "engine": "vllm", "alias": "m"}}}
        result = run_fleet(fleet, "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=4)
    assert "one  health ok  alias ok" in result.stdout.str()  # verdicts gathered from workers
    assert met == {"one": True, "two": True}, met  # each model list was asked while the other's was
