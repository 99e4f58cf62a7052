"""The NVIDIA driver role's plan: every decision nvidia_driver makes, as pure functions.

Node facts (preflight's ``wireup_node``), the installed packages (dpkg-query, parse_dpkg_status) and the
role's variables in; one plan out: packages to remove, install and hold, the branch lock (wireup's
apt pin file, or NVIDIA's pinning package), services, the reboot, Secure Boot's verdict and the
one-line report. No Ansible imports; the ``wireup_driver`` filter wraps these and
tests/unit/test_nvidia_driver.py pins every choice. Bad input raises ``DriverError`` whose message names
the variable and the fix.

Package names, as NVIDIA's driver installation guide ("Recent updates", "Version locking") and its
CUDA repository name them (sources in roles/nvidia_driver/README.md):

- Up to branch 580 (``pin-file`` era): the branch is in the metapackage's name:
  ``nvidia-driver-<branch>-open`` (Ubuntu, open module), ``nvidia-open-<branch>`` (Debian, open),
  ``cuda-drivers-<branch>`` (proprietary); wireup locks the branch with its own apt preferences
  file (``Pin: version <branch>.*``).
- From branch 590 (``pinning-package`` era): NVIDIA drops the branch from the Ubuntu names
  (``nvidia-driver-580-open`` -> ``nvidia-driver-open``, ``nvidia-dkms-580-open`` ->
  ``nvidia-dkms-open``, ``cuda-drivers-580`` removed) and locks a branch or a version with the
  pinning packages ``nvidia-driver-pinning-<branch>`` / ``nvidia-driver-pinning-<version>``,
  installed before the driver. The metapackages are ``nvidia-open`` (open) and ``cuda-drivers``
  (proprietary) on Debian and Ubuntu alike; wireup's pin file is removed (never both).
- Fabric Manager: NVIDIA's repository ships the unversioned ``nvidia-fabricmanager`` from branch
  580 on (``nvidia-fabricmanager-580`` is only a virtual name there); older branches and Ubuntu's
  archive use ``nvidia-fabricmanager-<branch>``. It must be the driver's exact version.
- ``nvidia_driver_source: distro`` (Ubuntu's archive: ``nvidia-driver-<branch>-server[-open]``)
  keeps branch names in every era and has no pinning packages: wireup's pin file locks it.
"""

from __future__ import annotations

import re

from .apt import PackageError, check_distro, dpkg_query_argv, require_str, upstream_version

# THE era boundary: from this branch on, NVIDIA's repository locks branches with pinning packages
# and drops the branch from package names.
PINNING_PACKAGES_FROM = 590
# First branch whose NVIDIA-repository Fabric Manager package is the unversioned name.
FABRICMANAGER_UNVERSIONED_FROM = 580
FLAVORS = ("open", "proprietary")
SOURCES = ("cuda", "distro")
FABRICMANAGER_CHOICES = ("auto", "always", "never")
PIN_FILE = "/etc/apt/preferences.d/wireup-nvidia-driver.pref"
# Packages wireup's pin file covers: everything NVIDIA versions with the driver.
PIN_PACKAGES = ("nvidia-*", "libnvidia-*", "cuda-drivers*", "xserver-xorg-video-nvidia*", "libxnvctrl*")
PINNING_PREFIX = "nvidia-driver-pinning-"
MOK_KEY = "/var/lib/dkms/mok.pub"

_BRANCH_RE = re.compile(r"\d{3}")
_VERSION_RE = re.compile(r"(\d{3})\.\d+(?:\.\d+)?")
# What a branch, era or flavour switch removes when the plan does not install it: metapackages with
# a branch in their name, Fabric Manager's branch-named form, and pinning packages.
_BRANCH_NAMED_RE = re.compile(
    r"(nvidia-driver-\d{3}-open|nvidia-driver-\d{3}-server(-open)?|nvidia-open-\d{3}|cuda-drivers-\d{3}"
    r"|nvidia-fabricmanager-\d{3}|nvidia-driver-pinning-[\d.]+)"
)
# The unversioned metapackages (590 on) go only when they carry another branch: up to 580 they may
# be what a branch-named metapackage depends on.
UNVERSIONED_METAPACKAGES = ("nvidia-open", "cuda-drivers")


class DriverError(PackageError):
    """Bad input: the message names the variable and the fix."""


