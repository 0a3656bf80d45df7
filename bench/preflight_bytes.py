"""How many bytes and requests a URL preflight costs, per test GGUF.

Writes the test GGUFs (weights as sparse zeros, so the "15 GB" file costs nothing on disk),
serves them over a local HTTP server that counts what it sends, and reads each header by URL --
once with Range honoured and once from a server that ignores Range.

    python bench/preflight_bytes.py [--quick]

Its whole run is already the smallest that reads each kind of header (a second or two), so
--quick, which every bench script takes, runs the same.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

import gguf_files as gf
import httpx2
import quick

from pytest_frank.gguf.reader import read_header


def build(d: Path) -> dict[str, Path]:
    return {
        "llama-tiny": gf.small_llama(d / "llama.gguf"),
        "hybrid-mtp": gf.hybrid(d / "hybrid.gguf", nextn=1),
        "seed-shaped": gf.seed_shaped(d / "seed.gguf"),
        "per-layer-kv": gf.per_layer_kv(d / "per_layer.gguf"),
        "mmproj": gf.projector(d / "mmproj.gguf"),
        "vocab-262k-15GB": gf.large_vocab(d / "big.gguf", claimed_bytes=15 * 10**9),
    }


def measure(files: dict[str, Path], honour_range: bool) -> list[tuple]:
    rows = []
    with gf.RangeServer(files, honour_range=honour_range) as srv, httpx2.Client() as client:
        for name in files:
            t = time.perf_counter()
            h = read_header(srv.url(name), client=client)
            ms = (time.perf_counter() - t) * 1000
            time.sleep(0.05)        # let a dropped stream's handler notice the hang-up
            rows.append((name, h.header_bytes, h.bytes_read, h.requests,
                         h.bytes_read / h.header_bytes, h.file_size,
                         srv.sent_by_file.get(name, 0), ms))
    return rows


def report(title: str, rows: list[tuple]) -> None:
    print(title)
    print(f"{'file':<17}{'header B':>11}{'read B':>11}{'GETs':>6}{'read/hdr':>9}"
          f"{'file B':>13}{'server sent':>13}{'ms':>7}")
    for name, header, read, requests, ratio, size, sent, ms in rows:
        print(f"{name:<17}{header:>11}{read:>11}{requests:>6}{ratio:>9.2f}{size:>13}"
              f"{sent:>13}{ms:>7.0f}")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    quick.flag(parser)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp))
        report("Range honoured (206):", measure(files, honour_range=True))
        report("Range ignored (200, stream dropped early; 'server sent' includes socket "
               "buffering):", measure(files, honour_range=False))
    return quick.judged(True, opts.quick)


if __name__ == "__main__":
    sys.exit(main())
