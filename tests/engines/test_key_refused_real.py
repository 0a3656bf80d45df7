"""A refused key is one root cause: a real llama.cpp started with an API key (the `api_key`
launch key), verified by a fleet that gives no key or a wrong one, fails once, at the model
list, with the fix naming `api_key`, and blocks the endpoint's other checks with a pointer to
that failure, after one refused request; the right key passes; an endpoint beside it keeps its
verdicts."""

import re

import pytest

from proxy import Proxy

pytestmark = pytest.mark.real

KEY = "sk-test-key-123"  # the key test_diagnoses' keyed server is started with: one server
EXPECT = {"perf": {"max_ttft_s": 5, "min_decode_tps": 20}, "slots": {"count": 1}}
BLOCKED = ("test_chat[keyed]", "test_perf_ttft[keyed]", "test_perf_decode[keyed]",
           "test_slots[keyed]", "test_slots_context[keyed]")
FIX = ("  fix: the server wants a key: set `api_key` for this endpoint in fleet.yaml (e.g. "
       "api_key: ${ENDPOINT_KEY}), or check the one set there")


def fleet(keyed_url: str, open_url: str, **keyed) -> dict:
    entry = {"engine": "llamacpp", "alias": "frank-k", "expect": EXPECT}
    return {"endpoints": {"keyed": {"url": keyed_url, **entry, **keyed},
                          "open": {"url": open_url, **entry}}}


@pytest.fixture
def servers(llama):
    """The keyed server behind a proxy that counts what reaches it, and a server without a key."""
    keyed = llama(alias="frank-k", api_key=KEY)
    with Proxy(keyed.url) as counted:
        yield counted, llama(alias="frank-k")


def blocked_lines(result) -> dict[str, str]:
    """Each blocked test's reason, by test id, from -rA's SKIPPED lines."""
    found = re.findall(r"^SKIPPED \[1\] (\S+): (.*)$", result.stdout.str(), re.M)
    return {test: why for test, why in found if "see test_" in why}


def test_no_key_fails_once_and_blocks_the_rest(servers, run_fleet):
    counted, plain = servers
    result = run_fleet(fleet(counted.url, plain.url))
    # keyed: health passes (llama.cpp's /health needs no key), alias fails, five blocked;
    # open: health, alias, chat, ttft, decode, slots and the slot's context pass; perf's
    # prefix-cache test is not asked of either (skipped twice); the contract's replies pass on
    # open and, with no reply to judge, are inconclusive on keyed
    result.assert_outcomes(passed=9, failed=1, skipped=8)
    assert "\nFAILED test_alias.py::test_alias[keyed] - " in result.stdout.str()
    result.stdout.fnmatch_lines(["http://127.0.0.1:*/v1/models answered 401: Invalid API Key",
                                 FIX])
    blocked = blocked_lines(result)
    assert sorted(blocked) == sorted(BLOCKED), blocked
    for why in blocked.values():
        assert why == ("keyed wants an API key and fleet.yaml gives none, see test_alias[keyed]: "
                       "GET /v1/models answered 401: Invalid API Key"), why
    result.stdout.fnmatch_lines(["keyed  health ok  alias FAIL  chat blocked  perf blocked  "
                                 "slots blocked  contract inconclusive",
                                 "open   health ok  alias ok  chat ok  perf ok  slots ok  "
                                 "contract ok"])
    # What reached the keyed server past its health: the one refused model list, nothing more.
    asked = [(ex["method"], ex["path"], ex["status"]) for ex in counted.exchanges
             if ex["path"] != "/health"]
    assert asked == [("GET", "/v1/models", 401)], asked


