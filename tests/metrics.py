"""The shape numbers of issue 24, one line each: `.venv/bin/python -m tests.metrics` (`make metrics`).

- functions: every def in the shipped Python (plugins/, files/, the watchdog; tests are not
  counted), their median length in lines (decorators excluded, docstrings included), how many are
  over 60 and over 100 lines (each named with --long);
- ruff complexity: findings of C901 and PLR0911-0915 under pyproject.toml's limits, counted with the
  project's `# noqa` reasons honoured and the per-file scoping lifted, then without the noqa;
- task YAML: lines of roles/*/tasks/*.yml and its `when:` occurrences (changed_when/failed_when
  included: the count docs/performance.md has used since issue 14), and what the lines are: blank,
  comment, continuation lines of a filter's keyword arguments (`name=variable, ...`), the rest;
- duplicates: pairs of repeated runs (the `duplicates` command, /work/.library/duplicates) outside
  tests/ and docs/ (docs holds example reports); the line says when the command is missing.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import re
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON_GLOBS = ("plugins/**/*.py", "files/**/*.py", "roles/*/files/**/*.py")
EXTRA_PYTHON = ("roles/torchrun_launch/files/wireup-watchdog",)
COMPLEXITY = ("C901", "PLR0911", "PLR0912", "PLR0913", "PLR0915")


def python_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    files = {p for pattern in PYTHON_GLOBS for p in root.glob(pattern)}
    files |= {root / name for name in EXTRA_PYTHON if (root / name).is_file()}
    return sorted(files)


def function_lengths(paths: list[pathlib.Path], root: pathlib.Path = ROOT) -> list[tuple[int, str]]:
    """(lines, 'path:line name') for every function and method, longest first."""
    rows = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                rows.append((lines, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)


def ruff_count(root: pathlib.Path, *, ignore_noqa: bool) -> int:
    """C901/PLR0911-0915 findings over the shipped Python with pyproject's limits, the per-file
    scoping lifted (tests excluded)."""
    ruff = root / ".venv" / "bin" / "ruff"
    argv = [str(ruff), "check", "--select", ",".join(COMPLEXITY), "--output-format", "concise", "--quiet"]
    argv += ["--config", "lint.per-file-ignores = {}", "--exit-zero"]
    argv += ["--ignore-noqa"] if ignore_noqa else []
    argv += [str(p.relative_to(root)) for p in python_files(root)]
    out = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if re.search(r":\d+:\d+: (C901|PLR09)", line))


def task_yaml(root: pathlib.Path = ROOT) -> tuple[int, int]:
    text = task_text(root)
    return len(text.splitlines()), text.count("when:")


def task_text(root: pathlib.Path = ROOT) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(root.glob("roles/*/tasks/*.yml")))


_KWARGS_LINE = re.compile(r"\s+[a-z_0-9]+=[^=]")


def line_kinds(text: str) -> dict[str, int]:
    """{blank, comment, kwargs, rest}: what the task YAML's lines are; ``kwargs`` a line that goes
    on with a filter's keyword arguments (``  min_bytes=bench_min_bytes, ...`` in a ``>-`` block)."""
    kinds = dict.fromkeys(("blank", "comment", "kwargs", "rest"), 0)
    for line in text.splitlines():
        if not line.strip():
            kinds["blank"] += 1
        elif line.lstrip().startswith("#"):
            kinds["comment"] += 1
        elif _KWARGS_LINE.match(line):
            kinds["kwargs"] += 1
        else:
            kinds["rest"] += 1
    return kinds


def duplicate_pairs(root: pathlib.Path = ROOT) -> str:
    """'N (of M pairs in all)' outside tests/ and docs/, or why there is no count."""
    command = shutil.which("duplicates")
    if not command:
        return "not counted (no `duplicates` command on this machine)"
    out = subprocess.run(
        [command, "--repo", str(root), "--most", "200", "--seconds", "120"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    rows = [line for line in out.splitlines() if re.match(r"D\d+ ", line)]
    outside = [r for r in rows if not re.search(r"(^|[ ~])(tests|docs)/", r.split(" ", 1)[1])]
    return f"{len(outside)} (of {len(rows)} pairs in all)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="name every function over 60 lines")
    args = parser.parse_args(argv)
    rows = function_lengths(python_files())
    lengths = [n for n, _ in rows]
    lines, whens = task_yaml()
    print(f"functions: {len(lengths)}, median {statistics.median(lengths):g} lines")
    over_60, over_100 = sum(n > 60 for n in lengths), sum(n > 100 for n in lengths)
    print(f"functions over 60 lines: {over_60}, over 100: {over_100}")
    if args.long:
        for n, name in rows:
            if n > 60:
                print(f"  {n:4d} {name}")
    print(
        f"ruff C901/PLR0911-0915 findings: {ruff_count(ROOT, ignore_noqa=False)}"
        f" ({ruff_count(ROOT, ignore_noqa=True)} counting those under a `# noqa` reason)"
    )
    print(f"task YAML (roles/*/tasks/*.yml): {lines} lines, {whens} `when:`")
    kinds = line_kinds(task_text())
    print("  of the lines: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items()))
    print(f"duplicates pairs outside tests/ and docs/: {duplicate_pairs()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
