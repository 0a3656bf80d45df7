"""fleet.yaml: loading, ${VAR}, defaults, and a usage error (never a traceback) for bad files."""

import pytest

from pytest_frank.claims import declared
from pytest_frank.fleet import load

pytestmark = pytest.mark.emulated

GOOD = """
defaults:
  engine: vllm
  ready_timeout: 5
  expect: {tools: {trials: 3}}
endpoints:
  frank-default-large:
    url: http://127.0.0.1:7770/v1
    engine: llamacpp
    alias: frank-default-large
    api_key: ${FRANK_LARGE_KEY}
    expect: {reasoning: true}
  small:
    url: http://127.0.0.1:52625
"""


def test_good_fleet_loads_with_defaults_and_env(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(GOOD)
    fleet = load(path, environ={"FRANK_LARGE_KEY": "sk-abc123"}, claims=declared())
    large, small = fleet["frank-default-large"], fleet["small"]
    assert large.engine == "llamacpp" and small.engine == "vllm"
    assert large.api_key == "sk-abc123" and "sk-abc123" not in repr(large)
    assert large.root == "http://127.0.0.1:7770" and large.api_base == "http://127.0.0.1:7770/v1"
    assert large.expect == {"tools": {"trials": 3}, "reasoning": True}
    assert large.ready_timeout == 5.0
    assert large.asks("reasoning") and large.asks("alias") and not small.asks("alias")
    assert small.options("tools").trials == 3 and small.options("tools").min_pass_rate == 1.0


def test_a_claims_options_are_read_back_by_their_class(tmp_path):
    """`Options.on(endpoint)`: the parsed options of the one claim that has that class."""
    from pytest_frank.claims import Options, perf, tools

    path = tmp_path / "fleet.yaml"
    path.write_text(GOOD)
    small = load(path, environ={"FRANK_LARGE_KEY": "k"}, claims=declared())["small"]
    assert tools.Options.on(small) is small.options("tools") and tools.Options.on(small).trials == 3
    assert perf.Options.on(small).runs == 3  # a claim not asked: its defaults
    with pytest.raises(LookupError, match="claims have options of class Options, not one"):
        Options.on(small)  # the plain class: the claims without options of their own share it
    unbound = load(path, environ={"FRANK_LARGE_KEY": "k"})["small"]
    with pytest.raises(LookupError, match="its claims were never read"):
        tools.Options.on(unbound)


def test_env_default_syntax(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("endpoints:\n  a: {url: 'http://${HOST:-127.0.0.1}:1', engine: openai}\n")
    assert load(path, environ={})["a"].url == "http://127.0.0.1:1"


BROKEN = {
    "bad-yaml": ("endpoints:\n  a: [unclosed\n", "not valid YAML"),
    "empty": ("", "the file is empty"),
    "not-a-mapping": ("- a\n- b\n", "top level must be a mapping"),
    "no-endpoints": ("defaults: {engine: vllm}\n", "'endpoints' is required but missing"),
    "unknown-key": ("endpoints:\n  a: {url: 'http://h:1', engine: vllm, urll: x}\n",
                    "endpoints.a: unknown key 'urll'"),
    "wrong-type": ("endpoints:\n  a: {url: 'http://h:1', engine: vllm, ready_timeout: soon}\n",
                   "endpoints.a.ready_timeout: expected a number, got string 'soon'"),
    "unknown-engine": ("endpoints:\n  a: {url: 'http://h:1', engine: llama}\n",
                       "endpoints.a.engine: 'llama' is not one of llamacpp"),
    "missing-env": ("endpoints:\n  a: {url: 'http://h:1', engine: vllm, api_key: '${NOPE_KEY}'}\n",
                    "endpoints.a.api_key: environment variable NOPE_KEY is not set"),
    "no-url": ("endpoints:\n  a: {engine: vllm}\n", "endpoints.a: needs a `url`"),
    "no-engine": ("endpoints:\n  a: {url: 'http://h:1'}\n", "missing required key `engine`"),
    "bad-url": ("endpoints:\n  a: {url: 'h:1', engine: vllm}\n", "'h:1' is not an http(s) URL"),
    "bad-name": ("endpoints:\n  'a b': {url: 'http://h:1', engine: vllm}\n",
                 "endpoint name 'a b' may hold only"),
    "unknown-expect": ("endpoints:\n  a: {url: 'http://h:1', engine: vllm, expect: {magic: 1}}\n",
                       "endpoints.a.expect: unknown key 'magic'"),
    "no-endpoints-listed": ("endpoints: {}\n", "endpoints: must not be empty"),
    # a claim's options, parsed by the claim: the same usage error, its key under expect
    "effort-from-no-file": ("endpoints:\n  a: {url: 'http://h:1', engine: vllm, alias: m, "
                            "expect: {reasoning_effort: {from: cfg/none.json}}}\n",
                            "endpoints.a.expect.reasoning_effort.from: "),
    "effort-from-no-model": ("endpoints:\n  a: {url: 'http://h:1', engine: vllm, "
                             "expect: {reasoning_effort: {from: models.json}}}\n",
                             "endpoints.a.expect.reasoning_effort: `from` needs the model's id"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_broken_fleet_is_a_usage_error(name, run_fleet):
    text, reason = BROKEN[name]
    result = run_fleet(text)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "pytest-frank: bad fleet file" in err and "fleet.yaml" in err
    assert reason in err
    assert "Traceback" not in err + result.stdout.str()
    assert "collected" not in result.stdout.str()  # nothing ran


def test_a_secret_in_a_bad_value_is_not_echoed(run_fleet):
    result = run_fleet("endpoints:\n  a: {url: 'http://h:1', engine: vllm, api_key: 1234567}\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "1234567" not in result.stderr.str() + result.stdout.str()
    assert "endpoints.a.api_key" in result.stderr.str()


def test_ini_key_names_the_fleet_and_option_wins(pytester):
    pytester.makefile(".yaml", good="endpoints:\n  a: {url: 'http://127.0.0.1:9', engine: vllm}\n")
    pytester.makefile(".yaml", other="endpoints:\n  b: {url: 'http://127.0.0.1:9', engine: vllm}\n")
    pytester.makeini("[pytest]\nfrank_endpoints = good.yaml\n")
    assert "test_health[a]" in pytester.runpytest("--collect-only", "-q").stdout.str()
    out = pytester.runpytest("--collect-only", "-q", "--endpoints", "other.yaml").stdout.str()
    assert "test_health[b]" in out and "test_health[a]" not in out


def test_without_endpoints_the_plugin_stays_out_of_the_way(pytester):
    pytester.makepyfile("def test_plain():\n    assert sorted([2, 1]) == [1, 2]\n")
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "frank:" not in result.stdout.str()


def test_frank_endpoint_selects_by_exact_name(run_fleet):
    fleet = {"endpoints": {"big": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                           "big-draft": {"url": "http://127.0.0.1:9", "engine": "vllm"}}}
    result = run_fleet(fleet, "--frank-endpoint", "big", "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids and all(line.endswith("[big]") for line in ids), ids
    unknown = run_fleet(fleet, "--frank-endpoint", "bigg")
    assert unknown.ret == 4
    unknown.stderr.fnmatch_lines(["*--frank-endpoint bigg: no such endpoint in the fleet (it has "
                                  "big, big-draft)"])


def test_a_present_claim_key_asks_the_claim_and_false_turns_it_off(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("endpoints:\n  a: {url: 'http://h:1', engine: vllm, expect: {reasoning: {}, "
                    "tools: false, perf: true}}\n")
    a = load(path, claims=declared())["a"]
    assert a.asks("reasoning") and a.asks("perf") and not a.asks("tools")
    assert a.options("reasoning").max_tokens == 512  # the defaults


def test_a_bad_value_from_the_environment_is_not_echoed(run_fleet):
    result = run_fleet("endpoints:\n  a: {url: 'http://h:1', engine: vllm, "
                       "ready_timeout: '${FRANK_SECRET_VALUE}'}\n",
                       env={"FRANK_SECRET_VALUE": "sk-live-0123456789abcdef"})
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*endpoints.a.ready_timeout: expected a number, got string "
                                 "(a value from the environment, not shown)"])
    assert "0123456789" not in result.stderr.str() + result.stdout.str()


def test_nested_anchors_are_refused_before_they_expand(run_fleet, tmp_path):
    levels = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
    result = run_fleet("l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + levels +
                       "endpoints: {a: {url: 'http://h:1', engine: vllm}}\n")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*its anchors and aliases expand past 100000 values*"])


def test_a_from_path_is_relative_to_the_fleet_file_and_named_when_missing(run_fleet, pytester):
    result = run_fleet("endpoints:\n  a: {url: 'http://h:1', engine: vllm, alias: m, "
                       "expect: {reasoning_effort: {from: cfg/none.json}}}\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    missing = pytester.path / "cfg" / "none.json"
    result.stderr.fnmatch_lines([f"*endpoints.a.expect.reasoning_effort.from: {missing}: cannot "
                                 "be read (No such file or directory)"])


def test_an_option_a_claim_does_not_take_is_a_usage_error_naming_it(run_fleet, pytester):
    """A claim registered with a schema looser than its options: the claim's own parsing names
    the key the schema let through, and the ones it takes."""
    pytester.makeconftest("""
from dataclasses import dataclass

from pytest_frank.claims import Options


@dataclass(frozen=True)
class Lora(Options):
    adapter: str = ""


def pytest_frank_claims(register):
    register("lora", "the LoRA adapter is loaded", options=Lora, schema={"type": "object"})
""")
    result = run_fleet("endpoints:\n  a: {url: 'http://h:1', engine: vllm, "
                       "expect: {lora: {adaptr: x.gguf}}}\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest-frank: bad fleet file",
                                 "*fleet.yaml: endpoints.a.expect.lora.adaptr: unknown option "
                                 "(known: adapter)"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_claim_registered_without_a_schema_is_validated_by_its_options(run_fleet, pytester):
    """A registered claim's options declared with `option`, as the battery's are: their schema
    is the claim's, so a wrong type is the fleet file's error before the claim parses it."""
    pytester.makeconftest("""
from dataclasses import dataclass

from pytest_frank.claims import Options, option


@dataclass(frozen=True)
class Lora(Options):
    adapter: str = option("", "the adapter file llama-server should load", minLength=1)


def pytest_frank_claims(register):
    register("lora", "the LoRA adapter is loaded", options=Lora)
""")
    result = run_fleet("endpoints:\n  a: {url: 'http://h:1', engine: vllm, "
                       "expect: {lora: {adapter: 3}}}\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fleet.yaml: endpoints.a.expect.lora.adapter: expected a "
                                 "string, got integer 3"])


def test_asked_claims_follow_the_registry(tmp_path):
    """health always, alias and serve by their own endpoint keys, the rest by expect: keys."""
    unit = tmp_path / "u.service"
    unit.write_text("[Service]\nExecStart=llama-server\n")
    path = tmp_path / "fleet.yaml"
    path.write_text("endpoints:\n"
                    "  bare: {url: 'http://h:1', engine: vllm}\n"
                    "  full: {url: 'http://h:1', engine: vllm, alias: m, serve: {unit: u.service},"
                    " expect: {tools: {}}}\n"
                    "  quiet: {url: 'http://h:1', engine: vllm, alias: m, serve: {unit: u.service},"
                    " expect: {health: false, serve: false, tools: false}}\n")
    fleet = load(path, claims=declared())
    asked = {name: {c for c in ("health", "alias", "serve", "tools") if ep.asks(c)}
             for name, ep in fleet.items()}
    assert asked == {"bare": {"health"}, "full": {"health", "alias", "serve", "tools"},
                     "quiet": {"alias"}}
    with pytest.raises(LookupError, match="claims were never read"):
        load(path)["bare"].asks("health")


def test_the_endpoint_fixture_calls_its_fleet_entry_entry(tmp_path):
    """`endpoint.entry` is the fleet entry; `.config`, its first name (documented for custom
    checks), still answers, with a deprecation warning: it read as pytest's config."""
    from pytest_frank.plugin.under_test import EndpointUnderTest
    from pytest_frank.runtime.target import Target

    path = tmp_path / "fleet.yaml"
    path.write_text("endpoints:\n  a: {url: 'http://127.0.0.1:9', engine: vllm}\n")
    entry = load(path)["a"]
    handle = EndpointUnderTest(Target(entry))
    assert handle.entry is entry
    with pytest.warns(DeprecationWarning, match="endpoint.entry"):
        assert handle.config is entry
