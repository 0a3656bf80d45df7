"""The docs' generated tables, from the package itself so they cannot drift: the fleet.yaml key
tables from pytest_frank/fleet/fleet.schema.json, the claim table from the claim registry, the test
table from each claim's declared checks (its `CLAIM`'s `tests`), the figures table from the
figure registry (pytest_frank/base/figures.py). A page holds each table between a marker line,
`<!-- frank:keys SECTION -->`, `<!-- frank:claims -->`, `<!-- frank:tests -->` or
`<!-- frank:figures -->`, and its closing `<!-- /frank:keys -->` (`/frank:claims`, ...), so it
reads whole where the Markdown is read (a repository's page). `python docs/gen.py` writes them into the
pages, and what the package declares into two files: the schema's `$defs.expect` from the claims
(each claim's `CLAIM` and the `option`s of its Options, pytest_frank.claims), its endpoint's
`engine` list from the driver registry (pytest_frank.drivers.DRIVERS) and its `regression` block
from the figure registry's TOLERANCES, and mkdocs.yml's claim pages from the claims.
tests/package/test_docs.py fails on a page whose table no longer matches, tests/package/test_contract.py
on a
stale `$defs.expect`, engine list or nav, tests/package/test_figures.py on a stale regression block;
mkdocs runs
this as a hook (mkdocs.yml `hooks:`) that builds each table afresh and leaves the markers out of
the site."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

# A marker line, the table it holds (rows start with "|") and its closing marker; a marker with
# no table yet is filled in.
MARKER = re.compile(r"^<!-- frank:(keys|claims|tests|figures) ?(\S*) -->(?:\n\|.*)*"
                    r"(?:\n<!-- /frank:\1 -->)?$", re.M)
DOCS = Path(__file__).resolve().parent
# The sections a keys table can show: a schema node and the prefix its keys are written with.
SECTIONS = {"top": ("#", ""), "endpoint": ("#/$defs/endpoint", ""),
            "launch": ("#/$defs/launch", "launch."), "serve": ("#/$defs/serve", "serve."),
            "sampling": ("#/$defs/sampling", "sampling."),
            "regression": ("#/$defs/regression", "regression.")}


def schema() -> dict[str, Any]:
    return json.loads(resources.files("pytest_frank.fleet").joinpath("fleet.schema.json").read_text())


def node_at(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    node = root
    for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else []:
        node = node[part]
    return node


def section(name: str, root: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if name in SECTIONS:
        ref, prefix = SECTIONS[name]
        return node_at(ref, root), prefix
    if name.startswith("expect."):
        claim = name.split(".", 1)[1]
        return root["$defs"]["expect"]["properties"][claim], f"expect.{claim}."
    raise ValueError(f"docs: no keys section {name!r} (known: {', '.join(SECTIONS)}, expect.CLAIM)")


def kind(node: dict[str, Any]) -> str:
    """A key's type as a reader writes it: `true`, a number, one of some values, a mapping."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return {"seconds": "seconds", "effort_map": "mapping"}.get(name, "mapping")
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    types = node.get("type")
    if types is None and ("oneOf" in node or "anyOf" in node):
        types = [kind(v) for v in node.get("oneOf", node.get("anyOf", []))]
    names = {"object": "mapping", "array": "list", "boolean": "true/false"}
    if isinstance(types, list):
        return " or ".join(dict.fromkeys(names.get(str(t), str(t)) for t in types))
    return names.get(str(types), str(types or "any"))


