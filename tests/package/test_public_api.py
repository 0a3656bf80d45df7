"""What a check or claim of one's own imports is `pytest_frank`'s `__all__` (docs/own-checks.md
imports from there, from the claims themselves and from the drivers, which key a fix by engine),
and a module's path from before the package had a folder per layer still imports, as the same
module, with a DeprecationWarning."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import ROOT

import pytest_frank

pytestmark = pytest.mark.unit


def test_every_public_name_imports():
    for name in pytest_frank.__all__:
        assert getattr(pytest_frank, name) is not None, name
    assert set(pytest_frank.__all__) <= set(dir(pytest_frank))
    assert set(pytest_frank.__all__) == {"__version__", *pytest_frank._API}
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pytest_frank.nothing  # noqa: B018


def test_the_manual_imports_the_public_api_only():
    text = (ROOT / "docs" / "own-checks.md").read_text(encoding="utf-8")
    imports = re.findall(r"^from (pytest_frank\S*) import (.+)$", text, re.M)
    assert imports, "docs/own-checks.md shows no import"
    for module, names in imports:
        if module == "pytest_frank":
            assert {n.strip() for n in names.split(",")} <= set(pytest_frank.__all__), names
        else:  # a claim's own module, for its Options; the drivers, which key a fix by engine
            assert module in ("pytest_frank.claims", "pytest_frank.drivers"), module


def test_an_old_path_imports_the_moved_module_with_a_warning():
    # A fresh interpreter: in this one the old names may be imported already.
    code = """
import importlib, json, warnings
import pytest_frank
out = {}
for old, new in pytest_frank.MOVED.items():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    out[old] = [module is importlib.import_module(new), [str(w.message) for w in seen
                if issubclass(w.category, DeprecationWarning)]]
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    from pytest_frank.http import Exchange
    from pytest_frank import results
out["from"] = [Exchange.__module__, results.__name__]
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    assert found.pop("from") == ["pytest_frank.transport.http", "pytest_frank.record.results"]
    assert set(found) == set(pytest_frank.MOVED)
    package = Path(pytest_frank.__file__).parent
    assert not [old for old in found if (package / f"{old.split('.')[-1]}.py").exists()]
    for old, (same, warned) in found.items():
        new = pytest_frank.MOVED[old]
        assert same, f"{old} is not {new}"
        assert warned == [f"{old} is now {new}; the old path will go in a later release"], old
