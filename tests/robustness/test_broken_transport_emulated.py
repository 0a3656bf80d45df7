"""A transport that breaks alike on every request is one root cause (runtime.broken): one test
fails with the fault and its evidence, the tests that would send the same requests are blocked
pointing there, and nothing more is sent on the broken route. Emulated: resets before, during
and after the headers, bodies cut short, bytes that are no HTTP, compression bombs and corrupt
or stacked encodings are what no engine here commits on purpose, so a loopback server makes
them. Each run is in-process with a small timeout: seconds, not the bound."""

import gzip
import re

import pytest

from emulator import BREAKS, Emulator, Reply, broken, chat_stream, serve_chat
from fleets import one_endpoint
from healthy_engines import healthy_chat

from pytest_frank.runtime.broken import REPEATS

pytestmark = pytest.mark.emulated

BOMB = gzip.compress(b" " * (16 * 1024 * 1024))  # 16 MiB of spaces: past the 4 MiB cap
FAULTS = {  # how a route breaks -> the words its failure says it with
    **{how: (lambda reply, how=how: broken(how, reply)) for how in BREAKS},
    "gzip bomb": lambda reply: Reply(200, BOMB, {"content-encoding": "gzip"}),
    "corrupt gzip": lambda reply: Reply(200, b"\x1f\x8b\x08\x00 not gzip at all",
                                        {"content-encoding": "gzip"}),
    "stacked gzip": lambda reply: Reply(200, gzip.compress(gzip.compress(b"{}")),
                                        {"content-encoding": "gzip, gzip"}),
}
SAYS = {"reset before": "connection reset", "reset headers": "connection reset",
        "reset body": "connection reset", "short body": "connection closed early",
        "not http": "not HTTP", "gzip bomb": "answer past the cap",
        "corrupt gzip": "corrupt compression", "stacked gzip": "encoding refused"}
CLAIMS = ("-m", "alias or chat or reasoning or tools", "--frank-timeout", "2")
ASKED = {"reasoning": True, "tools": {"trials": 1}}


def _chat(em, answer) -> None:
    """The chat route answering `answer(body)` (a Reply), plain and streamed alike."""
    em.route("POST", "/v1/chat/completions", lambda r: answer(r.body or {}))


def _healthy(body: dict) -> Reply:
    out = healthy_chat("reasoning")(body)
    return chat_stream(out) if body.get("stream") else Reply(200, out)


def _skips(result) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("SKIPPED")]


def _sent(em, path: str) -> int:
    return sum(r.path == path for r in em.requests)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_on_every_route_is_one_failure(fault, run_fleet):
    """The model list and the chat route break alike: the first of them fails with the fault
    and its fix, every other check is blocked pointing at it, and each route got one request."""
    make = FAULTS[fault]
    with Emulator("vllm", models=["m"]) as em:
        em.route("GET", "/v1/models", lambda r: make(None))
        _chat(em, lambda body: make(_healthy(body)))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect=ASKED), *CLAIMS)
        models, chats = _sent(em, "/v1/models"), _sent(em, "/v1/chat/completions")
    out = result.stdout.str()
    result.assert_outcomes(failed=1, skipped=len(_skips(result)))
    result.stdout.fnmatch_lines([
        "_*_ test_alias[[]ep[]] _*_",
        f"GET http://*/v1/models *; every request on every route tried broke so, {SAYS[fault]} "
        "(GET /v1/models: its first request*; POST /v1/chat/completions: its first request): "
        "a fault of the connection, not of the model; none more is sent to the endpoint, and "
        "its other checks are blocked",
        "  fix: *"])
    # the evidence, where it says more than the line (a status and a body's head before a cut)
    assert "reproduce: curl -sS -X GET http" in out or "frank evidence" not in out
    blocked = [line for line in _skips(result) if "broke alike" in line]
    assert len(blocked) >= 8, _skips(result)  # chat, reasoning (3), tools (4 and more)
    for line in blocked:
        assert re.search(rf"ep: every request on every route tried broke alike \({SAYS[fault]}\), "
                         r"see test_alias\[ep\]: GET /v1/models: ", line), line
    assert (models, chats) == (1, 1), (models, chats)  # one request per route, none after
    assert "Traceback" not in out and "INTERNALERROR" not in out


