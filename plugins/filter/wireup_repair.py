"""Filters of the repair role (issue 37): thin wrappers around
plugins/module_utils/wireup/plans/repair.py. A ValueError becomes an AnsibleFilterError carrying the
same message."""

from __future__ import annotations

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import repair
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def wireup_repair_plan(show_result, nodes):
    """repair.plan: the registered scontrol show node -o and {host: wireup_node} -> the recheck plan."""
    return repair.plan(dict(show_result or {}), dict(nodes or {}))


def wireup_repair_return(plan, results, resume=False, check_mode=False):
    """repair.returns: the plan and {host: node_check's quick result} -> the nodes that return."""
    return repair.returns(dict(plan), dict(results or {}), resume=bool(resume), check_mode=bool(check_mode))


class FilterModule:
    def filters(self):
        filters = {"wireup_repair_plan": wireup_repair_plan, "wireup_repair_return": wireup_repair_return}
        return {name: _wrap(func) for name, func in filters.items()}
