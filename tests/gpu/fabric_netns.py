"""The fabric bench across N simulated hosts in network namespaces on the ONE GPU machine, healthy
and then with one host's link shaped: the proof that the bench names the bad host from real
interfaces (issue 27).

Each host is a network namespace ``wfab-<name>`` with one veth "NIC" named eth0 inside (as a
container's eth0 is: an Ethernet interface with a speed in sysfs, 10000 Mb/s for a veth, no PCI
device, no RDMA), joined to the others by a bridge ``wfabbr0`` in the root namespace, which also
carries the controller's address (10.250.0.1/24) so Ansible, here in the root namespace, reaches
each host over the bridge. Each host runs its own sshd inside its namespace (``ip netns exec``,
which also mounts that namespace's /sys, so the NIC facts read the host's own eth0), listening on
its eth0 address; its cluster address (wireup_address) is the same, wireup_interface eth0. All
hosts use the machine's one GPU (one GPU each where there are enough), each its own NCCL_HOSTID,
so NCCL treats them as hosts and must use its network transport: NET/Socket on eth0.

Steps (logs and results/ packed into $OUT/fabric-netns.tgz; the figures printed):

  1. site.yml --tags pytorch_venv on every host (the venvs)
  2. healthy: bench.yml --tags fabric; every pair and the whole-group run PASS against the
     expectation from the veth's speed (10 Gb/s x sockets' 0.45 = 0.562 GB/s), NCCL on
     NET/Socket over eth0 on every host
  3. one host's link shaped (tc tbf on both ends of its veth, --rate, default 2gbit); bench.yml
     --tags fabric again: that host alone named bad through the re-pairing rounds, the
     whole-group run without it PASSes, the recap fails that host alone
  4. launch.yml (Example 2, waited): refused, naming the shaped host
  5. launch.yml -e torchrun_launch_on_failed=skip: Example 2 on the others over NCCL, ranks
     renumbered, the shaped host left out

    . tests/gpu/env.sh && export PATH=$PWD/.sshbin/bin:$PATH LD_LIBRARY_PATH=$PWD/.sshbin/lib
    python3 -m tests.gpu.fabric_netns --hosts 4

Root, repository root; needs ip and tc (carried in .sshbin, tests/gpu/README.md) and a kernel
with network namespaces, veth, bridge and tbf. Everything it makes (namespaces, veths, bridge,
sshd processes, stopped by PID) it removes at the end; traffic stays on the bridge. Exits 1 when
a check fails, naming each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from tests.perf.scaling_one_host import PORT, REPO_ROOT, log, run, write_inventory
from tests.testbed.system import ssh_argv

sys.path.insert(0, str(REPO_ROOT / ".collections"))

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import ncclinfo, nics

BRIDGE = "wfabbr0"
NET = "10.250.0"
IFACE = "eth0"
NCCL_INFO = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


def gpus():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def ns_of(name):
    return f"wfab-{name}"


def make_hosts(names):
    """The bridge with the controller's address, then one namespace per host with its veth:
    the host end eth0 inside, the other end (wfabh<i>) on the bridge."""
    run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "addr", "add", f"{NET}.1/24", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    addr = {}
    for i, name in enumerate(names, start=1):
        ns, peer = ns_of(name), f"wfabh{i}"
        run(["ip", "netns", "add", ns])
        run(["ip", "link", "add", peer, "type", "veth", "peer", "name", f"wfabn{i}", "netns", ns])
        run(["ip", "-n", ns, "link", "set", f"wfabn{i}", "name", IFACE])
        addr[name] = f"{NET}.{10 + i}"
        run(["ip", "-n", ns, "addr", "add", f"{addr[name]}/24", "dev", IFACE])
        run(["ip", "-n", ns, "link", "set", IFACE, "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "link", "set", peer, "master", BRIDGE, "up"])
    return addr


def remove_hosts(names):
    for i, name in enumerate(names, start=1):
        subprocess.run(["ip", "netns", "del", ns_of(name)], check=False)  # takes its veth with it
        subprocess.run(["ip", "link", "del", f"wfabh{i}"], check=False, capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], check=False)


def sshd_prefix(work):
    """What runs sshd where the machine has no user 'sshd' (its privilege separation needs one):
    a private mount namespace over a copy of /etc/passwd with one added (as scaling_one_host)."""
    if subprocess.run(["getent", "passwd", "sshd"], capture_output=True, check=False).returncode == 0:
        return []
    passwd = work / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text() + "sshd:x:65533:65534::/run/sshd:/usr/sbin/nologin\n")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind {passwd} /etc/passwd && exec "$@"', "sshd"]  # fmt: skip


def start_sshds(work, addr):
    """One sshd per host, inside its namespace, on its eth0 address; one host key and one client
    key for all; host key checking stays on (known_hosts holds that key for every address)."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        raise SystemExit("no sshd here: carry one (.sshbin/, tests/perf/README.md)")
    sshd = os.path.abspath(sshd)  # sshd re-executes itself: absolute path
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    prefix = sshd_prefix(work)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "host_key")])
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / "id_ed25519")])
    (work / "authorized_keys").write_text((work / "id_ed25519.pub").read_text())
    key = (work / "host_key.pub").read_text().split()
    (work / "known_hosts").write_text("".join(f"[{a}]:{PORT} {key[0]} {key[1]}\n" for a in addr.values()))
    procs = {}
    for name, a in addr.items():
        config = work / f"sshd_config-{name}"
        config.write_text(
            "\n".join(
                [
                    f"Port {PORT}",
                    f"ListenAddress {a}",
                    f"HostKey {work / 'host_key'}",
                    f"PidFile {work / f'sshd-{name}.pid'}",
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
            )
            + "\n"
        )
        argv = ["ip", "netns", "exec", ns_of(name), *prefix, sshd]
        run([*argv, "-t", "-f", str(config)])
        with (work / f"sshd-{name}.log").open("w") as fh:
            procs[name] = subprocess.Popen([*argv, "-D", "-e", "-f", str(config)], stderr=fh)
    for name, a in addr.items():
        deadline, probe = time.monotonic() + 20, None
        while time.monotonic() < deadline:
            probe = subprocess.run(
                [*ssh_argv(work / "id_ed25519", work / "known_hosts", a, port=PORT), "true"],
                capture_output=True,
                text=True,
                check=False,
                timeout=10,
            )
            if probe.returncode == 0:
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"sshd of {name} did not answer on {a}:{PORT}: {probe.stderr.strip()}")
    return procs


