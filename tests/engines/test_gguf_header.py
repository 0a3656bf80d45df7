"""GGUF header reader: values, tensor table, bounded reads over HTTP, and hostile input."""

from __future__ import annotations

import re
import struct
import time
import tracemalloc
from pathlib import Path

import gguf
import gguf_files as gf
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_frank.gguf.reader import FIRST_READ, GGUFError, GGUFSourceError, read_header
from pytest_frank.gguf.summary import summarize
from pytest_frank.vram import preflight

pytestmark = pytest.mark.unit

MiB = 1 << 20


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gguf")
    return {
        "llama": gf.small_llama(d / "llama.gguf"),
        "hybrid": gf.hybrid(d / "hybrid.gguf"),
        "mtp": gf.hybrid(d / "mtp.gguf", nextn=1),
        "per_layer": gf.per_layer_kv(d / "per_layer.gguf"),
        "sliding": gf.sliding(d / "sliding.gguf"),
        "clip": gf.projector(d / "mmproj.gguf"),
        # 262k-token vocabulary (a ~6 MB header) in front of 4 GiB of claimed, sparse weights
        "big": gf.large_vocab(d / "big.gguf", claimed_bytes=4 << 30),
    }


@pytest.fixture(scope="module")
def big_header(files):
    return read_header(files["big"])


@pytest.fixture(scope="module")
def server(files):
    with gf.RangeServer(files) as srv:
        yield srv


def oracle(path: Path) -> gguf.GGUFReader:
    """gguf-py's own reader (it maps the whole file, fine for small ones)."""
    return gguf.GGUFReader(path)


# --------------------------------------------------------------------------- parsing

def test_every_value_type_round_trips(files):
    h = read_header(files["llama"])
    want = {k.format(arch="llama"): v[0] for k, v in gf.every_value_type().items()}
    for key, value in want.items():
        got = h.metadata[key]
        assert got == pytest.approx(value) if isinstance(value, float) else got == value, key
    assert h.value_types["test.nested"] == gguf.GGUFValueType.ARRAY
    assert h.value_types["test.bool"] == gguf.GGUFValueType.BOOL
    assert h.version == 3 and h.architecture == "llama"


@pytest.mark.parametrize("name", ["llama", "hybrid", "mtp", "per_layer", "sliding", "clip"])
def test_matches_gguf_py_reader(files, name):
    h, ref = read_header(files[name]), oracle(files[name])
    assert h.header_bytes == ref.data_offset
    assert h.alignment == ref.alignment
    assert h.file_size == files[name].stat().st_size
    assert [t.name for t in h.tensors] == [t.name for t in ref.tensors]
    for mine, theirs in zip(h.tensors, ref.tensors):
        assert mine.shape == tuple(int(x) for x in theirs.shape)
        assert mine.ggml_type == theirs.tensor_type
        assert mine.n_bytes == int(theirs.n_bytes)
        assert h.header_bytes + mine.offset == theirs.data_offset
    assert set(h.metadata) == {k for k in ref.fields if not k.startswith("GGUF.")}
    assert h.metadata["tokenizer.ggml.tokens" if name != "clip" and name != "per_layer"
                      and name != "sliding" else "general.architecture"]


def test_get_resolves_the_arch_prefix(files):
    h = read_header(files["hybrid"])
    assert h.get("block_count") == h.metadata["qwen35.block_count"] == 8
    assert h.get("{arch}.full_attention_interval") == 4
    assert h.get("general.architecture") == "qwen35"
    assert h.get("no.such.key", "x") == "x"


def test_version_2_reads_like_3(files, tmp_path):
    data = bytearray(files["per_layer"].read_bytes())
    struct.pack_into("<I", data, 4, 2)
    h = read_header(_write(tmp_path, bytes(data)))
    assert h.version == 2 and summarize(h).attention_layers == (2, 5)


def test_custom_alignment(tmp_path):
    p = gf.write_gguf(tmp_path / "a.gguf", "llama", {"{arch}.block_count": 1},
                      [("a", (32,), gf.Q.F32), ("b", (64,), gf.Q.Q8_0)], alignment=64)
    h = read_header(p)
    assert h.alignment == 64 and h.header_bytes % 64 == 0
    assert [t.offset for t in h.tensors] == [0, 128]
    assert h.header_bytes == oracle(p).data_offset


