"""Real llama.cpp servers for tests, started in-process with xllamacpp (no download, CPU only).

`llama(**spec)` returns a running `LaunchedServer` for a launch spec (the fleet.yaml `launch:`
keys, see pytest_frank.local.launch); `model` defaults to "selftest". Servers are cached by spec for
the whole session, so tests that ask for the same spec share one, and all stop at session end.

    def test_hello(llama):
        server = llama(alias="qwen")            # or llama(model="selftest:no_think", ...)
        httpx.post(f"{server.url}/v1/chat/completions", json=...)

Tests must not stop a shared server; start a private one with pytest_frank.local.launch.launch.
"""

from __future__ import annotations

import json

import pytest


class ServerPool:
    """Launched servers keyed by their spec."""

    def __init__(self) -> None:
        self._servers = {}

    def get(self, **spec):
        from pytest_frank.local.launch import launch

        spec.setdefault("model", "selftest")
        key = json.dumps(spec, sort_keys=True, default=str)
        server = self._servers.get(key)
        if server is None or not server.running:
            server = self._servers[key] = launch(spec)
        return server

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


# A model that keeps talking, as its own draft: hundreds of draft tokens of its own accord. One
# spec for the tests that ask for such a server (the battery's and the browser's), so they share it.
DRAFTING = {"model": "selftest:chatty", "alias": "m", "draft_model": "selftest:chatty"}


def template_file(folder, name: str, text: str) -> str:
    """A chat template written to `folder/name`, as a spec's `chat_template_file` names it."""
    path = folder / name
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="session")
def llama():
    """Factory fixture: llama(**spec) -> LaunchedServer, shared per spec for the session."""
    pytest.importorskip("xllamacpp")
    pool = ServerPool()
    yield pool.get
    pool.close()


def load_log(model: str, **spec) -> str:
    """llama.cpp's own load log of a private server, started at debug level (verbosity 4) and
    stopped at once; the process's log threshold is put back for the servers that go on."""
    pytest.importorskip("xllamacpp")
    from pytest_frank.local import llama_log
    from pytest_frank.local.launch import launch

    before = llama_log.verbosity()
    try:
        server = launch({"model": model, "verbosity": 4, **spec})
        server.stop()
    finally:
        if before is not None:
            llama_log.set_verbosity(before)
    if server.log is None:
        pytest.skip("llama.cpp's log cannot be redirected on this platform")
    return server.log.text()
