"""The kept history of runs (`--frank-history DIR`): each run's JSON record in DIR, the last
`--frank-history-keep N` kept and the oldest pruned, read back for the reports' trend charts."""

from __future__ import annotations

import time
from pathlib import Path

from pytest_frank.record.results import Run, RunFileError, read_run

PREFIX = "frank-run-"  # only files of this name are read or pruned: DIR may hold others
KEEP = 30


def runs(folder: Path) -> list[Run]:
    """The kept records, oldest first; a file that is not a record is passed over."""
    found = []
    for path in _records(folder):
        try:
            found.append(read_run(path))
        except RunFileError:
            continue
    return found


def save(folder: Path, run: Run, keep: int = KEEP) -> list[Path]:
    """Write `run` into `folder` and prune to the newest `keep`; the pruned paths."""
    folder.mkdir(parents=True, exist_ok=True)
    started = run.started if run.started is not None else time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started))
    path = folder / f"{PREFIX}{stamp}-{int(started * 1000) % 1000:03d}.json"
    path.write_text(run.to_json(), encoding="utf-8")
    kept = _records(folder)
    pruned = kept[:max(len(kept) - keep, 0)]
    for old in pruned:
        old.unlink()
    return pruned


def _records(folder: Path) -> list[Path]:
    """The records by name, which sorts them by their start time."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{PREFIX}*.json") if p.is_file())
