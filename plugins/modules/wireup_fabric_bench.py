#!/usr/bin/python
"""Ansible module (controller): judge the fabric bench's pairs so far, plan the next round, store."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_fabric_bench
short_description: Judge the fabric bench's node pairs, plan the next round, store the run
description:
  - Runs on the controller. Reads each pair job's logs (the benchmark's JSON line and NCCL's INFO
    lines), judges the pairs and plans the next round with
    C(plugins/module_utils/wireup/judge/fabric_run.py) and C(judge/pairwise.py); with I(store), writes
    C(<results_dir>/fabric/<run_id>/fabric.json) and C(fabric.md).
  - With no results it only returns the first round.
  - A failing pair or whole-group run is run once more in the next round (its confirmation, a
    result with I(confirms)) before anything is decided from it; the verdict is the confirmation's,
    and the record keeps both figures.
options:
  nodes:
    description: Inventory names of the node group.
    type: list
    elements: str
    required: true
  results:
    description: >-
      One entry per node per job - round, pair (the job's members - two, or the whole group),
      kind (pair, or group for the whole-group run after the pairs), confirms (the round whose
      failing figure the job ran again, 0 for a first run), host, log (its path on the
      controller, may be empty), ok (the launch verdict), reason.
    type: list
    elements: dict
    default: []
  unreachable:
    description: Nodes Ansible could not reach (left out of the pairs, named in the report).
    type: list
    elements: str
    default: []
  nics:
    description: Each node's C(gpu_topology_nics).
    type: dict
    default: {}
  topologies:
    description: Each GPU node's C(gpu_topology) (for GPU-NIC closeness).
    type: dict
    default: {}
  ranks:
    description: Processes per node each pair job ran (bounds the rails used).
    type: dict
    default: {}
  pass_ratio:
    description: A pair passes at this fraction of its reference (expected figure or median).
    type: float
    default: 0.7
  max_rounds:
    description: >-
      Rounds of new pairs at most; each may be followed by one confirmation round (only the
      failing pairs of the round before), and the whole-group run and its confirmation are two
      more (at most 2 x max_rounds + 2 rounds).
    type: int
    default: 4
  store:
    description: Write the run's record and report section.
    type: bool
    default: false
  results_dir:
    description: The controller's results folder.
    type: path
    default: ""
  run_id:
    description:
      - The fabric run id; empty starts a new run (round 0) in a fresh folder, named by UTC time with
        a -N suffix when that id is taken (a second run never replaces the first), returned in
        record.run_id.
      - A later round passes it back and rewrites that run's record (atomically); its folder must exist.
    type: str
    default: ""
  tolerance:
    description: A node's best pair below (1 - tolerance) x its last passing figure is a finding.
    type: float
    default: 0.10
attributes:
  check_mode:
    support: full
    description: Plans and judges as in a run; reserves no folder and writes no record.
  diff_mode:
    support: none
    description: Writes no diff of the files it writes.
  platform:
    support: full
    platforms: posix
    description: The controller, where the results store is.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Judge the round
  wireup_fabric_bench:
    nodes: "{{ groups['gpu_nodes'] }}"
    results: "{{ results }}"
  delegate_to: localhost
"""

RETURN = r"""
plan:
  description: >-
    round (next), next_pairs, next_jobs [{members, kind, name, confirms}], done, phase (pairs,
    confirm, group, done), reference_gbs, reference_kind, pairs [{pair, round, busbw,
    reference_gbs, ratio, verdict, error, used (first, confirmation or pending), first and
    confirmation (each round, busbw, ratio, verdict, error), confirmation_note}], group (the
    whole-group run - members, round, busbw, reference_gbs, reference_kind, cpu_share, ratio,
    verdict PASS|FAIL|PENDING|NOT RUN, error, note, used, first, confirmation), nodes {host: {state,
    evidence}}, bad, good, unreachable, verdicts {host: PASS|FAIL|UNREACHABLE|N/A}, failed {host:
    why the bench fails it}, findings, pair_details, rounds_for_n, errors.
  returned: always
  type: dict
  sample:
    round: 1
    phase: pairs
    done: false
    next_pairs:
    - - node1
      - node2
    verdicts: {}
    errors: []
report:
  description: Paths of fabric.json and fabric.md (and fabric.png when plotted) when stored.
  returned: when store
  type: dict
  sample:
    json: results/fabric/20261129T164455Z/fabric.json
    md: results/fabric/20261129T164455Z/fabric.md
record:
  description: The run's record as fabric.json holds it (fabric.build_record).
  returned: when store
  type: dict
  sample:
    run_id: 20261129T164455Z
    verdicts:
      node1: PASS
      node2: PASS
    bad: []
    unreachable: []
    rounds: 1
summary:
  description: >-
    One line on the run for the play - each node's verdict, the rounds, the bad and unreachable
    nodes, the whole-group run, the report.
  returned: when store
  type: str
  sample: >-
    fabric: node1 PASS, node2 PASS in 1 round(s); whole group PASS;
    report results/fabric/20261129T164455Z/fabric.md
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import fabric
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import fabric_run
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import query, results


def _read(path):
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _previous(fabric_dir, run_id):
    """The newest readable fabric record before this run's (None without one): the runs of
    results_dir/fabric (fabric_dir) newest first, through the store's one query (query.runs)."""
    runs = [d for _kind, d in query.runs(os.path.dirname(fabric_dir), ("fabric",)) if d != run_id]
    for d in runs:
        try:
            return fabric.load_fabric_record(os.path.join(fabric_dir, d, "fabric.json"))
        except (OSError, ValueError):  # missing or damaged: the run before it
            continue
    return None


