"""vision against a real llama.cpp (xllamacpp) serving the self-test model with a real projector.

tests/projector.py writes a tiny LLaVA-style mmproj that llama.cpp's clip loader accepts: the
server advertises vision in /props, and an image request answers 200 with the image encoded
into the prompt (4 image tokens). The tiny text model cannot see, though: it says "Hello!"
whatever the image, so this real run shows the "image accepted, answer ignores it" fault, and
the check must call it a constant answer, not a missing projector. (The same model without a
projector, and its --mmproj diagnosis: tests/test_engine_battery_real.py.)
"""

import httpx
import pytest

from fleets import one_endpoint
from projector import write_projector


@pytest.fixture(scope="module")
def seeing_server(llama, tmp_path_factory):
    path = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj.gguf")
    return llama(model="selftest", mmproj=str(path))


def test_projector_loads_and_props_advertise_vision(seeing_server):
    props = httpx.get(f"{seeing_server.url}/props", timeout=10).json()
    assert props["modalities"]["vision"] is True


def test_accepted_image_with_constant_answer_fails_as_not_seeing(seeing_server, run_fleet):
    fleet = one_endpoint(seeing_server.url, alias="frank", expect={"vision": True})
    result = run_fleet(fleet, "-m", "vision")
    result.assert_outcomes(failed=2)  # data_url and bare base64
    for form in ("data_url", "base64"):
        result.stdout.fnmatch_lines([
            f"the model gives the same answer for a * and a * image ({form}): 'Hello!'; "
            "it does not see the image"])
    assert "no vision projector is loaded" not in result.stdout.str()

