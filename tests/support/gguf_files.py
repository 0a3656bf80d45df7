"""Test GGUFs written with gguf-py's GGUFWriter, and a counting HTTP server that honours Range.

Only headers matter here, so tensor data is never written: the file is truncated to its full
size instead, which leaves a sparse file of zeros -- a "15 GB model" costs nothing on disk.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gguf

Q = gguf.GGMLQuantizationType
VT = gguf.GGUFValueType


def tensor_nbytes(ne: tuple[int, ...], qtype: Q) -> int:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = 1
    for d in ne:
        n *= d
    return n // block * size


def _pad(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def write_gguf(path: Path, arch: str, kv: dict[str, Any],
               tensors: Iterable[tuple[str, tuple[int, ...], Q]] = (), *,
               alignment: int | None = None) -> Path:
    """Write a GGUF. kv values are plain (int -> UINT32, list -> typed by its first element)
    or (value, GGUFValueType); "{arch}" in a key is filled in. Tensor shapes are ggml order."""
    w = gguf.GGUFWriter(path, arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value in kv.items():
        key = key.format(arch=arch)
        if isinstance(value, tuple):
            w.add_key_value(key, value[0], value[1], sub_type=value[2] if len(value) > 2 else None)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, value)
    data = 0
    for name, ne, qtype in tensors:
        nbytes = tensor_nbytes(ne, qtype)
        w.add_tensor_info(name, tuple(reversed(ne)), gguf.np.dtype("float32"), nbytes,
                          raw_dtype=qtype)
        data += _pad(nbytes, w.data_alignment)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    header = _pad(w.fout[0].tell(), w.data_alignment)
    w.close()
    with open(path, "r+b") as f:
        f.truncate(header + data)       # sparse zeros stand in for the weights
    return path


def vocab(n: int) -> dict[str, Any]:
    tokens = [f"<t{i}>" for i in range(n)]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": ([0.0] * n, VT.ARRAY, VT.FLOAT32),
        "tokenizer.ggml.token_type": ([1] * n, VT.ARRAY, VT.INT32),
    }


def _blocks(n: int, embd: int, kv_dim: int, qtype: Q = Q.Q8_0) -> list:
    out = []
    for i in range(n):
        out += [(f"blk.{i}.attn_norm.weight", (embd,), Q.F32),
                (f"blk.{i}.attn_q.weight", (embd, embd), qtype),
                (f"blk.{i}.attn_k.weight", (embd, kv_dim), qtype),
                (f"blk.{i}.attn_v.weight", (embd, kv_dim), qtype),
                (f"blk.{i}.ffn_down.weight", (embd * 2, embd),
                 Q.Q4_K if embd % 128 == 0 else qtype)]
    return out


def every_value_type() -> dict[str, Any]:
    """One key of every GGUF value type, nested arrays included."""
    return {
        "test.u8": (200, VT.UINT8), "test.i8": (-100, VT.INT8),
        "test.u16": (60000, VT.UINT16), "test.i16": (-30000, VT.INT16),
        "test.u32": (4_000_000_000, VT.UINT32), "test.i32": (-2_000_000_000, VT.INT32),
        "test.f32": (0.5, VT.FLOAT32), "test.bool": (True, VT.BOOL),
        "test.str": ("héllo", VT.STRING), "test.u64": ((1 << 64) - 1, VT.UINT64),
        "test.i64": (-(1 << 62), VT.INT64), "test.f64": (0.125, VT.FLOAT64),
        "test.bools": ([True, False, True], VT.ARRAY, VT.BOOL),
        "test.strs": (["a", "", "ccc"], VT.ARRAY, VT.STRING),
        "test.nested": ([[1, 2], [3]], VT.ARRAY, VT.ARRAY),
        "test.nested_strs": ([["x"], ["y", "z"]], VT.ARRAY, VT.ARRAY),
    }


def small_llama(path: Path, n_vocab: int = 300) -> Path:
    kv = {
        "{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
        "{arch}.feed_forward_length": 128, "{arch}.attention.head_count": 4,
        "{arch}.attention.head_count_kv": 2, "general.name": "tiny llama",
        **vocab(n_vocab), **every_value_type(),
    }
    tensors = [("token_embd.weight", (64, n_vocab), Q.F16), *_blocks(2, 64, 32),
               ("output_norm.weight", (64,), Q.F32)]
    return write_gguf(path, "llama", kv, tensors)


def hybrid(path: Path, *, blocks: int = 8, nextn: int = 0, n_vocab: int = 256,
           kv_heads: int = 2, head_dim: int = 64, embd: int = 256) -> Path:
    """Qwen3-Next style: 3 recurrent (DeltaNet) layers then 1 attention layer, repeated."""
    kv = {
        "{arch}.block_count": blocks + nextn, "{arch}.nextn_predict_layers": nextn,
        "{arch}.context_length": 262144, "{arch}.embedding_length": embd,
        "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": kv_heads,
        "{arch}.attention.key_length": head_dim, "{arch}.attention.value_length": head_dim,
        "{arch}.full_attention_interval": 4,
        "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 512, "{arch}.ssm.state_size": 32,
        "{arch}.ssm.time_step_rank": 16, "{arch}.ssm.group_count": 4,
        **vocab(n_vocab),
    }
    tensors = [("token_embd.weight", (embd, n_vocab), Q.Q6_K), *_blocks(blocks, embd, 128)]
    for i in range(blocks, blocks + nextn):
        tensors += [(f"blk.{i}.nextn.eh_proj.weight", (embd * 2, embd), Q.BF16),
                    (f"blk.{i}.attn_k.weight", (embd, 128), Q.BF16)]
    return write_gguf(path, "qwen35", kv, tensors)


def per_layer_kv(path: Path) -> Path:
    """Granite-hybrid style: no interval key, head_count_kv 0 marks the SSM layers."""
    kv = {
        "{arch}.block_count": 6, "{arch}.context_length": 131072, "{arch}.embedding_length": 128,
        "{arch}.attention.head_count": 8,
        "{arch}.attention.head_count_kv": ([0, 0, 4, 0, 0, 2], VT.ARRAY, VT.UINT32),
        "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.inner_size": 256, "{arch}.ssm.state_size": 16,
        "{arch}.ssm.time_step_rank": 8, "{arch}.ssm.group_count": 1,
    }
    return write_gguf(path, "granitehybrid", kv, [("token_embd.weight", (128, 64), Q.F16)])


def sliding(path: Path, *, window: int = 1024, pattern: Any = 6, blocks: int = 12) -> Path:
    """Gemma 3 style: a sliding window on 5 of every 6 layers."""
    kv = {
        "{arch}.block_count": blocks, "{arch}.context_length": 131072,
        "{arch}.embedding_length": 256, "{arch}.attention.head_count": 4,
        "{arch}.attention.head_count_kv": 1, "{arch}.attention.key_length": 256,
        "{arch}.attention.value_length": 256, "{arch}.attention.sliding_window": window,
    }
    if pattern is not None:
        kv["{arch}.attention.sliding_window_pattern"] = (
            (pattern, VT.ARRAY, VT.BOOL) if isinstance(pattern, list) else pattern)
    return write_gguf(path, "gemma3", kv, [("token_embd.weight", (256, 64), Q.BF16)])


def seed_shaped(path: Path) -> Path:
    """The seeds' model shape: 64 layers, every 4th attention with 4 KV heads x 256, 1 MTP layer."""
    return hybrid(path, blocks=64, nextn=1, kv_heads=4, head_dim=256, embd=256)


