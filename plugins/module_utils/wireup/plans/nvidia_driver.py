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
from dataclasses import dataclass
from typing import TypedDict

from ..core.apt import PackageError, check_distro, dpkg_query_argv, require_str, upstream_version
from ..core.checks import PIN_FORMATS

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

_BRANCH_RE = re.compile(PIN_FORMATS["nvidia_driver_branch"][0])
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


def _check_choices(flavor, source, version, branch) -> None:
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
    match = _VERSION_RE.fullmatch(version) if version else None
    if version and (not match or match.group(1) != branch):
        raise DriverError(
            f"nvidia_driver_version={version!r} is not a version of branch nvidia_driver_branch={branch!r}: "
            f'use "{branch}.<minor>.<patch>" or "" for the newest'
        )


def _names(branch, flavor, distro, source, lock) -> tuple[list[str], str]:
    """(the driver metapackages, Fabric Manager's package) of a branch in its era."""
    debian = distro.startswith("debian")
    if source == "distro":
        if debian:
            raise DriverError(
                f"nvidia_driver_source=distro on {distro}: Debian's archive has no branch-pinned driver "
                f"packages; set nvidia_driver_source: cuda (NVIDIA's repository, cuda_repo role)"
            )
        return [f"nvidia-driver-{branch}-server" + ("-open" if flavor == "open" else "")], (
            f"nvidia-fabricmanager-{branch}"
        )
    if lock == "pinning-package":
        return ["nvidia-open" if flavor == "open" else "cuda-drivers"], "nvidia-fabricmanager"
    if flavor == "open":
        names = [f"nvidia-open-{branch}" if debian else f"nvidia-driver-{branch}-open"]
    else:
        names = [f"cuda-drivers-{branch}"]
    unversioned = int(branch) >= FABRICMANAGER_UNVERSIONED_FROM
    return names, "nvidia-fabricmanager" if unversioned else f"nvidia-fabricmanager-{branch}"


def packages_for(branch, flavor: str, distro: str, source: str = "cuda", version="") -> dict:
    """Package names of a branch: metapackage(s), Fabric Manager, and the lock (pin file or pinning
    package). ``version``: an exact upstream version within the branch ("580.95.05") or ""."""
    check_branch(branch)
    check_distro(distro)
    _check_choices(flavor, source, version, branch)
    lock = era(branch, source)
    names, fabricmanager = _names(branch, flavor, distro, source, lock)
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
    """apt.parse_dpkg_status' {name: {version, held}} (the role's read) -> {name: deb version}."""
    return {name: str((entry or {}).get("version", "")) for name, entry in (packages or {}).items()}


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


@dataclass(frozen=True)
class Settings:
    """The role's variables the plan reads (roles/nvidia_driver/tasks/10-plan.yml passes each by
    name), with Ansible's check mode and the inventory name."""

    branch: str = "580"
    flavor: str = "open"
    source: str = "cuda"
    version: str = ""
    fabricmanager: str = "auto"
    persistenced: bool = True
    kernel_headers: bool = True
    reboot: bool = False
    secure_boot_check: bool = True
    check_mode: bool = False
    host: str = "this node"


class PinFile(TypedDict):
    packages: list[str]  # the apt preferences file's Package: patterns
    version: str  # its Pin: version


class FabricManager(TypedDict):
    name: str
    version: str  # the driver's exact upstream version ('' until apt's candidate says it)


class RebootLines(TypedDict):
    changed: str  # the report's last part when the driver changed
    unchanged: str  # ... when it did not ('' when nothing waits for a reboot)


class AptStep(TypedDict):
    name: list[str]
    state: str  # absent or present
    allow_held: bool  # apt's allow_change_held_packages: another branch's held packages go


class DriverPlan(TypedDict):
    """``__nvidia_driver_plan``: what roles/nvidia_driver/tasks and templates read."""

    manage: bool  # False: a GPU-less node, or a driver the image brings (left alone)
    era: str  # pin-file or pinning-package
    names: list[str]  # the driver metapackages (asked of apt before installing)
    pin_file: PinFile | None
    pinning_package: str
    remove: list[str]  # other branches' and eras' packages
    install: list[str]  # what dpkg lacks (empty on a converged node)
    apt_first: list[AptStep]  # before apt is asked for the version: the removals, the pinning package
    stale: list[str]  # wireup's pin file where NVIDIA's pinning package locks the branch
    fabricmanager: FabricManager | None
    hold: list[str]
    services: list[str]
    may_reboot: bool
    error: str  # Secure Boot's verdict: stops before any change
    summary: str
    reboot: RebootLines
    pin_file_removed: str  # the report's part when NVIDIA's pinning package replaced wireup's pin file
    branch: str
    host: str