# --------------------------------------------------------------------------- summaries

def test_summary_small_llama(files):
    s = summarize(read_header(files["llama"]))
    assert s.architecture == "llama" and s.block_count == 2
    assert s.attention_layers == (0, 1) and not s.recurrent_layers
    assert s.head_count == 4 and s.attention_head_count_kv == 2
    assert s.key_length == s.value_length == 16            # 64 embedding / 4 heads
    assert s.context_length == 4096 and s.vocab_size == 300
    by_type = s.weight_bytes_by_type
    assert by_type["F16"] == 64 * 300 * 2 and by_type["Q8_0"] == 2 * (64 * 64 + 2 * 64 * 32
                                                                        + 128 * 64) // 32 * 34
    assert s.weight_bytes == sum(by_type.values())


def test_summary_hybrid_interval(files):
    s = summarize(read_header(files["hybrid"]))
    assert s.attention_layers == (3, 7)
    assert s.recurrent_layers == (0, 1, 2, 4, 5, 6)
    assert s.full_attention_interval == 4
    assert s.ssm == {"conv_kernel": 4, "inner_size": 512, "state_size": 32,
                     "time_step_rank": 16, "group_count": 4}
    assert s.key_length == 64 and s.attention_head_count_kv == 2


def test_summary_nextn_layers_are_separate(files):
    s = summarize(read_header(files["mtp"]))
    assert s.block_count == 9 and s.nextn_predict_layers == 1
    assert s.nextn_layers == (8,) and s.attention_layers == (3, 7)
    assert s.nextn_weight_bytes == 512 * 256 * 2 + 256 * 128 * 2  # eh_proj and the block's attn_k


def test_summary_per_layer_head_count_kv(files):
    s = summarize(read_header(files["per_layer"]))
    assert s.head_count_kv == [0, 0, 4, 0, 0, 2]
    assert s.attention_layers == (2, 5) and s.recurrent_layers == (0, 1, 3, 4)
    assert s.attention_head_count_kv == [4, 2]


def test_summary_sliding_window_pattern(files, tmp_path):
    s = summarize(read_header(files["sliding"]))
    assert s.sliding_window == 1024 and s.sliding_pattern_known
    assert s.sliding_layers == tuple(i for i in range(12) if i % 6 < 5)
    flags = [True, False] * 3
    s = summarize(read_header(gf.sliding(tmp_path / "b.gguf", pattern=flags, blocks=6)))
    assert s.sliding_layers == (0, 2, 4)
    s = summarize(read_header(gf.sliding(tmp_path / "c.gguf", pattern=None)))
    assert s.sliding_layers == tuple(i for i in range(12) if i % 6 < 5)   # gemma3's default


def test_summary_rejects_absurd_layer_counts(tmp_path):
    p = gf.write_gguf(tmp_path / "x.gguf", "llama", {"{arch}.block_count": 1 << 30})
    h = read_header(p)
    at = h.key_offsets["llama.block_count"]
    with pytest.raises(GGUFError, match=rf"at offset {at}: llama.block_count: 1073741824 layers"):
        summarize(h)
    p = gf.write_gguf(tmp_path / "y.gguf", "llama", {
        "{arch}.block_count": 4,
        "{arch}.attention.head_count_kv": ([1, 2], gf.VT.ARRAY, gf.VT.UINT32)})
    with pytest.raises(GGUFError, match=r"llama.attention.head_count_kv: 2 entries for 4 layers"):
        summarize(read_header(p))


def test_summary_projector(files):
    s = summarize(read_header(files["clip"]))
    assert s.architecture == "clip" and s.projector_type == "qwen3vl_merger"
    assert s.has_vision_encoder is True and s.has_audio_encoder is False
    assert s.block_count == 0
    assert s.weight_bytes == 2 * 128 * 384 * 2 + 512 * 256 * 2 + 16 * 16 * 3 * 128 * 2
    assert s.weight_bytes_by_type == {"F16": 512 * 256 * 2 + 16 * 16 * 3 * 128 * 2,
                                      "BF16": 2 * 128 * 384 * 2}


# --------------------------------------------------------------------------- bounded reads

def _bound(h) -> int:
    return 2 * h.header_bytes + FIRST_READ


