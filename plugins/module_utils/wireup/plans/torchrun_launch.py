"""Launch planning for torchrun jobs: who is master, each node's rank and process count, its env.

Pure Python (stdlib only, no Ansible imports): the torchrun_launch role calls it through the
filters in plugins/filter/wireup_launch.py, tests import it from
``ansible_collections.wireup.cluster.plugins.module_utils.wireup``.
Errors are returned as sentences that name the variable to fix, never raised, so a play can show
all of them at once.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import re
import secrets
import shlex
from dataclasses import dataclass
from typing import TypedDict

from ..core import checks
from ..launch import slurm as slurm_
from ..launch.wait import RunStatus, job_verdict, parse_status

# Matched whole (fullmatch): '$' would let a trailing newline through. Host names are
# checks.is_host_name's (RFC 1123), the one grammar.
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_HCA_NAME = re.compile(r"[A-Za-z0-9_.:-]+")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def job_name_errors(job, var: str = "torchrun_launch_job") -> list[str]:
    """The job name becomes a folder and part of the rendezvous id: keep it to [A-Za-z0-9_.-]."""
    if not isinstance(job, str) or not _JOB_NAME.fullmatch(job) or len(job) > 64:
        return [
            f"{var}={job!r} is not a usable job name: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        ]
    return []


def resolve_nproc(
    setting, gpu_present: bool, gpu_count: int, host: str, var: str = "wireup_nproc_per_node"
) -> tuple[int, list[str]]:
    """Processes to start on one node.

    "auto" is one per GPU found (1 on a node without NVIDIA GPUs, where jobs run on CPU with gloo).
    An explicit number may not exceed the GPUs found on a GPU node; on a GPU-less node it is the
    number of CPU processes and any positive number is allowed.
    """
    # The format is preflight's rule (checks.validate_nproc); the GPUs found are this plan's.
    format_errors = checks.validate_nproc(setting)
    if format_errors:
        return 0, format_errors
    if setting == "auto":
        if not gpu_present:
            return 1, []
        if gpu_count < 1:
            return 0, [
                f"{host} has NVIDIA GPUs on PCI but nvidia-smi lists none, so {var}=auto finds no "
                f"GPU to run on: install/load the driver ({checks.ANSIBLE_PLAYBOOK} site.yml) or set "
                "a number"
            ]
        return gpu_count, []
    nproc = int(setting)
    if gpu_present and nproc > gpu_count:
        return nproc, [
            f"{var}={nproc} exceeds the {gpu_count} GPU(s) found on {host}: lower it to "
            f"{gpu_count} or less, or use 'auto'"
        ]
    return nproc, []


def ib_hca(devices) -> str:
    """NCCL_IB_HCA value for the InfiniBand devices found: exact names ('=' prefix), sorted."""
    names = sorted({str(d).strip() for d in (devices or []) if str(d).strip()})
    names = [n for n in names if _HCA_NAME.fullmatch(n)]
    return "=" + ",".join(names) if names else ""


def env_errors(env, var: str, names: bool = True) -> list[str]:
    """checks.shell_name_errors, the one rule for an env mapping a bash script exports (a
    mapping, shell-name keys, scalar values); ``names=False`` where preflight checked the names
    already keeps only the mapping and value rules."""
    errors = checks.shell_name_errors(var, env)
    if names:
        return errors
    return [e for e in errors if "is not a valid shell variable name" not in e]


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def exports(env) -> list[str]:
    """``export NAME=value`` lines, values shell-quoted, in the mapping's order."""
    return [f"export {key}={shlex.quote(_scalar(value))}" for key, value in (env or {}).items()]


def _omp_setting(setting) -> tuple[int, list[str]]:
    """(fixed thread count or 0 for auto, errors) of torchrun_launch_omp_threads."""
    if isinstance(setting, str) and setting.strip() == "auto":
        return 0, []
    whole = not isinstance(setting, bool) and (
        isinstance(setting, int) or checks.is_digits(str(setting).strip())
    )
    if whole and int(setting) >= 1:
        return int(setting), []
    return 0, [f"torchrun_launch_omp_threads={setting!r} must be 'auto' or a whole number from 1"]


