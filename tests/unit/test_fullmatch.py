"""Names, ids and paths are matched whole (issue 35 item 7): `re.match` with a pattern ending in `$`
lets a trailing newline through ('$' matches before a final newline), so every grammar that guards
a name, an id or a path is used with `fullmatch`. One test per grammar feeds its name with "\\n"
added; a static scan of the shipped code (plugins/, the roles' Python files) and the tests' helpers
fails on any new `match`/`search` with a pattern ending in `$`, so the habit cannot come back.

The scan knows the patterns given as literals and those compiled into a name (`X = re.compile(...)`,
used as `X.match`, `mod.X.match`). The parsers' own uses that stay (a line or a token of a tool's
output, already split, so no newline can be in it) are listed in PARSERS with why; a guard never is.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import pathlib
import sys

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import fabric
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import (
    checks,
    watchsettings,
    wheelhouse,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

REPO = pathlib.Path(__file__).resolve().parents[2]

# (file, pattern name or literal) -> why a match/search ending in '$' is a parser's, not a guard's.
PARSERS = {
    ("plugins/module_utils/wireup/judge/bandwidth.py", "_NV"): "a topology cell (split on whitespace)",
    ("plugins/module_utils/wireup/report/assemble.py", "_NV"): "a topology cell (split on whitespace)",
    ("plugins/module_utils/wireup/probe/topology.py", "NV_RE"): "a topology cell",
    ("plugins/module_utils/wireup/probe/topology.py", "GPU_RE"): "a topology header cell",
    ("plugins/module_utils/wireup/probe/topology.py", "NIC_RE"): "a topology header cell",
    ("plugins/module_utils/wireup/probe/topology.py", "UNIT_RE"): "a CSV field of nvidia-smi",
    ("plugins/module_utils/wireup/probe/topology.py", "INT_RE"): "a CSV field of nvidia-smi",
    ("plugins/module_utils/wireup/probe/topology.py", "FLOAT_RE"): "a CSV field of nvidia-smi",
    ("plugins/module_utils/wireup/probe/topology.py", "LEGEND_ENTRY_RE"): "a line of nvidia-smi topo -m",
    ("plugins/module_utils/wireup/probe/topology.py", "NIC_LEGEND_RE"): "a line of nvidia-smi topo -m",
    ("plugins/module_utils/wireup/probe/topology.py", "L_LINE_RE"): "a line of nvidia-smi -L",
    ("plugins/module_utils/wireup/probe/topology.py", "^[a-z_][a-z0-9_.]*$"): "a CSV header field",
    ("plugins/module_utils/wireup/probe/nics.py", "STATE_RE"): "a sysfs state file's text",
    ("plugins/module_utils/wireup/probe/nics.py", "FRONTEND_HCA"): "an HCA name from sysfs (no newline)",
    (
        "plugins/module_utils/wireup/probe/nics.py",
        "SKIP_NET",
    ): "a netdev name (the kernel refuses whitespace)",
    ("plugins/module_utils/wireup/probe/nics.py", "gpu_re"): "a path the module read itself",
    ("plugins/module_utils/wireup/probe/gpuhealth.py", "_GPU_HEADER_RE"): "a line of nvidia-smi -q",
    ("plugins/module_utils/wireup/probe/gpuhealth.py", "_TEXT_LINE_RE"): "a line of nvidia-smi -q",
    ("plugins/module_utils/wireup/plans/gpu_trial.py", "_DELTA_RE"): "a time delta nvidia-smi prints",
    (
        "plugins/module_utils/wireup/probe/health.py",
        "([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\\.[0-7])?$",
    ): "a bus id",
    ("plugins/module_utils/wireup/probe/health.py", "LSPCI_HEADER_RE"): "a line of lspci",
    ("plugins/module_utils/wireup/probe/health.py", "ACS_CTL_RE"): "a line of lspci",
    ("plugins/module_utils/wireup/probe/ncclinfo.py", "BANNER_RE"): "a line of NCCL's log",
    ("plugins/module_utils/wireup/probe/ncclinfo.py", "NET_PATH_RE"): "a path word of NCCL's log",
    ("plugins/module_utils/wireup/probe/bench_output.py", "_DEVICE"): "a line of nccl-tests",
    ("plugins/module_utils/wireup/probe/bench_output.py", "_ERROR_ECHO"): "a line of nccl-tests",
    ("plugins/module_utils/wireup/probe/bench_output.py", "_CELL"): "a table cell (split on whitespace)",
    ("plugins/module_utils/wireup/probe/bench_output.py", "^(?P<c>.+?)_perf(?:_\\w+)?$"): "a binary's name",
    ("plugins/module_utils/wireup/probe/bench_output.py", "^-?\\d+$"): "a table cell (split on whitespace)",
    ("plugins/module_utils/wireup/probe/bench_output.py", "^\\d+$"): "a table cell (split on whitespace)",
    (
        "plugins/module_utils/wireup/probe/bench_output.py",
        "^\\s*(\\d+)\\.(\\d+)\\s*$",
    ): "a compute capability",
    ("plugins/module_utils/wireup/probe/nvlink.py", "GPU_LINE_RE"): "a line of nvidia-smi nvlink -s",
    ("plugins/module_utils/wireup/probe/nvlink.py", "LINK_LINE_RE"): "a line of nvidia-smi nvlink -s",
    ("plugins/module_utils/wireup/report/runsummary.py", "RECAP_LINE"): "a line of Ansible's output",
    ("plugins/module_utils/wireup/report/runsummary.py", "TASK"): "a line of Ansible's output",
    ("plugins/module_utils/wireup/report/runsummary.py", "^\\s*msg:\\s*(.*)$"): "a line of Ansible's output",
    (
        "plugins/module_utils/wireup/launch/slurm.py",
        "_REASON_FIELD",
    ): "scontrol's Reason= to its line's end (re.M)",
    (
        "roles/pytorch_venv/files/probe_python.py",
        "^cuda\\s*(?::[^=]*)?=\\s*(?:None|['\\\"]([^'\\\"]*)['\\\"])\\s*$",
    ): ("torch/version.py's line (re.M)"),
    (
        "tests/testbed/cache.py",
        "^(?::env:|global|install|download)\\.([\\w-]+)='(.*)'$",
    ): "a line of pip config",
}


def _scanned() -> list[pathlib.Path]:
    roles = [
        p
        for p in sorted(REPO.glob("roles/*/files/*"))
        if p.is_file() and (p.suffix == ".py" or p.read_bytes().startswith(b"#!/usr/bin/env python3"))
    ]
    helpers = sorted(REPO.glob("tests/*.py")) + sorted(REPO.glob("tests/testbed/*.py"))
    return sorted(REPO.glob("plugins/**/*.py")) + roles + helpers + [REPO / "tests/integration/conftest.py"]


def _text(node) -> str | None:
    """A pattern literal's text (an f-string's constant parts, '{}' for the rest)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _compiled(tree) -> dict[str, str]:
    """name -> pattern of every `NAME = re.compile(LITERAL, ...)` in a module."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args:
            func, text = node.value.func, _text(node.value.args[0])
            if isinstance(func, ast.Attribute) and func.attr == "compile" and text is not None:
                out.update((t.id, text) for t in node.targets if isinstance(t, ast.Name))
    return out


def _ends_with_dollar(pattern: str) -> bool:
    """Whether the pattern's last atom (before closing parentheses) is an unescaped '$'."""
    tail = pattern.rstrip(")")
    backslashes = len(tail[:-1]) - len(tail[:-1].rstrip("\\"))
    return tail.endswith("$") and backslashes % 2 == 0


