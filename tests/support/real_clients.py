"""Real coding agents for the tests: pi, Codex and Claude Code from npm, run non-interactively
in a sandbox against a server, with every request they send recorded.

The clients are fetched with npm at pinned versions into `~/.cache/pytest-frank/clients/`, one
fetcher at a time, as tests/support/real_models.py fetches its model with pip. The sandbox is
bubblewrap (`bwrap`): the one on PATH, else Debian's package, downloaded with `apt-get download`
and unpacked with `dpkg -x` into the same cache (no root, no change to the system). Inside it the
root is read-only and one folder is writable: the client's HOME, which is also its workdir and
holds its configuration. The network is the machine's own, so the client reaches the server on
127.0.0.1 (and nothing else where the machine reaches nothing else).

Each client is configured from its public docs for a custom local provider and no login:
pi through `models.json` (api "openai-completions", a reasoning model: it then sends the
`developer` role) in print mode; Codex through a `config.toml` model provider (wire_api
"responses") and `codex exec` with approvals and its own sandbox off (bubblewrap is the
sandbox); Claude Code through ANTHROPIC_BASE_URL, a dummy key and `-p`, with the built-in
tools a run names. Codex's `goals` feature is off: with it, a model that calls `create_goal` makes Codex
send a `function_call_output` item with no `call_id`, which llama.cpp refuses with 400 "Cannot
determine type of 'item'" (observed with Codex 0.171.0), a fault of that feature, not of the
endpoint. A recording proxy (tests/support/proxy.py) sits between client and server.

Outside CI a machine without npm, the clients or a working bubblewrap skips the real-client
tests with the reason; under `CI=true` it is an error, so a green CI run has run them.

Run it by hand to warm the cache: `python tests/support/real_clients.py`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from vllm_env import cache_root

if TYPE_CHECKING:  # the proxy needs httpx, which the main command's install has not
    from proxy import Proxy


@dataclass(frozen=True)
class Client:
    name: str
    package: str
    version: str
    bin: str


CLIENTS = {
    "pi": Client("pi", "@mariozechner/pi-coding-agent", "0.73.1", "pi"),
    "codex": Client("codex", "@openai/codex", "0.171.0", "codex"),
    "claude": Client("claude", "@anthropic-ai/claude-code", "2.1.197", "claude"),
}
FETCH_TIMEOUT_S = 600
MODEL = "selftest"
PROMPT = "Say hello"
ANSWER = "Hello!"  # what the self-test agent model answers once a tool result came last


class FetchError(RuntimeError):
    """A client or the sandbox could not be had; the message says which step failed and why."""


def _run(argv: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S,
                              **kwargs)
    except FileNotFoundError:
        raise FetchError(f"{what}: {argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise FetchError(f"{what}: no result after {FETCH_TIMEOUT_S} s") from None
    if done.returncode:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise FetchError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done


def _locked(folder: Path, target: Path, fetch) -> Path:
    """target, fetched into folder first if absent; a second process waits, then finds it."""
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            fetch()
    return target


def client_bin(client: Client) -> Path:
    """The client's executable, installed with npm first if it is not in the cache."""
    folder = cache_root() / "clients"
    home = folder / f"{client.name}-{client.version}"
    target = home / "node_modules" / ".bin" / client.bin

    def fetch():
        tmp = Path(tempfile.mkdtemp(dir=folder))
        try:
            _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix",
                  str(tmp), f"{client.package}@{client.version}"],
                 f"npm install {client.package}@{client.version}")
            _run([str(tmp / "node_modules" / ".bin" / client.bin), "--version"],
                 f"{client.name} --version")
            os.replace(tmp, home)  # whole or absent: a cut install leaves no half client
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return _locked(folder, target, fetch)


def bwrap_bin() -> Path:
    """bubblewrap: the one on PATH, else Debian's package unpacked into the cache; checked to
    make a sandbox here (a container may forbid the namespaces it needs)."""
    found = shutil.which("bwrap")
    folder = cache_root() / "bubblewrap"
    path = Path(found) if found else folder / "usr" / "bin" / "bwrap"

    def fetch():
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            _run(["apt-get", "download", "bubblewrap"], "apt-get download bubblewrap", cwd=tmp)
            deb = next(Path(tmp).glob("bubblewrap_*.deb"))
            _run(["dpkg", "-x", str(deb), str(Path(tmp) / "root")], "dpkg -x bubblewrap")
            os.replace(Path(tmp) / "root" / "usr", folder / "usr")
    if not found:
        _locked(folder, path, fetch)
    _run([str(path), "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--share-net",
          "true"], f"a sandbox from {path}")
    return path


