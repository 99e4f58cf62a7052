"""Filters of the repair role (issue 37): thin wrappers around
plugins/module_utils/wireup/plans/repair.py. A ValueError becomes an AnsibleFilterError carrying the
same message."""

from __future__ import annotations

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import remediate, repair
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def wireup_repair_plan(show_result, nodes):
    """repair.plan: the registered scontrol show node -o and {host: wireup_node} -> the recheck plan."""
    return repair.plan(dict(show_result or {}), dict(nodes or {}))


def wireup_repair_return(plan, results, resume=False, check_mode=False):
    """repair.returns: the plan and {host: node_check's quick result} -> the nodes that return."""
    return repair.returns(dict(plan), dict(results or {}), resume=bool(resume), check_mode=bool(check_mode))


def wireup_repair_remedy(plan, returned, runs, state, group, **settings):
    """remediate.run_plan: the nodes the recheck kept drained -> which are acted on, in which batch
    (settings by name: remediate.ActSettings)."""
    return remediate.run_plan(
        dict(plan),
        dict(returned),
        dict(runs or {}),
        dict(state or {}),
        str(group),
        settings=remediate.ActSettings(**settings),
    )


def wireup_repair_step(candidate, jobs, apps, **settings):
    """remediate.node_step: one node's candidate and its two busy reads -> what is run on it
    (settings by name: remediate.StepSettings)."""
    return remediate.node_step(
        dict(candidate), dict(jobs or {}), dict(apps or {}), remediate.StepSettings(**settings)
    )


def wireup_repair_acted(step, commands, reboots):
    """remediate.acted: the step and its registered loops' results -> history events, recheck."""
    return remediate.acted(dict(step), list(commands or []), list(reboots or []))


def wireup_repair_rechecks(acted, results):
    """remediate.recheck_items: {host: its acted answer} and {host: quick result} -> recheck events."""
    return remediate.recheck_items(remediate.rechecked(dict(acted or {})), dict(results or {}))


def wireup_repair_batch(plan, acted):
    """repair.batch_plan: the repair plan of one batch's rechecked hosts ({host: its acted answer})."""
    return repair.batch_plan(dict(plan), remediate.rechecked(dict(acted or {})))


class FilterModule:
    def filters(self):
        filters = {
            "wireup_repair_plan": wireup_repair_plan,
            "wireup_repair_return": wireup_repair_return,
            "wireup_repair_remedy": wireup_repair_remedy,
            "wireup_repair_step": wireup_repair_step,
            "wireup_repair_acted": wireup_repair_acted,
            "wireup_repair_rechecks": wireup_repair_rechecks,
            "wireup_repair_batch": wireup_repair_batch,
        }
        return {name: _wrap(func) for name, func in filters.items()}
