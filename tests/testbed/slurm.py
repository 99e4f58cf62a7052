"""A real Slurm cluster on a testbed's nodes, from Debian 12's packages (slurm-wlm 22.05, munge).

    from tests.testbed import Testbed, slurm
    tb = Testbed("default").up(nodes=3)
    cluster = slurm.up(tb)          # {"controller": "node1", "nodes": [...], "partition": ...}
    slurm.down(tb)                  # stops the daemons (the packages stay)

The first node is the controller: slurmctld, slurmdbd and MariaDB (sacct needs slurmdbd: Slurm
22.05 has no file-based accounting store any more). Every node runs munge (one key for all) and
slurmd. The nodes stay plain testbed nodes until this runs, so other tests never see Slurm.

Testbed choices, not advice for a real cluster:
- ProctrackType=proctrack/linuxproc and TaskPlugin=task/none: cgroup tracking inside
  systemd-nspawn nodes (cgroup v2, delegated subtree) is not worth the trouble on a testbed.
  linuxproc follows a job's processes by parent PID, which is enough for srun/scancel here.
- RealMemory is left unset (1 MB) and memory is not a consumable resource: the nodes share the
  host's memory.
- The packages are installed with apt at bring-up, in parallel on every node: 13 s measured on a
  quiet machine, up to 45 s under load (most of it MariaDB on node1). In the golden image instead,
  mmdebstrap took 37 s instead of 21 s (one run each), for every test's nodes, which would then all
  carry Slurm's daemons: only the Slurm tests pay for Slurm this way.
"""

from __future__ import annotations

import base64
import os
import shlex
import threading
import time

from tests import busy

from .system import TestbedError

PACKAGES = ("munge", "slurmd", "slurmctld", "slurm-client")
CONTROLLER_PACKAGES = ("slurmdbd", "mariadb-server")
CLUSTER = "wireup-testbed"
PARTITION = "testbed"
DB_PASSWORD = "wireup-testbed-slurmdbd"  # a throw-away database on a throw-away node
# A wait for behaviour (every slurmd registered and idle): it ends as soon as they are, so it is
# generous (tests/busy.py); registering took 20-50 s at a load of 10-20 on the 2 cores.
READY_TIMEOUT = busy.PATIENCE_S
CONF = "/etc/slurm/slurm.conf"
DBD_CONF = "/etc/slurm/slurmdbd.conf"
HOSTS_MARK = "wireup testbed slurm"


def _log(msg):
    print(msg, flush=True)


