"""The README and docs/ as a reader meets them: the two opening commands exist, every link lands
on a file and heading that exist, every reference page is reachable from the README and leads
back, and every script they tell you to run is there."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a `# comment` there is not a heading)."""
    return FENCE.sub("", page.read_text())


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", prose(page), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page)) if not t.startswith(("http://", "https://", "mailto:"))]


def test_readme_opens_with_the_demo_and_the_test_command() -> None:
    first_block = FENCE.search(README.read_text())
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group().splitlines()[1:-1]]
    assert commands == ["scripts/demo", "scripts/test"]
    for command in commands:
        assert os.access(REPO / command, os.X_OK), f"{command} is not an executable file"
    assert len(README.read_text().splitlines()) <= 300, "the README onboards; reference goes to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_lands_on_a_file_and_heading_that_exist(page: Path) -> None:
    for target in links(page):
        path, _, fragment = target.partition("#")
        landing = (page.parent / path).resolve() if path else page
        assert landing.exists(), f"{page.name}: link to a missing file: {target}"
        if fragment and landing.suffix == ".md":
            assert fragment in anchors(landing), f"{page.name}: link to a missing heading: {target}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_reference_page_is_linked_from_the_readme_and_links_back(page: Path) -> None:
    assert f"docs/{page.name}" in links(README), f"the README does not link {page.name}"
    assert "../README.md" in links(page), f"{page.name} does not link back to the README"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_script_the_docs_name_exists(page: Path) -> None:
    for script in set(re.findall(r"\bscripts/[\w.-]+", page.read_text())):
        assert (REPO / script).is_file(), f"{page.name} names {script}, which does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_issue_numbers(page: Path) -> None:
    assert not re.search(r"\bissues? #?\d+", page.read_text(), re.I), f"{page.name} cites an issue number"
