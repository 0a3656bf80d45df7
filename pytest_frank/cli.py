"""The `frank` command: tools that work without pytest (a fleet file from running servers, model
headers, merged reports, a real server that stays up, the self-test model)."""

from __future__ import annotations

import importlib
import sys

# Subcommand -> module whose main(argv) runs it; imported only when asked for.
COMMANDS = {
    "init": ("pytest_frank.init",
             "write a fleet file from what running servers say of themselves"),
    "preflight": ("pytest_frank.vram.preflight",
                  "read a GGUF header (path or URL) and model its memory"),
    "merge": ("pytest_frank.reports.merge",
              "build one fleet's reports from the --frank-json records of its shards"),
    "launch": ("pytest_frank.local.stay_up",
               "start a real llama.cpp server (a GGUF or the self-test model) that stays up"),
    "selftest-model": ("pytest_frank.local.selftest_model",
                       "write the tiny deterministic self-test GGUF"),
}


def usage() -> str:
    lines = ["usage: frank COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<16}{about}" for name, (_, about) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"frank: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    if name == "preflight":
        return module.main(rest, _draft_flags(module))
    return module.main(rest)


def _draft_flags(preflight):
    """llama.cpp's drafting flags from its driver, for `frank preflight`'s MTP head line: the
    preflight sits with the memory model in vram, below the drivers, and cannot import them."""
    from pytest_frank.drivers import LlamaCppDriver

    table = LlamaCppDriver.launch.serve_flags
    return preflight.DraftFlags(mtp=f"{table.flags['spec_type'].name} {table.mtp_spec_values[0]}",
                                draft=table.flags["draft"].name)


if __name__ == "__main__":
    sys.exit(main())
