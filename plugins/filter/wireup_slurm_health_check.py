"""Filter of the slurm_health_check role (issue 26): a thin wrapper around
plugins/module_utils/wireup/plans/slurm_health_check.py. A ValueError becomes an AnsibleFilterError
carrying the same message; settings come as keyword arguments named in
slurm_health_check.Settings (a misspelt one is an error)."""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_slurm_health_check
short_description: The slurm_health_check role's plan
description:
  - "wireup_slurm_health_check_plan (slurp's result of slurm.conf, the node and each
    slurm_health_check setting by name -> slurm_health_check.SlurmHealthPlan, wireup's block in
    slurm.conf or why it cannot be written)."
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import slurm_health_check
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def slurm_health_check_plan(slurp, *, node, **settings):
    """The slurped slurm.conf (a failed slurp: no such file), the node and
    slurm_health_check.Settings' fields by name -> slurm_health_check.plan's answer."""
    return slurm_health_check.plan(
        slurm_health_check.conf_text(slurp), str(node), slurm_health_check.Settings(**settings)
    )


class FilterModule:
    def filters(self):
        return {"wireup_slurm_health_check_plan": _wrap(slurm_health_check_plan)}
