import importlib
import pkgutil

import pytest
import yaml
from llama import llama  # noqa: F401  (the real llama.cpp server factory fixture)
from vllm_server import vllm  # noqa: F401  (real vLLM servers, tests/vllm_server.py)
from real_models import smollm2, smollm2_path  # noqa: F401  (a real trained model, tests/real_models.py)
from real_clients import client_server, coding_agent, sandbox  # noqa: F401  (pi and Codex, tests/real_clients.py)

# The HTTP stacks are imported once for the session: pytester's in-process runs drop modules
# first imported inside them, and httpx caches httpcore's exception classes, so a re-imported
# httpcore would slip past `except httpx.HTTPError` in later tests. (httpx2 is what newer
# openai/anthropic clients use.)
for _stack in ("httpcore", "httpx", "httpcore2", "httpx2"):
    try:
        importlib.import_module(_stack)
    except ImportError:
        pass

# The plugin's own modules too, for the same reason: a module first imported inside an in-process
# run is dropped after it, while the package keeps the old copy as an attribute, so the next run
# would mix two copies of one module (and of its state, such as the HTTP recorder's sink).
import pytest_frank  # noqa: E402

for _module in pkgutil.walk_packages(pytest_frank.__path__, "pytest_frank."):
    if not _module.name.startswith("pytest_frank.batteries"):
        importlib.import_module(_module.name)


@pytest.fixture
def fresh_state():
    """A run state of the test's own (pytest_frank.state.fresh): the secrets and claims it
    registers outside any pytest run go with it, as they would with a real run."""
    from pytest_frank import state

    with state.fresh() as run:
        yield run


@pytest.fixture
def run_fleet(pytester, monkeypatch):
    """Write a fleet file and run pytest on it in-process; returns pytester's RunResult. The
    run's secrets and claims are its own (pytest_frank.state): none outlives it."""

    def run(fleet, *args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        path = pytester.path / "fleet.yaml"
        path.write_text(fleet if isinstance(fleet, str) else yaml.safe_dump(fleet))
        return pytester.runpytest("--endpoints", str(path), "-p", "no:cacheprovider", "-rA",
                                  "-W", "ignore::pytest.PytestAssertRewriteWarning",
                                  "-p", "no:hypothesispytest", *args)

    return run


# Test tiers, from what a test needs: `pytest -m unit` runs in seconds, CI runs all three.
REAL_FIXTURES = {"llama", "vllm", "smollm2", "smollm2_path", "coding_agent", "client_server"}
EMULATED_FIXTURES = {"run_fleet", "pytester"}
# Whole files that start processes or servers of their own (a fresh venv, a child pytest, a
# browser, the type checker over the package).
SLOW_FILES = {"test_first_contact", "test_packaging", "test_interrupts", "test_browser",
              "test_types", "test_selftest_model", "test_selftest_flat"}


def pytest_collection_modifyitems(items):
    for item in items:
        if any(item.get_closest_marker(tier) for tier in ("unit", "emulated", "real")):
            continue
        names = set(getattr(item, "fixturenames", ()))
        module = getattr(item, "module", None)
        if names & REAL_FIXTURES or item.path.stem in SLOW_FILES:
            item.add_marker(pytest.mark.real)
        elif names & EMULATED_FIXTURES or _uses_emulator(module):
            item.add_marker(pytest.mark.emulated)
        else:
            item.add_marker(pytest.mark.unit)


def _uses_emulator(module) -> bool:
    return any(getattr(value, "__module__", None) in ("emulator", "proxy")
               for value in vars(module).values()) if module is not None else False
