"""spec_decode: speculative decoding drafts and its acceptance sits in the fleet's band."""

import pytest

from pytest_frank.claims import spec_decode


@pytest.mark.spec_decode
def test_spec_decode(endpoint):
    spec_decode.judge(endpoint.probe(spec_decode.probe), endpoint.driver,
                      endpoint.config.options("spec_decode"), endpoint.note)
