"""Read a GGUF file's metadata and tensor table, from a path or an http(s) URL, without the weights.

The header is parsed straight off a growing buffer: a local file is read in growing chunks, a URL
with ranged GETs that double in size, so a 15 GB model costs a few MB. Every count and length in
the file is checked against the bytes that can still follow before anything is allocated, and any
problem surfaces as one exception, `GGUFError`, naming the byte offset and the field.
"""

from __future__ import annotations

import abc
import math
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

import gguf
import httpx2

from pytest_frank.transport import http

MiB = 1 << 20
FIRST_READ = 64 * 1024          # enough for most small headers in one round trip
MAX_READ = 16 * MiB             # cap on a single grown read
# A long string array's remaining bytes are estimated from its head, with slack: later tokens
# run longer, and a vocabulary is followed by per-token arrays (scores, types) that the
# overshoot reads anyway.
ARRAY_SLACK = 1.15
MAX_HEADER_BYTES = 512 * MiB    # no real header comes near this; a hostile count would
MAX_DIMS = 4                    # GGML_MAX_DIMS
MAX_NESTING = 16                # arrays of arrays; deeper is a crafted file, not a model
MAX_LAYERS = 1 << 16            # block_count sanity bound before building per-layer lists
INT64_MAX = (1 << 63) - 1

VT = gguf.GGUFValueType
# struct format and size of each fixed-size value type
_FIXED = {
    VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
    VT.FLOAT32: "f", VT.BOOL: "?", VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT64: "d",
}
# smallest encoding of one element: a string is at least its u64 length, an array its type+count
_MIN_SIZE = {**{t: struct.calcsize("<" + f) for t, f in _FIXED.items()}, VT.STRING: 8, VT.ARRAY: 12}


class GGUFError(Exception):
    """The GGUF could not be read: bad or truncated data, or the source could not be fetched."""

    frank_source: str | None = None  # which configured file it was, where a caller says