def check_branch(branch) -> str:
    require_str("nvidia_driver_branch", branch, '"580"')
    if not _BRANCH_RE.fullmatch(branch):
        raise DriverError(
            f'nvidia_driver_branch={branch!r} is malformed: expected three digits such as "580"'
        )
    return branch


def era(branch, source: str = "cuda") -> str:
    """'pin-file' (wireup's apt preferences file) or 'pinning-package' (NVIDIA's, from 590)."""
    check_branch(branch)
    if source == "cuda" and int(branch) >= PINNING_PACKAGES_FROM:
        return "pinning-package"
    return "pin-file"


def kernel_headers_package(kernel_release) -> str:
    """Headers for the running kernel: 'linux-headers-<uname -r>' on Debian and Ubuntu alike."""
    require_str("wireup_node.kernel", kernel_release, '"6.1.0-26-amd64"')
    if not re.fullmatch(r"\d+\.\d+[\w.+~-]*", kernel_release):
        raise DriverError(
            f"wireup_node.kernel={kernel_release!r} is not a kernel release (uname -r): rerun preflight, "
            f"or set nvidia_driver_kernel_headers: false and install the headers yourself"
        )
    return f"linux-headers-{kernel_release}"


def packages_for(branch, flavor: str, distro: str, source: str = "cuda", version="") -> dict:
    """Package names of a branch: metapackage(s), Fabric Manager, and the lock (pin file or pinning
    package). ``version``: an exact upstream version within the branch ("580.95.05") or ""."""
    check_branch(branch)
    check_distro(distro)
    if flavor not in FLAVORS:
        raise DriverError(
            f"nvidia_driver_flavor={flavor!r} is not one of {', '.join(FLAVORS)}: use open "
            f"(Turing and newer, required for Blackwell) or proprietary"
        )
    if source not in SOURCES:
        raise DriverError(
            f"nvidia_driver_source={source!r} is not one of {', '.join(SOURCES)}: cuda installs from "
            f"NVIDIA's CUDA repository (cuda_repo), distro from Ubuntu's archive"
        )
    require_str("nvidia_driver_version", version, '"580.95.05"')
    if version:
        match = _VERSION_RE.fullmatch(version)
        if not match or match.group(1) != branch:
            raise DriverError(
                f"nvidia_driver_version={version!r} is not a version of branch "
                f"nvidia_driver_branch={branch!r}: "
                f'use "{branch}.<minor>.<patch>" or "" for the newest'
            )
    debian = distro.startswith("debian")
    lock = era(branch, source)
    if source == "distro":
        if debian:
            raise DriverError(
                f"nvidia_driver_source=distro on {distro}: Debian's archive has no branch-pinned driver "
                f"packages; set nvidia_driver_source: cuda (NVIDIA's repository, cuda_repo role)"
            )
        names = [f"nvidia-driver-{branch}-server" + ("-open" if flavor == "open" else "")]
        fabricmanager = f"nvidia-fabricmanager-{branch}"
    elif lock == "pinning-package":
        names = ["nvidia-open" if flavor == "open" else "cuda-drivers"]
        fabricmanager = "nvidia-fabricmanager"
    else:
        if flavor == "open":
            names = [f"nvidia-open-{branch}" if debian else f"nvidia-driver-{branch}-open"]
        else:
            names = [f"cuda-drivers-{branch}"]
        unversioned = int(branch) >= FABRICMANAGER_UNVERSIONED_FROM
        fabricmanager = "nvidia-fabricmanager" if unversioned else f"nvidia-fabricmanager-{branch}"
    return {
        "era": lock,
        "names": names,
        "fabricmanager": fabricmanager,
        "pinning_package": (PINNING_PREFIX + (version or branch)) if lock == "pinning-package" else "",
        "pin_file": {"packages": list(PIN_PACKAGES), "version": f"{version}-*" if version else f"{branch}.*"}
        if lock == "pin-file"
        else None,
    }


def _installed(packages) -> dict:
    """packages.parse_dpkg_status' {name: {version, held}} (the role's read), or package_facts'
    ``packages`` ({name: [{version: ...}, ...]}) -> {name: deb version}."""
    found = {}
    for name, entries in (packages or {}).items():
        if isinstance(entries, dict):
            found[name] = str(entries.get("version", ""))
        elif isinstance(entries, list) and entries:
            found[name] = str(entries[0].get("version", ""))
        elif isinstance(entries, str):
            found[name] = entries
    return found