def dollar_matches(paths, root=REPO) -> list[tuple[str, str, int]]:
    """(file, pattern name or literal, line) of every .match/.search whose pattern ends in '$'."""
    trees = {p: ast.parse(p.read_text(), str(p)) for p in paths}
    everywhere = {name: text for tree in trees.values() for name, text in _compiled(tree).items()}
    found = []
    for path, tree in trees.items():
        here = _compiled(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("match", "search"):
                continue
            owner, key, pattern = node.func.value, None, None
            if isinstance(owner, ast.Name) and owner.id == "re" and node.args:
                key = pattern = _text(node.args[0])
            elif isinstance(owner, ast.Name) and owner.id in here:
                key, pattern = owner.id, here[owner.id]
            elif isinstance(owner, ast.Attribute) and owner.attr in everywhere:
                key, pattern = owner.attr, everywhere[owner.attr]
            if pattern is not None and _ends_with_dollar(pattern):
                found.append((str(path.relative_to(root)), key, node.lineno))
    return found


def test_no_name_id_or_path_is_matched_with_a_dollar():
    found = dollar_matches(_scanned())
    new = [f"{f}:{line}: {key!r}" for f, key, line in found if (f, key) not in PARSERS]
    assert new == [], (
        "use fullmatch (a '$' lets a trailing newline through), or, for a parser of a tool's output "
        "already split into lines or words, add it to PARSERS with why:\n" + "\n".join(new)
    )
    # PARSERS names nothing that is gone (a parser moved to fullmatch leaves the list).
    assert {(f, key) for f, key, _ in found} == set(PARSERS)


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('import re\nR = re.compile(r"^[a-z]+$")\nR.match(x)\n', True),
        ('import re\nre.match(r"^[a-z]+$", x)\n', True),
        ('import re\nre.search(r"^id=[0-9]+$", x)\n', True),
        ('import re\nR = re.compile(r"^[a-z]+$")\nR.fullmatch(x)\n', False),
        ('import re\nre.match(r"^[a-z]+\\$", x)\n', False),  # a literal dollar sign
        ('import re\nre.match(r"^[a-z]+", x)\n', False),
        ('import re\nR = re.compile(r"^(a|b)$")\nR.match(x)\n', True),
    ],
)
def test_the_scan_finds_a_dollar_match(tmp_path, source, flagged):
    path = tmp_path / "plugins" / "mod.py"
    path.parent.mkdir()
    path.write_text(source)
    assert bool(dollar_matches([path], tmp_path)) is flagged


