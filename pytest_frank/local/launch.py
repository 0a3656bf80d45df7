"""Start and stop a local llama.cpp server through xllamacpp, in this process or in a child
process of its own (a fleet's `launch:` blocks: see `_launch_child`).

`launch(spec)` takes the fleet.yaml `launch:` block and returns a `LaunchedServer` once
`/health` answers 200 and then its task loop answers `/slots`; `stop()` shuts it down and frees
its port. xllamacpp runs llama.cpp's own C++ HTTP server (`llama-server` code, `build_info`
"b0-unknown"), so replies match a native build.

Spec keys (all optional but `model`):

- `model`: "selftest", "selftest:<variant>" (see pytest_frank.local.selftest_model.VARIANTS) or a GGUF
  path.
- `alias`: a name or a list of names (`--alias`). `/v1/models` lists the alphabetically first as
  `data[0].id` and all of them in `aliases`.
- `ctx_size` (4096): the TOTAL context (`-c`); `parallel` (1): slots (`-np`). The KV cache is
  not unified unless `kv_unified` is true, so each slot gets ctx_size / parallel, as with a
  native `-c 8192 -np 4`.
- `metrics` (true): `/metrics`; without it that path answers 501.
- `reasoning_format` (unset: llama.cpp's own default, deepseek, which splits the thinking into
  `reasoning_content`): "none" leaves `<think>...</think>` in content, "deepseek",
  "deepseek-legacy", "auto".
- `chat_template_file`: a Jinja template file that replaces the GGUF's.
- `jinja` (true): false is `--no-jinja`; then a request with `tools` gets HTTP 500
  {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}
  and plain chat returns the raw "<think>Thinking</think>Hello!" as content.
- `draft_model`: "selftest[:variant]" or a path: `--spec-draft-model` plus `--spec-type
  draft-simple`. `/slots[0].speculative` is true and `/metrics` counts
  `llamacpp:spec_decode_num_draft_tokens_total` etc.; responses carry `timings.draft_n` and
  `timings.draft_n_accepted`. `draft_max` (3) is the longest draft.
- `spec_type` ("draft-simple" with a `draft_model`): `--spec-type`. "draft-mtp" drafts from the
  served GGUF's own MTP (NextN) head, with no `draft_model` (`selftest:hybrid` carries one):
  llama.cpp loads the head, makes an MTP draft context on the model's own weights and keeps
  `draft_max` extra recurrent-state snapshots per sequence. On a file without a head llama.cpp
  refuses to start ("context type MTP requested but model doesn't contain MTP layers", a
  warning its error lines do not repeat: the llama.cpp driver's start_failure reads it). With a
  `draft_model` as well, that file is loaded a second time as the MTP draft.
- `draft_without_spec_type` (false): load `draft_model` but give no spec type, the "configured
  but not engaged" fault: `/slots[0].speculative` false, spec_decode counters stay 0, no draft_n.
- `mmproj`: a projector GGUF path (`--mmproj`), or "selftest": the self-test projector, with
  which "selftest:vision" names the colour of a solid image (any other self-test model loads it
  and does not see).
- `host` ("127.0.0.1"), `port` (0 = a free port), `api_key`: a key or a list (`--api-key`).
- `threads` (1): CPU threads for the model (and the draft). One, because llama.cpp's threads wait
  for each other at every step by spinning: on a box whose cores other work shares (the
  embedded default beside its own client, or several servers), two threads of a small model
  take several times the CPU and the time of one. A large model on a machine of its own wants
  its physical cores.
- `startup_timeout` (60): seconds to wait for `/health`, then `/slots`.
- `verbosity` (2): llama.cpp log level: 1 errors, 2 warnings, 3 info (timings and
  "draft acceptance = ..." lines), 4 debug (also the library's own info: the context's n_ctx and
  each "llama_kv_cache: size = ..." line, see llama_log.kv_caches). The threshold is shared by
  the whole process, so the last server started in one process sets it for all
  (llama_log.set_verbosity puts it back); a server in a process of its own has its own.

llama.cpp's log goes to a file, not to stderr, while a launched server runs (see
pytest_frank.local.llama_log; a child process's is its stderr): `LaunchedServer.log_tail()` is
the end of this server's part of it.

Observed with xllamacpp 2026.10.11549: a missing or broken model file, or a port already in use,
makes xllamacpp raise RuntimeError("Failed to init server, please check the input params.") with
the reason only in llama.cpp's log (e.g. "couldn't bind HTTP server socket"); here that becomes
a LaunchError naming the model and quoting the log, and files are checked first for a clearer
message. Stopping is synchronous (~30 ms); afterwards the port refuses connections and can be
reused.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_frank.local import llama_log

KEYS = {
    "model", "alias", "ctx_size", "parallel", "kv_unified", "metrics", "reasoning_format",
    "chat_template_file", "jinja", "draft_model", "draft_without_spec_type", "draft_max",
    "mmproj", "host", "port", "api_key", "threads", "startup_timeout", "verbosity",
    "cache_type_k", "cache_type_v", "rope_freq_base", "spec_type", "ctx_checkpoints",
}
CACHE_TYPES = {"f16": "GGML_TYPE_F16", "bf16": "GGML_TYPE_BF16", "q8_0": "GGML_TYPE_Q8_0",
               "q4_0": "GGML_TYPE_Q4_0"}
SPEC_TYPES = {"draft-simple": "COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE",
              "draft-mtp": "COMMON_SPECULATIVE_TYPE_DRAFT_MTP"}
REASONING_FORMATS = {
    "none": "COMMON_REASONING_FORMAT_NONE",
    "auto": "COMMON_REASONING_FORMAT_AUTO",
    "deepseek": "COMMON_REASONING_FORMAT_DEEPSEEK",
    "deepseek-legacy": "COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY",
}


DEFAULT_CTX_SIZE = 4096
DEFAULT_THREADS = 1


class LaunchError(RuntimeError):
    """The server could not be started; the message says why."""

    log: llama_log.ServerLog | None = None  # llama.cpp's log of the attempt


def package_build() -> str | None:
    """xllamacpp's own version: the one build number a launched server has."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"xllamacpp {version('xllamacpp')}"
    except PackageNotFoundError:
        return None


