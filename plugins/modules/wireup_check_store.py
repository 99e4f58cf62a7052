#!/usr/bin/python
"""Ansible module (controller side): store one quick-check run (bench.yml --tags quick)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_check_store
short_description: Store and report one quick node check run on the controller
description:
  - "Runs where the results live: the controller (a localhost play)."
  - Writes C(RESULTS/quick/RUN/HOST.json) for every node (created exclusively, never overwritten,
    atomically, 0640 in 0750 folders) and C(report.md), from what each node's wireup-check printed.
  - A node without a result (unreachable, failed earlier) gets the verdict UNREACHABLE.
  - Logic lives in module_utils wireup.checkstore; this is a thin wrapper.
options:
  results_dir:
    description: wireup's results folder on the controller (wireup_results_dir).
    type: path
    required: true
  run_id:
    description: Run id like 20261129T164455Z; a taken id gets a -N suffix.
    type: str
    required: true
  gathered:
    description:
      - "C({results: {HOST: result}, lost: [HOST]}) as the filter wireup_check_gather builds it from the
        hosts' node_check_result facts."
    type: dict
    required: true
  lost_reasons:
    description: "Ansible's answer for each lost host it cannot reach now: C({HOST: REASON})."
    type: dict
    default: {}
author: wireup
"""

EXAMPLES = r"""
- name: Store the quick check's run
  wireup_check_store:
    results_dir: "{{ wireup_results_dir }}"
    run_id: "20261202T080000Z"
    gathered: "{{ groups.gpu_nodes | wireup_check_gather(hostvars) }}"
"""

RETURN = r"""
run_id:
  description: The run id used (with a -N suffix when the given one was taken).
  returned: success
  type: str
run_dir:
  description: The run folder (empty in check mode).
  returned: success
  type: str
verdicts:
  description: Verdict per host (PASS, FAIL, ERROR, NO_BASELINE, UNREACHABLE).
  returned: success
  type: dict
summary:
  description: One line per host, sorted by host.
  returned: success
  type: list
  elements: str
failed_hosts:
  description: Hosts whose verdict is not PASS.
  returned: success
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.wireup import checkstore, results


def main():
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "gathered": {"type": "dict", "required": True},
            "lost_reasons": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    gathered = {
        "results": dict(module.params["gathered"].get("results") or {}),
        "lost": list(module.params["gathered"].get("lost") or []),
    }
    if module.check_mode:
        records = {
            h: checkstore.record(h, module.params["run_id"], r) for h, r in gathered["results"].items()
        }
        run_id, run_dir = module.params["run_id"], ""
    else:
        os.umask(results.RESULTS_UMASK)
        try:
            run_id, run_dir, records = checkstore.store(
                module.params["results_dir"], module.params["run_id"], gathered, module.params["lost_reasons"]
            )
        except (ValueError, OSError) as err:
            module.fail_json(msg=f"storing the quick check failed: {err}")
    module.exit_json(
        changed=not module.check_mode,
        run_id=run_id,
        run_dir=os.path.abspath(run_dir) if run_dir else "",
        verdicts={h: r["verdict"] for h, r in records.items()},
        summary=[checkstore.summary_line(records[h]) for h in sorted(records)],
        failed_hosts=sorted(h for h, r in records.items() if r["verdict"] in checkstore.FAILING),
    )


if __name__ == "__main__":
    main()
