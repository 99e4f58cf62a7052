"""What the nodes share, built once per machine and cached: the golden root filesystem and the
torch wheelhouse. Both live under CACHE_DIR, are built into a temporary folder under a flock and
renamed into place, so parallel builders (other testbeds, other checkouts) never see half a tree."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from .system import CACHE_DIR, TestbedError, flock, run

REPO_ROOT = Path(__file__).resolve().parents[2]
# Bump when the golden tree's post-processing below changes (the key then changes too).
GOLDEN_RECIPE = 4
# Debian suites a node can run: Debian 12 (the default, as this machine and CI) and Debian 13.
SUITE = "bookworm"
SUITES = ("bookworm", "trixie")
# Debian 12 packages every node gets. Ansible builtin modules: apt (python3-apt), pip
# (python3-packaging), deb822_repository (python3-debian), apt keys (gnupg), become (sudo, acl),
# unarchive (unzip, xz-utils); systemd boots the node so service tasks run for real.
PACKAGES = (
    "python3",
    "python3-venv",
    "python3-apt",
    "python3-packaging",
    "python3-debian",
    "openssh-server",
    "sudo",
    "acl",
    "ca-certificates",
    "procps",
    "netbase",
    "iproute2",
    "systemd",
    "systemd-sysv",
    "dbus",
    "gnupg",
    "debian-archive-keyring",
    "unzip",
    "xz-utils",
    "kmod",
    "pciutils",
    "less",
    # Issue 26: Debian 12's node_exporter, whose textfile collector reads what wireup writes into
    # /var/lib/prometheus/node-exporter. Disabled in the image (_finish_golden): only
    # tests/integration/test_prometheus.py starts it, so other tests' nodes run no exporter.
    "prometheus-node-exporter",
)
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
APT_SOURCES = [
    Path("/etc/apt/sources.list"),
    *sorted(Path("/etc/apt/sources.list.d").glob("*.list")),
    *sorted(Path("/etc/apt/sources.list.d").glob("*.sources")),
]
SSHD_DROPIN = """\
# wireup testbed: root by key only; host key generated per node by the testbed.
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
"""
RESOLV_CONF = """\
# wireup testbed: no DNS server. The registry host names are pinned in /etc/hosts; every other
# name fails at once (the resolver falls back to 127.0.0.1, where nothing listens).
options timeout:1 attempts:1
"""


# --- what this machine's apt and pip use -----------------------------------------------------
def apt_source_files():
    """This machine's active apt source files: {path: text}."""
    return {p: p.read_text() for p in APT_SOURCES if p.is_file() and p.read_text().strip()}


def apt_uris(files=None):
    """URIs used by the active apt sources (deb822 URIs: lines and one-line deb entries)."""
    uris = []
    for path, text in (files or apt_source_files()).items():
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if path.suffix == ".sources" and line.lower().startswith("uris:"):
                uris += line.split(":", 1)[1].split()
            elif path.suffix != ".sources" and line.startswith(("deb ", "deb-src ")):
                uris += [w for w in line.split()[1:] if "://" in w][:1]
    return uris


def debian_mirror():
    """The Debian archive URL this machine's apt uses (for mmdebstrap)."""
    for uri in apt_uris():
        if uri.rstrip("/").endswith("/debian"):
            return uri.rstrip("/")
    raise TestbedError(
        "no Debian archive URI (…/debian) in /etc/apt/sources.list*: "
        "set WIREUP_TESTBED_MIRROR=http://HOST/debian"
    )


def pip_settings():
    """This machine's pip config as {key: value} (`pip config list`, env and files merged)."""
    proc = run([sys.executable, "-m", "pip", "config", "list"], check=False)
    settings = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?::env:|global|install|download)\.([\w-]+)='(.*)'$", line.strip())
        if m:
            settings[m.group(1)] = m.group(2)
    return settings


def pip_index_url(settings=None):
    settings = pip_settings() if settings is None else settings
    url = settings.get("index-url", "")
    return url if url.startswith(("http://", "https://")) else "https://pypi.org/simple"


