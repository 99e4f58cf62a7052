"""Filters for torchrun_launch: thin wrappers around wireup.launch (pure Python, unit-tested).

Each filter takes what it reads as arguments: a host's registered results reach it through the
task that passes them (``dict(hosts | zip(hosts | map('extract', hostvars, 'NAME')))``), never by
a register's name through hostvars."""

from __future__ import annotations

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import stall, wait
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def _plain(value):
    """A mapping or list from Ansible's templating as plain dicts and lists (None stays None)."""
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def wireup_launch_node(node, probe=None, nproc="auto"):
    """torchrun_launch.node_facts: this host's part of the plan (wireup_node, the role's probe, its own
    wireup_nproc_per_node)."""
    return torchrun_launch.node_facts(_plain(node), _plain(probe), nproc)


def wireup_launch_plan(hosts, nodes, **settings):
    """torchrun_launch.job_plan over ``hosts`` (the job's group) with the NodeFacts of those in the play."""
    return torchrun_launch.job_plan(list(hosts or []), _plain(nodes) or {}, **_plain(settings))


def wireup_launch_planners(groups, play_hosts):
    """torchrun_launch.job_planners: {group: the host that plans its job} (``groups``, once a pass)."""
    return torchrun_launch.job_planners(dict(groups or {}), list(play_hosts or []))


def wireup_launch_node_plan(plan, host, plan_id, planner):
    """torchrun_launch.node_plan: ``host``'s slice of the plan its job's planner made (shallow: the
    job-wide values are not copied, so each node's slice costs the same at any size)."""
    return torchrun_launch.node_plan(
        dict(plan) if plan else None, str(host), str(plan_id or ""), str(planner)
    )


def wireup_launch_dropped(slices, play_hosts, plan_id):
    """torchrun_launch.dropped_out: {planner: its job's hosts that left the play}, from each play
    host's slice (``dict(hosts | zip(hosts | map('extract', hostvars) | map(attribute=...))``)."""
    return torchrun_launch.dropped_out(dict(slices or {}), list(play_hosts or []), str(plan_id or ""))


def wireup_launch_verdicts(slices, answers, play_hosts, plan_id, timeout=0):
    """torchrun_launch.job_verdicts: {planner: its job's verdict}, from each play host's slice and its
    registered wireup_wait answer ({} for a host without one: gone, as none)."""
    answers = {h: _plain(a) for h, a in dict(answers or {}).items() if a}
    return torchrun_launch.job_verdicts(
        dict(slices or {}), answers, list(play_hosts or []), str(plan_id or ""), timeout
    )


def wireup_launch_exports(env):
    return torchrun_launch.exports(dict(env or {}))


def wireup_launch_hosts_entries(plan):
    return torchrun_launch.hosts_entries(dict(plan))


def wireup_launch_status(stdout):
    return wait.parse_status(str(stdout or ""))


def wireup_launch_results(hosts, answers):
    """torchrun_launch.states_of: {host: its run's status} from each host's registered answer."""
    return torchrun_launch.states_of(list(hosts or []), _plain(answers) or {})


def wireup_launch_verdict(states, play_hosts=None, timeout=0):
    return wait.job_verdict(_plain(states), None if play_hosts is None else list(play_hosts), timeout)


def wireup_launch_precheck_errors(plan, host, gone, **probes):
    """torchrun_launch.precheck_errors of one node's slice (``gone``: its job's entry of
    wireup_launch_dropped)."""
    gone = None if gone is None else list(gone)
    return torchrun_launch.precheck_errors(dict(plan), host, gone, **_plain(probes))


def wireup_launch_result(status, plan, host, verdict, **extra):
    status = wait.parse_status(status) if isinstance(status, str) else _plain(status or {})
    return torchrun_launch.node_result(dict(plan), host, status, _plain(verdict or {}), **extra)


def wireup_launch_summary(results, plan, verdict, **run):
    return torchrun_launch.summary(_plain(plan), _plain(results), _plain(verdict or {}), **_plain(run))


def wireup_launch_report(result, plan, verdict, **kwargs):
    return torchrun_launch.report(_plain(plan), _plain(result or {}), _plain(verdict or {}), **kwargs)


def wireup_launch_jobs_plan(plan, action, run_id="", **options):
    """torchrun_launch.jobs_plan; ``found``: each in-play group host's registered ``wireup-jobctl latest
    --record`` answer."""
    return torchrun_launch.jobs_plan(_plain(plan), action, run_id or "", **_plain(options))


def wireup_launch_jobs_node(result, jobs, host, jobctl, *, slurm=None):
    """torchrun_launch.jobs_node of the host's registered loop over its calls
    (torchrun_launch.call_answers: the wireup-jobctl answer, nvidia-smi's); ``slurm``: a Slurm run's
    slurm.job_status (wireup_slurm_job_status)."""
    answer, gpus_text = torchrun_launch.call_answers(_plain(result))
    return torchrun_launch.jobs_node(_plain(jobs), host, answer, jobctl, gpus_text, slurm=_plain(slurm or {}))