class GGUFSourceError(GGUFError):
    """The bytes could not be fetched at all (missing file, HTTP error, refused connection)."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]          # ggml order: ne[0] (the contiguous row) first
    ggml_type: gguf.GGMLQuantizationType
    offset: int                     # relative to the start of the data section

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        block, size = gguf.GGML_QUANT_SIZES[self.ggml_type]
        return self.n_elements // block * size


@dataclass
class GGUFHeader:
    source: str
    version: int
    metadata: dict[str, Any]
    value_types: dict[str, gguf.GGUFValueType]
    tensors: list[TensorInfo]
    alignment: int
    header_bytes: int               # where the (aligned) tensor data starts
    file_size: int | None           # None only when a server gave no length at all
    bytes_read: int = 0
    requests: int = 0
    key_offsets: dict[str, int] = field(default_factory=dict, repr=False)  # where each value is
    _by_name: dict[str, TensorInfo] = field(default_factory=dict, repr=False)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def get(self, key: str, default: Any = None) -> Any:
        """`key` as written, else `<arch>.key`; a literal "{arch}" in the key is filled in."""
        arch = self.architecture or ""
        key = key.replace("{arch}", arch)
        if key in self.metadata:
            return self.metadata[key]
        return self.metadata.get(f"{arch}.{key}", default) if arch else default

    def resolve(self, key: str) -> str:
        """The metadata key `get` would read (arch prefix applied when that is what exists)."""
        arch = self.architecture or ""
        key = key.replace("{arch}", arch)
        return key if key in self.metadata or not arch else f"{arch}.{key}"

    def error(self, key: str, why: str) -> GGUFError:
        """A GGUFError about a metadata value, naming where it sits in the file."""
        key = self.resolve(key)
        at = self.key_offsets.get(key)
        return GGUFError(f"at offset {at}: {key}: {why}" if at is not None else f"{key}: {why}")

    def tensor(self, name: str) -> TensorInfo | None:
        if not self._by_name:
            self._by_name = {t.name: t for t in self.tensors}
        return self._by_name.get(name)

    @property
    def weight_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


# --------------------------------------------------------------------------- byte sources

class _Source(abc.ABC):
    """Bytes [0, n) of a file, fetched front to back in growing chunks."""

    def __init__(self, name: str, max_header_bytes: int):
        self.name = name
        self.size: int | None = None
        self.buf = bytearray()
        self.requests = 0
        self.max_header_bytes = max_header_bytes
        self._chunk = FIRST_READ

    def ensure(self, end: int) -> bool:
        """Grow the buffer to hold bytes [0, end); False when the file ends first."""
        while len(self.buf) < end:
            if self.size is not None and len(self.buf) >= self.size:
                return False
            short = end - len(self.buf)
            if short > self._chunk:  # a known big read (an array): that, and a little past it
                want = short + FIRST_READ
            else:
                want, self._chunk = self._chunk, min(self._chunk * 2, MAX_READ)
            if self.size is not None:
                want = min(want, self.size - len(self.buf))
            got = self._fetch(len(self.buf), want)
            if not got:
                self.size = len(self.buf)   # the stream ended: now we know the size
                return False
            self.buf += got
        return True

    def ensure_hint(self, end: int) -> None:
        """Fetch up to `end` in one request where the file and header limit allow: the caller
        knows roughly how much it will read, so growing step by step would cost more requests
        and overshoot further."""
        end = max(end, len(self.buf) + FIRST_READ)
        if self.size is not None:
            end = min(end, self.size)
        end = min(end, self.max_header_bytes)
        if end > len(self.buf):
            got = self._fetch(len(self.buf), end - len(self.buf))
            if not got:
                self.size = len(self.buf)
            self.buf += got

    @abc.abstractmethod
    def _fetch(self, start: int, length: int) -> bytes:
        """Up to `length` bytes from `start`; b"" at the end of the file."""

    def close(self) -> None:  # noqa: B027 -- a source with nothing to release keeps this
        """Release the file or connection."""


class _FileSource(_Source):
    def __init__(self, path: str, max_header_bytes: int):
        super().__init__(path, max_header_bytes)
        try:
            self._f = open(path, "rb")  # noqa: SIM115 -- held across reads, closed by close()
        except OSError as exc:
            raise GGUFSourceError(f"{path}: {exc.strerror or exc}") from None
        self.size = os.fstat(self._f.fileno()).st_size

    def _fetch(self, start: int, length: int) -> bytes:
        self.requests += 1
        self._f.seek(start)
        return self._f.read(length)

    def close(self) -> None:
        self._f.close()


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


class _HttpSource(_Source):
    """Ranged GETs; a server that ignores Range is read as one stream and dropped early."""

    def __init__(self, url: str, client: httpx2.Client | None, timeout: float,
                 max_header_bytes: int):
        super().__init__(url, max_header_bytes)
        self._own = client is None
        # The one capped reader every answer from the network goes through; a header read may
        # take up to max_header_bytes plus one grown read.
        self._client = client or http.client(timeout, max_body=max_header_bytes + MAX_READ,
                                             follow_redirects=True)
        self._timeout = timeout
        self._stream: httpx2.Response | None = None
        self._chunks: Iterator[bytes] = iter(())  # the open stream's, once there is one
        self._pending = b""
        try:
            self.buf += self._first()
        except BaseException:
            self.close()
            raise

    def _get(self, start: int, length: int) -> httpx2.Response:
        headers = {"Range": f"bytes={start}-{start + length - 1}", "Accept-Encoding": "identity"}
        self.requests += 1
        try:
            req = self._client.build_request("GET", self.name, headers=headers,
                                             timeout=self._timeout)
            return self._client.send(req, stream=True, follow_redirects=True)
        except httpx2.HTTPError as exc:
            raise GGUFSourceError(f"GET {self.name}: {type(exc).__name__}: {exc}") from None

    def _first(self) -> bytes:
        resp = self._get(0, FIRST_READ)
        encoding = resp.headers.get("content-encoding", "identity").lower()
        if resp.status_code in (200, 206) and encoding not in ("identity", ""):
            resp.close()
            raise GGUFSourceError(f"GET {self.name}: the server compressed the body "
                                  f"(Content-Encoding: {encoding}) although asked not to")
        if resp.status_code == 206:
            self.size = self._total_from_range(resp, 0)
            return self._read_body(resp, FIRST_READ)
        if resp.status_code == 200:     # Range ignored: keep the stream, read only what we need
            length = resp.headers.get("content-length")
            self.size = int(length) if length and length.isascii() and length.isdecimal() else None
            self._stream, self._chunks = resp, resp.iter_raw()
            return self._from_stream(FIRST_READ)
        resp.close()
        if resp.status_code == 416:
            raise GGUFSourceError(f"GET {self.name}: HTTP 416, the server says the file is empty")
        raise GGUFSourceError(f"GET {self.name}: HTTP {resp.status_code} {resp.reason_phrase}")

    def _total_from_range(self, resp: httpx2.Response, start: int) -> int | None:
        m = _CONTENT_RANGE.match(resp.headers.get("content-range", ""))
        if not m or int(m.group(1)) != start:
            resp.close()
            raise GGUFSourceError(
                f"GET {self.name}: HTTP 206 with Content-Range "
                f"{resp.headers.get('content-range')!r}, expected bytes from {start}")
        return None if m.group(3) == "*" else int(m.group(3))

    def _read_body(self, resp: httpx2.Response, limit: int) -> bytes:
        # Never trust the server to send only what was asked for.
        out = bytearray()
        try:
            for chunk in resp.iter_raw():
                out += chunk[: limit - len(out)]
                if len(out) >= limit:
                    break
        except httpx2.HTTPError as exc:
            raise GGUFSourceError(f"GET {self.name}: {type(exc).__name__}: {exc}") from None
        finally:
            resp.close()
        return bytes(out)

    def _from_stream(self, length: int) -> bytes:
        out = bytearray(self._pending[:length])
        self._pending = self._pending[length:]
        while len(out) < length:
            try:
                chunk = next(self._chunks, b"")
            except httpx2.HTTPError as exc:
                raise GGUFSourceError(f"GET {self.name}: {type(exc).__name__}: {exc}") from None
            if not chunk:
                break
            take = length - len(out)
            out += chunk[:take]
            self._pending = chunk[take:]
        return bytes(out)

    def _fetch(self, start: int, length: int) -> bytes:
        if self._stream is not None:
            return self._from_stream(length)
        resp = self._get(start, length)
        if resp.status_code != 206:
            resp.close()
            raise GGUFSourceError(
                f"GET {self.name} bytes {start}-{start + length - 1}: HTTP {resp.status_code} "
                "(the first read was ranged, this one was not)")
        self._total_from_range(resp, start)
        return self._read_body(resp, length)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._own:
            self._client.close()


def _open(source: str | os.PathLike, client, timeout, max_header_bytes) -> _Source:
    text = os.fspath(source)
    if isinstance(text, str) and text.startswith(("http://", "https://")):
        return _HttpSource(text, client, timeout, max_header_bytes)
    return _FileSource(text, max_header_bytes)


# --------------------------------------------------------------------------- the parser

class _Parser:
    def __init__(self, src: _Source):
        self.src = src
        self.pos = 0
        self.offsets: dict[str, int] = {}     # metadata key -> offset of its value, for errors

    # -- primitives
    def fail(self, at: int, what: str, why: str) -> GGUFError:
        return GGUFError(f"at offset {at}: {what}: {why}")

    def need(self, n: int, what: str) -> None:
        end = self.pos + n
        if self.src.size is not None and end > self.src.size:
            raise self.fail(self.pos, what, f"needs {n} bytes but the file ends at "
                            f"{self.src.size} (truncated?)")
        if end > self.src.max_header_bytes:
            raise self.fail(self.pos, what, f"the header would run past "
                            f"{self.src.max_header_bytes // MiB} MiB; no real model's does")
        if not self.src.ensure(end):
            raise self.fail(self.pos, what, f"needs {n} bytes but the file ends at "
                            f"{self.src.size} (truncated?)")

    def unpack(self, fmt: str, what: str):
        n = struct.calcsize("<" + fmt)
        self.need(n, what)
        vals = struct.unpack_from("<" + fmt, self.src.buf, self.pos)
        self.pos += n
        return vals[0] if len(vals) == 1 else vals

    def check_count(self, count: int, elem_size: int, what: str, at: int) -> None:
        """Refuse a count that cannot fit in what is left of the file -- before allocating."""
        limit = self.src.size if self.src.size is not None else self.src.max_header_bytes
        left = max(limit - self.pos, 0)
        if count * elem_size > left:
            where = (f"the end of the file (size {limit})" if self.src.size is not None
                     else f"the {limit // MiB} MiB header limit")
            raise self.fail(at, what, f"count {count} x {elem_size} bytes cannot fit in the "
                            f"{left} bytes left before {where}")

    def string(self, what: str) -> str:
        at = self.pos
        n = self.unpack("Q", what)
        size = self.src.size
        if size is not None and self.pos + n > size:
            raise self.fail(at, what, f"string length {n} runs past the end of the file "
                            f"(size {size})")
        self.need(n, what)
        raw = bytes(self.src.buf[self.pos:self.pos + n])
        self.pos += n
        # Real vocabularies carry the odd invalid byte sequence; that is not a reason to stop.
        return raw.decode("utf-8", errors="replace")

    def value_type(self, what: str) -> gguf.GGUFValueType:
        at = self.pos
        raw = self.unpack("I", what + " (value type)")
        try:
            return VT(raw)
        except ValueError:
            raise self.fail(at, what, f"unknown value type {raw}") from None

    def value(self, vtype: gguf.GGUFValueType, what: str, depth: int = 0):
        if vtype in _FIXED:
            return self.unpack(_FIXED[vtype], what)
        if vtype == VT.STRING:
            return self.string(what)
        return self.array(what, depth)

    def array(self, what: str, depth: int) -> list:
        at = self.pos
        if depth >= MAX_NESTING:
            raise self.fail(at, what, f"arrays nested deeper than {MAX_NESTING}")
        etype = self.value_type(what + " (array element type)")
        count = self.unpack("Q", what + " (array count)")
        self.check_count(count, _MIN_SIZE[etype], what, at)
        if etype in _FIXED:
            fmt = f"<{count}{_FIXED[etype]}"
            self.need(struct.calcsize(fmt), what)
            out = list(struct.unpack_from(fmt, self.src.buf, self.pos))
            self.pos += struct.calcsize(fmt)
            return out
        if etype == VT.STRING:
            return self.strings(count, what)
        return [self.value(etype, f"{what}[{i}]", depth + 1) for i in range(count)]

    def strings(self, count: int, what: str) -> list[str]:
        """string() in a loop, minus the per-call overhead: vocabularies hold 262k of them."""
        out, buf, unpack, start = [], self.src.buf, struct.unpack_from, self.pos
        for i in range(count):
            pos = self.pos
            if pos + 8 <= len(buf):
                end = pos + 8 + unpack("<Q", buf, pos)[0]
                if end <= len(buf):
                    out.append(buf[pos + 8:end].decode("utf-8", errors="replace"))
                    self.pos = end
                    continue
            if i:  # at the buffer's edge: ask for the rest at once, sized by the strings so far
                self.src.ensure_hint(pos + math.ceil((pos - start) / i * (count - i) * ARRAY_SLACK))
            out.append(self.string(f"{what}[{i}]"))   # the careful path
        return out

    # -- sections
    def preamble(self) -> tuple[int, int, int]:
        magic = self.unpack("4s", "magic")
        if magic != b"GGUF":
            raise self.fail(0, "magic", "expected b'GGUF' in the first 4 bytes: not a GGUF file")
        version = self.unpack("I", "version")
        if version not in (2, 3):
            hint = " (big-endian file?)" if version > 0xFFFF else ""
            raise self.fail(4, "version", f"GGUF version {version} is not supported{hint}; "
                            "this reader knows versions 2 and 3")
        at = self.pos
        n_tensors, n_kv = self.unpack("QQ", "tensor and metadata counts")
        self.check_count(n_kv, 13, "metadata count", at + 8)       # key len + type + 1 byte
        self.check_count(n_tensors, 24, "tensor count", at)        # name len + dims + type + offset
        return version, n_tensors, n_kv

    def metadata(self, n_kv: int):
        meta: dict[str, Any] = {}
        types: dict[str, gguf.GGUFValueType] = {}
        for i in range(n_kv):
            at = self.pos
            key = self.string(f"metadata key #{i}")
            # a mangled key still needs a readable name in messages
            label = key if key.isprintable() and key else f"metadata key #{i} (not printable)"
            if key in meta:
                raise self.fail(at, label, "duplicate metadata key")
            self.offsets[key] = self.pos
            vtype = self.value_type(label)
            meta[key] = self.value(vtype, label)
            types[key] = vtype
        return meta, types

    def tensor_infos(self, n_tensors: int, alignment: int) -> list[TensorInfo]:
        infos, seen, expected = [], set(), 0
        for i in range(n_tensors):
            at = self.pos
            name = self.string(f"tensor #{i} name")
            what = f"tensor #{i} ({name})"
            if name in seen:
                raise self.fail(at, what, "duplicate tensor name")
            seen.add(name)
            ti = self._one_tensor(what)
            if ti.offset != expected:
                raise self.fail(self.pos - 8, what + " offset", f"offset {ti.offset}, expected "
                                f"{expected}: the tensor table is corrupt")
            expected += _pad(ti.n_bytes, alignment)
            infos.append(TensorInfo(name, ti.shape, ti.ggml_type, ti.offset))
        return infos

    def _one_tensor(self, what: str) -> TensorInfo:
        at = self.pos
        n_dims = self.unpack("I", what + " n_dims")
        if not 1 <= n_dims <= MAX_DIMS:
            raise self.fail(at, what + " n_dims", f"n_dims {n_dims} is absurd "
                            f"(ggml tensors have 1 to {MAX_DIMS})")
        shape = self.unpack("Q" * n_dims, what + " dims")
        shape = (shape,) if n_dims == 1 else tuple(shape)
        at = self.pos
        raw = self.unpack("I", what + " type")
        try:
            qtype = gguf.GGMLQuantizationType(raw)
            block, _ = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise self.fail(at, what + " type", f"unknown ggml tensor type {raw}") from None
        n = 1
        for d in shape:
            n *= d
        if n > INT64_MAX:
            raise self.fail(at - 8 * n_dims, what + " dims", f"shape {list(shape)} overflows int64")
        if shape[0] % block:
            raise self.fail(at - 8 * n_dims, what + " dims", f"row length {shape[0]} is not a "
                            f"multiple of the {qtype.name} block size {block}")
        offset = self.unpack("Q", what + " offset")
        return TensorInfo("", shape, qtype, offset)


def _pad(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def _alignment(p: _Parser, meta: dict, types: dict) -> int:
    key = "general.alignment"
    align = meta.get(key, gguf.GGUF_DEFAULT_ALIGNMENT)
    integer = key not in types or types[key] in (VT.UINT8, VT.UINT16, VT.UINT32, VT.UINT64,
                                                  VT.INT8, VT.INT16, VT.INT32, VT.INT64)
    if not integer or align <= 0 or align & (align - 1):
        raise p.fail(p.offsets[key], key, f"{align!r} is not a positive power of two")
    return align


def _check_data_bounds(header: GGUFHeader) -> None:
    if header.file_size is None or not header.tensors:
        return
    last = max(header.tensors, key=lambda t: t.offset)
    end = header.header_bytes + last.offset + last.n_bytes
    if end > header.file_size:
        raise GGUFError(
            f"at offset {header.header_bytes + last.offset}: tensor {last.name}: data ends at "
            f"byte {end} but the file has {header.file_size}: truncated download?")


def read_header(source: str | os.PathLike, *, client: httpx2.Client | None = None,
                timeout: float = 30, max_header_bytes: int = MAX_HEADER_BYTES) -> GGUFHeader:
    """Parse the metadata and tensor table of a GGUF at a local path or http(s) URL.

    Raises GGUFError (GGUFSourceError when the bytes could not be fetched at all).
    """
    src = _open(source, client, timeout, max_header_bytes)
    try:
        p = _Parser(src)
        version, n_tensors, n_kv = p.preamble()
        meta, types = p.metadata(n_kv)
        align = _alignment(p, meta, types)
        tensors = p.tensor_infos(n_tensors, align)
        header = GGUFHeader(
            source=src.name, version=version, metadata=meta, value_types=types,
            tensors=tensors, alignment=align, header_bytes=_pad(p.pos, align),
            file_size=src.size, bytes_read=len(src.buf), requests=src.requests,
            key_offsets=p.offsets)
    finally:
        src.close()
    _check_data_bounds(header)
    return header
