"""vision: the model sees the image it is sent, in each image form the endpoint speaks."""

import pytest

from pytest_frank.claims import vision
from pytest_frank.drivers import driver_for


def frank_cases(endpoint_config):
    """One test per image form: data_url, base64 (llama.cpp), anthropic (Messages proxies)."""
    if not endpoint_config.asks("vision"):
        return []  # one test, skipped as not asked
    options = endpoint_config.options("vision")
    return [(form, form) for form in vision.forms(driver_for(endpoint_config.engine), options)]


@pytest.mark.vision
def test_vision(endpoint, case):
    observed = endpoint.probe(vision.probe)
    endpoint.exchanges += observed.evidence(case)  # this form's requests, not the others'
    for shown in observed.forms.get(case, []):
        endpoint.attach(f"{case}-{shown.colour}.png", "image/png", shown.png_b64)
    vision.judge(observed, case, endpoint.driver)
