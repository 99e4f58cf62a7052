#!/usr/bin/python
"""Ansible module: write events into nodes' histories under the results folder (the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_history
short_description: Write drain and return events into each node's history under the results folder
description:
  - Runs on the controller (C(delegate_to) localhost). For each item of a plan's list (the drain
    step's C(drain), repair's C(resume), the remediation's actions and rechecks) writes one event,
    C(results/history/HOST/TIME-SEQ-KIND.json),
    atomically and exclusively (never over an earlier event), saying who (C(controller:USER), this
    process's user) and why (the drain reason, the return's why).
  - Every event is checked before any is written (host names, the reason one printable line). In
    check mode nothing is written.
options:
  results_dir:
    description: The results folder (C(wireup_results_dir)).
    type: path
    required: true
  kind:
    description: What happened to the nodes.
    type: str
    required: true
    choices: [drain, return, action, recheck]
  items:
    description:
      - The plan's items, each with C(host) and C(reason) (drain) or C(why) (return, action,
        recheck).
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
    description: Checks every event and writes none in check mode.
  platform:
    support: full
    platforms: posix
    description: The controller's results folder, on any POSIX host.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Record each drain in the node's history
  wireup_history:
    results_dir: /srv/wireup/results
    kind: drain
    items: "{{ __torchrun_launch_drain.drain }}"
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: The events' files (none in check mode).
  returned: always
  type: list
  elements: str
  sample: ["/srv/wireup/results/history/node2/20261207T101500Z-000-drain.json"]
"""

import getpass

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history


def main():
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "kind": {"type": "str", "required": True, "choices": ["drain", "return", "action", "recheck"]},
            "items": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        events = history.item_events(p["kind"], p["items"], history.who_of(getpass.getuser()))
        written = [] if module.check_mode else [history.write(p["results_dir"], ev) for ev in events]
    except (OSError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(written), written=written)


if __name__ == "__main__":
    main()
