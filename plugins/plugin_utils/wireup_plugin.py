"""What wireup's filter plugins share (controller side, so it may import Ansible, unlike the
pure ``wireup`` package in plugins/module_utils, which nodes run too)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

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


def plain(value):
    """A value from Ansible's templating as plain data: its (lazy) mappings as dicts and sequences as
    lists, all the way down. ansible-core 2.21 warns (deprecated plugin loader) when code deep-copies
    a lazy container, as ArgumentSpecValidator does with what it validates."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