def _of(version: str, branch: str, exact: str) -> bool:
    upstream = upstream_version(version)
    return upstream == exact if exact else upstream.startswith(branch + ".")


# dpkg's NVIDIA packages and kernel headers: what plan() reads (as parse_dpkg_status reads it).
DPKG_READ = dpkg_query_argv(
    "nvidia-*", "libnvidia-*", "cuda-drivers*", "xserver-xorg-video-nvidia*", "libxnvctrl*", "linux-headers-*"
)
SECURE_BOOT_READS = [["modinfo", "-F", "signer", "nvidia"], ["mokutil", "--test-key", MOK_KEY]]


def reads(node, secure_boot_check=True) -> list:
    """The role's one read of the node, argv per command: dpkg's packages, then (Secure Boot on and
    nvidia_driver_secure_boot_check) the two probes secure_boot_verdict judges."""
    probes = (node or {}).get("secure_boot") is True and bool(secure_boot_check)
    return [DPKG_READ, *(SECURE_BOOT_READS if probes else [])]


def secure_boot_verdict(probes) -> str:
    """'' when a DKMS-built module will load under Secure Boot, else why not. ``probes``: the two
    command results [modinfo -F signer nvidia, mokutil --test-key MOK_KEY] ({rc, stdout, stderr})."""
    modinfo, mokutil = [*list(probes or []), {}, {}][:2]
    if modinfo.get("rc") == 0:
        if str(modinfo.get("stdout", "")).strip():
            return ""
        return (
            "Secure Boot is on and the nvidia module is unsigned, so the kernel will not load it. Enroll "
            f"the DKMS signing key (mokutil --import {MOK_KEY}, then confirm in the MOK manager at the next "
            "boot) and rebuild the module (dkms autoinstall), or turn Secure Boot off in the firmware; "
            "then rerun"
        )
    said = (str(mokutil.get("stdout", "")) + str(mokutil.get("stderr", "") or mokutil.get("msg", ""))).strip()
    if "is already enrolled" in said:
        return ""
    return (
        f"Secure Boot is on and no DKMS signing key is enrolled (mokutil --test-key {MOK_KEY}: "
        f"{said or 'no answer'}), so a DKMS-built nvidia module would be unsigned and refused. Install "
        f"dkms, run `mokutil --import {MOK_KEY}`, confirm the key in the MOK manager at the next boot, "
        "then rerun; or turn Secure Boot off in the firmware; or set nvidia_driver_secure_boot_check: "
        "false if you sign modules yourself"
    )


