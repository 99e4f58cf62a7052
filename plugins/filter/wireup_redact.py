"""Filters exposing plugins/module_utils/wireup/redact.py (the one rule for secret values) to the
roles: whether a task must hide its output (no_log), and values fit to print.

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_redact
short_description: which environment values are secret, and their printable form
description:
  - >-
    wireup_secret_names (an env mapping, wireup_secret_env -> the names whose values are secret,
    sorted: a task's no_log is
    "{{ env | wireup.cluster.wireup_secret_names(wireup_secret_env) | length > 0 }}"),
    wireup_redact_env (an env mapping -> the same keys, secret values '<redacted>', URLs without
    their user information), wireup_redact_url (a text -> its URLs' user information as '***').
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import redact
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


def redact_env(env, extra=()):
    return redact.redact_env(dict(env or {}), list(extra or ()))


class FilterModule:
    def filters(self):
        return {
            "wireup_secret_names": _wrap(secret_names),
            "wireup_redact_env": _wrap(redact_env),
            "wireup_redact_url": _wrap(redact.redact_url),
        }