def wireup_launch_jobs_fetches(result, jobs, host):
    """torchrun_launch.jobs_fetches: the host's fetches for logs, from its registered loop over its calls."""
    return torchrun_launch.jobs_fetches(_plain(jobs), host, torchrun_launch.call_answers(_plain(result))[0])


def wireup_launch_jobs_summary(jobs, answers, play_hosts=None, *, base_dir="", slurm=None):
    """torchrun_launch.jobs_summary from each asked host's registered wireup-jobctl answer (and a Slurm
    run's slurm.job_status)."""
    jobs = _plain(jobs)
    answers = {h: torchrun_launch.call_answers(r)[0] for h, r in (_plain(answers) or {}).items()}
    if jobs.get("action") == "list":
        states, runs = {}, torchrun_launch.runs_of(answers)
    else:
        states, runs = torchrun_launch.states_of(jobs.get("hosts") or [], answers), {}
    hosts = None if play_hosts is None else list(play_hosts)
    return torchrun_launch.jobs_summary(jobs, states, runs, hosts, base_dir, slurm=_plain(slurm or {}))


def wireup_launch_watchdog_key(nbytes=torchrun_launch.WATCHDOG_KEY_BYTES):
    """torchrun_launch.watchdog_key: a new run's watchdog key (``32 | wireup_launch_watchdog_key``)."""
    return torchrun_launch.watchdog_key(nbytes)


def wireup_launch_follow(plan, started, inventory_sources=()):
    """torchrun_launch.follow_lines; ``started``: each host's registered `wireup-jobctl start` answer."""
    lines = {h: (r or {}).get("stdout", "") for h, r in (_plain(started) or {}).items()}
    return torchrun_launch.follow_lines(_plain(plan), lines, list(inventory_sources or []))


def wireup_launch_progress_calls(jobs, host, *, gpu=None, stall_after=0):
    """stall.progress_calls: ``host``'s wireup_job_progress arguments (none or one), on status."""
    return stall.progress_calls(_plain(jobs), str(host), _plain(gpu), stall_after)


def wireup_launch_stall(jobs, looks, *, stop=False, grace=15, check_mode=False):
    """stall.stall: the run's stall from each host's registered wireup_job_progress loop
    (``looks``: host -> result); with ``stop``, the stop argv for every host of the run."""
    return stall.stall(_plain(jobs), _plain(looks), stop=bool(stop), grace=grace, check_mode=bool(check_mode))


def wireup_results_path(root, *names):
    """root/names on the controller, each name checked and the path kept under root
    (checks.results_path): the fetch destinations of jobs' logs and summaries."""
    return checks.results_path(str(root or ""), *(str(n) for n in names))


def wireup_launch_args(args):
    """The program's arguments as strings: a list as given, one string split with shlex
    (checks.program_args)."""
    return checks.program_args(list(args) if isinstance(args, list | tuple) else args)


class FilterModule:
    def filters(self):
        filters = {
            "wireup_launch_node": wireup_launch_node,
            "wireup_launch_plan": wireup_launch_plan,
            "wireup_launch_planners": wireup_launch_planners,
            "wireup_launch_node_plan": wireup_launch_node_plan,
            "wireup_launch_dropped": wireup_launch_dropped,
            "wireup_launch_verdicts": wireup_launch_verdicts,
            "wireup_launch_watchdog_key": wireup_launch_watchdog_key,
            "wireup_launch_exports": wireup_launch_exports,
            "wireup_launch_hosts_entries": wireup_launch_hosts_entries,
            "wireup_launch_status": wireup_launch_status,
            "wireup_launch_results": wireup_launch_results,
            "wireup_launch_verdict": wireup_launch_verdict,
            "wireup_launch_precheck_errors": wireup_launch_precheck_errors,
            "wireup_launch_result": wireup_launch_result,
            "wireup_launch_summary": wireup_launch_summary,
            "wireup_launch_report": wireup_launch_report,
            "wireup_launch_jobs_plan": wireup_launch_jobs_plan,
            "wireup_launch_jobs_node": wireup_launch_jobs_node,
            "wireup_launch_jobs_fetches": wireup_launch_jobs_fetches,
            "wireup_launch_jobs_summary": wireup_launch_jobs_summary,
            "wireup_launch_follow": wireup_launch_follow,
            "wireup_launch_progress_calls": wireup_launch_progress_calls,
            "wireup_launch_stall": wireup_launch_stall,
            "wireup_results_path": wireup_results_path,
            "wireup_launch_args": wireup_launch_args,
        }
        return {name: _wrap(func) for name, func in filters.items()}
