"""Typed seams (issue 24, item 2): every read of a typed plan in the roles' task files, handlers,
templates and the playbooks (``__bench_plan.compare.argv``, ``__plan.nodes[host].listen``,
``__bench_report_store['report']``) names a key its type has, following nested TypedDicts; every
plan a task keeps from wireup's code (set_fact or a task's ``vars:`` from a wireup filter, the
register of a wireup module or action) has its type here; every name a role sets and then reads by
key has one too; and the table names nothing that is gone. So a renamed or misspelt key fails
here, not as an undefined variable on a node.

PLANS maps a name (set_fact, register or task var) to the type of its value: a TypedDict in
plugins/module_utils/wireup/, a container of one (``dict[str, X]``, ``list[X]``) or a plain type
(``str``, ``list[str]``: a key read from it fails). A tuple: the value is one of them (a key
passes when one of them has it). The walk follows ``.key`` and quoted subscripts (``['key']``) as
keys; a subscript by a variable (``[host]``) of a mapping or list goes on into its values, of a
TypedDict stops (a key the template chooses); a call (``.get(``, ``.items(``) stops at the object
it is called on; past a plain dict, a list's index or ``Any`` nothing is checked.
"""

from __future__ import annotations

import pathlib
import re
import types
import typing

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import gpu_trial, node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm, stall, wait
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (
    bench,
    bench_fabric,
    bench_report,
    cuda_repo,
    nccl,
    nccl_tests,
    node_check_slurm,
    nvidia_driver,
    pytorch_venv,
    remediate,
    repair,
    slurm_health_check,
    torchrun_launch,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import gpu_trial as plans_gpu_trial
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (
    node_check as plans_node_check,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import (
    bench_output,
    file_state,
    gpuhealth,
    topology,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history

ROOT = pathlib.Path(__file__).resolve().parents[2]
ERRORS = list[str]  # a check's sentences, each naming the variable and the fix
PLANS: dict[str, typing.Any] = {
    # preflight
    # wireup_node_facts' fact, kept as a host variable (ansible-core 2.20 deprecates reading facts
    # as top-level variables); its keys are the module's RETURN, not yet a TypedDict.
    "wireup_node": dict[str, typing.Any],
    "__preflight_errors": ERRORS,
    "__preflight_address_errors": ERRORS,
    # the master's inventory name, set once (run_once) from wireup_master: a host name
    "__preflight_master": str,
    # cuda_repo
    "__cuda_repo_state": file_state.FileState,
    "__cuda_repo": cuda_repo.CudaRepoPlan,
    "__cuda_repo_problems": ERRORS,
    # nvidia_driver
    "__nvidia_driver_plan": nvidia_driver.DriverPlan,
    "__nvidia_driver_specs": nvidia_driver.InstallSpecs,
    # nccl
    "__nccl_files": file_state.FileState,
    "__nccl_plan": nccl.NcclPlan,
    "__nccl_problems": ERRORS,
    # nccl_tests
    "__nccl_tests_plan": nccl_tests.NcclTestsPlan,
    "__nccl_tests": nccl_tests.NcclTestsPlan,
    "nccl_tests_build": nccl_tests.BuildFact,
    "__nccl_tests_info": bench_output.NcclInfo,
    "__nccl_tests_problems": ERRORS,
    # pytorch_venv
    "__pytorch_venv_plan": pytorch_venv.VenvPlan,
    "__pytorch_venv_verified": pytorch_venv.Verified,
    "__verified": pytorch_venv.Verified,
    "pytorch_venv_info": pytorch_venv.TorchInfo,
    # gpu_topology
    "__gpu_topology_probe": topology.TopologyProbe,
    # gpu_trial
    "__gpu_trial_plan": plans_gpu_trial.TrialPlan,
    "__gpu_trial_health_before": gpuhealth.HealthRead,
    "__gpu_trial_health_after": gpuhealth.HealthRead,
    "gpu_trial_node": gpu_trial.TrialNode,
    "gpu_trial_run": gpu_trial.TrialRun,
    # bench
    "__bench_plan": bench.BenchPlan,
    "__bench_torch": bench.TorchJob,
    "__bench_multi": bench.MultiNode,
    "__bench_torch_logs": dict[str, str],  # {TorchJob kind: its log path on the controller}
    "__bench_tuning": bench.Tuning,
    "__bench_result": bench.NodeData,
    # bench_fabric
    "__bench_fabric_plan": bench_fabric.FabricPlan,
    "__bench_fabric_job": bench_fabric.FabricJob,
    "__bench_fabric_results": list[bench_fabric.PairResult],
    "__bench_fabric_judge": bench_fabric.JudgeAnswer,
    "__bench_fabric_judged": bench_fabric.JudgeAnswer,
    # bench_report
    "__bench_report_run": bench_report.ReportRun,
    "__bench_report_store": bench_report.StoreAnswer,
    # launch.yml, torchrun_launch
    "__wireup_launch_failed": dict[str, str],  # {host: why launch refuses it} (gate.refusals)
    "__wireup_launch_drift": ERRORS,  # why launch.yml refuses the nodes' drift (drift.launch_refusals)
    "__torchrun_launch_watchdog_key": str,
    "__torchrun_launch_node": torchrun_launch.NodeFacts,
    "__torchrun_launch_plan": torchrun_launch.JobPlan,  # this node's slice (torchrun_launch.node_plan)
    "__torchrun_launch_job_plan": torchrun_launch.JobPlan,  # the whole plan, on the job's planner only
    "__torchrun_launch_plan_id": str,  # this pass's id (random)
    "__torchrun_launch_planners": dict[str, str],  # {group: its job's planner} (job_planners)
    "__torchrun_launch_planner": str,
    "__torchrun_launch_dropped": dict[str, list[str]],  # {planner: its job's hosts that left the play}
    "__torchrun_launch_verdicts": dict[str, wait.Verdict],  # {planner: its job's verdict}
    # after slurm.yml, __plan is the launch plan combined with sbatch's (slurm.run_plan)
    "__plan": (torchrun_launch.JobPlan, slurm.SlurmRun),
    "__slurm_status": slurm.SlurmStatus,  # jobs.yml on a Slurm run (its block's vars)
    "__batch_out": str,
    "__errors": ERRORS,
    "__torchrun_launch_status": wait.WaitResult,
    "__torchrun_launch_sacct": wait.WaitResult,
    "__torchrun_launch_jobs": torchrun_launch.JobsPlan,
    "__torchrun_launch_stall": stall.StallPlan,
    "__torchrun_launch_progress": stall.LookLoop,  # wireup_job_progress in a loop of none or one
    "__torchrun_launch_verdict": (wait.Verdict, slurm.SlurmVerdict),
    "__verdict": slurm.SlurmVerdict,  # slurm_wait.yml's, before it is kept
    "__torchrun_launch_drain": slurm.LimitedDrain,
    # repair (issue 37)
    "__repair_plan": repair.RepairPlan,
    "__repair_return": repair.ReturnPlan,
    "__repair_remedy": remediate.RemedyPlan,  # repair_act's plan (issue 37 item 2)
    "__repair_step": remediate.NodeStep,
    "__repair_acted": remediate.Acted,
    "__repair_node_history": history.NodeRead,  # wireup-check's drains on the node (issue 37 item 4)
    "__repair_collected": history.CollectAnswer,
    "__torchrun_launch_result": torchrun_launch.NodeResult,
    "__node": torchrun_launch.JobsNode,
    "__report": torchrun_launch.Report,
    # node_check, slurm_health_check (issue 26)
    "__node_check_plan": plans_node_check.NodeCheckPlan,
    "__node_check_read": plans_node_check.StoreRead,
    "__node_check_result": node_check.CheckResult,
    # the quick check through Slurm (issue 39): the master, wireup_quick_slurm's answer, its part kept
    "__node_check_submit": str,
    "__node_check_slurm_run": node_check_slurm.SlurmRun,
    "__node_check_slurm": node_check_slurm.SlurmQuick,
    "__slurm_health_check_plan": slurm_health_check.SlurmHealthPlan,
}
SOURCES = [
    *sorted(ROOT.glob("roles/*/tasks/*.yml")),
    *sorted(ROOT.glob("roles/*/handlers/*.yml")),
    *sorted(p for p in ROOT.glob("roles/*/templates/**/*") if p.is_file()),
    *sorted(ROOT.glob("playbooks/*.yml")),
]
# .key, ['key'] or ["key"] (a key), [anything else] (a subscript by a value)
STEP = r"\.[A-Za-z_]\w*|\[[^\]\n]*\]"
_QUOTED = re.compile(r"""\[\s*(?:'([^']*)'|"([^"]*)")\s*\]""")
ITEM = None  # the step of a subscript by a value
# A filter call in a task's value: `| wireup.cluster.wireup_x`, `wireup_x(`, `map('wireup.cluster.wireup_x')`
_WIREUP_CALL = re.compile(
    r"\|\s*(?:wireup\.cluster\.)?wireup_\w+|\bwireup_\w+\(|['\"]wireup\.cluster\.wireup_\w+['\"]"
)
_WIREUP_MODULE = ("wireup.cluster.wireup_", "wireup_")


def _step(text):
    """'.key' or "['key']" -> 'key'; any other subscript -> ITEM."""
    if text.startswith("."):
        return text[1:]
    quoted = _QUOTED.fullmatch(text)
    return (quoted.group(1) if quoted.group(1) is not None else quoted.group(2)) if quoted else ITEM


def reads(text, name):
    """[(line number, [step, ...])] of every read of ``name``'s keys in text (a step is a key or
    ITEM); the last step before a call is the call's, not a key."""
    out = []
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}((?:{STEP})+)", text):
        steps = [_step(s) for s in re.findall(STEP, match.group(1))]
        if text[match.end() : match.end() + 1] == "(":
            steps = steps[:-1]
        if steps:
            out.append((text.count("\n", 0, match.start()) + 1, steps))
    return out


def _typed_dict(kind):
    """The TypedDict in kind (itself, or a member of an Optional/Union), else None."""
    if typing.is_typeddict(kind):
        return kind
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return next((k for k in typing.get_args(kind) if typing.is_typeddict(k)), None)
    return None


def _values(kind):
    """The type of a mapping's or list's values (dict[str, X], list[X]: X), else None."""
    args = typing.get_args(kind)
    return args[-1] if typing.get_origin(kind) in (dict, list) and args else None


def _path(steps):
    """'.nodes[].listen'"""
    return "".join("[]" if s is ITEM else f".{s}" for s in steps)


def missing_key(kind, steps):
    """The path up to the first key the type does not have ('' when the path exists)."""
    for depth, step in enumerate(steps):
        typed = _typed_dict(kind)
        if step is ITEM:
            kind = None if typed is not None else _values(kind)  # a TypedDict's chosen key: stop
        elif typed is not None:
            hints = typing.get_type_hints(typed)
            if step not in hints:
                return _path(steps[: depth + 1]).lstrip(".")
            kind = hints[step]
        elif typing.get_origin(kind) is dict:
            kind = _values(kind)
        elif kind in (str, int, float, bool) or typing.get_origin(kind) is list:
            return _path(steps[: depth + 1]).lstrip(".")  # a key of a scalar or a list
        else:
            return ""
        if kind is None:
            return ""
    return ""


def _name(kind):
    """'JobPlan or SlurmRun', 'list[PairResult]'."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = (re.sub(r"[\w.]+\.(\w+)", r"\1", str(k)) if typing.get_args(k) else k.__name__ for k in kinds)
    return " or ".join(names)


def problem(kind, steps):
    """'' when one of the types (a tuple: any of them) has the path, else the first one's miss."""
    misses = [missing_key(k, steps) for k in (kind if isinstance(kind, tuple) else (kind,))]
    return "" if "" in misses else misses[0]


def problems(text, plans=PLANS):
    found = [
        (line, f"line {line}: {name}{_path(steps)} reads {bad!r}, which {_name(plans[name])} has not")
        for name in plans
        for line, steps in reads(text, name)
        if (bad := problem(plans[name], steps))
    ]
    return [message for _line, message in sorted(found)]


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_every_plan_read_exists_in_its_type(path):
    assert problems(path.read_text()) == []


def _tasks(items):
    """Every task mapping (inside blocks, rescue and always too)."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        for part in ("block", "rescue", "always"):
            yield from _tasks(task.get(part))
        yield task


def _task_files():
    """(path, its tasks) of every role's task and handler file and every playbook's plays."""
    for path in sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml")]):
        yield path, list(_tasks(yaml.safe_load(path.read_text())))
    for path in sorted(ROOT.glob("playbooks/*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            for part in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield path, list(_tasks(play.get(part)))


def _set(task):
    """{name: value} of what a task sets: its set_fact keys and its vars."""
    facts = task.get("ansible.builtin.set_fact") or task.get("set_fact") or {}
    return {**(task.get("vars") or {}), **facts}


def kept_plans(task):
    """Names a task keeps from wireup's code: what it sets from a wireup filter, the register of a
    wireup module or action."""
    names = [k for k, v in _set(task).items() if isinstance(v, str) and _WIREUP_CALL.search(v)]
    if task.get("register") and any(str(k).startswith(_WIREUP_MODULE) for k in task):
        names.append(task["register"])
    return names


def test_every_plan_kept_from_wireup_code_has_its_type():
    kept = {
        name: str(path.relative_to(ROOT))
        for path, tasks in _task_files()
        for t in tasks
        for name in kept_plans(t)
    }
    assert {name: where for name, where in kept.items() if name not in PLANS} == {}, (
        "give these plans a type (a TypedDict beside the code that makes them) and add them to PLANS"
    )


def test_every_name_a_role_sets_and_reads_by_key_has_its_type():
    """What a role builds itself (set_fact or vars from other plans, not from a wireup filter) and
    reads by key is a plan too; registered results of builtin modules are not."""
    made, registered = set(), set()
    for _file, tasks in _task_files():
        for task in tasks:
            made |= set(_set(task))
            registered |= {task["register"]} if task.get("register") else set()
    text = "".join(path.read_text() for path in SOURCES)
    read = {name for name in made - registered if any(s and s[0] is not ITEM for _, s in reads(text, name))}
    assert sorted(read - set(PLANS)) == []


def test_the_table_names_nothing_that_is_gone():
    """A renamed plan moves its entry."""
    text = "".join(path.read_text() for path in SOURCES)
    assert [name for name in PLANS if not re.search(rf"(?<![\w.]){name}\b", text)] == []


def test_the_check_catches_a_misspelt_key_and_follows_nested_types():
    text = (
        "argv: '{{ __bench_plan.compare.argv }}'\n"
        "x: '{{ __bench_plan.nccl_rnus }}'\n"
        "y: '{{ __bench_plan[\"compare\"].agrv }}'\n"
        "z: '{{ __bench_plan.tuned.values.NCCL_ALGO }}'\n"  # values: dict[str, str], any key
        "w: '{{ __bench_plan.skipped.bad }}'\n"  # a key of a string
        "ok: '{{ __bench_fabric_judged.record.failed.get(inventory_hostname) }}'\n"
        "n: '{{ __plan.nodes[host].listen }} {{ __plan.nodes[host].lisen }}'\n"
        "s: '{{ __plan.sacct_argv }} {{ __plan.watchdog.kye }} {{ __plan.watchdog.keys() }}'\n"
        "e: '{{ __errors | join }} {{ __errors.first }} {{ __cuda_repo_state.files[path].mode }}'\n"
        "l: '{{ __bench_fabric_results[0].pair }} {{ __bench_fabric_results[0].pear }}'\n"
    )
    assert problems(text) == [
        "line 2: __bench_plan.nccl_rnus reads 'nccl_rnus', which BenchPlan has not",
        "line 3: __bench_plan.compare.agrv reads 'compare.agrv', which BenchPlan has not",
        "line 5: __bench_plan.skipped.bad reads 'skipped.bad', which BenchPlan has not",
        "line 7: __plan.nodes[].lisen reads 'nodes[].lisen', which JobPlan or SlurmRun has not",
        "line 8: __plan.watchdog.kye reads 'watchdog.kye', which JobPlan or SlurmRun has not",
        "line 9: __errors.first reads 'first', which list[str] has not",
        "line 10: __bench_fabric_results[].pear reads '[].pear', which list[PairResult] has not",
    ]


def test_a_kept_plan_is_found_by_its_filter_or_module():
    fact = {
        "ansible.builtin.set_fact": {"__x": "{{ a | wireup.cluster.wireup_launch_status }}", "y": "{{ 1 }}"}
    }
    assert kept_plans(fact) == ["__x"]
    assert kept_plans({"vars": {"__v": "{{ a | map('wireup.cluster.wireup_launch_status') }}"}}) == ["__v"]
    assert kept_plans({"vars": {"__v": "{{ wireup_launch_watchdog_key(32) }}"}}) == ["__v"]
    assert kept_plans({"wireup.cluster.wireup_wait": {}, "register": "__r"}) == ["__r"]
    assert kept_plans({"ansible.builtin.command": {}, "register": "__r"}) == []