def plan(
    node: dict,
    packages=None,
    *,
    branch="580",
    flavor="open",
    source="cuda",
    version="",
    fabricmanager="auto",
    persistenced=True,
    kernel_headers=True,
    reboot=False,
    secure_boot_check=True,
    secure_boot_probes=None,
    check_mode=False,
    host="this node",
) -> dict:
    """Every decision of the nvidia_driver role for one node.

    ``node``: preflight's wireup_node; ``packages``: the installed ones (parse_dpkg_status' dict).
    Returns ``manage`` (False: GPU-less node or a driver the image brings, left alone), the lock
    (``pin_file`` or ``pinning_package``), ``remove`` (other branches'/eras' metapackages and pinning
    packages), ``install`` (specs still missing; empty on a converged node), ``names`` (the driver
    metapackages, asked of apt before installing), ``fabricmanager`` ({name, version} or None),
    ``hold``, ``services``, ``reboot`` and ``summary`` (the one-line report), ``error``.
    """
    if fabricmanager not in FABRICMANAGER_CHOICES:
        raise DriverError(
            f"nvidia_driver_fabricmanager={fabricmanager!r} is not one of "
            f"{', '.join(FABRICMANAGER_CHOICES)}: "
            "auto installs it where preflight found NVSwitches"
        )
    gpu = node.get("gpu") or {}
    prefix = f"nvidia_driver on {host}: "
    base = {
        "manage": False,
        "era": "",
        "names": [],
        "pin_file": None,
        "pinning_package": "",
        "remove": [],
        "install": [],
        "fabricmanager": None,
        "hold": [],
        "services": [],
        "may_reboot": False,
        "error": "",
        "summary": "",
        "reboot": {"changed": "", "unchanged": ""},
        "pin_file_removed": "",
    }
    if not gpu.get("present"):
        return {**base, "summary": prefix + "skipped: no NVIDIA GPU found (PCI vendor 10de)"}
    pkgs = packages_for(branch, flavor, node.get("cuda_repo_distro", ""), source, version)
    names = pkgs["names"]
    installed = _installed(packages)
    driver = node.get("driver") or {}
    have_driver = all(n in installed and _of(installed[n], branch, version) for n in names)
    running = bool(driver.get("loaded")) and driver.get("branch") == branch
    if running and not any(n in installed for n in names):
        # A node image can bring its own driver (a mount, a .run install, another package):
        # installing packages over it would break it.
        module = driver.get("kernel_module", "")
        return {
            **base,
            "summary": prefix
            + f"driver {driver.get('version', '')} ({module} module) already running, branch {branch}, "
            f"not installed from {', '.join(names)}: left alone"
            + ("" if module == flavor else f" (nvidia_driver_flavor is {flavor})"),
        }
    error = ""
    if node.get("secure_boot") is True and secure_boot_check:
        error = secure_boot_verdict(secure_boot_probes)
        error = f"{host}: {error}" if error else ""

    wanted = {*names, pkgs["fabricmanager"], pkgs["pinning_package"]}
    remove = sorted(
        n
        for n, v in installed.items()
        if n not in wanted
        and (_BRANCH_NAMED_RE.fullmatch(n) or (n in UNVERSIONED_METAPACKAGES and not _of(v, branch, "")))
    )
    install = []
    if pkgs["pinning_package"] and pkgs["pinning_package"] not in installed:
        install.append(pkgs["pinning_package"])
    if kernel_headers:
        headers = kernel_headers_package(node.get("kernel", ""))
        if headers not in installed:
            install.append(headers)
    if not have_driver:
        install += names
    fm_wanted = fabricmanager == "always" or (
        fabricmanager == "auto" and int(gpu.get("nvswitch_count") or 0) > 0
    )
    fm = None
    if fm_wanted:
        fm_name = pkgs["fabricmanager"]
        # Exactly the driver's version: known now when the driver is installed (or pinned exactly),
        # else read from apt's candidate when installing (install_specs).
        fm_version = version or (upstream_version(installed[names[0]]) if have_driver else "")
        fm = {"name": fm_name, "version": fm_version}
        if not (fm_name in installed and fm_version and upstream_version(installed[fm_name]) == fm_version):
            install.append(fm_name)
    hold = names + ([fm["name"]] if fm else [])
    if check_mode:  # dpkg holds only what it has: in --check, what is not installed yet is not held either
        hold = [n for n in hold if n in installed]
    systemd = node.get("service_mgr") == "systemd"
    services = []
    # In --check before the driver is installed the units do not exist yet: say so instead.
    if systemd and (have_driver or not check_mode):
        services = (["nvidia-persistenced"] if persistenced else []) + (
            ["nvidia-fabricmanager"] if fm else []
        )

    would = "would " if check_mode else ""
    parts = [f"branch {branch} ({', '.join(names)}"]
    parts[0] += (
        f", locked by {pkgs['pinning_package']})" if pkgs["pinning_package"] else f", pinned by {PIN_FILE})"
    )
    if remove:
        parts.append(f"{would}remove {', '.join(remove)}")
    if install:
        parts.append(f"{would}install {', '.join(install)}")
    if not remove and not install:
        parts.append("installed")
    if check_mode and not have_driver and services == [] and systemd:
        parts.append("would enable its services once installed")
    is_local = bool(node.get("is_local"))
    may_reboot = bool(reboot) and not is_local
    how = (
        "this is the control node: reboot it yourself"
        if is_local
        else "rerun with -e nvidia_driver_reboot=true, or reboot it yourself"
    )
    changed_text = (
        f"{would}reboot to load branch {branch}"
        if may_reboot
        else f"reboot required to load driver branch {branch} ({how})"
    )
    unchanged_text = (
        f"reboot required to load driver branch {branch} ({how})" if have_driver and not running else ""
    )
    return {
        **base,
        "manage": True,
        "era": pkgs["era"],
        "names": names,
        "pin_file": pkgs["pin_file"],
        "pinning_package": pkgs["pinning_package"],
        "remove": remove,
        "install": install,
        "fabricmanager": fm,
        "hold": hold,
        "services": services,
        "may_reboot": may_reboot,
        "error": error,
        "summary": prefix + "; ".join(parts),
        "reboot": {"changed": changed_text, "unchanged": unchanged_text},
        "pin_file_removed": (
            f"wireup's pin file {PIN_FILE} {'would be ' if check_mode else ''}removed "
            f"({pkgs['pinning_package']} locks the branch)"
        )
        if pkgs["pinning_package"]
        else "",
    }


