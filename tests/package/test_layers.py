"""The package's layers import one way: each module imports only from its own layer and the layers
before it, lazy imports inside functions included (imports under `if TYPE_CHECKING:` are types
only and exempt). The reports read the run record alone, never the pytest glue. No modules
import each other in a circle, within a layer too, whatever kind of import ties it (one inside
a function or under TYPE_CHECKING only hides a circle: the two still need each other), and no
folders do either, lazy imports included (a layer's folders, the engines' five, stand in an
order of their own)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import pytest_frank

pytestmark = pytest.mark.unit

PACKAGE = Path(pytest_frank.__file__).parent

# Layer order, first to last: each layer is its folders, and a module's layer is the folder it sits
# in under pytest_frank/ (its first name there). Only the package's face sits at the root.
LAYERS = {
    "base": ["base"],  # helpers that import nothing of the package beyond each other
    "config": ["fleet"],  # fleet.yaml, its schema and its usage errors
    "transport": ["transport"],  # capped HTTP, the reply shapes, /metrics: no engine, no claim
    "outcome": ["outcome"],  # what a probe saw and how a test ends: every later layer speaks it
    # each engine's facts (drivers) and what they read: model files, memory, servers, serve files
    "engines": ["drivers", "gguf", "vram", "local", "serve"],
    "runtime": ["runtime"],  # the endpoint under test, the probe phase, one request path
    # claims: each claim and the judge contract they are written to; init: a fleet file
    "claims": ["claims", "init"],
    "record": ["record"],  # the run record: the glue writes it, the reports read it
    "glue": ["plugin", "batteries"],  # the pytest plugin and the battery it runs
    "reports": ["reports"],
    # the public API (`__init__`, whose names import lazily) and the `frank` command
    "face": ["", "cli"],
}
ORDER = list(LAYERS)
NOT_FROM = {"reports": {"glue"}}  # a report reads the record, not the session that wrote it


def layer_of(module: str, layers: dict[str, list[str]] = LAYERS) -> str:
    name = module.removeprefix("pytest_frank").lstrip(".")
    top = name.split(".", 1)[0]
    found = [layer for layer, folders in layers.items() if top in folders]
    if not found or (name != top and top in layers["face"]):
        raise AssertionError(f"{module} is in no layer: put it in a layer's folder (LAYERS)")
    return found[0]


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
    return _imports(path.read_text(encoding="utf-8"), package, types)


@functools.lru_cache(maxsize=None)
def _imports(source: str, package: Path, types: bool) -> list[tuple[str, int]]:
    """imports_of's answer for a module's text, found once for the rules that each walk the
    whole package (a planted file rewritten is read again)."""
    tree = ast.parse(source)
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


def folder_of(module: str) -> str:
    """The folder a module sits in under pytest_frank/ ("" for the package's face)."""
    return module.removeprefix("pytest_frank").lstrip(".").split(".", 1)[0]


def folder_circles(package: Path = PACKAGE) -> list[list[str]]:
    """Each set of folders that import one another round a circle, imports inside functions
    counted (those under TYPE_CHECKING are types only, as the layer rule reads them), with the
    import lines that cross between them: a layer's folders stand in an order of their own (the
    drivers read vram's memory model, so vram never reads a driver), and a loop of lazy imports
    between modules that form no circle of modules still ties the folders together."""
    ties: dict[str, list[tuple[Path, int, str]]] = {}
    for path in sorted(package.rglob("*.py")):
        here = folder_of(module_name(path, package))
        for imported, line in imports_of(path, package):
            there = folder_of(imported)
            if there != here:
                ties.setdefault(here, []).append((path, line, there))
    graph = {folder: {there for _, _, there in found} for folder, found in ties.items()}
    for folder in {t for found in graph.values() for t in found}:
        graph.setdefault(folder, set())
    reach = {folder: _reachable(graph, folder) for folder in graph}
    found = []
    for folder in sorted(graph):
        ring = sorted(f for f in graph if f in reach[folder] and folder in reach[f])
        if ring and ring[0] == folder:
            found.append([f"{path.relative_to(package.parent)}:{line} imports {there}/"
                          for f in ring for path, line, there in ties.get(f, []) if there in ring])
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


def test_each_layer_is_its_folders():
    """The root holds the face alone; every other module is in a folder, and each folder is
    a layer's (or the battery, which an install maps in)."""
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    listed = {f for fs in LAYERS.values() for f in fs if f not in LAYERS["face"]}
    assert folders - {"batteries"} == listed - {"batteries"}
    flat = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", *LAYERS["face"]}
    assert not flat, f"modules at the package root: {sorted(flat)}: put each in its layer's folder"


def test_a_module_in_no_layer_fails():
    assert layer_of("pytest_frank") == "face" and layer_of("pytest_frank.drivers.vllm") == "engines"
    assert layer_of("pytest_frank.outcome.verdict") == "outcome"
    with pytest.raises(AssertionError, match="pytest_frank.planted is in no layer"):
        layer_of("pytest_frank.planted")
    with pytest.raises(AssertionError, match="pytest_frank.fleetwood is in no layer"):
        layer_of("pytest_frank.fleetwood")  # a prefix of a name is no prefix of the module
    with pytest.raises(AssertionError, match="pytest_frank.http is in no layer"):
        layer_of("pytest_frank.http")  # a moved module's old path, which only warns now
    with pytest.raises(AssertionError, match="pytest_frank.cli.x is in no layer"):
        layer_of("pytest_frank.cli.x")


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


def test_no_import_circles_between_folders():
    assert folder_circles() == []


def test_a_circle_of_folders_is_seen_through_lazy_imports(tmp_path):
    """drivers/ -> serve/ -> vram/ -> drivers/, two of its imports inside functions and no
    circle of modules: the folders still need each other."""
    package = tmp_path / "pytest_frank"
    for folder in ("drivers", "serve", "vram"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "drivers" / "llamacpp.py").write_text("from pytest_frank.serve import flags\n")
    (package / "serve" / "flags.py").write_text("")
    (package / "serve" / "gate.py").write_text("def f():\n    from pytest_frank.vram import plan\n")
    (package / "vram" / "plan.py").write_text("")
    (package / "vram" / "preflight.py").write_text(
        "def g():\n    from pytest_frank.drivers import llamacpp\n")
    assert circles(package) == []
    assert folder_circles(package) == [[
        "pytest_frank/drivers/llamacpp.py:1 imports serve/",
        "pytest_frank/serve/gate.py:2 imports vram/",
        "pytest_frank/vram/preflight.py:2 imports drivers/"]]
    (package / "vram" / "preflight.py").write_text("")
    assert folder_circles(package) == []


def test_the_rule_sees_lazy_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pytest_frank.plugin import SESSION\n"
                      "if TYPE_CHECKING:\n    from pytest_frank.runtime.session import FrankSession\n")
    assert imports_of(source) == [("pytest_frank.plugin", 2)]


def shadowed(package: Path = PACKAGE) -> list[str]:
    """Names a package's __init__ defines that one of its own modules also bears: importing the
    module rebinds the name on the package to the module (a fixture `endpoint` beside a module
    `endpoint.py` vanished from the plugin so)."""
    found = []
    for init in sorted(package.rglob("__init__.py")):
        modules = {p.stem for p in init.parent.glob("*.py")} | \
            {p.name for p in init.parent.iterdir() if (p / "__init__.py").is_file()}
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
                [t.id for t in node.targets if isinstance(t, ast.Name)] \
                if isinstance(node, ast.Assign) else []
            found += [f"{init.relative_to(package.parent)}:{node.lineno} {name}"
                      for name in names if name in modules]
    return found


def test_no_name_of_a_package_is_one_of_its_modules(tmp_path):
    assert shadowed() == []
    planted = tmp_path / "pytest_frank" / "plugin"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text("import pytest\n\n@pytest.fixture\ndef endpoint():\n    pass\n")
    (planted / "endpoint.py").write_text("")
    assert shadowed(tmp_path / "pytest_frank") == ["pytest_frank/plugin/__init__.py:4 endpoint"]
