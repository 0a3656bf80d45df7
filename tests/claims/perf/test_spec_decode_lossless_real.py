"""test_spec_decode_lossless against real llama.cpp (xllamacpp): a model drafted by itself
answers, greedy, what its non-drafting twin answers (the examples/selftest.yaml pair:
`selftest:chatty` with and without itself as draft). The failing side needs a drafting endpoint
whose answer changes, which no engine here does by itself: a proxy in front of the real drafting
server samples at temperature 1 (tests/support/proxy.py), as a broken draft patch would change tokens."""

import json

import pytest
import yaml

from proxy import Proxy

CHATTY = {"model": "selftest:chatty", "alias": "frank", "threads": 1}


def _fleet(drafted_url=None, model="selftest:chatty"):
    drafted = {"engine": "llamacpp", "alias": "frank",
               "expect": {"spec_decode": {"reference": "plain"}}}
    if drafted_url:
        drafted["url"] = drafted_url
    else:
        drafted["launch"] = {**CHATTY, "model": model, "draft_model": model}
    plain = {"engine": "llamacpp", "alias": "frank", "launch": {**CHATTY, "model": model}}
    return yaml.safe_dump({"endpoints": {"drafted": drafted, "plain": plain}})


def test_a_self_draft_is_lossless(run_fleet, pytester):
    result = run_fleet(_fleet(), "-k", "test_spec_decode_lossless", "--frank-json", "run.json")
    result.assert_outcomes(passed=1)
    row = json.loads((pytester.path / "run.json").read_text())["rows"][0]
    assert row["notes"] == ["the same 192 characters as plain (64 tokens)"], row["notes"]


def test_a_drafted_answer_that_differs_fails_quoting_both(run_fleet, llama):
    server = llama(model="selftest:flat", alias="frank", draft_model="selftest:flat", threads=1)
    broken = lambda body: {**body, "temperature": 1.0, "seed": 3}  # noqa: E731
    with Proxy(server.url, rewrite=broken) as proxy:
        result = run_fleet(_fleet(proxy.url, model="selftest:flat"),
                           "-k", "test_spec_decode_lossless")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the greedy answer with drafting differs from plain's without it at character *: "
        "drafted '*', plain '*'*",
        "*the draft or MTP patch changes outputs: try without it*"])


def test_without_a_reference_it_is_not_collected(run_fleet):
    fleet = yaml.safe_load(_fleet())
    fleet["endpoints"]["drafted"]["expect"]["spec_decode"] = True
    result = run_fleet(yaml.safe_dump(fleet), "-m", "spec_decode", "--collect-only", "-q")
    assert "test_spec_decode_lossless" not in result.stdout.str()
    assert "test_spec_decode[drafted]" in result.stdout.str()


def test_a_reference_the_fleet_lacks_is_named(run_fleet):
    fleet = yaml.safe_load(_fleet())
    fleet["endpoints"]["drafted"]["expect"]["spec_decode"] = {"reference": "gone"}
    result = run_fleet(yaml.safe_dump(fleet), "-k", "test_spec_decode_lossless")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expect.spec_decode.reference names 'gone', which is no "
                                 "endpoint of this fleet*"])


pytestmark = [pytest.mark.real, pytest.mark.filterwarnings("ignore")]
