"""pytest-frank: prove that LLM inference endpoints really work after bring-up.

`pytest --endpoints fleet.yaml` runs the battery (pytest_frank.batteries) once per endpoint.
"""

import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"


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
