"""Filters for torchrun_launch's Slurm path: thin wrappers around wireup.launch.slurm (pure Python,
unit-tested)."""

from __future__ import annotations

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def wireup_slurm_verdict(sacct_stdout, plan, timed_out=False, batch_output=""):
    """The job's verdict from sacct's output over a launch plan's hosts (wait.job_verdict's shape)
    (``plan``: the launch plan combined with slurm.run_plan: its ``job_id``, the only job whose
    rows count); ``batch_output``: the batch step's output (slurm-JOBID.out), which names the first
    failed step."""
    plan = dict(plan)
    return slurm.job_verdict(
        str(sacct_stdout or ""),
        slurm.node_names(plan),
        job_id=plan.get("job_id") or "",
        timed_out=bool(timed_out),
        first_failed=slurm.first_failed_step(str(batch_output or "")),
    )


def wireup_slurm_plan(sbatch_stdout, plan, stop_grace=15):
    """slurm.run_plan of sbatch's answer over the launch plan (torchrun_launch_stop_grace)."""
    return slurm.run_plan(str(sbatch_stdout or ""), dict(plan), stop_grace=stop_grace)


def wireup_slurm_drain_plan(show_result, plan, check_mode=False, max_share=10, max_nodes=8):
    """slurm.drain_plan of a launch plan's drain_read, from the registered scontrol show node (every
    node), within the blast radius (slurm.limit_drains: wireup_drain_max_share, wireup_drain_max_nodes)
    of the job's group (its hosts that run and those left out) and of their partitions."""
    plan = dict(plan)
    read = list(plan.get("drain_read") or [])
    decided = slurm.drain_plan(read, dict(show_result or {}), check_mode=bool(check_mode))
    group = {
        "name": plan.get("group") or "",
        "nodes": sorted({*slurm.node_names(plan).values(), *(d["node"] for d in read)}),
    }
    return slurm.limit_drains(
        decided, dict(show_result or {}), group, max_share=int(max_share), max_nodes=int(max_nodes)
    )


def wireup_slurm_job_status(reads, jobs, plan):
    """slurm.job_status of a Slurm run jobs.yml follows (``jobs``: torchrun_launch.jobs_plan, its run's
    hosts and Slurm job id; ``plan``: the launch plan, each host's Slurm node name), from the
    registered loop over the plan's slurm.reads (or one sacct answer: slurm.reads_of)."""
    jobs, plan = dict(jobs), dict(plan)
    follow = dict(jobs.get("slurm") or {})
    hosts = {
        "hosts": list(jobs.get("hosts") or []),
        "nodes": plan.get("nodes", {}),
        "node_names": plan.get("node_names"),  # every host's (a node's slice holds its own NodePlan only)
        "nodes_max": follow.get("nodes_max") or 0,
    }
    sacct, squeue = slurm.reads_of(dict(reads or {}))
    return slurm.job_status(squeue, sacct, hosts, follow.get("job_id", ""))


def wireup_slurm_nodelist(plan):
    return slurm.nodelist(dict(plan))


def wireup_slurm_options(options):
    """job.sbatch's extra #SBATCH words (slurm.sbatch_options: allow-listed keys, one-word values)."""
    return slurm.sbatch_options(dict(options) if options else {})


class FilterModule:
    def filters(self):
        filters = {
            "wireup_slurm_verdict": wireup_slurm_verdict,
            "wireup_slurm_nodelist": wireup_slurm_nodelist,
            "wireup_slurm_options": wireup_slurm_options,
            "wireup_slurm_plan": wireup_slurm_plan,
            "wireup_slurm_drain_plan": wireup_slurm_drain_plan,
            "wireup_slurm_job_status": wireup_slurm_job_status,
        }
        return {name: _wrap(func) for name, func in filters.items()}
