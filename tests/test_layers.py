"""The package's layers import one way: each module imports only from its own layer and the layers
before it, lazy imports inside functions included (imports under `if TYPE_CHECKING:` are types
only and exempt). The reports read the run record alone, never the pytest glue. No modules
import each other in a circle, within a layer too, whatever kind of import ties it (one inside
a function or under TYPE_CHECKING only hides a circle: the two still need each other)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_frank

pytestmark = pytest.mark.unit

PACKAGE = Path(pytest_frank.__file__).parent

# Layer order, first to last; a module's layer is its longest listed prefix.
LAYERS = {
    # helpers that import nothing of the package beyond each other; "": the package's face
    "base": ["", "state", "redact", "hosts", "figures", "schema_errors", "hooks", "shard"],
    "config": ["fleet"],
    "runtime": ["http", "observation", "verdict", "wire", "target", "session", "probes", "chat",
                "metrics", "drivers", "identify", "interrupt", "gguf", "vram", "local",
                "serve", "xdist_scheduling", "cli", "sizing", "known_errors"],
    # checks: the judge contract each claim is written to; init: a fleet file from the probes
    "claims": ["claims", "checks", "init"],
    "record": ["results"],  # the run record: the glue writes it, the reports read it
    # stash: the run's keys on pytest's config; junit: pytest's own XML, renamed
    "glue": ["stash", "plugin", "session_hooks", "endpoint", "rows", "junit", "batteries"],
    "reports": ["reporting", "page", "markdown", "baseline", "prometheus", "glance", "charts",
                "history", "writers", "merge"],
}
ORDER = list(LAYERS)
NOT_FROM = {"reports": {"glue"}}  # a report reads the record, not the session that wrote it


def layer_of(module: str, layers: dict[str, list[str]] = LAYERS) -> str:
    name = module.removeprefix("pytest_frank").lstrip(".")
    best = max(((p, layer) for layer, prefixes in layers.items() for p in prefixes
                if name == p or (p and name.startswith(p + "."))), default=None,
               key=lambda x: len(x[0]))
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    exempt = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                     "typing.TYPE_CHECKING"):
            exempt |= {id(n) for child in node.body for n in ast.walk(child)}
    return exempt


def imports_of(path: Path, package: Path = PACKAGE, types: bool = False) -> list[tuple[str, int]]:
    """(imported pytest_frank module, line) for every import in the file; those under
    TYPE_CHECKING only with `types`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exempt = set() if types else _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("pytest_frank")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_frank"):
            for alias in node.names:  # `from pytest_frank import fleet` imports a module
                sub = f"{node.module}.{alias.name}"
                is_module = (package.parent / (sub.replace(".", "/") + ".py")).exists() or \
                    (package.parent / sub.replace(".", "/")).is_dir()
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


def circles(package: Path = PACKAGE) -> list[list[str]]:
    """Each set of modules that import one another round a circle, every import counted (in
    functions and under TYPE_CHECKING too), with the import lines that close it."""
    ties = {module_name(p, package): (p, imports_of(p, package, types=True))
            for p in sorted(package.rglob("*.py"))}
    graph = {m: {i for i, _ in found if i in ties} for m, (_, found) in ties.items()}
    reach = {m: _reachable(graph, m) for m in graph}
    found = []
    for module in graph:
        ring = sorted(m for m in graph if m in reach[module] and module in reach[m])
        if ring and ring[0] == module:  # each circle once, named from its first module
            found.append([f"{ties[a][0].relative_to(package.parent)}:{line} imports {b}"
                          for a in ring for b, line in ties[a][1] if b in ring])
    return found


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module]
    return seen


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer_of(module_name(path))


def test_a_module_in_no_layer_fails():
    assert layer_of("pytest_frank") == "base" and layer_of("pytest_frank.drivers.vllm") == "runtime"
    with pytest.raises(AssertionError, match="pytest_frank.planted is in no layer"):
        layer_of("pytest_frank.planted")
    with pytest.raises(AssertionError, match="pytest_frank.fleetwood is in no layer"):
        layer_of("pytest_frank.fleetwood")  # a prefix of a name is no prefix of the module


def test_imports_run_one_way():
    wrong = [f"{file}:{line}: {module} ({why})" for file, line, module, why in offences()]
    assert wrong == []


def test_no_import_circles():
    assert circles() == []


def test_the_circles_seen_include_hidden_ones(tmp_path):
    package = tmp_path / "pytest_frank"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pytest_frank.sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from pytest_frank import c\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pytest_frank.a import A\n")
    (package / "d.py").write_text("from pytest_frank import a\n")  # into the circle, not of it
    assert circles(package) == [["pytest_frank/a.py:1 imports pytest_frank.sub.b",
                                 "pytest_frank/c.py:3 imports pytest_frank.a",
                                 "pytest_frank/sub/b.py:2 imports pytest_frank.c"]]
    (package / "c.py").write_text("")
    assert circles(package) == []


def test_the_rule_sees_lazy_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pytest_frank.plugin import SESSION\n"
                      "if TYPE_CHECKING:\n    from pytest_frank.runtime.session import FrankSession\n")
    assert imports_of(source) == [("pytest_frank.plugin", 2)]
