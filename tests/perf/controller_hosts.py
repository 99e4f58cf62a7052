"""The controller's cost per host with many inventory hosts (issue 39): one machine, one sshd on
loopback, N inventory hosts (16, 64, 128, 256), each its own loopback address, so each is its own
ssh connection (ControlPersist master, handshake, pipelining) as on a cluster.

    .venv/bin/python -m tests.perf.controller_hosts --sizes 16,64,128,256 --reps 2 \\
        --side before=/tmp/before-tree --side after=. --out /tmp/ctl

Each side is a checkout of the repository (its ansible.cfg, playbooks and roles; the harness's own
.venv runs every side), optionally with another ansible.cfg (``--side NAME=TREE:CFG``). The play
it times is what every wireup run pays per host on the controller:

1. preflight's controller play (``preflight tasks_from: inventory``: every inventory check);
2. a no-op node play: ``ansible.builtin.ping`` through the connection, a module that takes a
   second on the node (``sleep 1``: real modules take 0.2-1.0 s there, docs/DEVELOPING.md, which
   is what forks overlap), then one ``set_fact`` per
   host of what the report reads (``wireup_node`` from a real preflight answer,
   tests/fixtures/testbed/wireup_node_debian12.json, and the quick check's result from the real
   ``wireup-check --json`` output, made once here with checkbundle against the H200 captures, kept
   through the real filter ``wireup_node_check_result``);
3. the report play's controller tasks (``bench_report tasks_from: quick``: gather over the group,
   records and report written, the verdict);
4. a node play after the report (``ping`` again, as bench.yml's node_check play follows its
   report): a host whose ssh master outlived the gap reuses it, others connect again.

Root (sshd), repository root. sshd comes from Debian's openssh-server package, unpacked into the
work folder (``apt-get download``; nothing is installed) and run in a private mount namespace (its
privilege-separation user and folder exist only there). It listens on 127.0.1.1 ... only, on a
high port, and is stopped by PID at the end. The figures: wall seconds, the controller's CPU seconds
(ansible-playbook, its workers, the ssh clients and their ControlPersist masters: the harness is a
child subreaper, so the masters it ends after each run are counted) and their per-host share;
sizes and sides interleave, alternating which side goes first. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / ".collections") not in sys.path:  # wireup's Python by the collection's name
    sys.path.insert(0, str(REPO_ROOT / ".collections"))
PORT = 2299
GROUP = "gpu_nodes"
PR_SET_CHILD_SUBREAPER = 36
NODE_FIXTURE = REPO_ROOT / "tests/fixtures/testbed/wireup_node_debian12.json"
H200 = REPO_ROOT / "tests/fixtures/h200x2"
SYSFS = REPO_ROOT / "tests/fixtures/sysfs/ndr8_healthy"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv, **kwargs):
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        raise SystemExit(
            f"{' '.join(map(str, argv))}: rc {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}"
        )
    return proc


# ------------------------------------------------------------------------------ pure helpers
def address(index: int) -> str:
    """The loopback address of host ``index`` (0-based): 127.0.1.1 ... 127.0.4.254 (1,016 hosts)."""
    block, offset = divmod(index, 254)
    if block > 3:
        raise ValueError(f"host {index}: at most 1,016 loopback hosts")
    return f"127.0.{block + 1}.{offset + 1}"


def cluster_address(index: int) -> str:
    """A cluster address nobody is asked for (RFC 2544's benchmarking block 198.18.0.0/15)."""
    block, offset = divmod(index, 254)
    return f"198.18.{block}.{offset + 1}"


def host_names(count: int) -> list[str]:
    return [f"n{i + 1:04d}" for i in range(count)]


def inventory(count: int, work: Path) -> dict:
    """N hosts of the node group, each its own loopback address (its own ssh connection)."""
    hosts = {}
    for i, name in enumerate(host_names(count)):
        hosts[name] = {
            "ansible_host": address(i),
            "ansible_port": PORT,
            "ansible_user": "root",
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_private_key_file": str(work / "id_ed25519"),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={work / 'known_hosts'} -o IdentitiesOnly=yes",
            "wireup_address": cluster_address(i),
        }
    return {"all": {"children": {GROUP: {"hosts": hosts}}}}


def playbook(check_stdout: str) -> list[dict]:
    """The representative run: preflight's controller play, a no-op node play, the report play."""
    node = json.loads(NODE_FIXTURE.read_text())
    keep = {
        "wireup_node": "{{ __node | combine({'hostname': inventory_hostname, 'network': "
        "{'address': wireup_address, 'interface': 'host0'}}) }}",
        "__node_check_run_id": "{{ __run_id }}",
        "__node_check_result": "{{ __check_stdout | wireup.cluster.wireup_node_check_result("
        "host=inventory_hostname, stderr='', rc=0) }}",
    }
    return [
        {
            "name": "Preflight | Check the inventory on the controller",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Check the node group and the control node",
                    "ansible.builtin.import_role": {
                        "name": "wireup.cluster.preflight",
                        "tasks_from": "inventory",
                    },
                }
            ],
        },
        {
            "name": "No-op node play",
            "hosts": GROUP,
            "gather_facts": False,
            "tasks": [
                {"name": "Reach the node (a module through the connection)", "ansible.builtin.ping": {}},
                {
                    "name": "A module that takes a second on the node",
                    "ansible.builtin.command": {"argv": ["sleep", "1"]},
                    "changed_when": False,
                },
                {
                    "name": "Keep what the report reads",
                    "ansible.builtin.set_fact": keep,
                    "vars": {"__node": node, "__check_stdout": check_stdout, "__run_id": "{{ run_id }}"},
                },
            ],
        },
        {
            "name": "Report play",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Judge, store and report",
                    "ansible.builtin.import_role": {
                        "name": "wireup.cluster.bench_report",
                        "tasks_from": "quick",
                    },
                }
            ],
        },
        {
            "name": "Node play after the report",
            "hosts": GROUP,
            "gather_facts": False,
            "tasks": [{"name": "Reach the node again", "ansible.builtin.ping": {}}],
        },
    ]


