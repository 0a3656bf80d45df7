"""fingerprint: fixed greedy prompts' first tokens and logprobs, recorded for `--frank-baseline`
to compare: the endpoint still computes the same model after a config change."""

from pytest_frank.claims import battery

globals().update(battery("fingerprint"))
