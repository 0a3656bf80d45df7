"""The vram plan's settings from where they are written: expect.vram's keys and a `launch:`
block, as the memory model reads them (no server: the launch block is only read)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_frank.claims import vram
from pytest_frank.vram.plan import PlanError, make_plan

pytestmark = pytest.mark.unit


def test_draft_max_reaches_the_settings():
    assert make_plan({"ctx_size": 4096}, "m.gguf").settings.draft_max == 3
    assert make_plan({"ctx_size": 4096, "draft_max": 1}, "m.gguf").settings.draft_max == 1
    with pytest.raises(PlanError, match="draft_max -1"):
        make_plan({"ctx_size": 4096, "draft_max": -1}, "m.gguf")


def launched(**spec) -> dict:
    endpoint = SimpleNamespace(launch={"model": "selftest:hybrid", **spec})
    return vram._launched(SimpleNamespace(endpoint=endpoint))


def test_a_launch_drafts_with_the_head_only_under_draft_mtp():
    mtp = launched(spec_type="draft-mtp", draft_max=2)
    assert (mtp["mtp"], mtp["draft_max"]) == (True, 2)
    plain = launched()
    assert plain["mtp"] is False and "draft_max" not in plain
    assert make_plan(plain, plain["model"]).settings.draft_max == 3