def _left_alone(s: Settings, summary: str) -> DriverPlan:
    """The plan of a node whose driver the role does not manage."""
    return {
        "manage": False,
        "era": "",
        "names": [],
        "pin_file": None,
        "pinning_package": "",
        "remove": [],
        "install": [],
        "apt_first": [],
        "stale": [],
        "fabricmanager": None,
        "hold": [],
        "services": [],
        "may_reboot": False,
        "error": "",
        "summary": f"nvidia_driver on {s.host}: {summary}",
        "reboot": {"changed": "", "unchanged": ""},
        "pin_file_removed": "",
        "branch": s.branch,
        "host": s.host,
    }


def _image_driver(node: dict, s: Settings, names: list[str], installed: dict) -> str:
    """Why a running driver is left alone ('' when the role manages it): a node image can bring its
    own driver (a mount, a .run install, another package); installing packages over it would break it."""
    driver = node.get("driver") or {}
    running = bool(driver.get("loaded")) and driver.get("branch") == s.branch
    if not running or any(n in installed for n in names):
        return ""
    module = driver.get("kernel_module", "")
    return (
        f"driver {driver.get('version', '')} ({module} module) already running, branch {s.branch}, "
        f"not installed from {', '.join(names)}: left alone"
        + ("" if module == s.flavor else f" (nvidia_driver_flavor is {s.flavor})")
    )


def _to_remove(installed: dict, pkgs: dict, branch: str) -> list[str]:
    """Other branches' and eras' packages: branch-named ones, and the unversioned metapackages when
    they carry another branch (up to 580 they may be what a branch-named metapackage depends on)."""
    wanted = {*pkgs["names"], pkgs["fabricmanager"], pkgs["pinning_package"]}
    return sorted(
        n
        for n, v in installed.items()
        if n not in wanted
        and (_BRANCH_NAMED_RE.fullmatch(n) or (n in UNVERSIONED_METAPACKAGES and not _of(v, branch, "")))
    )


def _fabricmanager(s: Settings, gpu: dict, pkgs: dict, installed: dict, have_driver: bool):
    """({name, version} or None, whether it is to install). Exactly the driver's version: known now
    when the driver is installed (or pinned exactly), else read from apt's candidate (install_specs)."""
    wanted = s.fabricmanager == "always" or (
        s.fabricmanager == "auto" and int(gpu.get("nvswitch_count") or 0) > 0
    )
    if not wanted:
        return None, False
    name, names = pkgs["fabricmanager"], pkgs["names"]
    version = s.version or (upstream_version(installed[names[0]]) if have_driver else "")
    current = name in installed and version and upstream_version(installed[name]) == version
    return {"name": name, "version": version}, not current


def _to_install(s: Settings, node: dict, pkgs: dict, installed: dict, have_driver: bool) -> list[str]:
    """The pinning package (first: apt's candidate is then of the branch), the kernel's headers and
    the driver, each when dpkg lacks it."""
    install = []
    if pkgs["pinning_package"] and pkgs["pinning_package"] not in installed:
        install.append(pkgs["pinning_package"])
    if s.kernel_headers:
        headers = kernel_headers_package(node.get("kernel", ""))
        if headers not in installed:
            install.append(headers)
    return install + ([] if have_driver else list(pkgs["names"]))


def _apt_first(remove: list[str], install: list[str], pinning_package: str) -> list[AptStep]:
    """The apt runs before apt is asked which driver version the lock offers: other branches'
    packages out (held ones too), then the branch's pinning package in (NVIDIA's guide: before the
    driver, so apt's candidate is of the branch)."""
    steps: list[AptStep] = [{"name": remove, "state": "absent", "allow_held": True}] if remove else []
    if pinning_package in install:
        steps.append({"name": [pinning_package], "state": "present", "allow_held": False})
    return steps


def _services(s: Settings, node: dict, have_driver: bool, fm) -> list[str]:
    """The units to enable; in --check before the driver is installed they do not exist yet."""
    if node.get("service_mgr") != "systemd" or not (have_driver or not s.check_mode):
        return []
    return (["nvidia-persistenced"] if s.persistenced else []) + (["nvidia-fabricmanager"] if fm else [])


