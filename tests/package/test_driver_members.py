"""How large a driver is against what is read of it: the public members of `Driver` and
`LlamaCppDriver`, those of the capability protocols (drivers/protocols.py), and the distinct
driver members read outside drivers/ (by the package, and by the tests, the battery and bench/).
`python tests/package/test_driver_members.py` prints the figures; the tests hold that every
member of a protocol is one every driver has, and that every member read of a driver outside
drivers/ is a driver's.

A read is an attribute of an expression that names a driver: `driver.x`, `target.driver.x`,
`ctx.driver.x`, `driver_for(...).x`, `DRIVERS[...].x`, and `d.x`, `facts.x`, `routes.x` (the
names the package gives a driver it was handed as a capability or inside a fix's lambda)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script: the suite's support folder, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from checkout import ROOT  # noqa: E402
from pytest_frank.drivers import DRIVERS, Driver, LlamaCppDriver  # noqa: E402

pytestmark = pytest.mark.unit

DRIVERS_DIR = ROOT / "pytest_frank" / "drivers"
HANDED = {"driver", "d", "facts", "routes"}  # a driver's names where it is handed in


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def protocols() -> dict[str, set[str]]:
    """Each capability protocol of drivers/protocols.py and its members (annotated fields,
    methods and properties)."""
    tree = ast.parse((DRIVERS_DIR / "protocols.py").read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Protocol"
                                                  for b in node.bases):
            found[node.name] = {
                item.target.id if isinstance(item, ast.AnnAssign) else item.name
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                or isinstance(item, ast.FunctionDef) and not item.name.startswith("_")}
    return found


def _names_a_driver(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in HANDED or node.id.endswith("driver")
    if isinstance(node, ast.Attribute):
        return node.attr == "driver"
    if isinstance(node, ast.Call):
        return ast.unparse(node.func) in ("driver_for", "drivers.driver_for")
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) == "DRIVERS"
    return False


def reads(files: list[Path]) -> dict[str, set[str]]:
    """member -> the files that read it, of members some driver class has."""
    members = set().union(*(public(cls) for cls in DRIVERS.values()), public(Driver))
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in members \
                    and _names_a_driver(node.value):
                found.setdefault(node.attr, set()).add(str(path))
    return found


def package_outside_drivers() -> list[Path]:
    return sorted(p for p in (ROOT / "pytest_frank").rglob("*.py") if DRIVERS_DIR not in p.parents)


def elsewhere() -> list[Path]:
    """The tests, the battery and bench/: what reads a driver beside the package."""
    return sorted(p for folder in ("tests", "batteries", "bench")
                  for p in (ROOT / folder).rglob("*.py"))


def figures() -> dict[str, int]:
    caps = protocols()
    package = reads(package_outside_drivers())
    everywhere = reads(package_outside_drivers() + elsewhere())
    in_a_protocol = set().union(*caps.values())
    return {
        "Driver public members": len(public(Driver)),
        "LlamaCppDriver public members": len(public(LlamaCppDriver)),
        "protocols": len(caps),
        "protocol members": sum(len(m) for m in caps.values()),
        "distinct members read outside drivers/ (package)": len(package),
        "of them in no protocol": len(set(package) - in_a_protocol),
        "distinct members read outside drivers/ (package, tests, battery, bench)":
            len(everywhere),
        "public members of Driver read nowhere outside drivers/":
            len(public(Driver) - set(everywhere)),
        "public members of LlamaCppDriver read nowhere outside drivers/":
            len(public(LlamaCppDriver) - set(everywhere)),
    }


def test_every_protocol_member_is_every_drivers():
    for protocol, members in protocols().items():
        if protocol == "Wire":  # a part: driver.wire answers it
            for cls in DRIVERS.values():
                assert members <= public(type(cls().wire)), (protocol, cls.__name__)
            continue
        for cls in DRIVERS.values():
            assert members <= public(cls), (protocol, cls.__name__, members - public(cls))


def test_the_reads_counted_are_of_driver_members(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("def f(target, ctx, driver):\n"
                       "    return target.driver.health_path, ctx.driver.flags, driver.start, "
                       "driver_for('vllm').serve_flags, target.timeout, driver.nothing\n")
    assert set(reads([planted])) == {"health_path", "flags", "start", "serve_flags"}


if __name__ == "__main__":
    for label, value in figures().items():
        print(f"{value:>4}  {label}")
    if "-v" in sys.argv:
        unread = public(LlamaCppDriver) - set(reads(package_outside_drivers() + elsewhere()))
        print("read nowhere outside drivers/:", ", ".join(sorted(unread)))