def recap_ok(stdout: str, count: int) -> bool:
    """Every node host and localhost in the recap, none failed or unreachable."""
    from tests.perf.provision_bench import parse_recap

    recap = parse_recap(stdout)
    nodes = [h for h in recap if h != "localhost"]
    bad = [h for h, r in recap.items() if r["failed"] or r["unreachable"]]
    return len(nodes) == count and "localhost" in recap and not bad


def order(round_index: int, sides: list[str]) -> list[str]:
    """Sides in turn, the first one alternating between rounds."""
    shift = round_index % len(sides)
    return sides[shift:] + sides[:shift]


def table(rows: list[dict], sides: list[str], sizes: list[int]) -> list[str]:
    """Markdown: per side and size the medians (wall, controller CPU, CPU per host), and the
    per-host CPU's growth from the smallest to the largest size."""
    out = [
        "| side | hosts | runs | wall s (median, min-max) | controller CPU s | CPU ms per host "
        "| max RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for side in sides:
        for size in sizes:
            cell = [r for r in rows if r["side"] == side and r["hosts"] == size and r["ok"]]
            if not cell:
                out.append(f"| {side} | {size} | 0 | - | - | - | - |")
                continue
            walls, cpus = [r["wall"] for r in cell], [r["cpu"] for r in cell]
            rss = max(r["maxrss_mb"] for r in cell)
            out.append(
                f"| {side} | {size} | {len(cell)} | {statistics.median(walls):.1f} "
                f"({min(walls):.1f}-{max(walls):.1f}) | {statistics.median(cpus):.1f} | "
                f"{1000 * statistics.median(cpus) / size:.0f} | {rss:.0f} |"
            )
    out += [
        "",
        "| side | CPU per host, largest / smallest size | wall, largest / smallest |",
        "|---|---|---|",
    ]
    for side in sides:
        small, large = (_medians(rows, side, s) for s in (sizes[0], sizes[-1]))
        if small and large:
            growth = (large[1] / sizes[-1]) / (small[1] / sizes[0])
            out.append(f"| {side} | {growth:.2f} | {large[0] / small[0]:.2f} |")
    return out


def task_table(rows: list[dict], work: Path, size: int) -> list[str]:
    """Per task, its wall seconds at ``size`` hosts (median over runs) for each side."""
    per: dict[str, dict[str, list[float]]] = {}
    sides = []
    for row in rows:
        if row["hosts"] != size or not row["ok"] or not row.get("profile"):
            continue
        sides += [] if row["side"] in sides else [row["side"]]
        for task in json.loads((work / row["profile"]).read_text())["tasks"]:
            per.setdefault(task["name"], {}).setdefault(row["side"], []).append(task["seconds"])
    out = [f"| task ({size} hosts), wall s | {' | '.join(sides)} |", "|---|" + "---|" * len(sides)]
    for name, by_side in sorted(per.items(), key=lambda kv: -max(map(statistics.median, kv[1].values()))):
        cells = [f"{statistics.median(by_side[s]):.1f}" if s in by_side else "-" for s in sides]
        out.append(f"| {name} | {' | '.join(cells)} |")
    return out


def _medians(rows, side, size):
    cell = [r for r in rows if r["side"] == side and r["hosts"] == size and r["ok"]]
    if not cell:
        return None
    return statistics.median(r["wall"] for r in cell), statistics.median(r["cpu"] for r in cell)


# ------------------------------------------------------------------------------ the machine
def unpack_sshd(work: Path) -> tuple[Path, Path]:
    """(sshd, its library folder) from Debian's packages, unpacked (not installed)."""
    debs = work / "debs"
    debs.mkdir(exist_ok=True)
    run(["apt-get", "download", "openssh-server", "libwrap0"], cwd=debs)
    for deb in debs.glob("*.deb"):
        run(["dpkg-deb", "-x", str(deb), str(debs / "x")])
    sshd = debs / "x/usr/sbin/sshd"
    return sshd, next((debs / "x").rglob("libwrap.so.0")).parent


SSHD_SOCKETS = 16  # sshd's MAX_LISTEN_SOCKS: one sshd per 16 addresses


def start_sshd(work: Path, addresses: list[str]) -> list[subprocess.Popen]:
    """sshd on ``addresses``:PORT (one sshd per 16 of them) in a private mount namespace each:
    /etc/passwd with the user sshd and an empty /run/sshd exist there only."""
    sshd, libs = unpack_sshd(work)
    passwd = work / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text() + "sshd:x:65533:65534::/run/sshd:/usr/sbin/nologin\n")
    for key in ("host_key", "id_ed25519"):
        if not (work / key).exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / key)])
    (work / "authorized_keys").write_text((work / "id_ed25519.pub").read_text())
    key = (work / "host_key.pub").read_text().split()
    (work / "known_hosts").write_text("".join(f"[{a}]:{PORT} {key[0]} {key[1]}\n" for a in addresses))
    procs = []
    for first in range(0, len(addresses), SSHD_SOCKETS):
        chunk = addresses[first : first + SSHD_SOCKETS]
        procs.append(_one_sshd(work, f"sshd-{first // SSHD_SOCKETS}", chunk, (sshd, libs, passwd)))
        _wait_for_sshd(work, chunk[-1], procs)
    return procs


