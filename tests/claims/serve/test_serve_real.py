"""serve against a real llama.cpp: a `launch:`ed server whose serve command was edited but never
restarted shows as drift; the command it runs passes; the config gate reads the same fleet."""

import pytest

from pytest_frank.local.selftest_model import model_path

pytestmark = pytest.mark.real

LAUNCH = {"model": "selftest", "alias": "frank-serve", "ctx_size": 4096, "parallel": 1,
          "metrics": True}


def fleet(command: str) -> dict:
    return {"endpoints": {"ep": {"engine": "llamacpp", "alias": "frank-serve", "ready_timeout": 30,
                                 "launch": LAUNCH, "serve": {"command": command}}}}


def _command(ctx: int, parallel: int = 1) -> str:
    return (f"llama-server -m {model_path('default')} --ctx-size {ctx} --parallel {parallel} "
            f"--alias frank-serve --metrics")


def test_the_command_it_runs_shows_no_drift(run_fleet):
    pytest.importorskip("xllamacpp")
    result = run_fleet(fleet(_command(4096)), "-k", "serve_drift")
    result.assert_outcomes(passed=1)


def test_an_unrestarted_context_edit_is_drift(run_fleet):
    pytest.importorskip("xllamacpp")
    result = run_fleet(fleet(_command(8192)), "-k", "serve_drift")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "serve.command:*: the serve command asks ctx 8192, the server runs 4096: the service "
        "was not restarted since the edit",
        "  fix: restart the server with the current command"])


def test_an_unrestarted_slot_edit_is_drift(run_fleet):
    pytest.importorskip("xllamacpp")
    result = run_fleet(fleet(_command(4096, parallel=2)), "-k", "serve_drift")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the serve command asks 2 slots, the server runs 1*"])


def test_the_offline_gate_reads_the_command_without_the_server(run_fleet):
    result = run_fleet(fleet(_command(4096).replace("--metrics", "")
                             .replace(" --alias frank-serve", "")), "--frank-offline")
    result.assert_outcomes(failed=1)  # vram is not asked, so not collected
    result.stdout.fnmatch_lines(["serve.command:1: fleet.yaml calls the model 'frank-serve', but "
                                 "the serve command serves it as the model path *",
                                 "  fix: --alias frank-serve"])
