"""`frank preflight` verdicts on the self-test GGUF (2 attention layers x 4 KV heads x 16 dim:
512 B of f16 KV per token, 0.35 MiB of weights, trained context 8192): the exit status says
whether anything fits, a bad --ctx is a one-line usage error, a shortfall never prints as a
negative figure, and a context past the trained one is warned about."""

from __future__ import annotations

import json
import re

import pytest

from pytest_frank import cli
from pytest_frank.local import selftest_model
from pytest_frank.vram.memory import MiB

pytestmark = pytest.mark.unit

TINY_GPU = ["--gpu-mib", "2", "--fixed-mib", "1"]  # 1 MiB left for weights and KV


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(selftest_model.write_model(tmp_path_factory.mktemp("m") / "selftest.gguf"))


def run(capsys, *argv):
    """`frank preflight ARGV`, as a user runs it: the command hands the preflight llama.cpp's
    drafting flags from its driver."""
    code = cli.main(["preflight", *argv])
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


# Gemma 3 270M's shape: 18 layers of 1 KV head x 256, a window of 512 on 5 of every 6. Its own
# llama.cpp log at 4,096 tokens: 12 MiB full (3 layers x 4096 cells) + 15 MiB SWA (15 layers x
# 1024 cells) = 27 MiB; with --parallel 2, 12 + 30 = 42 MiB.
@pytest.fixture(scope="module")
def gemma3_270m(tmp_path_factory):
    import gguf_files

    return str(gguf_files.sliding(tmp_path_factory.mktemp("g") / "g.gguf", window=512,
                                  blocks=18))


def test_kv_per_token_counts_only_the_layers_that_grow(gemma3_270m, capsys):
    _, out, _ = run(capsys, gemma3_270m, "--ctx", "4096")
    lines = dict((line[:22].strip(), line[22:].strip())
                 for line in out.splitlines() if line[:22].strip())
    assert lines["KV per token"] == ("3 full-attention layers x 1 KV heads x 256 dim: K f16 512 B "
                                     "+ V f16 512 B per layer = 3072 B/token")
    assert lines["sliding-window KV"] == (
        "15 layers with window 512: 15360 B/cell, at most 1024 cells (window + ubatch 512, "
        "padded to 256) = 15.00 MiB however long the context")
    assert "| 4096 (4K) | 27 | - |" in out


@pytest.mark.parametrize("argv,kv_mib", [
    (["--parallel", "2"], 42),
    (["--parallel", "2", "--kv-unified"], 12 + 22.5),    # one stream: 2 x 512 + 512 cells
    (["--ubatch-size", "256"], 12 + 11.25),              # 512 + 256 = 768 cells
    (["--swa-full"], 72),
])
def test_the_sliding_window_cache_follows_the_flags(gemma3_270m, capsys, argv, kv_mib):
    _, out, _ = run(capsys, gemma3_270m, "--ctx", "4096", "--json", *argv)
    (row,) = json.loads(out)["context_table"]
    assert row["kv_mib"] == kv_mib


def test_swa_full_makes_every_layer_grow(gemma3_270m, capsys):
    _, out, _ = run(capsys, gemma3_270m, "--ctx", "4096", "--swa-full")
    assert "18 attention layers x 1 KV heads x 256 dim" in out and "sliding-window KV" not in out


# The self-test hybrid (Qwen3.5's layout), a real file llama.cpp serves (selftest:hybrid): 2
# full-attention layers x 2 KV heads x 64 dim, 6 Gated DeltaNet layers (conv_kernel 4, inner_size
# 512, state_size 128, group_count 2) and its own MTP head as block 8; hybrid_plain is the same
# model without the head.
ATTENTION_PER_TOKEN = 2 * 2 * 64 * 2 * 2               # layers x heads x dim x (K, V) x f16
NEXTN_PER_TOKEN = 1 * 2 * 64 * 2 * 2
CONV = (4 - 1) * (512 + 2 * 2 * 128) * 4                # R: 12 KiB a layer and row
SSM = 128 * 512 * 4                                     # S: 256 KiB
RECURRENT_ROW = 6 * (CONV + SSM)                        # 1.57 MiB a row


@pytest.fixture(scope="module")
def hybrid():
    return str(selftest_model.model_path("hybrid"))


def described(capsys, variant: str) -> dict[str, str]:
    _, out, _ = run(capsys, str(selftest_model.model_path(variant)))
    return labelled(out)


def labelled(out: str) -> dict[str, str]:
    return dict((line[:22].strip(), line[22:].strip())
                for line in out.splitlines() if line[:22].strip())
    return dict((line[:22].strip(), line[22:].strip())
                for line in out.splitlines() if line[:22].strip())


