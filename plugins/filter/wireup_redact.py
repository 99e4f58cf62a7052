"""The filter exposing plugins/module_utils/wireup/core/redact.py (the one rule for secret values) to the
roles: whether a task must hide its output (no_log).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_redact
short_description: which environment values are secret
description:
  - >-
    wireup_secret_names (an env mapping, or a list of them, and wireup_secret_env -> the names whose
    values are secret, sorted: a task's no_log is
    "{{ env | wireup.cluster.wireup_secret_names(wireup_secret_env) | length > 0 }}"). What wireup
    writes or prints is redacted in Python (wireup.core.redact), not in templates.
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import redact
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def _mapping(value):
    """One env mapping from a mapping or a list of them (a task's several environments)."""
    if isinstance(value, list | tuple):
        out = {}
        for item in value:
            out.update(item or {})
        return out
    return dict(value or {})


def secret_names(env, extra=()):
    return redact.secret_names(_mapping(env), list(extra or ()))


class FilterModule:
    def filters(self):
        return {
            "wireup_secret_names": _wrap(secret_names),
        }
