"""`frank launch`: a real llama.cpp server (xllamacpp, in this process) that stays up for `frank
init` and the battery until Ctrl-C or SIGTERM, from a GGUF or a self-test model. It takes the
keys of a fleet's `launch:` block, whose server ends with its pytest run; this one ends when it
is told to. What it serves, where, its log and how to stop it are printed first.

While it serves, a record of it (its port and pid) lies in this user's temporary folder, so a
battery run on this machine knows the server at that port was started by `frank launch` and
spells a fix's settings as `frank launch` takes them (`FRANK_LAUNCH`, which the llama.cpp driver
lends the claims), not as llama-server's flags, which it does not take alike."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from pytest_frank.base.hosts import is_local
from pytest_frank.local.launch import KEYS, LaunchError, launch
from pytest_frank.outcome.verdict import LaunchCommand

PORT = 8080  # llama-server's own default: a fixed port, so the fleet file that names it holds
# The launch keys this command takes as flags of their own (the rest through --set KEY=VALUE);
# --alias is repeated for each name, and takes llama-server's comma-separated list too.
OWN_FLAGS = {"alias": "--alias", "ctx_size": "--ctx-size", "parallel": "--parallel",
             "threads": "--threads"}
FRANK_LAUNCH = LaunchCommand("frank launch", OWN_FLAGS)


def spec_of(args: argparse.Namespace) -> dict:
    """The launch: block the flags spell; `--set KEY=VALUE` for any other key (YAML values)."""
    spec: dict = {"model": args.model, "port": args.port, "host": args.host}
    for key in OWN_FLAGS:
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    if args.alias:  # llama-server's spelling too: "--alias a,b" serves a and b, not "a,b"
        spec["alias"] = [name for given in args.alias for name in given.split(",") if name]
    for pair in args.set:
        key, eq, value = pair.partition("=")
        if not eq or key not in KEYS:
            raise LaunchError(f"--set {pair}: expected KEY=VALUE with a launch key "
                              f"({', '.join(sorted(KEYS))})")
        spec[key] = yaml.safe_load(value)
    if args.api_key_env:  # the key from the environment: never on a command line or a screen
        secret = os.environ.get(args.api_key_env)
        if not secret:
            raise LaunchError(f"--api-key-env {args.api_key_env}: ${args.api_key_env} is not set")
        spec["api_key"] = secret
    return spec


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="frank launch", description=__doc__.splitlines()[0])
    parser.add_argument("model", help='a GGUF path, "selftest" or "selftest:<variant>"')
    parser.add_argument("--port", type=int, default=PORT, help=f"default {PORT}; 0: a free one")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--alias", action="append", help="a served name (repeat for more, or "
                        "a comma-separated list)")
    parser.add_argument("--ctx-size", type=int, help="the total context (default 4096)")
    parser.add_argument("--parallel", type=int, help="slots (default 1)")
    parser.add_argument("--threads", type=int, help="CPU threads (default 1)")
    parser.add_argument("--api-key-env", metavar="NAME",
                        help="require the key held in $NAME (frank init --api-key-env NAME)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any other launch: key (docs: fleet.md), e.g. --set "
                             "reasoning_format=none")
    args = parser.parse_args(argv)
    stop = threading.Event()
    try:
        server = launch(spec_of(args))
    except LaunchError as exc:
        print(f"frank launch: {exc}", file=sys.stderr)
        return 1
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    pid = os.getpid()
    record = _record(server.port, pid)
    print(f"frank launch: {args.model} at {server.url} (pid {pid})", flush=True)
    print(f"  next: frank init {server.url} -o fleet.yaml && pytest --endpoints fleet.yaml")
    if server.log_path:
        print(f"  log:  {server.log_path}")
    print(f"  stop: Ctrl-C, or kill {pid}", flush=True)
    try:
        while not stop.wait(0.5):  # a short wait: the signal handler runs between waits
            pass
    finally:
        record.unlink(missing_ok=True)
        server.stop()
    print("frank launch: stopped", flush=True)
    return 0


def records() -> Path:
    """Where the records of this user's running `frank launch` servers lie."""
    return Path(tempfile.gettempdir()) / f"pytest-frank-{os.getuid()}" / "launched"


def _record(port: int, pid: int) -> Path:
    folder = records()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{port}.json"
    path.write_text(json.dumps({"port": port, "pid": pid}))
    return path


def serves(url: str | None) -> bool:
    """Whether a `frank launch` of this machine serves `url`: a record for its port whose
    process still runs (one that was killed leaves its record, read as gone)."""
    parts = urlsplit(url or "")
    try:
        port = parts.port
    except ValueError:
        return False
    if port is None or not is_local(parts.hostname or ""):
        return False
    try:
        pid = int(json.loads((records() / f"{port}.json").read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True
