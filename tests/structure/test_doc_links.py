"""The documentation's internal links, the site's page list and every test file a text names point at
files that exist.

``mkdocs build --strict`` (in ``.ci/run``) checks the site too, but needs the ``docs`` extra; these
checks need nothing beyond the standard library and PyYAML, so the default suite runs them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def relative_links(text: str) -> list[tuple[int, str]]:
    """(line number, target without its #anchor) of every relative link outside code."""
    links = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(1)
            if _EXTERNAL.match(target) or target.startswith("#"):
                continue
            links.append((number, target.split("#", 1)[0]))
    return links


def test_the_link_finder_sees_links_and_skips_code():
    text = "\n".join([
        "see [a](docs/a.md#part) and ![fig](b.png) and [web](https://x.org) and [here](#top)",
        "`[not](a link.md)` but [yes](c/d.md)",
        "```bash",
        "[inside](a fence.md)",
        "```",
    ])
    assert relative_links(text) == [(1, "docs/a.md"), (1, "b.png"), (2, "c/d.md")]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_an_existing_file(path):
    broken = [f"{path.relative_to(ROOT)}:{number}: {target}"
              for number, target in relative_links(path.read_text(encoding="utf-8"))
              if not (path.parent / target).exists()]
    assert not broken, f"links to missing files: {broken}"


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [name for item in node for name in _nav_files(item)]
    if isinstance(node, dict):
        return [name for value in node.values() for name in _nav_files(value)]
    return []


def test_the_site_nav_lists_every_docs_page_and_only_existing_ones():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_files(config["nav"])
    assert len(nav) == len(set(nav)), "a page is listed twice in mkdocs.yml's nav"
    missing = [name for name in nav if not (DOCS / name).is_file()]
    assert not missing, f"mkdocs.yml's nav names missing pages: {missing}"
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not pages - set(nav), f"docs pages missing from mkdocs.yml's nav: {sorted(pages - set(nav))}"


def test_the_readme_is_a_front_page_that_links_every_top_level_docs_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 165  # a front page: set-up, quick start, the headline tables, links
    assert "python -m pytest -q" in text  # .ci/run runs the same test command
    linked = {target for _, target in relative_links(text)}
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert not pages - linked, f"docs pages the README does not link: {sorted(pages - linked)}"


_TEST_FILE = re.compile(r"\btests/[\w/]+\.py\b")


def texts_naming_tests() -> list[Path]:
    """The README, the docs, the build files and every Python file of the project (the CHANGELOG is
    history: it names files as they were)."""
    texts = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml", *sorted(DOCS.rglob("*.md"))]
    for folder in ("lyra_gym", "baselines", "agents", "benchmarks", "tools", "examples", "tests"):
        texts += sorted((ROOT / folder).rglob("*.py"))
    return [*texts, ROOT / "train.py"]


def test_every_test_file_a_text_names_exists():
    """A test moved or renamed leaves no text pointing at its old path."""
    stale = [f"{path.relative_to(ROOT)}: {name}" for path in texts_naming_tests()
             for name in sorted(set(_TEST_FILE.findall(path.read_text(encoding="utf-8"))))
             if not (ROOT / name).is_file()]
    assert not stale, f"texts naming test files that do not exist: {stale}"