def large_vocab(path: Path, n_vocab: int = 262144, claimed_bytes: int = 0) -> Path:
    """A 262k-token vocabulary makes the header several MB; claimed_bytes adds a (sparse) tensor."""
    kv = {"{arch}.block_count": 1, "{arch}.context_length": 32768,
          "{arch}.embedding_length": 256, "{arch}.attention.head_count": 4, **vocab(n_vocab)}
    tensors = [("token_embd.weight", (256, n_vocab), Q.Q4_K)]
    if claimed_bytes:
        rows = claimed_bytes // tensor_nbytes((4096, 1), Q.Q8_0)
        tensors.append(("output.weight", (4096, rows), Q.Q8_0))
    return write_gguf(path, "gemma3", kv, tensors)


def projector(path: Path) -> Path:
    kv = {"clip.projector_type": "qwen3vl_merger", "clip.has_vision_encoder": True,
          "clip.has_audio_encoder": False, "clip.vision.block_count": 2,
          "clip.vision.embedding_length": 128, "clip.vision.image_size": 448,
          "clip.vision.patch_size": 16}
    tensors = [(f"v.blk.{i}.attn_qkv.weight", (128, 384), Q.BF16) for i in range(2)]
    tensors += [("mm.0.weight", (512, 256), Q.F16),
                ("v.patch_embd.weight", (16, 16, 3, 128), Q.F16)]
    return write_gguf(path, "clip", kv, tensors)


# --------------------------------------------------------------------------- HTTP server

class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass        # clients hanging up mid-body is the point of some tests


class RangeServer:
    """Serves files on 127.0.0.1, counting requests and body bytes actually sent.

    honour_range=False answers every GET with 200 and the whole body (a server that ignores
    Range); send_length=False also drops Content-Length, so the size is unknown to the client.
    """

    def __init__(self, files: dict[str, Path], *, honour_range: bool = True,
                 send_length: bool = True):
        self.files = {name: Path(p) for name, p in files.items()}
        self.honour_range, self.send_length = honour_range, send_length
        self.requests = 0
        self.bytes_sent = 0
        self.sent_by_file: dict[str, int] = {}
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, name: str) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/{name}"

    def reset(self) -> None:
        with self._lock:
            self.requests = self.bytes_sent = 0
            self.sent_by_file.clear()

    def _count(self, name: str, requests: int = 0, sent: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes_sent += sent
            self.sent_by_file[name] = self.sent_by_file.get(name, 0) + sent

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in separate writes: without this, delayed ACKs
                # add ~40 ms to every request
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                name = self.path.lstrip("/")
                server._count(name, requests=1)
                path = server.files.get(name)
                if path is None:
                    self.send_error(404)
                    return
                size = path.stat().st_size
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if server.honour_range and m:
                    start = int(m.group(1))
                    end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
                    if start >= size:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                else:
                    start, end = 0, size - 1
                    self.send_response(200)
                if server.send_length or server.honour_range and m:
                    self.send_header("Content-Length", str(end - start + 1))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self._send(name, path, start, end + 1)

            def _send(self, name: str, path: Path, start: int, end: int) -> None:
                with open(path, "rb") as f:
                    f.seek(start)
                    while start < end:
                        chunk = f.read(min(64 * 1024, end - start))
                        try:
                            self.wfile.write(chunk)
                        except (BrokenPipeError, ConnectionResetError):
                            self.close_connection = True
                            return
                        server._count(name, sent=len(chunk))
                        start += len(chunk)

        return Handler