@dataclass
class LaunchedServer:
    url: str  # "http://127.0.0.1:PORT"
    model_path: str = ""
    spec: dict = field(default_factory=dict, repr=False)
    _server: object = field(default=None, repr=False)
    log: llama_log.ServerLog | None = field(default=None, repr=False)  # None: it is on stderr
    # What the model runs on: ("cpu" or "gpu", where read), from xllamacpp's device list
    backend: tuple[str, str] | None = None
    # The package that serves it: its llama.cpp reports no build of its own ("b0-unknown")
    build: str | None = None
    # The child process that runs it, for a server launched in a process of its own
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def running(self) -> bool:
        return self._server is not None or (self.process is not None
                                            and self.process.poll() is None)

    @property
    def log_path(self) -> str | None:
        """The file llama.cpp logs to (one per process, shared by servers launched together)."""
        return self.log.path if self.log else None

    def log_tail(self, limit: int = llama_log.TAIL) -> str | None:
        """The end of this server's llama.cpp log, masked and inert, ready for a report."""
        return self.log.tail(limit) if self.log else None

    def stop(self) -> None:
        """Shut the server down; the xllamacpp destructor joins its threads and closes the port.
        A child process is told to stop (its stdin closes) and killed if it has not within
        STOP_WAIT seconds: a server stopped before its task loop began never ends."""
        server, self._server = self._server, None
        del server
        process, self.process = self.process, None
        if process is not None:
            _end_child(process)
        if self.log is not None:
            self.log.close()

    def __enter__(self) -> LaunchedServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def devices(xllamacpp) -> tuple[str, str] | None:
    """("gpu" or "cpu", the devices named) from the ggml devices this build sees: with a GPU
    among them llama.cpp offloads every layer by default (-ngl auto)."""
    try:
        found = xllamacpp.get_device_info()
    except Exception:  # an older build without the call: the backend stays unknown
        return None
    named = [(str(getattr(d.get("type"), "name", d.get("type"))), str(d.get("name")))
             for d in found if isinstance(d, dict)]
    if not named:
        return None
    gpu = any(kind.endswith(("_GPU", "_IGPU")) for kind, _ in named)
    listed = ", ".join(name for _, name in named)
    return ("gpu" if gpu else "cpu"), f"xllamacpp's ggml devices: {listed}"