@pytest.mark.parametrize("fault", ["reset body", "gzip bomb"])
def test_a_fault_on_one_route_blocks_only_its_tests(fault, run_fleet):
    """The streamed chat route breaks, the plain one answers: the first streamed check fails
    with the fault, the other streamed checks are blocked, and every check that sends plain
    requests keeps its verdict."""
    make = FAULTS[fault]
    with Emulator("vllm", models=["m"]) as em:
        _chat(em, lambda body: make(_healthy(body)) if body.get("stream") else _healthy(body))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect=ASKED),
                           *CLAIMS)
        streams = sum(r.path == "/v1/chat/completions" and (r.body or {}).get("stream") is True
                      for r in em.requests)
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert len(failed) == 1 and "test_reasoning_streamed[ep]" in failed[0], failed
    result.stdout.fnmatch_lines([
        "_*_ test_reasoning_streamed[[]ep[]] _*_",
        f"POST http://*/v1/chat/completions *; every request on POST /v1/chat/completions "
        f"(streamed) broke so, {SAYS[fault]} (POST /v1/chat/completions (streamed): its first "
        f"{REPEATS} requests): a fault of the connection, not of the model; none more is sent "
        "there, and the checks that need it are blocked"])
    blocked = [line for line in _skips(result) if "broke alike" in line]
    assert blocked and all("see test_reasoning_streamed[ep]: POST /v1/chat/completions: " in line
                           for line in blocked), blocked
    assert any("test_tools_streamed[ep]" in line for line in blocked), blocked
    passed = {line.split("::")[-1] for line in result.stdout.lines if line.startswith("PASSED")}
    assert {"test_alias[ep]", "test_chat[ep]", "test_reasoning[ep]", "test_reasoning_off[ep]",
            "test_tools_required[ep]"} <= passed, passed
    assert streams == REPEATS  # the route's first two, then none


def test_one_fault_alone_blocks_nothing(run_fleet):
    """A connection reset once, on the chat route's first request, is that check's own
    failure: the route answers the next one whole, so it is sound and nothing is blocked."""
    first = []

    def answer(body):
        first.append(body)
        return broken("reset body", _healthy(body)) if len(first) == 1 else _healthy(body)

    with Emulator("vllm", models=["m"]) as em:
        _chat(em, answer)
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect=ASKED), *CLAIMS)
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert len(failed) == 1, failed
    # the one skip is a claim not asked (tools.parallel), nothing blocked
    assert all("is not set" in line for line in _skips(result)), _skips(result)
    result.stdout.fnmatch_lines(["*the server broke the connection: [[]Errno 104[]] Connection "
                                 "reset by peer*"])
    assert "every request on" not in result.stdout.str()


def test_a_healthy_endpoint_beside_a_broken_one_keeps_every_verdict(run_fleet):
    with Emulator("vllm", models=["m"]) as bad, Emulator("vllm", models=["m"]) as good:
        bad.route("GET", "/v1/models", lambda r: broken("reset body"))
        _chat(bad, lambda body: broken("reset body", _healthy(body)))
        serve_chat(good, healthy_chat("reasoning"))
        fleet = {"endpoints": {name: {"url": em.url, "engine": "vllm", "alias": "m",
                                      "expect": ASKED} for name, em in (("bad", bad),
                                                                        ("good", good))}}
        result = run_fleet(fleet, *CLAIMS)
    lines = result.stdout.lines
    good = [line for line in lines if line.startswith(("PASSED", "FAILED", "SKIPPED"))
            and "[good]" in line]
    # every check passes but the one not asked (tools.parallel)
    assert len(good) > 8 and all(line.startswith("PASSED") or "is not set" in line
                                 for line in good), good
    failed = [line for line in lines if line.startswith("FAILED")]
    assert len(failed) == 1 and "test_alias[bad]" in failed[0], failed
    assert all("bad: every request on every route tried broke alike" in line
               or "is not set" in line
               for line in lines if line.startswith("SKIPPED") and "[bad]" in line)
