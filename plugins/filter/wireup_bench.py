"""Filters of the bench and bench_report roles: plugins/module_utils/wireup/plans/bench.py (the plan,
the tuning comparison, the torch jobs across the group, the node's results) and plans/bench_report.py
(the run as the report play gathers it).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message; settings
come as keyword arguments named in a dataclass (a misspelt one is an error, not None).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_bench
short_description: The bench and bench_report roles' plans
description:
  - wireup_bench_plan (wireup_node, the nccl-tests build, the tuned env file's slurp, the host and
    each bench setting by name -> bench.BenchPlan), wireup_bench_tuning (plan, the comparison's
    registered runs -> ranking, the tuned env file's text, one summary line), wireup_bench_multi
    (plan, the group and the play's hosts -> the torch jobs across the group, or why not),
    wireup_bench_result (plan and what the role registered -> the node's data for the report),
    wireup_bench_fresh_log (a job's name, torchrun_launch's result -> its log path, '' when stale),
    wireup_bench_report_run (the group, what each host kept and the GPU trial's run -> what
    wireup_bench_store takes), wireup_bench_report_quick (the group and what node_check kept on
    each host -> the same for a quick check's run, bench.yml --tags quick).
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench, bench_report
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def bench_plan(node, build, tuned_read, host, **settings):
    """wireup_node, nccl_tests_build (None when absent), the slurp result of the tuned env file,
    the host, and bench.BenchSettings' fields by name -> bench.plan's answer."""
    text = bench.decoded(tuned_read["content"]) if "content" in (tuned_read or {}) else None
    return bench.plan(
        dict(node or {}), bench.BenchSettings(**settings), dict(build) if build else None, text, str(host)
    )


def bench_tuning(plan, runs, run_id, host, *, node, build=None):
    return bench.tuning(plan, runs, bench.origin_of(run_id, host, node, build))


def bench_multi(plan, group, play_hosts_all, play_hosts, *, name, gpu_present):
    """bench.multi_node's answer; gpu_present: per host of group, in its order, whether it has a GPU."""
    hosts = {"group": list(group), "play_hosts_all": list(play_hosts_all), "play_hosts": list(play_hosts)}
    present = dict(zip(hosts["group"], gpu_present, strict=True))
    return bench.multi_node(plan, hosts, name=name, gpu_present=present)


def bench_result(plan, **registered):
    """bench.node_results' answer from the plan and what the role registered, each by its name in
    bench.NODE_FACTS."""
    return bench.node_results(dict(registered, plan=plan))


def bench_report_run(group, *, name, trial=None, **kept):
    """bench_report.gather's answer; kept: bench_report.Kept's lists by name, each with one entry per
    host of group, in its order; trial: gpu_trial_run (a run of the GPU trial alone has no bench data)."""
    return bench_report.gather(list(group), bench_report.Kept(**kept), name=name, trial=trial)


def bench_report_quick(group, *, name, run_ids, results, reached, slurm=None):
    """bench_report.gather_quick's answer; each list has one entry per host of group, in its order;
    slurm: the quick check's answer through Slurm ({} or None: it ran on each host)."""
    return bench_report.gather_quick(
        list(group),
        name=name,
        run_ids=list(run_ids),
        results=list(results),
        reached=[bool(r) for r in reached],
        slurm=dict(slurm) if slurm else None,
    )


class FilterModule:
    def filters(self):
        return {
            "wireup_bench_plan": _wrap(bench_plan),
            "wireup_bench_tuning": _wrap(bench_tuning),
            "wireup_bench_multi": _wrap(bench_multi),
            "wireup_bench_result": _wrap(bench_result),
            "wireup_bench_report_run": _wrap(bench_report_run),
            "wireup_bench_report_quick": _wrap(bench_report_quick),
            "wireup_bench_fresh_log": _wrap(bench.fresh_log),
        }
