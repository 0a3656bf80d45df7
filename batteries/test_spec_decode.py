"""spec_decode: speculative decoding drafts and its acceptance sits in the fleet's band."""

from pytest_frank.claims import spec_decode
from pytest_frank.claims.checks import battery_test

test_spec_decode = battery_test(spec_decode.SPEC_DECODE)
test_spec_decode_lossless = battery_test(spec_decode.LOSSLESS)
