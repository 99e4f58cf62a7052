#!/usr/bin/python
"""Ansible module (controller side): store one bench run's results and write its report."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_bench_store
short_description: Judge, store and report one bench.yml run on the controller
description:
  - "Runs where the results live: the controller, through C(delegate_to: localhost) or a localhost play."
  - For every host, parses the nccl-tests outputs and torch benchmark logs, computes the expected bus
    bandwidth from the host's topology and the verdicts, merges the gpu_topology findings, compares
    with the host's last passing run, and writes C(RESULTS/bench/RUN/HOST.json) (never overwritten).
  - Writes report.md, report.html (self-contained) and PNG plots into the run folder; files 0640,
    folders 0750. Secret values of the environment are never written (C(<redacted>)).
  - The report ends with the nodes' history read from C(RESULTS/history) at the time it runs (nodes
    out of service now and since when, each node's time from drain to return, its last events).
  - "One node's answer never stops the run from being stored: a node whose data is not of its typed
    shape (bench.NodeData, node_check.QuickNode, gpu_trial.TrialNode and what they hold:
    plugins/module_utils/wireup/core/shape.py), or whose judgement fails, gets a record with the verdict
    DAMAGED saying why in one line, and is left out of the GPUs' judgement across the nodes; the other
    nodes are stored and judged as always. The launch gate refuses a DAMAGED node."
  - Logic lives in module_utils wireup.plans.bench_report, wireup.store.results and wireup.report; this is
    a thin wrapper.
options:
  results_dir:
    description: wireup's results folder on the controller (wireup_results_dir).
    type: path
    required: true
  run_id:
    description: Run id like 20261129T164455Z; a taken id gets a -N suffix.
    type: str
    required: true
  nodes:
    description:
      - Per host, what the bench role kept for the report (its fact C(__bench_result), gathered by the
        filter wireup_bench_report_run; plugins/module_utils/wireup/plans/bench.py node_results says each
        field).
      - "In a quick check's run (I(kind=quick)), C({node_check: RESULT}) per host (the node_check role's
        fact C(__node_check_result), gathered by the filter wireup_bench_report_quick)."
    type: dict
    required: true
  kind:
    description:
      - "The run's kind: C(bench) (bench.yml; C(RESULTS/bench/RUN/HOST.json), each host compared with its
        last passing run) or C(quick) (bench.yml --tags quick; C(RESULTS/quick/RUN/HOST.json), each record
        with C(kind: quick); never a baseline; the launch gate reads them as the capability node_check)."
    type: str
    choices: [bench, quick]
    default: bench
  thresholds:
    description:
      - The run's verdict thresholds, the same for every host (bench_pass_ratio, bench_warn_ratio,
        bench_verdict_min_bytes, bench_baseline_tolerance, bench_torch_goal_ratio).
    type: dict
    required: true
    suboptions:
      pass_ratio:
        description: PASS at or above this fraction of the expected bus bandwidth.
        type: float
        required: true
      warn_ratio:
        description: WARN at or above this fraction, FAIL below.
        type: float
        required: true
      min_bytes:
        description: The verdict is taken at the largest size at or above this many bytes.
        type: int
        required: true
      tolerance:
        description: A drop larger than this fraction against the last passing run is a finding.
        type: float
        required: true
      torch_goal:
        description: torch busbw / nccl-tests busbw below this is a finding.
        type: float
        required: true
  efficiency:
    description: Efficiency factors overriding the built-in table (bench_efficiency).
    type: dict
    default: {}
  torch_logs:
    description:
      - "Per host, torch benchmark log files on the controller:
        C({HOST: {single_node: PATH, multi_node: PATH}})."
      - Missing files are reported as findings, not errors.
    type: dict
    default: {}
  lost:
    description:
      - "Hosts of the group lost during the run, with Ansible's reason when it cannot reach them now:
        C({HOST: REASON})."
      - With a reason, a record with the verdict UNREACHABLE (named in the summary and the report,
        never a baseline); with an empty one (the node answers now, so it failed earlier in the run),
        a record without bench data.
    type: dict
    default: {}
  multi_node_skipped:
    description:
      - Why the torch benchmark across all nodes did not run (empty when it ran); a warning on every host.
    type: str
    default: ""
  secret_env:
    description:
      - Names of variables whose values are secret besides those the name rule finds
        (wireup_secret_env; plugins/module_utils/wireup/core/redact.py says the rule). Their values are
        stored and reported as C(<redacted>).
    type: list
    elements: str
    default: []
  gpu_trial:
    description:
      - "The GPU trial of the run (issue 25), as the gpu_trial role's report tasks gather it (the fact
        C(gpu_trial_run)): C({run_id, hosts, nodes: {HOST: gpu_trial_node}, thresholds})."
      - Every GPU is judged across the run (its model's spec, its peers, its own last passing run found
        by UUID) and each host's record gets its C(gpu_trial) part; hosts that ran only the GPU trial
        (C(bench.yml --tags gpu_health) or C(gpu_trial)) get a record too. Empty when it did not run.
    type: dict
    default: {}
  node_facts:
    description:
      - "Each host's C(wireup_node) (preflight's fact), C({HOST: wireup_node}): the run's drift across
        the hosts (docs/drift.md) puts each host's values and where it differs from the majority in its
        record's C(drift) part, a warning finding per field it differs in, and the report's drift table.
        Empty: no drift part."
    type: dict
    default: {}
  keep_days:
    description:
      - "Retention (issue 39, bench_keep_days): after the run is stored, remove host records of
        C(RESULTS/bench) and C(RESULTS/quick) older than this many days that no reader needs (each
        host's newest record per capability the launch gate judges, its newest passing bench record,
        the 100 newest bench runs the GPU baselines read, and damaged records stay);
        plugins/module_utils/wireup/record/retention.py. C(0) keeps every record. Reports and
        a node's history are never removed."
    type: int
    default: 0
  report_detail:
    description:
      - "Which nodes the report shows in detail (issue 39, bench_report_detail): C(auto) every node of
        a fleet of at most 16 nodes, else the nodes that did not PASS (their own plots for the worst 3);
        C(failed) the nodes that did not PASS at any size; C(all) every node with its plots (slow at
        fleet size: about a second of CPU per node's plots). Every report opens with what failed, then
        the fleet in aggregate; plugins/module_utils/wireup/report/triage.py."
    type: str
    choices: [auto, failed, all]
    default: auto
attributes:
  check_mode:
    support: full
    description: Stores nothing in check mode (no benchmark ran) and says so.
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
- name: Store the run and write the report
  wireup_bench_store:
    results_dir: "{{ wireup_results_dir }}"
    run_id: "20261129T164455Z"
    nodes: "{{ __bench_report_run.nodes }}"
    thresholds: {pass_ratio: 0.9, warn_ratio: 0.75, min_bytes: 1073741824, tolerance: 0.1, torch_goal: 0.97}
"""