def test_local_read_grows_only_as_needed(files, big_header):
    h = big_header
    assert h.header_bytes > 5 * MiB                     # the vocabulary really is big
    assert h.file_size > 4 << 30
    assert h.bytes_read <= _bound(h) and h.requests <= 10
    assert summarize(h).vocab_size == 262144
    small = read_header(files["llama"])
    assert small.requests == 1 and small.bytes_read == FIRST_READ


def test_url_reads_a_bounded_prefix(files, server, big_header):
    server.reset()
    h = read_header(server.url("big"))
    assert h.file_size == files["big"].stat().st_size
    assert h.header_bytes == big_header.header_bytes
    assert server.requests == h.requests <= 10
    assert server.bytes_sent == h.bytes_read <= _bound(h)
    assert h.metadata["tokenizer.ggml.tokens"][-1] == "<t262143>"


def test_url_small_file_is_one_request(files, server):
    server.reset()
    h = read_header(server.url("hybrid"))
    assert server.requests == h.requests == 1
    assert summarize(h).attention_layers == (3, 7)


def test_url_server_ignoring_range_is_streamed_and_dropped(files):
    with gf.RangeServer(files, honour_range=False) as srv:
        h = read_header(srv.url("big"))
        assert h.file_size == files["big"].stat().st_size
        assert h.bytes_read <= _bound(h) and h.requests == 1
        time.sleep(0.2)
        assert srv.bytes_sent < 256 * MiB                # not the 4 GiB body


def test_url_without_length_still_parses(files):
    with gf.RangeServer(files, honour_range=False, send_length=False) as srv:
        h = read_header(srv.url("hybrid"))
        assert h.file_size is None
        assert summarize(h).attention_layers == (3, 7)


def test_url_with_shared_client(server):
    with httpx2.Client() as client:
        a = read_header(server.url("llama"), client=client)
        b = read_header(server.url("clip"), client=client)
        assert not client.is_closed
    assert a.architecture == "llama" and b.architecture == "clip"


def test_http_errors_are_gguf_source_errors(server):
    with pytest.raises(GGUFSourceError, match="HTTP 404"):
        read_header(server.url("missing"))
    with pytest.raises(GGUFSourceError, match="ConnectError"):
        read_header("http://127.0.0.1:9/x.gguf", timeout=2)
    with pytest.raises(GGUFSourceError, match="No such file"):
        read_header("/nonexistent/model.gguf")


# --------------------------------------------------------------------------- hostile input

def _tokens_at(data: bytes, key: bytes = b"tokenizer.ggml.tokens") -> int:
    """Offset of the u64 element count of a string array."""
    return data.index(key) + len(key) + 8


def _element_offset(data: bytes, count_at: int, i: int) -> int:
    pos = count_at + 8
    for _ in range(i):
        pos += 8 + struct.unpack_from("<Q", data, pos)[0]
    return pos