def launch(spec: dict, *, own_process: bool = False) -> LaunchedServer:
    """Start a server for a fleet.yaml `launch:` block and wait until it is healthy: in this
    process, or with `own_process` in a child process of its own (its own llama.cpp log)."""
    spec = dict(spec)
    xllamacpp, model = _checked(spec)
    if own_process:
        return _launch_child(spec, model)
    params = _params(xllamacpp, spec, model)
    log = llama_log.begin()
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise _not_started(exc, log, model, spec) from None
    except BaseException:
        if log is not None:
            log.close()
        raise
    launched = LaunchedServer(_client_url(server.listening_address), str(model), spec, server,
                              log, devices(xllamacpp), package_build())
    try:
        _wait_ready(launched.url, float(spec.get("startup_timeout", 60)), _api_keys(spec))
    except LaunchError as exc:
        launched.stop()
        exc.log = log
        raise
    return launched


def _checked(spec: dict):
    """xllamacpp and the model's path, once the spec's keys and files are known good: a bad key
    or a missing file is said before any server starts."""
    unknown = sorted(set(spec) - KEYS)
    if unknown:
        raise LaunchError(f"unknown launch key(s) {unknown}; known: {sorted(KEYS)}")
    if "model" not in spec:
        raise LaunchError("launch spec needs a 'model' (selftest[:variant] or a GGUF path)")
    xllamacpp = _import_xllamacpp()
    model = resolve_model(spec["model"])
    _params(xllamacpp, spec, model)  # every other key and file checked here, not in the child
    return xllamacpp, model


def _not_started(exc: RuntimeError, log: llama_log.ServerLog | None, model, spec) -> LaunchError:
    """xllamacpp's exception says only that the server failed; llama.cpp's log says why."""
    if log is None:
        why = f"{exc} (llama.cpp's log on stderr says why)"
    else:
        log.close()
        why = _reason_in(log.text()) or str(exc)
    error = LaunchError(f"llama.cpp did not start for model {model} on "
                        f"{spec.get('host', '127.0.0.1')}:{spec.get('port', 0)}: {why}")
    error.log = log
    return error


