"""perf: time to first token, decode speed and the prefix-cache effect meet the fleet's floors."""

import pytest

from pytest_frank.claims import perf


def _options(endpoint):
    return endpoint.config.options("perf")


@pytest.mark.perf
def test_perf_ttft(endpoint):
    perf.judge_ttft(endpoint.probe(perf.probe_speed), _options(endpoint), endpoint.driver,
                    endpoint.note)


@pytest.mark.perf
def test_perf_decode(endpoint):
    perf.judge_decode(endpoint.probe(perf.probe_speed), _options(endpoint), endpoint.driver,
                      endpoint.note)


@pytest.mark.perf
def test_perf_prefix_cache(endpoint):
    if _options(endpoint).get("max_cached_ttft_ratio") is None:
        pytest.skip("no expect.perf.max_cached_ttft_ratio in fleet.yaml: the prefix-cache "
                    "probe (a long prompt sent twice) is not run")
    perf.judge_cache(endpoint.probe(perf.probe_cache), _options(endpoint), endpoint.driver,
                     endpoint.note)
