"""README.md and docs/*.md (issue 28 item 4): every relative link and image resolves, and every
repository path the README and its playbook pages name in backticks exists, so moving a file cannot
leave the docs pointing at nothing. (performance.md and DEVELOPING.md also name files of
experiments that were not kept: only their links are checked.)"""

from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOTES = {"performance.md", "DEVELOPING.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")
# `roles/bench/README.md`, `tests/gpu/run.sh netns`: the first word, when it is a repository path.
CODE_PATH = re.compile(r"`((?:roles|tests|docs|files|inventory|plugins|playbooks|group_vars)/[^`\s]*)")


def _targets(page):
    text = page.read_text()
    for match in LINK.finditer(text):
        target = (match.group(1) or match.group(2)).split("#")[0]
        if target and not re.match(r"[a-z]+:", target):
            yield target, page.parent / target
    for match in CODE_PATH.finditer(text) if page.name not in NOTES else ():
        path = match.group(1).rstrip(".,:;")
        if not re.search(r"[<>*]|RUN|JOB|mycluster|gpu_nodes\.yml", path):
            yield path, REPO / path


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_link_and_path_resolves(page):
    missing = sorted({name for name, path in _targets(page) if not path.exists()})
    assert missing == [], f"{page.relative_to(REPO)} names what is not there: {missing}"


def test_the_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[gone](gone.md) ![pic](img/none.png) `roles/no_such_role/README.md`\n")
    assert {name for name, path in _targets(page) if not path.exists()} == {
        "gone.md",
        "img/none.png",
        "roles/no_such_role/README.md",
    }
