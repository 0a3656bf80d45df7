"""The docs site (mkdocs.yml, docs/) builds strictly, and its generated tables name every
fleet.yaml key of fleet.schema.json and every registered claim, each with its page."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkout import ROOT
from pytest_frank.claims import BUILT_IN, CLAIMS

pytestmark = pytest.mark.real

SCHEMA = json.loads((ROOT / "pytest_frank" / "fleet" / "fleet.schema.json").read_text())


def load_gen():
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "docs" / "gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def properties(node, found):
    """Every (name, definition) under `properties` anywhere in the schema, but in the conditions
    of an `if` (vram's `source: command` needs a `command`), which declare no key."""
    if isinstance(node, dict):
        for name, value in node.get("properties", {}).items():
            found.append((name, value))
        for key, value in node.items():
            if key != "if":
                properties(value, found)
    elif isinstance(node, list):
        for value in node:
            properties(value, found)
    return found


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        reason = "mkdocs and mkdocs-material are not installed (pip install '.[docs]')"
        if os.environ.get("CI", "").lower() == "true":  # the test extra carries them: a broken CI
            pytest.fail(reason)
        pytest.skip(reason)
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def pages(site: Path) -> str:
    return "\n".join(p.read_text() for p in site.rglob("*.html"))


def test_every_schema_key_has_a_description():
    missing = sorted({name for name, value in properties(SCHEMA, []) if not value.get("description")})
    assert not missing, f"fleet.schema.json: keys without a description: {missing}"


def test_the_generated_tables_name_every_schema_key():
    gen = load_gen()
    sections = [*gen.SECTIONS, *(f"expect.{claim}" for claim in BUILT_IN - {"alias"})]
    tables = "\n".join(gen.keys_table(name) for name in sections)
    written = {line.split("`")[1].rsplit(".", 1)[-1] for line in tables.splitlines()
               if line.startswith("| `")}
    assert {name for name, _ in properties(SCHEMA, [])} <= written
    with pytest.raises(ValueError, match="no keys section 'nonsense'"):
        gen.render("<!-- frank:keys nonsense -->")


def test_the_key_tables_are_written_in_the_pages_as_the_schema_says():
    """The tables read whole in the checkout (a repository's page shows the Markdown), and
    match fleet.schema.json and the claim registry: a schema change is written into them with
    `python docs/gen.py`."""
    gen = load_gen()
    stale = [str(page.relative_to(ROOT)) for page in gen.pages()
             if gen.render(page.read_text()) != page.read_text()]
    assert not stale, f"run `python docs/gen.py`: the tables of {', '.join(stale)} are stale"
    fleet = (ROOT / "docs" / "fleet.md").read_text()
    assert "| `url` | string |" in fleet and "| `launch.model` |" in fleet
    # an edited table is stale; a marker with no table yet is filled in
    edited = fleet.replace("| `url` | string |", "| `url` | number |")
    assert gen.render(edited) == fleet
    assert gen.render("<!-- frank:keys regression -->").count("| `regression.tok_s_drop` |") == 1


def test_the_docs_build_strictly_with_every_key_and_claim(site):
    built = pages(site)
    gen = load_gen()
    for name in [*gen.SECTIONS, *(f"expect.{claim}" for claim in BUILT_IN - {"alias"})]:
        for line in gen.keys_table(name).splitlines()[2:]:
            path = line.split("`")[1]
            assert f"<code>{path}</code>" in built, f"{path} is in no page of the built docs"
    claims = (site / "claims" / "index.html").read_text()
    for name in BUILT_IN:
        assert (site / "claims" / name / "index.html").exists(), f"no docs page for claim {name}"
        assert html.escape(CLAIMS[name], quote=False) in claims
        assert f'href="{name}/"' in claims
    assert "<!-- frank:" not in built


def test_a_broken_link_fails_the_build(tmp_path):
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "ci.md"
    page.write_text(page.read_text() + "\nSee [the old page](nowhere.md).\n")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "nowhere.md" in done.stdout + done.stderr


def test_the_readme_links_into_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert "docs/index.md" in links
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"README.md links to missing docs pages: {missing}"
    assert len(readme.splitlines()) <= 200, "the README is the front door: the manual is docs/"


def test_the_readme_says_what_the_tests_cost_and_the_quick_tier():
    """Beside the test command (CI runs it word for word, so it stays as it is): its time on 2
    cores, and a tier to run while editing, a marker pyproject.toml declares."""
    section = (ROOT / "README.md").read_text().split("\n## Two commands", 1)[1].split("\n## ", 1)[0]
    after = section.split(".venv/bin/pytest -q -n 3\n```", 1)[1]
    assert re.search(r"about \d+ minutes on 2 cores", after), after
    tier = re.search(r"`\.venv/bin/pytest -q -m (\w+)`", after)
    assert tier, after
    assert f'"{tier.group(1)}: ' in (ROOT / "pyproject.toml").read_text()
    assert "```" not in after, "a code block here is a third command CI would run"
