"""Filters of the node_check role (issue 26): thin wrappers around
plugins/module_utils/wireup/plans/node_check.py (the plan, what the store gives a node after a bench,
a node's answer). A ValueError becomes an AnsibleFilterError carrying the same message; settings
come as keyword arguments named in node_check.CheckSettings (a misspelt one is an error)."""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_node_check
short_description: The node_check role's plans
description:
  - "wireup_node_check_plan (wireup_node, the host and each node_check setting by name ->
    node_check.NodeCheckPlan, check.json's content and wireup-check's command lines),
    wireup_node_check_read (the results folder, the host, the nccl-tests build, the benchmark's
    size and node_check_textfile -> node_check.StoreRead, the baseline's bench part and
    wireup_bench.prom's text),
    wireup_node_check_baseline_line (that read, the baseline step's registered result, the host and
    check mode -> one line: what became of the baseline),
    wireup_node_check_result (wireup-check --json's output, the host, its stderr and exit code ->
    node_check.CheckResult, checked; nothing a node prints is trusted),
    wireup_node_check_slurm_names (the play's hosts and their wireup_node -> each host's Slurm
    node name, for wireup_quick_slurm),
    wireup_node_check_slurm_results (wireup_quick_slurm's srun output and those names ->
    node_check_slurm.SlurmQuick: each host's checked answer, the lines refused; read here, on the
    controller)."
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (
    node_check as plans_node_check,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import node_check_slurm
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def node_check_plan(node, *, host, check_mode=False, **settings):
    """wireup_node, the host and node_check.CheckSettings' fields by name -> node_check.plan's answer."""
    return plans_node_check.plan(
        str(host), dict(node or {}), plans_node_check.CheckSettings(**settings), check_mode=bool(check_mode)
    )


def node_check_read(results_dir, *, host, build, size, textfile):
    """node_check.read_store's answer (build: nccl_tests_build, None when absent; textfile:
    node_check_textfile)."""
    return plans_node_check.read_store(
        str(results_dir), str(host), build=dict(build or {}), size=size, textfile=str(textfile)
    )


def node_check_baseline_line(read, written, *, host, check_mode):
    """node_check.baseline_line's answer (written: the baseline step's registered result)."""
    return plans_node_check.baseline_line(
        dict(read or {}), dict(written or {}), str(host), check_mode=bool(check_mode)
    )


def node_check_result(stdout, *, host, stderr, rc):
    """node_check.result's answer for what wireup-check printed on host."""
    return node_check.result(str(host), stdout=str(stdout or ""), stderr=str(stderr or ""), rc=rc)


def node_check_slurm_names(hosts, facts):
    """node_check_slurm.names_of's answer (facts: each host's wireup_node, in hosts' order)."""
    return node_check_slurm.names_of([str(h) for h in hosts], [dict(f or {}) for f in facts])


def node_check_slurm_results(srun, *, hosts, facts):
    """node_check_slurm.parse's answer for srun's output, the names made here from the play's
    hosts and their wireup_node (never the submit host's word)."""
    return node_check_slurm.parse(dict(srun or {}), node_check_slurm_names(hosts, facts))


class FilterModule:
    def filters(self):
        return {
            "wireup_node_check_plan": _wrap(node_check_plan),
            "wireup_node_check_read": _wrap(node_check_read),
            "wireup_node_check_baseline_line": _wrap(node_check_baseline_line),
            "wireup_node_check_result": _wrap(node_check_result),
            "wireup_node_check_slurm_names": _wrap(node_check_slurm_names),
            "wireup_node_check_slurm_results": _wrap(node_check_slurm_results),
        }
