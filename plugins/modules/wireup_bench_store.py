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
  - Logic lives in module_utils wireup.results and wireup.report; this is a thin wrapper.
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
      - Per host, what the bench role gathered (the filter wireup_bench_run builds it from the
        hosts' registered results; plugins/module_utils/wireup/bench.py node_results says each field).
    type: dict
    required: true
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
        (wireup_secret_env; plugins/module_utils/wireup/redact.py says the rule). Their values are
        stored and reported as C(<redacted>).
    type: list
    elements: str
    default: []
  gpu_trial:
    description:
      - "The GPU trial of the run (the gpu_trial role's report tasks set it, issue 25):
        C({run_id, hosts, nodes: {HOST: gpu_trial_node}, thresholds})."
      - Every GPU is judged across the run (spec, peers, its own last passing run by serial) and each
        record gets its C(gpus) section; hosts that ran only the GPU trial get a record too.
    type: dict
    default: {}
author: wireup
"""

EXAMPLES = r"""
- name: Store the run and write the report
  wireup_bench_store:
    results_dir: "{{ wireup_results_dir }}"
    run_id: "20261129T164455Z"
    nodes: "{{ (groups.gpu_nodes | wireup_bench_run(hostvars)).nodes }}"
    thresholds: {pass_ratio: 0.9, warn_ratio: 0.75, min_bytes: 1073741824, tolerance: 0.1, torch_goal: 0.97}
"""

RETURN = r"""
run_id:
  description: The run id used (with a -N suffix when the given one was taken).
  returned: success
  type: str
run_dir:
  description: The run folder.
  returned: success
  type: str
report:
  description: The report's files (empty in check mode).
  returned: success
  type: dict
  contains:
    md:
      description: Path of report.md.
      type: str
    html:
      description: Path of report.html (self-contained).
      type: str
    pngs:
      description: Paths of the PNG plots written.
      type: list
      elements: str
    plots:
      description: Whether PNG plots were drawn (false without matplotlib on the controller).
      type: bool
verdicts:
  description: Verdict per host (PASS, WARN, FAIL, N/A, UNREACHABLE).
  returned: success
  type: dict
summary:
  description: One line per host, sorted by host.
  returned: success
  type: list
  elements: str
failed_hosts:
  description: Hosts whose verdict is FAIL.
  returned: success
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.wireup import gpurecord, report, results, stepcost
from ansible.module_utils.wireup.bench import NO_DATA


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _multi_node_skipped(reason):
    return {
        "severity": "warning",
        "code": "bench_torch_multi_skipped",
        "gpus": [],
        "message": f"torch benchmark across all nodes skipped: {reason}",
        "source": "torch",
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "results_dir": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "nodes": {"type": "dict", "required": True},
            "torch_logs": {"type": "dict", "default": {}},
            "thresholds": {
                "type": "dict",
                "required": True,
                "options": {
                    "pass_ratio": {"type": "float", "required": True},
                    "warn_ratio": {"type": "float", "required": True},
                    "min_bytes": {"type": "int", "required": True},
                    "tolerance": {"type": "float", "required": True},
                    "torch_goal": {"type": "float", "required": True},
                },
            },
            "efficiency": {"type": "dict", "default": {}},
            "lost": {"type": "dict", "default": {}},
            "multi_node_skipped": {"type": "str", "default": ""},
            "secret_env": {"type": "list", "elements": "str", "default": []},
            "gpu_trial": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    if module.check_mode:
        # Check mode ran no benchmark: nothing to judge or store.
        module.exit_json(
            changed=False,
            msg="check mode: nothing stored",
            run_id=module.params["run_id"],
            run_dir="",
            report={},
            verdicts={},
            summary=[],
            failed_hosts=[],
        )
    # The run-wide settings reach every host's judgement from here (not from the hosts' facts).
    run_wide = {
        "thresholds": module.params["thresholds"],
        "efficiency": module.params["efficiency"] or {},
        "secret_env": module.params["secret_env"] or [],
    }
    nodes = {host: dict(node or {}, **run_wide) for host, node in module.params["nodes"].items()}
    if module.params["multi_node_skipped"]:
        for node in nodes.values():
            node["findings"] = [
                *node.get("findings", []),
                _multi_node_skipped(module.params["multi_node_skipped"]),
            ]
    for host, reason in sorted((module.params["lost"] or {}).items()):
        nodes[host] = {"unreachable": str(reason)} if reason else dict(NO_DATA, **run_wide)
    multi = {}
    for host, given in sorted((module.params["torch_logs"] or {}).items()):
        if host not in nodes:
            continue
        logs = {name: path for name, path in (given or {}).items() if not name.startswith("stepcost_")}
        if logs.get("multi_node"):
            multi[host] = _read(logs.pop("multi_node"))
        nodes[host]["torch"] = {name: _read(path) for name, path in logs.items() if path}
    if multi:
        # Only global rank 0 prints results (or, when none did, the first host's log becomes a
        # finding). Every node that took part ran each of those all-reduces, so each keeps them:
        # a GPU-less node is judged on them against its own last passing run (issue 12).
        printed = [host for host, text in multi.items() if '"wireup_bench"' in text]
        owner = printed[0] if printed else sorted(multi)[0]
        for host in multi:
            nodes[host].setdefault("torch", {})["multi_node"] = multi[owner]
    # The DDP step benchmark's logs (stepcost_single_node, stepcost_multi_node; issue 16).
    steps = {
        host: {
            name[9:]: _read(path)
            for name, path in (given or {}).items()
            if name.startswith("stepcost_") and path
        }
        for host, given in (module.params["torch_logs"] or {}).items()
        if host in nodes
    }
    for host, texts in stepcost.spread_logs(steps).items():
        if texts:
            nodes[host]["stepcost"] = texts
    os.umask(results.RESULTS_UMASK)
    try:
        # GPU trial (issue 25): every GPU judged across the run before the records are built.
        trial = module.params["gpu_trial"] or {}
        nodes = gpurecord.attach(
            module.params["results_dir"],
            module.params["run_id"],
            nodes,
            trial,
            settings=trial.get("thresholds"),
            defaults=run_wide,
        )
        run_id, run_dir, records = results.store_run(
            module.params["results_dir"], module.params["run_id"], nodes
        )
        paths = report.write_report(run_dir, run_id, records)
    except (ValueError, OSError) as err:
        module.fail_json(msg=f"storing the bench run failed: {err}")
    module.exit_json(
        changed=True,
        run_id=run_id,
        run_dir=os.path.abspath(run_dir),
        report=paths,
        verdicts={host: rec["verdict"] for host, rec in records.items()},
        summary=[report.summary_line(records[host]) for host in sorted(records)],
        failed_hosts=sorted(host for host, rec in records.items() if rec["verdict"] == "FAIL"),
    )


if __name__ == "__main__":
    main()
