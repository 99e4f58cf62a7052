"""Filters exposing plugins/module_utils/wireup/fabricrun.py to launch.yml (the refusal of nodes
whose latest bench verdict FAILed).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_fabric
short_description: launch.yml's refusal of nodes that FAILed their latest bench
description:
  - "wireup_launch_refusals: hosts and results_dir in, a mapping host -> reason out, for each host whose
    newest intra-node bench record or newest fabric run says FAIL (fabricrun.refusals over
    fabricrun.latest_verdicts)."
"""

import pathlib
import sys

from ansible.errors import AnsibleFilterError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "module_utils"))

from wireup import fabricrun


def launch_refusals(hosts, results_dir):
    """{host: reason} for the hosts launch.yml must refuse (read on the controller)."""
    try:
        bench, fabric_record = fabricrun.latest_verdicts(str(results_dir), list(hosts))
        return fabricrun.refusals(list(hosts), bench, fabric_record)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"wireup_launch_refusals": launch_refusals}
