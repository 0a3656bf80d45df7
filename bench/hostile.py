"""Hostile endpoints: for each fault a loopback server can commit, one pytest run of the battery
against it beside a healthy endpoint, with an api_key planted as a secret.

Prints, per case: the run's wall time against its deadline (the hostile endpoint's fleet.yaml
`deadline` plus the process's start, +2 s allowed), the peak RSS of the
pytest process, its exit code, whether the healthy endpoint kept its verdict, and whether a
Python traceback, an INTERNALERROR, a raw control character or any 8-character run of the
secret reached the terminal, the JUnit XML, the HTML report, the Markdown report or the JSON
evidence file. Targets: within deadline + 2 s,
under 300 MiB, exit 1 (0 or 1 where the answers are only long), the healthy endpoint passing,
and none of the four anywhere.
Run: python bench/hostile.py [--readme] [--quick] [case ...]
--quick runs one case (wrong shapes), judged by no target.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
from emulator import Emulator, Reply, paced, serve_chat  # noqa: E402
from healthy_engines import healthy_chat  # noqa: E402

import quick  # noqa: E402

SECRET = "sk-planted-0123456789abcdefghijklmnop"
TIMEOUT = 2.0  # --frank-timeout: a whole answer gets 4x that on the wall clock
CONTROL = re.compile("[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]|\x1b[\\]P_^X]")  # not pytest's own colours


@functools.cache
def _bomb(mib: int, layers: int = 1) -> bytes:
    """`mib` MiB of spaces, gzipped `layers` times, without holding them uncompressed; built
    when its case first asks (seconds of zlib), once."""
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    data = b"".join(packer.compress(b" " * (1024 * 1024)) for _ in range(mib)) + packer.flush()
    for _ in range(layers - 1):
        again = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        data = again.compress(data) + again.flush()
    return data


def _route(path, reply, method="GET"):
    return lambda em: em.route(method, path, lambda r: reply() if callable(reply) else reply)


def _endless(body: dict):
    """Tokens forever, never [DONE], to a request that streams; a plain answer otherwise."""
    if not body.get("stream"):
        return healthy_chat("reasoning")(body)
    event = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    return Reply(200, paced(iter(lambda: event, None), 0.05), {"content-type": "text/event-stream"})


def _long_line(unit: str, size: int):
    """Chat answers whose content is one line of `unit`s just under the 4 MiB cap as sent
    (`size` bytes each in JSON), whole or streamed."""
    def answer(body: dict):
        out = healthy_chat("reasoning")(body)
        out["choices"][0]["message"]["content"] = unit * ((4 * 1024 * 1024 - 4096) // size)
        return out
    return answer


CASES = {
    "gzip, gzip bomb": _route("/v1/models", lambda: Reply(200, _bomb(1024, 2),
                                                         {"content-encoding": "gzip, gzip"})),
    "gzip bomb (1 GiB)": _route("/v1/models", lambda: Reply(200, _bomb(1024),
                                                            {"content-encoding": "gzip"})),
    "drip, 1 byte/0.2s": _route("/health", lambda: Reply(200, paced(" " * 600, 0.2))),
    "hang": None,  # the emulator's own hang switch
    "JSON nested 100000 deep": _route("/health", Reply(500, "[" * 100000 + "]" * 100000)),
    "ANSI, OSC 0/52/8, NUL": _route("/health", Reply(500, {"error": {"message": (
        "\x1b[2J\x1b]0;owned\x07\x1b]52;c;ZWNobw==\x07\x1b]8;;http://x\x07l\x00")}})),
    "3 MiB error page": _route("/health", Reply(503, "E" * (3 * 1024 * 1024))),
    "echoed key": _route("/v1/models", Reply(500, {"error": {"message": "x" * 290 + SECRET}})),
    "500 MB line, no newline": _route("/v1/chat/completions", lambda: Reply(
        200, paced([b"data: " + b"x" * (1024 * 1024)] * 500, 0), {
            "content-type": "text/event-stream"}), "POST"),
    "keep-alive comments forever": _route("/v1/chat/completions", lambda: Reply(
        200, paced([": ping\n\n"] * 100000, 0.5), {"content-type": "text/event-stream"}),
        "POST"),
    # The three that broke the README's bound (ready_timeout + 4 x timeout + 5 s) or 300 MiB:
    "models list drips 1 B/s": _route("/v1/models", lambda: Reply(200, paced(" " * 100000, 1.0))),
    "endless SSE stream": lambda em: serve_chat(em, _endless),
    "4 MiB line in a chat answer": lambda em: serve_chat(em, _long_line("x", 1)),
    "4 MiB line of short words": lambda em: serve_chat(em, _long_line("ab ", 3)),
    "4 MiB line of escapes": lambda em: serve_chat(em, _long_line("\x1b", 6)),
    "redirect elsewhere": _route("/v1/models", Reply(307, "", {"location": "http://127.0.0.1:9/"})),
    "wrong shapes": _route("/v1/models", Reply(200, {"data": [{"id": 5}, "lots", None]})),
}
EXPECT = {"reasoning": True, "tools": {"trials": 1}, "perf": {"runs": 1},
          "slots": {"ctx_per_slot": 32768}}
DEADLINE = 15.0  # the hostile endpoint's fleet.yaml deadline
STARTUP = 5.0  # the pytest process's own start, collection and report
# --readme: no fleet deadline; the README's bound for a hostile endpoint instead, as a new
# user's fleet meets it: ready_timeout + 4 x timeout + 5 s.
READY_TIMEOUT, README_TIMEOUT = 5.0, 10.0
README_BOUND = READY_TIMEOUT + 4 * README_TIMEOUT + 5


def healthy(em: Emulator) -> None:
    serve_chat(em, healthy_chat("reasoning"))


def run_case(name: str, setup, readme: bool = False) -> dict:
    with Emulator("vllm", models=["m"], hang=setup is None) as bad, \
            Emulator("vllm", models=["m"]) as good, tempfile.TemporaryDirectory() as tmp:
        healthy(bad)
        healthy(good)
        if setup is not None:
            setup(bad)
        folder = Path(tmp)
        fleet = {"endpoints": {
            "hostile": {"url": bad.url, "engine": "vllm", "alias": "m", "api_key": SECRET,
                        "expect": EXPECT, **({"ready_timeout": READY_TIMEOUT} if readme else
                                             {"deadline": DEADLINE})},
            "healthy": {"url": good.url, "engine": "vllm", "alias": "m", "expect": EXPECT}}}
        (folder / "fleet.yaml").write_text(yaml.safe_dump(fleet))
        cmd = [sys.executable, str(HERE / "rss_of.py"), sys.executable, "-m", "pytest",
               "--endpoints", "fleet.yaml", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
               "--frank-timeout", str(README_TIMEOUT if readme else TIMEOUT),
               "--junitxml=junit.xml", "--html=report.html",
               "--self-contained-html", "--frank-report=report.md", "--frank-json=run.json"]
        start = time.monotonic()
        done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - start
        rss_mib = int(done.stderr.strip().splitlines()[-1]) / 1024
        outputs = {"terminal": done.stdout, "junit": _read(folder / "junit.xml"),
                   "html": _read(folder / "report.html"),
                   "markdown": _read(folder / "report.md"), "json": _read(folder / "run.json")}
        found = {kind: sorted(k for k, text in outputs.items() if _has(kind, text))
                 for kind in ("traceback", "INTERNALERROR", "control", "secret")}
        kept = "healthy" in done.stdout and not re.search(r"FAILED \S*\[healthy\]", done.stdout)
        return {"case": name, "wall": wall, "rss": rss_mib, "exit": done.returncode,
                "kept": kept, **found}


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _has(kind: str, text: str) -> bool:
    if kind == "traceback":
        return "Traceback (most recent call last)" in text
    if kind == "INTERNALERROR":
        return "INTERNALERROR" in text
    if kind == "control":
        return bool(CONTROL.search(text))
    return any(SECRET[i:i + 8] in text for i in range(len(SECRET) - 7))


def main(args: list[str]) -> int:
    """Arguments: `--readme` for the README's bound instead of a fleet deadline, `--quick` for
    one case judged by no target (quick.py); any others pick the cases whose names contain
    them."""
    readme, fast = "--readme" in args, "--quick" in args
    picked = ["wrong shapes"] if fast else [a for a in args if a not in ("--readme", "--quick")]
    # A case must end within its bound, plus the process's own start.
    deadline = (README_BOUND if readme else DEADLINE) + STARTUP
    rows = [run_case(name, setup, readme) for name, setup in CASES.items()
            if not picked or any(p in name for p in picked)]
    print(f"timeout {README_TIMEOUT if readme else TIMEOUT:g}s; a case should end within "
          f"{deadline:g}s + 2s")
    print(f"{'case':<28} {'wall s':>7} {'RSS MiB':>8} {'exit':>4} {'healthy ok':>10}  leaks")
    ok = True
    for r in rows:
        leaks = [f"{k} in {', '.join(r[k])}" for k in ("traceback", "INTERNALERROR", "control",
                                                       "secret") if r[k]]
        exits = (0, 1) if r["case"].startswith("4 MiB line") else (1,)  # long, yet answers
        good = (r["wall"] <= deadline + 2 and r["rss"] < 300 and r["exit"] in exits and r["kept"]
                and not leaks)
        ok &= good
        print(f"{r['case']:<28} {r['wall']:>7.1f} {r['rss']:>8.0f} {r['exit']:>4} "
              f"{'yes' if r['kept'] else 'NO':>10}  {'; '.join(leaks) or 'none'}")
    print("all targets met" if ok else "TARGETS MISSED")
    return quick.judged(ok, fast)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
