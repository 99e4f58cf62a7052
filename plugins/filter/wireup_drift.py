"""launch.yml's refusal of a job whose nodes differ where a mismatch hangs NCCL
(plugins/module_utils/wireup/capability/drift.py, issue 37 item 5).

A thin wrapper: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_drift
short_description: launch.yml's refusal of nodes that differ where a mismatch hangs NCCL
description:
  - "wireup_drift_refusals: {host: wireup_node} and wireup_launch_accept_drift in, one message per
    field where the nodes differ (NCCL's version, the net plugin, the driver's branch) and that the
    operator did not accept out (drift.launch_refusals)."
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import drift
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def drift_refusals(facts, accept):
    """launch.yml's refusals of {host: wireup_node}, the fields in accept excepted."""
    if not isinstance(facts, dict):
        raise ValueError("wireup_drift_refusals: the input must be {host: wireup_node}")
    return drift.launch_refusals(dict(facts), accept if isinstance(accept, str) else list(accept or []))


class FilterModule:
    def filters(self):
        return {"wireup_drift_refusals": _wrap(drift_refusals)}
