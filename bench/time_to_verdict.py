"""Time to verdict on a thinking model: what the battery generates against the plan's minimum.

Starts one real llama.cpp (xllamacpp, CPU) serving a self-test model that thinks N tokens before
each answer (the long_think chain, entered N words before its end), behind a pacing proxy that
lets tokens out at M a second, as a large model on a real fleet decodes: a whole answer comes
after its tokens' time, a stream's events one token-time apart. It runs the battery asking
reasoning, the seeds' five-level reasoning_effort map, tools, agent and perf at concurrency 1 and
prints the generations and tokens the proxy saw, the wall time, the endpoint's figures from the
JSON record (time to verdict, tokens, the plan's minimum) and the ratio of tokens to that minimum.

    python bench/time_to_verdict.py [--think 900] [--pace 50] [--tree ../main-checkout]
    python bench/time_to_verdict.py --quick     # 16 tokens of thinking, paced at 2000 a second

--tree runs another checkout's pytest_frank (e.g. main's, for today's figure) on the same server
and proxy; its ratio is to this tree's minimum when both are run (--compare does both).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import quick
import yaml

SEEDS_MAP = {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "max": "xhigh"}
EXPECT = {"reasoning": True, "reasoning_effort": SEEDS_MAP, "tools": True, "agent": True,
          "perf": True}
CTX = 16384  # the model's and the slot's context (see main)
GENERATING = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/completions")


def thinker(folder: Path, think: int) -> Path:
    """The long_think self-test model, its chain entered `think` words before the end."""
    from pytest_frank.local import selftest_model as m

    if not 1 <= think <= m.CHAIN_LEN:
        sys.exit(f"--think must be 1 to {m.CHAIN_LEN}")
    # From long_think's own script, not the default's: the default's later heads (the parallel
    # calls' " London") name words long_think's vocabulary does not hold.
    m.SCRIPTS["long_think"] = {**m.SCRIPTS["long_think"], "<think>": [m.CHAIN_WORDS[-think]]}
    return m.write_model(folder / f"think-{think}.gguf", "long_think", ctx_train=CTX)


class _Quiet(ThreadingHTTPServer):
    """A proxy server that does not print a traceback when the battery drops a connection it
    gave up on (a cut answer, a client at its deadline)."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Pacer:
    """A proxy that lets the upstream's tokens out at `pace` a second and counts generations."""

    def __init__(self, upstream: str, pace: float):
        self.upstream, self.pace = upstream, pace
        self.generations, self.tokens = 0, 0
        self.lock = threading.Lock()
        # a fresh connection a request: one the server closed while idle is never reused
        self.client = httpx.Client(timeout=600, limits=httpx.Limits(max_keepalive_connections=0))
        self.server = _Quiet(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def count(self, tokens: int) -> None:
        with self.lock:
            self.generations += 1
            self.tokens += tokens

    def _handler(self):
        pacer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._forward(None)

            def do_POST(self):
                self._forward(self.rfile.read(int(self.headers.get("content-length") or 0)))

            def _forward(self, body: bytes | None):
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "accept-encoding")}
                req = pacer.client.build_request(self.command, pacer.upstream + self.path,
                                                 headers=headers, content=body)
                started = time.monotonic()
                r = pacer.client.send(req, stream=True)
                try:
                    generating = body is not None and self.path.split("?")[0] in GENERATING
                    stream = "event-stream" in r.headers.get("content-type", "")
                    self.send_response(r.status_code)
                    for k, v in r.headers.items():
                        if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                             "content-encoding"):
                            self.send_header(k, v)
                    if stream:
                        self._stream(r, generating)
                    else:
                        self._whole(r, generating, started)
                finally:
                    r.close()

            def _whole(self, r, generating: bool, started: float):
                data = r.read()
                if generating and r.status_code == 200:
                    tokens = _usage(json.loads(data))
                    pacer.count(tokens)
                    time.sleep(max(0.0, tokens / pacer.pace - (time.monotonic() - started)))
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, r, generating: bool):
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                tokens, last = 0, time.monotonic()
                for line in r.iter_lines():
                    if generating and line.startswith("data:") and '"usage"' in line:
                        tokens = max(tokens, _usage(_json(line[5:])))
                    if generating and line.startswith("data:"):
                        last += 1 / pacer.pace  # one event, one token's time
                        time.sleep(max(0.0, last - time.monotonic()))
                    piece = (line + "\n").encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
                if generating and r.status_code == 200:
                    pacer.count(tokens)

        return Handler

    def stop(self) -> None:
        self.server.shutdown()
        self.client.close()


