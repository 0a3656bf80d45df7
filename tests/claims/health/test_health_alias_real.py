"""health and alias against real llama.cpp servers (xllamacpp, the tiny self-test model)."""

import json

import pytest

from fleets import one_endpoint
from checkout import ROOT

pytestmark = pytest.mark.real

EXAMPLE = ROOT / "examples" / "selftest.yaml"


@pytest.fixture
def run_fleet(run_fleet):
    """Only this module's claims: other battery claims would add skips to the counts."""
    return lambda fleet, *args, **kw: run_fleet(fleet, "-m", "health or alias", *args, **kw)


def test_healthy_server_passes_health_and_alias(llama, run_fleet):
    server = llama(alias=["frank-default-large", "qwen-large"])
    result = run_fleet(one_endpoint(server.url + "/v1", alias="qwen-large"))
    result.assert_outcomes(passed=2)


def test_a_build_without_its_version_says_so(llama, run_fleet, pytester):
    # llama.cpp built outside its git checkout (here xllamacpp's, reached by its URL alone, so
    # nothing says which package it is) reports "b0-unknown"; the header says what that means.
    server = llama(alias=["frank-default-large", "qwen-large"])
    result = run_fleet(one_endpoint(server.url, alias="qwen-large"), "--frank-json=run.json")
    result.assert_outcomes(passed=2)
    run = json.loads((pytester.path / "run.json").read_text())
    assert run["endpoints"]["ep"]["build"] == "b0-unknown (built without its version)"


def test_wrong_alias_fails_alias_only_with_the_served_ids(llama, run_fleet):
    server = llama(alias=["frank-default-large", "qwen-large"])
    result = run_fleet(one_endpoint(server.url, alias="frank-default-small"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*alias 'frank-default-small' is not served by http://127.0.0.1:*/v1/models; "
        "it serves 'frank-default-large', 'qwen-large'",
        "*fix: add it to --alias, keeping the names served now: "
        "--alias frank-default-large,qwen-large,frank-default-small",
        "*reproduce: curl -sS -X GET http://127.0.0.1:*/v1/models",
    ])


def test_key_protected_server(llama, run_fleet):
    server = llama(alias="guarded", api_key="sk-local-guard-42")
    ok = run_fleet(one_endpoint(server.url, alias="guarded", api_key="sk-local-guard-42"))
    ok.assert_outcomes(passed=2)
    bad = run_fleet(one_endpoint(server.url, alias="guarded", api_key="sk-wrong-key-99"))
    bad.assert_outcomes(passed=1, failed=1)  # /health needs no key; /v1/models does
    bad.stdout.fnmatch_lines(["*/v1/models answered 401: Invalid API Key"])
    assert "sk-wrong-key-99" not in bad.stdout.str()


def test_launch_block_starts_and_stops_a_local_server(run_fleet, pytester):
    result = run_fleet(EXAMPLE.read_text(), "-v")
    outcomes = result.parseoutcomes()  # other claims in the example add to the count
    assert outcomes.get("failed", 0) == 0 and outcomes["passed"] >= 2, outcomes
    result.stdout.fnmatch_lines(["*test_health*frank-selftest*PASSED*",
                                 "frank-selftest *health ok  alias ok*"])


def test_launch_failure_is_a_health_failure(run_fleet, tmp_path):
    fleet = {"endpoints": {"broken": {"engine": "llamacpp", "alias": "x",
                                      "launch": {"model": str(tmp_path / "missing.gguf")}}}}
    result = run_fleet(fleet)
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*the local server could not be launched:*missing.gguf*",
                                 "  fix: *"])


def test_a_proxy_that_does_not_route_health_fails_with_its_fix_and_curl(llama, run_fleet):
    """A real llama.cpp behind a gateway that answers 404 on /health: the failure names the
    path, the fix the url, and the reproduce line asks the same route."""
    from proxy import Proxy

    server = llama()
    with Proxy(server.url, routes={"/health": lambda upstream: None}) as proxy:
        result = run_fleet(one_endpoint(proxy.url, alias="selftest"))
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*/health: answered 404: not found",
                                 "  fix: nothing of the engine's answers on that path: check `url`*",
                                 f"reproduce: curl -sS -X GET {proxy.url}/health*"])
