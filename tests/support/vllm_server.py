"""Real vLLM servers for tests: `vllm(**config)` returns a running server, shared per config.

    @pytest.mark.vllm_config("BARE")
    def test_hello(vllm):
        server = vllm(**CONFIGS["BARE"])     # server.url, server.model ("tiny")

A test that asks for `vllm` declares the configurations it serves (names in CONFIGS) with the
`vllm_config` marker and lives in a module whose file name holds "vllm": the suite runs these
tests last, grouped by configuration in CONFIGS' order (`in_config_order`), so each
configuration starts once; on xdist workers they are one unit of work, given first to one worker
(tests/support/vllm_scheduling.py) while the others run the rest.

The vLLM environment comes from tests/support/vllm_env.py (built on first use, about 5 minutes, then
cached); the model folders from tests/support/vllm_model.py. Each server takes 30-60 s to start and about
3 GB of memory, so configs are few, shared for the session, and at most MAX_LIVE run at once (the
least recently used one stops first). Outside CI a machine that cannot build or start vLLM skips
these tests with the reason; with CI=true that is an error.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import vllm_env

MAX_LIVE = 2
START_TIMEOUT_S = 300
MIN_FREE_BYTES = 4 * 2**30
MODEL_SCRIPT = Path(__file__).with_name("vllm_model.py")
NAME = "tiny"
MAX_MODEL_LEN = 4096
KEY = "sk-vllm-local-7781"

# The configurations the tests serve, in the order the suite runs them: a test that needs two
# (FULL and BARE, NGRAM and CHATTY) runs between the groups of the two, so with MAX_LIVE servers
# live none starts twice. Each start costs about a minute of the suite, so a configuration
# differs from the others only where a test needs the difference.
CONFIGS = {
    # every flag set: two served names, the reasoning and tool parsers, an API key (and vLLM's
    # default prefix caching)
    "FULL": {"names": ("tiny", "frank-tiny"), "reasoning_parser": "qwen3", "tool_parser": "hermes",
             "api_key": KEY},
    "BARE": {"prefix_caching": False},  # no parsers, no key, no drafting, no prefix caching
    # Drafting is measured over what the model writes of its own accord: the chatty model keeps
    # talking, so ngram lookups and a draft model have a long answer to draft.
    "NGRAM": {"variant": "chatty", "speculative": "ngram", "reasoning_parser": "qwen3"},
    "CHATTY": {"variant": "chatty", "reasoning_parser": "qwen3"},  # NGRAM's non-drafting twin
    "DRAFT": {"variant": "chatty", "speculative": "chatty"},
    # The long thinker writes its calls in the Qwen3.5 / Qwen3-Coder XML format
    # (<function=...><parameter=...>): hermes is the wrong parser for them, which leaves them as
    # text (its reasoning tests offer no tools); QWEN3_XML is a model that thinks briefly, under
    # the family's own parser.
    "LONG": {"variant": "long_think", "reasoning_parser": "qwen3", "tool_parser": "hermes"},
    "QWEN3_XML": {"variant": "qwen3_xml", "reasoning_parser": "qwen3", "tool_parser": "qwen3_xml"},
    # gpt-oss harmony (tests/support/vllm_harmony_model.py): vLLM renders the prompt and parses the
    # reply's channels itself; the family's own parsers
    "HARMONY": {"variant": "harmony", "reasoning_parser": "openai_gptoss", "tool_parser": "openai"},
    # ... and with no parser: vLLM still splits the analysis off, takes tools and drops the
    # calls (a start of about 45 s for the family's one parser fault a running server shows;
    # a wrong tool parser, hermes, stops vLLM from starting)
    "HARMONY_BARE": {"variant": "harmony"},
}
_THEN: dict[str, str] = {}  # test id -> the configuration to start once it has run
_POOLS: list = []  # the session's pool, while the `vllm` fixture is up


@dataclass
class Server:
    url: str
    model: str
    proc: subprocess.Popen
    log: Path
    start_s: float  # the monotonic launch time until healthy, then the seconds it took

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.running:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def _flags(folder: Path, models: dict, names=(NAME,), reasoning_parser=None, tool_parser=None,
           api_key=None, speculative=None, prefix_caching=None, max_num_seqs=None) -> list[str]:
    # Not the "uni" executor (the worker inside the engine core, one process fewer to start):
    # measured here it starts about a fifth sooner but decodes several times slower.
    flags = [str(folder), "--served-model-name", *names, "--max-model-len", str(MAX_MODEL_LEN),
             "--dtype", "float32", "--enforce-eager"]
    if reasoning_parser:
        flags += ["--reasoning-parser", reasoning_parser]
    if tool_parser:
        flags += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
    if api_key:
        flags += ["--api-key", api_key]
    if speculative == "ngram":
        flags += ["--speculative-config", json.dumps({
            "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
            "prompt_lookup_min": 1})]
    elif speculative:  # a model variant drafts for the served one
        flags += ["--speculative-config", json.dumps({
            "method": "draft_model", "model": str(models[speculative]), "num_speculative_tokens": 3})]
    if prefix_caching is not None:
        flags.append("--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching")
    if max_num_seqs:
        flags += ["--max-num-seqs", str(max_num_seqs)]
    return flags


def _die_with_parent() -> None:
    # A test run killed outright never reaches the fixture's teardown; the server goes with it.
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerPool:
    def __init__(self, env: vllm_env.VllmEnv, workdir: Path) -> None:
        self.env, self.workdir = env, workdir
        self.models: dict[str, Path] = {}
        self.live: dict[str, Server] = {}  # insertion order = least recently used first
        self.starts: dict[str, float] = {}
        self.restarts: list[str] = []  # configurations started a second time (the order failed)
        self.early: dict[str, Server] = {}  # started ahead of the tests that ask for them
        self.logs: list[Path] = []

    def model(self, variant: str) -> Path:
        if variant not in self.models:
            folder = self.workdir / f"model-{variant}"
            _run([str(self.env.python), str(MODEL_SCRIPT), str(folder), "--variant", variant])
            self.models[variant] = folder
        return self.models[variant]

    def get(self, variant: str = "sharp", **config) -> Server:
        key = json.dumps({"variant": variant, **config}, sort_keys=True)
        server = self.live.pop(key, None)
        if server is None or not server.running:
            server = self.early.pop(key, None) or self._launch(key, variant, config)
            while len(self.live) >= MAX_LIVE:
                self.live.pop(next(iter(self.live))).stop()
            self._ready(key, server)
        self.live[key] = server
        return server

    def start_early(self, variant: str = "sharp", **config) -> None:
        """Begin starting a configuration the next tests will ask for, while the tests before
        them run on the servers already up; `get` then waits for it to be healthy."""
        key = json.dumps({"variant": variant, **config}, sort_keys=True)
        if key not in self.live and key not in self.early:
            self.early[key] = self._launch(key, variant, config)

    def _launch(self, key: str, variant: str, config: dict) -> Server:
        if config.get("speculative") not in (None, "ngram"):
            self.model(config["speculative"])
        port = _free_port()
        names = config.get("names", (NAME,))
        argv = [str(self.env.vllm), "serve", *_flags(self.model(variant), self.models, **config),
                "--host", "127.0.0.1", "--port", str(port)]
        log = self.workdir / f"server-{len(self.logs)}.log"
        self.logs.append(log)
        env = {**os.environ, **vllm_env.RUN_ENV, "VLLM_CPU_KVCACHE_SPACE": "1"}
        started = time.monotonic()
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, cwd=self.workdir,
                                    preexec_fn=_die_with_parent)
        return Server(f"http://127.0.0.1:{port}", names[0], proc, log, started)

    def _ready(self, key: str, server: Server) -> None:
        try:
            _wait_healthy(server)
        except BaseException:
            server.stop()
            raise
        server.start_s = time.monotonic() - server.start_s  # from launch to healthy
        if key in self.starts:
            self.restarts.append(key)
        self.starts[key] = round(server.start_s, 1)

    def close(self) -> None:
        for server in [*self.live.values(), *self.early.values()]:
            server.stop()
        self.live.clear()
        self.early.clear()


def _wait_healthy(server: Server) -> None:
    import httpx

    # vLLM opens its port only once the engine is ready: until then, connection refused.
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not server.running:
            raise RuntimeError(f"vllm serve exited with {server.proc.returncode}:\n{_tail(server.log)}")
        try:
            if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"vllm serve not healthy after {START_TIMEOUT_S} s:\n{_tail(server.log)}")


def _tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")


def _unavailable() -> str | None:
    reason = vllm_env._platform_ok()
    if reason:
        return reason
    try:
        meminfo = Path("/proc/meminfo").read_text()
        free = int(meminfo.split("MemAvailable:")[1].split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        return None
    if free < MIN_FREE_BYTES:
        return f"{free / 2**30:.1f} GiB of memory available; a vLLM server needs about 3"
    return None


def _environment() -> vllm_env.VllmEnv:
    """The vLLM environment; outside CI, a machine that cannot have it skips with the reason."""
    in_ci = os.environ.get("CI", "").lower() == "true"
    reason = _unavailable()
    if reason and not in_ci:
        pytest.skip(f"real vLLM unavailable: {reason}")
    try:
        return vllm_env.ensure()
    except vllm_env.BuildError as exc:
        if in_ci:
            raise
        pytest.skip(f"real vLLM unavailable: the environment could not be built: {exc}")


@pytest.fixture(scope="session")
def vllm(tmp_path_factory):
    """Factory fixture: vllm(variant="sharp", **config) -> Server, shared per config."""
    env = _environment()
    pool = ServerPool(env, tmp_path_factory.mktemp("vllm"))
    _POOLS.append(pool)
    yield pool.get
    _POOLS.remove(pool)
    pool.close()
    record = {"build_s": env.build_s, "disk_bytes": env.disk_bytes, "start_s": pool.starts,
              "restarts": pool.restarts}
    (vllm_env.cache_root() / "vllm-last-run.json").write_text(json.dumps(record, indent=1))


def in_config_order(items: list) -> list:
    """The tests on real vLLM moved last and grouped by the configurations they declare
    (`@pytest.mark.vllm_config(name, ...)`, names in CONFIGS), in CONFIGS' order, each group's
    one-config tests before those that also need the next; the rest keep their order."""
    order = list(CONFIGS)
    served, others = [], []
    for item in items:
        (served if "vllm" in getattr(item, "fixturenames", ()) else others).append(item)
    return others + sorted(served, key=lambda item: _config_key(item, order))


def plan_early_starts(items: list) -> None:
    """For the tests that will run (in order): once the first test on a configuration has run,
    the next configuration in line starts (`start_next`), so its start overlaps the tests on
    the servers already up."""
    firsts, sequence = [], []
    for item in items:
        marker = item.get_closest_marker("vllm_config")
        new = [name for name in (marker.args if marker else ()) if name not in sequence]
        sequence += new
        if new:
            firsts.append((item.nodeid, new[-1]))
    _THEN.clear()
    _THEN.update({nodeid: sequence[sequence.index(name) + 1] for nodeid, name in firsts
                  if name != sequence[-1]})


def start_next(item) -> None:
    name = _THEN.get(item.nodeid)
    if name and _POOLS:
        _POOLS[-1].start_early(**CONFIGS[name])


def _config_key(item, order: list[str]) -> tuple[int, int]:
    marker = item.get_closest_marker("vllm_config")
    names = marker.args if marker else ()
    unknown = [name for name in names if name not in order]
    if not names or unknown:
        raise pytest.UsageError(
            f"{item.nodeid} asks for real vLLM: declare its configurations with "
            f"@pytest.mark.vllm_config(...), names from tests/support/vllm_server.py CONFIGS "
            f"({', '.join(order)}){'; unknown: ' + ', '.join(unknown) if unknown else ''}")
    if not on_vllm(item.nodeid):
        raise pytest.UsageError(
            f"{item.nodeid} asks for real vLLM: move it to a module whose file name holds "
            f"\"vllm\" (such as tests/vllm/test_vllm_real.py), where the xdist scheduler finds it")
    return order.index(names[0]), len(names)


def on_vllm(nodeid: str) -> bool:
    """Whether a test id is in a real-vLLM module: xdist's controller sees only ids."""
    return "vllm" in nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