def registry_hosts():
    """Host names the nodes need: the apt sources' hosts and pip's index (and its file host)."""
    hosts = {urlsplit(u).hostname for u in apt_uris()}
    index = urlsplit(pip_index_url()).hostname
    hosts.add(index)
    if index == "pypi.org":
        hosts.add("files.pythonhosted.org")
    return sorted(h for h in hosts if h)


def node_pip_conf(settings=None):
    """/etc/pip.conf for the nodes: this machine's settings that make sense on a node."""
    settings = pip_settings() if settings is None else settings
    lines = ["# wireup testbed: pip settings taken from the control machine's `pip config list`", "[global]"]
    if settings.get("index-url", "").startswith(("http://", "https://")):
        lines.append(f"index-url = {settings['index-url']}")
    if settings.get("cert"):
        lines.append("cert = /etc/ssl/certs/ca-certificates.crt")
    if settings.get("default-timeout"):
        lines.append(f"timeout = {settings['default-timeout']}")
    lines.append("disable-pip-version-check = 1")
    # No bytecode at install time: compiling torch's ~20,000 .py files took 142 s of a 166 s
    # `pip install torch` on the loaded 2-core machine (24 s without), and every testbed node
    # installs torch. Python compiles what a test imports, when it first imports it.
    lines += ["[install]", "no-compile = true"]
    return "\n".join(lines) + "\n"


# --- golden root filesystem --------------------------------------------------------------------
def check_suite(suite: str) -> str:
    if suite not in SUITES:
        raise TestbedError(
            f"Debian suite {suite!r} is not one the testbed builds: use one of {', '.join(SUITES)}"
        )
    return suite


def host_codename() -> str:
    """This machine's Debian codename (its apt sources name it)."""
    text = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    m = re.search(r"^VERSION_CODENAME=\"?(\w+)", text, re.M)
    return m.group(1) if m else SUITE


def node_apt_sources(suite: str, files=None) -> dict:
    """This machine's apt sources for a node of ``suite``: the Debian archive's entries name the
    node's suite (bookworm-updates -> trixie-updates, ...); other sources stay as they are."""
    host = host_codename()
    out = {}
    for path, text in (files or apt_source_files()).items():
        debian = any(u.rstrip("/").endswith(("/debian", "/debian-security")) for u in apt_uris({path: text}))
        out[path] = (
            re.sub(rf"\b{host}(?=[-\s/]|$)", suite, text, flags=re.M) if debian and suite != host else text
        )
    return out


def golden_key(suite: str = SUITE):
    """Changes whenever the package list, mirror, recipe, CA certificates or apt sources change."""
    h = hashlib.sha256()
    h.update(json.dumps([GOLDEN_RECIPE, suite, sorted(PACKAGES), debian_mirror(), node_pip_conf()]).encode())
    for path in sorted(HOST_CA_DIR.glob("*.crt")) + sorted(apt_source_files()):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _write(root: Path, rel: str, text: str, mode=0o644):
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(text)
    path.chmod(mode)


def _finish_golden(root: Path, suite: str = SUITE):
    """Post-process a fresh mmdebstrap tree: sshd, networkd, apt/pip config, CA certs, no DNS."""
    for key in root.glob("etc/ssh/ssh_host_*"):
        key.unlink()
    _write(root, "/etc/ssh/sshd_config.d/10-wireup-testbed.conf", SSHD_DROPIN)
    run(["chroot", root, "systemctl", "enable", "systemd-networkd.service", "ssh.service"])
    # node_exporter (and the collector timers its package may bring) start only where a test asks.
    exporter = [u.name for u in (root / "lib/systemd/system").glob("prometheus-node-exporter*")]
    if exporter:
        run(["chroot", root, "systemctl", "disable", *sorted(exporter)])
    # Nothing on a testbed node waits for "network online"; a console getty only slows shutdown.
    run(
        [
            "chroot",
            root,
            "systemctl",
            "mask",
            "systemd-networkd-wait-online.service",
            "console-getty.service",
            "getty@tty1.service",
        ]
    )
    # Apt: exactly this machine's sources (same archive host names, pinned in each node's /etc/hosts).
    for old in [root / "etc/apt/sources.list", *root.glob("etc/apt/sources.list.d/*")]:
        if old.is_file():
            old.unlink()
    for path, text in node_apt_sources(suite).items():
        _write(root, str(path), text)
    _write(root, "/etc/pip.conf", node_pip_conf())
    # The registries are reached through this machine's TLS-inspecting front: trust its CAs.
    dest = root / "usr/local/share/ca-certificates"
    dest.mkdir(parents=True, exist_ok=True)
    for crt in sorted(HOST_CA_DIR.glob("*.crt")):
        shutil.copy2(crt, dest / crt.name)
    run(["chroot", root, "update-ca-certificates"])
    _write(root, "/etc/resolv.conf", RESOLV_CONF)
    _write(root, "/etc/machine-id", "")
    _write(root, "/etc/hostname", "localhost\n")
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)


