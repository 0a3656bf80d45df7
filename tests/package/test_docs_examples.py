"""Every Python block of the docs runs, as a reader would run it, or says why not.

A block is one of three: a test module (it defines a `test_...`: the page's tests, run by a child
pytest against a healthy emulated endpoint, must pass), a module the page's tests import (its
first line names its file, `# lora.py`: written beside them) or a script (run in a fresh
namespace, and calling each function it defines; a `print(...)  # text` line must print that
text). A block that cannot run alone says so in an HTML comment on the line before it:
`<!-- fragment: why it does not run -->`. The emulator stands in for llama.cpp here because the
examples are about the plugin's API, not an engine: it serves what they read (`/props`' slots,
`/lora-adapters`)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from checkout import ROOT
from emulator import Emulator, Reply

pytestmark = pytest.mark.emulated

PAGES = sorted((ROOT / "docs").rglob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
FRAGMENT = re.compile(r"<!-- fragment: (.*?) -->\s*\Z", re.S)
FILE_NAME = re.compile(r"# (\w+\.py)\n")
SHOWN = re.compile(r"^print\(.*\)\s+# (.+)$", re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    fragment: str | None  # why it does not run, where it cannot

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file(self) -> str | None:
        named = FILE_NAME.match(self.code)
        return named.group(1) if named else None

    @property
    def tests(self) -> list[str]:
        """The test names it defines at its top level (functions, or a `battery_test(...)`)."""
        names = []
        for node in ast.parse(self.code).body:
            if isinstance(node, ast.FunctionDef):
                names.append(node.name)
            elif isinstance(node, ast.Assign):
                names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        return [name for name in names if name.startswith("test_")]


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        said = FRAGMENT.search(text[:match.start()])
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group(1),
                           said.group(1).strip() if said else None))
    return found


ALL = [block for page in PAGES for block in blocks(page)]
SCRIPTS = [b for b in ALL if b.fragment is None and b.file is None and not b.tests]


def test_a_block_that_does_not_run_says_why():
    assert ALL, "docs/ show no python block"
    bare = [b.where for b in ALL if b.fragment is not None and len(b.fragment.split()) < 3]
    assert not bare, f"a fragment says in a few words why it does not run: {bare}"
    assert FRAGMENT.search("text\n\n<!-- fragment: the middle of a class -->\n")
    assert not FRAGMENT.search("<!-- fragment: one -->\n\nmore text\n")


def uncalled(code: str) -> set[str]:
    """The functions a script defines but never calls: a definition alone runs none of its body
    (an `advise` call given keywords it does not take raised only when called)."""
    tree = ast.parse(code)
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    called = {node.func.id for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return defined - called


@pytest.mark.parametrize("block", SCRIPTS, ids=lambda b: b.where)
def test_a_script_runs_and_prints_what_it_shows(block):
    assert not uncalled(block.code), f"{block.where}: call {uncalled(block.code)} in the block"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.code, block.where, "exec"), {"__name__": "__main__"})  # noqa: S102
    assert out.getvalue().splitlines() == SHOWN.findall(block.code), block.where


def own_checks_fleet(url: str) -> dict:
    """docs/own-checks.md's examples: a test of the model list (alias), a slots check in the
    battery's shape wanting 4 slots, and the lora claim of the page's own fleet block."""
    return {"endpoints": {"ep": {"url": url, "engine": "llamacpp", "alias": "model", "expect": {
        "chat": False, "slots": {"count": 4}, "lora": {"adapter": "support-v2.gguf"}}}}}


FLEETS = {"own-checks.md": own_checks_fleet}
TESTED = sorted({b.page for b in ALL if b.tests and b.fragment is None}, key=str)


def healthy_llamacpp() -> Emulator:
    em = Emulator("llamacpp", models=["model"])
    em.route("GET", "/props", lambda r: Reply(200, {"total_slots": 4}))
    em.route("GET", "/lora-adapters", lambda r: Reply(200, [
        {"id": 0, "path": "/models/support-v2.gguf", "scale": 1.0}]))
    return em


@pytest.mark.parametrize("page", TESTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pages_tests_pass_on_a_healthy_endpoint(page, pytester, run_fleet):
    assert page.name in FLEETS, f"{page.name} shows tests: give its fleet in FLEETS"
    names, modules = [], []
    for block in blocks(page):
        if block.fragment is None and (block.file or block.tests):
            path = pytester.path / (block.file or f"test_{page.stem.replace('-', '_')}_"
                                                  f"{block.line}.py")
            path.write_text(block.code, encoding="utf-8")
            names += block.tests
            modules += [path.name] if block.tests else []
    with healthy_llamacpp() as em:  # the page's tests alone, not the battery beside them
        result = run_fleet(FLEETS[page.name](em.url), *modules, "-k", " or ".join(names))
    result.assert_outcomes(passed=len(names))
