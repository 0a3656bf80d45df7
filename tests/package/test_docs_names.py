"""Every file, folder and module the docs name exists: a path of the checkout (`tests/...`,
`bench/...`, `pytest_frank/...`, `drivers/base.py` within the package), a file named alone in
backticks (`rows.py`), a dotted name (`pytest_frank.claims.slots.Options`) and the modules of
development.md's layer table (`base/`: `state`, `redact`). A module renamed or moved leaves a
page pointing at nothing, which no build of the site notices."""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pytest

from checkout import ROOT

pytestmark = pytest.mark.unit

PACKAGE = ROOT / "pytest_frank"
PAGES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"])
# A path from the checkout's root, anywhere in a page (prose, a command, a table).
ROOTED = re.compile(r"(?<![\w./-])((?:\.ci|pytest_frank|tests|bench|docs|examples|batteries)"
                    r"/[\w./<>-]*[\w>]/?)")
# In backticks: a path within the package (`drivers/base.py`), a folder (`claims/`), a file
# alone (`rows.py`), a dotted name from the package.
SPAN = re.compile(r"`([^`\n]+)`")
FILE = re.compile(r"[\w./-]+\.py")
FOLDER = re.compile(r"\w+/")
DOTTED = re.compile(r"(?<![\w/.])pytest_frank(?:\.\w+)+")
# development.md's layer table: `folder/`: `module`, `module`, ...
LISTING = re.compile(r"`(\w+)/`: ((?:`[\w.]+`(?:, )?)+)")


def named(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    spans = SPAN.findall(text)
    return ({path.rstrip("/") for path in ROOTED.findall(text) if "<" not in path}
            | {span for span in spans if FILE.fullmatch(span) or FOLDER.fullmatch(span)})


def own_files(page: Path) -> set[str]:
    """The files a page's own examples write (a block whose first line is `# lora.py`): the
    reader's files, not the checkout's."""
    return set(re.findall(r"^```python\n# (\S+\.py)$", page.read_text(encoding="utf-8"), re.M))


def checkout_files() -> set[str]:
    """Every file name of the checkout and every folder's (`typecheck/`), outside hidden
    folders (the venv) and build output."""
    names = {p.name for p in ROOT.iterdir() if p.is_file()}
    for top in ROOT.iterdir():
        if top.is_dir() and not top.name.startswith(".") and top.name not in {"build", "dist"} \
                and not top.name.endswith(".egg-info"):
            names |= {f"{top.name}/"}
            names |= {p.name + ("/" if p.is_dir() else "") for p in top.rglob("*")}
    return names


def exists(path: str, files: set[str]) -> bool:
    if "/" not in path.rstrip("/"):  # a file or folder named alone: somewhere in the checkout
        return path in files
    return (ROOT / path).exists() or (PACKAGE / path).exists()


def resolves(dotted: str) -> bool:
    """The longest importable module of `dotted`, then its attributes (an old flat path imports
    with a DeprecationWarning: still a name that works)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(value, attr):
                return False
            value = getattr(value, attr)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_and_module_a_page_names_exists(page):
    files = checkout_files() | own_files(page)
    text = page.read_text(encoding="utf-8")
    missing = sorted(path for path in named(page) if not exists(path, files))
    missing += sorted({d for d in DOTTED.findall(" ".join(SPAN.findall(text))) if not resolves(d)})
    for folder, listed in LISTING.findall(text):
        for name in re.findall(r"`([\w.]+)`", listed):
            where = PACKAGE / folder
            if not ((where / f"{name}.py").is_file() or (where / name).exists()):
                missing.append(f"{folder}/{name}")
    assert not missing, f"{page.relative_to(ROOT)} names what the checkout lacks: {missing}"


def test_a_name_that_went_is_found():
    """The check's own proof: development.md once named `reporting.py`, gone since the reports
    got their folder, and a layer's module listed that its folder lacks."""
    files = checkout_files()
    assert not exists("reporting.py", files) and exists("rows.py", files)
    assert exists("drivers/protocols.py", files) and not exists("drivers/nothing.py", files)
    assert exists("tests/support/", files) and not exists("tests/nowhere/", files)
    assert exists("typecheck/", files) and not exists("nowhere/", files)
    assert resolves("pytest_frank.claims.slots.Options") and resolves("pytest_frank.http")
    assert not resolves("pytest_frank.claims.slots.Nothing")
    assert not resolves("pytest_frank.nowhere")
    assert LISTING.findall("| base | `base/`: `state`, `redact` | one run's state |") == [
        ("base", "`state`, `redact`")]
