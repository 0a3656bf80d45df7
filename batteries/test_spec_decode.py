"""spec_decode: speculative decoding drafts and its acceptance sits in the fleet's band."""

from pytest_frank.claims import battery

globals().update(battery("spec_decode"))
