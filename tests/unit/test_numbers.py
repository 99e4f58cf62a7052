"""The one rule for "is a number" and "is a finite number" (issue 36 item 4: core/checks.py), and
no copy of it left in the modules that use it."""

from __future__ import annotations

import math
import pathlib
import re

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks

PKG = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "wireup"
# The rule written out: an isinstance of (int, float) beside a bool check or math.isfinite.
_NUMBER = r"isinstance\([^()]*, (?:\(int, float\)|int \| float)\)"
_BOOL = r"isinstance\([^()]*, bool\)"
COPY = re.compile(rf"{_NUMBER}[^\n]*(?:{_BOOL}|math\.isfinite)|{_BOOL}[^\n]*{_NUMBER}")


@pytest.mark.parametrize(
    ("value", "number", "finite"),
    [
        (0, True, True),
        (-3, True, True),
        (2.5, True, True),
        (10**400, True, True),  # an int too large for a float is still finite
        (math.nan, True, False),
        (math.inf, True, False),
        (-math.inf, True, False),
        (True, False, False),
        (False, False, False),
        ("1", False, False),
        (None, False, False),
        ([1], False, False),
    ],
)
def test_is_number_and_is_finite_number(value, number, finite):
    assert checks.is_number(value) is number
    assert checks.is_finite_number(value) is finite


def copies(root: pathlib.Path) -> list[str]:
    """'path:line' of each copy of the rule outside checks.py and the modules not yet moved."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name == "core/checks.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if COPY.search(line):
                found.append(f"{name}:{number}")
    return found


def test_no_module_writes_the_rule_out_again():
    assert copies(PKG) == []


def test_the_copy_check_sees_each_form(tmp_path):
    (tmp_path / "a.py").write_text(
        "x = isinstance(v, bool) or not isinstance(v, (int, float))\n"
        "y = isinstance(v, int | float) and not isinstance(v, bool)\n"
        "z = isinstance(v, (int, float)) and math.isfinite(v)\n"
        "w = isinstance(v, (int, float))\n"
    )
    assert copies(tmp_path) == ["a.py:1", "a.py:2", "a.py:3"]
