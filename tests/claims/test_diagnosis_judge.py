"""The differential diagnosis over evidence built by hand: each cause only where its evidence
shows it (the template, the stream path, a gateway, intermittent, load, unknown), with the
evidence named; Fisher's exact test and Wilson intervals against known values; the engine's
own facts against a reply, read by the llama.cpp driver."""

import json

import pytest

from pytest_frank.claims.diagnosis import (
    GATEWAY,
    INTERMITTENT,
    LOAD,
    MODEL,
    STREAM,
    TEMPLATE,
    UNKNOWN,
    Again,
    Counts,
    Disagreement,
    Evidence,
    Render,
    Twin,
    diagnose,
    fisher,
    wilson,
)
from pytest_frank.drivers import driver_for
from pytest_frank.outcome.verdict import render

pytestmark = pytest.mark.unit

LLAMA = driver_for("llamacpp")
OWN = (TEMPLATE, "serve the model's own template")
NO_CALL = "no tool call: answered '' (finish_reason 'stop')"
CALLED = "called get_weather {\"city\": \"Paris\"}, finish_reason 'tool_calls'"
FACTS = "the model the reply names against /v1/models"


def test_the_stream_path_where_plain_is_right_and_streamed_is_wrong_twice():
    seen = Evidence(seen=NO_CALL, streamed=True, twin=Twin(None, CALLED),
                    again=Again(NO_CALL, "empty content, no call"), facts=FACTS)
    found = diagnose(seen, LLAMA, own=OWN)
    assert found.cause == STREAM
    assert "the same request unstreamed came back right (called get_weather" in found.line
    fix = render(found.fix)
    assert "streaming parser" in fix and "--jinja" not in fix


def test_a_gateway_where_the_engine_and_the_reply_disagree():
    seen = Evidence(seen=NO_CALL, twin=Twin(NO_CALL, "empty"), again=Again(NO_CALL, "empty"),
                    disagree=(Disagreement("/v1/models serves 'frank'",
                                           "the reply names 'gw/frank'"),), facts=FACTS)
    found = diagnose(seen, LLAMA, own=OWN)
    assert found.cause == GATEWAY
    assert "/v1/models serves 'frank', the reply names 'gw/frank'" in found.line
    assert "in front of the engine" in render(found.fix)


def test_the_template_where_the_engines_own_render_shows_it():
    seen = Evidence(seen=NO_CALL, again=Again(NO_CALL, "empty"),
                    render=Render(False, "the prompt counted 12 tokens with the tools and 12 "
                                         "without them"))
    found = diagnose(seen, LLAMA, own=OWN)
    assert found.cause == TEMPLATE and found.fix == OWN[1]
    assert "the engine's own render: the prompt counted 12 tokens" in found.line


def test_the_claims_own_cause_where_the_plain_request_fails_alike_again_and_facts_agree():
    seen = Evidence(seen=NO_CALL, again=Again(NO_CALL, "empty"), facts=FACTS)
    found = diagnose(seen, LLAMA, own=(MODEL, "serve a model trained to call tools"))
    assert found.cause == MODEL
    assert "again when asked once more" in found.line and FACTS in found.line


def test_intermittent_where_the_same_request_again_came_back_right():
    seen = Evidence(seen=NO_CALL, streamed=True, twin=Twin(None, CALLED),
                    again=Again(None, CALLED), facts=FACTS)
    found = diagnose(seen, LLAMA, own=OWN)
    assert found.cause == INTERMITTENT
    assert "asked again came back right" in found.line


def test_intermittent_where_the_counts_cannot_tie_it_to_load():
    """The field's case: 0 of 17 alone, 2 of 34 at 2 in flight was blamed on concurrency."""
    seen = Evidence(seen="not whole", levels=(Counts(1, 0, 17), Counts(2, 2, 34)))
    found = diagnose(seen, LLAMA, load="the engine breaks answers under concurrent load")
    assert found.cause == INTERMITTENT
    assert "0 of 17 at 1 in flight (0-18%); 2 of 34 at 2 in flight (2-19%)" in found.line
    assert "p=0.55" in found.line and "intervals overlap" in found.line
    assert "concurrent" not in render(found.fix) and "not tied to load" in render(found.fix)


