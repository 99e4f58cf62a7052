"""Filters exposing plugins/module_utils/wireup/pytorch_venv.py to the pytorch_venv role.

Thin wrappers: the table, the rules and the plan live in wireup.torch_index; a ValueError becomes
an AnsibleFilterError carrying the same message (it names the variable and the fix).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_torch
short_description: The pytorch_venv role's plan, and the reading of its verification
description:
  - wireup_torch_probe_request (what the role's probe is asked), wireup_torch_plan (every decision
    and error for one node, from the probe and the role's variables), wireup_torch_verified
    (problems, the pytorch_venv_info fact and the report line, from the verification),
    wireup_torch_managed_paths and wireup_torch_venv_drift (what the venv's builtins would change),
    wireup_torch_pip_failure (the message for a failed pip task).
"""

import os
import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import pytorch_venv as torch_index


def plan(probe_result, settings, node, check_mode=False):
    """torch_index.plan, with the two facts only the controller knows (its own files)."""
    settings = dict(settings)
    controller = {
        "wheelhouse_dir": os.path.isdir(str(settings.get("pytorch_venv_wheelhouse_dir") or "")),
        "requirements_file": os.path.isfile(str(settings.get("pytorch_venv_requirements_file") or "")),
    }
    return torch_index.plan(probe_result, settings, dict(node), bool(check_mode), controller)


class FilterModule:
    def filters(self):
        return {
            "wireup_torch_probe_request": _wrap(torch_index.probe_request),
            "wireup_torch_plan": _wrap(plan),
            "wireup_torch_managed_paths": _wrap(torch_index.managed_paths),
            "wireup_torch_venv_drift": _wrap(torch_index.venv_drift),
            "wireup_torch_verified": _wrap(torch_index.verified),
            "wireup_torch_pip_failure": _wrap(torch_index.pip_failure),
        }