def keys(node: dict[str, Any], prefix: str, root: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key path, type, description) of every key under `node`, nested keys after their parent.
    Keys behind another section's $ref (launch, serve, ...) are that section's own table."""
    rows: list[tuple[str, str, str]] = []
    for sub, name_prefix in nested(node, root):
        for key, value in sub.get("properties", {}).items():
            path = f"{prefix}{name_prefix}{key}"
            if any(row[0] == path for row in rows):
                continue
            rows.append((path, kind(value), value.get("description", "")))
            if "$ref" not in value or value["$ref"].endswith("effort_map"):
                rows.extend(keys(value, f"{path}.", root))
    return rows


def nested(node: dict[str, Any], root: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The schema nodes that hold a key's properties: itself, its alternatives, its list items
    and a map's values (the clients claim: `[pi, {claude_code: {...}}]`)."""
    found: list[tuple[dict[str, Any], str]] = []
    stack: list[tuple[Any, str]] = [(node, "")]
    while stack:
        current, name_prefix = stack.pop(0)
        if not isinstance(current, dict):
            continue
        if "$ref" in current and current["$ref"].endswith("effort_map"):
            current = node_at(current["$ref"], root)
        found.append((current, name_prefix))
        for alternative in current.get("oneOf", []) + current.get("anyOf", []):
            stack.append((alternative, name_prefix))
        for key in ("items", "then", "else"):
            stack.append((current.get(key), name_prefix))
        values = current.get("additionalProperties")
        if isinstance(values, dict) and "properties" in values:
            stack.append((values, "NAME."))  # the clients claim: a client's name
    return found


def keys_table(name: str, root: dict[str, Any] | None = None) -> str:
    root = root or schema()
    node, prefix = section(name, root)
    rows = keys(node, prefix, root)
    if name.startswith("expect."):  # the claim's own key first: `true`, `false` or its options
        rows.insert(0, (name, kind(node), node.get("description", "")))
    lines = ["| key | type | meaning |", "|---|---|---|"]
    lines += [f"| `{path}` | {kind_} | {cell(description)} |" for path, kind_, description in rows]
    return "\n".join(lines)


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def asked_when(name: str, claim: Any) -> str:
    return ("always, unless `expect: {%s: false}`" % name if claim.always
            else f"`{claim.asked_by}:` is set" if claim.asked_by
            else f"`expect.{name}` is set")


def claims_table() -> str:
    from pytest_frank.claims import built_in

    lines = ["| claim (marker, `expect:` key) | what it proves | asked when |", "|---|---|---|"]
    for name, claim in built_in().items():
        page = claim.page.removeprefix("claims/")  # the table is on claims/index.md
        lines.append(f"| [`{name}`]({page}) | {claim.about} | {asked_when(name, claim)} |")
    return "\n".join(lines)


def test_cell(check: Any) -> str:
    """A check's test id as the report writes it, and when it runs beyond its claim being asked."""
    case = f"-{check.per or 'CASE'}" if check.cases else ""
    notes = [n for n in (check.when, "also marked `offline`" if check.offline else "") if n]
    return f"`{check.test}[NAME{case}]`" + (f" ({'; '.join(notes)})" if notes else "")


def tests_table() -> str:
    """Each claim's tests, from the checks its package declares (claims/<name>/), in its
    `tests` order: the marker they carry, their ids, and when the claim is asked."""
    from pytest_frank.claims import built_in

    lines = ["| marker | test | asked when |", "|---|---|---|"]
    for name, claim in built_in().items():
        tests = ", ".join(test_cell(check) for check in claim.checks())
        lines.append(f"| `{name}` | {cell(tests)} | {asked_when(name, claim)} |")
    return "\n".join(lines)


def figures_table() -> str:
    """Each figure of the registry (pytest_frank/base/figures.py): what the reports do with it."""
    from pytest_frank.base.figures import AT, FIGURES, TOLERANCES

    lines = ["| figure (`--frank-json`) | unit | better | against a baseline | chart | trend "
             "| Prometheus series |", "|---|---|---|---|---|---|---|"]
    for f in FIGURES.values():
        name = f"{f.name}{AT}N" if f.levelled else f.name
        compared = "-" if f.tolerance is None else \
            f"`regression.{f.tolerance}` (default {TOLERANCES[f.tolerance].default:g})"
        series = "-" if f.metric is None else f"`{f.metric}`" + \
            (" (label `in_flight`: N)" if f.levelled else "") + (" (bytes)" if f.factor != 1 else "")
        lines.append(f"| `{name}` | {f.unit or 'ratio'} | {'higher' if f.higher_better else 'lower'}"
                     f" | {compared} | {cell(f.chart.title) if f.chart else '-'} "
                     f"| {cell(f.trend) if f.trend else '-'} | {series} |")
    return "\n".join(lines)