def stop_sshds(procs):
    for proc in procs.values():
        proc.terminate()  # our own sshd, by its PID
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def nic_tree(out, name):
    """What the NIC facts read inside the host's namespace: read_tree's dict (kept as a capture
    for the unit tests) and the facts parsed from it, logged."""
    tree = run(
        ["ip", "netns", "exec", ns_of(name), sys.executable, "-c",
         "import json, sys; sys.path.insert(0, '.collections'); "
         "from ansible_collections.wireup.cluster.plugins.module_utils.wireup import fabric; "
         "print(json.dumps(nics.read_tree('/'), indent=1, sort_keys=True))"],
        cwd=REPO_ROOT,
    ).stdout  # fmt: skip
    (out / f"nic-tree-{name}.json").write_text(tree)
    facts = nics.parse_nic_facts(json.loads(tree))
    log(
        f"NIC facts in {ns_of(name)}: {facts['interfaces']}; transport {facts['transport']}, "
        f"{facts['rails']} x {facts['rail_gbps']} Gb/s on {facts['devices']}"
    )


def inventory(work, names, addr, count):
    """tests/gpu/inventory.yml's settings per host (write_inventory), each host over ssh to its
    eth0 address, that address its cluster address, its own folders, GPU and NCCL_HOSTID."""
    path = write_inventory(work, names, addr)
    inv = yaml.safe_load(path.read_text())
    for i, (name, host) in enumerate(sorted(inv["all"]["children"]["gpu_nodes"]["hosts"].items())):
        base = f"/opt/wireup-fabric/{name}"
        host.update(
            wireup_address=addr[name],
            wireup_interface=IFACE,
            wireup_base_dir=base,
            wireup_venv_path=f"{base}/venv",
            pytorch_venv_fact_dir=f"{base}/facts",
            wireup_nproc_per_node=1,
            wireup_job_env=dict(
                host.get("wireup_job_env") or {},
                CUDA_VISIBLE_DEVICES=str(i % count) if count else "0",
                NCCL_HOSTID=f"wireup-{name}",
            ),
        )
    path.write_text(yaml.safe_dump(inv, sort_keys=True))
    return path


