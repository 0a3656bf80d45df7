"""The memory model against the seeds' hand-computed numbers, and against headers."""

from __future__ import annotations

from dataclasses import replace

import gguf_files as gf
import pytest

from pytest_frank.gguf.reader import read_header
from pytest_frank.gguf.summary import summarize
from pytest_frank.vram.memory import (
    LayerKV,
    MiB,
    ModelShape,
    Settings,
    context_table,
    estimate,
    cache_cells,
    fits,
    growing_layers,
    kv_bytes_per_token,
    kv_cache_bytes,
    max_context,
    recurrent_state_bytes,
    row_bytes,
    sliding_layers,
)

pytestmark = pytest.mark.unit

# frank-program-redo.md, "Context Math (frank-default-large, RTX 3090)"
SEED_MODEL = ModelShape.uniform(attention_layers=16, n_head_kv=4, head_dim=256,
                                weights=14982 * MiB)
SEED_DRAFT = 861 * MiB
SEED = Settings(ctx_size=131072, cache_type_k="q8_0", cache_type_v="f16",
                gpu_total=24576 * MiB, fixed_overhead=1024 * MiB)
SEED_TABLE = [  # context, KV MiB, free after load MiB
    (114688, 5488, 2221), (122880, 5880, 1829), (131072, 6272, 1437), (147456, 7056, 653)]


# --------------------------------------------------------------------------- the seeds, exactly

def test_seed_bytes_per_token():
    assert kv_bytes_per_token(SEED_MODEL.kv_layers, "q8_0", "f16") == 50176
    layer = SEED_MODEL.kv_layers[0]
    assert row_bytes("q8_0", layer.n_head_kv * layer.key_length) == 1088     # "K q8_0 = 1088"
    assert row_bytes("f16", layer.n_head_kv * layer.value_length) == 2048    # "V f16 = 2048"


@pytest.mark.parametrize("ctx,kv_mib,free_mib", SEED_TABLE)
def test_seed_context_math(ctx, kv_mib, free_mib):
    est = estimate(SEED_MODEL, replace(SEED, ctx_size=ctx), draft=SEED_DRAFT)
    assert est.kv == kv_mib * MiB
    assert est.free_after_load == free_mib * MiB


def test_seed_table_renders_like_the_seed():
    table = context_table(SEED_MODEL, SEED, [c for c, _, _ in SEED_TABLE], draft=SEED_DRAFT)
    assert table.text.splitlines() == [
        "| Context | KV (MiB) | Free after load |",
        "|---------|----------|-----------------|",
        "| 114688 (112K) | 5488 | 2221 (2.17 GiB) |",
        "| 122880 (120K) | 5880 | 1829 (1.79 GiB) |",
        "| 131072 (128K) | 6272 | 1437 (1.40 GiB) |",
        "| 147456 (144K) | 7056 | 653 (0.64 GiB) |",
    ]
    assert [(r["context"], r["kv_mib"], r["free_after_load_mib"]) for r in table.rows] == \
        SEED_TABLE
    assert str(table) == table.text


def test_seed_verdicts_name_the_numbers():
    want = replace(SEED, headroom=1024 * MiB)
    ok = fits(estimate(SEED_MODEL, want, draft=SEED_DRAFT))
    assert ok and "1437 MiB free" in ok.message
    tight = fits(estimate(SEED_MODEL, replace(want, ctx_size=147456), draft=SEED_DRAFT))
    assert not tight
    assert "leaves 653 MiB free, less than the 1024 MiB headroom asked (371 MiB short)" \
        in tight.message
    no = fits(estimate(SEED_MODEL, replace(want, ctx_size=262144), draft=SEED_DRAFT))
    assert not no and "does not fit" in no.message and "4835 MiB short" in no.message
    assert "weights 14982 + kv 12544 + draft weights 861 + fixed overhead 1024 MiB" in no.message


def test_seed_largest_context_keeping_headroom():
    want = replace(SEED, headroom=1024 * MiB)
    best = max_context(SEED_MODEL, want, draft=SEED_DRAFT)
    assert best == 139264
    assert fits(estimate(SEED_MODEL, replace(want, ctx_size=best), draft=SEED_DRAFT))
    assert not fits(estimate(SEED_MODEL, replace(want, ctx_size=best + 1024), draft=SEED_DRAFT))


def test_bytes_per_element_of_every_cache_type():
    # endpoint-facts.md: f32 4, f16/bf16 2, q8_0 1.0625, q5_1 0.75, q5_0 0.6875, q4_1 0.625,
    # q4_0 0.5625, iq4_nl 0.5625
    want = {"f32": 4, "f16": 2, "bf16": 2, "q8_0": 1.0625, "q5_1": 0.75, "q5_0": 0.6875,
            "q4_1": 0.625, "q4_0": 0.5625, "iq4_nl": 0.5625}
    assert {t: row_bytes(t, 1024) / 1024 for t in want} == want


