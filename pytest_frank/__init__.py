"""pytest-frank: prove that LLM inference endpoints really work after bring-up.

`pytest --endpoints fleet.yaml` runs the battery (pytest_frank.batteries) once per endpoint.

What a check or claim of your own imports is here (`__all__`; docs/own-checks.md). The package's
parts sit in one folder per layer, each importing only from those before it (docs/development.md):
`base`, `fleet`, `transport`, `outcome`, the engines (`drivers`, `gguf`, `vram`, `local`,
`serve`), `runtime`, `claims` (with `init`), `record`, `plugin` (the pytest glue, with
`batteries`), `reports`.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type checker reads the public names' types; the run imports them lazily
    from pytest_frank.base.state import fresh as fresh_state
    from pytest_frank.claims import Claim, Options, option
    from pytest_frank.claims.advice import advise
    from pytest_frank.claims.checks import Check, Context, battery_test
    from pytest_frank.outcome.observation import Observation
    from pytest_frank.outcome.verdict import Phrase, fail, inconclusive

__version__ = "0.1.0"

# The public API: name -> the module that defines it, imported when first asked for, so that
# `import pytest_frank` (every pytest run loads the plugin through it) stays light.
_API = {
    "Check": "pytest_frank.claims.checks",
    "Context": "pytest_frank.claims.checks",
    "battery_test": "pytest_frank.claims.checks",
    "Claim": "pytest_frank.claims",
    "Options": "pytest_frank.claims",
    "option": "pytest_frank.claims",
    "advise": "pytest_frank.claims.advice",
    "Observation": "pytest_frank.outcome.observation",
    "fail": "pytest_frank.outcome.verdict",
    "inconclusive": "pytest_frank.outcome.verdict",
    "Phrase": "pytest_frank.outcome.verdict",
    "fresh_state": "pytest_frank.base.state",
}
__all__ = ["Check", "Claim", "Context", "Observation", "Options", "Phrase", "__version__", "advise",
           "battery_test", "fail", "fresh_state", "inconclusive", "option"]


def __getattr__(name: str) -> object:
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), "fresh" if name == "fresh_state" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# Modules that sat flat in the package before it had a folder per layer: the old path still
# imports (the same module object, so patches and isinstance agree) with a DeprecationWarning.
MOVED = {f"pytest_frank.{old}": f"pytest_frank.{new}" for old, new in {
    **{m: f"base.{m}" for m in ("state", "redact", "hosts", "figures", "hooks", "shard")},
    "schema_errors": "fleet.schema_errors",
    **{m: f"transport.{m}" for m in ("http", "wire", "metrics", "interrupt")},
    **{m: f"outcome.{m}" for m in ("verdict", "observation")},
    **{m: f"runtime.{m}" for m in ("target", "session", "probes", "chat", "identify",
                                   "known_errors", "sizing")},
    "checks": "claims.checks",
    "results": "record.results",
    "endpoint": "plugin.under_test",
    **{m: f"plugin.{m}" for m in ("stash", "session_hooks", "rows", "junit",
                                  "xdist_scheduling")},
    "reporting": "reports",
    **{m: f"reports.{m}" for m in ("page", "markdown", "baseline", "prometheus", "glance",
                                   "charts", "history", "writers", "merge")},
}.items()}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} is now {new}; the old path will go in a later release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module is the new one, already run


if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
    sys.meta_path.append(_Moved())


def _battery_of_checkout() -> None:
    """An install maps the checkout's top-level `batteries/` into the package (pyproject
    package-dir); imported from the checkout itself (`python -m pytest` puts it first on the
    path), the package has no `batteries` of its own, so it is loaded from beside it."""
    here = Path(__file__).parent
    beside = here.parent / "batteries" / "__init__.py"
    name = f"{__name__}.batteries"
    if (here / "batteries").is_dir() or not beside.is_file() or name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, beside,
                                                  submodule_search_locations=[str(beside.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    globals()["batteries"] = module


_battery_of_checkout()