def _candidates(apt_show_text: str) -> dict:
    """`apt-cache show --no-all-versions NAMES` -> {package: version} (first stanza per package)."""
    found, name = {}, None
    for line in str(apt_show_text or "").splitlines():
        if line.startswith("Package:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("Version:") and name and name not in found:
            found[name] = line.split(":", 1)[1].strip()
    return found


def install_specs(
    the_plan: dict,
    apt_show_text: str,
    apt_rc: int = 0,
    apt_err: str = "",
    *,
    check_mode=False,
    lock_ready=True,
    branch="580",
    host="this node",
) -> dict:
    """The apt specs of the plan's ``install``, with the driver and Fabric Manager at apt's candidate
    version of the driver (under the branch lock) so both are the same version.
    ``lock_ready``: the pin file was already as planned (in --check an unwritten pin file, like a
    pinning package not installed yet, leaves apt's candidates unlocked: the versions are unknown and
    apt's own simulation would fail on dependencies of another branch).
    Returns {specs, error, message, driver}: ``error`` stops the run, ``message`` is what --check says
    instead, ``driver`` whether the driver packages themselves are among the specs."""
    names = the_plan["names"]
    candidates = _candidates(apt_show_text)
    version = candidates.get(names[0], "") if apt_rc == 0 else ""
    of_branch = upstream_version(version).startswith(branch + ".")
    pending = [p for p in the_plan["install"] if p != the_plan.get("pinning_package")]
    fm = the_plan.get("fabricmanager") or {}
    if not set(names) & set(pending) and (not fm or fm.get("version")):
        # The driver is in place: only headers or Fabric Manager at the installed driver's version.
        return {
            "specs": [f"{p}={fm['version']}-*" if fm and p == fm["name"] else p for p in pending],
            "error": "",
            "message": "",
            "driver": False,
        }
    lock = the_plan.get("pinning_package") or "the pin file"
    unlocked = not lock_ready or the_plan.get("pinning_package") in the_plan["install"]
    if check_mode and unlocked:
        return {
            "specs": [],
            "error": "",
            "message": the_plan["summary"]
            + f"; the exact version of branch {branch} once {lock} is in place",
            "driver": False,
        }
    if not version or not of_branch:
        offered = (
            f"apt offers {names[0]} {version}, not of branch {branch}"
            if version
            else f"{', '.join(names)} not available from {host}'s apt sources "
            f"(apt said: {str(apt_err).strip()})"
        )
        if check_mode:
            return {
                "specs": [],
                "error": "",
                "message": the_plan["summary"] + f"; the exact version of branch {branch} once {lock} and "
                f"NVIDIA's repository are in place ({offered} now)",
                "driver": False,
            }
        return {
            "specs": [],
            "error": f"{offered}: check nvidia_driver_branch / nvidia_driver_version / "
            "nvidia_driver_flavor and, "
            "with nvidia_driver_source: cuda, cuda_repo_base_url (cuda_repo runs before nvidia_driver in "
            "site.yml; with --tags, add cuda_repo)",
            "message": "",
            "driver": False,
        }
    fm_version = fm.get("version") or upstream_version(version)
    specs = []
    for item in pending:
        if item in names:
            specs.append(f"{item}={version}")
        elif fm and item == fm.get("name"):
            specs.append(f"{item}={fm_version}-*")
        else:
            specs.append(item)
    # A reboot follows a change of the driver itself (not of headers or Fabric Manager alone).
    return {"specs": specs, "error": "", "message": "", "driver": True}


def report(the_plan: dict, driver_changed: bool = False, pin_file_removed: bool = False, note="") -> str:
    """The run's one line for a node, after the tasks ran (``note``: install_specs' --check message,
    which then replaces the plan's summary)."""
    line = note or the_plan["summary"]
    if pin_file_removed and the_plan.get("pin_file_removed"):
        line += "; " + the_plan["pin_file_removed"]
    extra = the_plan["reboot"]["changed"] if driver_changed else the_plan["reboot"]["unchanged"]
    return line + ("; " + extra if extra else "")
