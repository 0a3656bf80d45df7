"""llama.cpp's log, kept out of the tests' captured output: one file per process, and each
launched server's part of it readable on its own, for its endpoint's report.

llama.cpp runs in this process (xllamacpp) and logs from its own thread, at any moment, to C's
`stderr` stream, which is file descriptor 2; pytest points fd 2 at the running test's capture, so
a line like "W slot operator(): ... n_past was set to 63" landed in whichever test ran. xllamacpp
offers no log callback or log file (its CommonParams has no log_file, and llama.cpp's
common_log_set_file only adds a copy beside the console), and pytest points fd 2 anew for every
test, so redirecting the descriptor would not hold. The C stream can be redirected: while a
launched server lives, the C library's `stderr` pointer names this process's log file, and fd 2
(Python's sys.stderr, pytest's capture, faulthandler) is left alone.

The trade-off: the stream belongs to the whole process. Other C code writing to `stderr` while a
server runs (rare; Python itself only for a fatal error) lands in the log too, and llama.cpp has
one logger per process, so servers launched side by side share the file and their later lines
interleave; each server's part starts where its launch began, and says when it was shared.
Where the C library's `stderr` is not a plain variable (not glibc, not macOS) nothing is
redirected: the log stays on stderr, as before, and `begin()` returns None.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import platform
import re
import sys
import tempfile
import threading
from dataclasses import dataclass

from pytest_frank.base import redact

TAIL = 32 * 1024  # characters of a server's log a report shows: its end, where a failure is
_IONBF = 2  # setvbuf: unbuffered, so the file holds each line as soon as it is written

_lock = threading.Lock()
_live: list[ServerLog] = []
_opened: tuple[str, int] | None = None  # this process's log: its path and C FILE*, kept open
_saved: int | None = None  # the C library's own stderr while the log stands in for it


MIXED = ("[one llama.cpp log per process: lines of the servers launched beside this one are "
         "mixed in]")


def collapsed(text: str) -> str:
    """A run of lines alike but for their numbers ("n_past was set to 63", "... 64", one per
    request) as its first line, how many like it came between, and its last: one such run
    filled most of a report, and hid the lines around it. A cycle of two or three lines repeated
    alike (llama.cpp's "need to evaluate at least 1 token ..." then "n_past was set to ...", each
    request) folds the same way, its first and last cycle kept whole."""
    lines = text.split("\n")
    shapes = [_shape(line) if line.strip() else None for line in lines]
    out: list[str] = []
    i = 0
    while i < len(lines):
        times, period = _repeats(shapes, i)
        if times > 2:
            out.extend(lines[i:i + period])
            out.append(f"[{(times - 2) * period} more line(s) like these]")
            out.extend(lines[i + (times - 1) * period:i + times * period])
            i += times * period
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


def _repeats(shapes: list[str | None], at: int) -> tuple[int, int]:
    """How many times the cycle of 1, 2 or 3 line shapes at `at` repeats back to back, and its
    length: the cycle that covers the most lines (the shortest where they tie)."""
    best = (1, 1)
    for period in (1, 2, 3):
        cycle = shapes[at:at + period]
        if len(cycle) < period or None in cycle:
            break
        times = 1
        while shapes[at + times * period:at + (times + 1) * period] == cycle:
            times += 1
        if times > 2 and times * period > best[0] * best[1]:
            best = (times, period)
    return best


def _shape(line: str) -> str:
    return re.sub(r"\d+", "#", line)


@dataclass(eq=False)
class ServerLog:
    """One launched server's part of the process's llama.cpp log: from its launch to its stop."""

    path: str
    start: int
    end: int | None = None  # set when the server stops
    shared: bool = False  # another launched server wrote to the log while this one ran

    def text(self) -> str:
        """The whole part as written (for the reason of a failed start)."""
        return _read(self.path, self.start, self._end())

    def tail(self, limit: int = TAIL) -> str:
        """The end of the part, at most `limit` characters, secrets masked, control characters
        escaped: ready for a report."""
        end = self._end()
        start = max(self.start, end - limit)
        text = _read(self.path, start, end)
        if start > self.start:  # a cut line is no evidence: start at the next whole one
            text = f"[{start - self.start} earlier bytes not shown]\n" + text.partition("\n")[2]
        text = collapsed(text)
        if self.shared:
            text = f"{MIXED}\n{text}"
        return redact.inert(text, limit + 200)

    def close(self) -> None:
        """The server stopped (or never started): its part ends with what llama.cpp still held;
        the last one out hands `stderr` back."""
        with _lock:
            if self not in _live:
                return
            drain()
            _live.remove(self)
            if not _live:
                _restore()
            self.end = os.path.getsize(self.path)

    def _end(self) -> int:
        return self.end if self.end is not None else os.path.getsize(self.path)


def begin() -> ServerLog | None:
    """llama.cpp's lines from now on go to the log; the caller's server owns them until it
    closes its part. None where the C library's stderr cannot be redirected."""
    with _lock:
        slot = _stderr_slot()
        if slot is None:
            return None
        path, stream = _open()
        if not _live:
            global _saved
            _saved, slot.value = slot.value, stream
        log = ServerLog(path, os.path.getsize(path), shared=bool(_live))
        for other in _live:
            other.shared = True
        _live.append(log)
        return log