# --- each grammar that guards a name, id or path, fed its name with a trailing newline -------------


def test_results_run_ids_and_hosts(tmp_path):
    with pytest.raises(ValueError, match="is not like"):
        results.reserve_run(str(tmp_path), "20261201T000000Z\n")
    with pytest.raises(ValueError, match="is not like"):
        results.write_host(str(tmp_path), "20261201T000000Z\n", "node1", {})
    with pytest.raises(ValueError, match="cannot be a file name"):
        results.write_host(str(tmp_path), "20261201T000000Z", "node1\n", {})
    # A folder whose name ends in a newline is no run, for the bench store nor the fabric one.
    for kind in ("bench", "fabric"):
        (tmp_path / kind / "20261201T000000Z\n").mkdir(parents=True)
    assert results.list_runs(str(tmp_path)) == []
    (tmp_path / "fabric" / "20261201T000000Z\n" / "fabric.json").write_text("{")
    assert fabric.latest_fabric(str(tmp_path)) is None


def test_the_fabric_modules_run_folders(tmp_path):
    loader = importlib.machinery.SourceFileLoader(
        "wireup_fabric_bench_module", str(REPO / "plugins" / "modules" / "wireup_fabric_bench.py")
    )
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    # The store's fabric folder (results_dir/fabric), as the module names it: query.runs lists it.
    (tmp_path / "fabric" / "20261201T000000Z\n").mkdir(parents=True)
    (tmp_path / "fabric" / "20261201T000000Z\n" / "fabric.json").write_text("{}")
    assert module._previous(str(tmp_path / "fabric"), "20261202T000000Z") is None
    (tmp_path / "fabric" / "20261201T000000Z").mkdir()
    (tmp_path / "fabric" / "20261201T000000Z" / "fabric.json").write_text("{}")
    assert module._previous(str(tmp_path / "fabric"), "20261202T000000Z") is None  # damaged: not used

    class Refused(Exception):
        pass

    class Module:
        check_mode = True

        def fail_json(self, msg):
            raise Refused(msg)

    with pytest.raises(Refused, match="is not like"):
        module._run_folder(Module(), str(tmp_path), "20261201T000000Z\n")


