"""Every read of a plan in the roles' task files, handlers and templates exists in its type.

The seams between the YAML and the Python that plans it (issue 24 item 2): each plan a role sets
(``set_fact``, or a task's ``vars:`` alias such as ``__plan``) is a TypedDict in
plugins/module_utils/wireup/, and ``TYPES`` below says which. The scanner finds every
``NAME.key.key`` (and ``NAME.key[...].key``) the files read and checks each key against the type,
following nested TypedDicts (``__plan.watchdog.key``, ``__plan.nodes[host].listen``); it stops at
a key whose type is not a TypedDict (a plain dict, a list, a string). So a renamed key in Python
fails here, not as an undefined variable on a node.

``CHECKED_ROLES``: the roles whose set_fact and vars names, when read with a dot, must be in TYPES
(a new plan cannot stay untyped); registered results of builtin modules are not plans. One table
for every role: the bench side adds its roles and entries here.
"""

from __future__ import annotations

import pathlib
import re
import types
import typing

import pytest
import yaml

from wireup import cuda_repo, launch, nccl, nccl_tests, nvidia_driver, pytorch_venv, slurm

ROOT = pathlib.Path(__file__).resolve().parents[2]

# name the YAML reads -> its TypedDict (a tuple: the keys of any of them)
TYPES: dict[str, type | tuple[type, ...]] = {
    "__cuda_repo": cuda_repo.CudaRepoPlan,
    "__nccl_plan": nccl.NcclPlan,
    "__nccl_tests": nccl_tests.NcclTestsPlan,
    "nccl_tests_build": nccl_tests.BuildFact,
    "__nvidia_driver_plan": nvidia_driver.DriverPlan,
    "__nvidia_driver_specs": nvidia_driver.InstallSpecs,
    "__pytorch_venv_plan": pytorch_venv.VenvPlan,
    "__pytorch_venv_verified": pytorch_venv.Verified,
    "__verified": pytorch_venv.Verified,
    "pytorch_venv_info": pytorch_venv.TorchInfo,
    "__torchrun_launch_plan": launch.JobPlan,
    # slurm.yml's __plan is the launch plan combined with sbatch's (slurm.run_plan)
    "__plan": (launch.JobPlan, slurm.SlurmRun),
    "__slurm": slurm.SlurmRun,
    "__torchrun_launch_jobs": launch.JobsPlan,
    "__torchrun_launch_verdict": (launch.Verdict, slurm.SlurmVerdict),
    "__torchrun_launch_drain": slurm.DrainPlan,
    "__torchrun_launch_result": launch.NodeResult,
    "__node": launch.JobsNode,
    "__report": launch.Report,
    "__status": launch.RunStatus,
}
CHECKED_ROLES = ("preflight", "cuda_repo", "nvidia_driver", "nccl", "pytorch_venv", "torchrun_launch")

_READ = re.compile(r"(?<![\w.])([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*|\[[^\]\n]*\])+)")
_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[([^\]\n]*)\]")
# Methods of a mapping a template may call on a plan: not keys.
_METHODS = {"get", "items", "keys", "values"}


def _files() -> list[pathlib.Path]:
    patterns = (
        "roles/*/tasks/*.yml",
        "roles/*/handlers/*.yml",
        "roles/*/templates/**/*.j2",
        "playbooks/*.yml",
    )
    return sorted(p for pattern in patterns for p in ROOT.glob(pattern))


def _reads(path: pathlib.Path):
    """(line number, name, [steps]) of every dotted read in a file; a step is ('key', name) or
    ('item', None) for a subscript."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for match in _READ.finditer(line):
            steps = [("key", key) if key else ("item", None) for key, _ in _STEP.findall(match.group(2))]
            yield number, match.group(1), steps


def _unwrap(hint):
    """The TypedDict a hint names (X | None: X), or None when it is none."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        found = [h for h in typing.get_args(hint) if h is not type(None)]
        return _unwrap(found[0]) if len(found) == 1 else None
    return hint if typing.is_typeddict(hint) else None


def _item(hint):
    """The TypedDict of a subscript's value: dict[str, X] -> X, list[X] -> X."""
    args = typing.get_args(hint)
    return _unwrap(args[-1]) if args else None


def _missing(kinds, steps) -> str:
    """'' when ``steps`` read keys that exist in one of ``kinds`` (TypedDicts), else the first key
    that does not exist."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    problems = []
    for kind in kinds:
        problem = _walk(kind, steps)
        if not problem:
            return ""
        problems.append(problem)
    return problems[0]


def _walk(kind, steps) -> str:
    hint = kind
    for step, key in steps:
        td = _unwrap(hint)
        if step == "item":
            if td is not None:
                return ""  # a subscript of a TypedDict: a key the template chooses
            hint = _item(hint)  # dict[str, X], list[X]: X
            if hint is None:
                return ""
            continue
        if td is None or key in _METHODS:
            return ""  # not a TypedDict (its keys are data, not the plan's shape), or a method
        hints = typing.get_type_hints(td)
        if key not in hints:
            return f"{td.__name__} has no key {key!r}"
        hint = hints[key]
    return ""


def test_every_plan_read_exists_in_its_type():
    problems = []
    for path in _files():
        for number, name, steps in _reads(path):
            if name in TYPES:
                problem = _missing(TYPES[name], steps)
                if problem:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {name}: {problem}")
    assert problems == []


def _tasks(node):
    """Every task mapping of a task file (inside blocks, rescue and always too)."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from _tasks(node.get(key))


def _names(role: str) -> tuple[set[str], set[str]]:
    """(names the role sets with set_fact or a task's vars, names it registers)."""
    made, registered = set(), set()
    for path in (ROOT / "roles" / role / "tasks").glob("*.yml"):
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            made |= set(task.get("ansible.builtin.set_fact") or {}) | set(task.get("vars") or {})
            if task.get("register"):
                registered.add(task["register"])
    return made, registered


@pytest.mark.parametrize("role", CHECKED_ROLES)
def test_every_plan_a_role_reads_with_a_dot_is_typed(role):
    made, registered = _names(role)
    files = [p for p in _files() if f"roles/{role}/" in str(p)]
    read = {name for path in files for _, name, steps in _reads(path) if steps and steps[0][0] == "key"}
    untyped = sorted((read & made) - set(TYPES) - registered)
    assert untyped == [], f"{role}: plans read by key without a type in TYPES: {untyped}"


def test_the_table_names_plans_the_yaml_reads():
    """No stale entry: every name in TYPES is one the roles' files use."""
    text = "\n".join(path.read_text() for path in _files())
    assert [name for name in TYPES if not re.search(rf"(?<![\w.]){name}\b", text)] == []


def test_the_scanner_catches_a_missing_key():
    assert _missing(launch.JobPlan, [("key", "no_such_key")]) == "JobPlan has no key 'no_such_key'"
    assert _missing(launch.JobPlan, [("key", "watchdog"), ("key", "keys")]) == ""
    assert "WatchdogPlan has no key 'kye'" in _missing(launch.JobPlan, [("key", "watchdog"), ("key", "kye")])
    nested = [("key", "nodes"), ("item", None), ("key", "listen")]
    assert _missing(launch.JobPlan, nested) == ""
    assert "NodePlan has no key 'lisen'" in _missing(launch.JobPlan, [*nested[:2], ("key", "lisen")])
    assert _missing((launch.JobPlan, slurm.SlurmRun), [("key", "sacct_argv")]) == ""