def _reason_in(log: str) -> str | None:
    """llama.cpp's own words for a failed start: its error lines, the last few."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\bE\b|error|failed|couldn't|cannot", line, re.I)]
    picked = (errors or lines)[-3:]
    return "; ".join(re.sub(r"^[\d.]+ [EWID] ", "", line) for line in picked) or None


def resolve_model(name) -> pathlib.Path:
    """A GGUF path for 'selftest', 'selftest:<variant>' or a path, checked to exist."""
    text = str(name)
    if text == "selftest" or text.startswith("selftest:"):
        from pytest_frank.local import selftest_model

        variant = text.partition(":")[2] or "default"
        if variant not in selftest_model.VARIANTS:
            raise LaunchError(f"unknown selftest variant {variant!r}; "
                              f"choose from {selftest_model.VARIANTS}")
        return selftest_model.model_path(variant)
    path = pathlib.Path(text).expanduser()
    if not path.is_file():
        raise LaunchError(f"model file not found: {path}")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise LaunchError(f"not a GGUF file (no GGUF magic): {path}")
    return path


def resolve_projector(name) -> pathlib.Path:
    """A projector GGUF path for 'selftest' or a path, checked to exist."""
    if str(name) == "selftest":
        from pytest_frank.local import selftest_model

        return selftest_model.projector_path()
    return _existing(name, "mmproj file")


def _import_xllamacpp():
    try:
        import xllamacpp
    except ImportError as exc:
        raise LaunchError("launching needs xllamacpp: pip install 'pytest-frank[launch]'") from exc
    return xllamacpp


def _params(xllamacpp, spec: dict, model: pathlib.Path):
    p = xllamacpp.CommonParams()
    p.model.path = str(model)
    p.hostnames = [spec.get("host", "127.0.0.1")]
    p.port = int(spec.get("port", 0))
    p.n_ctx = int(spec.get("ctx_size", DEFAULT_CTX_SIZE))
    p.n_parallel = int(spec.get("parallel", 1))
    p.kv_unified = bool(spec.get("kv_unified", False))
    p.endpoint_metrics = bool(spec.get("metrics", True))
    p.endpoint_slots = True
    p.use_jinja = bool(spec.get("jinja", True))
    p.sleep_idle_seconds = -1
    p.verbosity = int(spec.get("verbosity", 2))
    threads = int(spec.get("threads", DEFAULT_THREADS))
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    if spec.get("reasoning_format") is not None:  # unset: llama.cpp's own default, as without
        p.reasoning_format = _reasoning_format(xllamacpp, spec["reasoning_format"])  # the flag
    if spec.get("alias"):
        alias = spec["alias"]
        p.model_alias = {alias} if isinstance(alias, str) else {str(a) for a in alias}
    if spec.get("api_key"):
        p.api_keys = _api_keys(spec)
    if spec.get("chat_template_file"):
        p.chat_template = _read_text(spec["chat_template_file"], "chat template file")
    if spec.get("mmproj"):
        p.mmproj.path = str(resolve_projector(spec["mmproj"]))
    for key in ("cache_type_k", "cache_type_v"):
        if spec.get(key):
            setattr(p, key, _cache_type(xllamacpp, key, spec[key]))
    if spec.get("rope_freq_base"):
        p.rope_freq_base = float(spec["rope_freq_base"])
    if spec.get("ctx_checkpoints") is not None:  # 0 is a setting: no checkpoint at all
        p.n_ctx_checkpoints = int(spec["ctx_checkpoints"])
    _speculative(xllamacpp, p, spec, threads)
    return p


def _cache_type(xllamacpp, key: str, name: str):
    if name not in CACHE_TYPES:
        raise LaunchError(f"{key} {name!r} is not one of {sorted(CACHE_TYPES)}")
    return getattr(xllamacpp.ggml_type, CACHE_TYPES[name])


def _speculative(xllamacpp, p, spec: dict, threads: int) -> None:
    draft, kind = spec.get("draft_model"), spec.get("spec_type")
    idle = bool(spec.get("draft_without_spec_type", False))
    if kind is not None and kind not in SPEC_TYPES:
        raise LaunchError(f"spec_type {kind!r} is not one of {sorted(SPEC_TYPES)}")
    if idle and (not draft or kind):
        raise LaunchError("draft_without_spec_type needs a draft_model to load and no spec_type")
    if not draft and kind in (None, "draft-simple"):
        if kind:
            raise LaunchError("spec_type draft-simple needs a draft_model (or use draft-mtp for "
                              "a GGUF with its own MTP head)")
        return
    if draft:
        p.speculative.draft.mparams.path = str(resolve_model(draft))
    p.speculative.draft.n_max = int(spec.get("draft_max", 3))
    p.speculative.draft.cpuparams.n_threads = threads
    p.speculative.draft.cpuparams_batch.n_threads = threads
    types = xllamacpp.common_speculative_type
    # A draft model alone is loaded but never used: the spec type is what engages it.
    chosen = "COMMON_SPECULATIVE_TYPE_NONE" if idle else SPEC_TYPES[kind or "draft-simple"]
    p.speculative.types = [getattr(types, chosen)]
    p.load_mtp = kind == "draft-mtp"


def _reasoning_format(xllamacpp, name: str):
    if name not in REASONING_FORMATS:
        raise LaunchError(f"reasoning_format {name!r} is not one of {sorted(REASONING_FORMATS)}")
    return getattr(xllamacpp.common_reasoning_format, REASONING_FORMATS[name])


def _existing(path, what: str) -> pathlib.Path:
    path = pathlib.Path(str(path)).expanduser()
    if not path.is_file():
        raise LaunchError(f"{what} not found: {path}")
    return path


def _read_text(path, what: str) -> str:
    return _existing(path, what).read_text(encoding="utf-8")


def _client_url(address: str) -> str:
    """listening_address is "http://HOST:PORT"; a wildcard host is reached through loopback."""
    url = address if "://" in address else f"http://{address}"
    for wildcard in ("0.0.0.0", "[::]"):
        url = url.replace(f"//{wildcard}:", "//127.0.0.1:")
    return url.rstrip("/")


def _api_keys(spec: dict) -> list[str]:
    """The `api_key` launch key, one key or a list, as a list."""
    key = spec.get("api_key") or []
    return [key] if isinstance(key, str) else [str(k) for k in key]


def _wait_ready(url: str, timeout: float, keys: list[str], deadline: float | None = None,
                alive: Callable[[], str | None] = lambda: None) -> None:
    """Until /health answers, then /slots. llama.cpp answers /health before its task loop has
    begun, and the loop's start clears a stop asked before it: a server stopped in that moment
    never ends, and xllamacpp's destructor waits for it for ever. The loop answers /slots."""
    from pytest_frank.transport import http

    deadline = deadline if deadline is not None else time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {keys[0]}"} if keys else None
    last = "no answer"
    with http.client(2.0) as client:
        for route in ("/health", "/slots"):
            while True:
                ex = http.send(client, "GET", f"{url}{route}", headers=headers)
                if ex.ok:
                    break
                last = ex.error or f"HTTP {ex.status} {ex.snippet(200)}"
                gone = alive()  # a child process that ended will never answer
                if gone:
                    raise LaunchError(f"{url}{route}: {gone}")
                if time.monotonic() >= deadline:
                    raise LaunchError(f"{url}{route} not 200 within {timeout:.0f}s: {last}")
                time.sleep(0.05)


