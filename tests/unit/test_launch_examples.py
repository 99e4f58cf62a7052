"""The shipped examples leave without tearing the process group down (issue 13, item 6).

One CI run in five failed Example 2 at exit: every rank had printed "replicas in sync: True",
then a gloo/c10d teardown race aborted one rank (SIGABRT) and torchrun reported the job failed.
The examples now keep the barrier, flush, and os._exit with the verified result; the process
group's destructors never run. These checks read the examples' code (torch is not on the
controller); tests/integration/test_launch.py runs them on the testbed.
"""

import ast
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "files" / "examples"


def calls(node):
    """Dotted names of the calls in node, in source order."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            out.append((sub.lineno, ast.unparse(sub.func)))
    return [name for _, name in sorted(out)]


@pytest.mark.parametrize(
    ("name", "function"), [("ddp_multinode.py", "main"), ("ddp_single_node.py", "worker")]
)
def test_ranks_leave_after_the_barrier_with_os_exit(name, function):
    tree = ast.parse((EXAMPLES / name).read_text())
    [body] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    names = calls(body)
    assert "dist.destroy_process_group" not in names
    barrier = names.index("dist.barrier")
    tail = names[barrier + 1 :]
    assert tail[-1] == "os._exit", f"{name}: the last call after the barrier must be os._exit, not {tail}"
    assert "sys.stdout.flush" in tail and "sys.stderr.flush" in tail
    # Nothing after the barrier may raise SystemExit instead (sys.exit runs the destructors).
    assert "sys.exit" not in tail


def test_multinode_exit_code_is_the_verified_result():
    tree = ast.parse((EXAMPLES / "ddp_multinode.py").read_text())
    [exit_call] = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "os._exit"]
    assert ast.unparse(exit_call.args[0]) == "0 if in_sync else 1"