def test_load_where_the_rate_grows_with_requests_in_flight():
    seen = Evidence(seen="not whole", levels=(Counts(1, 0, 30), Counts(2, 2, 30),
                                              Counts(4, 15, 30)))
    found = diagnose(seen, LLAMA, load="the engine breaks answers under concurrent load")
    assert found.cause == LOAD and found.fix == "the engine breaks answers under concurrent load"
    assert "15 of 30 at 4 in flight" in found.line


def test_unknown_says_what_was_seen_rather_than_guess():
    """Streamed wrong, plain wrong, asked once only: neither the path nor the template shown."""
    seen = Evidence(seen=NO_CALL, streamed=True, twin=Twin(NO_CALL, "empty content"))
    found = diagnose(seen, LLAMA, own=OWN)
    assert found.cause == UNKNOWN
    assert found.line.startswith(f"cause unknown (seen: {NO_CALL}; unstreamed: {NO_CALL}")
    assert "no engine facts to compare" in found.line
    assert "--jinja" not in render(found.fix) and "template" not in render(found.fix)
    # without the claim's own cause, a repeated plain fault is no template either
    plain = Evidence(seen=NO_CALL, again=Again(NO_CALL, "empty"), facts=FACTS)
    assert diagnose(plain, LLAMA).cause == UNKNOWN


@pytest.mark.parametrize("table, p", [
    ((0, 17, 2, 34), 0.5467), ((1, 10, 9, 10), 0.001093), ((3, 10, 3, 10), 1.0),
    ((0, 30, 15, 30), 5.832e-06)])
def test_fisher_against_known_values(table, p):
    """scipy.stats.fisher_exact's two-sided p-values for the same tables."""
    assert fisher(*table) == pytest.approx(p, rel=0.02)


def test_wilson_against_known_values():
    low, high = wilson(2, 34)
    assert low == pytest.approx(0.0163, abs=0.001) and high == pytest.approx(0.1912, abs=0.001)
    assert wilson(0, 0) == (0.0, 1.0)


def _body(**fields) -> str:
    return json.dumps({"choices": [], "model": "frank", "system_fingerprint": "b0-unknown",
                       "usage": {"completion_tokens": 6}, "timings": {"predicted_n": 6},
                       **fields})


PAYLOADS = {"/v1/models": {"data": [{"id": "frank", "aliases": ["frank", "other"]}]},
            "/props": {"build_info": "b0-unknown"}}


def test_llamacpp_reads_its_own_facts_against_a_reply():
    assert LLAMA.reply_disagrees(_body(), PAYLOADS)[0] == []
    found, compared = LLAMA.reply_disagrees(
        _body(model="gw/frank", system_fingerprint="fp_gw", usage={"completion_tokens": 0}),
        PAYLOADS)
    assert [e for e, _ in found] == [
        "/v1/models serves 'frank', 'other'", "/props build_info is 'b0-unknown'",
        "llama.cpp's own count in the reply (timings.predicted_n) is 6"]
    assert len(compared) == 3
    stream = "\n\n".join("data: " + json.dumps(c) for c in (
        {"model": "frank", "choices": []},
        {"model": "frank", "choices": [], "usage": {"completion_tokens": 0},
         "timings": {"predicted_n": 9}})) + "\n\ndata: [DONE]\n\n"
    found, _ = LLAMA.reply_disagrees(stream, PAYLOADS)
    assert found == [("llama.cpp's own count in the reply (timings.predicted_n) is 9",
                      "its usage.completion_tokens is 0")]


def test_an_engine_whose_replies_name_any_model_compares_none():
    found, compared = driver_for("openai").reply_disagrees(_body(model="gw/frank"), PAYLOADS)
    assert found == [] and compared == []
