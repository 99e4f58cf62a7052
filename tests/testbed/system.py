"""Small helpers around host commands, processes and the shared cache (stdlib only)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

# Shared between testbeds and checkouts on this machine: golden root filesystems and wheelhouses.
CACHE_DIR = Path(os.environ.get("WIREUP_TESTBED_CACHE", "/var/cache/wireup-testbed"))
# Slot claims (bridge name, subnet, port) of the testbeds that are up on this machine.
RUN_DIR = Path(os.environ.get("WIREUP_TESTBED_RUN", "/run/wireup-testbed"))

# Host commands the testbed needs, and the Debian package that provides each: what `make run`
# installs (`make deps`). The golden tree is made with mmdebstrap alone (cache.py).
HOST_COMMANDS = {
    "mmdebstrap": "mmdebstrap",
    "systemd-nspawn": "systemd-container",
    "iptables": "iptables",
    "ip": "iproute2",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "mount": "mount",
    "getent": "libc-bin",
    "update-ca-certificates": "ca-certificates",
    # The stand-in CUDA apt repository (fake_cuda_repo.py) is built and signed with these.
    "gpg": "gnupg",
    "dpkg-deb": "dpkg",
}
# Commands only the checks need besides the testbed: `make test` installs them (`make deps-test`,
# `deps --tests`), `make run` does not; a check that finds one missing fails under `make test`
# instead of skipping (tests/conftest.py).
CHECK_COMMANDS = {
    "shellcheck": "shellcheck",
    # tests/unit/test_report_browser.py loads report.html in headless Chromium.
    "chromium": "chromium",
    # Debian's prometheus package: promtool checks the textfiles and alert rules wireup writes
    # (tests/unit/test_promtext.py), and its server scrapes the testbed's node exporters
    # (tests/integration/test_prometheus.py). Its service is never started by `deps` (below).
    "promtool": "prometheus",
}
# Installed packages must not start services on this machine (the prometheus package's postinst
# would start a server on :9090): policy-rc.d answers 101 ("not now") while deps installs.
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


class TestbedError(RuntimeError):
    """A testbed operation failed; the message says what and how to fix it."""


def run(argv, *, check=True, capture=True, timeout=None, input_text=None, env=None):
    """Run argv (a list, never a shell string) with LC_ALL=C; return CompletedProcess."""
    full_env = dict(os.environ if env is None else env)
    full_env["LC_ALL"] = "C"
    proc = subprocess.run(
        [str(a) for a in argv],
        check=False,
        capture_output=capture,
        text=True,
        timeout=timeout,
        input=input_text,
        env=full_env,
    )
    if check and proc.returncode != 0:
        err = (proc.stderr or "").strip() if capture else ""
        raise TestbedError(f"command failed (rc={proc.returncode}): {' '.join(map(str, argv))}\n{err}")
    return proc


def ssh_argv(key_file, known_hosts, address: str, *, port: int | None = None, extra_options=()) -> list[str]:
    """ssh as root to a node the caller set up: its own key only, no prompts, and the host key
    checked against the caller's known_hosts (never added on first sight)."""
    argv = ["ssh", *(["-p", str(port)] if port else []), "-i", str(key_file)]
    for option in (
        "IdentitiesOnly=yes",
        "BatchMode=yes",
        "StrictHostKeyChecking=yes",
        f"UserKnownHostsFile={known_hosts}",
        *extra_options,
    ):
        argv += ["-o", option]
    return [*argv, f"root@{address}"]


def missing_packages(checks=False):
    """Debian packages whose commands are missing on this machine (the testbed's; with
    checks=True also those the test checks use)."""
    wanted = {**HOST_COMMANDS, **(CHECK_COMMANDS if checks else {})}
    return sorted({pkg for cmd, pkg in wanted.items() if shutil.which(cmd) is None})