def test_quantized_cache_needs_whole_blocks():
    with pytest.raises(ValueError, match="does not split into q8_0 blocks of 32"):
        row_bytes("q8_0", 16)
    with pytest.raises(ValueError, match="cache type 'q9_0'"):
        row_bytes("q9_0", 32)
    with pytest.raises(ValueError, match="cache_type_v 'fp8'"):
        Settings(ctx_size=1, cache_type_v="fp8")


# --------------------------------------------------------------------------- from headers

@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> dict[str, ModelShape]:
    d = tmp_path_factory.mktemp("mem")
    paths = {"seed": gf.seed_shaped(d / "seed.gguf"), "hybrid": gf.hybrid(d / "h.gguf"),
             "hybrid_mtp": gf.hybrid(d / "hm.gguf", nextn=1),
             "per_layer": gf.per_layer_kv(d / "p.gguf"), "sliding": gf.sliding(d / "s.gguf"),
             "llama": gf.small_llama(d / "l.gguf"), "clip": gf.projector(d / "c.gguf")}
    return {k: ModelShape.from_gguf(p) for k, p in paths.items()}


def test_seed_shaped_header_gives_the_seed_kv(shapes):
    m = shapes["seed"]
    assert len(m.kv_layers) == 16 and m.recurrent_layers == 48
    assert kv_bytes_per_token(m.kv_layers, "q8_0", "f16") == 50176
    est = estimate(m, replace(SEED, ctx_size=131072))
    assert est.kv == 6272 * MiB
    # the MTP head: 1 layer x 4 KV heads x 256 x 2 (K,V) x 2 B = "about 4 KiB/token"
    assert kv_bytes_per_token(m.nextn_layers) == 4096
    assert est.mtp_kv == 4096 * 131072
    assert estimate(m, replace(SEED, mtp=False)).mtp_kv == 0


def test_hybrid_counts_only_attention_layers(shapes):
    m = shapes["hybrid"]
    assert len(m.kv_layers) == 2 and m.recurrent_layers == 6
    # layers x heads x dim x (K, V) x f16
    assert kv_bytes_per_token(m.kv_layers) == 2 * 2 * 64 * 2 * 2
    per_layer = (4 - 1) * (512 + 2 * 4 * 32) * 4 + 32 * 512 * 4
    assert m.recurrent_state_per_layer == per_layer
    est = estimate(m, Settings(ctx_size=8192, n_parallel=4))
    assert est.recurrent_state == 6 * per_layer * 4                    # per sequence
    assert est.kv == 1024 * 8192


def test_mtp_keeps_draft_max_snapshots_of_the_recurrent_state(shapes):
    m = shapes["hybrid_mtp"]
    per_seq = 6 * m.recurrent_state_per_layer
    assert len(m.nextn_layers) == 1 and per_seq > 0
    settings = Settings(ctx_size=8192, n_parallel=2)
    # the head is in the file: MTP on, its own row and 3 snapshots per sequence
    assert estimate(m, settings).recurrent_state == per_seq * 2 * (1 + 3)
    assert estimate(m, replace(settings, draft_max=1)).recurrent_state == per_seq * 2 * 2
    assert estimate(m, replace(settings, mtp=False)).recurrent_state == per_seq * 2
    # draft_max is the MTP draft's: without MTP it changes nothing
    assert estimate(m, replace(settings, mtp=False, draft_max=8)).recurrent_state == per_seq * 2
    assert estimate(shapes["hybrid"], settings).recurrent_state == per_seq * 2


def test_draft_max_is_a_length():
    assert Settings(ctx_size=1, draft_max=0).draft_max == 0
    with pytest.raises(ValueError, match="draft_max -1"):
        Settings(ctx_size=1, draft_max=-1)


def test_per_layer_head_count_kv(shapes):
    m = shapes["per_layer"]
    assert [x.n_head_kv for x in m.kv_layers] == [4, 2]
    assert kv_bytes_per_token(m.kv_layers) == (4 + 2) * 16 * 2 * 2    # key_length 128 / 8 heads
    assert m.recurrent_layers == 4


def test_recurrent_state_formula_seed_scale():
    # Qwen3-Next style DeltaNet: 48 layers, 128 d_state, 48 v-heads x 128 -> "~0.16 GiB per
    # sequence" in the seed (0.157 GB, 0.146 GiB)
    per_layer = recurrent_state_bytes(conv_kernel=4, inner_size=6144, state_size=128,
                                      group_count=16)
    assert per_layer == 3 * (6144 + 2 * 16 * 128) * 4 + 128 * 6144 * 4 == 3268608
    assert 48 * per_layer == 156893184


