"""The serve gate on real files llama.cpp serves (selftest:hybrid, Qwen3.5's layout with its own
MTP head, and hybrid_plain, the same model without it), not only on written headers: the -mtp
file needs --spec-type draft-mtp alone; a draft pointed at it loads it twice; draft-mtp on the
file without a head has nothing to draft from. No server: the gate reads the files."""

from __future__ import annotations

import shutil

import pytest

from pytest_frank.claims import bind
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.local.selftest_model import model_path
from pytest_frank.serve import findings, read

pytestmark = pytest.mark.unit

MTP, PLAIN = str(model_path("hybrid")), str(model_path("hybrid_plain"))


def gate(*args: str) -> list:
    line = ("llama-server --host 127.0.0.1 --port 7770 --alias hybrid --jinja --metrics "
            + " ".join(args))
    endpoint = bind(Endpoint("hybrid", "llamacpp", url="http://127.0.0.1:7770",
                             alias="hybrid", expect={"spec_decode": True}))
    return findings(read({"command": line}), endpoint, driver_for("llamacpp"))


def test_the_mtp_file_with_draft_mtp_alone_passes():
    assert gate("-m", MTP, "--spec-type", "draft-mtp") == []


@pytest.mark.parametrize("flag", ["--model-draft", "-md"])
def test_a_draft_at_the_mtp_file_itself_is_loaded_twice(flag):
    (found,) = gate("-m", MTP, "--spec-type", "draft-mtp", flag, MTP)
    assert found.severity == "fail"
    assert found.what == (f"--model-draft {MTP} is the served model itself, a whole model "
                          "carrying an MTP head (8 layers + 1 NextN): the model loads a second "
                          "time (twice the VRAM) for a head it already has")
    assert found.fix.startswith("drop --model-draft and use --spec-type draft-mtp alone")


def test_a_copy_of_the_mtp_file_as_draft_is_loaded_twice_too(tmp_path):
    copy = shutil.copy(MTP, tmp_path / "Qwen3.5-mtp-copy.gguf")
    (found,) = gate("-m", MTP, "--spec-type", "draft-mtp", "-md", str(copy))
    assert "is a whole model carrying an MTP head (8 layers + 1 NextN)" in found.what


def test_draft_mtp_on_the_file_without_a_head_names_it_and_the_fix():
    (found,) = gate("-m", PLAIN, "--spec-type", "draft-mtp")
    assert found.severity == "fail"
    assert found.what == (f"--spec-type draft-mtp, but the model file {PLAIN} has no MTP head "
                          "(nextn_predict_layers 0)")
    assert "-mtp GGUF" in found.fix


def test_the_file_without_a_head_served_without_drafting_asks_nothing_of_it():
    endpoint = bind(Endpoint("hybrid", "llamacpp", url="http://127.0.0.1:7770", alias="hybrid"))
    line = f"llama-server -m {PLAIN} --host 127.0.0.1 --port 7770 --alias hybrid"
    assert findings(read({"command": line}), endpoint, driver_for("llamacpp")) == []
