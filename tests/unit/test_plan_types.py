"""Typed seams (issue 24, item 2): every read of a typed plan in the task files, templates and
playbooks (``__bench_plan.compare.argv``, ``__bench_report_store['report']``) names a key its type
has, following nested TypedDicts; and every plan a task keeps (set_fact from a wireup_ filter, or
register of a wireup_ module) has its type here, or is listed as not typed yet.

PLANS maps a name (set_fact, register, loop_var or task var) to the TypedDict of its value. Add a
role's plans to it as they get their types; a name leaves NOT_YET_TYPED when its type joins PLANS.
A read whose next step is a call (``.get(``, ``.items(``) stops at the object it is called on;
subscripts by a variable stop the check there (they read a mapping by a computed key)."""

from __future__ import annotations

import pathlib
import re
import types
import typing

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import (
    bench,
    bench_fabric,
    bench_report,
    gpuhealth,
    gputrial,
    nccltests,
    topology,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLANS = {
    "__bench_plan": bench.BenchPlan,
    "__bench_torch": bench.TorchJob,
    "__bench_multi": bench.MultiNode,
    "__bench_torch_logs": dict[str, str],  # {TorchJob kind: its log path on the controller}
    "__bench_tuning": bench.Tuning,
    "__bench_result": bench.NodeData,
    "__bench_report_run": bench_report.ReportRun,
    "__bench_report_store": bench_report.StoreAnswer,
    "__bench_fabric_plan": bench_fabric.FabricPlan,
    "__bench_fabric_job": bench_fabric.FabricJob,
    "__bench_fabric_judge": bench_fabric.JudgeAnswer,
    "__bench_fabric_judged": bench_fabric.JudgeAnswer,
    "__gpu_topology_probe": topology.TopologyProbe,
    "__gpu_trial_plan": gputrial.TrialPlan,
    "__gpu_trial_health_before": gpuhealth.HealthRead,
    "__gpu_trial_health_after": gpuhealth.HealthRead,
    "gpu_trial_node": gputrial.TrialNode,
    "gpu_trial_run": gputrial.TrialRun,
    "__nccl_tests_info": nccltests.NcclInfo,
}
# Plans kept by tasks whose types are still to come (the site and launch roles, issue 24's other
# half; nccl_tests' plan is packages.nccl_tests_plan's).
NOT_YET_TYPED = {
    "__bench_fabric_results",  # a list of bench_fabric.result's answers, read whole by the judge
    "__cuda_repo",
    "__cuda_repo_state",
    "__nccl_files",
    "__nccl_plan",
    "__nccl_tests",
    "__nvidia_driver_plan",
    "__nvidia_driver_specs",
    "__pytorch_venv_files",
    "__pytorch_venv_plan",
    "__torchrun_launch_drain",
    "__torchrun_launch_jobs",
    "__torchrun_launch_plan",
    "__torchrun_launch_result",
    "__torchrun_launch_status",
    "__torchrun_launch_verdict",
    "__torchrun_launch_watchdog_key",
}
SOURCES = [
    *sorted(ROOT.glob("roles/*/tasks/*.yml")),
    *sorted(p for p in ROOT.glob("roles/*/templates/**/*") if p.is_file()),
    *sorted(ROOT.glob("playbooks/*.yml")),
]
KEY = r"(?:\.[A-Za-z_]\w*|\[(?:'[^']*'|\"[^\"]*\")\])"


def reads(text, name):
    """[(line number, [key, ...])] of every read of ``name``'s keys in text."""
    out = []
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}((?:{KEY})+)", text):
        keys = [k.strip(".[]'\"") for k in re.findall(KEY, match.group(1))]
        if text[match.end() : match.end() + 1] == "(":
            keys = keys[:-1]  # a method of the value (.get, .items), not a key
        if keys:
            out.append((text.count("\n", 0, match.start()) + 1, keys))
    return out


def _typed_dict(kind):
    """The TypedDict in kind (itself, or a member of an Optional/Union), else None."""
    if typing.is_typeddict(kind):
        return kind
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return next((k for k in typing.get_args(kind) if typing.is_typeddict(k)), None)
    return None


def missing_key(kind, keys):
    """The first key of the path that the type does not have ('' when the path exists). Past a
    mapping of any keys (dict[str, X]: into X), a plain dict, a list or Any, nothing is checked."""
    for depth, key in enumerate(keys):
        typed = _typed_dict(kind)
        if typed is not None:
            hints = typing.get_type_hints(typed)
            if key not in hints:
                return ".".join(keys[: depth + 1])
            kind = hints[key]
        elif typing.get_origin(kind) is dict and typing.get_args(kind):
            kind = typing.get_args(kind)[1]
        elif kind in (str, int, float, bool):
            return ".".join(keys[: depth + 1])
        else:
            return ""
    return ""


def problems(text, plans=PLANS):
    return [
        f"line {line}: {name}.{'.'.join(keys)} reads {bad!r}, which {plans[name].__name__} has not"
        for name in plans
        for line, keys in reads(text, name)
        if (bad := missing_key(plans[name], keys))
    ]


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_every_plan_read_exists_in_its_type(path):
    assert problems(path.read_text()) == []


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        for part in ("block", "rescue", "always"):
            yield from _tasks(task.get(part))
        yield task


def kept_plans(task):
    """Names a task keeps from wireup's code: set_fact keys whose value calls a wireup_ filter, the
    register of a wireup_ module."""
    wireup = re.compile(r"\|\s*wireup_\w+|\bwireup_\w+\(")
    facts = task.get("ansible.builtin.set_fact") or task.get("set_fact") or {}
    names = [k for k, v in facts.items() if isinstance(v, str) and wireup.search(v)]
    if any(str(k).startswith(("wireup_", "wireup.cluster.wireup_")) for k in task) and task.get("register"):
        names.append(task["register"])
    return names


def test_every_kept_plan_has_its_type_or_waits_for_one():
    kept = {
        name: str(path.relative_to(ROOT))
        for path in sorted(ROOT.glob("roles/*/tasks/*.yml"))
        for task in _tasks(yaml.safe_load(path.read_text()))
        for name in kept_plans(task)
    }
    untyped = {name: where for name, where in kept.items() if name not in PLANS and name not in NOT_YET_TYPED}
    assert untyped == {}, "give these plans a TypedDict and add them to PLANS"
    # The tables name nothing that is gone (a renamed plan must move its entry).
    text = "".join(path.read_text() for path in SOURCES)
    assert [name for name in [*PLANS, *NOT_YET_TYPED] if name not in text] == []


def test_the_check_catches_a_misspelt_key_and_follows_nested_types():
    text = (
        "argv: '{{ __bench_plan.compare.argv }}'\n"
        "x: '{{ __bench_plan.nccl_rnus }}'\n"
        "y: '{{ __bench_plan[\"compare\"].agrv }}'\n"
        "z: '{{ __bench_plan.tuned.values.NCCL_ALGO }}'\n"  # values: dict[str, str], any key
        "w: '{{ __bench_plan.skipped.bad }}'\n"  # a key of a string
        "ok: '{{ __bench_fabric_judged.record.failed.get(inventory_hostname) }}'\n"
    )
    assert problems(text) == [
        "line 2: __bench_plan.nccl_rnus reads 'nccl_rnus', which BenchPlan has not",
        "line 3: __bench_plan.compare.agrv reads 'compare.agrv', which BenchPlan has not",
        "line 5: __bench_plan.skipped.bad reads 'skipped.bad', which BenchPlan has not",
    ]