def test_sliding_window_layers_are_capped(shapes):
    m = shapes["sliding"]
    assert sum(x.sliding for x in m.kv_layers) == 10 and m.sliding_window == 1024
    per = 1 * 256 * 2 * 2                                           # per layer per token, f16
    # llama.cpp's SWA cache: window + n_ubatch (512) cells per stream, padded to 256
    est = estimate(m, Settings(ctx_size=32768))
    assert est.kv == 2 * per * 32768 + 10 * per * 1536
    # two slots, separate streams: each slot keeps its own window
    est = estimate(m, Settings(ctx_size=32768, n_parallel=2))
    assert est.kv == 2 * per * 32768 + 10 * per * 1536 * 2
    # one stream for both: two windows and one ubatch
    est = estimate(m, Settings(ctx_size=32768, n_parallel=2, kv_unified=True))
    assert est.kv == 2 * per * 32768 + 10 * per * 2560
    assert estimate(m, Settings(ctx_size=512)).kv == 12 * per * 512
    # a smaller ubatch shrinks the window's cache; --swa-full gives it the whole context
    assert estimate(m, Settings(ctx_size=32768, n_ubatch=128)).kv == \
        2 * per * 32768 + 10 * per * 1280
    assert estimate(m, Settings(ctx_size=32768, swa_full=True)).kv == 12 * per * 32768


def test_only_full_attention_layers_cost_per_token(shapes):
    m = shapes["sliding"]
    per = 1 * 256 * 2 * 2
    assert len(growing_layers(m)) == 2 and len(sliding_layers(m)) == 10
    assert estimate(m, Settings(ctx_size=4096)).kv_bytes_per_token == 2 * per
    assert estimate(m, Settings(ctx_size=4096, swa_full=True)).kv_bytes_per_token == 12 * per
    # past the window a token more costs only the full layers
    grow = estimate(m, Settings(ctx_size=65536)).kv - estimate(m, Settings(ctx_size=32768)).kv
    assert grow == 2 * per * 32768


@pytest.mark.parametrize("ctx,parallel,unified,cells", [
    (4096, 1, False, (4096, 4096, 1)),
    (4096, 2, False, (2048, 2048, 2)),
    (1000, 1, False, (1024, 1024, 1)),      # n_ctx padded to 256
    (1000, 3, False, (512, 512, 3)),        # 1024 / 3 = 341, padded to 512 a slot
    (4096, 3, False, (1536, 1536, 3)),      # 1365 -> 1536: llama.cpp allocates 4608 cells
    (4000, 4, True, (4096, 4096, 1)),
])
def test_cells_are_padded_as_llamacpp_pads_them(ctx, parallel, unified, cells):
    got = cache_cells(ctx, n_parallel=parallel, kv_unified=unified)
    assert (got.full, got.sliding, got.streams) == cells
    layers = (LayerKV(1, 64, 64),)
    assert kv_cache_bytes(layers, ctx, n_parallel=parallel, kv_unified=unified) == \
        256 * cells[0] * cells[2]


def test_parallel_divides_context():
    layers = (LayerKV(4, 256, 256),) * 16
    one = kv_cache_bytes(layers, 131072, type_k="q8_0")
    assert kv_cache_bytes(layers, 131072, n_parallel=4, type_k="q8_0") == one
    assert kv_cache_bytes(layers, 131072, n_parallel=4, kv_unified=True, type_k="q8_0") == one


def test_draft_model_and_projector_from_headers(shapes):
    draft, mmproj = shapes["llama"], shapes["clip"]
    est = estimate(shapes["seed"], replace(SEED, ctx_size=4096), draft=draft, mmproj=mmproj)
    assert est.draft_weights == draft.weights > 0
    assert est.draft_kv == 2 * (2 * 16) * 2 * 2 * 4096                 # 2 layers x 2 heads x 16
    assert est.projector == mmproj.weights
    assert mmproj.weights == 2 * 128 * 384 * 2 + 512 * 256 * 2 + 16 * 16 * 3 * 128 * 2
    assert est.total == sum(getattr(est, p) for p in est.PARTS)


def test_notes_flag_what_is_not_modelled(tmp_path):
    p = gf.sliding(tmp_path / "x.gguf", pattern=None)
    s = replace(summarize(read_header(p)), architecture="mystery", sliding_pattern_known=False)
    m = ModelShape.from_summary(s)
    assert any("no layer pattern" in n for n in m.notes)
    est = estimate(ModelShape.uniform(attention_layers=1, n_head_kv=1, head_dim=32),
                   Settings(ctx_size=1, mtp=True))
    assert any("no NextN layers" in n for n in est.notes)


def test_fits_needs_a_gpu_size():
    with pytest.raises(ValueError, match="gpu_total"):
        fits(estimate(SEED_MODEL, replace(SEED, gpu_total=None)))
    table = context_table(SEED_MODEL, replace(SEED, gpu_total=None), [4096])
    assert table.rows[0]["free_after_load_mib"] is None and table.text.endswith("| - |")
