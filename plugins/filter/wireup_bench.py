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
  - wireup_bench_plan (a node's facts and the bench settings -> the bench role's plan),
    wireup_bench_tuning (plan, the comparison's registered runs -> ranking, the tuned env file's
    text, one summary line), wireup_bench_nodes (hosts, hostvars -> what wireup_bench_store takes).
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
    text = bench.decoded(tuned_read["content"]) if "content" in (tuned_read or {}) else ""
    return bench.plan(dict(node or {}), dict(settings), dict(build) if build else None, text, str(host))


def bench_tuning(plan, runs, run_id, host, *, node, build=None):
    return bench.tuning(plan, runs, bench.origin_of(run_id, host, node, build))


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


def bench_nodes(hosts, hostvars):
    """{host: bench.node_results(...)} for the hosts that ran the bench role."""
    out = {}
    for host in hosts:
        hv = hostvars[host]
        facts = {key: hv.get(name) for key, name in _NODE_VARS.items()}
        out[host] = bench.node_results(dict(facts, host=host))
    return out


class FilterModule:
    def filters(self):
        return {
            "wireup_nvcc_gencode": _wrap(nccltests.gencode),
            "wireup_nccltests_json_ok": _wrap(nccltests.supports_json),
            "wireup_nccltests_parse": _wrap(nccltests.parse),
            "wireup_human_bytes": _wrap(bandwidth.human_bytes),
            "wireup_bench_plan": _wrap(bench_plan),
            "wireup_bench_tuning": _wrap(bench_tuning),
            "wireup_bench_nodes": _wrap(bench_nodes),
        }