def or_skip(fetch, *args):
    """fetch(*args), or outside CI a skip with the reason; under CI=true the error itself."""
    try:
        return fetch(*args)
    except (FetchError, OSError, StopIteration) as exc:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"real clients unavailable: {exc}")


# -- configuring a client for the local provider, from its public docs --------------------------

def _pi(home: Path, base_url: str, **options) -> tuple[list[str], dict]:
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    models = {"providers": {"frank": {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": "none",
        "models": [{"id": MODEL, "reasoning": True, "contextWindow": 32768,
                    "maxTokens": 4096}]}}}
    (agent / "models.json").write_text(json.dumps(models))
    argv = ["-p", "--provider", "frank", "--model", MODEL, "--no-session", PROMPT]
    return argv, {"PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1"}


def _codex(home: Path, base_url: str, **options) -> tuple[list[str], dict]:
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "frank"\n\n[features]\ngoals = false\n\n'
        f'[model_providers.frank]\nname = "frank"\nbase_url = "{base_url}"\n'
        f'wire_api = "responses"\n')
    argv = ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", PROMPT]
    return argv, {"CODEX_HOME": str(codex_home)}


def _claude(home: Path, base_url: str, model: str = MODEL, tools: str = "Bash"
            ) -> tuple[list[str], dict]:
    # Its full tool set makes a 78 KB first request, over five minutes of prompt for the
    # self-test model's byte-sized tokens: the runs name the built-in tools they need. The Agent
    # tool brings the trailing system message ("Available agent types ...") under a local model
    # name; a `claude-*` name leaves it out.
    argv = ["-p", "--model", model, "--tools", tools, "--dangerously-skip-permissions", PROMPT]
    return argv, {"ANTHROPIC_BASE_URL": base_url.removesuffix("/v1"),
                  "ANTHROPIC_API_KEY": "sk-frank-dummy", "IS_SANDBOX": "1",
                  "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


CONFIGURE = {"pi": _pi, "codex": _codex, "claude": _claude}


# -- one run -------------------------------------------------------------------------------------

@dataclass
class ClientRun:
    """What one client did: its exit, output, time and every request it sent."""
    client: str
    rc: int | None  # None: stopped by the harness (see `stopped`)
    stdout: str
    stderr: str
    seconds: float
    exchanges: list[dict] = field(default_factory=list)
    stopped: str = ""  # why the harness ended the run, if it did

    @property
    def generations(self) -> list[dict]:
        """The requests that asked for a generation (POSTs), in order."""
        return [e for e in self.exchanges if e["method"] == "POST"]

    @property
    def answered(self) -> bool:
        return self.rc == 0 and ANSWER in self.stdout

    def outcome(self) -> str:
        statuses = ", ".join(f"{e['path'].split('?')[0]} {e['status']}" for e in self.generations)
        end = self.stopped or f"exit {self.rc}"
        said = "answered" if self.answered else "no answer"
        return f"{self.client}: {end} in {self.seconds:.1f} s, {said}; requests: {statuses}"

    def describe(self) -> str:
        """The outcome and the ends of the client's output, for a failed assertion."""
        errors = [e["error"][:300] for e in self.generations if e["error"]]
        return (f"{self.outcome()}\nerrors: {errors}\nstdout: {self.stdout[-1500:]}\n"
                f"stderr: {self.stderr[-1500:]}")


def run_client(sandbox: Path, client: Client, upstream: str, home: Path, *,
               timeout_s: float = 240, max_generations: int = 6, **options) -> ClientRun:
    """Run the client once in the sandbox against upstream (a server's base URL) through a
    recording proxy. A client that starts a request beyond max_generations (a model that never
    answers calls its tool forever) or runs past timeout_s is stopped, and `stopped` says so."""
    work = home / "work"
    work.mkdir(parents=True)
    (home / "tmp").mkdir()
    from proxy import Proxy

    with Proxy(upstream) as proxy:
        args, env = CONFIGURE[client.name](home, f"{proxy.url}/v1", **options)
        env = {"HOME": str(home), "TMPDIR": str(home / "tmp"), "PATH": os.environ["PATH"],
               "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", **env}
        argv = [str(sandbox), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--bind", str(home), str(home), "--chdir", str(work), "--unshare-all",
                "--share-net", "--die-with-parent", "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += ["--", str(client_bin(client)), *args]
        out, err = home / "stdout", home / "stderr"
        start = time.monotonic()
        with open(out, "w") as stdout, open(err, "w") as stderr:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout,
                                       stderr=stderr, start_new_session=True)
            stopped = _watch(process, proxy, start + timeout_s, max_generations)
        seconds = time.monotonic() - start
        return ClientRun(client.name, None if stopped else process.returncode, out.read_text(),
                         err.read_text(), seconds, list(proxy.exchanges), stopped)


def _watch(process: subprocess.Popen, proxy: Proxy, deadline: float, most: int) -> str:
    """'' once the process exits; else why it was stopped."""
    while process.poll() is None:
        posts = sum(e["method"] == "POST" for e in proxy.exchanges)
        why = (f"stopped at its request {posts}" if posts > most else
               "stopped at its time limit" if time.monotonic() > deadline else "")
        if why:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: the sandbox and all in it
            process.wait()
            return why
        time.sleep(0.1)
    return ""


# -- the servers: the agent model with a long trained context, healthy and under three faults ------

# Codex's first request is ~24,500 tokens of the self-test model's byte-level vocabulary, pi's
# ~2,000; the clients claim's Claude Code profile wants ~14 KB of prompt plus its 32000 tokens of
# output budget in one slot.
LONG_CTX_TRAIN = 65536
CTX_SIZE = 49152


# What the tool results sent to the servers below hold: the shell's answer to the self-test
# model's command ("Paris"), the agent claim's reference marker, the clients claim's result.
RESULT_MARKS = ("command not found", "ref-", "shopping list")


def templates() -> dict[str, str | None]:
    """Scenario -> the chat template it serves (None: the model's own)."""
    from pytest_frank.local.selftest_model import chat_template

    agent = chat_template("agent")
    # As many real templates do (e.g. "System message must be at the beginning."): a system
    # message anywhere but first raises. llama.cpp hands developer items and messages to the
    # template as role system.
    late = ("{%- for m in messages %}{%- if m.role == 'system' and not loop.first %}"
            "{{- raise_exception('System message must be at the beginning.') }}"
            "{%- endif %}{%- endfor %}\n" + agent)
    # As llama.cpp issue 19851's template: roles must alternate, a tool message raises. The raise
    # keys on the tool results these tests send (RESULT_MARKS): llama.cpp renders sample
    # conversations with role tool to learn the template's capabilities and tool-call format,
    # and a template that raised on those too would break turn 1 as well.
    marked = " or ".join(f"{mark!r} in m.content" for mark in RESULT_MARKS)
    strict = ("{%- for m in messages %}{%- if m.role == 'tool' and (" + marked + ") %}"
              "{{- raise_exception("
              "'Conversation roles must alternate user/assistant/user/assistant/...') }}"
              "{%- endif %}{%- endfor %}\n" + agent)
    # The template less its role-tool branch: the result never reaches the prompt, so the agent
    # model (which answers once a result came last) calls its tool again.
    deaf = chat_template().replace("message.role == 'tool'", "message.role == 'nobody'")
    return {"healthy": None, "late_system": late, "tool_raises": strict, "tool_dropped": deaf}


@pytest.fixture(scope="session")
def client_server(llama, tmp_path_factory):
    """Factory fixture: client_server(scenario) -> a real llama.cpp server (shared per scenario
    for the session) on the agent model with a 64K-token trained context."""
    from pytest_frank.local.selftest_model import write_model

    folder = tmp_path_factory.mktemp("client-servers")
    model = str(write_model(folder / "agent-64k.gguf", "agent", ctx_train=LONG_CTX_TRAIN))
    texts = templates()

    def start(scenario: str):
        spec = {"model": model, "ctx_size": CTX_SIZE}
        if texts[scenario] is not None:
            path = folder / f"{scenario}.jinja"
            path.write_text(texts[scenario])
            spec["chat_template_file"] = str(path)
        return llama(**spec)
    return start


# -- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def sandbox() -> Path:
    """bubblewrap, fetched once per machine and checked to work here."""
    return or_skip(bwrap_bin)


@pytest.fixture(scope="session")
def coding_agent(sandbox, client_server, tmp_path_factory):
    """Factory fixture: coding_agent(name, scenario, **options) -> ClientRun, the named client
    (CLIENTS) run in its own fresh HOME against client_server(scenario), once per session for
    the same arguments (options: run_client's limits, and Claude Code's model and tools)."""
    runs: dict[str, ClientRun] = {}

    def run(name: str, scenario: str, **options) -> ClientRun:
        key = json.dumps([name, scenario, options], sort_keys=True)
        if key not in runs:
            client = CLIENTS[name]
            or_skip(client_bin, client)
            home = tmp_path_factory.mktemp(f"{name}-home")
            runs[key] = run_client(sandbox, client, client_server(scenario).url, home, **options)
        return runs[key]
    return run


if __name__ == "__main__":
    print(bwrap_bin())
    for each in CLIENTS.values():
        print(client_bin(each))