def _write(tmp_path: Path, data: bytes, name: str = "bad.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_string_length_past_end_of_file(files, tmp_path):
    data = bytearray(files["llama"].read_bytes())
    at = _element_offset(data, _tokens_at(data), 17)
    struct.pack_into("<Q", data, at, (1 << 63) - 1)
    with pytest.raises(GGUFError) as err:
        read_header(_write(tmp_path, bytes(data)))
    assert str(err.value) == (f"at offset {at}: tokenizer.ggml.tokens[17]: string length "
                              f"9223372036854775807 runs past the end of the file "
                              f"(size {len(data)})")


def test_huge_array_count_fails_before_allocating(files, tmp_path):
    data = bytearray(files["llama"].read_bytes())
    struct.pack_into("<Q", data, _tokens_at(data), 1 << 60)
    p = _write(tmp_path, bytes(data))
    tracemalloc.start()
    try:
        with pytest.raises(GGUFError, match=r"tokenizer.ggml.tokens: count 1152921504606846976"):
            read_header(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(data) + MiB


@pytest.mark.parametrize("patch,match", [
    (lambda d: d.__setitem__(slice(0, 4), b"GGML"), r"at offset 0: magic: .*not a GGUF"),
    (lambda d: struct.pack_into("<I", d, 4, 1), r"at offset 4: version: GGUF version 1"),
    (lambda d: struct.pack_into("<I", d, 4, 3 << 24), r"big-endian"),
    (lambda d: struct.pack_into("<Q", d, 8, 1 << 40), r"tensor count: count 1099511627776"),
    (lambda d: struct.pack_into("<Q", d, 16, 1 << 62), r"metadata count: count"),
])
def test_bad_preamble(files, tmp_path, patch, match):
    data = bytearray(files["llama"].read_bytes())
    patch(data)
    with pytest.raises(GGUFError, match=match):
        read_header(_write(tmp_path, bytes(data)))


def test_unknown_value_type(files, tmp_path):
    data = bytearray(files["llama"].read_bytes())
    at = data.index(b"test.u8") + len(b"test.u8")
    struct.pack_into("<I", data, at, 99)
    with pytest.raises(GGUFError, match=rf"at offset {at}: test.u8: unknown value type 99"):
        read_header(_write(tmp_path, bytes(data)))


def _tensor_info_at(data: bytes, name: bytes) -> int:
    """Offset of n_dims for the (last occurrence of the) tensor name."""
    return data.rindex(name) + len(name)


def test_absurd_n_dims_and_unknown_tensor_type(files, tmp_path):
    data = bytearray(files["llama"].read_bytes())
    at = _tensor_info_at(data, b"output_norm.weight")
    bad = bytearray(data)
    struct.pack_into("<I", bad, at, 1000)
    with pytest.raises(GGUFError, match=rf"at offset {at}: tensor #\d+ \(output_norm.weight\) "
                                        r"n_dims: n_dims 1000 is absurd"):
        read_header(_write(tmp_path, bytes(bad)))
    bad = bytearray(data)
    struct.pack_into("<I", bad, at + 4 + 8, 77)              # one dim, then the type
    with pytest.raises(GGUFError, match=r"output_norm.weight\) type: unknown ggml tensor type 77"):
        read_header(_write(tmp_path, bytes(bad)))


def test_corrupt_tensor_offset(files, tmp_path):
    data = bytearray(files["llama"].read_bytes())
    at = _tensor_info_at(data, b"output_norm.weight") + 4 + 8 + 4
    struct.pack_into("<Q", data, at, 12345)
    with pytest.raises(GGUFError, match=r"offset 12345, expected \d+"):
        read_header(_write(tmp_path, bytes(data)))


def test_truncated_download(files, tmp_path):
    data = files["hybrid"].read_bytes()
    h = read_header(files["hybrid"])
    with pytest.raises(GGUFError, match=r"data ends at byte \d+ but the file has \d+: truncated"):
        read_header(_write(tmp_path, data[: h.header_bytes + 100]))
    with pytest.raises(GGUFError, match=r"at offset \d+: tokenizer\.ggml\.\w+.*\(size 5000\)"):
        read_header(_write(tmp_path, data[:5000]))


def test_truncated_over_http(files, tmp_path):
    with open(files["big"], "rb") as f:
        data = f.read(MiB)
    p = _write(tmp_path, data, "cut.gguf")
    # the size is known from Content-Range: the count alone gives it away
    with gf.RangeServer({"cut": p}) as srv, pytest.raises(
            GGUFError, match=r"tokenizer.ggml.tokens: count 262144 x 8 bytes cannot fit .*"
                             r"\(size 1048576\)"):
        read_header(srv.url("cut"))
    # no length at all: the stream runs dry inside the vocabulary
    with gf.RangeServer({"cut": p}, honour_range=False, send_length=False) as srv, \
            pytest.raises(GGUFError, match=r"tokenizer.ggml.tokens\[\d+\].*(ends at|end of the "
                                                   r"file \(size) 1048576"):
        read_header(srv.url("cut"))


def test_nesting_depth_is_limited(tmp_path):
    # 100 levels of array-of-array, each with one element
    body = b""
    for _ in range(100):
        body += struct.pack("<IQ", gguf.GGUFValueType.ARRAY, 1)
    body += struct.pack("<IQ", gguf.GGUFValueType.UINT8, 1) + b"\x00"
    key = b"deep"
    data = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
            + struct.pack("<I", gguf.GGUFValueType.ARRAY) + body)
    with pytest.raises(GGUFError, match=r"deep(\[0\])+: arrays nested deeper than 16"):
        read_header(_write(tmp_path, data))


# --------------------------------------------------------------------------- fuzzing

@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[tuple[bytes, int]]:
    """Whole small files, with where their header ends: mutations land in the header."""
    d = tmp_path_factory.mktemp("seeds")
    paths = [gf.small_llama(d / "l.gguf", n_vocab=40), gf.per_layer_kv(d / "p.gguf"),
             gf.hybrid(d / "h.gguf", blocks=4, nextn=1, n_vocab=8), gf.projector(d / "c.gguf"),
             gf.sliding(d / "s.gguf", pattern=[True, False] * 6)]
    return [(p.read_bytes(), read_header(p).header_bytes) for p in paths]


_HUGE = st.sampled_from([1 << 60, (1 << 63) - 1, (1 << 64) - 1, 1 << 32, 0xFFFFFFFF, 1000])


@st.composite
def mutations(draw, seeds):
    whole, header = seeds[draw(st.integers(0, len(seeds) - 1))]
    data = bytearray(whole)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "u64", "u32"]))
        # mostly past the 24-byte preamble, where the interesting parsing is
        at = draw(st.one_of(st.integers(0, 23), st.integers(24, header - 9),
                            st.integers(24, header - 9)))
        if kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "u64":
            struct.pack_into("<Q", data, at, draw(_HUGE))
        else:
            struct.pack_into("<I", data, at, draw(st.integers(0, 0xFFFFFFFF)))
    cut = draw(st.one_of(st.none(), st.integers(0, header + 64)))
    return bytes(data if cut is None else data[:cut])