def test_wheel_file_names():
    assert wheelhouse.parse_wheel_name("torch-2.13.0-cp311-cp311-linux_x86_64.whl") == ("torch", "2.13.0")
    assert wheelhouse.parse_wheel_name("torch-2.13.0-cp311-cp311-linux_x86_64.whl\n") is None


def test_the_venv_probe_names_pip_only_by_its_whole_name():
    loader = importlib.machinery.SourceFileLoader(
        "probe_python_35", str(REPO / "roles" / "pytorch_venv" / "files" / "probe_python.py")
    )
    spec = importlib.util.spec_from_loader(loader.name, loader)
    probe = importlib.util.module_from_spec(spec)
    loader.exec_module(probe)
    bindir = "/opt/wireup/venv/bin"
    assert probe._runs_pip([f"{bindir}/pip", "install", "x"], bindir)
    assert not probe._runs_pip([f"{bindir}/pip\n", "install", "x"], bindir)
    assert probe._runs_pip(["/usr/bin/python3", f"{bindir}/pip"], bindir)
    assert not probe._runs_pip(["/usr/bin/python3\n", f"{bindir}/pip"], bindir)


def test_testbed_names():
    sys.path.insert(0, str(REPO))
    try:
        from tests.testbed import testbed
    finally:
        sys.path.remove(str(REPO))
    with pytest.raises(testbed.TestbedError, match="is invalid"):
        testbed.Testbed("wtb\n")


@pytest.mark.parametrize(
    ("check", "good"),
    [
        (checks.is_host_name, "node1"),
        (checks.is_inventory_host, "node1"),
        (checks.is_shell_name, "NCCL_DEBUG"),
        (lambda v: not torchrun_launch.job_name_errors(v), "ddp-multinode"),
        (lambda v: not torchrun_launch.run_id_errors(v), "20261201T000000Z-1a2b"),
        (slurm.is_job_id, "4711"),
        (lambda v: slurm.is_row_of(v, "4711"), "4711.batch"),
        (lambda v: not watchsettings.node_state_errors(v), "IDLE,CYCLE"),
        (lambda v: not checks.validate_abs_paths({"wireup_base_dir": v}), "/opt/wireup"),
        (lambda v: bool(checks.PATH_NAME.fullmatch(v)), "node1.log"),
    ],
)
def test_the_other_guards_refuse_a_trailing_newline(check, good):
    assert check(good)
    assert not check(good + "\n")


@pytest.mark.parametrize("digits", ["\u00b2", "\u0663", "\uff13", "1\u00b2"])
def test_numbers_from_a_node_or_the_inventory_are_ascii_digits(digits):
    # str.isdigit() says yes to each; int() refuses '²' and reads the others: never a crash, never a number.
    assert torchrun_launch.parse_gpu_usage(f"0, {digits}, 10, 80") == []
    assert torchrun_launch.cpus_allowed(f"Cpus_allowed_list:\t0-{digits}\n") == 0
    assert checks.validate_nproc(digits) and checks.validate_port("wireup_master_port", digits)
    assert watchsettings.errors({"node_check_timeout": digits})
    assert slurm.expand_hostlist(f"n[{digits}]") == [f"n[{digits}]"]


def test_the_numbers_that_are_numbers_still_are():
    assert torchrun_launch.parse_gpu_usage("0, 97, 40960, 143771") == [
        {"index": 0, "util": 97, "mem_used": 40960, "mem_total": 143771}
    ]
    assert torchrun_launch.cpus_allowed("Cpus_allowed_list:\t0-3,8\n") == 5
    assert not checks.validate_nproc("8") and not checks.validate_port("wireup_master_port", "29500")
    assert results.RUN_ID_RE.fullmatch("20261201T000000Z-2")
