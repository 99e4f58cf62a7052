"""The nccl-tests parser gives the same answer on every capture we have (issue 39).

`bench_output.parse_runs` and `assess` were made faster; what they return must not move by one
figure. tests/fixtures/nccltests/parse_digests.json holds, for every text capture under
tests/fixtures (sysfs/, golden/ and the READMEs left out: no command output; /work/shared/fixtures/h200x2's
outputs are the same files as tests/fixtures/h200x2's), the SHA-256 (its first 16 hex digits) of what
the parser of e9a5dfe (before the fast path) returned: `assess(text)` and `parse_runs(text)` (or
its ValueError). For each capture that holds an nccl-tests table (and is under 6 kB), also every
cut of it: the text up to each line plus the first half of that line (a run killed mid-row, a
pasted head), so the rows' fast path and the slow path meet at every line.

To see what moved, check out e9a5dfe's bench_output.py, run this module as a script with --write
into a scratch file, and compare with `_answer` on both trees.

    PYTHONPATH=.collections .venv/bin/python -m tests.unit.test_nccltests_same --write FILE
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import bench_output

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
DIGESTS = FIXTURES / "nccltests" / "parse_digests.json"
_CUTS_UNDER = 6000  # characters: the cuts of a capture cost (lines x lines); the tables are small


def _captures():
    """(path under tests/fixtures, text) of every text capture that could reach the parser."""
    for path in sorted(FIXTURES.rglob("*")):
        rel = path.relative_to(FIXTURES).as_posix()
        if not path.is_file() or rel.startswith(("sysfs/", "golden/")) or path.suffix == ".md":
            continue
        if path == DIGESTS or path.stat().st_size > 200_000:
            continue
        try:
            yield rel, path.read_text()
        except UnicodeDecodeError:
            continue


def _has_table(text):
    return ("busbw" in text or "Avg bus bandwidth" in text) and len(text) < _CUTS_UNDER


def _cuts(text):
    """The text up to each line, with the first half of that line."""
    lines = text.splitlines(keepends=True)
    return ["".join(lines[:i]) + lines[i][: len(lines[i]) // 2] for i in range(len(lines))]


def _answer(text):
    """What the parser says about one text: assess's answer and every run (or the error)."""
    out = {"assess": bench_output.assess(text, None)}
    try:
        out["runs"] = bench_output.parse_runs(text)
    except ValueError as err:
        out["runs"] = f"ValueError: {err}"
    return out


def _digest(text):
    encoded = json.dumps(_answer(text), sort_keys=True, allow_nan=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def _digests_of(text):
    return {"whole": _digest(text), "cuts": [_digest(cut) for cut in _cuts(text)] if _has_table(text) else []}


PINNED = json.loads(DIGESTS.read_text()) if DIGESTS.is_file() else {}


def test_every_pinned_capture_is_still_there_and_the_pin_covers_the_tables():
    assert sorted(PINNED) == sorted(rel for rel, _text in _captures() if rel in PINNED)
    assert len(PINNED) >= 290
    assert sum(1 for entry in PINNED.values() if entry["cuts"]) >= 60


@pytest.mark.parametrize("rel", sorted(PINNED))
def test_the_parser_says_the_same_on_a_capture_and_on_each_of_its_cuts(rel):
    text = (FIXTURES / rel).read_text()
    now = _digests_of(text)
    assert now["whole"] == PINNED[rel]["whole"], f"{rel}: the parser's answer moved"
    moved = [i for i, (a, b) in enumerate(zip(now["cuts"], PINNED[rel]["cuts"])) if a != b]
    assert not moved, f"{rel}: the answer moved on the cuts at lines {moved[:10]}"
    assert len(now["cuts"]) == len(PINNED[rel]["cuts"])


def main(argv):
    if len(argv) != 2 or argv[0] != "--write":
        print(__doc__)
        return 2
    pinned = {rel: _digests_of(text) for rel, text in _captures()}
    pathlib.Path(argv[1]).write_text(json.dumps(pinned, indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
