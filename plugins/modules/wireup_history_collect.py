#!/usr/bin/python
"""Ansible module: a node's drain events (wireup-check's) into its history under the results folder."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_history_collect
short_description: Check a node's drain events again and write them into its history
description:
  - Runs on the controller (C(delegate_to) localhost), once per node, with what
    M(wireup.cluster.wireup_node_history) read there. A node is not trusted; each file is checked
    again, its name (C(TIME-SEQ-drain.json), the time and kind of its event), its size (at most
    4096 bytes), its event (the grammar of the controller's own events), its host (the node's own
    name, I(host)), and that it is a drain by C(node:wireup-check) (a node never speaks for the
    controller). At most 100 files a run.
  - Each accepted event is written into C(results/history/HOST/) atomically and exclusively (never
    over an existing file) unless an equal event is there already (collected before, its removal
    failed); RV(collected) names the files the node may now remove. What is refused stays on the
    node and is said in RV(refused).
options:
  results_dir:
    description: The results folder (C(wireup_results_dir)).
    type: path
    required: true
  host:
    description: The node's inventory name, the only host its events may name.
    type: str
    required: true
  files:
    description:
      - The node's files (RV(wireup.cluster.wireup_node_history#module:files)), each C(name) and C(text).
    type: list
    elements: dict
    default: []
  unread:
    description:
      - What the node's read left unread (RV(wireup.cluster.wireup_node_history#module:unread)), said
        again in RV(refused).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Checks every file and writes none in check mode (then nothing counts as collected).
  platform:
    support: full
    platforms: posix
    description: The controller's results folder, on any POSIX host.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Collect them into the node's history (results/history/HOST/), each checked again
  wireup_history_collect:
    results_dir: /srv/wireup/results
    host: "{{ inventory_hostname }}"
    files: "{{ __repair_node_history.files }}"
    unread: "{{ __repair_node_history.unread }}"
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: The events' new files under the results folder.
  returned: always
  type: list
  elements: str
  sample: ["/srv/wireup/results/history/node2/20261207T101500Z-000-drain.json"]
collected:
  description: The node's file names safe to remove now (written, or held already).
  returned: always
  type: list
  elements: str
  sample: ["20261207T101500Z-000-drain.json"]
refused:
  description: One line per file not collected, and why.
  returned: always
  type: list
  elements: str
  sample:
    - "history: node2: 20261207T101500Z-000-drain.json: names host 'node3', not the node's own: not collected"
show:
  description: What was collected and refused, as lines for the play's output.
  returned: always
  type: list
  elements: str
  sample: ["History: node2: 1 drain event(s) of wireup-check collected (1 new), 0 refused"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history


def main():
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "host": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "dict", "default": []},
            "unread": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        got = history.collect(p["results_dir"], p["host"], p["files"], p["unread"], dry=module.check_mode)
    except (OSError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(got["written"]), show=history.collected_lines(p["host"], got), **got)


if __name__ == "__main__":
    main()