def install_deps(log=print, *, tests=False, apt_log=None):
    """apt-get install the host packages the testbed needs (with tests=True also the checks' tools),
    only those missing. apt's own output goes to the file apt_log (appended) when given, else to
    the terminal; the terminal always gets what is installed and upgraded, and apt's last lines
    when it fails."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, bridges, mounts): run it as root")
    pkgs = missing_packages(checks=tests)
    if not pkgs:
        log("testbed deps: all host commands present")
        return []
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *pkgs]
    with _apt_output(apt_log) as out:
        _apt(["apt-get", "update", "-q"], env, out, apt_log)
        # systemd-container must match the host's systemd, so apt may upgrade systemd and its
        # libraries on this machine: say so before doing it (apt's simulation names every upgrade).
        simulation = run([*argv[:2], "-s", *argv[2:]], env=env).stdout
        log(deps_line(pkgs, simulation, apt_log))
        upgrades = simulated_upgrades(simulation)
        if upgrades:
            log(
                "testbed deps: this also UPGRADES packages already installed on this machine: "
                + ", ".join(f"{name} {old} -> {new}" for name, old, new in upgrades)
            )
        with no_service_starts(POLICY_RC_D):
            _apt(argv, env, out, apt_log)
    return pkgs


def deps_line(pkgs, simulation: str, apt_log=None) -> str:
    """What deps is about to install, from apt's simulation: the packages asked for, how many
    packages apt installs for them, and where apt's own output goes."""
    where = f"; apt's output: {apt_log}" if apt_log else ""
    count = len(simulated_installs(simulation))
    return f"testbed deps: apt-get install {' '.join(pkgs)} ({count} new packages{where})"


@contextlib.contextmanager
def _apt_output(apt_log):
    """The file apt writes into (appended), or None: the terminal."""
    if not apt_log:
        yield None
        return
    Path(apt_log).parent.mkdir(parents=True, exist_ok=True)
    with open(apt_log, "a") as fh:
        yield fh


def _apt(argv, env, out, apt_log, tail=15):
    """Run an apt-get command with its output in out (a file) or on the terminal (None); a failure
    names the command and, when the output went to a file, shows its last lines."""
    if out is None:
        run(argv, env=env, capture=False)
        return
    out.write(f"$ {' '.join(argv)}\n")
    out.flush()
    proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=dict(env, LC_ALL="C"), check=False)
    if proc.returncode != 0:
        out.flush()
        last = Path(apt_log).read_text(errors="replace").splitlines()[-tail:]
        raise TestbedError(
            f"command failed (rc={proc.returncode}): {' '.join(argv)}; its output is in {apt_log}, "
            "which ends:\n" + "\n".join(last)
        )


@contextlib.contextmanager
def no_service_starts(path: Path = POLICY_RC_D):
    """invoke-rc.d and deb-systemd-invoke start nothing while the block runs (policy-rc.d exit
    101); a policy-rc.d that was there already is left as it is."""
    if path.exists():
        yield
        return
    path.write_text("#!/bin/sh\n# wireup testbed deps: no service starts while packages install\nexit 101\n")
    path.chmod(0o755)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


_SIMULATED_UPGRADE = re.compile(r"^Inst (\S+) \[([^\]]+)\] \((\S+)")


_SIMULATED_INSTALL = re.compile(r"^Inst (\S+) \(")


def simulated_installs(text: str) -> list[str]:
    """The packages `apt-get -s install` output installs new ("Inst sl (5.02-1+b1 Debian:12.15
    [amd64])"; an upgrade has its [installed version] before the parenthesis)."""
    return [m.group(1) for m in map(_SIMULATED_INSTALL.match, text.splitlines()) if m]


def simulated_upgrades(text: str) -> list[tuple[str, str, str]]:
    """[(package, installed version, new version)] of the upgrades in `apt-get -s install` output
    ("Inst bash [5.2.15-2+b8] (5.2.15-2+b13 Debian:12.15/oldstable [amd64])"; new installs have no
    [installed version])."""
    return [m.groups() for m in map(_SIMULATED_UPGRADE.match, text.splitlines()) if m]