def _json(text: str) -> dict:
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _usage(payload: dict) -> int:
    usage = payload.get("usage") or (payload.get("message") or {}).get("usage") or {}
    return int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)


def run(folder: Path, url: str, tree: str | None, pacer: Pacer, label: str) -> dict:
    # A generous timeout: a box shared with other work must not cut an answer as too slow
    fleet = {"endpoints": {"thinker": {"url": url, "engine": "llamacpp", "alias": "frank-think",
                                       "concurrency": 1, "timeout": 300, "expect": EXPECT}}}
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet, sort_keys=False))
    record = folder / f"{label}.json"
    env = dict(os.environ)
    if tree:  # that checkout's pytest_frank first on the path: the plugin loads from it
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    args = [sys.executable, "-m", "pytest", "--endpoints", str(path), "-q", "-p", "no:randomly",
            "-p", "no:cacheprovider", "--frank-json", str(record)]
    before = (pacer.generations, pacer.tokens)
    start = time.monotonic()
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - start
    if done.returncode not in (0, 1):
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    data = json.loads(record.read_text())
    endpoint = data.get("endpoints", {}).get("thinker", {})
    rows = {r["key"].split("::")[-1]: r["verdict"] for r in data["rows"]}
    failed = [f"{r['key'].split('::')[-1]}: {(r.get('line') or '').splitlines()[0][:300]}"
              for r in data["rows"] if r["verdict"] not in ("pass", "skipped", "not asked")]
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return {"label": label, "generations": pacer.generations - before[0],
            "tokens": pacer.tokens - before[1], "seconds": seconds, "endpoint": endpoint,
            "rows": rows, "summary": summary, "failed": failed,
            "cost": [ln for ln in done.stdout.splitlines() if "cost:" in ln]}


def report(found: dict, minimum: int | None) -> None:
    ep = found["endpoint"]
    ratio = f"{found['tokens'] / minimum:.2f}x the plan's minimum ({minimum:,})" if minimum else \
        "no minimum recorded"
    print(f"{found['label']}: {found['generations']} generations, {found['tokens']:,} tokens, "
          f"{found['seconds']:.0f}s wall; {ratio}")
    if "time_to_verdict_s" in ep:
        print(f"  record: time_to_verdict_s {ep['time_to_verdict_s']}, tokens {ep.get('tokens')}, "
              f"min_tokens {ep.get('min_tokens')}")
    for line in found["cost"]:
        print(f"  {line.strip()}")
    print(f"  {found['summary']}")
    for line in found["failed"]:
        print(f"  {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--think", type=int, default=900, help="tokens of thinking per answer")
    parser.add_argument("--pace", type=float, default=50, help="tokens a second let out")
    parser.add_argument("--tree", help="run this checkout's pytest_frank instead (e.g. one of "
                        "main, for the figure before a change)")
    parser.add_argument("--compare", action="store_true",
                        help="run this tree, then --tree's, and compare verdicts")
    quick.flag(parser)
    opts = parser.parse_args()
    if opts.quick:
        opts.think, opts.pace = 16, 2000
    from pytest_frank.local.launch import launch

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # The agent's second turn carries the first one's thinking, which the self-test
        # tokenizer spells out in about nine tokens a word: room for it
        server = launch({"model": str(thinker(folder, opts.think)), "alias": "frank-think",
                         "metrics": True, "ctx_size": CTX})
        pacer = Pacer(server.url, opts.pace)
        try:
            plans = [(None, "this tree")] if not opts.tree or opts.compare else []
            plans += [(opts.tree, f"tree {opts.tree}")] if opts.tree else []
            found = [run(folder, pacer.url, tree, pacer, label.replace(" ", "-").replace("/", "_"))
                     | {"label": label} for tree, label in plans]
        finally:
            pacer.stop()
            server.stop()
    minimum = next((f["endpoint"].get("min_tokens") for f in found
                    if f["endpoint"].get("min_tokens")), None)
    print(f"thinking {opts.think} tokens per answer, paced at {opts.pace:g} tokens/s")
    for f in found:
        report(f, minimum)
    if len(found) == 2 and found[0]["rows"] != found[1]["rows"]:
        changed = {k for k in found[0]["rows"].keys() | found[1]["rows"].keys()
                   if found[0]["rows"].get(k) != found[1]["rows"].get(k)}
        print(f"verdicts differ: {sorted(changed)}")
        return 1
    return quick.judged(True, opts.quick)


if __name__ == "__main__":
    sys.exit(main())
