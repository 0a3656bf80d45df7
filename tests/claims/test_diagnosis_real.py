"""The differential diagnosis on real llama.cpp (the self-test model) through the suite's proxy:
each fault put in one place, and the failure names that place with the evidence that shows it,
never the template: a stream rewriter that drops tool calls, or all but the reasoning (the
stream path: the same request unstreamed made the call), a gateway that renames the model and
loses the calls (the engine's own /v1/models and the reply disagree), a gateway that zeroes a
stream's usage (llama.cpp's own count in the same reply disagrees; not "only 0 token(s)
streamed"). The healthy endpoint, through the same proxy, gets no fix and no request asked
twice."""

import json

import pytest

from fleets import one_endpoint
from gateway_faults import (
    answer_dropped_from_stream,
    calls_dropped_from_stream,
    gateway_answer,
    gateway_stream,
    usage_zeroed,
)
from proxy import Proxy

pytestmark = pytest.mark.real

CALLS = {"agent": True, "tools": True}
STREAMED = ("-k", "test_agent_streamed or test_tools_streamed")
PLAIN = ("-k", "test_tools_required or (test_agent and not test_agent_)")


def run(run_fleet, url, expect, *args):
    return run_fleet(one_endpoint(url, alias="frank", expect=expect), "-p", "no:randomly",
                     *args)


@pytest.mark.parametrize("rewrite, seen", [
    (calls_dropped_from_stream, "no tool call: answered 'Hello!'"),
    (answer_dropped_from_stream, "1 of 1 reply carried reasoning only")])
def test_a_stream_that_loses_the_call_names_the_stream_path(llama, run_fleet, rewrite, seen):
    """A stream rewriter that drops the call (the content kept), or everything but the
    reasoning (a forced call that streamed empty)."""
    with Proxy(llama(alias="frank").url, rewrite_stream=rewrite) as proxy:
        result = run(run_fleet, proxy.url, CALLS, *STREAMED)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    for test in ("streamed agent step (1 call(s), then the answer)",
                 'streamed tool_choice "required"'):
        result.stdout.fnmatch_lines([
            f"*{test}*{seen}*cause: the stream path (the engine's streaming parser, or "
            f"what re-chunks the stream in front of it) (the same request unstreamed came back "
            f"right (called get_*); streamed it did not)",
            "  fix: llama.cpp's streaming parser*pass the stream through any proxy in front "
            "unchanged"])
    assert "--jinja" not in out and "model limit" not in out


def test_a_gateway_that_loses_calls_is_named_by_the_engines_own_facts(llama, run_fleet):
    with Proxy(llama(alias="frank").url, rewrite_answer=gateway_answer,
               rewrite_stream=gateway_stream) as proxy:
        result = run(run_fleet, proxy.url, CALLS, *PLAIN)
    result.assert_outcomes(failed=2)
    for test in ("agent step (1 call(s), then the answer)", 'tool_choice "required"'):
        result.stdout.fnmatch_lines([
            f"*{test}*no tool call*cause: a gateway in front of the engine (the engine's own "
            f"facts disagree with the reply: /v1/models serves 'frank', the reply names "
            f"'gateway/frank')",
            "  fix: something in front of the engine rewrites its replies*"])
    assert "--jinja" not in result.stdout.str()


def test_a_zeroed_usage_is_no_short_decode(llama, run_fleet):
    with Proxy(llama(alias="frank").url, rewrite_stream=usage_zeroed) as proxy:
        result = run(run_fleet, proxy.url, {"perf": {"runs": 1}}, "-k", "test_perf_decode")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "usage.completion_tokens 0 in the stream from *, which carried * text deltas: the "
        "reply's count of its tokens is wrong, so no decode rate can be measured from it (the "
        "tokens came); cause: a gateway in front of the engine (the engine's own facts disagree "
        "with the reply: llama.cpp's own count in the reply (timings.predicted_n) is *, its "
        "usage.completion_tokens is 0)"])
    assert "token(s) streamed" not in result.stdout.str()


def test_the_healthy_endpoint_gets_no_fix_and_no_second_ask(llama, run_fleet):
    with Proxy(llama(alias="frank").url) as proxy:
        result = run(run_fleet, proxy.url, {**CALLS, "perf": {"runs": 1}}, "-m",
                     "agent or tools or perf")
        asked = [json.dumps(e["body"], sort_keys=True) for e in proxy.exchanges
                 if e["method"] == "POST" and e["path"] == "/v1/chat/completions"]
    outcomes = result.parseoutcomes()
    assert not outcomes.get("failed") and not outcomes.get("error"), result.stdout.str()
    out = result.stdout.str()
    assert "fix:" not in out and "cause" not in out
    assert len(asked) == len(set(asked)), "a request was asked twice on a healthy endpoint"
