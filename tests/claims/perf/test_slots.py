"""slots: real llama.cpp slot shapes (/props, /slots) and an emulated vLLM's max_model_len; each
run also sends test_slots_context's prompt at 0.9 of the slot
(tests/claims/perf/test_slots_context_real.py
holds its own cases)."""

import shutil
import subprocess

import pytest

from fleets import one_endpoint

pytestmark = pytest.mark.real


@pytest.fixture
def run_fleet(run_fleet):
    """Only the slots claim (health still gates it)."""
    return lambda fleet, *args, **kw: run_fleet(fleet, "-m", "slots", *args, **kw)


def test_true_shape_passes(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096)  # not unified: each slot gets 2048
    result = run_fleet(one_endpoint(server.url, expect={"slots": {"count": 2, "ctx_per_slot": 2048}}))
    result.assert_outcomes(passed=2)


def test_unified_cache_gives_every_slot_the_whole_context(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096, kv_unified=True)
    result = run_fleet(one_endpoint(server.url, expect={"slots": {"count": 2, "ctx_per_slot": 4096}}))
    result.assert_outcomes(passed=2)


def test_parallel_dividing_the_context_is_named(llama, run_fleet):
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(one_endpoint(server.url, expect={"slots": {"count": 2, "ctx_per_slot": 4096}}))
    result.assert_outcomes(failed=2)  # the prompt at 0.9 of 4096 is refused by the 2048 slot
    result.stdout.fnmatch_lines([
        "*each slot gets 2048 tokens of context, 1/2 of the intended 4096: --parallel 2 divides*",
        "*fix: add --kv-unified (every slot then sees the whole --ctx-size), or multiply*",
        "*was refused: the slot holds 2048 tokens, not 4096 (400: request (3??? tokens) exceeds "
        "the available context size (2048 tokens)*",
    ])


def test_wrong_slot_count_names_the_flag(llama, run_fleet, pytester):
    server = llama(parallel=2, ctx_size=4096)
    result = run_fleet(one_endpoint(server.url, expect={"slots": {"count": 4}}),
                       "--frank-report=slots.md")
    result.assert_outcomes(failed=1, passed=1)  # the slot /props reports takes its prompt
    result.stdout.fnmatch_lines(["*2 slot(s) are served, 4 intended (/props total_slots*",
                                 "*fix: --parallel 4 --ctx-size 8192 (each of the 4 slots keeps "
                                 "2048 tokens; or --parallel 4 --kv-unified)"])
    # The reproduce line asks the route the count was read from (not the model list read after
    # it), and runs as pasted from the Markdown against the live server.
    report = (pytester.path / "slots.md").read_text()
    curl = report.split("  reproduce:\n\n  ```sh\n  ", 1)[1].split("\n  ```", 1)[0]
    assert curl.startswith(f"curl -sS -X GET {server.url}/props"), curl
    if shutil.which("curl"):
        ran = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
        assert ran.returncode == 0 and '"total_slots":2' in ran.stdout.replace(" ", ""), ran


def test_bad_slots_option_is_a_usage_error(run_fleet):
    result = run_fleet(one_endpoint("http://127.0.0.1:9", expect={"slots": {"cnt": 2}}))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*endpoints.ep.expect.slots: unknown key 'cnt'*"])


def test_a_launched_servers_reproduce_line_says_it_was_launched(run_fleet, pytester):
    """Its port was the run's own and it stopped with the run: the line says so first, as a
    shell comment, so it still runs as pasted once the server is up again."""
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "ready_timeout": 30,
                                  "launch": {"model": "selftest", "parallel": 2, "ctx_size": 4096},
                                  "expect": {"slots": {"count": 4}}}}}
    result = run_fleet(fleet, "--frank-report=slots.md")
    result.assert_outcomes(failed=1, passed=1)  # test_slots_context: the slot takes its prompt
    report = (pytester.path / "slots.md").read_text()
    curl = report.split("  reproduce:\n\n  ```sh\n  ", 1)[1].split("\n  ```", 1)[0]
    comment, line = curl.split("\n  ")
    assert comment == ("# ep was launched by this run (fleet.yaml launch:) on a port of its own "
                       "and stopped at its end: start it again, e.g. with launch.port set, and "
                       "use its port"), curl
    assert line.startswith("curl -sS -X GET http://127.0.0.1:") and "/props" in line, curl