def slurm_conf(controller: str, controller_addr: str, nodes: dict, cpus: int) -> str:
    """slurm.conf for nodes {name: address}; controller runs slurmctld and slurmdbd."""
    lines = [
        "# wireup testbed: a real Slurm on systemd-nspawn nodes (tests/testbed/slurm.py)",
        f"ClusterName={CLUSTER}",
        f"SlurmctldHost={controller}({controller_addr})",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        # Testbed: no cgroups inside the nspawn nodes (see the module's docstring).
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdTimeout=30",
        "KillWait=5",
        "MinJobAge=600",
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={controller_addr}",
        "JobCompType=jobcomp/none",
    ]
    for name, addr in nodes.items():
        lines.append(f"NodeName={name} NodeAddr={addr} CPUs={cpus} State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def slurmdbd_conf() -> str:
    return (
        "# wireup testbed: accounting for sacct, in MariaDB on the controller\n"
        "DbdHost=localhost\nSlurmUser=slurm\nAuthType=auth/munge\n"
        "LogFile=/var/log/slurm/slurmdbd.log\nPidFile=/run/slurmdbd.pid\n"
        "StorageType=accounting_storage/mysql\nStorageHost=localhost\nStorageUser=slurm\n"
        f"StoragePass={DB_PASSWORD}\nStorageLoc=slurm_acct_db\n"
    )


def _write(path: str, text: str, mode: str = "0644", owner: str = "root") -> str:
    """A shell snippet writing text to path (base64: no quoting trouble with any content)."""
    b64 = base64.b64encode(text.encode()).decode()
    return (
        f"echo {b64} | base64 -d > {path}.tmp && chmod {mode} {path}.tmp && "
        f"chown {owner}: {path}.tmp && mv {path}.tmp {path}"
    )


def _parallel(tb, commands: dict, timeout: int):
    """Run {node: shell command} on the nodes at the same time; raise naming the failed ones."""
    results = {}

    def one(node, cmd):
        results[node] = tb.ssh(node, cmd, check=False, timeout=timeout)

    threads = [threading.Thread(target=one, args=(n, c)) for n, c in commands.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = {n: r for n, r in results.items() if r.returncode != 0}
    if failed:
        raise TestbedError(
            "; ".join(
                f"{n}: rc={r.returncode} {(r.stderr or r.stdout).strip()[-800:]}" for n, r in failed.items()
            )
        )
    return results


def _hosts_block(nodes: dict) -> str:
    """The cluster's names, first in /etc/hosts (a real cluster's DNS; Debian maps the node's own
    name to 127.0.1.1, where slurmd and srun would then advertise themselves)."""
    return (
        f"# BEGIN {HOSTS_MARK}\n" + "".join(f"{a} {n}\n" for n, a in nodes.items()) + f"# END {HOSTS_MARK}\n"
    )


def up(tb, log=_log) -> dict:
    """Install, configure and start Slurm on every node of testbed tb; wait until all are idle."""
    t0 = time.monotonic()
    names = list(tb.nodes)
    if not names:
        raise TestbedError(f"testbed {tb.name} has no nodes: bring it up first")
    controller = names[0]
    addrs = {n: tb.address(n) for n in names}
    apt = "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends"
    installs = {}
    for n in names:
        pkgs = PACKAGES + (CONTROLLER_PACKAGES if n == controller else ())
        # Nothing may start before the configuration is written (policy-rc.d: 101 = not now).
        installs[n] = (
            "set -e; printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; "
            "chmod 755 /usr/sbin/policy-rc.d; "
            f"trap 'rm -f /usr/sbin/policy-rc.d' EXIT; "
            f"[ \"$(dpkg-query -W -f='${{Status}}\\n' {' '.join(pkgs)} 2>/dev/null "
            "| grep -c 'ok installed')\" "
            f"= {len(pkgs)} ] && exit 0; "
            f"apt-get update -qq && {apt} {' '.join(pkgs)} >/dev/null"
        )
    _parallel(tb, installs, timeout=600)
    t_install = time.monotonic() - t0
    cpus = int(tb.ssh(controller, "nproc").stdout.strip() or "1")
    conf = slurm_conf(controller, addrs[controller], addrs, cpus)
    key = base64.b64encode(os.urandom(1024)).decode()
    hosts = _hosts_block(addrs)
    configure = {}
    for n in names:
        configure[n] = "; ".join(
            [
                "set -e",
                f"echo {key} | base64 -d > /etc/munge/munge.key",
                "chown munge: /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key",
                _write(CONF, conf),
                "mkdir -p /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm",
                "chown slurm: /var/lib/slurm/slurmctld /var/log/slurm",
                # Replace an earlier block, then put the cluster's names first.
                f"sed -i '/^# BEGIN {HOSTS_MARK}$/,/^# END {HOSTS_MARK}$/d' /etc/hosts",
                f"{{ printf %s {shlex.quote(hosts)}; cat /etc/hosts; }} > /etc/hosts.new",
                "cat /etc/hosts.new > /etc/hosts && rm /etc/hosts.new",  # a bind mount: write in place
                "systemctl restart munge",
            ]
        )
    configure[controller] += "; " + "; ".join(
        [
            _write(DBD_CONF, slurmdbd_conf(), mode="0600", owner="slurm"),
            "systemctl start mariadb",
            'mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; '
            f"CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '{DB_PASSWORD}'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';\"",
            "systemctl restart slurmdbd",
            # slurmctld registers with slurmdbd at start: wait for slurmdbd's port (bounded).
            "for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null && break; sleep 0.2; done",
            f"sacctmgr -i add cluster {CLUSTER} >/dev/null 2>&1 || true",
            "systemctl restart slurmctld",
        ]
    )
    # The controller first (slurmd registers with slurmctld), then every node's slurmd.
    _parallel(tb, {controller: configure[controller]}, timeout=busy.HANG_S)
    _parallel(tb, {n: c for n, c in configure.items() if n != controller}, timeout=busy.HANG_S)
    _parallel(tb, dict.fromkeys(names, "systemctl restart slurmd"), timeout=busy.HANG_S)
    by_node = {}

    def idle():
        states = tb.ssh(controller, "sinfo --noheader -N -o '%N %T'", check=False).stdout.split()
        by_node.clear()
        by_node.update(zip(states[::2], states[1::2], strict=False))
        return all(by_node.get(n) == "idle" for n in names)

    if not busy.wait_until(idle, READY_TIMEOUT, every=0.5):
        raise TestbedError(
            f"Slurm on testbed {tb.name}: nodes not idle after {READY_TIMEOUT} s: "
            f"{by_node or 'no sinfo'}; "
            f"see /var/log/slurm/*.log on {controller}"
        )
    log(
        f"testbed {tb.name}: Slurm up on {len(names)} nodes in {time.monotonic() - t0:.1f} s "
        f"(packages {t_install:.1f} s); controller {controller}, partition {PARTITION}"
    )
    return {"controller": controller, "nodes": names, "partition": PARTITION, "cluster": CLUSTER}


def down(tb, log=_log):
    """Stop Slurm's daemons on every running node (the packages and configuration stay)."""
    names = [n for n in tb.nodes if tb.node_running(n)]
    cmds = {
        n: "systemctl stop slurmd slurmctld slurmdbd 2>/dev/null; systemctl stop munge 2>/dev/null; true"
        for n in names
    }
    _parallel(tb, cmds, timeout=busy.HANG_S)
    log(f"testbed {tb.name}: Slurm stopped")
