"""Hostile endpoints: for each fault a loopback server can commit, one pytest run of the battery
against it beside a healthy endpoint, with an api_key planted as a secret.

The cases: the hostile answers of CASES, and each transport fault on each route (ROUTES x
BREAKS: the model list, chat plain and streamed, Messages, Responses and /metrics, each reset
before, during and after the headers and answering a 1 GiB gzip bomb).

Prints, per case: the pytest session's time (as pytest reports it) against the bound (the
hostile endpoint's fleet.yaml `deadline`, or with --readme ready_timeout + 4 x timeout + 5 s)
and the process's wall time, the hostile endpoint's failed and blocked tests, the peak RSS of
the pytest process, its exit code, whether the healthy endpoint kept its verdict, and whether a
Python traceback, an INTERNALERROR, a raw control character or any 8-character run of the
secret reached the terminal, the JUnit XML, the HTML report, the Markdown report or the JSON
evidence file. Targets: the session within the bound and the wall within it plus the process's
start (5 s) + 2 s, under 300 MiB, exit 1 (0 or 1 where the answers are only long), a transport
fault failing once (one failed test, however many routes it breaks; the rest blocked), the healthy
endpoint passing, and none of the four anywhere.
Run: python bench/hostile.py [--readme] [--busy] [--quick] [case ...]
--busy runs each case beside another process spinning every core (the bound holds on a busy
machine too); --quick runs one case (wrong shapes), judged by no target.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
from emulator import Emulator, Reply, broken, chat_stream, paced, serve_chat  # noqa: E402
from healthy_engines import healthy_chat  # noqa: E402

import quick  # noqa: E402

SECRET = "sk-planted-0123456789abcdefghijklmnop"
MODEL = "model"
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


def _healthy_answer(body: dict) -> Reply:
    out = healthy_chat("reasoning")(body)
    return chat_stream(out) if body.get("stream") else Reply(200, out)


def _fault(how: str, reply: Reply | None) -> Reply:
    """`reply` broken `how`: one of the emulator's BREAKS, or a 1 GiB gzip bomb instead (built
    once, before any run: compressing it takes seconds, which a run must not wait for)."""
    if how == "gzip bomb":
        kind = (reply.headers.get("content-type") if reply else None) or "application/json"
        return Reply(200, _bomb(1024), {"content-encoding": "gzip", "content-type": kind})
    return broken(how, reply)


def _on_chat(how: str, streamed: bool):
    """The chat route broken `how` for its streamed (or plain) requests, healthy for the rest."""
    def answer(body: dict) -> Reply:
        healthy = _healthy_answer(body)
        return _fault(how, healthy) if bool(body.get("stream")) == streamed else healthy
    return lambda em: serve_chat(em, answer)


def _on(method: str, path: str, how: str):
    return lambda em: em.route(method, path, lambda r: _fault(how, None))


def _everywhere(how: str):
    """The model list and the chat route, plain and streamed, all broken `how`."""
    def setup(em: Emulator) -> None:
        _on("GET", "/v1/models", how)(em)
        serve_chat(em, lambda body: _fault(how, _healthy_answer(body)))
    return setup


# route -> (the fleet.yaml `api:` the hostile endpoint generates on, how to break it `how`)
ROUTES: dict = {
    "models and chat": (None, _everywhere),
    "models": (None, lambda how: _on("GET", "/v1/models", how)),
    "chat": (None, lambda how: _on_chat(how, streamed=False)),
    "chat streamed": (None, lambda how: _on_chat(how, streamed=True)),
    "messages": ("messages", lambda how: _on("POST", "/v1/messages", how)),
    "responses": ("responses", lambda how: _on("POST", "/v1/responses", how)),
    "metrics": (None, lambda how: _on("GET", "/metrics", how)),
}
BREAKS = ("reset before", "reset headers", "reset body", "gzip bomb")
FAULT_CASES = {f"{route}: {how}": (api, make(how)) for route, (api, make) in ROUTES.items()
               for how in BREAKS}
# The claims that read a route beside the battery's EXPECT: spec_decode reads /metrics before
# and after its generations (perf and the reports read it only where it answers).
READS = {"metrics": {"spec_decode": True}}

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


def run_case(name: str, setup, readme: bool = False, api: str | None = None) -> dict:
    # the model the emulator's healthy replies name (the contract claim holds a reply to the
    # model asked)
    with Emulator("vllm", models=[MODEL], hang=setup is None) as bad, \
            Emulator("vllm", models=[MODEL]) as good, tempfile.TemporaryDirectory() as tmp:
        healthy(bad)
        healthy(good)
        if setup is not None:
            setup(bad)
        folder = Path(tmp)
        fleet = {"endpoints": {
            "hostile": {"url": bad.url, "engine": "vllm", "alias": MODEL, "api_key": SECRET,
                        "expect": {**EXPECT, **READS.get(name.split(":")[0], {})},
                        **({"api": api} if api else {}),
                        **({"ready_timeout": READY_TIMEOUT} if readme else
                           {"deadline": DEADLINE})},
            "healthy": {"url": good.url, "engine": "vllm", "alias": MODEL, "expect": EXPECT}}}
        (folder / "fleet.yaml").write_text(yaml.safe_dump(fleet))
        cmd = [sys.executable, str(HERE / "rss_of.py"), sys.executable, "-m", "pytest",
               "--endpoints", "fleet.yaml", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
               "-p", "no:hypothesispytest",
               "--frank-timeout", str(README_TIMEOUT if readme else TIMEOUT),
               "--junitxml=junit.xml", "--html=report.html",
               "--self-contained-html", "--frank-report=report.md", "--frank-json=run.json"]
        # As a user's machine runs it: bytecode written (without it, pytest rewrites the
        # plugin's modules' asserts anew on every run, seconds of CPU), and no hypothesis
        # (the test extra's; its plugin imports the whole library at the terminal summary).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        start = time.monotonic()
        done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=600,
                              env=env)
        wall = time.monotonic() - start
        rss_mib = int(done.stderr.strip().splitlines()[-1]) / 1024
        outputs = {"terminal": done.stdout, "junit": _read(folder / "junit.xml"),
                   "html": _read(folder / "report.html"),
                   "markdown": _read(folder / "report.md"), "json": _read(folder / "run.json")}
        found = {kind: sorted(k for k, text in outputs.items() if _has(kind, text))
                 for kind in ("traceback", "INTERNALERROR", "control", "secret")}
        if found["traceback"] or found["INTERNALERROR"]:  # kept to be read: what broke
            slug = re.sub(r"\W+", "-", name)
            terminal = Path(tempfile.gettempdir()) / f"hostile-{slug}.txt"
            terminal.write_text(done.stdout)
            print(f"  (its terminal output: {terminal})", file=sys.stderr)
        kept = "healthy" in done.stdout and not re.search(r"FAILED \S*\[healthy\]", done.stdout)
        session = re.search(r" in ([0-9.]+)s", done.stdout.strip().splitlines()[-1])
        verdicts = [row["verdict"] for row in json.loads(outputs["json"] or '{"rows": []}')["rows"]
                    if row["endpoint"] == "hostile"]
        return {"case": name, "wall": wall, "session": float(session[1]) if session else wall,
                "rss": rss_mib, "exit": done.returncode, "kept": kept,
                "failed": verdicts.count("FAIL"), "blocked": verdicts.count("blocked"), **found}


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


@contextmanager
def _busy(on: bool) -> Iterator[None]:
    """With `on`: other processes spinning every core while the block runs, as a build or
    another test run beside the battery does."""
    # each spins until its parent is gone, so a bench killed midway leaves none behind
    spin = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin])
                for _ in range(os.cpu_count() or 1)] if on else []
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main(args: list[str]) -> int:
    """Arguments: `--readme` for the README's bound instead of a fleet deadline, `--busy` for
    a machine busy beside each run, `--quick` for one case judged by no target (quick.py); any
    others pick the cases whose names contain them."""
    readme, fast, busy = "--readme" in args, "--quick" in args, "--busy" in args
    picked = ["wrong shapes"] if fast else [a for a in args
                                            if a not in ("--readme", "--quick", "--busy")]
    bound = README_BOUND if readme else DEADLINE
    # A case must end within its bound, plus the process's own start.
    deadline = bound + STARTUP
    cases = {**{name: (None, setup) for name, setup in CASES.items()}, **FAULT_CASES}
    if any("bomb" in name for name in cases if not picked or any(p in name for p in picked)):
        _bomb(1024), _bomb(1024, 2)  # built before any run is timed
    kept_busy = ", cores kept busy" if busy else ""
    print(f"timeout {README_TIMEOUT if readme else TIMEOUT:g}s{kept_busy}; a case's session "
          f"should end within {bound:g}s, its process within {deadline:g}s + 2s")
    print(f"{'case':<30} {'session s':>9} {'/bound':>6} {'wall s':>7} {'failed':>6} "
          f"{'blocked':>7} {'RSS MiB':>8} {'exit':>4} {'healthy ok':>10}  leaks", flush=True)
    ok = True
    for name, (api, setup) in cases.items():
        if picked and not any(p in name for p in picked):
            continue
        with _busy(busy):
            r = run_case(name, setup, readme, api)
        leaks = [f"{k} in {', '.join(r[k])}" for k in ("traceback", "INTERNALERROR", "control",
                                                       "secret") if r[k]]
        exits = (0, 1) if r["case"].startswith("4 MiB line") else (1,)  # long, yet answers
        # a transport fault: one failed test, however many routes it broke
        once = name not in FAULT_CASES or r["failed"] == 1
        good = (r["session"] <= bound and r["wall"] <= deadline + 2 and r["rss"] < 300
                and r["exit"] in exits and r["kept"] and once and not leaks)
        ok &= good
        print(f"{r['case']:<30} {r['session']:>9.1f} {r['session'] / bound:>6.2f} "
              f"{r['wall']:>7.1f} {r['failed']:>6} {r['blocked']:>7} {r['rss']:>8.0f} "
              f"{r['exit']:>4} {'yes' if r['kept'] else 'NO':>10}  "
              f"{'; '.join(leaks) or 'none'}{'' if good else '  <- MISSED'}", flush=True)
    print("all targets met" if ok else "TARGETS MISSED")
    return quick.judged(ok, fast)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