def _one_sshd(work: Path, name: str, addresses: list[str], found: tuple) -> subprocess.Popen:
    sshd, libs, passwd = found
    run_dir = work / name
    run_dir.mkdir(exist_ok=True)
    config = [
        f"Port {PORT}",
        *(f"ListenAddress {a}" for a in addresses),
        f"HostKey {work / 'host_key'}",
        f"PidFile {run_dir / 'sshd.pid'}",
        f"AuthorizedKeysFile {work / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "MaxSessions 50",
        "MaxStartups 2000:30:4000",
        "LogLevel ERROR",
    ]
    (run_dir / "sshd_config").write_text("\n".join(config) + "\n")
    inner = (
        f"mount --bind {passwd} /etc/passwd && mount --bind {run_dir} /run && mkdir -p /run/sshd "
        f"&& exec env LD_LIBRARY_PATH={libs} {sshd} -D -e -f {run_dir / 'sshd_config'}"
    )
    with (run_dir / "sshd.log").open("w") as sshd_log:
        return subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner], stderr=sshd_log
        )


def _wait_for_sshd(work: Path, last: str, procs: list[subprocess.Popen]) -> None:
    from tests.testbed.system import ssh_argv

    deadline = time.monotonic() + 30
    probe = None
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [*ssh_argv(work / "id_ed25519", work / "known_hosts", last, port=PORT), "true"],
            capture_output=True,
            text=True,
            check=False,
            timeout=20,
        )
        if probe.returncode == 0:
            return
        time.sleep(0.5)
    stop_sshd(procs)
    raise SystemExit(f"sshd did not answer on {last}:{PORT}: {probe.stderr.strip() if probe else ''}")


