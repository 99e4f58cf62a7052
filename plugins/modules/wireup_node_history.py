#!/usr/bin/python
"""Ansible module: read, or remove once collected, the drain events wireup-check left on a node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_node_history
short_description: Read or remove the drain events wireup-check wrote on a node
description:
  - wireup-check (slurmd's health check) has no controller to write to, so each drain it makes is
    an event file in a folder of the node (C(TIME-SEQ-drain.json)) until C(repair.yml) collects it
    into C(results/history/HOST/) (M(wireup.cluster.wireup_history_collect)).
  - Without I(remove), reads the folder and changes nothing, oldest first, at most 100 files, only
    regular files named as events and of at most 4096 bytes; a link is never followed; every
    other entry is named in RV(unread). The controller checks every file again.
  - With I(remove), removes those names (each of the event file grammar; a link itself, never
    what it points to) and reads nothing. In check mode nothing is removed.
options:
  path:
    description: wireup-check's history folder on the node (its configuration's C(history_dir)).
    type: path
    default: /var/lib/wireup/check/history
  remove:
    description:
      - The names to remove (what the controller collected; an empty list removes nothing). Not
        given, the folder is read.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
    description: Reads as a run does; removes nothing in check mode.
  platform:
    support: full
    platforms: posix
    description: A node with wireup-check (node_check role).
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Read the drains wireup-check recorded on the node
  wireup_node_history:
  register: __repair_node_history

- name: Remove the collected events from the node
  wireup_node_history:
    remove: "{{ __repair_collected.collected }}"
"""

RETURN = r"""
files:
  description: The event files read, oldest first (none with I(remove)).
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: The file's name, type: str, sample: "20261207T101500Z-000-drain.json"}
    text:
      description: Its content (JSON, not trusted by the controller)
      type: str
      sample: >-
        {"host": "node2", "kind": "drain", "time": 1796638500.0, "who": "node:wireup-check",
        "why": "wireup: [node_problem] hw/quick: NIC mlx5_0:1 missing"}
unread:
  description: One line per entry of the folder not read, and why.
  returned: always
  type: list
  elements: str
  sample: ["'notes.txt': not an event's file name"]
removed:
  description: The names removed (none in check mode or without I(remove)).
  returned: always
  type: list
  elements: str
  sample: ["20261207T101500Z-000-drain.json"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": history.NODE_DIR},
            "remove": {"type": "list", "elements": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    files, skipped, removed = [], [], []
    try:
        if p["remove"] is None:
            files, skipped = history.node_files(p["path"])
        elif not module.check_mode:
            removed = history.remove_node(p["path"], p["remove"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"{p['path']}: {exc}")
    module.exit_json(changed=bool(removed), files=files, unread=skipped, removed=removed)


if __name__ == "__main__":
    main()
