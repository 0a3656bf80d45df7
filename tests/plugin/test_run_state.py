"""What a run registers and learns is that run's own (pytest_frank.base.state): two pytest runs in one
process (pytester's in-process runs inside this suite's) never see each other's claims, secrets
or environment values, and none outlives its run."""

import pytest

from pytest_frank.base import redact, state
from pytest_frank.claims import BUILT_IN, CLAIMS
from pytest_frank.fleet import FleetError, load

pytestmark = pytest.mark.emulated  # pytester's in-process runs, no endpoint

SECRET = "run-one-only-7f3a9c"

# Each in-process run reports, from inside it, what it sees of the claim and of the secret.
SEEN = """
from pytest_frank.base import redact
from pytest_frank.claims import CLAIMS

def test_what_this_run_sees():
    print(f"SEES lora={'lora' in CLAIMS} masked={redact.scrub('{secret}') != '{secret}'}")
""".replace("{secret}", SECRET)


def _seen(result) -> str:
    return next(line[line.index("SEES"):] for line in result.outlines if "SEES" in line)


def _run(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-s",
                              "-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def test_two_runs_in_one_process_see_only_their_own(pytester, monkeypatch):
    pytester.makepyfile(test_seen=SEEN)
    pytester.makeconftest("def pytest_frank_claims(register):\n"
                          "    register('lora', 'the adapter answers')\n")
    monkeypatch.setenv("FRANK_TEST_RUN_ONE", SECRET)
    first = _run(pytester, "--frank-mask-env", "FRANK_TEST_RUN_ONE")
    first.assert_outcomes(passed=1)
    assert _seen(first) == "SEES lora=True masked=True"
    # The outer run (this suite's) saw neither while the first ran, nor after it.
    assert "lora" not in CLAIMS and redact.scrub(SECRET) == SECRET

    (pytester.path / "conftest.py").unlink()
    second = _run(pytester)
    second.assert_outcomes(passed=1)
    assert _seen(second) == "SEES lora=False masked=False"


def test_fresh_gives_a_block_a_state_of_its_own_and_puts_the_last_one_back():
    before = state.current()
    with state.fresh() as outer:
        redact.register(SECRET)
        redact.register_variable("named-value-0042", "NAMED")
        assert state.current() is outer and redact.scrub(SECRET) == "***"
        with state.fresh():
            assert redact.scrub(SECRET) == SECRET  # nothing registered in it yet
            assert redact.named_parts("named-value-0042") == [("named-value-0042", False)]
        assert redact.scrub(SECRET) == "***"
        assert redact.named_parts("named-value-0042") == [("NAMED", True)]
    assert state.current() is before and redact.scrub(SECRET) == SECRET


def test_claims_registered_in_a_run_go_with_it():
    from pytest_frank import claims

    with state.fresh():
        claims.register("lora", "the adapter answers")
        assert list(CLAIMS)[-1] == "lora" and CLAIMS["lora"] == "the adapter answers"
        with pytest.raises(claims.ClaimError, match="registered twice"):
            claims.register("lora", "again")
    assert "lora" not in CLAIMS and set(CLAIMS) == BUILT_IN
    with state.fresh():
        claims.register("lora", "registered again by the next run")  # not twice: a new run
    with pytest.raises(TypeError):
        CLAIMS["lora"] = "x"  # type: ignore[index]  # read-only: a run registers its own


def test_a_value_from_the_environment_is_hidden_in_that_load_only(tmp_path, fresh_state):
    """A usage error never echoes a ${VAR} value (it may be a key); a later fleet file that
    writes the same text itself is shown as written: what one load read is not another's."""
    value = "not-a-number-8e1b"
    path = tmp_path / "fleet.yaml"
    path.write_text("endpoints:\n  a: {url: 'http://127.0.0.1:9', engine: vllm, "
                    "timeout: '${FRANK_TEST_TIMEOUT}'}\n")
    with pytest.raises(FleetError) as from_env:
        load(path, environ={"FRANK_TEST_TIMEOUT": value})
    assert value not in str(from_env.value) and "from the environment" in str(from_env.value)
    path.write_text(f"endpoints:\n  a: {{url: 'http://127.0.0.1:9', engine: vllm, "
                    f"timeout: '{value}'}}\n")
    with pytest.raises(FleetError) as written:
        load(path, environ={})
    assert value in str(written.value), written.value
