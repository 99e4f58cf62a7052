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
  tests/ and docs/ (docs holds example reports); the line says when the command is missing;
- the house of plugins/module_utils/wireup (issue 36): modules per package, import cycles in its import
  graph (grimp's graph, among the modules and among the packages), imports against the contracts of
  `.importlinter` (import-linter's own check, the one `make lint` runs, in-process) and the modules
  over 800 lines, each named.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import pathlib
import re
import shutil
import statistics
import subprocess
import sys

import grimp
from importlinter import api as importlinter_api  # configures import-linter, as its CLI does
from importlinter.application import use_cases
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.independence import IndependenceContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON_GLOBS = ("plugins/**/*.py", "files/**/*.py", "roles/*/files/**/*.py")
EXTRA_PYTHON = ("roles/torchrun_launch/files/wireup-watchdog",)
COMPLEXITY = ("C901", "PLR0911", "PLR0912", "PLR0913", "PLR0915")
COLLECTIONS = ROOT / ".collections"
PACKAGE = "ansible_collections.wireup.cluster.plugins.module_utils.wireup"
PACKAGE_DIR = ROOT / "plugins" / "module_utils" / "wireup"
CONTRACTS = ROOT / ".importlinter"
LONG_MODULE = 800
# The contract types `.importlinter` may name, registered as `lint-imports` registers its built-ins.
CONTRACT_TYPES = {
    "layers": LayersContract,
    "acyclic_siblings": AcyclicSiblingsContract,
    "forbidden": ForbiddenContract,
    "independence": IndependenceContract,
}


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


def modules_per_package(package_dir: pathlib.Path = PACKAGE_DIR) -> dict[str, int]:
    """{package: its modules} for the package's own folder (``.``) and each sub-package; an
    ``__init__.py`` is no module of its own."""
    counts: dict[str, int] = {}
    for path in sorted(package_dir.rglob("*.py")):
        if path.name != "__init__.py":
            package = path.parent.relative_to(package_dir).as_posix()
            counts[package] = counts.get(package, 0) + 1
    return counts


def long_modules(package_dir: pathlib.Path = PACKAGE_DIR, limit: int = LONG_MODULE) -> list[tuple[int, str]]:
    """(lines, path in the package) of every module over ``limit`` lines, longest first."""
    rows = []
    for path in package_dir.rglob("*.py"):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            rows.append((lines, path.relative_to(package_dir).as_posix()))
    return sorted(rows, reverse=True)


def strong_components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of a directed graph, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph: each component of more than one node, or a node importing itself."""
    return [c for c in strong_components(edges) if len(c) > 1 or c[0] in edges.get(c[0], ())]


def import_cycles(package: str = PACKAGE) -> tuple[list[list[str]], list[list[str]]]:
    """(cycles among the modules, cycles among the sub-packages) of the package's import graph."""
    graph = grimp.build_graph(package, cache_dir=None)
    modules = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    depth = package.count(".") + 2

    def owner(module: str) -> str:
        return ".".join(module.split(".")[:depth])

    packages: dict[str, set[str]] = {}
    for importer, imported in modules.items():
        targets = packages.setdefault(owner(importer), set())
        targets |= {owner(m) for m in imported if owner(m) != owner(importer)}
    return cycles(modules), cycles(packages)


def contract_breaks(config: pathlib.Path = CONTRACTS) -> tuple[int, int, int]:
    """(imports against the contracts, contracts broken, contracts) by import-linter's own check of
    ``config``: a layers contract counts each route up a layer and each undeclared module, an
    acyclic one each import it would have to drop, any other broken contract 1."""
    importlinter_api.read_configuration(str(config))  # a config it cannot read fails here, by name
    for name, contract_class in CONTRACT_TYPES.items():
        registry.register(contract_class, name)
    options = use_cases.read_user_options(config_filename=str(config))
    with contextlib.redirect_stdout(io.StringIO()):
        report = use_cases.create_report(options, cache_dir=None)
    checks = list(report.get_contracts_and_checks())
    against = sum(_breaks(check) for _contract, check in checks if not check.kept)
    return against, sum(not check.kept for _contract, check in checks), len(checks)


def _breaks(check) -> int:
    meta = check.metadata or {}
    if "invalid_dependencies" in meta:
        routes = sum(len(d["routes"]) for d in meta["invalid_dependencies"])
        return routes + len(meta.get("undeclared_modules") or ())
    if "cycle_breakers_by_package" in meta:
        return sum(len(b) for b in meta["cycle_breakers_by_package"].values())
    return 1


def print_house(package: str = PACKAGE, package_dir: pathlib.Path = PACKAGE_DIR) -> None:
    counts = modules_per_package(package_dir)
    print(f"modules in plugins/module_utils/wireup: {sum(counts.values())}, per package:")
    print("  " + ", ".join(f"{name} {n}" for name, n in counts.items()))
    module_cycles, package_cycles = import_cycles(package)
    print(f"import cycles: {len(module_cycles)} among the modules, {len(package_cycles)} among the packages")
    for cycle in module_cycles + package_cycles:
        print("  " + " <-> ".join(name.removeprefix(package + ".") for name in cycle))
    against, broken, contracts = contract_breaks()
    print(
        f"imports against the contracts (.importlinter): {against} ({broken} of {contracts} contracts broken)"
    )
    long = long_modules(package_dir)
    print(f"modules over {LONG_MODULE} lines: {len(long)}")
    for n, name in long:
        print(f"  {n:5d} {name}")


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
    sys.path.insert(0, str(COLLECTIONS))
    print_house()
    return 0


if __name__ == "__main__":
    sys.exit(main())