def _summary(s: Settings, node: dict, pkgs: dict, changes: tuple, have_driver: bool) -> str:
    remove, install, services = changes
    would = "would " if s.check_mode else ""
    lock = f"locked by {pkgs['pinning_package']}" if pkgs["pinning_package"] else f"pinned by {PIN_FILE}"
    parts = [f"branch {s.branch} ({', '.join(pkgs['names'])}, {lock})"]
    parts += [f"{would}remove {', '.join(remove)}"] if remove else []
    parts += [f"{would}install {', '.join(install)}"] if install else []
    parts += [] if remove or install else ["installed"]
    if s.check_mode and not have_driver and services == [] and node.get("service_mgr") == "systemd":
        parts.append("would enable its services once installed")
    return f"nvidia_driver on {s.host}: " + "; ".join(parts)


def _reboot_lines(s: Settings, node: dict, have_driver: bool) -> tuple[bool, RebootLines]:
    """(whether the role may reboot the node, the report's reboot part after a change or without)."""
    is_local = bool(node.get("is_local"))
    may_reboot = bool(s.reboot) and not is_local
    how = (
        "this is the control node: reboot it yourself"
        if is_local
        else "rerun with -e nvidia_driver_reboot=true, or reboot it yourself"
    )
    required = f"reboot required to load driver branch {s.branch} ({how})"
    driver = node.get("driver") or {}
    running = bool(driver.get("loaded")) and driver.get("branch") == s.branch
    changed = (
        f"{'would ' if s.check_mode else ''}reboot to load branch {s.branch}" if may_reboot else required
    )
    return may_reboot, {"changed": changed, "unchanged": required if have_driver and not running else ""}


