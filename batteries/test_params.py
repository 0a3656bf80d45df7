"""params: the request parameters clients rely on are honoured, not just accepted: one test per
parameter (a fleet turns off what its clients never send); the API shape says which exist."""

from pytest_frank.claims import contract, params
from pytest_frank.claims.checks import battery_test

test_params_max_tokens = battery_test(params.MAX_TOKENS)
test_params_stop = battery_test(params.STOP)
test_params_response_format = battery_test(params.RESPONSE_FORMAT)
test_params_logprobs = battery_test(params.LOGPROBS)
test_params_stream_usage = battery_test(params.STREAM_USAGE)
test_params_context_limit = battery_test(params.CONTEXT_LIMIT)
test_params_count_tokens = battery_test(params.COUNT_TOKENS)
test_params_system_message = battery_test(params.SYSTEM_MESSAGE)
test_params_prompt_tokens = battery_test(params.PROMPT_TOKENS)
test_params_validation = battery_test(contract.VALIDATION)
test_params_response_format_variants = battery_test(contract.FORMAT_VARIANTS)
test_params_sampling = battery_test(contract.SAMPLING)