def golden_rootfs(log=print, suite: str = SUITE) -> Path:
    """Path of the golden tree of a Debian suite (bookworm: Debian 12, trixie: Debian 13) for the
    current key; built (33 s or so) if missing."""
    key = golden_key(check_suite(suite))
    final = CACHE_DIR / f"golden-{suite}-{key}"
    with flock(CACHE_DIR / "golden.lock"):
        if (final / ".wireup-complete").exists():
            return final
        tmp = CACHE_DIR / f"golden-{suite}-{key}.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)  # left by a crashed build (we hold the lock: nobody else builds it)
        t0 = time.monotonic()
        log(f"building golden rootfs {final} with mmdebstrap (once per machine)…")
        run(
            [
                "mmdebstrap",
                "--variant=apt",
                "--quiet",
                f"--include={','.join(PACKAGES)}",
                suite,
                tmp,
                debian_mirror(),
            ]
        )
        _finish_golden(tmp, suite)
        (tmp / ".wireup-complete").write_text(json.dumps({"key": key, "packages": PACKAGES}) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        log(f"golden rootfs built in {time.monotonic() - t0:.0f} s")
        _prune_goldens(keep=final, suite=suite, log=log)
        return final


def _prune_goldens(keep: Path, suite: str = SUITE, log=print):
    """Remove golden trees of earlier keys that no running node has mounted (300 MB each)."""
    mounts = Path("/proc/self/mountinfo").read_text()
    for old in CACHE_DIR.glob(f"golden-{suite}-*"):
        if (
            old != keep
            and old.is_dir()
            and f"lowerdir={old}," not in mounts
            and f"lowerdir={old} " not in mounts
        ):
            log(f"removing unused golden rootfs {old}")
            shutil.rmtree(old, ignore_errors=True)


# --- torch wheelhouse --------------------------------------------------------------------------
def torch_pin():
    """pytorch_venv_torch_version from group_vars/all.yml (so the served wheel matches the pin)."""
    text = (REPO_ROOT / "group_vars/all.yml").read_text()
    m = re.search(r"^pytorch_venv_torch_version:\s*[\"']?([\w.+-]+)", text, re.M)
    if not m:
        raise TestbedError("pytorch_venv_torch_version is missing from group_vars/all.yml")
    return m.group(1)


def torch_wheel() -> Path:
    override = os.environ.get("WIREUP_TESTBED_TORCH_WHEEL")
    pattern = override or f"/opt/wheels/torch-{torch_pin()}+cpu-cp311-*.whl"
    found = sorted(glob.glob(pattern))
    if not found:
        raise TestbedError(
            f"no torch CPU wheel matches {pattern}: put one there or set "
            "WIREUP_TESTBED_TORCH_WHEEL=/path/to/torch-…-cp311-…whl"
        )
    return Path(found[-1])


def extra_packages() -> list[str]:
    """pytorch_venv_extra_packages from the role's defaults: the venv installs them from the
    wheelhouse too (offline install), so the testbed serves them beside torch."""
    text = (REPO_ROOT / "roles/pytorch_venv/defaults/main.yml").read_text()
    m = re.search(r"^pytorch_venv_extra_packages:\n((?:\s+- .+\n)+)", text, re.M)
    return re.findall(r"^\s+- ['\"]?([^'\"\s#]+)", m.group(1), re.M) if m else []


def wheelhouse(log=print) -> Path:
    """Cached folder with the torch CPU wheel, the venv's extra packages and their dependencies
    for CPython 3.11 (the nodes')."""
    wheel = torch_wheel()
    extras = extra_packages()
    key = hashlib.sha256(f"{wheel.name}:{wheel.stat().st_size}:{extras}".encode()).hexdigest()[:16]
    final = CACHE_DIR / "wheels" / key
    with flock(CACHE_DIR / "wheels.lock"):
        if (final / ".wireup-complete").exists():
            return final
        tmp = final.with_name(key + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        t0 = time.monotonic()
        log(f"downloading the dependencies of {wheel.name} into {final} (once per machine)…")
        shutil.copy2(wheel, tmp / wheel.name)
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "-d",
                tmp,
                "--only-binary=:all:",
                "--python-version",
                "3.11",
                "--implementation",
                "cp",
                "--abi",
                "cp311",
                "--platform",
                "manylinux_2_28_x86_64",
                "--platform",
                "manylinux_2_17_x86_64",
                "--platform",
                "manylinux2014_x86_64",
                tmp / wheel.name,
                *extras,
            ]
        )
        (tmp / ".wireup-complete").write_text(wheel.name + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        log(f"wheelhouse ready in {time.monotonic() - t0:.0f} s")
        return final


# --- a node's torch venv, made by the role once per machine --------------------------------------
# The integration tests that use torch without testing its installation (launch, Slurm, fabric,
# drift) need it on every node of their testbeds: site.yml's pytorch_venv made it on each, 100-164 s
# per testbed in CI. The first testbed still gets it from the role; its node1's venv is then kept
# here, and a later testbed's nodes get a copy before the role runs (which then finds it complete
# and only verifies it: 13 s for 3 nodes). Tests of the installation itself never use it.
# SEED_LOCK is held while a testbed's role installs the venv that will be kept, so that a testbed
# brought up meanwhile (the other pytest worker's) waits for it instead of installing its own.
TORCH_VENV_RECIPE = 1
SEED_LOCK = CACHE_DIR / "torch-venv-seed.lock"


def torch_venv_key(golden: Path, base: str) -> str:
    """Changes with the node's image, the wheels served, the venv's path and the role's files."""
    h = hashlib.sha256()
    wheel = torch_wheel()
    h.update(json.dumps([TORCH_VENV_RECIPE, golden.name, base, wheel.name, wheel.stat().st_size]).encode())
    h.update(json.dumps(extra_packages()).encode())
    for path in [*sorted((REPO_ROOT / "roles/pytorch_venv").rglob("*")), REPO_ROOT / "group_vars/all.yml"]:
        if path.is_file():
            h.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def torch_venv_cache(golden: Path, base: str) -> Path:
    return CACHE_DIR / f"torch-venv-{torch_venv_key(golden, base)}"


def copy_tree(src: Path, dest: Path):
    """cp -a (owners, modes, links kept), sharing blocks where the filesystem can."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    run(["cp", "-a", "--reflink=auto", src, dest])


def keep_torch_venv(venv: Path, golden: Path, base: str, log=print) -> Path:
    """Keep a copy of a venv the role made (a node's, seen from this machine) for later testbeds;
    renamed into place complete, the earlier keys' copies removed."""
    final = torch_venv_cache(golden, base)
    with flock(CACHE_DIR / "torch-venv.lock"):
        if (final / ".wireup-complete").exists():
            return final
        tmp = final.with_name(final.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        copy_tree(venv, tmp / "venv")
        (tmp / ".wireup-complete").write_text(json.dumps({"base": base, "golden": golden.name}) + "\n")
        tmp.rename(final)
        for old in CACHE_DIR.glob("torch-venv-*"):
            if old != final and old.is_dir():
                log(f"removing the earlier torch venv {old}")
                shutil.rmtree(old, ignore_errors=True)
        log(f"kept the role's torch venv in {final} for later testbeds")
        return final


def copy_kept_torch_venv(golden: Path, base: str, dest: Path) -> bool:
    """Copy the venv kept for this image, path and role to dest (a node's, seen from this
    machine); False where none is kept. Under the lock that removes earlier keys' copies."""
    final = torch_venv_cache(golden, base)
    with flock(CACHE_DIR / "torch-venv.lock"):
        if not (final / ".wireup-complete").exists():
            return False
        copy_tree(final / "venv", dest)
        return True
