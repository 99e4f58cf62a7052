"""One testbed: N systemd-nspawn Debian 12 nodes on a private Linux bridge, an HTTP file server on
the bridge address, NAT to the registries' front address only, and a generated Ansible inventory.

Everything it creates is recorded in .testbed/NAME/state.json before it is created, so `down`
can clean up after a crash (processes by PID, links, iptables chains, mounts, files)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import cache, fake_cuda_repo
from .system import (
    RUN_DIR,
    TestbedError,
    children_of,
    enter_cgroups,
    flock,
    is_mountpoint,
    is_our_process,
    link_exists,
    make_node_cgroups,
    proc_start_time,
    remove_cgroups,
    remove_tree,
    require_host,
    resolve_v4,
    run,
    ssh_argv,
    stop_process,
)

REPO_ROOT = cache.REPO_ROOT
STATE_ROOT = REPO_ROOT / ".testbed"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
# Subnets are NET_PREFIX.SLOT.0/24; the bridge is wtbSLOT at .1, node K at .(10+K), the file server
# listens on the bridge address at port PORT_BASE+SLOT.
NET_PREFIX = os.environ.get("WIREUP_TESTBED_NET", "10.213")
PORT_BASE = 18000
MAX_SLOT = 250
MAX_NODES = 40
# Ports the nodes may use towards the registries' front address (apt over http, pip over https).
REGISTRY_PORTS = (80, 443)
BOOT_TIMEOUT = 120
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def _log(msg):
    print(msg, flush=True)


class Testbed:
    """A named testbed. `Testbed(name).up(nodes=3)`, `.down()`, `.stop_node()`, `.start_node()`."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, name: str = "default", log=_log):
        if not NAME_RE.fullmatch(name):
            raise TestbedError(
                f"testbed name {name!r} is invalid: use 1-20 of a-z, 0-9 and '-', "
                "starting with a letter (--name NAME)"
            )
        self.name = name
        self.dir = STATE_ROOT / name
        self.state_file = self.dir / "state.json"
        self.log = log
        self.state = self._load()

    # --- state --------------------------------------------------------------------------------
    def _load(self):
        if self.state_file.exists():
            return json.loads(self.state_file.read_text())
        return {}

    def _save(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.state_file)

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.yml"

    @property
    def key_file(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def www_dir(self) -> Path:
        return self.dir / "www"

    @property
    def www_url(self) -> str:
        return f"http://{self.state['bridge_ip']}:{self.state['port']}/"

    @property
    def nodes(self):
        """{inventory name: node record} in node order."""
        return dict(sorted(self.state.get("nodes", {}).items(), key=lambda kv: kv[1]["index"]))

    def address(self, node: str) -> str:
        return self.state["nodes"][node]["address"]

    def node_running(self, node: str) -> bool:
        rec = self.state["nodes"][node]
        return is_our_process(rec.get("pid"), rec.get("start"))

    def is_up(self) -> bool:
        if not self.state.get("nodes") or not self.state.get("ready"):
            return False
        http = self.state.get("http", {})
        return is_our_process(http.get("pid"), http.get("start")) and all(
            self.node_running(n) for n in self.state["nodes"]
        )

    # --- slots: distinct bridge, subnet and port per testbed on this machine ----------------------
    def _claim_slot(self) -> int:
        slots = RUN_DIR / "slots"
        with flock(RUN_DIR / "slots.lock"):
            slots.mkdir(parents=True, exist_ok=True)
            routes = run(["ip", "-4", "route", "show"]).stdout
            for slot in range(1, MAX_SLOT + 1):
                claim = slots / f"{slot}.json"
                if claim.exists():
                    owner = json.loads(claim.read_text())
                    if owner.get("state_dir") == str(self.dir):
                        return slot
                    if Path(owner.get("state_dir", "/nonexistent"), "state.json").exists():
                        continue
                    if link_exists(f"wtb{slot}"):
                        continue
                    claim.unlink()  # stale: its testbed's files and bridge are gone
                if link_exists(f"wtb{slot}") or f"{NET_PREFIX}.{slot}.0/24" in routes:
                    continue
                claim.write_text(json.dumps({"name": self.name, "state_dir": str(self.dir)}) + "\n")
                return slot
        raise TestbedError(
            f"no free testbed slot (1-{MAX_SLOT}) under {slots}: "
            "bring some down (`python -m tests.testbed status`)"
        )

    def _release_slot(self):
        slot = self.state.get("slot")
        if not slot:
            return
        claim = RUN_DIR / "slots" / f"{slot}.json"
        with flock(RUN_DIR / "slots.lock"):
            if claim.exists() and json.loads(claim.read_text()).get("state_dir") == str(self.dir):
                claim.unlink()

    @staticmethod
    def _restore_ip_forward():
        """After the last testbed of the machine is down, put net.ipv4.ip_forward back."""
        saved = RUN_DIR / "ip_forward.before"
        with flock(RUN_DIR / "slots.lock"):
            if saved.exists() and not any((RUN_DIR / "slots").glob("*.json")):
                IP_FORWARD.write_text(saved.read_text())
                saved.unlink()

    # --- up ----------------------------------------------------------------------------------
    def _lock(self):
        """One up/down at a time per testbed (two shells, or two engineers, on the same name)."""
        digest = hashlib.sha256(str(self.dir).encode()).hexdigest()[:16]
        return flock(RUN_DIR / "locks" / f"{self.name}-{digest}.lock")

    def up(self, nodes: int = 3, suites=None):
        """Bring the testbed up (or reuse it when it is already up with those nodes). ``suites``: the
        Debian suite of each node in order (default all bookworm), e.g. ("bookworm", "trixie")."""
        require_host()
        suites = list(suites or [cache.SUITE] * nodes)
        if len(suites) != nodes:
            raise TestbedError(
                f"suites={suites!r} names {len(suites)} nodes, not {nodes}: give one suite per node"
            )
        for suite in suites:
            cache.check_suite(suite)
        with self._lock():
            self.state = self._load()
            return self._up(nodes, suites)

    def down(self):
        """Remove everything this testbed made, as recorded in state.json. Safe to repeat."""
        with self._lock():
            self._down()

    def _up(self, nodes: int, suites: list):
        if not 1 <= nodes <= MAX_NODES:
            raise TestbedError(f"--nodes {nodes} is out of range: use 1 to {MAX_NODES}")
        if self.is_up():
            if [rec.get("suite", cache.SUITE) for rec in self.nodes.values()] == suites:
                self.log(f"testbed {self.name} is already up ({nodes} nodes); reusing it")
                return self
            raise TestbedError(
                f"testbed {self.name} is up with {len(self.state['nodes'])} nodes, not "
                f"{nodes}: bring it down first (python -m tests.testbed down --name {self.name})"
            )
        if self.state or self.dir.exists():
            self.log(f"testbed {self.name}: cleaning up an earlier run that is not fully up")
            self._down()
        t0 = time.monotonic()
        golden = {suite: cache.golden_rootfs(log=self.log, suite=suite) for suite in dict.fromkeys(suites)}
        wheels = cache.wheelhouse(log=self.log)
        try:
            self._create(suites, golden, wheels)
        except BaseException:
            self.log(f"testbed {self.name}: bring-up failed; removing what was made")
            with contextlib.suppress(Exception):
                self._down()
            raise
        self.log(
            f"testbed {self.name}: {nodes} nodes up in {time.monotonic() - t0:.1f} s; "
            f"inventory: {self.inventory}"
        )
        return self

    def _create(self, suites, golden, wheels):
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state = {
            "name": self.name,
            "state_dir": str(self.dir),
            "owner_pid": os.getpid(),
            "golden": {suite: str(path) for suite, path in golden.items()},
            "nodes": {},
            "ready": False,
        }
        self._save()
        slot = self._claim_slot()
        hosts = cache.registry_hosts()
        fronts = sorted({a for h in hosts for a in resolve_v4(h)})
        self.state.update(
            slot=slot,
            bridge=f"wtb{slot}",
            subnet=f"{NET_PREFIX}.{slot}.0/24",
            bridge_ip=f"{NET_PREFIX}.{slot}.1",
            port=PORT_BASE + slot,
            registry_hosts=hosts,
            front_addresses=fronts,
            iptables={"filter": f"WTB{slot}-FWD", "nat": f"WTB{slot}-NAT"},
        )
        self._save()
        run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"wireup-testbed-{self.name}",
                "-f",
                self.key_file,
            ]
        )
        self._make_network()
        self._serve_www(wheels)
        # The stand-in for NVIDIA's CUDA repository (unreachable from here): the roles only see a
        # base URL and a key, as with a site mirror.
        repo = fake_cuda_repo.build(self.www_dir)
        keep = ("base_url_path", "key_name", "fingerprint", "key_sha256")
        self.state["cuda_repo"] = {k: repo[k] for k in keep}
        for k, suite in enumerate(suites, start=1):
            self._make_node(k, golden[suite], suite)
        self.known_hosts.write_text(
            "".join(f"{rec['address']} {rec['host_key']}\n" for rec in self.nodes.values())
        )
        for node in self.nodes:
            self._start_node(node)
        for node in self.nodes:
            self._wait_ready(node)
        self._write_inventory()
        self.state["ready"] = True
        self._save()

    def _make_network(self):
        st = self.state
        br, fch, nch = st["bridge"], st["iptables"]["filter"], st["iptables"]["nat"]
        with flock(RUN_DIR / "slots.lock"):
            # The machine's value before the first testbed: the last testbed's down() restores it.
            saved = RUN_DIR / "ip_forward.before"
            if not saved.exists():
                saved.write_text(IP_FORWARD.read_text())
        st["links"] = [br]
        self._save()
        run(["ip", "link", "add", br, "type", "bridge"])
        run(["ip", "addr", "add", f"{st['bridge_ip']}/24", "dev", br])
        run(["ip", "link", "set", br, "up"])
        IP_FORWARD.write_text("1\n")
        st["iptables_created"] = True
        self._save()
        run(["iptables", "-w", "-N", fch])
        # Node to node across the bridge (a FORWARD DROP policy left by dockerd would block it).
        run(["iptables", "-w", "-A", fch, "-i", br, "-o", br, "-j", "ACCEPT"])
        for front in st["front_addresses"]:
            for port in REGISTRY_PORTS:
                run(
                    [
                        "iptables",
                        "-w",
                        "-A",
                        fch,
                        "-i",
                        br,
                        "-s",
                        st["subnet"],
                        "-d",
                        f"{front}/32",
                        "-p",
                        "tcp",
                        "--dport",
                        str(port),
                        "-j",
                        "ACCEPT",
                    ]
                )
        run(
            [
                "iptables",
                "-w",
                "-A",
                fch,
                "-o",
                br,
                "-d",
                st["subnet"],
                "-m",
                "conntrack",
                "--ctstate",
                "RELATED,ESTABLISHED",
                "-j",
                "ACCEPT",
            ]
        )
        # Everything else from or to the nodes: refused at once (fast failure, no hanging probes).
        run(["iptables", "-w", "-A", fch, "-i", br, "-j", "REJECT"])
        run(["iptables", "-w", "-A", fch, "-o", br, "-j", "REJECT"])
        run(["iptables", "-w", "-I", "FORWARD", "1", "-o", br, "-j", fch])
        run(["iptables", "-w", "-I", "FORWARD", "1", "-i", br, "-j", fch])
        run(["iptables", "-w", "-t", "nat", "-N", nch])
        for front in st["front_addresses"]:
            run(
                [
                    "iptables",
                    "-w",
                    "-t",
                    "nat",
                    "-A",
                    nch,
                    "-s",
                    st["subnet"],
                    "-d",
                    f"{front}/32",
                    "-j",
                    "MASQUERADE",
                ]
            )
        run(["iptables", "-w", "-t", "nat", "-I", "POSTROUTING", "1", "-s", st["subnet"], "-j", nch])

    def _serve_www(self, wheels: Path):
        dest = self.www_dir / "wheels"
        dest.mkdir(parents=True, exist_ok=True)
        for whl in sorted(wheels.glob("*.whl")):
            target = dest / whl.name
            if not target.exists():
                try:
                    os.link(whl, target)  # same filesystem: no copy, no extra disk
                except OSError:
                    shutil.copy2(whl, target)
        log = open(self.dir / "www.log", "ab")  # noqa: SIM115  # handed to the child process
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(self.state["port"]),
                "--bind",
                self.state["bridge_ip"],
                "--directory",
                str(self.www_dir),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.state["http"] = {"pid": proc.pid, "start": proc_start_time(proc.pid)}
        self._save()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.state["bridge_ip"], self.state["port"]), timeout=1),
            ):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise TestbedError(f"file server on {self.www_url} did not start: see {self.dir / 'www.log'}")

    def _make_node(self, k: int, golden: Path, suite: str = cache.SUITE):
        st = self.state
        # Same names in every testbed (each has its own inventory): node1..nodeN.
        name = f"node{k}"
        ndir = self.dir / "nodes" / name
        rec = {
            "index": k,
            "hostname": name,
            "machine": f"wtb{st['slot']}n{k}",
            "address": f"{NET_PREFIX}.{st['slot']}.{10 + k}",
            "dir": str(ndir),
            "root": str(ndir / "root"),
            "upper": str(ndir / "upper"),
            "work": str(ndir / "work"),
            "log": str(ndir / "console.log"),
            "mounted": False,
            "suite": suite,
        }
        rec["veth"] = "vb-" + rec["machine"]
        st["nodes"][name] = rec
        self._save()
        for sub in ("root", "upper", "work"):
            (ndir / sub).mkdir(parents=True, exist_ok=True)
        run(
            [
                "mount",
                "-t",
                "overlay",
                "overlay",
                "-o",
                f"lowerdir={golden},upperdir={rec['upper']},workdir={rec['work']}",
                rec["root"],
            ]
        )
        rec["mounted"] = True
        self._save()
        root = Path(rec["root"])
        (root / "etc/hostname").write_text(name + "\n")
        (root / "etc/hosts").write_text(
            "127.0.0.1\tlocalhost\n"
            f"127.0.1.1\t{name}\n"
            "::1\tlocalhost ip6-localhost ip6-loopback\n"
            "ff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"
            "# wireup testbed: the nodes have no DNS; the registries' names point at their front address\n"
            + "".join(f"{front}\t{' '.join(st['registry_hosts'])}\n" for front in st["front_addresses"][:1])
        )
        netfile = root / "etc/systemd/network/10-host0.network"
        netfile.parent.mkdir(parents=True, exist_ok=True)
        netfile.write_text(
            "# wireup testbed: static address on the testbed bridge (sorts before nspawn's default)\n"
            "[Match]\nName=host0\n\n[Network]\n"
            f"Address={rec['address']}/24\nGateway={st['bridge_ip']}\n"
            "LinkLocalAddressing=no\nIPv6AcceptRA=no\n"
        )
        hostkey = root / "etc/ssh/ssh_host_ed25519_key"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", hostkey])
        rec["host_key"] = " ".join(Path(str(hostkey) + ".pub").read_text().split()[:2])
        ssh_dir = root / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(Path(str(self.key_file) + ".pub").read_text())
        (ssh_dir / "authorized_keys").chmod(0o600)
        self._save()

    def _start_node(self, node: str):
        rec = self.state["nodes"][node]
        if self.node_running(node):
            return
        remove_cgroups(rec.get("cgroups"))  # left by an earlier boot of this node
        rec["cgroups"] = make_node_cgroups(rec["machine"])
        self._save()
        log = open(rec["log"], "ab")  # noqa: SIM115  # handed to the child process
        proc = subprocess.Popen(
            [
                "systemd-nspawn",
                "--quiet",
                "-b",
                "-D",
                rec["root"],
                "-M",
                rec["machine"],
                f"--hostname={rec['hostname']}",
                "--register=no",
                "--keep-unit",
                f"--network-bridge={self.state['bridge']}",
                "--console=read-only",
                "--resolv-conf=off",
                "--timezone=off",
                "--link-journal=no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=enter_cgroups(rec["cgroups"]),  # noqa: PLW1509  # single-threaded caller
        )
        log.close()
        rec.update(pid=proc.pid, start=proc_start_time(proc.pid), leader=None)
        self._save()

    def _ssh_argv(self, node: str):
        return ssh_argv(
            self.key_file, self.known_hosts, self.address(node), extra_options=["ConnectTimeout=5"]
        )

    def ssh(self, node: str, command: str, *, check=True, timeout=120):
        """Run a shell command on a node over ssh (host key checked); returns CompletedProcess."""
        return run([*self._ssh_argv(node), command], check=check, timeout=timeout)

    def _wait_ready(self, node: str, timeout=BOOT_TIMEOUT):
        """Wait for sshd's banner, then for systemd to finish booting (running or degraded)."""
        rec = self.state["nodes"][node]
        deadline = time.monotonic() + timeout
        while True:
            if not self.node_running(node):
                raise TestbedError(
                    f"node {node} (systemd-nspawn pid {rec.get('pid')}) exited while "
                    f"booting: see {rec['log']}"
                )
            with contextlib.suppress(OSError), socket.create_connection((rec["address"], 22), timeout=1) as s:
                s.settimeout(3)
                if s.recv(4).startswith(b"SSH-"):
                    break
            if time.monotonic() > deadline:
                raise TestbedError(
                    f"node {node} ({rec['address']}) has no sshd after {timeout} s: see {rec['log']}"
                )
            time.sleep(0.2)
        left = max(5, int(deadline - time.monotonic()))
        proc = self.ssh(node, "systemctl is-system-running --wait", check=False, timeout=left + 10)
        state = proc.stdout.strip()
        if state not in ("running", "degraded"):
            raise TestbedError(f"node {node}: systemd is {state!r} ({proc.stderr.strip()}); see {rec['log']}")
        if state == "degraded":
            failed = self.ssh(node, "systemctl --failed --no-legend --plain", check=False).stdout.strip()
            self.log(f"node {node}: systemd degraded; failed units: {failed}")
        # The node's init (systemd, PID 1 inside): nsenter's target, and killed by down() should
        # systemd-nspawn itself have died without taking its container with it.
        rec["leader"] = next(iter(children_of(int(rec["pid"]))), None)
        rec["leader_start"] = proc_start_time(rec["leader"]) if rec["leader"] else None
        self._save()

    def _cuda_repo_vars(self) -> dict:
        repo = self.state.get("cuda_repo")
        if not repo:
            return {}
        return {
            "cuda_repo_base_url": self.www_url + repo["base_url_path"],
            "cuda_repo_key_name": repo["key_name"],
            "cuda_repo_key_fingerprints": [repo["fingerprint"]],
            "cuda_repo_key_checksum": "sha256:" + repo["key_sha256"],
        }

    def _write_inventory(self):
        import yaml  # the control venv has PyYAML (ansible-core needs it)

        common = (
            f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={self.known_hosts} -o IdentitiesOnly=yes"
        )
        inventory = {
            "gpu_nodes": {
                "hosts": {n: {"ansible_host": rec["address"]} for n, rec in self.nodes.items()},
                "vars": {
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(self.key_file),
                    "ansible_ssh_common_args": common,
                    # paramiko cannot be pointed at known_hosts: testbed only, ssh keeps checking keys.
                    "ansible_paramiko_host_key_checking": False,
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "pytorch_venv_wheelhouse_url": f"{self.www_url}wheels/",
                    **self._cuda_repo_vars(),
                    "testbed_name": self.name,
                    "testbed_www_url": self.www_url,
                    "testbed_www_dir": str(self.www_dir),
                },
            }
        }
        header = (
            f"# Generated by `python -m tests.testbed up --name {self.name}`: the local testbed's "
            f"{len(self.nodes)} nodes.\n# Removed by `python -m tests.testbed down --name {self.name}`.\n"
        )
        self.inventory.write_text(header + yaml.safe_dump(inventory, sort_keys=False, width=200))

    # --- single nodes --------------------------------------------------------------------------
    def stop_node(self, node: str, timeout=20.0):
        """Power a node off (SIGTERM to its systemd-nspawn, which shuts the node down)."""
        with self._lock():
            return self._stop_node(node, timeout)

    def _stop_node(self, node: str, timeout):
        rec = self.state["nodes"][node]
        result = stop_process(rec.get("pid"), rec.get("start"), timeout=timeout)
        self._kill_orphan_init(rec)
        rec.update(pid=None, start=None, leader=None, leader_start=None)
        self._remove_link(rec["veth"])
        remove_cgroups(rec.get("cgroups"))
        self._save()
        return result

    def start_node(self, node: str):
        """Boot a stopped node again (same filesystem, address and host key) and wait for it."""
        with self._lock():
            self._start_node(node)
            self._wait_ready(node)

    # --- down ----------------------------------------------------------------------------------
    @staticmethod
    def _kill_orphan_init(rec):
        """A node whose systemd-nspawn died (SIGKILL, crash) keeps running: end its PID namespace."""
        if is_our_process(rec.get("leader"), rec.get("leader_start")):
            stop_process(rec["leader"], rec["leader_start"], timeout=0.5)

    @staticmethod
    def _remove_link(name):
        if name and link_exists(name):
            run(["ip", "link", "del", name], check=False)

    def _down(self):
        t0 = time.monotonic()
        st = self._load() or self.state
        nodes = st.get("nodes", {})
        # SIGTERM every node first (they shut down in parallel), then wait for each.
        for rec in nodes.values():
            if is_our_process(rec.get("pid"), rec.get("start")):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(rec["pid"]), 15)
        for rec in nodes.values():
            stop_process(rec.get("pid"), rec.get("start"))
            self._kill_orphan_init(rec)
            remove_cgroups(rec.get("cgroups"))
        http = st.get("http", {})
        stop_process(http.get("pid"), http.get("start"), timeout=5)
        for rec in nodes.values():
            self._remove_link(rec.get("veth"))
        for link in st.get("links", []):
            self._remove_link(link)
        if st.get("iptables_created"):
            self._remove_iptables(st)
        for rec in nodes.values():
            root = Path(rec["root"])
            mounted = root.exists() and is_mountpoint(root)
            if mounted and run(["umount", root], check=False).returncode != 0:
                run(["umount", "-l", root], check=False)
        self.state = st
        self._release_slot()
        self._restore_ip_forward()
        still = [
            rec["root"]
            for rec in nodes.values()
            if Path(rec["root"]).exists() and is_mountpoint(Path(rec["root"]))
        ]
        if still:
            raise TestbedError(
                f"testbed {self.name}: could not unmount {still}; unmount them and run down again"
            )
        stopped = time.monotonic()
        if self.dir.exists():
            remove_tree(self.dir)
        self.state = {}
        self.log(
            f"testbed {self.name}: down (stopped and unhooked in {stopped - t0:.1f} s, "
            f"its files deleted in {time.monotonic() - stopped:.1f} s)"
        )

    @staticmethod
    def _remove_iptables(st):
        fch, nch = st["iptables"]["filter"], st["iptables"]["nat"]
        br, subnet = st["bridge"], st["subnet"]
        for table, chain, jump in (
            ("filter", "FORWARD", ["-i", br, "-j", fch]),
            ("filter", "FORWARD", ["-o", br, "-j", fch]),
            ("nat", "POSTROUTING", ["-s", subnet, "-j", nch]),
        ):
            while run(["iptables", "-w", "-t", table, "-D", chain, *jump], check=False).returncode == 0:
                pass
        for table, chain in (("filter", fch), ("nat", nch)):
            run(["iptables", "-w", "-t", table, "-F", chain], check=False)
            run(["iptables", "-w", "-t", table, "-X", chain], check=False)

    # --- inspection ----------------------------------------------------------------------------
    def iptables_rules(self):
        """The rules this testbed installed: {"filter": [...], "nat": [...], "jumps": [...]} (iptables -S)."""
        st = self.state
        out = {}
        for table, chain in (("filter", st["iptables"]["filter"]), ("nat", st["iptables"]["nat"])):
            out[table] = run(["iptables", "-w", "-t", table, "-S", chain]).stdout.splitlines()
        jumps = run(["iptables", "-w", "-S", "FORWARD"]).stdout.splitlines()
        jumps += run(["iptables", "-w", "-t", "nat", "-S", "POSTROUTING"]).stdout.splitlines()
        out["jumps"] = [
            r
            for r in jumps
            if r.endswith(f"-j {st['iptables']['filter']}") or r.endswith(f"-j {st['iptables']['nat']}")
        ]
        return out

    def _not_up_advice(self) -> str:
        """What to do about a testbed that is not fully up: nodes powered off with stop-node come
        back with start-node; anything else (a crashed up, the file server gone) needs down, then up."""
        stopped = [node for node in self.nodes if not self.node_running(node)]
        http = self.state.get("http", {})
        if self.state.get("ready") and stopped and is_our_process(http.get("pid"), http.get("start")):
            starts = "; ".join(f"start-node {node} --name {self.name}" for node in stopped)
            return f"up, {len(stopped)} node(s) stopped (boot again: python -m tests.testbed {starts})"
        return "NOT fully up (run down, then up)"

    def describe(self) -> str:
        st = self.state
        if not st:
            return f"{self.name}: not up"
        owner = st.get("owner_pid")
        lines = [
            f"{self.name}: {'up' if self.is_up() else self._not_up_advice()}  "
            f"bridge {st.get('bridge')} {st.get('subnet')}  files {self.www_url if 'port' in st else '-'}  "
            f"inventory {self.inventory}  (made by pid {owner})"
        ]
        for node, rec in self.nodes.items():
            running = self.node_running(node)
            lines.append(
                f"  {node:<16} {rec['address']:<15} {'running' if running else 'stopped'}"
                f"  nspawn pid {rec.get('pid')}  init pid {rec.get('leader')}"
            )
        return "\n".join(lines)


def all_testbeds():
    """Names of the testbeds that have a state dir under .testbed/."""
    return sorted(p.parent.name for p in STATE_ROOT.glob("*/state.json"))
