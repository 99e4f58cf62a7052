"""Issue 36's house rules for plugins/module_utils/wireup that import-linter cannot see: no import
of a wireup module inside a function (a function-level import hides a cycle or an upward import
from the contracts' reading order), and the store's kinds are the capabilities' own."""

from __future__ import annotations

import ast
import pathlib

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

PKG = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "wireup"

# (module, imported) inside a function, left as they are, each with its reason. Nothing else may
# be added here to dodge a cycle: move the code to the layer it belongs to (docs/DEVELOPING.md).
KEPT = {
    # wireup-check on the node: what only its benchmark and its drain need is imported when they run.
    ("check/run.py", "..probe.bench_output"),
    ("check/run.py", "..launch.slurm"),
    ("check/run.py", "..launch.blast"),
    # the quick check's baseline line: bench_output is the node-side bundle's largest parser.
    ("judge/quick.py", "..probe.bench_output.figure"),
}


def _function_imports(path):
    tree = ast.parse(path.read_text())
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom) and node.level:
                module = "." * node.level + (node.module or "")
                sep = "" if module.endswith(".") else "."
                yield from (f"{module}{sep}{alias.name}" for alias in node.names)


def test_no_wireup_module_is_imported_inside_a_function_to_dodge_a_cycle():
    found = {
        (str(path.relative_to(PKG)), imported)
        for path in sorted(PKG.rglob("*.py"))
        for imported in _function_imports(path)
    }
    assert found - KEPT == set()


def test_the_store_s_kinds_are_bench_and_the_quick_check_s_own():
    assert results.KINDS == ("bench", node_check.KIND)


def _guarded_wireup_imports(path):
    """Relative (wireup) imports under a ``try`` that catches ImportError: a guard for a module
    that ships with the package anyway, so a wireup without it never existed."""
    for node in ast.walk(ast.parse(path.read_text())):
        handlers = node.handlers if isinstance(node, ast.Try) else []
        catches = any("ImportError" in ast.unparse(h.type or ast.Name("BaseException")) for h in handlers)
        for stmt in node.body if catches else ():
            if isinstance(stmt, ast.ImportFrom) and stmt.level:
                yield from (f"{'.' * stmt.level}{stmt.module or ''}.{alias.name}" for alias in stmt.names)


def test_no_wireup_module_is_imported_as_optional():
    found = {
        (str(path.relative_to(PKG)), imported)
        for path in sorted(PKG.rglob("*.py"))
        for imported in _guarded_wireup_imports(path)
    }
    assert found == set()
