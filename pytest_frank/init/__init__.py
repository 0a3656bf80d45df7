"""`frank init URL... [--serve FILE...] [-o fleet.yaml]`: a fleet file from what running
servers (and their serve files) say of themselves. The file is validated as fleet.yaml is,
written whole or not at all, and never over an existing one without --force."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from pytest_frank.base import redact
from pytest_frank.fleet import DEFAULT_TIMEOUT
from pytest_frank.init.survey import MARGIN, InitError, survey, with_serve


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="frank init", description=(
        "Write a fleet file from what running servers say of themselves: engine, alias and "
        "the claims their configuration implies, each with its evidence as a comment."))
    p.add_argument("urls", nargs="+", metavar="URL", help="a server's base URL (with or "
                   "without /v1)")
    p.add_argument("-o", "--output", default="fleet.yaml", help="where to write (default "
                   "fleet.yaml; - for stdout)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--serve", nargs="+", default=[], metavar="FILE", help="the servers' "
                   "systemd units, env files and scripts, matched to a URL by port")
    p.add_argument("--api-key-env", metavar="NAME", help="the environment variable holding "
                   "the servers' API key: sent to them, written as ${NAME}")
    p.add_argument("--all-models", action="store_true", help="one entry per served model "
                   "(default: the first, the others named in a comment)")
    p.add_argument("--no-perf", action="store_true", help="do not measure perf bounds")
    p.add_argument("--perf-margin", type=float, default=MARGIN, metavar="X", help="perf bounds "
                   f"leave this factor to the measured figures (default {MARGIN:g})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"per-request timeout (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--ready-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long a server still loading is waited for (default 30)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        text = build(args)
    except InitError as exc:
        print(f"frank init: {redact.inert(str(exc))}; nothing written", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(text)
    else:
        print(f"frank init: wrote {args.output}", file=sys.stderr)
    return 0


def build(args) -> str:
    """Survey every URL, render, validate, write; InitError before anything is written."""
    from pytest_frank.init import fleet_file, serve_files

    out = None if args.output == "-" else Path(args.output)
    if out is not None and out.exists() and not args.force:
        raise InitError(f"{out} exists; pass --force to overwrite it")
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise InitError(f"--api-key-env {args.api_key_env}: the environment has no "
                            f"{args.api_key_env}")
        redact.register(key)
    out_dir = (out.parent if out is not None else Path.cwd()).resolve()
    files = serve_files.specs(args.serve)
    surveys = []
    for url in args.urls:
        found = survey(url.rstrip("/"), key, args.timeout, args.ready_timeout,
                       perf=not args.no_perf, margin=args.perf_margin)
        print(f"frank init: {url}: {found.engine}, {len(found.models)} model(s), "
              f"{len(found.claims)} claim(s) ({found.seconds:.1f}s)", file=sys.stderr)
        serve = serve_files.match(files, found.url, found.engine, out_dir)
        with_serve(found, serve)
        surveys.append((found, serve))
    for spec in files:
        print(f"frank init: --serve {spec.get('unit') or spec.get('script') or spec['env']}: "
              f"{spec.get('unmatched') or 'its port matches no URL given'}; left out",
              file=sys.stderr)
    text = fleet_file.render(surveys, key_env=args.api_key_env, all_models=args.all_models,
                             out_name=out.name if out is not None else "fleet.yaml")
    _validated(text, out_dir)
    if out is not None:
        _write(text, out, args.force)
    return text


def _validated(text: str, where: Path) -> None:
    """The fleet loader's own checks (schema, claim options, serve files) on the text."""
    from pytest_frank.fleet import FleetError, load

    fd, tmp = tempfile.mkstemp(dir=where, prefix=".frank-init.", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        load(tmp)
    except FleetError as exc:
        raise InitError(f"the file written would not load ({exc})") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _write(text: str, out: Path, force: bool) -> None:
    """Whole or not at all: a temp file beside it, then a rename (a link without --force, which
    fails where a file appeared meanwhile)."""
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        if force:
            os.replace(tmp, out)
        else:
            try:
                os.link(tmp, out)
            except FileExistsError:
                raise InitError(f"{out} exists; pass --force to overwrite it") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
