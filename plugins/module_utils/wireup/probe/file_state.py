"""What the wireup_file_state module answers (plugins/modules/wireup_file_state.py): the one read
of a node's files and globs that cuda_repo.plan and nccl.plan decide from. The TypedDicts are what
the roles' YAML may read (tests/unit/test_plan_types.py checks them). Standard library only: the
module imports this on the node.
"""

from __future__ import annotations

from typing import TypedDict


class PathState(TypedDict, total=False):
    """One path: only ``exists`` for a missing one; ``sha256`` and ``content`` for a regular file
    (``content`` None when it is not UTF-8 text or larger than max_bytes); ``error`` when a regular
    file could not be read."""

    exists: bool
    type: str  # file, directory or other
    mode: str  # four octal digits
    owner: str
    group: str
    size: int
    sha256: str | None
    content: str | None
    error: str


class FileState(TypedDict):
    """The module's answer: each path's state, each glob's matching paths (sorted)."""

    changed: bool
    files: dict[str, PathState]
    globs: dict[str, list[str]]