# -- a server in a child process of its own -------------------------------------------------
# llama.cpp keeps one logger per process: servers launched side by side in one process write
# one log, and their lines cannot be told apart. A child process each gives each server its own
# log file (the child's stderr), its own log threshold, and a stop that always ends (the process
# is killed where the server does not stop). It costs a Python start and xllamacpp's import,
# about 0.1 s of CPU, taken side by side with the parent's own work.
#
# The child lives only as long as its parent wants it: it reads its spec on stdin and waits for
# the end of stdin, which comes when the parent stops it or dies in any way (a crash, SIGKILL,
# an xdist worker's exit), and then stops its server and exits. It runs in a session of its
# own, so the terminal's Ctrl-C reaches only the parent, which reports what it measured and
# stops its servers as usual.

STOP_WAIT = 5.0  # seconds a child has to stop its server before it is killed
_children: list[subprocess.Popen] = []  # every child still running, ended at exit at the latest
_lock = threading.Lock()


@dataclass(eq=False)
class _Child:
    """A child process waiting for its spec on stdin, and the file its stderr (llama.cpp's log)
    goes to."""

    process: subprocess.Popen
    log: str


_spare: list[_Child] = []  # children started ahead (prestart), each for one launch


def prestart(count: int) -> None:
    """Start `count` child processes ahead of the launches that will use them: their Python
    start and imports (most of a child's cost) overlap the servers launched before them."""
    with _lock:
        _spare.extend(_spawn() for _ in range(count))


def _spawn() -> _Child:
    fd, path = tempfile.mkstemp(prefix="frank-llama-", suffix=".log")
    atexit.register(llama_log.remove, path)
    package = pathlib.Path(__file__).resolve().parents[2]  # the child imports this copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(package), os.environ.get("PYTHONPATH")]))}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest_frank.local.launch"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=fd, env=env, start_new_session=True, close_fds=True)
    finally:
        os.close(fd)
    _children.append(process)
    return _Child(process, path)


