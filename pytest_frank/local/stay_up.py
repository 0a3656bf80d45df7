"""`frank launch`: a real llama.cpp server (xllamacpp, in this process) that stays up for `frank
init` and the battery until Ctrl-C or SIGTERM, from a GGUF or a self-test model. It takes the
keys of a fleet's `launch:` block, whose server ends with its pytest run; this one ends when it
is told to. What it serves, where, its log and how to stop it are printed first."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

import yaml

from pytest_frank.local.launch import KEYS, LaunchError, launch

PORT = 8080  # llama-server's own default: a fixed port, so the fleet file that names it holds


def spec_of(args: argparse.Namespace) -> dict:
    """The launch: block the flags spell; `--set KEY=VALUE` for any other key (YAML values)."""
    spec: dict = {"model": args.model, "port": args.port, "host": args.host}
    for key in ("alias", "ctx_size", "parallel", "threads"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
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
    parser.add_argument("--alias", action="append", help="a served name (repeat for more)")
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
    print(f"frank launch: {args.model} at {server.url} (pid {pid})", flush=True)
    print(f"  next: frank init {server.url} -o fleet.yaml && pytest --endpoints fleet.yaml")
    if server.log_path:
        print(f"  log:  {server.log_path}")
    print(f"  stop: Ctrl-C, or kill {pid}", flush=True)
    try:
        while not stop.wait(0.5):  # a short wait: the signal handler runs between waits
            pass
    finally:
        server.stop()
    print("frank launch: stopped", flush=True)
    return 0
