"""The memory model of a hybrid served with MTP against what llama.cpp itself allocates, read off
its own load log (verbosity 4): `selftest:hybrid` (Qwen3.5's layout: 2 full-attention layers, 6
Gated DeltaNet layers, a NextN head) under spec_type draft-mtp at 4,096 and 16,384 tokens, 1 and
2 slots. Three caches, each within 5% of the logged MiB and with llama.cpp's own shape: the
attention KV (`llama_kv_cache`, the target's), the MTP draft context's KV (the second
`llama_kv_cache`, the NextN layer only) and the recurrent state (`llama_memory_recurrent`, one
cell a sequence, rs_seq = draft_max snapshots each). Without spec_type the head is not loaded:
no MTP cache, no snapshots, and the model agrees with mtp off."""

from __future__ import annotations

import pytest

from llama import load_log
from pytest_frank.local import llama_log, selftest_model
from pytest_frank.vram.memory import MiB, ModelShape, Settings, cache_cells, estimate

pytestmark = pytest.mark.real
TOLERANCE = 0.05
SHAPES = [(4096, 1), (4096, 2), (16384, 1), (16384, 2)]


@pytest.fixture(scope="module")
def shape() -> ModelShape:
    return ModelShape.from_gguf(selftest_model.model_path("hybrid"))


def loaded(**spec) -> str:
    return load_log("selftest:hybrid", **spec)


def agrees(modelled_bytes: int, logged_mib: float) -> bool:
    return abs(modelled_bytes / MiB - logged_mib) <= TOLERANCE * logged_mib


def trunk(shape: ModelShape) -> int:
    """llama.cpp's "layers" on the recurrent line: every block of the trunk, the attention ones
    too (only the recurrent ones hold state)."""
    return len(shape.kv_layers) + shape.recurrent_layers


@pytest.mark.parametrize("ctx_size,parallel", SHAPES)
def test_the_mtp_hybrid_is_as_modelled(shape, ctx_size, parallel):
    log = loaded(ctx_size=ctx_size, parallel=parallel, spec_type="draft-mtp")
    target, mtp = llama_log.kv_caches(log)
    (state,) = llama_log.recurrent_states(log)
    cells = cache_cells(ctx_size, n_parallel=parallel)
    assert (target.cells, target.layers, target.streams) == \
        (cells.full, len(shape.kv_layers), cells.streams)
    # the MTP context: the target's cells and sequences, the NextN layer only, f16
    assert (mtp.cells, mtp.layers, mtp.streams, mtp.type_k) == \
        (cells.full, len(shape.nextn_layers), cells.streams, "f16")
    assert (state.cells, state.layers, state.seqs, state.rs_seq) == \
        (parallel, trunk(shape), parallel, 3)
    est = estimate(shape, Settings(ctx_size=ctx_size, n_parallel=parallel))
    logged = {"kv": target.mib, "mtp_kv": mtp.mib, "recurrent_state": state.r_mib + state.s_mib}
    off = {part: (f"modelled {getattr(est, part) / MiB:.2f} MiB", f"logged {mib} MiB")
           for part, mib in logged.items() if not agrees(getattr(est, part), mib)}
    assert not off, off


@pytest.mark.parametrize("parallel", [1, 2])
def test_the_state_without_snapshots_would_be_a_quarter(shape, parallel):
    """The arithmetic before MTP's snapshots (one row a sequence) against the same log: 4x off."""
    (state,) = llama_log.recurrent_states(loaded(parallel=parallel, spec_type="draft-mtp"))
    one_row = shape.recurrent_layers * shape.recurrent_state_per_layer * parallel
    assert not agrees(one_row, state.r_mib + state.s_mib)
    assert agrees(4 * one_row, state.r_mib + state.s_mib)


@pytest.mark.parametrize("draft_max", [1, 2])
def test_the_draft_length_sets_the_snapshots(shape, draft_max):
    (state,) = llama_log.recurrent_states(loaded(spec_type="draft-mtp", draft_max=draft_max))
    assert (state.cells, state.rs_seq) == (1, draft_max)
    est = estimate(shape, Settings(ctx_size=4096, draft_max=draft_max))
    assert agrees(est.recurrent_state, state.r_mib + state.s_mib)
    assert not agrees(estimate(shape, Settings(ctx_size=4096)).recurrent_state,
                      state.r_mib + state.s_mib)


def test_without_spec_type_no_head_and_no_snapshots(shape):
    log = loaded(ctx_size=4096, parallel=2)
    (target,) = llama_log.kv_caches(log)     # no MTP context
    (state,) = llama_log.recurrent_states(log)
    assert (state.cells, state.rs_seq) == (2, 0)
    off = estimate(shape, Settings(ctx_size=4096, n_parallel=2, mtp=False))
    assert off.mtp_kv == 0
    assert agrees(off.kv, target.mib) and agrees(off.recurrent_state, state.r_mib + state.s_mib)
    # the model's default follows the file, which has a head: it counts what this server lacks
    assert not agrees(estimate(shape, Settings(ctx_size=4096, n_parallel=2)).recurrent_state,
                      state.r_mib + state.s_mib)


@pytest.mark.parametrize("spec,mtp,files", [
    ({"spec_type": "draft-mtp"}, True, 1),        # the head loaded with the trunk
    ({}, False, 1),                               # no MTP: the head's tensors are skipped
    ({"draft_model": "selftest:hybrid"}, False, 2),  # the seeds' trap: the -mtp file as its
])                                                # own draft model, its trunk loaded twice
def test_the_weights_loaded_are_as_modelled(shape, spec, mtp, files):
    buffers = llama_log.model_buffers(loaded(**spec))
    assert len(buffers) == files, buffers
    est = estimate(shape, Settings(ctx_size=4096, mtp=mtp),
                   draft=shape if files == 2 else None)
    assert all(agrees(est.weights, mib) for mib in buffers), (est.weights / MiB, buffers)
    assert agrees(est.weights + est.draft_weights, sum(buffers))
    # the head is what tells the two apart: counted where it is not loaded, 7% too much here
    assert mtp or not agrees(shape.weights, buffers[0])