def play(out, name, inv, *args):
    start = time.monotonic()
    with (out / f"{name}.log").open("w") as fh:
        rc = subprocess.run(
            [shutil.which("ansible-playbook"), "-i", str(inv), *args],
            cwd=REPO_ROOT,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=1200,
        ).returncode
    log(f"{name}: rc={rc} in {time.monotonic() - start:.0f} s")
    return rc, (out / f"{name}.log").read_text(errors="replace")


def newest_record(results):
    runs = sorted((results / "fabric").glob("*/fabric.json"))
    return (json.loads(runs[-1].read_text()), runs[-1].parent) if runs else (None, None)


def shape(name, index, rate):
    """A token bucket on both ends of the host's veth: what it sends (eth0 in its namespace) and
    what it receives (the bridge port's egress), as a NIC at that rate would."""
    spec = ["root", "tbf", "rate", rate, "burst", "1mb", "latency", "50ms"]
    run(["ip", "netns", "exec", ns_of(name), "tc", "qdisc", "replace", "dev", IFACE, *spec])
    run(["tc", "qdisc", "replace", "dev", f"wfabh{index}", *spec])
    shown = run(["ip", "netns", "exec", ns_of(name), "tc", "-s", "qdisc", "show", "dev", IFACE]).stdout
    return shown + run(["tc", "-s", "qdisc", "show", "dev", f"wfabh{index}"]).stdout


def transports_used(record):
    """{(kind of NCCL's inter-node transport, socket interface)} over every job of the record."""
    return {
        (t.get("inter_node"), tuple(t.get("socket_interfaces") or ()))
        for d in record["pair_details"]
        for t in d["transports"].values()
    }


def check_healthy(record, names, failures):
    label = "healthy round"
    if record["verdicts"] != dict.fromkeys(names, "PASS"):
        failures.append(f"{label}: verdicts {record['verdicts']}")
    if record.get("reference_kind") != "expected":
        failures.append(f"{label}: pairs judged against {record.get('reference_kind')}, not the expectation")
    for d in record["pair_details"]:
        e = d.get("expected") or {}
        if e.get("transport") != "socket" or not e.get("expected_gbs"):
            failures.append(f"{label}: {'+'.join(d['pair'])} has no socket expectation: {e}")
    if transports_used(record) != {("socket", (IFACE,))}:
        failures.append(
            f"{label}: NCCL's transports {transports_used(record)}, expected NET/Socket on {IFACE}"
        )
    if record["group"].get("verdict") != "PASS" or record["group"].get("members") != names:
        failures.append(f"{label}: {record.get('group_line')}")


def check_shaped(record, names, bad, rc, failures):
    label = "shaped round"
    others = [n for n in names if n != bad]
    if record["bad"] != [bad] or record["verdicts"] != {n: ("FAIL" if n == bad else "PASS") for n in names}:
        failures.append(f"{label}: bad {record['bad']}, verdicts {record['verdicts']} (shaped {bad})")
    slow = [p for p in record["pairs"] if bad in p["pair"]]
    if len(slow) < 2 or any(p["verdict"] != "FAIL" for p in slow):
        failures.append(f"{label}: pairs with {bad}: {slow}")
    if any(p["verdict"] != "PASS" for p in record["pairs"] if bad not in p["pair"]):
        failures.append(f"{label}: a pair without {bad} did not pass: {record['pairs']}")
    g = record["group"]
    if g.get("members") != others or g.get("verdict") != "PASS" or g.get("reference_kind") != "expected":
        failures.append(f"{label}: {record.get('group_line')}")
    if set(record["failed"]) != {bad} or rc == 0:
        failures.append(
            f"{label}: the play failed {sorted(record['failed'])} (rc {rc}), expected {bad} alone"
        )


