"""Rerun scaling where every node has CPUs of its own: site.yml on 1 and on N ssh "nodes" that are
loopback addresses of ONE many-core machine (the lent GPU machine: 16-32 cores).

The testbed's nodes (tests/perf/provision_bench.py) share the testbed machine's 2 CPUs with the
controller, so a 4-node rerun there pays 4 nodes' work on the same 2 CPUs and cannot be compared
with a cluster, where each node brings its own. Here sshd listens on 127.0.0.2 ... 127.0.0.(N+1),
each address is one inventory host with its own venv, fact file and wheelhouse, and the machine
has more cores than the N nodes and the controller need, so what grows with N is what Ansible
and wireup add per node, as on a cluster. The node settings are tests/gpu/inventory.yml's (the
image's driver, CUDA and torch are kept; nothing uses apt), over ssh with the project's
ansible.cfg (pipelining, ControlPersist) and host key checking on.

    . tests/gpu/env.sh && python3 -m tests.perf.scaling_one_host --nodes 4 --reruns 3

Root, repository root, on a machine with sshd (openssh-server) and at least 2*(N+1) cores. It
starts its own sshd (stopped by PID at the end) and uses only loopback. Prints one Markdown table:
medians of the reruns on 1 and on N nodes (every rerun must report changed=0), and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.perf.provision_bench import parse_recap, task_counts
from tests.testbed.system import ssh_argv

REPO_ROOT = Path(__file__).resolve().parents[2]
PORT = 2222


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv, **kwargs):
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        raise SystemExit(
            f"{' '.join(map(str, argv))}: rc {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc


def start_sshd(work: Path, addresses: list[str]) -> subprocess.Popen:
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        raise SystemExit(
            "no sshd on this machine: install openssh-server, or carry one (.sshbin/, tests/perf/README.md)"
        )
    sshd = os.path.abspath(sshd)  # sshd re-executes itself: it must be started by absolute path
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    prefix = []
    if subprocess.run(["getent", "passwd", "sshd"], capture_output=True, check=False).returncode != 0:
        # sshd drops privileges to the user 'sshd'. Where the machine has none, it gets one in a
        # private mount namespace only (a bind-mounted copy of /etc/passwd): the machine's own
        # /etc/passwd is not changed.
        passwd = work / "passwd"
        passwd.write_text(
            Path("/etc/passwd").read_text() + "sshd:x:65533:65534::/run/sshd:/usr/sbin/nologin\n"
        )
        prefix = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'mount --bind {passwd} /etc/passwd && exec "$@"',
            "sshd",
        ]
        log("no user sshd here: sshd runs in its own mount namespace with one added to a copy of /etc/passwd")
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "host_key")])
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "id_ed25519")])
    (work / "authorized_keys").write_text((work / "id_ed25519.pub").read_text())
    config = [
        f"Port {PORT}",
        *(f"ListenAddress {a}" for a in addresses),
        f"HostKey {work / 'host_key'}",
        f"PidFile {work / 'sshd.pid'}",
        f"AuthorizedKeysFile {work / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "MaxSessions 200",
        "MaxStartups 200:30:400",
        "Subsystem sftp internal-sftp",
    ]
    (work / "sshd_config").write_text("\n".join(config) + "\n")
    run([*prefix, sshd, "-t", "-f", str(work / "sshd_config")])
    with (work / "sshd.log").open("w") as sshd_log:  # sshd keeps its own copy of the descriptor
        proc = subprocess.Popen([*prefix, sshd, "-D", "-e", "-f", str(work / "sshd_config")], stderr=sshd_log)
    # Host key checking stays on: known_hosts holds the key this sshd was just given.
    key = (work / "host_key.pub").read_text().split()
    (work / "known_hosts").write_text("".join(f"[{a}]:{PORT} {key[0]} {key[1]}\n" for a in addresses))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [*ssh_argv(work / "id_ed25519", work / "known_hosts", addresses[0], port=PORT), "true"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        if probe.returncode == 0:
            return proc
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"sshd did not answer on {addresses[0]}:{PORT}: {probe.stderr.strip()}")


def write_inventory(work: Path, names: list[str], addresses: dict[str, str]) -> Path:
    """tests/gpu/inventory.yml's node settings for each loopback node, plus what keeps the nodes
    apart on one machine: venv, facts, wheelhouse and address."""
    base = yaml.safe_load((REPO_ROOT / "tests/gpu/inventory.yml").read_text())
    gpu = dict(base["all"]["children"]["gpu_nodes"]["hosts"]["localhost"])
    for key in ("ansible_connection", "ansible_python_interpreter"):
        gpu.pop(key)
    gpu["pytorch_venv_wheelhouse_dir"] = str(REPO_ROOT / ".wheelhouse")
    gpu["nccl_tests_source"] = str(REPO_ROOT / ".src/nccl-tests-{{ nccl_tests_version }}.tar.gz")
    hosts = {}
    for name in names:
        root = f"/opt/wireup-scale/{name}"
        hosts[name] = dict(
            gpu,
            ansible_host=addresses[name],
            ansible_port=PORT,
            ansible_user="root",
            ansible_python_interpreter="/usr/bin/python3",
            ansible_ssh_private_key_file=str(work / "id_ed25519"),
            ansible_ssh_common_args=f"-o UserKnownHostsFile={work / 'known_hosts'} -o IdentitiesOnly=yes",
            # The cluster address is metadata to site.yml (launch.yml would use it): preflight
            # refuses loopback ones, so each node gets one of TEST-NET-1 (RFC 5737), never contacted.
            wireup_address=f"192.0.2.{addresses[name].rsplit('.', 1)[1]}",
            wireup_venv_path=f"{root}/venv",
            pytorch_venv_fact_dir=f"{root}/facts",
        )
    path = work / f"inventory-{len(names)}.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, sort_keys=True))
    return path


# Where the controller's time goes: one rerun under cProfile (main process only: the strategy, the
# result queue, forking workers); functions grouped by what they are. Workers are forked, so their
# own work (templating task args, running the connection) shows as CPU of the children.
CONTROLLER_GROUPS = (
    (
        "queueing tasks: a forked worker per task and host",
        ("strategy/__init__.py:_queue_task",),
    ),
    ("  of which fork() itself", ("posix.fork",)),
    (
        "building each host's variables (VariableManager.get_vars, also before queueing)",
        ("vars/manager.py:get_vars",),
    ),
    ("reading the workers' results", ("strategy/__init__.py:_process_pending_results",)),
    ("idle: waiting on workers and nodes (sleep)", ("time.sleep",)),
)


def controller_breakdown(stats_path: Path, wall: float) -> list[tuple[str, float, int]]:
    """(what, seconds, calls) of the main process's time from a cProfile file: the cumulative time
    of the matching functions (the indented rows are part of the row above), then the wall time.
    Templating and the connection run in the forked workers, which cProfile does not follow."""
    import pstats

    stats = pstats.Stats(str(stats_path)).stats
    rows = []
    for group, needles in CONTROLLER_GROUPS:
        seconds, calls = 0.0, 0
        for (filename, _line, func), (_cc, nc, _tt, ct, _callers) in stats.items():
            if any(n in f"{filename}:{func}" for n in needles):
                seconds, calls = seconds + ct, calls + nc
        rows.append((group, seconds, calls))
    rows.append(("wall", wall, 0))
    return rows


def playbook(
    work: Path, inventory: Path, label: str, profile: Path | None = None, cprofile: Path | None = None
) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_SSH_CONTROL_PATH_DIR=tempfile.mkdtemp(prefix="cp-", dir=work),  # cold, like an admin's rerun
    )
    if profile:  # per-task wall time, as provision_bench --profile
        env.update(
            ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).resolve().parent / "callback_plugins"),
            ANSIBLE_CALLBACKS_ENABLED="wireup_perf_profile",
            WIREUP_PERF_PROFILE=str(profile),
        )
    out = work / f"{label}.log"
    argv = [shutil.which("ansible-playbook"), "-i", str(inventory), "site.yml"]
    if cprofile:
        argv = [sys.executable, "-m", "cProfile", "-o", str(cprofile), *argv]
    t0 = time.monotonic()
    before = os.times()
    with out.open("w") as fh:
        proc = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=False,
        )
    seconds = time.monotonic() - t0
    after = os.times()
    # CPU of ansible-playbook and everything it waited for (workers, ssh clients); not the
    # ControlPersist masters, which detach.
    controller_cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    recap = parse_recap(out.read_text(errors="replace"))
    nodes = {h: r for h, r in recap.items() if h != "localhost"}
    clean = proc.returncode == 0 and all(r["failed"] == 0 and r["unreachable"] == 0 for r in nodes.values())
    changed = sum(r["changed"] for r in nodes.values())
    log(
        f"{label}: {seconds:.1f} s, rc {proc.returncode}, changed {changed}, hosts {len(nodes)},"
        f" controller CPU {controller_cpu:.1f} s"
    )
    return {
        "controller_cpu": controller_cpu,
        "label": label,
        "seconds": seconds,
        "rc": proc.returncode,
        "clean": clean,
        "changed": changed,
        "log": str(out),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/wireup-scaling"))
    parser.add_argument("--profile", action="store_true", help="one more rerun per size with per-task times")
    args = parser.parse_args(argv)
    if args.nodes < 2:
        parser.error("--nodes must be 2 or more")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="wireup-scaling-"))
    names = [f"n{i}" for i in range(1, args.nodes + 1)]
    addresses = {name: f"127.0.0.{i + 2}" for i, name in enumerate(names)}
    log(f"{os.cpu_count()} CPUs; nodes {names} on {list(addresses.values())} port {PORT}; work {work}")
    sshd = start_sshd(work, list(addresses.values()))
    runs = []
    try:
        one, many = write_inventory(work, names[:1], addresses), write_inventory(work, names, addresses)
        first = playbook(work, many, f"first-{args.nodes}n")
        if not first["clean"]:
            shutil.copy(first["log"], out)
            raise SystemExit(f"first converge failed: {first['log']}")
        for rep in range(1, args.reruns + 1):
            order = [(1, one), (args.nodes, many)]
            for size, inv in order if rep % 2 else reversed(order):
                runs.append(dict(playbook(work, inv, f"rerun-{size}n-r{rep}"), size=size))
        if args.profile:
            for size, inv in ((1, one), (args.nodes, many)):
                prof = out / f"profile-{size}n.json"
                playbook(work, inv, f"profile-{size}n", prof)
                tasks = json.loads(prof.read_text())["tasks"]
                print(f"Slowest tasks of a rerun on {size} node(s):")
                for task in tasks[:12]:
                    print(f"  {task['seconds']:6.2f} s  {task['name']}")
                counts = task_counts(json.loads(prof.read_text()), "n1")
                print(
                    f"  tasks run for n1: {counts['tasks']} ({counts['module_tasks']} started a module"
                    f" on it, {counts['no_module_tasks']} did not)"
                )
            cprof = out / f"cprofile-{args.nodes}n.prof"
            res = playbook(work, many, f"cprofile-{args.nodes}n", cprofile=cprof)
            print(
                f"Where the controller's time goes, one rerun on {args.nodes} nodes under cProfile"
                f" (slower than unprofiled; controller CPU incl. workers and ssh clients"
                f" {res['controller_cpu']:.1f} s):"
            )
            for group, secs, calls in controller_breakdown(cprof, res["seconds"]):
                print(f"  {secs:6.2f} s  {group}" + (f" ({calls} calls)" if calls else ""))
    finally:
        sshd.terminate()  # our own sshd, by its PID
        sshd.wait(timeout=10)
        for path in work.glob("*.log"):
            shutil.copy(path, out)
    bad = [r["label"] for r in runs if not r["clean"] or r["changed"]]
    med = {s: statistics.median(r["seconds"] for r in runs if r["size"] == s) for s in (1, args.nodes)}
    ratio = med[args.nodes] / med[1]
    table = [
        f"Measured {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} on {os.uname().nodename} "
        f"({os.cpu_count()} CPUs); ssh nodes on loopback; project ansible.cfg; "
        f"{args.reruns} reruns per size.",
        "",
        f"| site.yml idempotent rerun | 1 node | {args.nodes} nodes | {args.nodes}/1 |",
        "|---|---|---|---|",
        "| median (min-max) | "
        + " | ".join(
            f"{med[s]:.1f} s ({min(r['seconds'] for r in runs if r['size'] == s):.1f}-"
            f"{max(r['seconds'] for r in runs if r['size'] == s):.1f})"
            for s in (1, args.nodes)
        )
        + f" | {ratio:.2f} |",
        "| controller CPU per rerun, median | "
        + " | ".join(
            f"{statistics.median(r['controller_cpu'] for r in runs if r['size'] == s):.1f} s"
            for s in (1, args.nodes)
        )
        + " | |",
    ]
    if bad:
        table.append(f"\nFLAGGED (failed or changed): {', '.join(bad)}")
    print("\n".join(table))
    (out / "scaling.json").write_text(json.dumps({"runs": runs, "median": med, "ratio": ratio}, indent=1))
    (out / "scaling.md").write_text("\n".join(table) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