def test_a_wrong_key_is_named_as_refused_and_never_printed(servers, run_fleet):
    counted, plain = servers
    wrong = "sk-wrong-key-99-abcdef"
    result = run_fleet(fleet(counted.url, plain.url, api_key="${KEYED_KEY}"),
                       env={"KEYED_KEY": wrong})
    result.assert_outcomes(passed=9, failed=1, skipped=8)
    result.stdout.fnmatch_lines(["http://127.0.0.1:*/v1/models answered 401: Invalid API Key",
                                 FIX])
    blocked = blocked_lines(result)
    assert sorted(blocked) == sorted(BLOCKED), blocked
    assert all(why.startswith("keyed refused the API key fleet.yaml gives, see test_alias[keyed]: "
                              "GET /v1/models answered 401") for why in blocked.values()), blocked
    assert wrong not in result.stdout.str() + result.stderr.str()


def test_the_right_key_passes_as_before(servers, run_fleet):
    counted, plain = servers
    result = run_fleet(fleet(counted.url, plain.url, api_key=KEY))
    # the prefix-cache test asked of neither; the contract's replies of both pass
    result.assert_outcomes(passed=16, skipped=2)
    assert not blocked_lines(result)
    result.stdout.fnmatch_lines(["keyed  health ok  alias ok  chat ok  perf ok  slots ok  "
                                 "contract ok"])


def test_without_an_alias_the_first_generation_fails_and_slots_is_blocked(servers, run_fleet):
    """No alias check reads the model list first: the chat check's probe meets the refusal (its
    model name is the list's first entry) and fails with it; slots, read later, is blocked."""
    counted, plain = servers
    endpoints = fleet(counted.url, plain.url)
    del endpoints["endpoints"]["keyed"]["alias"]
    result = run_fleet(endpoints, "-m", "health or chat or slots")
    result.assert_outcomes(passed=5, failed=1, skipped=2, deselected=9)
    assert "\nFAILED test_chat.py::test_chat[keyed] - " in result.stdout.str()
    result.stdout.fnmatch_lines(["http://127.0.0.1:*/v1/models answered 401: Invalid API Key",
                                 FIX])
    assert sorted(blocked_lines(result)) == ["test_slots[keyed]", "test_slots_context[keyed]"]
    assert blocked_lines(result)["test_slots[keyed]"].startswith(
        "keyed wants an API key and fleet.yaml gives none, see test_chat[keyed]: ")


OWN_CHECK = '''
from dataclasses import dataclass

from pytest_frank.transport import http
from pytest_frank.claims.checks import Check, battery_test
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import fail


@dataclass(kw_only=True)
class Keyless(Observation):
    status: int | None = None


def keyless(target) -> Keyless:
    """The model list asked with no key at all, on the endpoint's own recorded client."""
    ex = http.send(target.client(), "GET", target.url("/v1/models"))
    return Keyless(status=ex.status)


def judge(obs, ctx):
    if obs.status != 401:
        fail(f"the model list answered {obs.status} without a key: anyone may use the server")


test_key_is_required = battery_test(Check("test_key_is_required", "alias", keyless, judge))
'''


def test_a_check_whose_subject_is_the_key_keeps_its_verdict(servers, run_fleet, pytester):
    """A check of one's own that sends no key on purpose, to prove the server wants one, is
    neither stopped nor blocked by the refusal of the fleet's key."""
    counted, plain = servers
    pytester.makepyfile(test_own_key=OWN_CHECK)
    result = run_fleet(fleet(counted.url, plain.url, api_key="sk-wrong-key-99-abcdef"),
                       "-m", "health or alias", "test_own_key.py")
    # keyed: health, its own key check pass, alias fails; open: health, alias pass, its own key
    # check fails (the server takes any request)
    result.assert_outcomes(passed=4, failed=2, deselected=14)
    for line in ("PASSED test_own_key.py::test_key_is_required[keyed]\n",
                 "FAILED test_alias.py::test_alias[keyed] - ",
                 "FAILED test_own_key.py::test_key_is_required[open] - "):
        assert f"\n{line}" in result.stdout.str(), line
    assert not blocked_lines(result)
