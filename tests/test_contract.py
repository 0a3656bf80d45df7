"""One list per concept: the schema's claim, engine and launch-key lists equal the code's, each
claim's typed options take exactly the keys the schema allows, and every battery test is one
declared check."""

import importlib
import pkgutil

import pytest

import pytest_frank.batteries as battery
from pytest_frank.local import launch
from pytest_frank.checks import Check
from pytest_frank.claims import CLAIMS, options_type
from pytest_frank.drivers import DRIVERS
from pytest_frank.fleet import ENGINES, schema

pytestmark = pytest.mark.unit


def _defs():
    return schema()["$defs"]


def test_schema_claims_are_the_code_claims():
    expect = set(_defs()["expect"]["properties"])
    assert expect | {"alias"} == set(CLAIMS)  # alias is asked by the top-level `alias:` key


def test_schema_engines_are_the_drivers():
    assert _defs()["endpoint"]["properties"]["engine"]["enum"] == list(DRIVERS) == list(ENGINES)


def test_schema_routes_are_the_wires_and_each_wire_replaces_every_route_member():
    # A wire may be composed onto any engine: one that left a member out would generate with
    # the engine's own (chat) member on another route.
    from pytest_frank.drivers.base import Driver, _wires

    wires = _wires()
    assert _defs()["endpoint"]["properties"]["api"]["enum"] == [Driver.api, *wires]
    members = [{m for m in vars(w) if not m.startswith("__")} for w in wires.values()]
    for wire, own in zip(wires, members):
        assert own >= members[0], f"{wire} lacks {sorted(members[0] - own)}"
        assert {m for m in own if hasattr(Driver, m)} == own, f"{wire}: members no route has"


def test_schema_launch_keys_are_the_launcher_keys():
    assert set(_defs()["launch"]["properties"]) == launch.KEYS


@pytest.mark.parametrize("claim", sorted(set(CLAIMS) - {"health", "alias", "reasoning_effort",
                                                        "clients"}))
def test_claim_options_take_the_schema_keys(claim):
    allowed = set(_defs()["expect"]["properties"][claim].get("properties", {}))
    assert options_type(claim).keys() == allowed


def test_reasoning_effort_options_take_every_form():
    forms = _defs()["expect"]["properties"]["reasoning_effort"]["oneOf"]
    opts = options_type("reasoning_effort")
    assert opts.keys() - {"source"} == set(forms[1]["properties"])
    assert set(forms[2]["properties"]) - set(opts.FROM_KEYS) < opts.keys()
    assert opts.from_fleet({"low": "low"}).map == {"low": "low"}
    assert opts.from_fleet({"map": {"high": "xhigh"}, "unmapped": True}).unmapped is True


def test_clients_options_take_every_client_and_its_keys():
    from pytest_frank.claims.clients import CHOICES
    from pytest_frank.claims.clients.registry import PROFILES

    named = _defs()["expect"]["properties"]["clients"]["items"]
    assert named["then"]["enum"] == list(PROFILES) == named["else"]["propertyNames"]["enum"]
    assert set(named["else"]["additionalProperties"]["properties"]) == set(CHOICES)
    opts = options_type("clients")
    assert [n for n, _ in opts.from_fleet(True).clients] == list(PROFILES)
    parsed = opts.from_fleet(["pi", {"claude_code": {"request_kb": 8, "model": "claude-x"}}])
    assert parsed.of("claude_code").request_kb == 8 and [n for n, _ in parsed.clients] == [
        "pi", "claude_code"]


def _battery_tests():
    for info in pkgutil.iter_modules(battery.__path__):
        module = importlib.import_module(f"{battery.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if name.startswith("test_"):
                yield module, name, obj


def test_every_battery_test_is_a_declared_check_named_for_itself():
    seen = list(_battery_tests())
    assert len(seen) >= 20
    for module, name, obj in seen:
        check = getattr(obj, "frank_check", None)
        assert isinstance(check, Check), f"{module.__name__}.{name} is not a battery_test(Check)"
        assert check.test == name and check.claim in CLAIMS
        assert module.__name__.endswith(f"test_{check.claim}")