def _read_and_summarize(source, **kw) -> None:
    """Only GGUFError may escape, from reading or from summarizing what was read."""
    try:
        summarize(read_header(source, **kw))
    except GGUFError:
        pass


def _bounded(path: Path, budget: int) -> None:
    tracemalloc.start()         # traced only while reading: hypothesis' own work is not ours
    try:
        _read_and_summarize(path)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak <= budget, f"allocated {peak} bytes reading a {path.stat().st_size}-byte file"


def test_fuzz_local_files_only_raise_gguf_error(seeds, tmp_path):
    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=mutations(seeds))
    def check(data):
        p = _write(tmp_path, data, "fuzz.gguf")
        _bounded(p, budget=64 * len(data) + MiB)

    check()


def test_fuzz_over_http_only_raises_gguf_error(seeds, tmp_path):
    files: dict[str, Path] = {}
    with gf.RangeServer(files) as srv, httpx2.Client() as client:
        @settings(max_examples=100, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(data=mutations(seeds))
        def check(data):
            srv.files["f"] = _write(tmp_path, data, "fuzz-http.gguf")
            _read_and_summarize(srv.url("f"), client=client)

        check()


# --------------------------------------------------------------------------- frank preflight

def test_preflight_prints_the_summary_over_http(server, capsys):
    assert preflight.main([server.url("mtp")]) == 0
    out = capsys.readouterr().out
    assert "architecture          qwen35, GGUF v3" in out
    assert "9 blocks: 2 attention, 6 recurrent, 1 NextN (MTP); every 4th layer is attention" in out
    assert "ssm                   conv_kernel 4, inner_size 512, state_size 32" in out
    assert "in 1 request(s)" in out and "nextn_predict_layers  1" in out


def test_preflight_projector(files, capsys):
    assert preflight.main([str(files["clip"])]) == 0
    out = capsys.readouterr().out
    assert "projector     qwen3vl_merger, vision encoder True, audio encoder False" in out
    assert "weights       " in out and "F16" in out and "BF16" in out


@pytest.mark.parametrize("argv,match", [
    (["/nonexistent.gguf"], r"frank preflight: /nonexistent.gguf: No such file or directory"),
    (["http://127.0.0.1:9/m.gguf", "--timeout", "2"], r"frank preflight: GET .*ConnectError"),
    (["{llama}", "--ctx", "lots"], r"--ctx 'lots' is not a token count"),
    (["{llama}", "--ctx", "4096", "--parallel", "0"], r"--parallel 0: need at least 1 slot"),
])
def test_preflight_errors_are_one_line(files, capsys, argv, match):
    argv = [a.replace("{llama}", str(files["llama"])) for a in argv]
    assert preflight.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(match, err)


def test_preflight_bad_file_is_one_line(files, tmp_path, capsys):
    data = bytearray(files["llama"].read_bytes())
    struct.pack_into("<Q", data, _tokens_at(data), 1 << 60)
    assert preflight.main([str(_write(tmp_path, bytes(data)))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("frank preflight: at offset ") and err.count("\n") == 1