def stop_sshd(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=30)


def check_stdout(work: Path) -> str:
    """What ``wireup-check --json`` prints on a healthy node: the real bundle, run here against
    nvidia-smi replaying the H200 captures (as tests/unit/test_checkrun.py runs it), after a
    manual baseline."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import bundle

    node = work / "check"
    (node / "smi").mkdir(parents=True, exist_ok=True)
    (node / "prom").mkdir(exist_ok=True)
    for name in ("topo_m.txt", "nvlink_s.txt", "query_gpu.csv", "nvidia_smi_q.xml"):
        shutil.copy(H200 / name, node / "smi" / name)
    smi = node / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\nD={node / "smi"}\ncase "$1" in\n  topo) cat $D/topo_m.txt ;;\n'
        "  nvlink) cat $D/nvlink_s.txt ;;\n  --query-gpu=*) cat $D/query_gpu.csv ;;\n"
        "  -q) cat $D/nvidia_smi_q.xml ;;\n  *) exit 9 ;;\nesac\n"
    )
    smi.chmod(0o755)
    python = "/usr/bin/python3"
    exe = node / "wireup-check"
    exe.write_bytes(bundle.build(python))
    exe.chmod(0o755)
    config = {
        "host": "gpu-a01",
        "baseline": str(node / "state/baseline.json"),
        "nvidia_smi": str(smi),
        "sysfs_root": str(SYSFS),
        "textfile_dir": str(node / "prom"),
        "timeout": 5,
    }
    (node / "check.json").write_text(json.dumps(config))
    head = [python, "-S", "-I", str(exe), "--config", str(node / "check.json")]
    run([*head, "--write-baseline", "--manual", "--json"])
    done = subprocess.run([*head, "--json"], capture_output=True, text=True, check=False, timeout=60)
    if json.loads(done.stdout).get("verdict") != "PASS":
        raise SystemExit(f"wireup-check did not PASS on the captures: {done.stdout[:500]}")
    return done.stdout


# ------------------------------------------------------------------------------ one run
def set_subreaper() -> None:
    """Orphaned descendants (ssh's ControlPersist masters) come back to this process, so their CPU
    is counted when they are reaped."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}")