def test_the_hybrid_mtp_file_names_its_layers_and_its_own_head(capsys):
    lines = described(capsys, "hybrid")
    assert lines["layers"] == ("9 blocks: 2 attention, 6 recurrent, 1 NextN (MTP); every 4th "
                               "layer is attention")
    assert lines["MTP head"] == ("its own, 1 NextN layer(s) (blk.8.nextn.*): --spec-type "
                                 "draft-mtp alone serves it; --model-draft at this file would "
                                 "load it a second time")
    assert lines["MTP draft KV"].startswith("1 NextN layer(s)")


def test_the_hybrid_without_its_head_says_it_has_none(capsys):
    lines = described(capsys, "hybrid_plain")
    assert lines["layers"] == "8 blocks: 2 attention, 6 recurrent; every 4th layer is attention"
    assert lines["MTP head"].startswith("none (nextn_predict_layers 0): llama.cpp refuses "
                                        "--spec-type draft-mtp on this file")
    assert "MTP draft KV" not in lines and "nextn weights" not in lines


def test_a_standalone_head_is_a_draft_for_its_model(tmp_path, capsys):
    import gguf_files as gf

    head = gf.write_gguf(tmp_path / "Q-head.gguf", "qwen3", {
        "{arch}.block_count": 1, "{arch}.nextn_predict_layers": 1,
        "{arch}.embedding_length": 64, "{arch}.attention.head_count": 4,
        "{arch}.attention.head_count_kv": 1}, [("token_embd.weight", (64, 32), gf.Q.F16)])
    _, out, _ = run(capsys, str(head))
    assert ("a standalone head (1 NextN layer(s), no model layers): the draft for its model, "
            "loaded with --model-draft beside --spec-type draft-mtp") in out


def test_the_hybrid_reads_as_attention_recurrent_and_mtp(hybrid, capsys):
    assert (CONV, SSM, ATTENTION_PER_TOKEN, NEXTN_PER_TOKEN) == (12 << 10, 256 << 10, 1024, 512)
    _, out, _ = run(capsys, hybrid, "--ctx", "4096")
    lines = labelled(out)
    assert lines["KV per token"] == ("2 attention layers x 2 KV heads x 64 dim: K f16 256 B + "
                                     f"V f16 256 B per layer = {ATTENTION_PER_TOKEN} B/token")
    assert lines["MTP draft KV"] == f"1 NextN layer(s), f16: {NEXTN_PER_TOKEN} B/token"
    assert lines["recurrent state"] == (
        f"6 layers x {CONV + SSM} B = 1.57 MiB a row (f32); with MTP 4 rows per sequence (its "
        "own and --draft-max 3 snapshots) = 6.28 MiB per sequence")


@pytest.mark.parametrize("argv,rows,mtp", [
    ([], 1 + 3, True),                      # the head is in the file: MTP at --draft-max 3
    (["--draft-max", "1"], 1 + 1, True),
    (["--no-mtp"], 1, False),               # no snapshots, no MTP context
    (["--no-mtp", "--draft-max", "8"], 1, False),
])
def test_the_hybrid_table_is_the_arithmetic(hybrid, capsys, argv, rows, mtp):
    gpu, fixed, slots = 64, 8, 2
    _, out, _ = run(capsys, hybrid, "--ctx", "4096,16384", "--parallel", str(slots),
                    "--gpu-mib", str(gpu), "--fixed-mib", str(fixed), "--json", *argv)
    report = json.loads(out)
    # without MTP llama.cpp skips the head's block: its bytes are not loaded
    weights = report["summary"]["weight_bytes"] - (not mtp) * report["summary"]["nextn_weight_bytes"]
    for row, ctx in zip(report["context_table"], (4096, 16384), strict=True):
        kv, mtp_kv = ATTENTION_PER_TOKEN * ctx, NEXTN_PER_TOKEN * ctx * mtp
        state = RECURRENT_ROW * rows * slots
        assert (row["kv_mib"], row["draft_kv_mib"]) == (kv / MiB, mtp_kv / MiB)
        free = gpu * MiB - fixed * MiB - weights - kv - mtp_kv - state
        assert row["free_after_load_mib"] == free / MiB


def test_the_hybrid_without_mtp_says_what_is_not_counted(hybrid, capsys):
    _, out, _ = run(capsys, hybrid, "--ctx", "4096", "--no-mtp")
    lines = labelled(out)
    assert lines["MTP draft KV"].endswith("B/token (not counted: --no-mtp)")
    assert lines["recurrent state"] == f"6 layers x {CONV + SSM} B = 1.57 MiB per sequence (f32)"
    assert "Draft KV" not in out


def test_a_negative_draft_max_is_a_usage_error(hybrid, capsys):
    code, out, err = run(capsys, hybrid, "--draft-max", "-1")
    assert code == 2 and out == ""
    assert err.strip() == ("frank preflight: draft_max -1: a draft is at least 0 tokens long "
                           "(llama-server --spec-draft-n-max)")