def omp_threads_for(cpus, nproc) -> int:
    """OpenMP threads per process: the node's CPUs shared by its processes, at least 1."""
    try:
        cpus, nproc = int(cpus), int(nproc)
    except (TypeError, ValueError):
        return 1
    return max(1, cpus // nproc) if nproc > 0 and cpus > 0 else 1


class NodeFacts(TypedDict, total=False):
    """What launch planning needs of one host (node_facts: preflight's wireup_node, the role's
    probe and the host's own wireup_nproc_per_node)."""

    address: str
    interface: str
    gpu_present: bool
    gpu_count: int
    infiniband: list[str]
    hostname: str
    cpus: int | None
    hosts_mounted: bool
    nproc: object  # the host's wireup_nproc_per_node ('auto' or a number)


def _probed(probe) -> dict:
    """{path: text} of the role's one probe per node (a registered slurp loop over /proc/self files)."""
    out = {}
    for item in (probe or {}).get("results", []) or []:
        if item.get("content"):
            out[item.get("item")] = base64.b64decode(item["content"]).decode("utf-8", "replace")
    return out


def node_facts(node, probe=None, nproc="auto") -> NodeFacts:
    """One host's NodeFacts from preflight's ``node`` (wireup_node), the role's ``probe`` (the slurp
    of /proc/self/status and /proc/self/mountinfo) and its ``nproc`` (wireup_nproc_per_node: each
    host's own, host_vars may differ from the group's)."""
    node = node or {}
    gpu, network, probed = node.get("gpu") or {}, node.get("network") or {}, _probed(probe)
    return {
        "cpus": cpus_allowed(probed.get("/proc/self/status", "")) or None,
        "hosts_mounted": is_mount_point(probed.get("/proc/self/mountinfo", ""), "/etc/hosts"),
        "address": network.get("address") or "",
        "interface": network.get("interface") or "",
        "gpu_present": bool(gpu.get("present")),
        "gpu_count": int(gpu.get("count") or 0),
        "infiniband": list(node.get("infiniband") or []),
        # preflight reads it (setup never runs in wireup's plays).
        "hostname": node.get("hostname") or "",
        "nproc": nproc,
    }


@dataclass(frozen=True)
class Layout:
    """plan's settings: who is master, where torchrun meets, how many processes per node."""

    group: str = ""
    master_host: str = ""
    master_addr: str = ""
    master_port: object = 29500
    nproc_per_node: object = "auto"
    play_hosts: list | None = None
    rdzv_backend: str = "c10d"
    omp_threads: object = "auto"
    absent_ok: bool = False


class NodePlan(TypedDict, total=False):
    """One host's part of the job (JobPlan's ``nodes``; launch.sh and job.sbatch read it)."""

    node_rank: int
    nproc: int
    is_master: bool
    gpu_present: bool
    address: str
    interface: str
    ib_hca: str
    hostname: str
    cpus: int
    hosts_mounted: bool  # /etc/hosts is a mount point (docker, podman): only an in-place write works
    env: dict  # exported before wireup_job_env and torchrun_launch_env, which may override it
    names: list[str]  # job_plan: the names this node must resolve (none without the pre-checks)
    listen: bool  # job_plan: the master-port pre-check's listener runs here
    connect: bool  # job_plan: ... its connect runs here


def _where(group: str) -> str:
    return f"torchrun_launch_group={group!r}" if group else "the job's group"


def _master(hosts: list[str], nodes: dict, lay: Layout, errors: list[str]) -> dict:
    """The master, its address and port and torchrun's rendezvous endpoint. wireup_master_host (in
    wireup_node_group) and wireup_master_port (checks.validate_port) are preflight's checks, run
    before this role: here they are only used. A job over another group that lacks
    wireup_master_host (bench's one-node groups) takes its first host."""
    master = checks.master_of(hosts, lay.master_host)
    port_ok = not checks.validate_port("wireup_master_port", lay.master_port)
    port = int(str(lay.master_port).strip()) if port_ok else 0
    addr = str(lay.master_addr or "").strip()
    if addr and not (_is_ip(addr) or checks.is_host_name(addr)):
        errors.append(f"torchrun_launch_master_addr={lay.master_addr!r} is not an address or host name")
    elif not addr and master in nodes:
        addr = str(nodes[master].get("address") or "")
        if not addr:
            errors.append(
                f"the master {master} has no cluster address (wireup_node.network.address): set "
                f"wireup_address (and wireup_interface) for {master} in the inventory"
            )
    endpoint = (f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}") if addr and port else ""
    return {"master": master, "master_addr": addr, "master_port": port, "rdzv_endpoint": endpoint}


def _address_errors(host: str, facts: dict) -> list[str]:
    errors = []
    if not str(facts.get("interface") or ""):
        errors.append(
            f"{host} has no cluster interface (wireup_node.network.interface): set "
            f"wireup_interface for {host} in the inventory"
        )
    address = str(facts.get("address") or "")
    if not address:
        errors.append(f"{host} has no cluster address: set wireup_address for {host} in the inventory")
    elif not (_is_ip(address) or checks.is_host_name(address)):
        errors.append(f"{host}: cluster address {address[:80]!r} is no IP address: fix wireup_address")
    return errors


def _node_plan(host: str, rank: int, facts: dict, setting, ctx: tuple) -> tuple[NodePlan, list[str]]:
    """(one host's NodePlan, its errors); ``ctx``: (the master, the fixed OMP thread count or 0)."""
    master, omp_fixed = ctx
    gpu_present = bool(facts.get("gpu_present"))
    nproc, errors = resolve_nproc(setting, gpu_present, int(facts.get("gpu_count") or 0), host)
    errors = errors + _address_errors(host, facts)
    cpus = facts.get("cpus")
    return {
        "node_rank": rank,
        "nproc": nproc,
        "is_master": host == master,
        "gpu_present": gpu_present,
        "address": str(facts.get("address") or ""),
        "interface": str(facts.get("interface") or ""),
        "ib_hca": ib_hca(facts.get("infiniband")),
        "hostname": str(facts.get("hostname") or ""),
        "cpus": int(cpus) if isinstance(cpus, int) or checks.is_digits(str(cpus or "")) else 0,
        "hosts_mounted": bool(facts.get("hosts_mounted")),
        "env": {"OMP_NUM_THREADS": str(omp_fixed or omp_threads_for(cpus, nproc))},
    }, errors


def _absent_errors(hosts: list[str], lay: Layout) -> list[str]:
    """A job host outside the play (--limit, or unreachable): the rendezvous would wait for it
    forever (jobs.yml's plan, ``absent_ok``, only leaves it out of ``nodes``)."""
    if lay.play_hosts is None or lay.absent_ok:
        return []
    play = set(lay.play_hosts)
    missing = [h for h in hosts if h not in play]
    if not missing:
        return []
    return [
        f"{', '.join(missing)} of {_where(lay.group)} not in this play (--limit, or unreachable): "
        "a job needs every node of its group; run on the whole group or choose another group"
    ]


def plan(hosts, nodes: dict, **layout) -> dict:
    """Plan a job over ``hosts`` (inventory names of the job's group): ``layout`` is Layout's fields.

    ``nodes`` maps each host to its NodeFacts. ``nproc_per_node`` is one setting for all, or a
    mapping host -> setting (each host's own wireup_nproc_per_node). ``play_hosts``, when given, are
    the hosts in the play: a job host outside it is an error, unless ``absent_ok`` (jobs.yml, which
    follows a run that may not have run on every host of the group: ``jobs_plan`` decides from the
    run's record): such hosts are then only left out of ``nodes``.

    ``omp_threads`` sets OMP_NUM_THREADS for every process (``env`` of each node): "auto" is
    the node's CPUs (``cpus`` in its facts) divided by its processes, at least 1; a number is used
    as is. torchrun would otherwise set 1 and print a banner saying so.

    Node ranks are the hosts' indexes in sorted order. With ``rdzv_backend="static"`` the master
    must be node 0 (it hosts the store), so it comes first and the others follow, sorted.

    Returns ``{"errors": [...], "hosts": sorted hosts, "nnodes", "master", "master_addr",
    "master_port", "rdzv_endpoint", "world_size", "nodes": {host: NodePlan}, "order"}``.
    """
    lay = Layout(**layout)
    hosts = sorted(dict.fromkeys(hosts or []))
    result = {"errors": [], "hosts": hosts, "nnodes": len(hosts), "master": "", "master_addr": ""}
    result.update(master_port=0, rdzv_endpoint="", world_size=0, nodes={})
    errors = result["errors"]
    if not hosts:
        errors.append(f"{_where(lay.group)} has no hosts: name an inventory group that holds the job's nodes")
        return result
    # Preflight's checks, repeated where the names are used: they become words of launch.sh,
    # job.sbatch and /etc/hosts, and paths on the controller.
    errors.extend(checks.inventory_host_errors(hosts))
    errors.extend(checks.node_hostname_errors({h: (nodes.get(h) or {}).get("hostname") for h in hosts}))
    if errors:
        return result
    errors.extend(_absent_errors(hosts, lay))
    result.update(_master(hosts, nodes, lay, errors))
    if lay.rdzv_backend not in ("c10d", "static"):
        errors.append(f"torchrun_launch_rdzv_backend={lay.rdzv_backend!r} must be c10d or static")
    master = result["master"]
    static = lay.rdzv_backend == "static" and master in hosts
    order = [master, *(h for h in hosts if h != master)] if static else list(hosts)
    result["order"] = order
    omp_fixed, omp_errors = _omp_setting(lay.omp_threads)
    errors.extend(omp_errors)
    for rank, host in enumerate(order):
        facts = nodes.get(host)
        if facts is None:
            if lay.play_hosts is None:
                errors.append(
                    f"{host} of {_where(lay.group)} has no facts: run the preflight role on it first"
                )
            continue
        per_host = isinstance(lay.nproc_per_node, dict)
        setting = lay.nproc_per_node.get(host, "auto") if per_host else lay.nproc_per_node
        result["nodes"][host], node_errors = _node_plan(host, rank, facts, setting, (master, omp_fixed))
        errors.extend(node_errors)
        result["world_size"] += result["nodes"][host]["nproc"]
    return result


def hosts_entries(plan_or_nodes: dict, mapped: bool = True) -> list[str]:
    """/etc/hosts lines mapping each job host's inventory name and hostname to its address.

    Names that are IP addresses, ``localhost`` and names that are not valid host names are left
    out (an inventory may name nodes by address, and localhost must keep pointing at loopback).

    With ``mapped``, each IPv4 address also gets a line for its IPv4-mapped IPv6 form
    (``::ffff:A.B.C.D NAME-ipv4-mapped``). torch's c10d store listens on a dual-stack socket, so
    the peers it accepts have such addresses, and it reverse-resolves every peer address
    (getnameinfo without NI_NUMERICHOST in c10d/socket.cpp, formatSockAddr). glibc's files backend
    does not match the mapped form against the IPv4 line; the lookup falls through to DNS, which
    fails on a cluster without reverse DNS (EAI_AGAIN, -3), and c10d warns "The hostname of the
    client socket cannot be retrieved. err=-3". The alias name keeps forward lookups of the real
    names IPv4-only.
    """
    nodes = plan_or_nodes.get("nodes", plan_or_nodes)
    lines = []
    for host in sorted(nodes):
        facts = nodes[host]
        address = str(facts.get("address") or "")
        if not address:
            continue
        names = []
        for name in (host, str(facts.get("hostname") or "")):
            short = name.strip()
            if (
                short
                and short not in names
                and short != "localhost"
                and not _is_ip(short)
                and checks.is_host_name(short)
            ):
                names.append(short)
        if names:
            lines.append(f"{address} {' '.join(names)}")
    if mapped:
        for line in list(lines):
            address, *names = line.split()
            if _is_ip(address) and ipaddress.ip_address(address).version == 4:
                lines.append(f"::ffff:{address} {names[0]}-ipv4-mapped")
    return lines


def resolve_names(plan_or_nodes: dict) -> list[str]:
    """Names every node of the job must resolve: the hosts_entries' names."""
    names: list[str] = []
    for line in hosts_entries(plan_or_nodes, mapped=False):
        for name in line.split()[1:]:
            if name not in names:
                names.append(name)
    return names


def is_mount_point(mountinfo: str, path: str = "/etc/hosts") -> bool:
    """Whether ``path`` is a mount point in /proc/self/mountinfo text (field 5: mount point).

    Container managers (docker, podman, systemd-nspawn with --bind) bind-mount /etc/hosts: a write
    by rename over it fails there (EBUSY), so only there is an in-place (unsafe) write needed.
    Octal escapes (``\\040`` for a space) are decoded.
    """
    for line in (mountinfo or "").splitlines():
        fields = line.split()
        if len(fields) >= 5:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point == path:
                return True
    return False


@dataclass(frozen=True)
class WatchdogLimits:
    """watchdog.json's port and time limits (torchrun_launch_watchdog_*, torchrun_launch_join_timeout,
    torchrun_launch_stop_grace) and the job's folder."""

    port: object
    interval: object
    timeout: object
    join_timeout: object
    grace: object
    job_dir: str


def watchdog_config(plan_: dict, host: str, **limits) -> dict:
    """The watchdog.json of ``host``: who is master, where it listens, the time limits (``limits``:
    WatchdogLimits' fields).

    The master listens on the address the workers reach it at (the master's cluster address),
    not on every interface: only the cluster network reaches its watchdog."""
    w = WatchdogLimits(**limits)
    addr = plan_.get("master_addr") or ""
    return {
        "self": host,
        "master": plan_.get("master") or "",
        "hosts": list(plan_.get("hosts") or []),
        "addr": addr,
        "bind": addr,
        "port": int(w.port),
        "interval": float(w.interval),
        "timeout": float(w.timeout),
        "join_timeout": float(w.join_timeout),
        "grace": int(w.grace),
        "job_dir": w.job_dir,
    }


def watchdog_errors(port, interval, timeout, master_port) -> list[str]:
    errors = []
    try:
        port_n = int(port)
    except (TypeError, ValueError):
        port_n = 0
    if isinstance(port, bool) or not 1024 <= port_n <= 65535:
        errors.append(f"torchrun_launch_watchdog_port={port!r} must be a TCP port from 1024 to 65535")
    elif str(port_n) == str(master_port):
        errors.append(
            f"torchrun_launch_watchdog_port={port_n} is wireup_master_port too (torchrun's rendezvous): "
            "choose another port"
        )
    try:
        ok = float(interval) > 0 and float(timeout) >= 2 * float(interval)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        errors.append(
            f"torchrun_launch_watchdog_interval={interval!r} and "
            f"torchrun_launch_watchdog_timeout={timeout!r}: "
            "the interval must be positive and the timeout at least twice the interval"
        )
    return errors


def parse_gpu_usage(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total
    --format=csv,noheader,nounits``: [{"index", "util", "mem_used", "mem_total"}] (MiB, %).

    Lines that do not parse (errors, "[N/A]", truncated output) are skipped.
    """
    rows = []
    for line in (text or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not all(checks.is_digits(f) for f in fields):
            continue
        index, util, used, total = map(int, fields)
        rows.append({"index": index, "util": util, "mem_used": used, "mem_total": total})
    return rows


def status_line(host: str, status: dict, gpus=None) -> str:
    """One node's state for people, e.g.
    "node2: running since 2026-12-01 01:02:03 UTC (12 s); GPU0 97% 40.0/140 GiB"."""
    state = (status or {}).get("state") or "unknown"
    elapsed = (status or {}).get("elapsed")
    text = f"{host}: {state}"
    if state == "exited":
        text += f" with code {status.get('rc')}"
    started = (status or {}).get("started")
    if state == "running" and checks.is_number(started):
        when = datetime.datetime.fromtimestamp(float(started), datetime.UTC)
        text += f" since {when:%Y-%m-%d %H:%M:%S} UTC"
    if elapsed is not None:
        text += f" after {float(elapsed):.0f} s" if state != "running" else f" ({float(elapsed):.0f} s)"
    if status.get("reason"):
        text += f" ({status['reason']})"
    for gpu in gpus or []:
        used, total = gpu["mem_used"] / 1024, gpu["mem_total"] / 1024
        text += f"; GPU{gpu['index']} {gpu['util']}% {used:.1f}/{total:.0f} GiB"
    return text


def parse_run_list(text: str) -> list[dict]:
    """The JSON lines of ``wireup-jobctl list`` (lines that are not JSON objects are skipped)."""
    runs = []
    for line in (text or "").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("job") and item.get("run_id"):
            runs.append(item)
    return runs


def runs_table(per_host: dict) -> list[str]:
    """Rows "JOB RUN_ID started UTC: node1 running, node2 exited 0" over every node's run list,
    newest first. ``per_host`` maps host -> list of runs (parse_run_list)."""
    merged: dict[tuple[str, str], dict] = {}
    for host in sorted(per_host):
        for run in per_host[host] or []:
            key = (run["job"], run["run_id"])
            entry = merged.setdefault(key, {"started": run.get("started") or 0, "nodes": []})
            state = run.get("state")
            if state == "exited":
                state = f"exited {run.get('rc')}"
            elif state == "slurm":  # launch.yml's Slurm path: jobs.yml's status asks Slurm how it stands
                job_id = run.get("slurm_job")
                state = f"Slurm job {job_id if slurm_.is_job_id(job_id) else '?'}"
            entry["nodes"].append(f"{host} {state}")
    rows = []
    for (job, run_id), entry in sorted(merged.items(), key=lambda kv: -float(kv[1]["started"] or 0)):
        when = datetime.datetime.fromtimestamp(float(entry["started"] or 0), datetime.UTC)
        rows.append(f"{job} {run_id} started {when:%Y-%m-%d %H:%M:%S} UTC: {', '.join(entry['nodes'])}")
    return rows


def cpus_allowed(status_text: str) -> int:
    """CPUs a process may run on, from /proc/self/status's ``Cpus_allowed_list`` (e.g. "0-3,8"):
    what ``nproc`` counts (the affinity mask; cgroup quotas are not counted). 0 when unreadable."""
    for line in (status_text or "").splitlines():
        key, _sep, value = line.partition(":")
        if key.strip() != "Cpus_allowed_list":
            continue
        total = 0
        for part in value.strip().split(","):
            low, dash, high = part.strip().partition("-")
            if not checks.is_digits(low) or (dash and (not checks.is_digits(high) or int(high) < int(low))):
                return 0
            total += int(high) - int(low) + 1 if dash else 1
        return total
    return 0


ON_FAILED = ("refuse", "skip")


@dataclass(frozen=True)
class HealthOptions:
    """health_plan's settings: torchrun_launch_on_failed, torchrun_launch_drain_failed,
    torchrun_launch_slurm, the job's group and wireup_master_host."""

    on_failed: str = "refuse"
    drain: bool = False
    slurm: bool = False
    group: str = ""
    master_host: str = ""


def _health_errors(o: HealthOptions, failed) -> tuple[dict, list[str]]:
    """(the failed mapping, the errors of the settings)."""
    errors = []
    if o.on_failed not in ON_FAILED:
        errors.append(f"torchrun_launch_on_failed={o.on_failed!r} must be refuse or skip")
    if o.drain and not o.slurm:
        errors.append(
            "torchrun_launch_drain_failed=true drains Slurm nodes: it needs torchrun_launch_slurm=true "
            "(or set it to false)"
        )
    if failed is not None and not isinstance(failed, dict):
        errors.append(f"torchrun_launch_failed must map inventory hosts to reasons, got {failed!r}")
    return failed if isinstance(failed, dict) else {}, errors


def _left_out(o: HealthOptions, hosts: list[str], nodes: dict, reasons: dict) -> dict:
    """health_plan's answer when the job starts without the FAILed nodes (skip, or drain)."""
    kept = [h for h in hosts if h not in reasons]
    why = "torchrun_launch_drain_failed" if o.drain else "torchrun_launch_on_failed=skip"
    names = {h: slurm_.node_name(h, nodes.get(h)) for h in reasons}
    out = {"hosts": kept, "left_out": reasons, "slurm_exclude": ",".join(names.values()), "drain": []}
    out["show"] = [f"left out {h} ({why}): {reason}" for h, reason in reasons.items()]
    if o.master_host in reasons:
        master = checks.master_of(kept, o.master_host)
        out["show"].append(f"the master {o.master_host} is left out: {master} is the master")
    # job.sbatch's --exclude, scontrol's NodeName=
    out["errors"] = (
        [e for h in reasons for e in slurm_.node_name_errors(h, names[h])] if o.slurm or o.drain else []
    )
    for h in reasons if o.drain else ():
        argv = slurm_.drain_argv(names[h], reasons[h], whose="hw", check="bench")
        out["drain"].append({"host": h, "node": names[h], "reason": argv[-1][len("Reason=") :], "argv": argv})
    return out


def health_plan(hosts, nodes: dict, failed=None, **options) -> dict:
    """Which of the job's hosts run it, given the nodes that failed a check (``options``:
    HealthOptions' fields).

    ``failed`` maps host -> reason (torchrun_launch_failed: launch.yml reads it from the store,
    gate.refusals: per capability, record/gate.py). ``on_failed``: refuse (the job does not start,
    naming each failed node and its reason) or skip (the job starts on the others: node ranks are
    the remaining hosts' sorted indexes, 0..n-1, and the master is re-chosen among them when it is
    left out).
    ``drain`` (Slurm only) leaves them out as skip does and drains each one (``drain``: scontrol's
    argv per node, the reason from slurm.drain_reason). Returns {"hosts" (those that run),
    "left_out" {host: reason}, "slurm_exclude" (their Slurm names for sbatch --exclude), "drain"
    [{host, node, reason, argv}], "show" (lines for the play), "errors"}."""
    o = HealthOptions(**options)
    hosts = sorted(dict.fromkeys(hosts or []))
    out = {"hosts": hosts, "left_out": {}, "slurm_exclude": "", "drain": [], "show": [], "errors": []}
    failed, out["errors"] = _health_errors(o, failed)
    bad = [h for h in hosts if h in failed]
    if not bad or out["errors"]:
        return out
    reasons = {h: str(failed[h] or "latest bench verdict FAIL") for h in bad}
    where = f"torchrun_launch_group={o.group}" if o.group else "the job's group"
    if o.on_failed == "refuse" and not o.drain:
        out["errors"].append(
            f"launch refused: {' | '.join(reasons.values())}. Fix the node or leave it out (--limit, or "
            f"remove it from {where}), set torchrun_launch_on_failed=skip to start on the healthy "
            "nodes only, or wireup_launch_refuse_failed=false to start anyway"
        )
        return out
    if len(bad) == len(hosts):
        why = "torchrun_launch_drain_failed" if o.drain else "torchrun_launch_on_failed=skip"
        out["errors"].append(
            f"every node of {where} FAILed its latest bench ({', '.join(bad)}): {why} leaves none to "
            "run on; fix the nodes and run bench.yml again, or set wireup_launch_refuse_failed=false "
            "to start anyway"
        )
        return out
    return _left_out(o, hosts, nodes, reasons)


@dataclass(frozen=True)
class JobSettings:
    """job_plan's settings: every variable of a torchrun_launch run, passed by name by
    roles/torchrun_launch/tasks/plan.yml (and plan's Layout: master, port, processes, rendezvous)."""

    job: str
    program: str
    base_dir: str
    venv_path: str
    results_dir: str
    group: str = ""
    node_group: str = ""
    launcher: str = "torchrun"
    env: dict | None = None
    job_env: dict | None = None
    run_id: str = ""
    run: bool = True
    wait: bool = False
    slurm: bool = False
    check_mode: bool = False
    precheck: bool = True
    install_examples: bool = True
    examples_src: str = ""
    watchdog: bool = True
    watchdog_port: object = 0
    watchdog_interval: object = 5
    watchdog_timeout: object = 30
    join_timeout: object = 300
    stop_grace: object = 15
    failed: dict | None = None
    on_failed: str = "refuse"
    drain_failed: bool = False
    follow: bool = False
    plan_id: str = ""  # this pass's id (plan.yml): each node takes its slice of this pass's plan only
    master_host: str = ""
    master_addr: str = ""
    master_port: object = 29500
    nproc_per_node: object = "auto"
    play_hosts: list | None = None
    rdzv_backend: str = "c10d"
    omp_threads: object = "auto"

    def layout(self, nodes: dict) -> dict:
        """plan's Layout: each host's own wireup_nproc_per_node (NodeFacts' nproc), else this one."""
        return {
            "group": self.group,
            "master_host": self.master_host,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
            "nproc_per_node": {h: n.get("nproc", self.nproc_per_node) for h, n in nodes.items()},
            "play_hosts": None if self.play_hosts is None else list(self.play_hosts),
            "rdzv_backend": self.rdzv_backend,
            "omp_threads": self.omp_threads,
            "absent_ok": bool(self.follow),
        }


class WatchdogPlan(TypedDict):
    on: bool
    port: int
    key: str  # where the run's key goes ('' when no watchdog run starts)
    config: dict  # watchdog.json (watchdog_config)


class JobPlan(TypedDict):
    """``__torchrun_launch_plan`` (``__plan`` in the role's tasks and templates): what they read."""

    errors: list[str]
    hosts: list[str]  # those that run the job (sorted)
    nnodes: int
    master: str
    master_addr: str
    master_port: int
    rdzv_endpoint: str
    world_size: int
    nodes: dict[str, NodePlan]
    order: list[str]  # node rank order
    show: list[str]  # one line per node, the nodes left out, the drains
    left_out: dict  # host -> why (health_plan)
    slurm_exclude: str
    drain: list[dict]  # scontrol calls before sbatch (only when the job is submitted)
    drain_read: list[dict]  # the nodes whose Slurm state the drain step reads
    drain_state_argv: list[str]
    job: str
    group: str
    job_dir: str
    jobctl: str
    run_id: str
    results_root: str
    results: str  # the controller's folder of this run
    summary: str  # its file name
    mode: str  # render (files only), slurm or start (wireup-jobctl)
    steps: list[str]  # the task files main.yml includes in turn (_steps)
    wait: bool
    precheck: bool
    precheck_paths: list[str]  # the program and the venv's launcher (none without the pre-checks)
    watchdog: WatchdogPlan
    dirs: list[dict]  # file items: {path, state, mode}
    copies: list[dict]  # copy items: {src, dest, mode}
    templates: list[dict]  # template items: {src, dest, mode, bash}
    record: dict  # run_record: what the run records of itself when it starts
    plan_id: str  # the pass that made it (node_plan takes a slice of this pass's plan only)
    hosts_entries: list[str]  # /etc/hosts lines of every job host (hosts_entries), made once
    node_names: dict[str, str]  # host -> its Slurm node name (slurm.node_names), made once
    planner: str  # node_plan: the host that made the plan (plan.yml's planner of the job)


def _job_errors(s: JobSettings, result: dict) -> list[str]:
    """The errors of the job's own variables (inventory-only checks of the shared wireup_*
    variables are preflight's, not repeated here)."""
    errors = job_name_errors(s.job) + run_id_errors(s.run_id) + env_errors(s.env, "torchrun_launch_env")
    errors += env_errors(s.job_env, "wireup_job_env", names=False)  # names: preflight's
    if s.launcher == "python" and result["nnodes"] > 1:
        errors.append(
            f"torchrun_launch_launcher=python runs a one-node program: torchrun_launch_group={s.group} holds "
            f"{result['nnodes']} hosts; name a group with one host or use torchrun"
        )
    if not str(s.program or "").startswith("/"):
        errors.append(f"torchrun_launch_program={s.program} must be an absolute path on the nodes")
    return errors


def _node_checks(result: dict, precheck: bool, torchrun_checks: bool) -> None:
    """Each node's names to resolve (none without the pre-checks: start.yml's getent loop then
    runs nothing), and its part of the master-port pre-check.

    Linear in the nodes (issue 39; it was every name on every node, N^2 lookups): the master
    resolves every job name once; each other node its own names (torchrun checks the node's own
    hostname) and the master's (the rendezvous endpoint and MASTER_ADDR), in its own resolver,
    since its /etc/hosts or DNS may answer differently from the master's. Whether a third node's
    name resolves on it is not asked: nothing on it looks that name up (gloo and NCCL take the
    peers' addresses from the rendezvous)."""
    nodes = result["nodes"]
    everyone = resolve_names(result) if precheck else []
    master = result.get("master")
    masters = resolve_names({master: nodes[master]}) if precheck and master in nodes else []
    for host, node in nodes.items():
        wanted = everyone if node["is_master"] else resolve_names({host: node}) + masters
        own = [node["hostname"]] if node["hostname"] else []
        names = list(dict.fromkeys(wanted + own)) if precheck else []
        node.update(names=names, listen=torchrun_checks and node["is_master"])
        node["connect"] = torchrun_checks and not node["is_master"]


def _node_lines(s: JobSettings, result: dict) -> list[str]:
    return [
        f"job {s.job}: {host} is node {n['node_rank']} of {result['nnodes']}, {n['nproc']} process(es) "
        f"({result['world_size']} in all, OMP_NUM_THREADS {n['env']['OMP_NUM_THREADS']}), master "
        f"{result['master']} at {result['rdzv_endpoint']}, interface {n['interface']}"
        + (f", NCCL_IB_HCA {n['ib_hca']}" if n["ib_hca"] else "")
        for host, n in sorted(result["nodes"].items(), key=lambda kv: kv[1]["node_rank"])
    ]


def _drains(s: JobSettings, health: dict, mode: str, errors: list[str]) -> dict:
    """Drained only when the job is submitted to Slurm (not in check mode, not render-only), and
    only those nodes Slurm does not have drained already (the drain step reads their state first,
    in check mode too: slurm.drain_plan)."""
    drain_read = health["drain"] if s.slurm and s.run and not errors else []
    held = "check mode" if s.check_mode else "torchrun_launch_run=false"
    unless = "unless Slurm has it drained already"
    show = [
        f"Slurm: drain {d['node']} before sbatch {unless}: {shlex.join(d['argv'])}"
        if mode == "slurm"
        else f"Slurm: would drain {d['node']} {unless} ({held}: nothing changes): {shlex.join(d['argv'])}"
        for d in health["drain"]
    ]
    return {
        "left_out": health["left_out"],
        "slurm_exclude": health["slurm_exclude"],
        "drain": health["drain"] if mode == "slurm" else [],
        "drain_read": drain_read,
        "drain_state_argv": slurm_.node_state_argv(None),  # every node: the blast radius
        "show": show,
    }


def _files(s: JobSettings, job_dir: str, watchdog_on: bool) -> dict:
    """The file tasks' items: launch.sh (job.sbatch, watchdog.json), the tools and examples, the
    folders (logs and run records are the job user's and group's only: 0750 folders, 0640 logs)."""
    templates = [{"src": "jobs/launch.sh.j2", "dest": f"{job_dir}/launch.sh", "mode": "0750", "bash": True}]
    if s.slurm:
        templates.append(
            {"src": "jobs/job.sbatch.j2", "dest": f"{job_dir}/job.sbatch", "mode": "0750", "bash": True}
        )
    if watchdog_on:
        templates.append({"src": "jobs/watchdog.json.j2", "dest": f"{job_dir}/watchdog.json", "mode": "0644"})
    tools = ("wireup-jobctl", "wireup-watchdog", "wireup-listen")
    copies = [{"src": name, "dest": f"{s.base_dir}/bin/{name}", "mode": "0755"} for name in tools]
    if s.install_examples:
        copies.append({"src": s.examples_src, "dest": f"{s.base_dir}/examples/", "mode": "0644"})
    folders = ((f"{s.base_dir}/bin", "0755"), (f"{s.base_dir}/jobs", "0755"), (job_dir, "0755"))
    folders += ((f"{job_dir}/logs", "0750"), (f"{job_dir}/runs", "0750"))
    dirs = [{"path": path, "state": "directory", "mode": mode} for path, mode in folders]
    if not watchdog_on:
        dirs.append({"path": f"{job_dir}/watchdog.json", "state": "absent"})
    return {"dirs": dirs, "copies": copies, "templates": templates}


def _watchdog(s: JobSettings, result: dict, job_dir: str, mode: str) -> WatchdogPlan:
    """The job's watchdog: on for a multi-node torchrun job; its port (the master port + 1 unless
    set), its settings and where the run's key goes (the run's own folder, owner-only, before its
    start; start.yml makes that folder after the pre-checks, so a refused launch leaves no run)."""
    on = bool(s.watchdog) and s.launcher == "torchrun" and result["nnodes"] > 1
    port = int(s.watchdog_port or 0) or int(result["master_port"] or 0) + 1
    limits = {"interval": s.watchdog_interval, "timeout": s.watchdog_timeout, "join_timeout": s.join_timeout}
    return {
        "on": on,
        "port": port,
        "key": f"{job_dir}/runs/{s.run_id}/watchdog.key" if on and mode == "start" else "",
        "config": watchdog_config(
            result, "", port=port if on else 0, grace=s.stop_grace, job_dir=job_dir, **limits
        ),
    }


def _steps(mode: str, wait: bool, drain: bool) -> list[str]:
    """The task files main.yml includes in turn, after the job's files: drain.yml (the FAILed nodes
    Slurm is to drain, also in check mode), then the run (start.yml, slurm.yml), then either how to
    follow it (follow.yml) or the wait for it (wait.yml, slurm_wait.yml) and its report (report.yml).
    Empty for a job that is only rendered (check mode, torchrun_launch_run=false) and drains nothing."""
    run = {"render": [], "start": ["start", "wait"], "slurm": ["slurm", "slurm_wait"]}[mode]
    if run:
        run = [*run, "report"] if wait else [run[0], "follow"]
    return (["drain"] if drain else []) + run


def job_plan(hosts, nodes: dict, **settings) -> JobPlan:
    """The whole of one torchrun_launch run (``settings``: JobSettings' fields): ``plan`` plus every
    decision the role's tasks execute and every error of the job's own variables.

    ``failed``, ``on_failed`` and ``drain_failed`` are health_plan's: the job runs on its ``hosts``;
    the nodes left out, their drains (empty unless the job is submitted: check mode and render-only
    drain nothing), ``drain_read`` and ``drain_state_argv`` (the read slurm.drain_plan decides from).
    ``record`` is what the run records of itself when it starts (``run_record``); ``follow`` is
    jobs.yml's plan: hosts of the group outside the play are no error there (``plan``'s
    ``absent_ok``), ``jobs_plan`` decides from the run's record which hosts it needs.
    """
    s = JobSettings(**settings)
    health = health_plan(
        hosts, nodes, s.failed, on_failed=s.on_failed, drain=s.drain_failed, slurm=s.slurm,
        group=s.group, master_host=s.master_host,
    )  # fmt: skip
    # Every node refused or left out: plan the whole group so that only health's errors show.
    result = plan(health["hosts"] or hosts, nodes, **s.layout(nodes))
    errors = result["errors"]
    errors.extend(health["errors"] + _job_errors(s, result))
    job_dir = f"{s.base_dir}/jobs/{s.job}"
    mode = "render" if not s.run or s.check_mode else "slurm" if s.slurm else "start"
    watchdog = _watchdog(s, result, job_dir, mode)
    if watchdog["on"]:
        limits = (s.watchdog_interval, s.watchdog_timeout, result["master_port"])
        errors.extend(watchdog_errors(watchdog["port"], *limits))
    precheck = bool(s.precheck) and mode == "start"
    _node_checks(result, precheck, precheck and s.launcher == "torchrun")
    drains = _drains(s, health, mode, errors)
    result["show"] = _node_lines(s, result) + health["show"] + drains.pop("show")
    result.update(drains, **_files(s, job_dir, watchdog["on"]))
    group_summary = s.group and s.node_group and s.group != s.node_group
    result.update(
        job=s.job,
        group=s.group,
        job_dir=job_dir,
        jobctl=f"{s.base_dir}/bin/wireup-jobctl",
        run_id=s.run_id,
        results_root=f"{s.results_dir}/jobs",
        results=_results(f"{s.results_dir}/jobs", s.job, s.run_id, errors),
        summary=f"summary-{s.group}.json" if group_summary else "summary.json",
        mode=mode,
        wait=bool(s.wait),
        precheck=precheck,
        precheck_paths=[s.program, f"{s.venv_path}/bin/{'python' if s.launcher == 'python' else 'torchrun'}"]
        if precheck
        else [],
        watchdog=watchdog,
        steps=_steps(mode, bool(s.wait), bool(drains["drain_read"])),
    )
    result["record"] = run_record(result)
    result.update(plan_id=str(s.plan_id or ""), hosts_entries=hosts_entries(result))
    result["node_names"] = slurm_.node_names(result)
    return result


WATCHDOG_KEY_BYTES = 32


def watchdog_key(nbytes=WATCHDOG_KEY_BYTES) -> str:
    """A new run's watchdog key: ``nbytes`` (at least 32) random bytes from the secrets module, in
    hex. Made once per run on the controller; the nodes get it in a file, never on a command line."""
    return secrets.token_hex(max(int(nbytes), WATCHDOG_KEY_BYTES))


RECORD_VERSION = 1


def run_record(plan_: dict) -> dict:
    """What a run records of itself when it starts: ``wireup-jobctl start`` writes it (from the
    environment variable WIREUP_RUN_RECORD, this dict as JSON) to JOB_DIR/runs/RUN_ID/run.json on
    every host of the run, before its ``started``. ``jobs_plan`` follows the run by it: the hosts it
    ran on (a run started with torchrun_launch_on_failed=skip lacks the nodes left out), its master
    (re-chosen when the inventory's was left out) and why each node was left out."""
    return {
        "wireup_run_record": RECORD_VERSION,
        "job": plan_.get("job") or "",
        "run_id": plan_.get("run_id") or "",
        "group": plan_.get("group") or "",
        "hosts": list(plan_.get("hosts") or []),
        "master": plan_.get("master") or "",
        "left_out": {str(h): str(why) for h, why in (plan_.get("left_out") or {}).items()},
        "nnodes": plan_.get("nnodes") or 0,
        "world_size": plan_.get("world_size") or 0,
    }


def _results(root, job, run_id, errors) -> str:
    """The controller's folder of a run, root/JOB-RUN_ID (checks.results_path: it stays under
    root); '' with an error when it would not."""
    if errors:
        return ""
    try:
        return checks.results_path(root, f"{job}-{run_id}")
    except ValueError as exc:
        errors.append(str(exc))
        return ""


def run_id_errors(run_id, var: str = "torchrun_launch_run_id") -> list[str]:
    """A run id becomes a folder (runs/RUN_ID), a log name and part of the rendezvous id:
    wireup-jobctl's rule, [A-Za-z0-9][A-Za-z0-9_.-]*; empty: none given."""
    if run_id in ("", None):
        return []
    if not isinstance(run_id, str) or not _JOB_NAME.fullmatch(run_id) or len(run_id) > 128:
        return [
            f"{var}={run_id!r} is not a usable run id: use letters, digits, '_', '.' or '-', starting "
            "with a letter or digit (or leave it empty)"
        ]
    return []


def _missing_program(result) -> bool:
    """A command result whose executable does not exist (the command module's own failure: rc is
    the OSError's errno, 2 = ENOENT). ansible-core before 2.19 says "[Errno 2] No such file or
    directory: ..." in msg; 2.19 says "Error executing command." with empty stdout and stderr (the
    program's own exit code 2, e.g. wireup-jobctl's usage error, comes with msg "non-zero return
    code" and its stderr)."""
    if not result or result.get("rc") != 2:
        return False
    msg = str(result.get("msg", ""))
    quiet = not result.get("stdout") and not result.get("stderr")
    return "No such file or directory" in msg or (msg == "Error executing command." and quiet)


@dataclass(frozen=True)
class Probes:
    """The registered results of a node's pre-start probes (start.yml): the stat loop of the
    program and the venv, the getent loop of every name, the worker's connect to the master port,
    the master's listener; ``timeout``: torchrun_launch_precheck_timeout."""

    paths: dict | None = None
    names: dict | None = None
    connect: dict | None = None
    listener: dict | None = None
    timeout: object = 5


def _missing_paths(plan_: dict, host: str, paths) -> list[str]:
    program, venv_bin = (plan_.get("precheck_paths") or ["", ""])[:2]
    # A skipped stat (torchrun_launch_precheck: false, the fabric bench's pair jobs) is no evidence.
    missing = [
        r.get("item")
        for r in (paths or {}).get("results", [])
        if not r.get("skipped") and not (r.get("stat") or {}).get("exists")
    ]
    if not missing:
        return []
    fixes = (
        [f"copy torchrun_launch_program={program} to every node of the job first"]
        if program in missing
        else []
    )
    if venv_bin in missing:
        venv = venv_bin.rsplit("/bin/", 1)[0]
        fixes.append(
            f"create the venv (wireup_venv_path={venv}) with {checks.ANSIBLE_PLAYBOOK} site.yml "
            "--tags pytorch_venv"
        )
    return [f"{host} lacks {' and '.join(missing)}: {'; '.join(fixes)}"]


def _unresolved(host: str, names) -> list[str]:
    # ansible.builtin.getent with fail_key=false answers an unknown name with {name: None}.
    unresolved = []
    for r in (names or {}).get("results", []):
        found = (r.get("ansible_facts") or {}).get("getent_ahostsv4") or {}
        if r.get("failed") or found.get(r.get("item"), "") is None:
            unresolved.append(r.get("item"))
    if not unresolved:
        return []
    return [
        f"{host} cannot resolve {', '.join(unresolved)}: torchrun needs the node's own hostname and the "
        "master's name; set torchrun_launch_manage_hosts: true or fix DNS."
    ]


def _port_errors(plan_: dict, host: str, p: Probes) -> list[str]:
    errors = []
    # The worker's wait_for runs with failed_when: false (so this assert names the fix), which also
    # clears its "failed": a connect that worked reports the port's "state", a timeout only "msg".
    if p.connect and not p.connect.get("skipped") and not p.connect.get("state"):
        errors.append(
            f"{host} cannot reach the master {plan_.get('master')} at {plan_.get('rdzv_endpoint')} within "
            f"{p.timeout} s: check routes and firewalls between the nodes and the master's "
            "wireup_address/wireup_interface (or torchrun_launch_master_addr)"
        )
    if p.listener and not p.listener.get("skipped") and p.listener.get("rc", 1) != 0:
        why = p.listener.get("stderr") or p.listener.get("msg") or "no answer from the listener"
        errors.append(
            f"port {plan_.get('master_port')} is in use on the master {host} ({str(why).strip()}): stop what "
            "listens there (a job still running?) or choose another wireup_master_port"
        )
    return errors


def precheck_errors(plan_: dict, host: str, gone, **probes) -> list[str]:
    """The pre-start checks of one node, from the registered results of its probes (``probes``:
    Probes' fields); ``gone``: the job's hosts that left the play (dropped_out, once per job): any
    fails every node (the others would wait for it); None (no answer for the job) fails closed."""
    p = Probes(**probes)
    errors = []
    if gone is None:
        errors.append(
            f"not starting job {plan_.get('job')}: which of its hosts are still in the play is unknown "
            f"(no answer for its planner {plan_.get('planner')}); run the play again"
        )
    gone = list(gone or [])
    if gone:
        errors.append(
            f"not starting job {plan_.get('job')}: {', '.join(gone)} dropped out of the play "
            "(failed or unreachable; see above)"
        )
    return (
        errors
        + _missing_paths(plan_, host, p.paths)
        + _unresolved(host, p.names)
        + _port_errors(plan_, host, p)
    )


def job_planners(groups: dict, play_hosts) -> dict[str, str]:
    """{group: its job's planner}: the first (sorted) of the group's hosts in the play, the one
    host that plans a job over that group (plan.yml, once per pass: linear in the inventory's group
    memberships). A group without a host in the play has none."""
    play = set(play_hosts or [])
    out = {}
    for name, members in (groups or {}).items():
        here = [h for h in members or () if h in play]
        if here:
            out[str(name)] = min(here)
    return out


_SLICE_DROPPED = ("nodes", "show", "order")


def node_plan(plan_: dict | None, host: str, plan_id: str, planner: str) -> JobPlan:
    """``host``'s part of a job's plan, made once on the job's ``planner`` (plan.yml): the job-wide
    values as they are (shared, not copied: constant work per node), ``nodes`` with this host's
    NodePlan only (none for a host outside the job), no ``show`` or ``order`` (the planner shows
    the plan). A plan of another pass (``plan_id``), or none, is refused: the planner did not plan
    this job (it does not run this role here), and an older plan is never used."""
    if not plan_ or not plan_id or plan_.get("plan_id") != plan_id:
        return {
            "errors": [
                f"no plan of this job from its planner {planner} (the first host of the job's group in "
                "the play): it did not run this role in this pass; run the job on every host of its "
                "group, or leave that host out (--limit)"
            ],
            "nodes": {},
            "job": "",
            "planner": planner,
        }  # type: ignore[typeddict-item]
    out = {k: v for k, v in plan_.items() if k not in _SLICE_DROPPED}
    nodes = plan_.get("nodes") or {}
    out.update(nodes={host: nodes[host]} if host in nodes else {}, show=[], order=[], planner=planner)
    return out  # type: ignore[return-value]


def _this_pass(slices: dict, plan_id: str) -> dict:
    """{planner: one of its nodes' slices} of the jobs planned in pass ``plan_id``."""
    jobs: dict = {}
    for part in slices.values():
        if part and plan_id and part.get("plan_id") == plan_id and part.get("planner"):
            jobs.setdefault(part["planner"], part)
    return jobs


def dropped_out(slices: dict, play_hosts, plan_id: str) -> dict[str, list[str]]:
    """{planner: the job's hosts no longer in the play} for every job of this pass, from each play
    host's slice (``slices``: host -> its node_plan): start.yml's check, once for the play (linear:
    one pass over each job's hosts)."""
    play = set(play_hosts or [])
    return {
        planner: [h for h in part.get("hosts") or [] if h not in play]
        for planner, part in _this_pass(slices, plan_id).items()
    }


def job_verdicts(slices: dict, answers: dict, play_hosts, plan_id: str, timeout=0) -> dict[str, dict]:
    """{planner: wait.job_verdict of its job} for every job of this pass, from each play host's slice
    and its registered wireup_wait answer (``answers``: host -> result): wait.yml's decision, once
    for the play. A job host without an answer (it left the play) is 'gone'."""
    play = set(play_hosts or [])
    out = {}
    for planner, part in _this_pass(slices, plan_id).items():
        hosts = list(part.get("hosts") or [])
        here = [h for h in hosts if h in play]  # the job's own: linear in its hosts, not the play's
        states = states_of(hosts, {h: answers[h] for h in here if h in answers})
        out[planner] = job_verdict(states, here, timeout)
    return out


class NodeResult(RunStatus, total=False):
    """``__torchrun_launch_result``: one node's part of a run (its status, where its log went)."""

    host: str
    node_rank: int
    nproc: int
    node_log: str  # the log on the node
    verdict: dict  # the run's verdict without its nodes
    slurm_job_id: str
    slurm_state: str
    step: str


def node_result(plan_: dict, host: str, status: dict, verdict: dict, **extra) -> NodeResult:
    """What one node of a run reports (``__torchrun_launch_result``; the bench role reads ``log``)."""
    node = plan_.get("nodes", {}).get(host, {})
    out = {k: v for k, v in (status or {}).items() if k not in ("said", "tail")}
    out.update(
        host=host,
        node_rank=node.get("node_rank"),
        nproc=node.get("nproc"),
        node_log=out.get("log", ""),
        log=f"{plan_.get('results')}/{host}.log",
        verdict={k: v for k, v in (verdict or {}).items() if k != "nodes"},
    )
    out.update(extra)
    return out


@dataclass(frozen=True)
class RunFacts:
    """What summary.json says of a run besides the plan and the results: torchrun_launch_program and
    torchrun_launch_args, Slurm's job id, the drain step's decision (slurm.drain_plan)."""

    program: str
    args: object = ()
    slurm_job_id: str = ""
    drain: dict | None = None


def _drained(plan_: dict, drain) -> dict:
    """summary.json's ``drained`` (the reason each node is drained for now: this launch's, or the
    earlier wireup reason it was drained for already) and ``not_drained`` (those drained already for
    another reason, with that reason)."""
    decided = (drain or {}).get("nodes") or {}
    if not decided:
        return {"drained": {d["node"]: d["reason"] for d in plan_["drain"]}} if plan_.get("drain") else {}
    out = {
        "drained": {
            n: d["reason"] if d["action"] == "drain" else d["slurm_reason"]
            for n, d in decided.items()
            if d["action"] in ("drain", "drained_already")
        }
    }
    kept = {n: d["slurm_reason"] for n, d in decided.items() if d["action"] == "kept"}
    return {**out, "not_drained": kept} if kept else out


def summary(plan_: dict, results: dict, verdict: dict, **run) -> dict:
    """summary.json of a run, written on the controller by its first host (``run``: RunFacts'
    fields)."""
    r = RunFacts(**run)
    out = {"job": plan_.get("job"), "run_id": plan_.get("run_id")}
    if r.slurm_job_id:
        out["slurm_job_id"] = r.slurm_job_id
    out.update(program=r.program, args=checks.program_args(r.args))
    if not r.slurm_job_id:
        out.update(master=plan_.get("master"), rdzv_endpoint=plan_.get("rdzv_endpoint"))
    out.update(
        world_size=plan_.get("world_size"),
        verdict={k: v for k, v in (verdict or {}).items() if k != "nodes"},
        nodes=results,
    )
    if plan_.get("left_out"):
        out["left_out"] = dict(plan_["left_out"])
    return {**out, **_drained(plan_, r.drain)}


class Report(TypedDict):
    ok: str  # the node's line
    failed: str  # the failure message: the reason and the failing node's log tail


def report(
    plan_: dict, result: dict, verdict: dict, *, log_text: str = "", tail: int = 40, timeout=0
) -> Report:
    """{"ok": the node's line (the master's also says where the logs are), "failed": the failure
    message: the reason and the failing node's log tail, or on the others whom they followed}."""
    host, job, run_id = result.get("host"), plan_.get("job"), plan_.get("run_id")
    rc = f" {result['rc']}" if result.get("rc") is not None else ""
    slurm_id = result.get("slurm_job_id")
    first = verdict.get("first_failure") or ""
    last = "\n".join((log_text or "").splitlines()[-int(tail) :]) if int(tail) > 0 else ""
    own_tail = f"Last {tail} lines of {result.get('log')}:\n{last}"
    if slurm_id:
        ok = (
            f"{job} Slurm job {slurm_id} on {host} (step {result.get('step') or 'none'}): "
            f"{result.get('slurm_state') or 'no step'}{rc}; log {result.get('log')}"
        )
        failed = f"job {job} (Slurm job {slurm_id}) failed: {verdict.get('reason')}.\n"
        own = result.get("slurm_state") or "no step"
    else:
        ok = (
            f"{job} run {run_id} on {host} (node {result.get('node_rank')}, "
            f"{result.get('nproc')} process(es)): {result.get('state')}{rc} after {result.get('elapsed')} s; "
            f"log {result.get('log')}"
        )
        hint = (
            f" (torchrun_launch_timeout={timeout}: raise it if the job needs longer)"
            if verdict.get("timed_out")
            else ""
        )
        failed = f"job {job} run {run_id} failed: {verdict.get('reason')}{hint}; stopped on every node.\n"
        own = result.get("state", "") + (f" with code {result['rc']}" if result.get("rc") is not None else "")
    if first and first != host:
        failed += f"{host}: {own} after {first} failed; see {first}'s log tail for the cause."
    else:
        failed += own_tail
    if host == plan_.get("master"):
        where = f"logs and summary in {plan_.get('results')}/"
        ok += (
            f"; job {job} run {run_id} on {plan_.get('nnodes')} node(s), {plan_.get('world_size')} "
            f"process(es): completed; {where}"
        )
        failed += f"\n{where}"
    return {"ok": ok, "failed": failed}


def _no_jobctl(host: str, jobctl: str) -> str:
    return (
        f"{host} has no {jobctl}: wireup never launched a job here "
        f"({checks.ANSIBLE_PLAYBOOK} launch.yml installs it)"
    )


def parse_latest(stdout: str) -> dict:
    """One node's answer to ``wireup-jobctl latest JOB_DIR --record [RUN_ID]``: line 1 the run id
    (the job's newest here, or RUN_ID when this node has it; empty: none), line 2
    ``{"run_id", "started", "record"}``, then, when ``record`` is true, the run's record
    (runs/RUN_ID/run.json, ``run_record``'s JSON).

    Returns {"run_id", "started" (epoch seconds on the node, or None), "record" (a dict with
    ``hosts``, ``master`` and ``left_out``, or None), "why" (why there is no record: '' when there
    is one)}. An answer without line 2 is no answer; a record that is not JSON, or lacks its hosts,
    is None with the reason."""
    lines = [line.strip().strip("\x00") for line in (stdout or "").splitlines()]
    out = {"run_id": "", "started": None, "record": None, "why": "wireup-jobctl gave no run line"}
    try:
        meta = json.loads(lines[1]) if len(lines) > 1 else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or "run_id" not in meta:
        return out
    started = meta.get("started")
    out.update(run_id=str(meta.get("run_id") or ""), why="no run")
    if checks.is_number(started):
        out["started"] = float(started)
    if not out["run_id"]:
        return out
    if meta.get("record") is not True:
        out["why"] = "no run.json on its nodes"
        return out
    out["record"], out["why"] = _record(lines[2:])
    return out


def _record(lines: list[str]) -> tuple[dict | None, str]:
    """(the run's record from its run.json lines, '') or (None, why it is unreadable)."""
    try:
        record = json.loads("\n".join(lines))
    except ValueError:
        record = None
    hosts = record.get("hosts") if isinstance(record, dict) else None
    if not (isinstance(hosts, list) and hosts and all(isinstance(h, str) and h for h in hosts)):
        return None, "its record (run.json) is unreadable"
    left_out = record.get("left_out") if isinstance(record.get("left_out"), dict) else {}
    slurm_job = record.get("slurm_job_id", "")
    if slurm_job != "" and not slurm_.is_job_id(slurm_job):
        return None, f"its record's Slurm job id {str(slurm_job)[:40]!r} is not one"
    return {
        "hosts": list(hosts),
        "master": str(record.get("master") or ""),
        "left_out": {str(h): str(why) for h, why in left_out.items()},
        "slurm_job_id": slurm_job,
    }, ""


def _answers(group: list[str], found: dict) -> tuple[dict, list[str], dict]:
    """({host: parse_latest}, hosts without wireup-jobctl, {host: why its call failed}) of the
    group's hosts in the play."""
    answers, no_jobctl, broken = {}, [], {}
    for host in group:
        result = found.get(host)
        if not result or result.get("skipped"):
            continue  # not in the play
        if _missing_program(result):
            no_jobctl.append(host)
        elif result.get("rc", 0) != 0:
            broken[host] = str(result.get("stderr") or result.get("msg") or "").strip()
        else:
            answers[host] = parse_latest(result.get("stdout", ""))
    return answers, no_jobctl, broken


def _chosen(plan_: dict, run_id: str, answers: dict) -> tuple[str, list[str]]:
    """(the run jobs.yml follows, the errors): ``run_id`` where a node has it, else the newest run
    on any node (not only the master's: a run that left it out is not there)."""
    job, asked = plan_.get("job"), ", ".join(sorted(answers))
    if run_id:
        if any(a["run_id"] == run_id for a in answers.values()):
            return run_id, []
        return run_id, [
            f"job {job} has no run {run_id} on {asked}: list the runs with -e torchrun_launch_action=list"
        ]
    timed = [(a["started"] or 0.0, a["run_id"]) for a in answers.values() if a["run_id"]]
    if timed:
        return max(timed)[1], []
    return "", [
        f"job {job} has no run on {asked}: start one with {checks.ANSIBLE_PLAYBOOK} launch.yml "
        f"-e torchrun_launch_job={job}, or list the runs with -e torchrun_launch_action=list"
    ]


def _group_of(plan_: dict) -> str:
    return f"torchrun_launch_group={plan_['group']}" if plan_.get("group") else "the job's group"


def _by_records(plan_: dict, chosen: str, records: dict, out: dict) -> None:
    """The run's hosts and master from the records of the nodes that have it; every other host of
    the group is ``not_part``, with why."""
    group, master, where = list(plan_.get("hosts") or []), plan_.get("master") or "", _group_of(plan_)
    first = next(iter(records.values()))
    ran = list(dict.fromkeys(h for r in records.values() for h in r["hosts"]))
    if any(r["hosts"] != first["hosts"] or r["master"] != first["master"] for r in records.values()):
        out["notes"].append(
            f"the nodes' records of run {chosen} differ ("
            + "; ".join(f"{h}: {', '.join(r['hosts'])}" for h, r in records.items())
            + f"): following every host any of them names ({', '.join(ran)})"
        )
    left_out = {h: why for r in records.values() for h, why in r["left_out"].items()}
    out["hosts"], out["master"] = [h for h in group if h in ran], first["master"]
    out["ran"] = len(ran)  # its allocation's nodes, those outside this inventory too
    slurm_jobs = sorted({r["slurm_job_id"] for r in records.values()})
    if len(slurm_jobs) > 1:
        out["errors"].append(
            f"the nodes' records of run {chosen} name different Slurm jobs: {', '.join(slurm_jobs)}"
        )
    out["slurm_job_id"] = slurm_jobs[0]
    outside = [h for h in ran if h not in group]
    if outside:
        out["notes"].append(
            f"run {chosen} also ran on {', '.join(outside)}, not in {where} of this inventory: "
            "not followed there"
        )
    for host in (h for h in group if h not in ran):
        out["not_part"][host] = (
            f"left out at launch: {left_out[host]}" if host in left_out else "not one of its hosts"
        )
    if master in out["not_part"] and out["master"] != master:
        out["notes"].append(
            f"run {chosen}'s master is {out['master']} (the inventory's, {master}, was left out)"
        )


def _master_refused(plan_: dict, chosen: str, host: str, record: dict) -> str:
    """Why jobs.yml must not believe ``host``'s record of run ``chosen`` ('' when it may): the
    master it names is where scancel, sacct and squeue run (delegate_to), so it must be a host of
    the run (the record's own hosts) that is in the job's group of this inventory, in the host
    name grammar (checks.is_inventory_host): never the controller, a host outside the inventory
    or a word ssh reads as an option."""
    master = record.get("master")
    ran = [h for h in record.get("hosts") or [] if h in (plan_.get("hosts") or [])]
    if isinstance(master, str) and checks.is_inventory_host(master) and master in ran:
        return ""
    return (
        f"{host}'s record of run {chosen} is refused: its master {str(master)[:80]!r} is not a host of "
        f"the run in {_group_of(plan_)} (jobs.yml runs scancel, sacct and squeue there); nothing of it "
        f"is used: check {plan_.get('job_dir')}/runs/{chosen}/run.json on {host}"
    )


def _trusted(plan_: dict, chosen: str, records: dict, out: dict) -> dict:
    """The records whose master jobs.yml may connect to; a note in ``out`` for each one refused."""
    kept = {}
    for host, record in records.items():
        why = _master_refused(plan_, chosen, host, record)
        if why:
            out["notes"].append(why)
        else:
            kept[host] = record
    return kept


def _follow(plan_: dict, run_id: str, found: dict, play_hosts) -> dict:
    """jobs_plan's choice of the run and its hosts from every node's ``latest --record`` answer."""
    group, where = list(plan_.get("hosts") or []), _group_of(plan_)
    out = {
        "run_id": run_id,
        "hosts": [],
        "master": plan_.get("master") or "",
        "not_part": {},
        "notes": [],
        "errors": [],
        "slurm_job_id": "",
        "ran": 0,
    }
    answers, no_jobctl, broken = _answers(group, found)
    if not answers:
        out["errors"] = [f"{h}: wireup-jobctl failed: {why}" for h, why in broken.items()] or [
            f"{', '.join(no_jobctl) or 'no node'} of {where} has no {plan_.get('jobctl')}: wireup never "
            f"launched a job there ({checks.ANSIBLE_PLAYBOOK} launch.yml installs it)"
        ]
        return out
    out["run_id"], out["errors"] = _chosen(plan_, run_id, answers)
    if out["errors"]:
        return out
    chosen = out["run_id"]
    records = {h: a["record"] for h, a in sorted(answers.items()) if a["run_id"] == chosen and a["record"]}
    recorded, records = bool(records), _trusted(plan_, chosen, records, out)
    if not records:
        why = "every record of it was refused" if recorded else ""
        why = why or next(a["why"] for a in answers.values() if a["run_id"] == chosen)
        out["hosts"] = group
        out["notes"].append(
            f"run {chosen} has no record of its hosts ({why}): following every node of {where}; a node "
            "the run left out shows as never started"
        )
        return out
    _by_records(plan_, chosen, records, out)
    absent = [h for h in out["hosts"] if play_hosts is not None and h not in set(play_hosts)]
    if absent:
        out["notes"].append(
            f"{', '.join(absent)} of run {chosen} not in this play (unreachable, or --limit): its part "
            "is not known, nor acted on"
        )
    return out


@dataclass(frozen=True)
class JobsOptions:
    """jobs_plan's inputs besides the action and run id: every in-play host's registered
    ``wireup-jobctl latest --record`` answer (``found``), its preflight ``wireup_node.gpu``
    (``gpus``: status reads the GPUs' use where one is present), the play's hosts, and settings."""

    found: dict | None = None
    gpus: dict | None = None
    play_hosts: list | None = None
    stop_grace: object = 15
    lines: object = 5
    check_mode: bool = False


class SlurmFollow(TypedDict):
    """JobsPlan's ``slurm``: what jobs.yml asks Slurm about a Slurm run (empty lists otherwise)."""

    job_id: str  # '' for a run wireup-jobctl started
    on: str  # where the reads run (delegate_to): the run's master, a host of the run; '' for none
    nodes_max: int  # the most nodes its allocation has (every host its records name), 0 for none
    scancel_argv: list[str]  # only for stop (not in check mode)
    looks: int  # sacct looks, 2 s apart, until the job ended after scancel
    out: str  # the batch step's output (on the allocation's first node)
    out_name: str  # its name in the run's results folder
    reads: list[list[str]]  # jobs.yml's calls on the run's master, in turn: scancel (stop), sacct, squeue


def _slurm_follow(follow: dict, action: str, o: JobsOptions, job_dir: str, run_id: str) -> SlurmFollow:
    """The Slurm reads and scancel of a Slurm run (``follow``: _follow's answer, its Slurm job id
    from the run's records, checked there), run on its master only when that is one of the run's
    hosts (_master_refused made sure; checked again here, where the delegation is decided)."""
    job_id, master = follow.get("slurm_job_id", ""), follow.get("master") or ""
    at = master if checks.is_inventory_host(master) and master in follow["hosts"] else ""
    on = bool(job_id and at) and action != "list"
    cancel = on and action == "stop" and not o.check_mode
    squeue, sacct = slurm_.squeue_argv(job_id) if on else [], slurm_.sacct_argv(job_id) if on else []
    scancel = ["scancel", job_id] if cancel else []
    return {
        "job_id": job_id if on else "",
        "on": at if on else "",
        "nodes_max": int(follow.get("ran") or len(follow["hosts"])) if on else 0,
        "scancel_argv": scancel,
        "looks": (int(o.stop_grace) + 30) // 2 if cancel else 1,
        "out": f"{job_dir}/logs/{run_id}.out" if on else "",
        "out_name": f"{run_id}.out" if on else "",
        "reads": [argv for argv in (scancel, sacct, squeue) if argv],
    }


GPU_QUERY = ["--format=csv,noheader,nounits", "--query-gpu=index,utilization.gpu,memory.used,memory.total"]


def _calls(action: str, argv: list[str], hosts: list[str], gpus: dict) -> dict:
    """Each host's calls, in turn: the one wireup-jobctl call, and for status on a node with GPUs
    nvidia-smi's read of their use (``gpus``: host -> its wireup_node.gpu)."""
    out = {}
    for host in hosts:
        gpu = (gpus or {}).get(host) or {}
        smi = (
            [[gpu.get("nvidia_smi") or "nvidia-smi", *GPU_QUERY]]
            if action == "status" and gpu.get("present")
            else []
        )
        out[host] = [argv, *smi]
    return out


class JobsPlan(TypedDict):
    """``__torchrun_launch_jobs``: what jobs.yml does on every node."""

    action: str
    job: str
    run_id: str
    results: str
    argv: list[str]  # the one wireup-jobctl call
    calls: dict  # host -> its calls in turn: argv, then (status, a node with GPUs) nvidia-smi's read
    errors: list[str]
    hosts: list[str]  # those the call runs on
    master: str
    not_part: dict  # hosts of the group the run did not run on -> why
    notes: list[str]
    slurm: SlurmFollow


def jobs_plan(plan_: dict, action: str, run_id: str = "", **options) -> JobsPlan:
    """What jobs.yml does on every node (``options``: JobsOptions' fields): ``argv`` of its one
    wireup-jobctl call for ``action`` (status, logs, stop, list; in check mode a stop only reads the
    status), the run, its hosts, its results folder, and the errors that stop it.

    ``found`` maps each host of the group in the play to its registered ``wireup-jobctl latest
    JOB_DIR --record [RUN_ID]`` (parse_latest). The run is ``run_id``, else the newest on any node;
    its ``hosts`` (those the call runs on) and ``master`` are the ones its record names (a run
    started with torchrun_launch_on_failed=skip lacks the nodes it left out), and every other host
    of the group is in ``not_part`` with why (the reason it was left out at launch). A run whose
    record is missing or unreadable is followed on every host of the group, with a note saying so.
    Adds ``notes`` (lines for the closing summary) and, for list, ``hosts`` = the group's. A run
    launch.yml submitted to Slurm (its record names the Slurm job id) gets ``slurm``: the squeue and
    sacct reads, for stop scancel first (then the same wireup-jobctl stop on every host: it ends
    what is left of the run there and says nothing is), and its batch output for logs."""
    o = JobsOptions(**options)
    jobctl, job_dir, master = plan_.get("jobctl"), plan_.get("job_dir"), plan_.get("master")
    errors = run_id_errors(run_id)
    follow = {"hosts": list(plan_.get("hosts") or []), "master": master, "not_part": {}, "notes": []}
    if action != "list" and not errors:
        follow = _follow(plan_, run_id, dict(o.found or {}), o.play_hosts)
        errors, run_id = follow.pop("errors"), follow.pop("run_id")
    if run_id and not errors:
        # The run id came from a node's answer: it names a folder on the controller.
        errors = run_id_errors(run_id, var=f"the run id a node answered for job {plan_.get('job')}")
    if errors:
        follow["slurm_job_id"] = ""  # nothing is asked of Slurm for a run that cannot be named
    results = _results(plan_.get("results_root"), plan_.get("job"), run_id, errors) if run_id else ""
    argv = {
        "status": [jobctl, "status", job_dir, run_id, "0", str(o.lines)],
        "logs": [jobctl, "status", job_dir, run_id],
        "stop": [jobctl, "stop", job_dir, run_id, str(o.stop_grace), "stopped by jobs.yml"],
        "list": [jobctl, "list", job_dir.rsplit("/", 1)[0]],
    }["status" if o.check_mode and action == "stop" else action]
    return {
        "action": action,
        "job": plan_.get("job"),
        "run_id": run_id,
        "results": results,
        "argv": argv,
        "calls": _calls(action, argv, [] if errors else follow["hosts"], dict(o.gpus or {})),
        "errors": errors,
        # Nothing to ask where the run cannot be named.
        "hosts": [] if errors else follow["hosts"],
        "master": follow["master"],
        "not_part": follow["not_part"],
        "notes": follow["notes"],
        "slurm": _slurm_follow(follow, action, o, job_dir, run_id),
    }


class JobsNode(TypedDict):
    """One node's answer to jobs.yml (``__node``)."""

    errors: list[str]
    status: dict
    lines: list[str]


def _answer(lines=(), errors=(), status=None) -> JobsNode:
    return {"errors": list(errors), "status": status or {}, "lines": list(lines)}


def _unanswered(jobs: dict, host: str, result: dict, jobctl: str) -> dict | None:
    """jobs_node's answer for a node with nothing to read (the run cannot be named, the node is not
    part of it, no wireup-jobctl there, its call failed); None when its answer is to be read."""
    if jobs.get("errors"):
        return _answer(errors=jobs["errors"])
    if host in (jobs.get("not_part") or {}):
        return _answer([f"{host}: not part of run {jobs.get('run_id')} ({jobs['not_part'][host]})"])
    if _missing_program(result):
        if jobs.get("action") == "list":  # a node that never ran a wireup job (one a run left out)
            return _answer([f"{host}: 0 run(s) (no {jobctl})"])
        return _answer(errors=[_no_jobctl(host, jobctl)])
    if (result or {}).get("rc", 0) != 0:
        why = (result or {}).get("stderr") or (result or {}).get("msg") or ""
        return _answer(errors=[f"{host}: wireup-jobctl failed: {why}"])
    return None


def _slurm_node(jobs: dict, host: str, status: dict, slurm: dict) -> JobsNode:
    """A node's part of a Slurm run: its step by sacct (slurm.node_line), its log's last lines; an
    error when Slurm's reads cannot tell (fail closed), or, for stop, when the job has not ended."""
    job_id = jobs["slurm"]["job_id"]
    if not slurm.get("known"):
        why = slurm.get("why") or "squeue and sacct were not read"
        return _answer(errors=[f"{host}: cannot tell how Slurm job {job_id} stands: {why}"], status=status)
    lines = [slurm_.node_line(host, slurm), *status.get("tail", [])]
    if jobs["slurm"].get("scancel_argv"):  # stop (in check mode a stop only reads the status)
        if not slurm.get("over"):
            state = slurm.get("job_state") or "in the queue"
            return _answer(
                errors=[f"{host}: Slurm job {job_id} is still {state} after scancel"], status=status
            )
        lines.append(f"{host}: {' '.join(status.get('said') or [])} (nothing of it left here)")
    return _answer(lines, status=status)


def jobs_node(
    jobs: dict, host: str, result: dict, jobctl: str, gpus_text: str = "", *, slurm=None
) -> JobsNode:
    """One node's answer to jobs.yml: {"errors", "status", "lines"} (its status line, then the
    log's last lines; for list, how many runs it has; for a host of the group the run did not run
    on, that it is not part of it, and why). A Slurm run's node is told by ``slurm`` (the run's
    slurm.job_status) and fails when that cannot tell."""
    unanswered = _unanswered(jobs, host, result, jobctl)
    if unanswered is not None:
        return unanswered
    if jobs.get("action") == "list":
        return _answer([f"{host}: {len(parse_run_list((result or {}).get('stdout', '')))} run(s)"])
    status = parse_status((result or {}).get("stdout", ""))
    if (jobs.get("slurm") or {}).get("job_id"):
        return _slurm_node(jobs, host, status, dict(slurm or {}))
    return _answer(
        [status_line(host, status, parse_gpu_usage(gpus_text)), *status.get("tail", [])], status=status
    )


def call_answers(result) -> tuple[dict, str]:
    """A host's registered loop over its jobs.yml calls (JobsPlan's ``calls``): the wireup-jobctl
    answer (skipped where the host had no call to make) and nvidia-smi's output ('' without that
    read). A single command's result is the wireup-jobctl answer itself."""
    result = dict(result or {})
    if "results" not in result:
        return result, ""
    answers = list(result["results"] or [])
    gpus = answers[1].get("stdout", "") if len(answers) > 1 else ""
    return (dict(answers[0]) if answers else {"skipped": True}), str(gpus or "")


def jobs_fetches(jobs: dict, host: str, answer: dict) -> list[dict]:
    """jobs.yml's fetches on ``host`` (none but for logs on a host of the run): its log, named by
    its wireup-jobctl status (``answer``), and a Slurm run's batch output, each to the run's
    results folder. A running job's log grows while it is copied (its checksum cannot match); a
    Slurm run's is its step's, none yet while the job is pending; the batch output is on the
    allocation's first node only and grows while the job runs."""
    if jobs.get("action") != "logs" or host not in (jobs.get("hosts") or []):
        return []
    status = parse_status((answer or {}).get("stdout", ""))
    state, results = status.get("state"), str(jobs.get("results") or "")
    fetches = [
        {
            "src": status.get("log"),
            "dest": checks.results_path(results, f"{host}.log"),
            "validate_checksum": state not in ("running", "slurm"),
            "fail_on_missing": state != "slurm",
        }
    ]
    slurm = jobs.get("slurm") or {}
    if slurm.get("job_id"):
        out = checks.results_path(results, slurm["out_name"])
        fetches.append(
            {"src": slurm["out"], "dest": out, "validate_checksum": False, "fail_on_missing": False}
        )
    return fetches


def jobs_stands(jobs: dict, states: dict, play_hosts=None) -> str:
    """The line for the whole run: running on which nodes, FAILED naming the first failing node,
    stopped, or the verdict's reason; for logs, where they are; the group's hosts that are not
    part of the run (``states``: the run's hosts only)."""
    verdict = job_verdict(states, play_hosts)
    if verdict["running"] and not verdict["first_failure"]:
        how = "running on " + ", ".join(verdict["running"])
    elif verdict["first_failure"]:
        how = "FAILED: " + verdict["reason"]
    elif any((s or {}).get("state") == "stopped" for s in states.values()):
        how = "stopped"
    else:
        how = verdict["reason"]
    return f"job {jobs.get('job')} run {jobs.get('run_id')}: {how}{_where_and_others(jobs)}"


def _where_and_others(jobs: dict) -> str:
    """The run line's end: where logs went (for logs), the group's hosts not part of the run."""
    where = f"; logs in {jobs.get('results')}/" if jobs.get("action") == "logs" else ""
    apart = sorted(jobs.get("not_part") or {})
    return where + (f"; not part of it: {', '.join(apart)}" if apart else "")


def states_of(hosts, answers: dict) -> dict:
    """{host: its run's status} for the job's ``hosts`` from each host's registered answer
    (``answers``: host -> a wireup_wait or wireup-jobctl result, or a node_result already read); a
    host without one (it dropped out of the play) is 'gone'."""
    out = {}
    for host in hosts:
        value = answers.get(host)
        if value is not None and "stdout" in value and "state" not in value:
            value = parse_status(value["stdout"])
        out[host] = dict(value) if value is not None else {"state": "gone"}
    return out


def runs_of(answers: dict) -> dict:
    """host -> its runs, from each host's registered `wireup-jobctl list` answer."""
    return {host: parse_run_list((result or {}).get("stdout", "")) for host, result in answers.items()}


def slurm_stands(jobs: dict, slurm: dict) -> str:
    """The line for a whole Slurm run: the job's state and sentence by sacct and squeue, or that
    they cannot tell."""
    status = dict(slurm or {})
    job_id = (jobs.get("slurm") or {}).get("job_id")
    how = f"{status.get('job_state')}: {status.get('reason')}" if status.get("known") else ""
    how = how or f"cannot tell: {status.get('why') or 'squeue and sacct were not read'}"
    return (
        f"job {jobs.get('job')} run {jobs.get('run_id')} (Slurm job {job_id}): {how}{_where_and_others(jobs)}"
    )


def jobs_summary(
    jobs: dict, states: dict, runs_per_host: dict, play_hosts=None, base_dir="", *, slurm=None
) -> list[str]:
    """jobs.yml's closing lines: for list, every run on the nodes newest first (runs_table of
    ``runs_per_host``) or that there is none under ``base_dir``/jobs; else how the run stands
    (jobs_stands of ``states``, slurm_stands of ``slurm`` for a Slurm run), then the plan's notes
    (how the run was found, hosts it could not follow)."""
    if jobs.get("action") == "list":
        return runs_table(runs_per_host) or [f"no runs under {base_dir}/jobs"]
    if (jobs.get("slurm") or {}).get("job_id"):
        return [slurm_stands(jobs, slurm), *jobs.get("notes", [])]
    return [jobs_stands(jobs, states, play_hosts), *jobs.get("notes", [])]


def follow_lines(plan_: dict, started: dict, inventory_sources=()) -> list[str]:
    """What a detached run says once started: each node's start line (``started``: host ->
    wireup-jobctl's answer), then how to follow, fetch, stop and list it with jobs.yml. A Slurm
    run (the plan combined with slurm.run_plan) says its Slurm job id instead."""
    inv = "".join(f" -i {source}" for source in inventory_sources or [])
    # Written as pasted after `make venv`, from the repository root (issue 38).
    job = f"{checks.ANSIBLE_PLAYBOOK}{inv} jobs.yml -e torchrun_launch_job={plan_.get('job')}"
    how = (
        f"submitted as Slurm job {plan_['job_id']} for {plan_.get('nnodes')} node(s), "
        f"{plan_.get('world_size')} process(es); Slurm runs it without this playbook."
        if plan_.get("job_id")  # the Slurm path (plan combined with slurm.run_plan)
        else f"started on {plan_.get('nnodes')} node(s), {plan_.get('world_size')} process(es); it runs "
        "on without this playbook."
    )
    return [
        *(str(started.get(h) or "") for h in plan_.get("hosts", [])),
        f"job {plan_.get('job')} run {plan_.get('run_id')} {how}",
        f"status: {job}",
        f"logs:   {job} -e torchrun_launch_action=logs   (to {plan_.get('results')}/)",
        f"stop:   {job} -e torchrun_launch_action=stop",
        f"list:   {checks.ANSIBLE_PLAYBOOK}{inv} jobs.yml -e torchrun_launch_action=list",
    ]
