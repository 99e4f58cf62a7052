"""What wireup's filter plugins share (controller side, so it may import Ansible, unlike the
pure ``wireup`` package in plugins/module_utils, which nodes run too)."""

from __future__ import annotations

import functools

from ansible.errors import AnsibleFilterError


def wrap(func):
    """The filter ``func`` with its ValueError turned into an AnsibleFilterError carrying the same
    message (wireup's messages name the variable and the fix)."""

    @functools.wraps(func)
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ValueError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return call
