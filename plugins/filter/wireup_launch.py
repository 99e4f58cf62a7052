"""Filters for torchrun_launch: thin wrappers around wireup.launch (pure Python, unit-tested)."""

from __future__ import annotations

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup import launch


def _node_facts(hostvars, host):
    """The few facts launch planning needs, read from a host's wireup_node and ansible_facts."""
    try:
        hv = hostvars[host]
    except KeyError:
        return None
    node = hv.get("wireup_node") if hasattr(hv, "get") else None
    if not node:
        return None
    gpu = node.get("gpu") or {}
    network = node.get("network") or {}
    facts = hv.get("ansible_facts") or {}
    cpus = (hv.get("__torchrun_launch_cpus") or {}).get("stdout", "")
    return {
        "cpus": int(cpus) if str(cpus).strip().isdigit() else None,
        "address": network.get("address") or "",
        "interface": network.get("interface") or "",
        "gpu_present": bool(gpu.get("present")),
        "gpu_count": int(gpu.get("count") or 0),
        "infiniband": list(node.get("infiniband") or []),
        "hostname": facts.get("hostname") or "",
    }


def wireup_launch_plan(
    hosts,
    hostvars,
    *,
    group="",
    master_host="",
    master_addr="",
    master_port=29500,
    nproc_per_node="auto",
    play_hosts=None,
    rdzv_backend="c10d",
    omp_threads="auto",
):
    """Plan a job over ``hosts``: ranks, master, endpoint, per-node processes and env inputs."""
    hosts = list(hosts or [])
    nodes = {}
    nproc = {}
    for host in hosts:
        facts = _node_facts(hostvars, host)
        if facts is not None:
            nodes[host] = facts
            # Each host's own wireup_nproc_per_node (host_vars may differ from the group's).
            nproc[host] = hostvars[host].get("wireup_nproc_per_node", nproc_per_node)
    return launch.plan(
        hosts,
        nodes,
        group=group,
        master_host=master_host or "",
        master_addr=master_addr or "",
        master_port=master_port,
        nproc_per_node=nproc,
        play_hosts=None if play_hosts is None else list(play_hosts),
        rdzv_backend=rdzv_backend,
        omp_threads=omp_threads,
    )


def wireup_launch_exports(env):
    return launch.exports(dict(env or {}))


def wireup_launch_env_errors(env, var):
    return launch.env_errors(env if env is None or not hasattr(env, "items") else dict(env), var)


def wireup_launch_job_errors(job, var="torchrun_launch_job"):
    return launch.job_name_errors(job, var)


def wireup_launch_hosts_entries(plan):
    return launch.hosts_entries(dict(plan))


def wireup_launch_resolve_names(plan):
    return launch.resolve_names(dict(plan))


def wireup_launch_first_failure(states):
    return launch.first_failure(dict(states))


def wireup_launch_results(hosts, hostvars, var="__torchrun_launch_result"):
    """{host: hostvars[host][var]} for the job's hosts; a host that never got there is 'gone'."""
    out = {}
    for host in hosts:
        try:
            value = hostvars[host].get(var)
        except KeyError:
            value = None
        out[host] = value if value is not None else {"state": "gone"}
    return out


def wireup_launch_verdict(states, play_hosts=None, timeout=0):
    return launch.job_verdict(dict(states), None if play_hosts is None else list(play_hosts), timeout)


def wireup_launch_is_mount_point(mountinfo, path="/etc/hosts"):
    return launch.is_mount_point(str(mountinfo or ""), path)


def wireup_launch_watchdog_config(plan, host, **kwargs):
    return launch.watchdog_config(dict(plan), host, **kwargs)


def wireup_launch_watchdog_errors(port, interval, timeout, master_port):
    return launch.watchdog_errors(port, interval, timeout, master_port)


def wireup_launch_gpu_usage(text):
    return launch.parse_gpu_usage(str(text or ""))


def wireup_launch_status_line(status, host, gpus=None):
    return launch.status_line(host, dict(status or {}), list(gpus or []))


def wireup_launch_runs_table(hosts, hostvars, var="__torchrun_launch_list"):
    """Rows of every run on the hosts, from each host's registered `wireup-jobctl list` output."""
    per_host = {}
    for host in hosts:
        try:
            registered = hostvars[host].get(var) or {}
        except KeyError:
            continue
        per_host[host] = launch.parse_run_list(registered.get("stdout", ""))
    return launch.runs_table(per_host)


class FilterModule:
    def filters(self):
        return {
            "wireup_launch_plan": wireup_launch_plan,
            "wireup_launch_exports": wireup_launch_exports,
            "wireup_launch_env_errors": wireup_launch_env_errors,
            "wireup_launch_job_errors": wireup_launch_job_errors,
            "wireup_launch_hosts_entries": wireup_launch_hosts_entries,
            "wireup_launch_resolve_names": wireup_launch_resolve_names,
            "wireup_launch_first_failure": wireup_launch_first_failure,
            "wireup_launch_verdict": wireup_launch_verdict,
            "wireup_launch_results": wireup_launch_results,
            "wireup_launch_is_mount_point": wireup_launch_is_mount_point,
            "wireup_launch_watchdog_config": wireup_launch_watchdog_config,
            "wireup_launch_watchdog_errors": wireup_launch_watchdog_errors,
            "wireup_launch_gpu_usage": wireup_launch_gpu_usage,
            "wireup_launch_status_line": wireup_launch_status_line,
            "wireup_launch_runs_table": wireup_launch_runs_table,
        }