def require_host():
    """Fail clearly when not root or a host command is missing."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, bridges, mounts): run it as root")
    pkgs = missing_packages()
    if pkgs:
        raise TestbedError(
            f"missing host packages: {' '.join(pkgs)}; install them with "
            "`.venv/bin/python -m tests.testbed deps` (apt-get install)"
        )


@contextlib.contextmanager
def flock(path: Path):
    """Hold an exclusive lock on path (created if missing) for the with-block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def proc_start_time(pid: int):
    """Start time of pid in clock ticks since boot (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped: no longer running
        reap(pid)
        return None
    return int(fields[19])


def is_our_process(pid, start_time) -> bool:
    """True when pid is alive and is the very process we started (not a reused PID)."""
    if not pid:
        return False
    now = proc_start_time(int(pid))
    return now is not None and now == start_time


def children_of(pid: int):
    """PIDs whose parent is pid."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            kids.append(int(entry.name))
    return kids


def stop_process(pid, start_time, *, timeout=20.0) -> str:
    """SIGTERM the process we started, wait, SIGKILL if it outlives timeout. Returns what happened."""
    if not is_our_process(pid, start_time):
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_our_process(pid, start_time):
            return "stopped"
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and is_our_process(pid, start_time):
        time.sleep(0.1)
    return "killed"


def reap(popen_or_pid):
    """Collect the exit status of a child we started, so it does not linger as a zombie."""
    pid = getattr(popen_or_pid, "pid", popen_or_pid)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(int(pid), os.WNOHANG)


def remove_tree(path: Path) -> None:
    """rm -r path, the trees of its nodes (path/nodes/*) at the same time. Deleting is bound by the
    disk's latency, not the CPU (a node's torch venv is some 24,000 files): three node trees at once
    took 6-8 s where one after the other took 20-27 s on the 2-core machine (docs/make-run.md)."""
    folder = Path(path) / "nodes"
    children = folder.iterdir() if folder.is_dir() else ()
    nodes = sorted(p for p in children if p.is_dir() and not p.is_symlink())
    if nodes:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(nodes), 16)) as pool:
            list(pool.map(shutil.rmtree, nodes))
    shutil.rmtree(path)


def link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def is_mountpoint(path: Path) -> bool:
    target = str(Path(path).resolve())
    with open("/proc/self/mountinfo") as fh:
        return any(line.split()[4] == target for line in fh)


def resolve_v4(host: str):
    """IPv4 addresses host resolves to through this machine's resolver (getent ahostsv4)."""
    proc = run(["getent", "ahostsv4", host], check=False)
    if proc.returncode != 0:
        raise TestbedError(f"cannot resolve {host} on this machine (getent ahostsv4 {host} failed)")
    return sorted({line.split()[0] for line in proc.stdout.splitlines() if line.strip()})


def _cgroup_hierarchies():
    """(mount point, our path in it) of the hierarchies systemd uses: name=systemd (v1) and v2."""
    mounts = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            pre, _, post = line.partition(" - ")
            fstype, _src, opts = [*post.split(), "", "", ""][:3]
            point = pre.split()[4]
            if fstype == "cgroup2":
                mounts.setdefault("", point)
            elif fstype == "cgroup" and "name=systemd" in opts.split(","):
                mounts["name=systemd"] = point
    out = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _num, controllers, path = line.split(":", 2)
        if controllers in mounts:
            out.append((mounts[controllers], path))
    return out


def make_node_cgroups(machine: str):
    """A cgroup of its own for one node, in each hierarchy systemd uses.

    systemd-nspawn --keep-unit (needed without a host systemd) runs the container in the caller's
    cgroup: without this, every node's systemd would manage the SAME .../payload/system.slice tree
    and nodes would remove each other's unit cgroups while booting ("Failed to attach to cgroup").
    Returns the cgroup directories made (to move the nspawn process into and to remove later)."""
    made = []
    for mount, path in _cgroup_hierarchies():
        cg = Path(mount) / path.lstrip("/") / "wireup-testbed" / machine
        try:
            cg.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        made.append(str(cg))
    return made


def enter_cgroups(dirs):
    """preexec_fn: move the calling (child) process into dirs, before it execs."""

    def move():
        for cg in dirs:
            with contextlib.suppress(OSError), open(Path(cg) / "cgroup.procs", "w") as fh:
                fh.write("0\n")

    return move


def remove_cgroups(dirs):
    """rmdir the node's cgroups, deepest first (nspawn leaves supervisor/ and payload/ below)."""
    for top in dirs or []:
        root = Path(top)
        if not root.is_dir():
            continue
        for sub in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            root.rmdir()
