import importlib
import pkgutil
from pathlib import Path

import pytest
import yaml
from llama import llama  # noqa: F401  (the real llama.cpp server factory fixture)
from vllm_server import in_config_order, plan_early_starts, start_next, vllm  # noqa: F401  (real vLLM)
from real_models import smollm2, smollm2_path  # noqa: F401  (a real trained model, tests/support/real_models.py)
from real_clients import client_server, coding_agent, sandbox  # noqa: F401  (pi and Codex, tests/support/real_clients.py)

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
    """A run state of the test's own (pytest_frank.base.state.fresh): the secrets and claims it
    registers outside any pytest run go with it, as they would with a real run."""
    from pytest_frank.base import state

    with state.fresh() as run:
        yield run


@pytest.fixture
def run_fleet(pytester, monkeypatch):
    """Write a fleet file and run pytest on it in-process; returns pytester's RunResult. The
    run's secrets and claims are its own (pytest_frank.base.state): none outlives it."""

    def run(fleet, *args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        path = pytester.path / "fleet.yaml"
        path.write_text(fleet if isinstance(fleet, str) else yaml.safe_dump(fleet))
        return pytester.runpytest("--endpoints", str(path), "-p", "no:cacheprovider", "-rA",
                                  "-W", "ignore::pytest.PytestAssertRewriteWarning",
                                  "-p", "no:hypothesispytest", *args)

    return run


# Test tiers: every test module names its own with one `pytestmark` (unit, emulated or real, see
# pyproject.toml and docs/development.md), the heaviest its tests need; a name ending in _real or
# _emulated agrees with it. `pytest -m unit` then starts no server and no emulator.
TIERS = ("unit", "emulated", "real")
REAL_FIXTURES = {"llama", "vllm", "smollm2", "smollm2_path", "coding_agent", "client_server"}


HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:  # not the battery's own tests, which a fleet run collects
            _check_tier(item)
    items[:] = in_config_order(items)


def pytest_collection_finish(session):
    plan_early_starts(session.items)  # the next vLLM configuration starts while tests run


def pytest_runtest_teardown(item):
    start_next(item)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "load":  # -n without a --dist of the caller's choosing
        from vllm_scheduling import VllmFirst

        return VllmFirst(config, log)
    return None


def _check_tier(item) -> None:
    module = getattr(item, "module", None)
    marks = getattr(module, "pytestmark", [])
    tiers = [m.name for m in (marks if isinstance(marks, list) else [marks]) if m.name in TIERS]
    own = [m.name for m in getattr(item, "own_markers", ()) if m.name in TIERS]
    stem = item.path.stem
    wrong = (
        f"names no tier: add `pytestmark = pytest.mark.<tier>` ({', '.join(TIERS)})" if not tiers
        else f"names {len(tiers)} tiers at module level" if len(tiers) > 1
        else f"marks a test {own[0]}: the tier is the module's" if own
        else f"is named {stem} but marked {tiers[0]}"
        if stem.endswith(("_real", "_emulated")) and not stem.endswith("_" + tiers[0])
        else f"asks for a real server ({', '.join(sorted(_real(item)))}) but is marked {tiers[0]}"
        if _real(item) and tiers[0] != "real" else None)
    if wrong:
        raise pytest.UsageError(f"{item.nodeid}: its module {wrong}")


def _real(item) -> set:
    return set(getattr(item, "fixturenames", ())) & REAL_FIXTURES


@pytest.fixture(autouse=True)
def _real_servers_only_in_the_real_tier(request, monkeypatch):
    """A test outside the real tier that would launch llama.cpp (through a fleet's `launch:` or
    by hand) fails and names itself: its module belongs in the real tier."""
    if request.node.get_closest_marker("real"):
        return
    from pytest_frank.local import launch as launch_module

    def refuse(*args, **kwargs):
        pytest.fail(f"{request.node.nodeid} launches a real llama.cpp server: mark its module "
                    f"pytest.mark.real", pytrace=False)

    monkeypatch.setattr(launch_module, "launch", refuse)
