"""Import wireup's filter and action plugins once, in ansible-playbook's own process.

Each task runs in a worker process forked from ansible-playbook's. A filter named by its FQCN
(``wireup.cluster.wireup_pkg_nccl_plan``) is found by importing the collection's filter files one by
one, in name order, until one defines it (ansible-core's Jinja2Loader), and the worker forgets them
when the task ends: every task that used a wireup filter paid those imports again, 0.3-0.5 s on the
2-core testbed machine against 0.04 s for a task with a builtin filter (docs/performance.md, issue
36). Imported here first, the workers inherit them (Ansible's loader takes a plugin already in
``sys.modules`` as loaded). The plugin adds no variables.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: wireup_preload
short_description: Import wireup's filter and action plugins once, before the workers fork
version_added: 0.1.0
description:
  - Adds no variables. The first time Ansible asks it for variables (in ansible-playbook's own
    process, before any task's worker is forked), it imports every filter and action plugin of the
    C(wireup.cluster) collection, so that each task's worker inherits them instead of importing them
    again. Without it every task that uses a wireup filter spends 0.3-0.5 s importing (measured on a
    2-core machine; docs/performance.md).
  - Enable it beside Ansible's own vars plugin, in C(ansible.cfg) C([defaults])
    C(vars_plugins_enabled = ansible.builtin.host_group_vars, wireup.cluster.wireup_preload), as
    wireup's C(ansible.cfg) does. A plugin that fails to import is left to Ansible, which reports it
    where a task uses it.
author: wireup (!UNKNOWN)
requirements:
  - Enabled in configuration (C(vars_plugins_enabled))
"""

import importlib
import pkgutil

from ansible.plugins.vars import BaseVarsPlugin

COLLECTION = "ansible_collections.wireup.cluster.plugins"
KINDS = ("filter", "action")


def plugin_names(kind: str) -> list[str]:
    """The Python module names Ansible's loader gives the collection's plugins of this kind."""
    package = importlib.import_module(f"{COLLECTION}.{kind}")
    return [
        f"{COLLECTION}.{kind}.{name}"
        for _finder, name, is_package in pkgutil.iter_modules(package.__path__)
        if not is_package
    ]


def preload() -> list[str]:
    """Import every filter and action plugin of the collection; the names that failed to import."""
    failed = []
    for kind in KINDS:
        for name in plugin_names(kind):
            try:
                importlib.import_module(name)
            except Exception:  # Ansible's loader reports it where a task uses the plugin
                failed.append(name)
    return failed


class VarsModule(BaseVarsPlugin):
    is_stateless = True
    _done = False

    def get_vars(self, loader, path, entities, cache=True):
        if not VarsModule._done:
            VarsModule._done = True
            preload()
        return {}
