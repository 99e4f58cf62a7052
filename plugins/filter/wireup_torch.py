"""Filters exposing plugins/module_utils/wireup/plans/pytorch_venv.py to the pytorch_venv role.

Thin wrappers: the table, the rules and the plan live in wireup.plans.pytorch_venv; a ValueError becomes
an AnsibleFilterError carrying the same message (it names the variable and the fix).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_torch
short_description: The pytorch_venv role's plan, and the reading of its verification
description:
  - >-
    wireup_torch_probe_request (what the role's probe is asked), wireup_torch_plan (every decision
    and error for one node, from the probe and the role's variables: pytorch_venv.Settings, each
    passed by name), wireup_torch_verified (problems, the pytorch_venv_info fact, the report line and
    whether the local fact is to be written, from the verification), wireup_torch_pip_failure (the
    message for a failed pip task).
"""

import os

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import pytorch_venv
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def plan(probe_result, settings, node, check_mode=False):
    """pytorch_venv.plan, with the two facts only the controller knows (its own files)."""
    settings = dict(settings)
    controller = {
        "wheelhouse_dir": os.path.isdir(str(settings.get("wheelhouse_dir") or "")),
        "requirements_file": os.path.isfile(str(settings.get("requirements_file") or "")),
    }
    return pytorch_venv.plan(probe_result, settings, dict(node), bool(check_mode), controller)


class FilterModule:
    def filters(self):
        return {
            "wireup_torch_probe_request": _wrap(lambda settings: pytorch_venv.probe_request(dict(settings))),
            "wireup_torch_plan": _wrap(plan),
            "wireup_torch_verified": _wrap(pytorch_venv.verified),
            "wireup_torch_pip_failure": _wrap(pytorch_venv.pip_failure),
        }
