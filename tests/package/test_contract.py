"""One list per concept: the schema's claim keys are written from the claims' declarations (and
mkdocs.yml's claim pages), its engine and launch-key lists equal the code's, each claim's typed
options take exactly the keys the schema allows, and every battery test is one declared check."""

import ast
import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest
from test_docs import load_gen

from checkout import ROOT
import pytest_frank.batteries as battery
import pytest_frank.drivers
from pytest_frank.local import launch
from pytest_frank.claims.checks import Check
from pytest_frank.claims import CLAIMS, Options, built_in, options_type
from pytest_frank.drivers import DRIVERS
from pytest_frank.fleet import ENGINES, schema

pytestmark = pytest.mark.unit


def _defs():
    return schema()["$defs"]


def test_schema_claims_are_the_code_claims():
    expect = set(_defs()["expect"]["properties"])
    assert expect | {"alias"} == set(CLAIMS)  # alias is asked by the top-level `alias:` key


def test_schema_engines_are_the_drivers():
    from emulator import SHAPES

    assert _defs()["endpoint"]["properties"]["engine"]["enum"] == list(DRIVERS) == list(ENGINES)
    # every engine is emulated (its health and models answers) for the tests that take each one
    assert set(SHAPES) == set(DRIVERS), "tests/support/emulator.py SHAPES: add the engine's answers"


def test_schema_routes_are_the_wires_and_each_driver_holds_a_whole_wire_on_each_route():
    # A driver holds the wire of the route it generates on as a part (`driver.wire`), built as
    # it is made: on every route each engine's must answer the whole Wire protocol (mypy holds
    # the wire classes to it; this holds what each driver picks at run time), and no member of
    # the protocol may sit on the driver beside it, where nothing would read it.
    from pytest_frank.drivers.base import WIRES
    from pytest_frank.drivers.openai_chat import ChatWire
    from pytest_frank.drivers.protocols import Wire

    assert _defs()["endpoint"]["properties"]["api"]["enum"] == [ChatWire.api, *WIRES]
    members = {m: v for m, v in vars(Wire).items() if not m.startswith("_")}
    assert len(members) == 21
    for name, cls in DRIVERS.items():
        for api in (None, "chat", *WIRES):
            driver = cls().with_api(api)
            wire, on = driver.wire, f"{name} on {api or 'its own route'}"
            assert type(driver) in DRIVERS.values(), on  # a registered driver, none made here
            assert driver.api == wire.api == (api or cls().api), on
            for member, declared in members.items():
                value = getattr(wire, member, None)
                if isinstance(declared, property):
                    assert isinstance(value, (str, tuple, frozenset)), f"{on}: {member}"
                else:
                    assert callable(value), f"{on}: {member}"
            beside = sorted(set(dir(driver)) & set(members) - {"api"})
            assert beside == [], f"{on}: wire members on the driver: {beside}"


def test_an_engines_own_chat_facts_travel_with_its_chat_wire_only():
    from pytest_frank.drivers import driver_for

    llamacpp, vllm = driver_for("llamacpp"), driver_for("vllm")
    assert llamacpp.wire.image_forms == ("data_url", "base64")
    assert vllm.wire.reasoning_fields == ("reasoning", "reasoning_content")
    assert driver_for("openai").wire.reasoning_fields == ("reasoning_content", "reasoning")
    # on another route the route's own facts hold, the engine's stay
    on_messages = llamacpp.with_api("messages")
    assert on_messages.wire.image_forms == ("anthropic",)
    assert on_messages.template.history_reasoning_read == llamacpp.template.history_reasoning_read
    assert vllm.with_api("responses").wire.reasoning_fields == ("reasoning_text", "summary_text")
    # a proxy's other routes are the generic shape's
    assert type(driver_for("anthropic").with_api("chat")).__name__ == "OpenAIDriver"


def test_schema_launch_keys_are_the_launcher_keys():
    assert set(_defs()["launch"]["properties"]) == launch.KEYS


def test_the_schemas_claim_keys_are_written_from_the_claims():
    # The options' `option`s are the schema: fleet.schema.json holds what docs/gen.py writes.
    gen = load_gen()
    text = (ROOT / "pytest_frank" / "fleet" / "fleet.schema.json").read_text(encoding="utf-8")
    assert gen.schema_text(gen.with_expect(json.loads(text))) == text, \
        "run `python docs/gen.py`: fleet.schema.json's `$defs.expect` is stale"


def test_the_schemas_engines_are_written_from_the_driver_registry():
    # An engine is declared once, by its driver: the schema (and fleet.ENGINES, read from it)
    # holds what docs/gen.py writes from DRIVERS.
    gen = load_gen()
    text = (ROOT / "pytest_frank" / "fleet" / "fleet.schema.json").read_text(encoding="utf-8")
    assert gen.schema_text(gen.with_engines(json.loads(text))) == text, \
        "run `python docs/gen.py`: fleet.schema.json's endpoint `engine` list is stale"


def test_the_docs_nav_lists_each_claims_page_in_order():
    gen = load_gen()
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert gen.nav(config) == config, "run `python docs/gen.py`: mkdocs.yml's claim pages are stale"
    for claim in built_in().values():
        assert (ROOT / "docs" / claim.page).is_file(), claim.page
        assert f"- {claim.name}: {claim.page}" in config


def test_each_claim_is_declared_once_in_its_own_module():
    declared = built_in()
    assert list(declared) == [c for c in CLAIMS if c in declared]  # the reports' order
    assert len({c.order for c in declared.values()}) == len(declared)
    for name, claim in declared.items():
        module = importlib.import_module(f"pytest_frank.claims.{name}")
        assert module.CLAIM is claim and options_type(name) is claim.options
        assert claim.options is module.Options or claim.options is Options


