"""A Target is built whole by its one constructor from its fleet entry and what the session's
endpoints share (`Fleetwide`): the session sets nothing on it afterwards, and its slots take no
attribute it does not declare."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_frank.claims import bind
from pytest_frank.fleet import Endpoint
from pytest_frank.runtime.session import FrankSession
from pytest_frank.runtime.target import Target

pytestmark = pytest.mark.unit


def _fleet() -> dict[str, Endpoint]:
    return {
        "chat": bind(Endpoint("chat", "llamacpp", url="http://10.0.0.5:8080", concurrency=4)),
        "route": bind(Endpoint("route", "vllm", url="http://10.0.0.5:8080/v1", concurrency=2)),
        "other": bind(Endpoint("other", "llamacpp", url="http://10.0.0.6:8080", concurrency=3)),
    }


def test_the_session_builds_each_target_whole_with_what_the_fleet_shares():
    baseline = SimpleNamespace(rows=[SimpleNamespace(endpoint="chat", test="a"),
                                     SimpleNamespace(endpoint="other", test="b")])
    frank = FrankSession(_fleet(), 30.0, offline=True, baseline=baseline)  # type: ignore[arg-type]
    chat, route, other = (frank.targets[n] for n in ("chat", "route", "other"))
    # one server's names share its limiter, at the fewest requests any of them allows
    assert chat.pacing.limiter is route.pacing.limiter and chat.pacing.limiter.limit == 2
    assert other.pacing.limiter is not chat.pacing.limiter and other.pacing.limiter.limit == 3
    assert all(t.stop is frank.stop and t.offline for t in frank.targets.values())
    assert [r.test for r in chat.baseline] == ["a"] and route.baseline == []
    assert chat.peer("other") is other and chat.peer("missing") is None


def test_a_target_takes_no_attribute_it_does_not_declare():
    target = Target(Endpoint("ep", "llamacpp", url="http://127.0.0.1:1"))
    with pytest.raises(AttributeError):
        target.peers = {}  # type: ignore[attr-defined]
    assert target.stop is not None and target.offline is False and target.baseline == []
