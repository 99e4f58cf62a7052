"""Launch planning for torchrun jobs: who is master, each node's rank and process count, its env.

Pure Python (stdlib only, no Ansible imports): the torchrun_launch role calls it through the
filters in plugins/filter/wireup_launch.py, tests import it as ``from wireup import launch``.
Errors are returned as sentences that name the variable to fix, never raised, so a play can show
all of them at once.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import shlex

from . import validate

_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
_HCA_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def job_name_errors(job, var: str = "torchrun_launch_job") -> list[str]:
    """The job name becomes a folder and part of the rendezvous id: keep it to [A-Za-z0-9_.-]."""
    if not isinstance(job, str) or not _JOB_NAME.match(job) or len(job) > 64:
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
    if isinstance(setting, str) and setting.strip() == "auto":
        if not gpu_present:
            return 1, []
        if gpu_count < 1:
            return 0, [
                f"{host} has NVIDIA GPUs on PCI but nvidia-smi lists none, so {var}=auto finds no "
                "GPU to run on: install/load the driver (ansible-playbook site.yml) or set a number"
            ]
        return gpu_count, []
    if isinstance(setting, bool) or not (
        isinstance(setting, int) or (isinstance(setting, str) and setting.strip().isdigit())
    ):
        return 0, [f"{var}={setting!r} is not 'auto' or a positive whole number: fix it"]
    nproc = int(setting)
    if nproc < 1:
        return 0, [f"{var}={setting!r} must be at least 1 (or 'auto')"]
    if gpu_present and nproc > gpu_count:
        return nproc, [
            f"{var}={nproc} exceeds the {gpu_count} GPU(s) found on {host}: lower it to "
            f"{gpu_count} or less, or use 'auto'"
        ]
    return nproc, []


def ib_hca(devices) -> str:
    """NCCL_IB_HCA value for the InfiniBand devices found: exact names ('=' prefix), sorted."""
    names = sorted({str(d).strip() for d in (devices or []) if str(d).strip()})
    names = [n for n in names if _HCA_NAME.match(n)]
    return "=" + ",".join(names) if names else ""


def env_errors(env, var: str) -> list[str]:
    """Keys must be shell variable names, values scalars (they are exported by a bash script)."""
    if env is None:
        return []
    if not isinstance(env, dict):
        return [f"{var} must be a mapping of VARIABLE: value, not {type(env).__name__}"]
    errors = []
    for key, value in env.items():
        if not isinstance(key, str) or not _SHELL_NAME.match(key):
            errors.append(f"{var}: {key!r} is not a valid shell variable name (letters, digits, '_')")
        elif value is None or isinstance(value, dict | list | tuple | set):
            errors.append(f"{var}: {key} must be a string or number, not {type(value).__name__}")
    return errors


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
    whole = not isinstance(setting, bool) and (isinstance(setting, int) or str(setting).strip().isdigit())
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


def plan(
    hosts,
    nodes: dict,
    *,
    group: str = "",
    master_host: str = "",
    master_addr: str = "",
    master_port=29500,
    nproc_per_node="auto",
    play_hosts=None,
    rdzv_backend: str = "c10d",
    omp_threads="auto",
) -> dict:
    """Plan a job over ``hosts`` (inventory names of the job's group).

    ``nodes`` maps each host to its facts: address, interface, gpu_present, gpu_count,
    infiniband (list), hostname. ``nproc_per_node`` is one setting for all, or a mapping host ->
    setting (each host's own wireup_nproc_per_node). ``play_hosts``, when given, are the hosts in
    the play: a job host outside it (``--limit``) would leave the rendezvous waiting forever, so
    it is an error.

    ``omp_threads`` sets OMP_NUM_THREADS for every process (``env`` of each node): "auto" is
    the node's CPUs (``cpus`` in its facts) divided by its processes, at least 1; a number is used
    as is. torchrun would otherwise set 1 and print a banner saying so.

    Node ranks are the hosts' indexes in sorted order. With ``rdzv_backend="static"`` the master
    must be node 0 (it hosts the store), so it comes first and the others follow, sorted.

    Returns ``{"errors": [...], "hosts": sorted hosts, "nnodes", "master", "master_addr",
    "master_port", "rdzv_endpoint", "world_size", "nodes": {host: {...}}}``.
    """
    errors: list[str] = []
    group_var = f"torchrun_launch_group={group!r}" if group else "the job's group"
    hosts = sorted(dict.fromkeys(hosts or []))
    result = {
        "errors": errors,
        "hosts": hosts,
        "nnodes": len(hosts),
        "master": "",
        "master_addr": "",
        "master_port": 0,
        "rdzv_endpoint": "",
        "world_size": 0,
        "nodes": {},
    }
    if not hosts:
        errors.append(f"{group_var} has no hosts: name an inventory group that holds the job's nodes")
        return result

    if play_hosts is not None:
        missing = [h for h in hosts if h not in set(play_hosts)]
        if missing:
            errors.append(
                f"{', '.join(missing)} of {group_var} not in this play (--limit, or unreachable): "
                "a job needs every node of its group; run on the whole group or choose another group"
            )

    master = validate.master_of(hosts, master_host)
    if master not in hosts:
        errors.append(
            f"wireup_master_host={master_host!r} is not in {group_var}: name one of "
            f"{', '.join(hosts)} or leave it empty for the first in sorted order"
        )
    result["master"] = master

    # The one port rule preflight applies too (validate.validate_port).
    port_errors = validate.validate_port("wireup_master_port", master_port)
    errors.extend(port_errors)
    port = 0 if port_errors else int(str(master_port).strip())
    result["master_port"] = port

    addr = str(master_addr or "").strip()
    if addr:
        if not (_is_ip(addr) or _HOST_NAME.match(addr)):
            errors.append(f"torchrun_launch_master_addr={master_addr!r} is not an address or host name")
    elif master in nodes:
        addr = str(nodes[master].get("address") or "")
        if not addr:
            errors.append(
                f"the master {master} has no cluster address (wireup_node.network.address): set "
                f"wireup_address (and wireup_interface) for {master} in the inventory"
            )
    result["master_addr"] = addr
    if addr and port:
        result["rdzv_endpoint"] = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"

    if rdzv_backend not in ("c10d", "static"):
        errors.append(f"torchrun_launch_rdzv_backend={rdzv_backend!r} must be c10d or static")
    order = list(hosts)
    if rdzv_backend == "static" and master in order:
        order = [master] + [h for h in order if h != master]
    result["order"] = order
    omp_fixed, omp_errors = _omp_setting(omp_threads)
    errors.extend(omp_errors)

    world = 0
    for rank, host in enumerate(order):
        facts = nodes.get(host)
        if facts is None:
            if play_hosts is None:
                errors.append(f"{host} of {group_var} has no facts: run the preflight role on it first")
            continue
        setting = nproc_per_node.get(host, "auto") if isinstance(nproc_per_node, dict) else nproc_per_node
        nproc, nproc_errors = resolve_nproc(
            setting, bool(facts.get("gpu_present")), int(facts.get("gpu_count") or 0), host
        )
        errors.extend(nproc_errors)
        interface = str(facts.get("interface") or "")
        if not interface:
            errors.append(
                f"{host} has no cluster interface (wireup_node.network.interface): set "
                f"wireup_interface for {host} in the inventory"
            )
        address = str(facts.get("address") or "")
        if not address:
            errors.append(f"{host} has no cluster address: set wireup_address for {host} in the inventory")
        world += nproc
        cpus = facts.get("cpus")
        omp = omp_fixed or omp_threads_for(cpus, nproc)
        result["nodes"][host] = {
            "node_rank": rank,
            "nproc": nproc,
            "is_master": host == master,
            "gpu_present": bool(facts.get("gpu_present")),
            "address": address,
            "interface": interface,
            "ib_hca": ib_hca(facts.get("infiniband")),
            "hostname": str(facts.get("hostname") or ""),
            "cpus": int(cpus) if isinstance(cpus, int) or str(cpus or "").isdigit() else 0,
            # Exported before wireup_job_env and torchrun_launch_env, which may override it.
            "env": {"OMP_NUM_THREADS": str(omp)},
        }
    result["world_size"] = world
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
                and _HOST_NAME.match(short)
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


def first_failure(states: dict) -> str:
    """The host whose job failed first: the earliest end among failed or lost ones, else ''.

    ``states`` maps host -> {"state": running|exited|lost|stopped|missing, "rc": int|None,
    "ended": float|None}. A host that is gone from the play (unreachable) counts as failed at
    the time it was last seen.
    """
    failed = []
    for host, st in states.items():
        state = st.get("state")
        if state in ("lost", "missing", "gone") or (state == "exited" and st.get("rc") not in (0, "0")):
            ended = st.get("ended")
            try:
                ended = float(ended)
            except (TypeError, ValueError):
                ended = float("inf")
            failed.append((ended, host))
    return min(failed)[1] if failed else ""


def job_verdict(states: dict, play_hosts=None, timeout: float = 0) -> dict:
    """Whether a running job is over, and how it went.

    ``states`` maps each job host to its last ``wireup-jobctl status`` (state, rc, ended,
    elapsed). A host missing from ``play_hosts`` (unreachable mid-run) counts as failed. The job is
    over when every node exited, when any node failed (exited non-zero, lost, stopped, missing,
    gone) or when ``timeout`` seconds (0: none) have passed on any node.
    """
    states = {h: dict(s or {}) for h, s in states.items()}
    if play_hosts is not None:
        for host in states:
            if host not in set(play_hosts):
                states[host]["state"] = "gone"
    failed = first_failure(states)
    running = sorted(h for h, s in states.items() if s.get("state") == "running")
    elapsed = [float(s.get("elapsed") or 0) for s in states.values()]
    timed_out = bool(timeout) and bool(running) and max(elapsed, default=0) >= float(timeout)
    if failed:
        st = states[failed]
        how = {
            "gone": "became unreachable",
            "lost": "lost its processes without an exit code (killed)",
            "missing": "never started",
            "stopped": "was stopped",
        }.get(st.get("state"), f"exited with code {st.get('rc')}")
        reason = f"{failed} {how}"
    elif timed_out:
        reason = f"still running after {float(timeout):g} s on {', '.join(running)}"
    elif running:
        reason = f"running on {', '.join(running)}"
    else:
        reason = "every node exited with code 0"
    return {
        "over": bool(failed) or timed_out or not running,
        "ok": not failed and not running,
        "first_failure": failed,
        "timed_out": timed_out and not failed,
        "running": running,
        "reason": reason,
    }


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


def watchdog_config(plan_: dict, host: str, *, port, interval, timeout, join_timeout, grace, job_dir) -> dict:
    """The watchdog.json of ``host``: who is master, where it listens, the time limits."""
    addr = plan_.get("master_addr") or ""
    return {
        "self": host,
        "master": plan_.get("master") or "",
        "hosts": list(plan_.get("hosts") or []),
        "addr": addr,
        "bind": "::" if ":" in addr else "",
        "port": int(port),
        "interval": float(interval),
        "timeout": float(timeout),
        "join_timeout": float(join_timeout),
        "grace": int(grace),
        "job_dir": job_dir,
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
        if len(fields) != 4 or not all(f.isdigit() for f in fields):
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
    if state == "running" and isinstance(started, int | float) and not isinstance(started, bool):
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
            entry["nodes"].append(f"{host} {state}")
    rows = []
    for (job, run_id), entry in sorted(merged.items(), key=lambda kv: -float(kv[1]["started"] or 0)):
        when = datetime.datetime.fromtimestamp(float(entry["started"] or 0), datetime.UTC)
        rows.append(f"{job} {run_id} started {when:%Y-%m-%d %H:%M:%S} UTC: {', '.join(entry['nodes'])}")
    return rows