def end_masters(control_dir: Path) -> None:
    """Ask every ControlPersist master of a run to exit, then reap what came back to us."""
    for sock in control_dir.iterdir():
        subprocess.run(
            ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"],
            capture_output=True,
            check=False,
            timeout=10,
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not any(control_dir.iterdir()):
                return
            time.sleep(0.1)


def reap_all() -> None:
    """Reap every finished descendant (zombies left by ssh masters exiting on their own)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def one_run(side: dict, size: int, work: Path, label: str, profile: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir="/tmp"))  # short: sun_path is 108 bytes
    env.update(
        ANSIBLE_CONFIG=str(side["cfg"]),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(control_dir),
    )
    if profile:  # per-task wall time (provision_bench's callback)
        (work / "profiles").mkdir(exist_ok=True)
        env.update(
            ANSIBLE_CALLBACK_PLUGINS=str(REPO_ROOT / "tests/perf/callback_plugins"),
            ANSIBLE_CALLBACKS_ENABLED="wireup_perf_profile",
            WIREUP_PERF_PROFILE=str(work / "profiles" / f"{label}.json"),
        )
    results = work / "results" / label
    argv = [
        str(REPO_ROOT / ".venv/bin/ansible-playbook"),
        "-i",
        str(work / f"inventory-{size}.yml"),
        str(side["playbook"]),
        "-e",
        f"wireup_results_dir={results}",
        "-e",
        f"run_id={time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}",
        "-e",
        "bench_fail_on_fail=false",
    ]
    reap_all()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=side["tree"], env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    end_masters(control_dir)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(control_dir, ignore_errors=True)
    (work / "logs").mkdir(exist_ok=True)
    (work / "logs" / f"{label}.log").write_text(proc.stdout + proc.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "side": side["name"],
        "hosts": size,
        "wall": round(wall, 2),
        "cpu": round(cpu, 2),
        "maxrss_mb": after.ru_maxrss / 1024,
        "load": round(load, 2),
        "rc": proc.returncode,
        "ok": proc.returncode == 0 and recap_ok(proc.stdout, size),
        "log": f"logs/{label}.log",
        "profile": f"profiles/{label}.json" if profile else "",
    }


# ------------------------------------------------------------------------------ the sides
def parse_side(text: str, work: Path) -> dict:
    """NAME=TREE[:CFG]: a checkout and, optionally, another ansible.cfg for it (its relative paths
    are made absolute against the tree, as Ansible reads them against the file's folder)."""
    name, _, rest = text.partition("=")
    tree, _, cfg = rest.partition(":")
    if not name or not tree:
        raise SystemExit(f"--side {text!r}: NAME=TREE[:CFG]")
    tree_path = Path(tree).resolve()
    cfg_path = Path(cfg).resolve() if cfg else tree_path / "ansible.cfg"
    folder = work / "sides" / name
    folder.mkdir(parents=True, exist_ok=True)
    side_cfg = folder / "ansible.cfg"
    side_cfg.write_text(absolute_cfg(cfg_path.read_text(), tree_path))
    # group_vars beside the playbook: the tree's own (preflight checks that they were loaded).
    link = folder / "group_vars"
    if not link.exists():
        link.symlink_to(tree_path / "group_vars")
    return {"name": name, "tree": tree_path, "cfg": side_cfg, "playbook": folder / "play.yml"}


def absolute_cfg(text: str, tree: Path) -> str:
    """An ansible.cfg whose relative paths (collections_path, inventory) point into ``tree``."""
    out = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        relative = sep and key.strip() in ("collections_path", "inventory") and value.strip()[:1] != "/"
        out.append(f"{key.strip()} = {tree / value.strip()}" if relative else line)
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16,64,128,256")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--side", action="append", required=True, help="NAME=TREE[:CFG] (repeatable)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--profile", action="store_true", help="per-task wall time of every run")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("root needed (sshd in a private mount namespace)")
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.out or tempfile.mkdtemp(prefix="controller-hosts-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    sides = [parse_side(s, work) for s in args.side]
    set_subreaper()
    stdout = check_stdout(work)
    for side in sides:
        side["playbook"].write_text(yaml.safe_dump(playbook(stdout), sort_keys=False))
    for size in sizes:
        (work / f"inventory-{size}.yml").write_text(yaml.safe_dump(inventory(size, work), sort_keys=True))
    sshd = start_sshd(work, [address(i) for i in range(max(sizes))])
    rows = []
    try:
        for rep in range(args.reps):
            for size in sizes:
                for name in order(rep + sizes.index(size), [s["name"] for s in sides]):
                    side = next(s for s in sides if s["name"] == name)
                    row = one_run(side, size, work, f"{name}-{size}-r{rep}", args.profile)
                    log(f"{name} {size} hosts: {row['wall']} s wall, {row['cpu']} s CPU, ok={row['ok']}")
                    rows.append(row)
    finally:
        stop_sshd(sshd)
    lines = table(rows, [s["name"] for s in sides], sizes)
    if args.profile:
        lines += ["", *task_table(rows, work, sizes[-1])]
    (work / "summary.json").write_text(json.dumps({"rows": rows, "sizes": sizes}, indent=1))
    (work / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