def _stderr_slot() -> ctypes.c_void_p | None:
    """The C library's `stderr` pointer, where it is a plain variable: glibc's `stderr`, macOS's
    `__stderrp` (musl's is a constant, Windows has none)."""
    if sys.platform == "darwin":
        name = "__stderrp"
    elif sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        name = "stderr"
    else:
        return None
    try:
        return ctypes.c_void_p.in_dll(ctypes.CDLL(None), name)
    except (OSError, ValueError):
        return None


def _open() -> tuple[str, int]:
    """The process's log file as a C stream, opened once and never closed: llama.cpp's logger
    thread may still hold the pointer after `stderr` is handed back."""
    global _opened
    if _opened is None:
        fd, path = tempfile.mkstemp(prefix="frank-llama-", suffix=".log")
        os.close(fd)
        libc = ctypes.CDLL(None)
        libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p] * 2
        libc.setvbuf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        stream = libc.fopen(os.fsencode(path), b"a")
        if not stream:
            raise OSError(ctypes.get_errno(), f"cannot open {path} for llama.cpp's log")
        libc.setvbuf(stream, None, _IONBF, 0)
        atexit.register(remove, path)
        _opened = (path, stream)
    return _opened


def _restore() -> None:
    slot = _stderr_slot()
    if slot is not None and _saved is not None:
        slot.value = _saved


def drain() -> None:
    """Let llama.cpp's logger thread write out what it holds (common_log_flush, which restarts
    the thread; a line another server logs in that instant is dropped, a small price for the
    lines that say why a server stopped or never started)."""
    try:
        import xllamacpp.xllamacpp as native

        lib = ctypes.CDLL(native.__file__)
        main = lib._Z15common_log_mainv  # common_log_main()
        flush = lib._Z16common_log_flushP10common_log  # common_log_flush(common_log *)
    except (ImportError, OSError, AttributeError):
        return  # another build: its lines arrive a moment later, still in the file
    main.restype, flush.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    flush(main())


# llama_kv_cache's summary of each cache it allocates (src/llama-kv-cache.cpp). xllamacpp
# 2026.10.11549 logs it at verbosity 4 (debug), not at 3.
_KV_LINE = re.compile(
    r"llama_kv_cache: size = *(?P<mib>[\d.]+) MiB \( *(?P<cells>\d+) cells, *(?P<layers>\d+) "
    r"layers, *(?P<seqs>\d+)/(?P<streams>\d+) seqs\), K \((?P<type_k>\w+)\): *[\d.]+ MiB, "
    r"V \((?P<type_v>\w+)\): *[\d.]+ MiB")


