"""What wireup's filter plugins share (controller side, so it may import Ansible, unlike the
pure ``wireup`` package beside it).

Every plugins/filter/*.py file starts with the same three lines, which put this folder on
``sys.path`` (controller-side plugins cannot import custom ``ansible.module_utils`` packages),
then imports ``wrap`` from here::

    _UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
    if _UTILS not in sys.path:
        sys.path.insert(0, _UTILS)
"""

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
