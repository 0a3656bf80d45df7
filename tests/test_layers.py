"""The package's layers import one way: each module imports only from its own layer and the layers
before it, lazy imports inside functions included (imports under `if TYPE_CHECKING:` are types
only and exempt). The reports read the run record alone, never the pytest glue."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_frank

pytestmark = pytest.mark.unit

PACKAGE = Path(pytest_frank.__file__).parent

# Layer order, first to last; a module's layer is its longest listed prefix.
LAYERS = {
    # helpers that import nothing of the package beyond each other
    "base": ["", "redact", "hosts", "figures", "schema_errors"],
    "config": ["fleet"],
    "runtime": ["http", "observation", "verdict", "target", "session", "probes", "chat",
                "metrics", "drivers", "fingerprint", "interrupt", "gguf", "vram", "local",
                "serve", "xdist_scheduling", "cli", "sizing"],
    # checks: the judge contract each claim is written to; init: a fleet file from the probes
    "claims": ["claims", "checks", "init"],
    "record": ["results"],  # the run record: the glue writes it, the reports read it
    "glue": ["plugin", "endpoint", "rows", "junit", "batteries"],  # junit: pytest's own XML, renamed
    "reports": ["reporting", "page", "markdown", "baseline", "prometheus"],
}
ORDER = list(LAYERS)
NOT_FROM = {"reports": {"glue"}}  # a report reads the record, not the session that wrote it
# Known exceptions, each to be removed once fixed (the test fails when one no longer occurs).
EXCEPTIONS: set[tuple[str, str]] = set()


def layer_of(module: str) -> str:
    name = module.removeprefix("pytest_frank").lstrip(".")
    best = max(((p, layer) for layer, prefixes in LAYERS.items() for p in prefixes
                if name == p or name.startswith(p + ".") or not p), default=None,
               key=lambda x: len(x[0]))
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    exempt = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                     "typing.TYPE_CHECKING"):
            exempt |= {id(n) for child in node.body for n in ast.walk(child)}
    return exempt


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(imported pytest_frank module, line) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exempt = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("pytest_frank")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_frank"):
            for alias in node.names:  # `from pytest_frank import fleet` imports a module
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() or \
                    (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                found.append((sub if is_module else node.module, node.lineno))
    return sorted({(m, line) for m, line in found if m != "pytest_frank"})


def offences() -> list[tuple[str, int, str, str]]:
    """(file, line, imported module, why) for each import against the rule."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = layer_of(module_name(path))
        for imported, line in imports_of(path):
            there = layer_of(imported)
            if ORDER.index(there) > ORDER.index(here) or there in NOT_FROM.get(here, ()):
                found.append((str(path.relative_to(PACKAGE.parent)), line, imported,
                              f"{here} imports {there}"))
    return found


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer_of(module_name(path))


def test_imports_run_one_way():
    wrong = [f"{file}:{line}: {module} ({why})" for file, line, module, why in offences()
             if (file, module) not in EXCEPTIONS]
    assert wrong == []


def test_each_exception_still_occurs():
    """A fixed exception leaves the list, so the rule tightens with each fix."""
    seen = {(file, module) for file, _, module, _ in offences()}
    assert EXCEPTIONS <= seen, f"no longer imported, drop from EXCEPTIONS: {EXCEPTIONS - seen}"


def test_the_rule_sees_lazy_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pytest_frank.plugin import SESSION\n"
                      "if TYPE_CHECKING:\n    from pytest_frank.session import FrankSession\n")
    assert imports_of(source) == [("pytest_frank.plugin", 2)]
