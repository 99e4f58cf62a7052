"""Filters of the bench_fabric role (plugins/module_utils/wireup/plans/bench_fabric.py: each node's part
of the fabric bench) and of launch.yml's refusal of nodes whose latest bench verdict FAILed
(judge/fabric_run.py).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_fabric
short_description: The bench_fabric role's plan, and launch.yml's refusal of nodes that FAILed
  their latest bench
description:
  - "wireup_bench_fabric_plan: wireup_node and each setting by name (bench_fabric.FabricSettings) -> this
    node's part of every job and the group's facts for the judgement."
  - "wireup_bench_fabric_job: the last round's judged plan, the host, the round -> this node's job."
  - "wireup_bench_fabric_result: the job, torchrun_launch's result, the host, the round -> what the
    node reports."
  - "wireup_launch_refusals: hosts and results_dir in, a mapping host -> reason out, for each host with
    a capability whose newest bench or quick record FAILed (or a newer record that cannot be read),
    or that the newest fabric run names bad (fabric_run.refusals over fabric_run.latest_verdicts, per
    capability in record/gate.py)."
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import fabric_run
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_fabric
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def launch_refusals(hosts, results_dir):
    """{host: reason} for the hosts launch.yml must refuse (read on the controller)."""
    failures, fabric_record = fabric_run.latest_verdicts(str(results_dir), list(hosts))
    return fabric_run.refusals(list(hosts), failures, fabric_record)


def fabric_plan(node, **settings):
    return bench_fabric.plan(dict(node or {}), **settings)


def fabric_job(judged_plan, host, round_no):
    return bench_fabric.job(dict(judged_plan or {}), str(host), int(round_no))


def fabric_result(job, launch, host, round_no):
    return bench_fabric.result(dict(job), dict(launch or {}), str(host), int(round_no))


class FilterModule:
    def filters(self):
        return {
            "wireup_launch_refusals": _wrap(launch_refusals),
            "wireup_bench_fabric_plan": _wrap(fabric_plan),
            "wireup_bench_fabric_job": _wrap(fabric_job),
            "wireup_bench_fabric_result": _wrap(fabric_result),
        }