@pytest.mark.parametrize("claim", sorted(set(CLAIMS) - {"health", "alias", "reasoning_effort",
                                                        "clients"}))
def test_claim_options_take_the_schema_keys(claim):
    # Only the fields declared with `option` are fleet.yaml keys; every other field is filled in.
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


def _declared_checks():
    """(module, Check) for each Check a module of pytest_frank/claims holds at its top level."""
    import pytest_frank.claims as claims

    for info in pkgutil.walk_packages(claims.__path__, f"{claims.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Check):
                yield module.__name__, value


def test_each_check_lives_in_its_claims_package_and_is_listed_by_it():
    # A check lives with its claim: declared in claims/<claim>/ and named by its CLAIM's tests,
    # from which its battery is made; a Check left out would never run.
    listed = {id(c): name for name, claim in built_in().items() for c in claim.checks()}
    seen = list(_declared_checks())
    assert len(seen) >= 50
    for module, check in seen:
        home = f"pytest_frank.claims.{check.claim}"
        assert module == home or module.startswith(f"{home}."), \
            f"{check.test} is declared in {module}, outside its claim's package {home}"
        assert listed.get(id(check)) == check.claim, f"{check.test} is not in {home}.CLAIM.tests"
    assert len(listed) == len({id(c) for _, c in seen})


def test_each_claims_battery_makes_a_test_of_each_of_its_checks_in_its_order():
    tests: dict[str, list[str]] = {}
    for _, name, obj in _battery_tests():
        tests.setdefault(obj.frank_check.claim, []).append(name)
    for name, claim in built_in().items():
        assert tests.get(name, []) == [c.test for c in claim.checks()], name


def test_every_battery_test_is_a_declared_check_named_for_itself():
    seen = list(_battery_tests())
    assert len(seen) >= 20
    for module, name, obj in seen:
        check = getattr(obj, "frank_check", None)
        assert isinstance(check, Check), f"{module.__name__}.{name} is not a battery_test(Check)"
        assert check.test == name and check.claim in CLAIMS
        assert module.__name__.endswith(f"test_{check.claim}")


# -- drivers know engines, claims know claims ------------------------------------------------------
ADVICE = re.compile(r"(_fix|_fixes|_hint|_advice|_said)$|^known_(errors|fix)$")


def advice_in(source: str) -> list[str]:
    """What of a driver module's source is a claim's advice: a class member named as a fix or a
    hint, or an import of a claim (a claim's words belong to the claim; a driver lends facts)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                targets = ([t for t in item.targets if isinstance(t, ast.Name)]
                           if isinstance(item, ast.Assign) else
                           [item.target] if isinstance(item, ast.AnnAssign) else [])
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                names += [item.name] if isinstance(item, ast.FunctionDef) else []
                found += [f"{node.name}.{n}" for n in names if ADVICE.search(n)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names]
            found += [f"imports {m}" for m in modules if m.startswith("pytest_frank.claims")]
    return found


def test_no_driver_holds_a_claims_advice():
    modules = sorted(Path(pytest_frank.drivers.__file__).parent.glob("*.py"))
    assert len(modules) >= 8
    for path in modules:
        assert advice_in(path.read_text(encoding="utf-8")) == [], path.name
    for name, cls in DRIVERS.items():  # what a driver answers, inherited or held on a route
        for api in (None, "chat", "messages", "responses"):
            driver = cls().with_api(api)
            members = [m for m in dir(driver) + dir(driver.wire) if ADVICE.search(m)]
            assert members == [], f"{name} on {api}: {members}"


@pytest.mark.parametrize("planted, found", [
    ("class D(Driver):\n    spec_low_fix = 'lower --draft-max'\n", ["D.spec_low_fix"]),
    ("class D(Driver):\n    slow_hint: str = 'more threads'\n", ["D.slow_hint"]),
    ("class D(Driver):\n    def alias_fix(self, alias):\n        return alias\n", ["D.alias_fix"]),
    ("from pytest_frank.claims.tools import tool_parser_fix\n",
     ["imports pytest_frank.claims.tools"]),
    ("import pytest_frank.claims.params\n", ["imports pytest_frank.claims.params"]),
    ("class D(Driver):\n    flags = {}\n    start = 'start X with '\n", []),  # facts stay
])
def test_the_advice_guard_sees_a_planted_fix(planted, found):
    assert advice_in(planted) == found


def test_each_fix_by_engine_names_an_engine_and_a_route():
    # A misspelt engine in a claim's advice would never be said: the generic one would. The entries
    # are keyed by driver class, so the type checker sees them too; this sees a string key.
    from pytest_frank.drivers.base import WIRES

    claims = Path(pytest_frank.drivers.__file__).parent.parent / "claims"
    calls = [node for path in claims.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "advise"]
    assert len(calls) >= 30
    classes = {cls.__name__ for cls in DRIVERS.values()}
    for call in calls:
        assert {k.arg for k in call.keywords} <= {"api"}, f"line {call.lineno}"
        for by_type in call.args[2:]:
            assert isinstance(by_type, ast.Dict), f"line {call.lineno}"
            keys = {getattr(k, "id", None) for k in by_type.keys}
            assert keys <= classes, f"line {call.lineno}: {sorted(map(str, keys - classes))}"
        routes = [k.value for k in call.keywords if k.arg == "api"]
        for route in routes:
            assert isinstance(route, ast.Dict)
            assert {k.value for k in route.keys if isinstance(k, ast.Constant)} <= set(WIRES)
