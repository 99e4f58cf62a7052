"""The shipped examples leave without tearing the process group down (issue 13, item 6).

One CI run in five failed Example 2 at exit: every rank had printed "replicas in sync: True",
then a gloo/c10d teardown race aborted one rank (SIGABRT) and torchrun reported the job failed.
The examples now keep the barrier, flush, and os._exit with the verified result; the process
group's destructors never run. These checks read the examples' code (torch is not on the
controller); tests/integration/test_launch.py runs them on the testbed.
"""

import argparse
import ast
import pathlib
import sys

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


# ---------------------------------------------------------------- --comm-hook (issue 16, item 4)
def function(tree, name):
    [body] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return body


def program_parse_args(name, argv):
    """The example's own parse_args, run on argv without importing torch: its function and the
    COMM_HOOKS table, executed with argparse only."""
    tree = ast.parse((EXAMPLES / name).read_text())
    hooks = [n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "COMM_HOOKS"]
    module = ast.Module(body=[*hooks, function(tree, "parse_args")], type_ignores=[])
    namespace = {"argparse": argparse, "__doc__": "example\n"}
    exec(compile(module, name, "exec"), namespace)
    old = sys.argv
    sys.argv = [name, *argv]
    try:
        return namespace["parse_args"]()
    finally:
        sys.argv = old


@pytest.mark.parametrize(
    ("name", "function_name"), [("ddp_multinode.py", "main"), ("ddp_single_node.py", "worker")]
)
def test_comm_hook_option_is_registered_on_the_ddp_model(name, function_name):
    tree = ast.parse((EXAMPLES / name).read_text())
    names = calls(function(tree, function_name))
    # Right after the DDP wrapper is made, before the optimizer takes its parameters.
    assert names.index("register_comm_hook") == names.index("DistributedDataParallel") + 1
    hook = function(tree, "register_comm_hook")
    text = ast.unparse(hook)
    for registered in (
        "default_hooks.fp16_compress_hook",
        "default_hooks.bf16_compress_hook",
        "powerSGD_hook.powerSGD_hook",
    ):
        assert registered in text
    # PowerSGD compresses from its second step, not after its default 1,000 plain steps.
    assert "start_powerSGD_iter=2" in text
    assert program_parse_args(name, []).comm_hook == "none"
    for choice in ("none", "fp16", "bf16", "powersgd"):
        assert program_parse_args(name, ["--comm-hook", choice]).comm_hook == choice
    with pytest.raises(SystemExit):
        program_parse_args(name, ["--comm-hook", "int8"])


def test_comm_hook_passes_through_launch_yml_like_any_argument(tmp_path):
    """launch.yml -e '{"torchrun_launch_args": ["--comm-hook", "powersgd"]}': launch.sh hands it to
    the program after torchrun's own options, and the example's parser takes it."""
    import test_launch_templates as templates

    ctx = templates.context("three-cpu-nodes", tmp_path, torchrun_launch_args=["--comm-hook", "powersgd"])
    script = templates.render(
        "jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh"
    )
    out = templates.run_launch(ctx, script)
    program = ctx["torchrun_launch_program"]
    argv = out["argv"][out["argv"].index(program) + 1 :]
    assert argv == ["--comm-hook", "powersgd"]
    assert program_parse_args("ddp_multinode.py", argv).comm_hook == "powersgd"
