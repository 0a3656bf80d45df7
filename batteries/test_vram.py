"""vram: the model's GGUF headers say what the endpoint needs; it fits the GPU with the headroom
fleet.yaml asks (offline, the CI gate), and the GPU memory used matches (live)."""

import pytest

from pytest_frank.claims import vram


@pytest.mark.vram
@pytest.mark.offline
def test_vram_fits(endpoint, pytestconfig):
    live = not pytestconfig.getoption("frank_offline")
    vram.judge_fit(vram.modelled(endpoint, live=live))


@pytest.mark.vram
def test_vram(endpoint):
    vram.judge_live(endpoint, endpoint.probe(vram.probe))
