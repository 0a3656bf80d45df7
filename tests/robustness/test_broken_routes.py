"""When a transport fault is one root cause (runtime.broken.Breakage), over exchanges built by
hand: a route whose first requests broke alike, or every route tried on its first; never a
sound route, one fault alone, faults of two kinds, or the health route."""

import pytest

from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.broken import Breakage
from pytest_frank.transport import http

pytestmark = pytest.mark.unit

ROOT = "http://h:1"
ERRORS = {http.RESET: "the server broke the connection: [Errno 104] Connection reset by peer",
          http.OVER_CAP: "the answer ran past 4194304 bytes; read no further"}


def _ex(route: str, fault: str | None = None, status: int | None = 200) -> http.Exchange:
    method, path = route.split(" ", 1)
    streamed = path.endswith(" (streamed)")
    body = {"stream": True} if streamed else ({} if method == "POST" else None)
    return http.Exchange(method, ROOT + path.removesuffix(" (streamed)"), request_json=body,
                         status=None if fault == http.RESET else status,
                         error=ERRORS.get(fault or ""), fault=fault)


def _heard(*answers: tuple[str, str | None]) -> Breakage:
    seen = Breakage(Endpoint(name="ep", engine="vllm", url=ROOT), driver_for("vllm"))
    for n, (route, fault) in enumerate(answers):
        seen.heard(_ex(route, fault), ((f"probe{n}", None),), (f"probe{n}", None))
    return seen


CHAT, STREAM, MODELS = ("POST /v1/chat/completions", "POST /v1/chat/completions (streamed)",
                        "GET /v1/models")


def test_a_routes_first_two_requests_broken_alike_close_it():
    seen = _heard((MODELS, None), (CHAT, http.OVER_CAP), (CHAT, http.OVER_CAP))
    broken = seen.closed(CHAT)
    assert broken is not None and seen.closed(MODELS) is None and seen.closed(STREAM) is None
    assert broken.key == ("probe1", None)  # the first that met it fails; the second is blocked
    assert set(seen.met) == {("probe1", None), ("probe2", None)}
    assert broken.where == CHAT and not broken.everywhere
    assert broken.failure.startswith(f"POST {ROOT}/v1/chat/completions answered 200")
    assert "(POST /v1/chat/completions: its first 2 requests)" in broken.failure


def test_plain_and_streamed_broken_alike_are_one_cause():
    seen = _heard((MODELS, None), (CHAT, http.RESET), (CHAT, http.RESET), (STREAM, http.RESET),
                  (STREAM, http.RESET))
    assert seen.closed(CHAT) is seen.closed(STREAM) is not None
    assert len(seen.broken) == 1
    assert seen.closed(CHAT).where == "POST /v1/chat/completions (plain and streamed)"


def test_every_route_tried_broken_on_its_first_request_closes_the_endpoint():
    seen = _heard((MODELS, http.RESET), (CHAT, http.RESET))
    broken = seen.closed(None)
    assert broken is not None and broken.everywhere and broken.where == "every route tried"
    assert seen.closed("GET /metrics") is broken  # a route not tried yet is not sent either
    assert broken.key == ("probe0", None)


@pytest.mark.parametrize("answers", [
    ((CHAT, http.RESET), (CHAT, None), (CHAT, http.RESET)),  # answered whole between: sound
    ((CHAT, None), (CHAT, http.RESET), (CHAT, http.RESET)),  # answered whole first: sound
    ((CHAT, http.RESET), (CHAT, http.OVER_CAP)),  # two kinds: each its own
    ((CHAT, http.RESET),),  # one alone
    ((MODELS, None), (CHAT, http.RESET), (STREAM, http.RESET)),  # a route answered 2xx
    (("GET /health", http.RESET), ("GET /health", http.RESET), (CHAT, http.RESET)),  # health's own
], ids=["between", "after", "two kinds", "alone", "models answered", "health"])
def test_what_is_not_one_cause_closes_nothing(answers):
    seen = _heard(*answers)
    assert not seen.broken and not seen.met
    assert seen.closed(CHAT) is seen.closed(None) is None
