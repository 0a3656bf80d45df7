"""test_reasoning_effort_trend against real llama.cpp (xllamacpp, the self-test models): llama.cpp
turns thinking off for reasoning_effort "none" whatever the template, so a map with `none` below
a thinking level shows a real trend (no thinking, then thinking). The faults through a proxy
(tests/support/proxy.py), as llama.cpp itself never loses the effort: one that drops reasoning_effort
from every request (each level then thinks alike), and one whose map turns the trend upside down
is the fleet's own mistake, shown on the real engine."""

import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real


def run(run_fleet, url, **effort):
    expect = {"reasoning_effort": {"trend": True, "max_tokens": 64, **effort}}
    return run_fleet(one_endpoint(url, "llamacpp", expect=expect), "-p", "no:randomly",
                     "-k", "trend", "--frank-json=run.json")


def notes(pytester) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(n for row in data["rows"] for n in row["notes"])


def _no_effort(body):
    return {k: v for k, v in body.items() if k != "reasoning_effort"}


def test_none_below_a_thinking_level_is_a_trend(llama, run_fleet, pytester):
    server = llama()
    result = run(run_fleet, server.url, map={"minimal": "none", "low": "low", "high": "high"})
    result.assert_outcomes(passed=1)
    text = notes(pytester)
    assert "minimal (sent as 'none'): 0 tokens of thinking (answered 'Hello!' at once)" in text, \
        text
    assert "high (sent as 'high'): " in text, text


def test_not_collected_without_trend(llama, run_fleet):
    server = llama()
    result = run_fleet(one_endpoint(server.url, "llamacpp",
                                    expect={"reasoning_effort": {"map": {"low": "none"}}}),
                       "-k", "trend")
    result.assert_outcomes()


def test_proxy_dropping_the_effort_fails(llama, run_fleet):
    server = llama()
    with Proxy(server.url, rewrite=_no_effort) as proxy:
        result = run(run_fleet, proxy.url, map={"minimal": "none", "high": "high"})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*reasoning_effort has no effect: minimal (sent as 'none') thought * tokens of thinking, "
        "high (sent as 'high') * tokens of thinking; the highest level must think at least "
        "1.25x as long as the lowest",
        # The default template never reads reasoning_effort: /props says so, and the fix says
        # what can still differ before it names the proxy.
        "*fix: the served template never reads the effort (/props chat_template_caps."
        "supports_reasoning_effort false): only what the engine maps itself*a proxy or gateway "
        "in front must forward the effort as sent*"])


def test_upside_down_map_fails_on_the_real_engine(llama, run_fleet):
    server = llama()
    result = run(run_fleet, server.url, map={"low": "high", "high": "none"})
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*reasoning_effort has no effect: low (sent as 'high') thought "
                                 "* tokens of thinking, high (sent as 'none') 0 tokens*"])


def test_levels_cut_while_thinking_are_inconclusive(llama, run_fleet):
    # long_think thinks a thousand tokens at every level but none: both cut at 16 tell nothing.
    server = llama(model="selftest:long_think")
    result = run(run_fleet, server.url, map={"low": "low", "high": "high"}, max_tokens=16)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*both low and high were cut while thinking at max_tokens 16: "
                                 "raise expect.reasoning_effort.max_tokens*"])
