"""Filters for torchrun_launch: thin wrappers around wireup.launch (pure Python, unit-tested)."""

from __future__ import annotations

import base64

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import launch, validate
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def _probed(hv):
    """{path: text} of the role's one probe per node (a slurp loop over /proc/self files)."""
    out = {}
    for item in (hv.get("__torchrun_launch_probe") or {}).get("results", []) or []:
        if item.get("content"):
            out[item.get("item")] = base64.b64decode(item["content"]).decode("utf-8", "replace")
    return out


def _node_facts(hostvars, host):
    """What launch planning needs of a host: preflight's wireup_node and the role's probe."""
    try:
        hv = hostvars[host]
    except KeyError:
        return None
    node = hv.get("wireup_node") if hasattr(hv, "get") else None
    if not node:
        return None
    gpu = node.get("gpu") or {}
    network = node.get("network") or {}
    probed = _probed(hv)
    return {
        "cpus": launch.cpus_allowed(probed.get("/proc/self/status", "")) or None,
        "hosts_mounted": launch.is_mount_point(probed.get("/proc/self/mountinfo", ""), "/etc/hosts"),
        "address": network.get("address") or "",
        "interface": network.get("interface") or "",
        "gpu_present": bool(gpu.get("present")),
        "gpu_count": int(gpu.get("count") or 0),
        "infiniband": list(node.get("infiniband") or []),
        # preflight reads it (setup never runs); ansible_facts only where a play gathered facts.
        "hostname": node.get("hostname") or (hv.get("ansible_facts") or {}).get("hostname") or "",
    }


def wireup_launch_plan(hosts, hostvars, **settings):
    """launch.job_plan over ``hosts`` (the job's group) with every host's facts and its own
    wireup_nproc_per_node (host_vars may differ from the group's)."""
    hosts = list(hosts or [])
    nodes, nproc = {}, {}
    default_nproc = settings.pop("nproc_per_node", "auto")
    for host in hosts:
        facts = _node_facts(hostvars, host)
        if facts is not None:
            nodes[host] = facts
            nproc[host] = hostvars[host].get("wireup_nproc_per_node", default_nproc)
    if settings.get("play_hosts") is not None:
        settings["play_hosts"] = list(settings["play_hosts"])
    for key in ("env", "job_env", "failed"):
        if hasattr(settings.get(key), "items"):
            settings[key] = dict(settings[key])
    return launch.job_plan(hosts, nodes, nproc_per_node=nproc, **settings)


def wireup_launch_exports(env):
    return launch.exports(dict(env or {}))


def wireup_launch_hosts_entries(plan):
    return launch.hosts_entries(dict(plan))


def wireup_launch_status(stdout):
    return launch.parse_status(str(stdout or ""))


def wireup_launch_results(hosts, hostvars, var="__torchrun_launch_result"):
    """{host: hostvars[host][var]} for the job's hosts; a registered wireup-jobctl answer is read
    as its status; a host that never got there is 'gone'."""
    out = {}
    for host in hosts:
        try:
            value = hostvars[host].get(var)
        except KeyError:
            value = None
        if value is not None and "stdout" in value and "state" not in value:
            value = launch.parse_status(value["stdout"])
        out[host] = dict(value) if value is not None else {"state": "gone"}
    return out


def wireup_launch_verdict(states, play_hosts=None, timeout=0):
    return launch.job_verdict(dict(states), None if play_hosts is None else list(play_hosts), timeout)


def wireup_launch_precheck_errors(plan, host, play_hosts, **probes):
    return launch.precheck_errors(dict(plan), host, list(play_hosts or []), **probes)


def wireup_launch_result(status, plan, host, verdict, **extra):
    status = launch.parse_status(status) if isinstance(status, str) else dict(status or {})
    return launch.node_result(dict(plan), host, status, dict(verdict or {}), **extra)


def wireup_launch_summary(results, plan, verdict, **kwargs):
    return launch.summary(dict(plan), dict(results), dict(verdict or {}), **kwargs)


def wireup_launch_report(result, plan, verdict, **kwargs):
    return launch.report(dict(plan), dict(result or {}), dict(verdict or {}), **kwargs)


def wireup_launch_jobs_plan(
    plan, action, run_id="", latest=None, *, hostvars=None, found_var="", play_hosts=None, **kwargs
):
    """launch.jobs_plan; with ``found_var``, ``found`` is each in-play group host's registered
    ``wireup-jobctl latest --record`` answer (that variable in its hostvars)."""
    plan = dict(plan)
    found = None
    if found_var and hostvars is not None:
        found = {}
        for host in plan.get("hosts", []):
            if play_hosts is not None and host not in set(play_hosts):
                continue
            try:
                registered = hostvars[host].get(found_var)
            except KeyError:
                registered = None
            if registered is not None:
                found[host] = dict(registered)
    return launch.jobs_plan(
        plan,
        action,
        run_id or "",
        dict(latest or {}),
        found=found,
        play_hosts=None if play_hosts is None else list(play_hosts),
        **kwargs,
    )


def wireup_launch_jobs_node(result, jobs, host, jobctl, gpus_text=""):
    return launch.jobs_node(dict(jobs), host, dict(result or {}), jobctl, str(gpus_text or ""))


def wireup_launch_jobs_summary(jobs, hosts, hostvars, var, play_hosts=None, *, base_dir=""):
    """launch.jobs_summary from each host's registered wireup-jobctl answer (``var``)."""
    jobs = dict(jobs)
    if jobs.get("action") == "list":
        states, runs = {}, _registered_runs(hosts, hostvars, var)
    else:
        states, runs = wireup_launch_results(hosts, hostvars, var), {}
    return launch.jobs_summary(jobs, states, runs, None if play_hosts is None else list(play_hosts), base_dir)


def wireup_launch_watchdog_key(nbytes=launch.WATCHDOG_KEY_BYTES):
    """launch.watchdog_key: a new run's watchdog key (``32 | wireup_launch_watchdog_key``)."""
    return launch.watchdog_key(nbytes)


def wireup_launch_follow(plan, hostvars, inventory_sources=()):
    started = {}
    for host in plan.get("hosts", []):
        try:
            started[host] = (hostvars[host].get("__torchrun_launch_started") or {}).get("stdout", "")
        except KeyError:
            started[host] = ""
    return launch.follow_lines(dict(plan), started, list(inventory_sources or []))


def _registered_runs(hosts, hostvars, var):
    """host -> its runs, from each host's registered `wireup-jobctl list` output."""
    per_host = {}
    for host in hosts:
        try:
            registered = hostvars[host].get(var) or {}
        except KeyError:
            continue
        per_host[host] = launch.parse_run_list(registered.get("stdout", ""))
    return per_host


def wireup_results_path(root, *names):
    """root/names on the controller, each name checked and the path kept under root
    (validate.results_path): the fetch destinations of jobs' logs and summaries."""
    return validate.results_path(str(root or ""), *(str(n) for n in names))


def wireup_launch_args(args):
    """The program's arguments as strings: a list as given, one string split with shlex
    (validate.program_args)."""
    return validate.program_args(list(args) if isinstance(args, list | tuple) else args)


class FilterModule:
    def filters(self):
        return {
            "wireup_launch_plan": wireup_launch_plan,
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
            "wireup_launch_jobs_summary": wireup_launch_jobs_summary,
            "wireup_launch_follow": wireup_launch_follow,
            "wireup_results_path": _wrap(wireup_results_path),
            "wireup_launch_args": _wrap(wireup_launch_args),
        }