@dataclass(frozen=True)
class KVCache:
    """One KV cache as llama.cpp's log reports allocating it."""

    mib: float  # K and V together, as logged (two decimals)
    cells: int  # per stream
    layers: int
    seqs: int
    streams: int
    type_k: str
    type_v: str


# load_tensors' line per weights buffer it maps or allocates: one per model loaded (and device).
_MODEL_BUFFER = re.compile(r"load_tensors: +\S+ model buffer size = *(?P<mib>[\d.]+) MiB")


def model_buffers(text: str) -> list[float]:
    """The MiB of each model weights buffer the log reports: a second model file loaded (a
    draft model) adds its own."""
    return [float(m["mib"]) for m in _MODEL_BUFFER.finditer(text)]


def kv_caches(text: str) -> list[KVCache]:
    """The KV caches a server's log says it allocated (a sliding-window model has two)."""
    found = []
    for m in _KV_LINE.finditer(text):
        d = m.groupdict()
        found.append(KVCache(float(d["mib"]), int(d["cells"]), int(d["layers"]), int(d["seqs"]),
                             int(d["streams"]), d["type_k"], d["type_v"]))
    return found


# llama_memory_recurrent's summary of a hybrid's or an SSM's recurrent state (src/llama-memory-
# recurrent.cpp), logged at verbosity 4 like the KV line: cells are sequences, "layers" the trunk's
# block count (attention layers included, though they hold no state), rs_seq the extra snapshots
# per cell (the MTP draft length; builds before MTP print neither it nor P).
_RECURRENT_LINE = re.compile(
    r"llama_memory_recurrent: size = *(?P<mib>[\d.]+) MiB \( *(?P<cells>\d+) cells, "
    r"*(?P<layers>\d+) layers, *(?P<seqs>\d+) seqs(?: +(?P<rs_seq>\d+) rs_seq)?\), "
    r"R \(\w+\): *(?P<r_mib>[\d.]+) MiB, S \(\w+\): *(?P<s_mib>[\d.]+) MiB")


@dataclass(frozen=True)
class RecurrentState:
    """One recurrent state cache as llama.cpp's log reports allocating it."""

    mib: float  # R and S (and P) together, as logged (two decimals)
    cells: int  # one per sequence
    layers: int  # the trunk's blocks, as llama.cpp counts them
    seqs: int
    rs_seq: int  # snapshots kept per cell beside its own row; 0 without MTP
    r_mib: float  # the conv state
    s_mib: float  # the SSM state


def recurrent_states(text: str) -> list[RecurrentState]:
    """The recurrent state caches a server's log says it allocated (one for a hybrid)."""
    found = []
    for m in _RECURRENT_LINE.finditer(text):
        d = m.groupdict()
        found.append(RecurrentState(float(d["mib"]), int(d["cells"]), int(d["layers"]),
                                    int(d["seqs"]), int(d["rs_seq"] or 0), float(d["r_mib"]),
                                    float(d["s_mib"])))
    return found


def verbosity() -> int | None:
    """llama.cpp's log threshold for the whole process (a launch sets it), where readable."""
    fn = _native("_Z30common_log_get_verbosity_tholdv")  # common_log_get_verbosity_thold()
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    return int(fn())


def set_verbosity(level: int) -> None:
    """Set the process's threshold back, e.g. after a server launched at debug level."""
    fn = _native("_Z30common_log_set_verbosity_tholdi")  # common_log_set_verbosity_thold(int)
    if fn is not None:
        fn.argtypes = [ctypes.c_int]
        fn(level)


def _native(symbol: str):
    """A function of xllamacpp's llama.cpp build, or None in another build."""
    try:
        import xllamacpp.xllamacpp as native

        return getattr(ctypes.CDLL(native.__file__), symbol)
    except (ImportError, OSError, AttributeError):
        return None


def _read(path: str, start: int, end: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(max(0, end - start)).decode("utf-8", "replace")


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
