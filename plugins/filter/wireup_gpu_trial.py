"""Filters exposing plugins/module_utils/wireup/gputrial.py to the gpu_trial role (its plan, its node
fact, the fingerprint's cost line) and to the bench report play (the run's GPU trial data).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_gpu_trial
short_description: The gpu_trial role's plan, node fact and report input
description:
  - wireup_gpu_trial_plan (wireup_node, the gpu_trial settings, host, ansible_run_tags -> the plan),
    wireup_gpu_trial_node (plan, run id, host, the registered reads and runs -> the fact gpu_trial_node),
    wireup_gpu_trial_cost (host, the fingerprint's registered result -> one line with its cost),
    wireup_gpu_trial_run (the group, hostvars -> every host's gpu_trial_node for the store).
"""

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import gputrial


def gpu_trial_plan(node, settings, host, tags=()):
    return gputrial.plan(dict(node or {}), dict(settings), str(host), list(tags or ()))


def gpu_trial_node(the_plan, run_id, host, *, reads=(), fingerprint=None, dcgm_run=None):
    return gputrial.node_data(
        dict(the_plan or {}),
        run_id,
        str(host),
        reads=list(reads or ()),
        fingerprint=fingerprint,
        dcgm_run=dcgm_run,
    )


def gpu_trial_cost(host, fingerprint):
    return gputrial.cost_line(str(host), fingerprint)


def gpu_trial_run(group, hostvars):
    return gputrial.run_data(list(group), hostvars)


class FilterModule:
    def filters(self):
        return {
            "wireup_gpu_trial_plan": _wrap(gpu_trial_plan),
            "wireup_gpu_trial_node": _wrap(gpu_trial_node),
            "wireup_gpu_trial_cost": _wrap(gpu_trial_cost),
            "wireup_gpu_trial_run": _wrap(gpu_trial_run),
        }
