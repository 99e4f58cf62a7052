"""Filters exposing plugins/module_utils/wireup/plans/gpu_trial.py to the gpu_trial role (its plan, its node
fact, the fingerprint's cost line, the run the report play gathers).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message; settings
come as keyword arguments named in a dataclass (a misspelt one is an error, not None).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_gpu_trial
short_description: The gpu_trial role's plan, node fact and report input
description:
  - wireup_gpu_trial_plan (wireup_node, the host and each gpu_trial setting by name -> gpu_trial.TrialPlan),
    wireup_gpu_trial_node (plan, run id, host, the registered reads and runs -> the fact gpu_trial_node),
    wireup_gpu_trial_cost (host, the fingerprint's registered result -> one line with its cost),
    wireup_gpu_trial_health_lines (host, the health reads before and after -> the line shown of
    the node's GPU health, none when no read ran),
    wireup_gpu_trial_run (the group, each host's gpu_trial_node and the thresholds by name -> what
    bench_report hands wireup_bench_store).
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import gpu_trial
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def gpu_trial_plan(node, host, **settings):
    """wireup_node, the host, and gpu_trial.TrialSettings' fields by name -> gpu_trial.plan's answer."""
    return gpu_trial.plan(dict(node or {}), gpu_trial.TrialSettings(**settings), str(host))


def gpu_trial_node(the_plan, run_id, host, *, reads, fingerprint, dcgm_run):
    return gpu_trial.node_data(
        dict(the_plan or {}),
        run_id,
        str(host),
        reads=list(reads or ()),
        fingerprint=fingerprint,
        dcgm_run=dcgm_run,
    )


def gpu_trial_cost(host, fingerprint):
    return gpu_trial.cost_line(str(host), fingerprint)


def gpu_trial_health_lines(host, reads):
    return gpu_trial.health_lines(str(host), list(reads or ()))


def gpu_trial_run(group, *, nodes, **thresholds):
    """gpu_trial.run_data's answer; nodes: per host of group, in its order, its gpu_trial_node (None
    where it has none); thresholds: gpu_trial.JudgeSettings' fields by name."""
    return gpu_trial.run_data(list(group), list(nodes), gpu_trial.JudgeSettings(**thresholds))


class FilterModule:
    def filters(self):
        return {
            "wireup_gpu_trial_plan": _wrap(gpu_trial_plan),
            "wireup_gpu_trial_node": _wrap(gpu_trial_node),
            "wireup_gpu_trial_cost": _wrap(gpu_trial_cost),
            "wireup_gpu_trial_health_lines": _wrap(gpu_trial_health_lines),
            "wireup_gpu_trial_run": _wrap(gpu_trial_run),
        }
