"""The request fields the reply contract judges (claims/contract): tool_choice validation,
response_format variants and the sampling fields. Their probes and judges are the contract's;
the checks are the params claim's, asked by its keys."""

from __future__ import annotations

from pytest_frank.claims import contract
from pytest_frank.claims.checks import Check

SHAPED = "where the API shape has the field"

VALIDATION = Check("test_params_validation", "params", contract.malformed_choices,
                   contract.judge_validation, applies=contract._asked("validation", False), when=SHAPED)
FORMAT_VARIANTS = Check("test_params_response_format_variants", "params",
                        contract.format_variants, contract.judge_format_variants,
                        applies=contract._asked("response_format_variants", False),
                        when=SHAPED)
SAMPLING = Check("test_params_sampling", "params", contract.sampled, contract.judge_sampling,
                 applies=contract._asked("sampling", True), when=SHAPED)