def check_refused(rc, text, bad, failures):
    """launch.yml must fail with a refusal that names the bad host; returns the line."""
    refused = [line.strip() for line in text.splitlines() if "launch refused" in line]
    if rc == 0 or not any(bad in line for line in refused):
        failures.append(f"launch.yml was not refused naming {bad} (rc {rc})")
    return f"rc {rc}: {refused[0][:400] if refused else 'no refusal line'}"


def check_skip(rc, text, results, names, bad, *, failures):
    """launch.yml with on_failed=skip must run on the others, ranks renumbered, every node exit 0."""
    runs = sorted((results / "jobs").glob("fabric-skip-*/summary.json"))
    summary = json.loads(runs[-1].read_text()) if runs else {}
    ranks = {h: n.get("node_rank") for h, n in summary.get("nodes", {}).items()}
    others = [n for n in names if n != bad]
    verdict = summary.get("verdict") or {}
    left_out = [line.strip() for line in text.splitlines() if f"left out {bad} " in line]
    if rc or ranks != {h: r for r, h in enumerate(others)} or not verdict.get("ok") or not left_out:
        failures.append(
            f"skip-launch: rc {rc}, ranks {ranks}, verdict {verdict}, left out line {bool(left_out)}"
        )
    return f"rc {rc}, ranks {ranks}, {verdict.get('reason')}\n   " + (
        left_out[0][:400] if left_out else f"no 'left out {bad}' line"
    )


def check_logs(parsed, failures):
    """Every job that ran (the refused one never did) used NET/Socket on eth0 alone."""
    wrong = {
        n: i
        for n, i in parsed.items()
        if i.get("inter_node") != "socket" or i.get("socket_interfaces") != [IFACE]
    }
    if wrong:
        failures.append(f"logs without NET/Socket on {IFACE}: {wrong}")
    if not any(n.startswith("fabric-skip") for n in parsed):
        failures.append("no log of the skip-launch run")


def read_job_logs(folder):
    out = {}
    for path in sorted(folder.glob("*/*.log")):
        try:
            info = ncclinfo.parse_nccl_info(path.read_text(errors="replace"))
        except ValueError as exc:
            out[str(path.relative_to(folder))] = {"error": str(exc)}
            continue
        out[str(path.relative_to(folder))] = {
            "inter_node": info["inter_node"],
            "socket_interfaces": [s["name"] for s in info["socket_interfaces"]],
            "nnodes": info["nnodes"],
        }
    return out


