"""reasoning: content and separate reasoning, plain and streamed; off means off."""

import pytest

from pytest_frank.claims import reasoning
from pytest_frank.verdict import skip


@pytest.mark.reasoning
def test_reasoning(endpoint):
    field = endpoint.config.options("reasoning").get("field")
    reasoning.judge(endpoint.probe(reasoning.probe), endpoint.driver, field)


@pytest.mark.reasoning
def test_reasoning_streamed(endpoint):
    opts = endpoint.config.options("reasoning")
    if opts.get("stream") is False:
        skip("expect.reasoning.stream is false")
    streamed = endpoint.probe(reasoning.probe_streamed)
    reasoning.judge(streamed, endpoint.driver, opts.get("field"))
    reasoning.judge_same_fields(streamed, endpoint.target.probe(reasoning.probe))


@pytest.mark.reasoning
def test_reasoning_off(endpoint):
    if endpoint.config.options("reasoning").get("thinking_off") is False:
        skip("expect.reasoning.thinking_off is false")
    reasoning.judge_off(endpoint.probe(reasoning.probe_off), endpoint.driver)