def plan(node: dict, packages=None, secure_boot_probes=None, **settings) -> DriverPlan:
    """Every decision of the nvidia_driver role for one node.

    ``node``: preflight's wireup_node; ``packages``: the installed ones (apt.parse_dpkg_status'
    dict); ``secure_boot_probes``: the results of SECURE_BOOT_READS; ``settings``: Settings' fields.
    A GPU-less node or a driver the image brings is left alone (``manage`` false, the one line why).
    """
    s = Settings(**settings)
    if s.fabricmanager not in FABRICMANAGER_CHOICES:
        raise DriverError(
            f"nvidia_driver_fabricmanager={s.fabricmanager!r} is not one of "
            f"{', '.join(FABRICMANAGER_CHOICES)}: auto installs it where preflight found NVSwitches"
        )
    gpu = node.get("gpu") or {}
    if not gpu.get("present"):
        return _left_alone(s, "skipped: no NVIDIA GPU found (PCI vendor 10de)")
    pkgs = packages_for(s.branch, s.flavor, node.get("cuda_repo_distro", ""), s.source, s.version)
    installed = _installed(packages)
    have_driver = all(n in installed and _of(installed[n], s.branch, s.version) for n in pkgs["names"])
    image = _image_driver(node, s, pkgs["names"], installed)
    if image:
        return _left_alone(s, image)
    verdict = (
        secure_boot_verdict(secure_boot_probes)
        if node.get("secure_boot") is True and s.secure_boot_check
        else ""
    )
    fm, fm_missing = _fabricmanager(s, gpu, pkgs, installed, have_driver)
    install = _to_install(s, node, pkgs, installed, have_driver) + ([fm["name"]] if fm_missing else [])
    hold = pkgs["names"] + ([fm["name"]] if fm else [])
    remove, services = _to_remove(installed, pkgs, s.branch), _services(s, node, have_driver, fm)
    may_reboot, reboot = _reboot_lines(s, node, have_driver)
    removed = f"wireup's pin file {PIN_FILE} {'would be ' if s.check_mode else ''}removed"
    return {
        **_left_alone(s, ""),
        "manage": True,
        "era": pkgs["era"],
        "names": pkgs["names"],
        "pin_file": pkgs["pin_file"],
        "pinning_package": pkgs["pinning_package"],
        "remove": remove,
        "install": install,
        "apt_first": _apt_first(remove, install, pkgs["pinning_package"]),
        "stale": [] if pkgs["pin_file"] else [PIN_FILE],
        "fabricmanager": fm,
        # dpkg holds only what it has: in --check, what is not installed yet is not held either
        "hold": [n for n in hold if n in installed] if s.check_mode else hold,
        "services": services,
        "may_reboot": may_reboot,
        "error": f"{s.host}: {verdict}" if verdict else "",
        "summary": _summary(s, node, pkgs, (remove, install, services), have_driver),
        "reboot": reboot,
        "pin_file_removed": f"{removed} ({pkgs['pinning_package']} locks the branch)"
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


def _specs(the_plan: DriverPlan, pending: list[str], version: str, fm_version: str) -> list[str]:
    """apt's specs: the driver at ``version``, Fabric Manager at ``fm_version`` (any build)."""
    fm = the_plan.get("fabricmanager") or {}
    return [
        f"{p}={version}" if p in the_plan["names"] else f"{p}={fm_version}-*" if fm and p == fm["name"] else p
        for p in pending
    ]


def _unavailable(the_plan: DriverPlan, version: str, apt_err: str) -> str:
    names, branch = the_plan["names"], the_plan["branch"]
    if version:
        return f"apt offers {names[0]} {version}, not of branch {branch}"
    said = str(apt_err).strip()
    return f"{', '.join(names)} not available from {the_plan['host']}'s apt sources (apt said: {said})"


class InstallSpecs(TypedDict):
    """``__nvidia_driver_specs``: what roles/nvidia_driver/tasks and handlers read."""

    specs: list[str]  # apt's NAME=VERSION specs
    error: str  # stops the run
    message: str  # what --check says instead of the plan's summary
    driver: bool  # the driver packages themselves are among the specs (a reboot may follow)


def _spec_answer(specs=(), error="", message="", driver=False) -> InstallSpecs:
    return {"specs": list(specs), "error": error, "message": message, "driver": driver}


def install_specs(
    the_plan: DriverPlan,
    apt_show_text: str,
    apt_rc: int = 0,
    apt_err: str = "",
    *,
    check_mode=False,
    lock_ready=True,
) -> dict:
    """The apt specs of the plan's ``install``, with the driver and Fabric Manager at apt's candidate
    version of the driver (under the branch lock) so both are the same version.
    ``lock_ready``: the pin file was already as planned (in --check an unwritten pin file, like a
    pinning package not installed yet, leaves apt's candidates unlocked: the versions are unknown and
    apt's own simulation would fail on dependencies of another branch).
    Returns {specs, error, message, driver}: ``error`` stops the run, ``message`` is what --check says
    instead, ``driver`` whether the driver packages themselves are among the specs (a reboot follows
    a change of the driver itself, not of headers or Fabric Manager alone)."""
    names, branch = the_plan["names"], the_plan["branch"]
    pending = [p for p in the_plan["install"] if p != the_plan.get("pinning_package")]
    fm = the_plan.get("fabricmanager") or {}
    if not set(names) & set(pending) and (not fm or fm.get("version")):
        # The driver is in place: only headers or Fabric Manager at the installed driver's version.
        return _spec_answer(_specs(the_plan, pending, "", fm.get("version", "")))
    lock = the_plan.get("pinning_package") or "the pin file"
    unlocked = not lock_ready or the_plan.get("pinning_package") in the_plan["install"]
    exact = f"; the exact version of branch {branch} once {lock}"
    if check_mode and unlocked:
        return _spec_answer(message=f"{the_plan['summary']}{exact} is in place")
    version = _candidates(apt_show_text).get(names[0], "") if apt_rc == 0 else ""
    if version and upstream_version(version).startswith(branch + "."):
        return _spec_answer(
            _specs(the_plan, pending, version, fm.get("version") or upstream_version(version)), driver=True
        )
    offered = _unavailable(the_plan, version, apt_err)
    if check_mode:
        return _spec_answer(
            message=f"{the_plan['summary']}{exact} and NVIDIA's repository are in place ({offered} now)"
        )
    return _spec_answer(
        error=f"{offered}: check nvidia_driver_branch / nvidia_driver_version / nvidia_driver_flavor "
        "and, with nvidia_driver_source: cuda, cuda_repo_base_url (cuda_repo runs before nvidia_driver in "
        "site.yml; with --tags, add cuda_repo)"
    )


def report(
    the_plan: DriverPlan, driver_changed: bool = False, pin_file_removed: bool = False, note=""
) -> str:
    """The run's one line for a node, after the tasks ran (``note``: install_specs' --check message,
    which then replaces the plan's summary)."""
    line = note or the_plan["summary"]
    if pin_file_removed and the_plan.get("pin_file_removed"):
        line += "; " + the_plan["pin_file_removed"]
    extra = the_plan["reboot"]["changed"] if driver_changed else the_plan["reboot"]["unchanged"]
    return line + ("; " + extra if extra else "")