def figures(record):
    """One line per job: round, members, busbw against its reference, verdict."""
    lines = []
    for p in record["pairs"]:
        ref = p.get("reference_gbs") or record.get("reference_gbs")
        lines.append(
            f"  round {p['round']} {' + '.join(p['pair'])}: {p.get('busbw') or 0:.3f} GB/s against "
            f"{ref or 0:.3f} GB/s, ratio {p.get('ratio') or 0:.2f} {p['verdict']}"
        )
    lines.append("  " + record.get("group_line", ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4, help="simulated hosts (>= 4)")
    parser.add_argument("--rate", default="2gbit", help="tbf rate of the shaped host's link")
    parser.add_argument("--shaped", type=int, default=3, help="which host to shape (1-based)")
    opts = parser.parse_args()
    if opts.hosts < 4 or not 1 <= opts.shaped <= opts.hosts:
        parser.error("--hosts must be >= 4 and --shaped one of them")
    # The device tool brings back at most 8 files of $OUT: the logs are packed into one archive.
    dest = Path(os.environ.get("OUT", "/tmp/wireup-gpu-out"))
    dest.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="wireup-fabric-netns-"))
    results = out / "results"
    work = Path(tempfile.mkdtemp(prefix="wireup-netns-"))
    names = [f"n{i}" for i in range(1, opts.hosts + 1)]
    bad = names[opts.shaped - 1]
    count = gpus()
    failures, sshds = [], {}
    start = time.monotonic()
    try:
        addr = make_hosts(names)
        log(f"{count} GPU(s); hosts {addr} on bridge {BRIDGE} ({NET}.1); {bad} to be shaped at {opts.rate}")
        nic_tree(out, names[0])
        sshds = start_sshds(work, addr)
        inv = inventory(work, names, addr, count)
        shutil.copy(inv, out / "inventory.yml")
        common = ["-e", f"wireup_results_dir={results}"]
        rc, _ = play(out, "venvs", inv, "site.yml", "--tags", "pytorch_venv", *common)
        if rc:
            failures.append("site.yml --tags pytorch_venv failed")
        play(
            out,
            "fabric-healthy",
            inv,
            "bench.yml",
            "--tags",
            "fabric",
            *common,
            "-e",
            "bench_fail_on_fail=false",
        )
        healthy, where = newest_record(results)
        if healthy is None:
            failures.append("healthy round: no fabric.json")
        else:
            check_healthy(healthy, names, failures)
            shutil.copy(where / "fabric.md", out / "fabric-healthy.md")
            print("== healthy round\n" + figures(healthy))
        (out / "tc-shaped.txt").write_text(shape(bad, opts.shaped, opts.rate))
        rc, _ = play(out, "fabric-shaped", inv, "bench.yml", "--tags", "fabric", *common)
        shaped, where2 = newest_record(results)
        if shaped is None or where2 == where:
            failures.append("shaped round: no new fabric.json")
        else:
            check_shaped(shaped, names, bad, rc, failures)
            shutil.copy(where2 / "fabric.md", out / "fabric-shaped.md")
            print(f"== shaped round ({bad} at {opts.rate})\n" + figures(shaped))
        wait = ["-e", "torchrun_launch_wait=true", "-e", json.dumps({"torchrun_launch_env": NCCL_INFO})]
        job = ["-e", "torchrun_launch_job=fabric-refused"]
        rc, text = play(out, "launch-refused", inv, "launch.yml", *common, *wait, *job)
        print("== launch.yml: " + check_refused(rc, text, bad, failures))
        job = ["-e", "torchrun_launch_on_failed=skip", "-e", "torchrun_launch_job=fabric-skip"]
        rc, text = play(out, "launch-skip", inv, "launch.yml", *common, *wait, *job)
        print("== launch.yml on_failed=skip: " + check_skip(rc, text, results, names, bad, failures=failures))
        parsed = read_job_logs(results / "jobs")
        (out / "ncclinfo.json").write_text(json.dumps(parsed, indent=1, sort_keys=True))
        check_logs(parsed, failures)
    finally:
        stop_sshds(sshds)
        remove_hosts(names)
        for path in work.glob("*.log"):
            shutil.copy(path, out)
        log(f"all steps in {time.monotonic() - start:.0f} s")
        pack(out, dest)  # also when interrupted (run.sh's timeout sends SIGINT)
    verdict = "OK" if not failures else "FAILED: " + "; ".join(failures)
    print(f"fabric netns ({opts.hosts} hosts, {bad} shaped at {opts.rate}): {verdict}")
    return 1 if failures else 0


def pack(out, dest):
    with tarfile.open(dest / "fabric-netns.tgz", "w:gz") as tar:
        tar.add(out, arcname="fabric-netns")
    for name in ("fabric-healthy.md", "fabric-shaped.md"):
        if (out / name).exists():
            shutil.copy(out / name, dest)


if __name__ == "__main__":
    sys.exit(main())
