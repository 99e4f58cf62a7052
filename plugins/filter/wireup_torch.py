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

from ansible.errors import AnsibleFilterError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "module_utils"))

from wireup import torch_index


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ValueError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    call.__name__ = func.__name__
    call.__doc__ = func.__doc__
    return call


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