RETURN = r"""
run_id:
  description: The run id used (with a -N suffix when the given one was taken).
  returned: success
  type: str
  sample: "20261129T164455Z"
run_dir:
  description: The run folder.
  returned: success
  type: str
  sample: "results/bench/20261129T164455Z"
report:
  description: The report's files (empty in check mode).
  returned: success
  type: dict
  contains:
    md:
      description: Path of report.md.
      type: str
      sample: "results/bench/20261129T164455Z/report.md"
    html:
      description: Path of report.html (self-contained).
      type: str
      sample: "results/bench/20261129T164455Z/report.html"
    pngs:
      description: Paths of the PNG plots written.
      type: list
      sample: ["results/bench/20261129T164455Z/busbw_all_reduce.png"]
      elements: str
    plots:
      description: Whether PNG plots were drawn (false without matplotlib on the controller).
      type: bool
      sample: true
verdicts:
  description: Verdict per host (PASS, WARN, FAIL, N/A, UNREACHABLE, DAMAGED).
  returned: success
  type: dict
  sample: {"node1": "PASS", "node2": "FAIL"}
summary:
  description: One line per host, sorted by host.
  returned: success
  type: list
  sample:
    - 'node1: PASS, baseline recorded (first passing run: nothing compared) - all_reduce 361.2 GB/s (0.98
      of 368.0 expected)'
  elements: str
failed_hosts:
  description: Hosts whose verdict is FAIL or DAMAGED (could not be judged).
  returned: success
  type: list
  sample: ["node2"]
  elements: str
removed:
  description: How many old host records retention removed (I(keep_days); 0 when it is 0).
  returned: success
  type: int
  sample: 0
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import context
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_report
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import retention
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


ARGUMENT_SPEC = {
    "results_dir": {"type": "path", "required": True},
    "run_id": {"type": "str", "required": True},
    "nodes": {"type": "dict", "required": True},
    "kind": {"type": "str", "choices": ["bench", "quick"], "default": "bench"},
    "torch_logs": {"type": "dict", "default": {}},
    "thresholds": {
        "type": "dict",
        "required": True,
        "options": {
            "pass_ratio": {"type": "float", "required": True, "no_log": False},
            "warn_ratio": {"type": "float", "required": True},
            "min_bytes": {"type": "int", "required": True},
            "tolerance": {"type": "float", "required": True},
            "torch_goal": {"type": "float", "required": True},
        },
    },
    "efficiency": {"type": "dict", "default": {}},
    "lost": {"type": "dict", "default": {}},
    "multi_node_skipped": {"type": "str", "default": ""},
    "secret_env": {"type": "list", "elements": "str", "default": [], "no_log": False},
    "gpu_trial": {"type": "dict", "default": {}},
    "node_facts": {"type": "dict", "default": {}},
    "keep_days": {"type": "int", "default": 0},
    "report_detail": {"type": "str", "choices": ["auto", "failed", "all"], "default": "auto"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if module.check_mode:
        # Check mode ran no benchmark: nothing to judge or store.
        module.exit_json(
            changed=False,
            msg="check mode: nothing stored",
            run_id=p["run_id"],
            run_dir="",
            report={},
            verdicts={},
            summary=[],
            failed_hosts=[],
            removed=0,
        )
    os.umask(results.RESULTS_UMASK)
    try:
        # Judged, written and entered in the store's index (issue 39), each earlier record read once.
        run_id, run_dir, records = bench_report.store(p, _read)
        # The report's context: the results folder, whose history (results/history) it shows.
        ctx = context.Reporting(results_dir=p["results_dir"], now=time.time())
        paths = assemble.write_report(run_dir, run_id, records, detail=p["report_detail"], context=ctx)
        removed = retention.apply(p["results_dir"], retention.plan(p["results_dir"], p["keep_days"]))
    except (ValueError, OSError) as err:
        module.fail_json(msg=f"storing the bench run failed: {err}")
    module.exit_json(
        changed=True,
        run_id=run_id,
        run_dir=os.path.abspath(run_dir),
        report=paths,
        verdicts={host: rec["verdict"] for host, rec in records.items()},
        summary=[assemble.summary_line(records[host]) for host in sorted(records)],
        failed_hosts=sorted(host for host, rec in records.items() if rec["verdict"] in results.FAILING),
        removed=removed,
    )


if __name__ == "__main__":
    main()