def render(markdown: str, markers: bool = True) -> str:
    """The page with each marked table written afresh; without `markers`, the tables alone
    (the site's page)."""
    def table(match: re.Match[str]) -> str:
        made = (keys_table(match[2]) if match[1] == "keys" else
                figures_table() if match[1] == "figures" else
                tests_table() if match[1] == "tests" else claims_table())
        if not markers:
            return made
        opening = f"<!-- frank:{match[1]}{' ' + match[2] if match[2] else ''} -->"
        return f"{opening}\n{made}\n<!-- /frank:{match[1]} -->"
    return MARKER.sub(table, markdown)


SCHEMA = Path(__file__).resolve().parent.parent / "pytest_frank" / "fleet" / "fleet.schema.json"


def with_regression(raw: dict[str, Any]) -> dict[str, Any]:
    """The schema with its `$defs.regression` as figures.TOLERANCES declares it."""
    from pytest_frank.base.figures import regression_schema

    return {**raw, "$defs": {**raw["$defs"], "regression": regression_schema()}}


def with_expect(raw: dict[str, Any]) -> dict[str, Any]:
    """The schema with its `$defs.expect` as the claims declare it (each claim's `CLAIM` and the
    `option`s of its Options, pytest_frank.claims)."""
    from pytest_frank.claims import expect_schema

    return {**raw, "$defs": {**raw["$defs"], "expect": expect_schema()}}


def with_engines(raw: dict[str, Any]) -> dict[str, Any]:
    """The schema with its endpoint's `engine` list as the driver registry holds it
    (pytest_frank.drivers.DRIVERS, in its order); fleet.ENGINES reads it back."""
    from pytest_frank.drivers import DRIVERS

    names = ", ".join(f"`{name}`" for name in DRIVERS)
    engine = {"enum": list(DRIVERS), "description": f"Which driver speaks to it: {names}. "
              "Required, `llamacpp` with `launch:`."}
    endpoint = raw["$defs"]["endpoint"]
    properties = {k: engine if k == "engine" else v for k, v in endpoint["properties"].items()}
    return {**raw, "$defs": {**raw["$defs"], "endpoint": {**endpoint, "properties": properties}}}


def generated(raw: dict[str, Any]) -> dict[str, Any]:
    """The schema with every block written from the package: the engines, the claims' and the
    regression keys."""
    return with_engines(with_expect(with_regression(raw)))


NAV = re.compile(r"^( *)# frank:claims\n.*?^ *# /frank:claims$", re.M | re.S)
MKDOCS = DOCS.parent / "mkdocs.yml"


def nav(config: str) -> str:
    """mkdocs.yml with the claims' pages in the nav, in the claims' order, between
    `# frank:claims` and `# /frank:claims` (a YAML comment each, so the file stays mkdocs')."""
    from pytest_frank.claims import built_in

    def pages(match: re.Match[str]) -> str:
        indent = match[1]
        lines = [f"{indent}# frank:claims"]
        lines += [f"{indent}- {c.name}: {c.page}" for c in built_in().values()]
        return "\n".join([*lines, f"{indent}# /frank:claims"])
    return NAV.sub(pages, config)


def schema_text(raw: dict[str, Any]) -> str:
    return json.dumps(raw, indent=2, ensure_ascii=False) + "\n"


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown, markers=False)


if __name__ == "__main__":  # python docs/gen.py: the schema's blocks, the nav, then the tables
    current = SCHEMA.read_text(encoding="utf-8")
    if schema_text(generated(json.loads(current))) != current:
        SCHEMA.write_text(schema_text(generated(json.loads(current))), encoding="utf-8")
        print("wrote the engines, the claims' and the regression keys of "
              f"{SCHEMA.relative_to(DOCS.parent)}")
    config = MKDOCS.read_text(encoding="utf-8")
    if nav(config) != config:
        MKDOCS.write_text(nav(config), encoding="utf-8")
        print("wrote the claims' pages into mkdocs.yml's nav")
    for page in pages():
        text = page.read_text(encoding="utf-8")
        if render(text) != text:
            page.write_text(render(text), encoding="utf-8")
            print(f"wrote the tables of {page.relative_to(DOCS.parent)}")
