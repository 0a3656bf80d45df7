"""llama.cpp's cache lines as its log writes them (xllamacpp 2026.10.11549, verbosity 4), read
into records: the target's attention KV, a hybrid's recurrent state and the MTP context's KV."""

from __future__ import annotations

import pytest

from pytest_frank.local import llama_log

pytestmark = pytest.mark.unit

# selftest:hybrid at ctx 4096, 1 slot, spec_type draft-mtp
MTP_LOAD = """\
0.00.025.390 I llama_context: n_rs_seq              = 3
0.00.026.666 I llama_kv_cache: size =    4.00 MiB (  4096 cells,   2 layers,  1/1 seqs), K (f16):    2.00 MiB, V (f16):    2.00 MiB
0.00.028.688 I llama_memory_recurrent:        CPU RS buffer size =     6.28 MiB
0.00.028.708 I llama_memory_recurrent: size =    6.28 MiB (     1 cells,   8 layers,  1 seqs  3 rs_seq), R (f32):    0.28 MiB, S (f32):    6.00 MiB, P (f32):    0.00 MiB
0.00.042.179 I common_speculative_init_result: creating MTP draft context against the target model '/tmp/m.gguf'
0.00.043.085 I llama_kv_cache: size =    2.00 MiB (  4096 cells,   1 layers,  1/1 seqs), K (f16):    1.00 MiB, V (f16):    1.00 MiB
"""  # noqa: E501


def test_the_recurrent_state_line_is_read_whole():
    (state,) = llama_log.recurrent_states(MTP_LOAD)  # the buffer line is not a second one
    assert state == llama_log.RecurrentState(mib=6.28, cells=1, layers=8, seqs=1, rs_seq=3,
                                             r_mib=0.28, s_mib=6.0)


def test_a_state_without_snapshots_reads_as_rs_seq_0():
    two_slots = ("llama_memory_recurrent: size =    3.14 MiB (     2 cells,   8 layers,  2 seqs  "
                 "0 rs_seq), R (f32):    0.14 MiB, S (f32):    3.00 MiB, P (f32):    0.00 MiB")
    older = ("llama_memory_recurrent: size =    1.57 MiB (     1 cells,   8 layers,  1 seqs), "
             "R (f32):    0.07 MiB, S (f32):    1.50 MiB")  # a build before MTP snapshots
    assert [(s.cells, s.seqs, s.rs_seq, s.mib) for s in llama_log.recurrent_states(two_slots)] \
        == [(2, 2, 0, 3.14)]
    assert [(s.rs_seq, s.r_mib, s.s_mib) for s in llama_log.recurrent_states(older)] \
        == [(0, 0.07, 1.5)]


def test_no_recurrent_line_no_state():
    assert llama_log.recurrent_states(MTP_LOAD.replace("llama_memory_recurrent", "llama_x")) == []


def test_the_target_and_the_mtp_context_each_have_a_kv_cache():
    target, mtp = llama_log.kv_caches(MTP_LOAD)
    assert (target.mib, target.cells, target.layers, target.type_k) == (4.0, 4096, 2, "f16")
    assert (mtp.mib, mtp.cells, mtp.layers, mtp.seqs, mtp.streams) == (2.0, 4096, 1, 1, 1)
