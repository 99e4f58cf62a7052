"""Filters exposing plugins/module_utils/wireup/torch_index.py (PyTorch wheel choice and checks).

Thin wrappers: the table and the rules live in wireup.torch_index; a ValueError becomes an
AnsibleFilterError carrying the same message (it names the variable and the fix).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_torch
short_description: PyTorch wheel variant, index URL and checks for the pytorch_venv role
description:
  - wireup_torch_choice (variant, index URL, pip requirement for a node),
    wireup_torch_check_spec, wireup_torch_version_in_range, wireup_torch_python_ok,
    wireup_torch_preinstalled, wireup_torch_verify_problems, wireup_torch_fact,
    wireup_torch_summary, wireup_torch_pip_missing (pinned requirements the venv lacks).
"""

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import torch_index


class FilterModule:
    def filters(self):
        return {
            "wireup_torch_choice": _wrap(torch_index.choose),
            "wireup_torch_check_spec": _wrap(torch_index.check_spec),
            "wireup_torch_version_in_range": _wrap(torch_index.version_in_range),
            "wireup_torch_python_ok": _wrap(torch_index.python_ok),
            "wireup_torch_preinstalled": _wrap(torch_index.preinstalled),
            "wireup_torch_verify_problems": _wrap(torch_index.verify_problems),
            "wireup_torch_fact": _wrap(torch_index.fact),
            "wireup_torch_summary": _wrap(torch_index.summary),
            "wireup_torch_pip_missing": _wrap(torch_index.pip_missing),
        }
