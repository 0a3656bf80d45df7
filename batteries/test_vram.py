"""vram: the model's GGUF headers say what the endpoint needs; it fits the GPU with the headroom
fleet.yaml asks (offline, the CI gate), and the GPU memory used matches (live)."""

from pytest_frank.claims import battery

globals().update(battery("vram"))