def _run_folder(module, results_dir, run_id):
    """(run id, folder) of this fabric run. Round 0 (no run id yet) reserves a fresh folder: a
    second fabric run started in the same second gets a -N suffix, never the first one's record.
    Later rounds rewrite the record of the folder their round 0 reserved."""
    fabric_dir = os.path.join(results_dir, "fabric")
    if not run_id:
        if module.check_mode:
            return results.new_run_id(), ""
        return results.reserve_run(results_dir, None, kind="fabric")
    if not results.RUN_ID_RE.fullmatch(run_id):
        module.fail_json(msg=f"run_id {run_id!r} is not like 20261129T164455Z")
    run_dir = os.path.join(fabric_dir, run_id)
    if not module.check_mode and not os.path.isdir(run_dir):
        module.fail_json(
            msg=f"fabric run {run_id} has no folder {run_dir}: a later round continues the run its round 0 "
            "started (run_id empty)"
        )
    return run_id, run_dir


def _write(run_dir, record, paths):
    """Each round rewrites its own run's record, whole or not at all (atomicfile), each host's
    part of it (fabric.write_slices), its report section and, with matplotlib, its plot."""
    atomicfile.write_json(paths["json"], record, indent=2)
    fabric.write_slices(run_dir, record, paths["json"])  # each node's textfile reads its own part
    text = fabric.markdown(record)
    if fabric.plot(record, os.path.join(run_dir, "fabric.png")):
        paths["png"] = os.path.join(run_dir, "fabric.png")
        text += "\n![pair busbw against the reference](fabric.png)\n"
    atomicfile.write_text(paths["md"], text)


def _store(module, p, plan):
    """(record, report paths) of this round, written unless in check mode."""
    if not p["results_dir"]:
        module.fail_json(msg="store needs results_dir (wireup_results_dir)")
    fabric_dir = os.path.join(p["results_dir"], "fabric")
    if not module.check_mode:
        os.umask(results.RESULTS_UMASK)  # the folders it makes 0750 (atomicfile: files 0640)
    try:
        run_id, run_dir = _run_folder(module, p["results_dir"], p["run_id"])
        record = fabric.build_record(run_id, plan, p["nics"])
        record["findings"] += fabric.compare(record, _previous(fabric_dir, run_id), p["tolerance"])
        run_dir = run_dir or os.path.join(fabric_dir, run_id)
        paths = {"json": os.path.join(run_dir, "fabric.json"), "md": os.path.join(run_dir, "fabric.md")}
        if not module.check_mode:
            _write(run_dir, record, paths)
    except (OSError, ValueError) as err:
        module.fail_json(msg=f"storing the fabric run failed: {err}")
    return record, paths


def main():
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "results": {"type": "list", "elements": "dict", "default": []},
            "unreachable": {"type": "list", "elements": "str", "default": []},
            "nics": {"type": "dict", "default": {}},
            "topologies": {"type": "dict", "default": {}},
            "ranks": {"type": "dict", "default": {}},
            "pass_ratio": {"type": "float", "default": 0.7, "no_log": False},
            "max_rounds": {"type": "int", "default": 4},
            "store": {"type": "bool", "default": False},
            "results_dir": {"type": "path", "default": ""},
            "run_id": {"type": "str", "default": ""},
            "tolerance": {"type": "float", "default": 0.10},
        },
        supports_check_mode=True,
    )
    p = module.params
    plan = fabric_run.judge_round(p, _read)
    if plan.get("errors"):
        module.fail_json(msg="; ".join(plan["errors"]), plan=plan)
    if not p["store"]:
        module.exit_json(changed=False, plan=plan)
    record, paths = _store(module, p, plan)
    module.exit_json(
        changed=not module.check_mode,
        plan=plan,
        record=record,
        report=paths,
        summary=fabric_run.summary_line(record, paths["md"]),
    )


if __name__ == "__main__":
    main()
