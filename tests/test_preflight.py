"""`frank preflight` verdicts on the self-test GGUF (2 attention layers x 4 KV heads x 16 dim:
512 B of f16 KV per token, 0.35 MiB of weights, trained context 8192): the exit status says
whether anything fits, a bad --ctx is a one-line usage error, a shortfall never prints as a
negative figure, and a context past the trained one is warned about."""

from __future__ import annotations

import json
import re

import pytest

from pytest_frank.local import selftest_model
from pytest_frank.vram import preflight

TINY_GPU = ["--gpu-mib", "2", "--fixed-mib", "1"]  # 1 MiB left for weights and KV


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(selftest_model.write_model(tmp_path_factory.mktemp("m") / "selftest.gguf"))


def run(capsys, *argv):
    code = preflight.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_fits_exits_1_and_says_so(model, capsys):
    code, out, err = run(capsys, model, "--ctx", "4096,16384", *TINY_GPU)
    assert code == 1
    assert err.strip() == ("nothing fits: none of the contexts asked (4096, 16384) fits a 2 MiB "
                           "GPU")
    assert out.count("does not fit: ctx") == 2


def test_nothing_fits_without_ctx_exits_1(model, capsys):
    code, out, err = run(capsys, model, "--gpu-mib", "1", "--fixed-mib", "1")
    assert code == 1
    assert "max context           none: even 1024 tokens do not fit" in out
    assert err.strip() == "nothing fits: not even 1024 tokens of context fit a 1 MiB GPU"


def test_headroom_is_named_when_it_is_what_does_not_fit(model, capsys):
    code, out, err = run(capsys, model, "--gpu-mib", "3", "--fixed-mib", "1",
                         "--headroom-mib", "2")
    assert code == 1
    assert "none: even 1024 tokens leave less than 2 MiB free" in out
    assert err.strip().endswith("fit a 3 MiB GPU with 2 MiB kept free")


def test_json_reports_the_verdict_and_exits_1(model, capsys):
    code, out, _ = run(capsys, model, "--ctx", "4096", *TINY_GPU, "--json")
    assert code == 1 and json.loads(out)["fits"] is False


@pytest.mark.parametrize("argv", [
    ["--ctx", "1024,16384", *TINY_GPU],  # 1024 fits, 16384 does not
    ["--ctx", "4096"],                   # no GPU size: nothing to judge
    ["--gpu-mib", "2", "--fixed-mib", "1"],
])
def test_anything_fitting_exits_0(model, capsys, argv):
    code, out, _ = run(capsys, model, *argv)
    assert code == 0, out


@pytest.mark.parametrize("ctx", ["0", "-5", "0k", "4096,0", "-1k"])
def test_ctx_below_1_is_a_usage_error(model, capsys, ctx):
    code, out, err = run(capsys, model, f"--ctx={ctx}")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.fullmatch(r"frank preflight: --ctx '-?\d+k?': a context holds at least 1 token "
                        r"\(llama-server reads -c 0 as the model's trained context: pass that "
                        r"number\)", err.strip())


def test_a_shortfall_is_not_a_negative_figure(model, capsys):
    _, out, _ = run(capsys, model, "--ctx", "4096,16384", *TINY_GPU)
    assert "| 4096 (4K) | 2 | 1.4 MiB short |" in out
    assert "| 16384 (16K) | 8 | 7.4 MiB short |" in out
    assert not re.search(r"(?<![\w-])-\d", out), out


def test_free_memory_still_reads_in_mib_and_gib(model, capsys):
    _, out, _ = run(capsys, model, "--ctx", "4096", "--gpu-mib", "2048", "--fixed-mib", "1")
    assert "| 4096 (4K) | 2 | 2044.6 (2.00 GiB) |" in out


@pytest.mark.parametrize("argv,slot", [
    (["--ctx", "16384"], "ctx 16384 (16K) gives each sequence 16384 tokens"),
    (["--ctx", "64k", "--parallel", "4"], "ctx 65536 (64K) over 4 slots gives each slot 16384 "
                                          "tokens"),
    (["--ctx", "16384", "--parallel", "4", "--kv-unified"], "ctx 16384 (16K) gives each "
                                                            "sequence 16384 tokens"),
])
def test_a_context_past_the_trained_one_is_warned(model, capsys, argv, slot):
    code, out, _ = run(capsys, model, *argv)
    assert code == 0
    (warning,) = [line for line in out.splitlines() if line.startswith("warning:")]
    assert warning == (f"warning: {slot}, more than the 8192 the model was trained on "
                       "(context_length in its GGUF header): answers past 8192 tokens degrade "
                       "unless RoPE scaling extends the context (e.g. --rope-scaling yarn "
                       "--yarn-orig-ctx 8192)")


@pytest.mark.parametrize("argv", [["--ctx", "8192"], ["--ctx", "32k", "--parallel", "4"],
                                  ["--ctx", "4096,8k"]])
def test_contexts_within_the_trained_one_are_not_warned(model, capsys, argv):
    code, out, _ = run(capsys, model, *argv)
    assert code == 0 and "warning:" not in out


def test_json_carries_the_warnings(model, capsys):
    _, out, _ = run(capsys, model, "--ctx", "4096,16384", "--json")
    (warning,) = json.loads(out)["warnings"]
    assert warning.startswith("ctx 16384 (16K) gives each sequence 16384 tokens")


def test_the_cli_exit_status_is_the_verdict(model):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest_frank.cli", "preflight", model, "--ctx",
                           "4096", *TINY_GPU], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("nothing fits:")
