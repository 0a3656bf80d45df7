"""How large a driver is against what is read of it: the public members of `Driver` and
`LlamaCppDriver`, those of the capability protocols (drivers/protocols.py) and of the parts a
driver holds (`wire`, `template`, `counting`, `launch`, `metrics`: the `Parts` protocol names each part's
type), and the distinct driver members read outside drivers/ (by the package, and by the tests,
the battery and bench/). `python tests/package/test_driver_members.py` prints the figures; the
tests hold that every member of a protocol is one every driver has, that every member the
package reads of a driver outside drivers/ is a protocol's and every member it reads of a part
is that part's type's, and pin the sizes (a driver that grows, or a read that bypasses the
protocols, changes a figure here on purpose).

A read is an attribute of an expression that names a driver: `driver.x`, `target.driver.x`,
`ctx.driver.x`, `driver_for(...).x`, `DRIVERS[...].x`, and `d.x`, `facts.x`, `routes.x` (the
names the package gives a driver it was handed as a capability or inside a fix's lambda); a
part's read is `<one of those>.<part>.x`."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script: the suite's support folder, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from checkout import ROOT  # noqa: E402
from pytest_frank.drivers import DRIVERS, Driver, LlamaCppDriver  # noqa: E402
from pytest_frank.drivers.counting import Counting  # noqa: E402
from pytest_frank.drivers.launch import Launch  # noqa: E402
from pytest_frank.drivers.metrics import Metrics  # noqa: E402
from pytest_frank.drivers.template import Template  # noqa: E402

pytestmark = pytest.mark.unit

DRIVERS_DIR = ROOT / "pytest_frank" / "drivers"
HANDED = {"driver", "d", "facts", "routes"}  # a driver's names where it is handed in
# The pinned figures (test_the_driver_is_as_small_as_what_is_read_of_it): Driver's and
# LlamaCppDriver's public members, the distinct members the package reads outside drivers/.
DRIVER, LLAMA, READ = 45, 48, 48


def public(cls: type) -> set[str]:
    """The public members of a class, and for a driver those each one sets as it is made
    (its `wire`)."""
    made = vars(cls()) if issubclass(cls, Driver) else {}
    return {name for name in [*dir(cls), *made] if not name.startswith("_")}


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


def parts() -> dict[str, set[str]]:
    """Each part a driver holds (the `Parts` protocol's annotated fields) and the members of
    its type: the `Wire` protocol's, or the public members of the part's base class."""
    caps, tree = protocols(), ast.parse((DRIVERS_DIR / "protocols.py").read_text(encoding="utf-8"))
    types = {"Template": Template, "Counting": Counting, "Launch": Launch, "Metrics": Metrics}
    parts_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Parts")
    found = {}
    for item in parts_class.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            kind = ast.unparse(item.annotation)
            found[item.target.id] = caps[kind] if kind in caps else public(types[kind])
    return found


@functools.lru_cache(maxsize=None)
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _members() -> set[str]:
    return set().union(*(public(cls) for cls in DRIVERS.values()), public(Driver))


def reads(files: list[Path]) -> dict[str, set[str]]:
    """member -> the files that read it, of members some driver class has."""
    members, found = _members(), {}
    for path in files:
        for node in _nodes(path):
            if isinstance(node, ast.Attribute) and node.attr in members \
                    and _names_a_driver(node.value):
                found.setdefault(node.attr, set()).add(str(path))
    return found


def part_reads(files: list[Path]) -> dict[str, set[str]]:
    """"<part>.<member>" -> the files that read it: an attribute of a driver's part."""
    held, found = set(parts()), {}
    for path in files:
        for node in _nodes(path):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr in held and _names_a_driver(node.value.value):
                found.setdefault(f"{node.value.attr}.{node.attr}", set()).add(str(path))
    return found


def package_outside_drivers() -> list[Path]:
    return sorted(p for p in (ROOT / "pytest_frank").rglob("*.py") if DRIVERS_DIR not in p.parents)


def elsewhere() -> list[Path]:
    """The tests, the battery and bench/: what reads a driver beside the package."""
    return sorted(p for folder in ("tests", "batteries", "bench")
                  for p in (ROOT / folder).rglob("*.py"))


def unprotocolled() -> set[str]:
    """Members the package reads of a driver outside drivers/ that no protocol names."""
    return set(reads(package_outside_drivers())) - set().union(*protocols().values())


def off_part() -> set[str]:
    """"<part>.<member>" reads outside drivers/ of a member the part's type does not have."""
    held = parts()
    return {read for read in part_reads(package_outside_drivers())
            if read.split(".")[1] not in held[read.split(".")[0]]}


def figures() -> dict[str, int]:
    caps, held = protocols(), parts()
    package = reads(package_outside_drivers())
    everywhere = reads(package_outside_drivers() + elsewhere())
    return {
        "Driver public members": len(public(Driver)),
        "LlamaCppDriver public members": len(public(LlamaCppDriver)),
        "protocols": len(caps),
        "protocol members": sum(len(m) for m in caps.values()),
        "parts": len(held),
        "part members": sum(len(m) for m in held.values()),
        "distinct members read outside drivers/ (package)": len(package),
        "of them in no protocol": len(unprotocolled()),
        "distinct part members read outside drivers/ (package)":
            len(part_reads(package_outside_drivers())),
        "of them not the part's": len(off_part()),
        "distinct members read outside drivers/ (package, tests, battery, bench)":
            len(everywhere),
        "public members of Driver read nowhere outside drivers/":
            len(public(Driver) - set(everywhere)),
        "public members of LlamaCppDriver read nowhere outside drivers/":
            len(public(LlamaCppDriver) - set(everywhere)),
    }


def test_every_protocol_member_is_every_drivers():
    held = parts()
    for protocol, members in protocols().items():
        for cls in DRIVERS.values():
            if protocol == "Wire":  # a part: driver.wire answers it
                assert members <= public(type(cls().wire)), (protocol, cls.__name__)
            else:
                assert members <= public(cls), (protocol, cls.__name__, members - public(cls))
    for part, members in held.items():  # each driver's part has its type's members
        for cls in DRIVERS.values():
            assert members <= public(type(getattr(cls(), part))), (part, cls.__name__)


def test_every_member_read_outside_drivers_is_a_protocols_and_every_part_read_its_parts():
    assert unprotocolled() == set(), "a driver member read outside drivers/ in no protocol " \
        "(drivers/protocols.py): name it in the capability its readers need, or move it to a part"
    assert off_part() == set()


def test_the_driver_is_as_small_as_what_is_read_of_it():
    # Pinned: a member added to Driver, or a new read of one, changes these on purpose (before
    # the parts: Driver 82 public members, LlamaCppDriver 85, 77 read outside drivers/, 41 of
    # them in no protocol).
    assert (len(public(Driver)), len(public(LlamaCppDriver))) == (DRIVER, LLAMA)
    assert len(reads(package_outside_drivers())) == READ


def test_the_reads_counted_are_of_driver_members(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("def f(target, ctx, driver):\n"
                       "    return target.driver.health_path, ctx.driver.flags, driver.start, "
                       "driver_for('vllm').launch.serve_flags, target.timeout, driver.nothing, "
                       "driver.template.served, driver.wire.api, driver.template.nothing\n")
    assert set(reads([planted])) == {"health_path", "flags", "start", "launch", "template",
                                     "wire"}
    assert set(part_reads([planted])) == {"launch.serve_flags", "template.served", "wire.api",
                                          "template.nothing"}


if __name__ == "__main__":
    for label, value in figures().items():
        print(f"{value:>4}  {label}")
    if "-v" in sys.argv:
        unread = public(LlamaCppDriver) - set(reads(package_outside_drivers() + elsewhere()))
        print("read nowhere outside drivers/:", ", ".join(sorted(unread)))
