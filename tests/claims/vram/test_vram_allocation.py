"""The memory model's KV cache against what llama.cpp itself allocates, read off its own log
(`llama_kv_cache: size = ... MiB (N cells, L layers, S/T seqs)`, logged at verbosity 4): on the
real SmolLM2, on every self-test variant, and on the Gemma 3 shaped `swa` variant, whose five
sliding-window layers get their own cache of window + n_ubatch cells per stream, at 1 and 2
slots (on some also unified, and a context that does not split evenly). Modelled and logged
totals agree within 5%, and the cell counts are exactly llama.cpp's."""

from __future__ import annotations

import pytest

from llama import load_log
from pytest_frank.local import llama_log, selftest_model
from pytest_frank.vram.memory import (
    MiB,
    ModelShape,
    Settings,
    cache_cells,
    estimate,
    growing_layers,
    sliding_layers,
)

pytestmark = pytest.mark.real
TOLERANCE = 0.05


def allocated(model: str, **spec) -> list[llama_log.KVCache]:
    """The KV caches llama.cpp's log reports for a private server, started at debug level and
    stopped at once; the process's log threshold is put back for the servers that go on."""
    caches = llama_log.kv_caches(load_log(model, **spec))
    assert caches, "llama.cpp logged no llama_kv_cache size line"
    return caches


def check(path, ctx_size: int, parallel: int, unified: bool, caches) -> tuple[float, float]:
    """(modelled MiB, logged MiB), asserting the cells and the 5% agreement."""
    shape = ModelShape.from_gguf(path)
    settings = Settings(ctx_size=ctx_size, n_parallel=parallel, kv_unified=unified)
    cells = cache_cells(ctx_size, n_parallel=parallel, kv_unified=unified,
                        window=shape.sliding_window)
    want = [(cells.full, len(growing_layers(shape)), cells.streams),
            (cells.sliding, len(sliding_layers(shape)), cells.streams)]
    got = [(c.cells, c.layers, c.streams) for c in caches]
    assert got == [w for w in want if w[1]]
    assert all(c.seqs == parallel for c in caches)
    modelled, logged = estimate(shape, settings).kv / MiB, sum(c.mib for c in caches)
    assert abs(modelled - logged) <= TOLERANCE * logged, (modelled, logged)
    return modelled, logged


SHAPES = [(4096, 1, False), (4096, 2, False)]


@pytest.mark.parametrize("ctx_size,parallel,unified", SHAPES + [(1000, 3, False)])
def test_smollm2_cache_is_as_modelled(smollm2_path, ctx_size, parallel, unified):
    caches = allocated(str(smollm2_path), ctx_size=ctx_size, parallel=parallel,
                       kv_unified=unified)
    check(smollm2_path, ctx_size, parallel, unified, caches)


@pytest.mark.parametrize("ctx_size,parallel,unified", SHAPES)
@pytest.mark.parametrize("variant", selftest_model.VARIANTS)
def test_selftest_cache_is_as_modelled(variant, ctx_size, parallel, unified):
    caches = allocated(f"selftest:{variant}", ctx_size=ctx_size, parallel=parallel)
    check(selftest_model.model_path(variant), ctx_size, parallel, unified, caches)


@pytest.mark.parametrize("ctx_size,parallel,unified,full,sliding", [
    (4096, 1, False, 4096, 1024),   # window 512 + n_ubatch 512
    (4096, 2, False, 2048, 1024),   # per slot: each stream keeps its own window
    (4096, 2, True, 4096, 1536),    # one stream for both slots: 2 windows + n_ubatch
    (1000, 3, False, 512, 512),     # 1000 -> 1024 -> 341 a slot -> 512: the window is no cap
])
def test_sliding_window_cache_is_llamacpps(ctx_size, parallel, unified, full, sliding):
    caches = allocated("selftest:swa", ctx_size=ctx_size, parallel=parallel, kv_unified=unified)
    assert [(c.cells, c.layers) for c in caches] == [(full, 1), (sliding, 5)]
    check(selftest_model.model_path("swa"), ctx_size, parallel, unified, caches)


def test_the_sliding_window_model_answers_like_the_default(llama):
    import httpx

    server = llama(model="selftest:swa")
    reply = httpx.post(f"{server.url}/v1/chat/completions", timeout=60,
                       json={"messages": [{"role": "user", "content": "Hi"}]}).json()
    message = reply["choices"][0]["message"]
    assert (message["content"], message.get("reasoning_content")) == ("Hello!", "Thinking")
