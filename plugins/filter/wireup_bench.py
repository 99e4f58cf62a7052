"""Filters exposing plugins/module_utils/wireup/nccltests.py, bandwidth.py and benchenv.py to the
nccl_tests and bench roles (nccl-tests output parsing, NVCC_GENCODE, verdict helpers, the tuned
NCCL env file).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_bench
short_description: nccl-tests parsing and build helpers for the nccl_tests and bench roles
description:
  - wireup_nvcc_gencode (compute capabilities -> {flags, arch}), wireup_nccltests_json_ok (tag -> bool),
    wireup_nccltests_parse (output text or -J JSON -> dict), wireup_human_bytes.
  - wireup_bench_multi (the group, the play's hosts -> whether the cross-node torch run goes ahead),
    wireup_bench_plan (a node's facts and the bench settings -> the bench role's plan),
    wireup_bench_tuning (plan, the comparison's registered runs -> ranking, the tuned env file's
    text, one summary line), wireup_bench_run (the group, hostvars -> what wireup_bench_store takes).
"""

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import bandwidth, bench, nccltests


def bench_plan(node, settings, build=None, tuned_read=None, host=""):
    """wireup_node, the bench settings, nccl_tests_build (None when absent), the slurp result of
    the tuned env file -> bench.plan's answer."""
    text = bench.decoded(tuned_read["content"]) if "content" in (tuned_read or {}) else None
    return bench.plan(dict(node or {}), dict(settings), dict(build) if build else None, text, str(host))


def bench_tuning(plan, runs, run_id, host, *, node, build=None):
    return bench.tuning(plan, runs, bench.origin_of(run_id, host, node, build))


def bench_multi(group, play_hosts_all, play_hosts, hostvars, *, name, torch_on, stepcost_on=False):
    """bench.multi_node's answer; each host's GPU presence is read from its wireup_node fact."""
    present = {h: ((hostvars[h].get("wireup_node") or {}).get("gpu") or {}).get("present") for h in group}
    return bench.multi_node(
        group,
        play_hosts_all,
        play_hosts,
        name=name,
        torch_on=bool(torch_on),
        gpu_present=present,
        stepcost_on=bool(stepcost_on),
    )


# What each node's bench tasks registered (their names in the role), read on the controller.
_NODE_VARS = {
    "plan": "__bench_plan",
    "run_id": "__bench_run_id",
    "node": "wireup_node",
    "build": "nccl_tests_build",
    "topology": "gpu_topology_facts",
    "tuned_read": "__bench_tuned_read",
    "found": "__bench_found",
    "nccl_runs": "__bench_nccl_runs",
    "nccl_json": "__bench_nccl_json",
    "tune_runs": "__bench_tune_runs",
}


def bench_run(group, hostvars, name="", gpu_trial=None):
    """What the report play needs from the nodes of one bench run: {hosts (those that ran the
    bench role), lost (nodes lost during the run), run_id, nodes (bench.node_results per host),
    torch_logs, multi_skipped}. Raises ValueError when no host of the group ran the role (nor,
    gpu_trial: the gpu_trial role's run, the GPU trial alone: then its run id and no bench nodes)."""
    hosts = [h for h in group if hostvars[h].get("__bench_run_id")]
    if not hosts and (gpu_trial or {}).get("hosts"):  # issue 25: `--tags gpu_health` / `gpu_trial`
        return {
            "hosts": [],
            "lost": [],
            "run_id": gpu_trial["run_id"],
            "nodes": {},
            "torch_logs": {},
            "multi_skipped": "",
        }
    if not hosts:
        raise ValueError(
            f"No host of group {name} reached the bench role (all failed or unreachable, or the run was "
            "limited to other hosts): nothing to report."
        )
    multi = hostvars[hosts[0]].get("__bench_multi") or {}
    nodes = {}
    for host in hosts:
        hv = hostvars[host]
        facts = {key: hv.get(var) for key, var in _NODE_VARS.items()}
        nodes[host] = bench.node_results(dict(facts, host=host, secret_env=hv.get("wireup_secret_env") or []))
    return {
        "hosts": hosts,
        "lost": sorted(set(multi.get("lost") or []) - set(hosts)),
        "run_id": hostvars[hosts[0]]["__bench_run_id"],
        "nodes": nodes,
        "torch_logs": {h: hostvars[h].get("__bench_torch_logs") or {} for h in hosts},
        "multi_skipped": multi.get("skipped", ""),
    }


class FilterModule:
    def filters(self):
        return {
            "wireup_nvcc_gencode": _wrap(nccltests.gencode),
            "wireup_nccltests_json_ok": _wrap(nccltests.supports_json),
            "wireup_nccltests_parse": _wrap(nccltests.parse),
            "wireup_human_bytes": _wrap(bandwidth.human_bytes),
            "wireup_bench_plan": _wrap(bench_plan),
            "wireup_bench_tuning": _wrap(bench_tuning),
            "wireup_bench_run": _wrap(bench_run),
            "wireup_bench_multi": _wrap(bench_multi),
        }
