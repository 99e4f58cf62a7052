"""The fabric bench and launch Example 2 across two inventory hosts on the ONE GPU machine.

Each host is an sshd address on loopback (127.0.0.2, 127.0.0.3, as tests/perf/scaling_one_host.py
does) with its own wireup_base_dir and venv, one GPU (CUDA_VISIBLE_DEVICES 0 and 1; both 0 when
the machine has one GPU: NCCL accepts two ranks on one GPU when they are on different "hosts"),
its own NCCL_HOSTID (so NCCL treats them as two hosts and must use its network transport), and a
cluster address on a dummy interface made here (wfab0, 10.250.0.2 and .3; preflight refuses
loopback cluster addresses). Steps, logs under $OUT:

  1. site.yml --tags pytorch_venv on both hosts (the venvs)
  2. bench.yml --tags fabric: one pair, NCCL INFO; NCCL must say NET/Socket over wfab0 (no IB
     there), the expectation comes from that interface (no speed in sysfs: NCCL's 10 Gb/s); where
     no dummy interface can be made, NCCL uses lo and the record must say there is no expectation
  3. launch.yml (Example 2, waited) across the two hosts, NCCL INFO on
  4. launch.yml Example 2 on the machine as one host (tests/gpu/inventory.yml, all GPUs), NCCL
     INFO on: the parser must tell P2P/NVLink inside a node from NET/Socket between the "hosts"

    . tests/gpu/env.sh && python3 -m tests.gpu.fabric_two_hosts

Root, repository root. Starts its own sshd (stopped by PID) and the dummy interface (removed at
the end); uses only loopback and that interface. Prints the fabric report and what the NCCL INFO
parser read from each log; exits 1 when a check fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.perf.scaling_one_host import REPO_ROOT, log, start_sshd, write_inventory

sys.path.insert(0, str(REPO_ROOT / ".collections"))

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import ncclinfo

DUMMY = "wfab0"
NCCL_INFO = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


def gpus():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def play(out: Path, name: str, inventory: Path, *args: str) -> int:
    start = time.monotonic()
    with (out / f"{name}.log").open("w") as fh:
        rc = subprocess.run(
            [shutil.which("ansible-playbook"), "-i", str(inventory), *args],
            cwd=REPO_ROOT,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=1800,
        ).returncode
    log(f"{name}: rc={rc} in {time.monotonic() - start:.0f} s")
    return rc


def read_logs(folder: Path):
    """{log name: parse_nccl_info summary} for every node log of the newest job runs in folder."""
    out = {}
    for path in sorted(folder.glob("*/*.log")):
        try:
            info = ncclinfo.parse_nccl_info(path.read_text(errors="replace"))
        except ValueError as exc:
            out[str(path.relative_to(folder))] = {"error": str(exc)}
            continue
        out[str(path.relative_to(folder))] = {
            k: info[k]
            for k in ("network", "inter_node", "gdrdma", "intra_node", "socket_interfaces", "nnodes")
        }
    return out


def main() -> int:
    out = Path(os.environ.get("OUT", "/tmp/wireup-gpu-out")) / "fabric"
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results"
    work = Path(tempfile.mkdtemp(prefix="wireup-fabric-"))
    names = ["n1", "n2"]
    ssh_addr = {"n1": "127.0.0.2", "n2": "127.0.0.3"}
    cluster = {"n1": "10.250.0.2", "n2": "10.250.0.3"}
    count = gpus()
    devices = {"n1": "0", "n2": "1" if count >= 2 else "0"}
    log(f"{count} GPU(s); hosts {names}, GPUs {devices}, cluster addresses {cluster}")
    # A kernel without the dummy driver: the cluster addresses go on lo (the interface NCCL then
    # names is lo; the address is not a loopback one, which is what preflight checks).
    made = subprocess.run(["ip", "link", "add", DUMMY, "type", "dummy"], check=False).returncode == 0
    iface = DUMMY if made else "lo"
    failures = []
    sshd = None
    try:
        for addr in cluster.values():
            subprocess.run(["ip", "addr", "add", f"{addr}/{24 if made else 32}", "dev", iface], check=True)
        subprocess.run(["ip", "link", "set", iface, "up"], check=True)
        sshd = start_sshd(work, list(ssh_addr.values()))
        inv_path = write_inventory(work, names, ssh_addr)
        inv = yaml.safe_load(inv_path.read_text())
        for name, host in inv["all"]["children"]["gpu_nodes"]["hosts"].items():
            base = f"/opt/wireup-fabric/{name}"
            host.update(
                wireup_address=cluster[name],
                wireup_interface=iface,
                wireup_base_dir=base,
                wireup_venv_path=f"{base}/venv",
                pytorch_venv_fact_dir=f"{base}/facts",
                wireup_nproc_per_node=1,
                wireup_job_env=dict(
                    host.get("wireup_job_env") or {},
                    CUDA_VISIBLE_DEVICES=devices[name],
                    NCCL_HOSTID=f"wireup-{name}",
                ),
            )
        inv_path.write_text(yaml.safe_dump(inv, sort_keys=True))
        shutil.copy(inv_path, out / "inventory.yml")
        common = ["-e", f"wireup_results_dir={results}"]
        if play(out, "venvs", inv_path, "site.yml", "--tags", "pytorch_venv", *common):
            failures.append("site.yml --tags pytorch_venv failed")
        play(
            out,
            "fabric",
            inv_path,
            "bench.yml",
            "--tags",
            "fabric",
            *common,
            "-e",
            "bench_fail_on_fail=false",
        )
        runs = sorted((results / "fabric").glob("*/fabric.json"))
        if not runs:
            failures.append("bench.yml --tags fabric stored no fabric.json")
        else:
            record = json.loads(runs[-1].read_text())
            print((runs[-1].parent / "fabric.md").read_text())
            kinds = {t.get("inter_node") for d in record["pair_details"] for t in d["transports"].values()}
            if kinds != {"socket"}:
                failures.append(f"NCCL's inter-node transport was {kinds}, expected NET/Socket only")
            exp = [d.get("expected") or {} for d in record["pair_details"]]
            used = {
                i
                for d in record["pair_details"]
                for t in d["transports"].values()
                for i in t["socket_interfaces"]
            }
            if used and used <= {"lo"}:
                # No dummy interface here: NCCL ran over loopback, which no NIC fact lists.
                if (
                    not exp
                    or exp[0].get("expected_gbs") is not None
                    or "NCCL used lo" not in exp[0].get("reason", "")
                ):
                    failures.append(
                        f"NCCL used lo but the expectation is not the 'no hardware expectation' one: {exp}"
                    )
            elif not exp or exp[0].get("transport") != "socket":
                failures.append(f"no socket expectation: {exp}")
        env = json.dumps({"torchrun_launch_env": NCCL_INFO, "torchrun_launch_job": "fabric-example2"})
        if play(
            out,
            "launch-two-hosts",
            inv_path,
            "launch.yml",
            *common,
            "-e",
            "torchrun_launch_wait=true",
            "-e",
            env,
        ):
            failures.append("launch.yml across the two hosts failed")
        env1 = json.dumps(
            {"torchrun_launch_env": NCCL_INFO, "torchrun_launch_job": "fabric-example2-onehost"}
        )
        play(
            out,
            "launch-one-host",
            REPO_ROOT / "tests/gpu/inventory.yml",
            "launch.yml",
            *common,
            "-e",
            "torchrun_launch_wait=true",
            "-e",
            env1,
        )
        parsed = read_logs(results / "jobs")
        (out / "ncclinfo.json").write_text(json.dumps(parsed, indent=1, sort_keys=True))
        for name, info in parsed.items():
            print(f"{name}: {info}")
        two = [
            i for n, i in parsed.items() if n.startswith("fabric-example2-2") or n.startswith("bench-fabric")
        ]
        one = [i for n, i in parsed.items() if n.startswith("fabric-example2-onehost")]
        if not two or any(i.get("inter_node") != "socket" for i in two):
            failures.append("the two-host runs did not all show NET/Socket")
        if count >= 2 and (not one or not all(i.get("intra_node") for i in one)):
            failures.append("the one-host run on 2 GPUs did not show P2P/SHM")
    finally:
        if sshd is not None:
            sshd.terminate()  # our own sshd, by its PID
            sshd.wait(timeout=10)
        if made:
            subprocess.run(["ip", "link", "del", DUMMY], check=False)
        else:
            for addr in cluster.values():
                subprocess.run(["ip", "addr", "del", f"{addr}/32", "dev", "lo"], check=False)
        for path in work.glob("*.log"):
            shutil.copy(path, out)
    print("fabric two hosts: " + ("OK" if not failures else "FAILED: " + "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