def _launch_child(spec: dict, model: pathlib.Path) -> LaunchedServer:
    timeout = float(spec.get("startup_timeout", 60))
    deadline = time.monotonic() + timeout
    with _lock:
        child = _spare.pop(0) if _spare else None
    try:
        child = child or _spawn()
    except OSError as exc:
        raise LaunchError(f"llama.cpp's process for model {model} could not be started: "
                          f"{exc}") from None
    process, log = child.process, llama_log.ServerLog(child.log, 0)
    server = LaunchedServer("", str(model), spec, log=log, build=package_build(),
                            process=process)
    try:
        assert process.stdin is not None
        # the spec on stdin, not the command line: an api_key stays out of `ps`
        asked = {"spec": {**spec, "model": str(model)}, "log": child.log}
        process.stdin.write(json.dumps(asked).encode() + b"\n")
        process.stdin.flush()
        said = _child_says(process, deadline, timeout, log)
        if "error" in said:
            raise LaunchError(said["error"])
        server.url = said["url"]
        server.backend = tuple(said["backend"]) if said.get("backend") else None
        _wait_ready(server.url, timeout, _api_keys(spec), deadline=deadline,
                    alive=lambda: _exited(process))
    except (LaunchError, OSError) as exc:
        server.stop()
        error = exc if isinstance(exc, LaunchError) else LaunchError(
            f"llama.cpp's process for model {model} could not be started: {exc}")
        error.log = log
        raise error from None
    except BaseException:
        server.stop()
        raise
    return server


def _child_says(process: subprocess.Popen, deadline: float, timeout: float,
                log: llama_log.ServerLog) -> dict:
    """The child's one line: where it listens, or why it did not start (a child that ended
    without a word left its reason in its log: a Python error, llama.cpp's last lines)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        if not sel.select(max(0.0, deadline - time.monotonic())):
            raise LaunchError(f"llama.cpp's process did not start within the "
                              f"{timeout:g}s of launch.startup_timeout")
    line = process.stdout.readline()
    if not line:
        process.wait(STOP_WAIT)
        why = _exited(process) or "llama.cpp's process said nothing"
        raise LaunchError(f"{why}: {_reason_in(log.text()) or 'its log is empty'}")
    return json.loads(line)


def _exited(process: subprocess.Popen) -> str | None:
    code = process.poll()
    if code is None:
        return None
    if code < 0:
        return f"llama.cpp's process was killed by signal {-code}"
    return f"llama.cpp's process exited with status {code}"


def _end_child(process: subprocess.Popen) -> None:
    try:
        if process.stdin is not None:
            process.stdin.close()  # the child's sign to stop
        process.wait(STOP_WAIT)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
    finally:
        if process.stdout is not None:
            process.stdout.close()
        if process in _children:
            _children.remove(process)


def end_spares() -> None:
    """End the children started ahead that no launch took."""
    with _lock:
        spare = [child.process for child in _spare]
        _spare.clear()
    for process in spare:
        _end_child(process)


@atexit.register
def _end_children() -> None:
    """A run that ends without stopping its servers (an error in its own teardown) ends them
    here; a parent that dies outright ends them by closing their stdin."""
    _spare.clear()
    for process in list(_children):
        _end_child(process)


def _child() -> int:
    """The child's side: start the server the spec on stdin asks for, say where it listens
    (one JSON line on stdout), and keep it until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's to stop, not the terminal's
    line = sys.stdin.readline()
    if not line:
        return 0  # a child started ahead that no launch needed
    asked = json.loads(line)
    spec, model = asked["spec"], pathlib.Path(asked["spec"]["model"])
    xllamacpp = _import_xllamacpp()
    try:
        server = xllamacpp.Server(_params(xllamacpp, spec, model))
    except RuntimeError as exc:
        llama_log.drain()  # llama.cpp's lines, with the reason, reach the file first
        _say({"error": str(_not_started(exc, llama_log.ServerLog(asked["log"], 0), model, spec))})
        return 1
    _say({"url": _client_url(server.listening_address), "backend": devices(xllamacpp)})
    sys.stdin.read()  # until the parent stops this server or dies
    del server
    return 0


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(_child())
