"""The nccl role's plan: the system NCCL (libnccl2 and libnccl-dev from NVIDIA's repository)
pinned to one exact version and held, and the comparison with the NCCL torch bundles.

Pure functions, no Ansible imports (``packaging`` for versions, imported where it is used: it
runs on the controller only); the ``wireup_packages`` filter plugin wraps them and
tests/unit/test_nccl.py pins every choice. Bad input raises ``apt.PackageError`` whose message
names the variable and the fix. NVIDIA names the packages' versions ``<nccl>-<build>+cuda<A.B>``
(apt.split_nccl_package_version, the one grammar).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

from ..core.apt import NCCL_PACKAGES, PackageError, nccl_pin_errors, require_str, split_nccl_package_version
from ..probe.bench_output import nccl_header_version
from .cuda_repo import cuda_version_parts

PACKAGES = NCCL_PACKAGES
PIN_PATH = "/etc/apt/preferences.d/wireup-nccl.pref"


class NcclPlan(TypedDict):
    """``__nccl_plan``: what roles/nccl/tasks read."""

    names: list[str]  # libnccl2, libnccl-dev
    specs: list[str]  # apt's NAME=VERSION of each
    version: str  # the NCCL release (X.Y.Z)
    package_version: str
    cuda: str  # the CUDA release of the build (A.B)
    install: list[str]  # packages dpkg has at another version (or not at all)
    hold: list[str]  # packages dpkg does not hold
    known: list[str]  # packages dpkg knows (in --check only these can be held)
    pin_path: str
    pin: str  # the apt preferences file's text
    apply: bool  # whether the pin, install and hold steps run at all
    report: list[str]  # the role's line when it does not manage NCCL


def parse_package_version(value) -> dict:
    """'2.28.9-1+cuda13.0' -> {'version': '2.28.9', 'build': '1', 'cuda': '13.0'}."""
    require_str("nccl_package_version", value, '"2.28.9-1+cuda13.0"')
    parsed = split_nccl_package_version(value)
    if parsed is None:
        raise PackageError(
            f"nccl_package_version={value!r} is malformed: NVIDIA's repository names libnccl2 "
            f'versions "<X.Y.Z>-<build>+cuda<A.B>", e.g. "2.28.9-1+cuda13.0"'
        )
    return parsed


def pin_text(names, package_version: str) -> str:
    """The apt preferences file that keeps the NCCL packages at exactly package_version (priority
    1001: never a newer one from the repository), byte for byte what the role's template wrote
    before issue 14, so upgrading wireup rewrites nothing."""
    return (
        "#\n# Ansible managed\n#\n"
        "# NCCL stays at exactly the pinned version, even when the repository offers a newer one.\n"
        f"Package: {' '.join(names)}\nPin: version {package_version}\nPin-Priority: 1001\n"
    )


def _checked_pins(package_version, nccl_version, cuda_version) -> dict:
    """The parsed package version once the three pins agree (apt.nccl_pin_errors, preflight's rule
    too); PackageError naming the variable otherwise."""
    parsed = parse_package_version(package_version)
    require_str("nccl_version", nccl_version, '"2.28.9"')
    if not re.fullmatch(r"\d+\.\d+\.\d+", nccl_version):
        raise PackageError(f'nccl_version={nccl_version!r} is malformed: expected X.Y.Z such as "2.28.9"')
    cuda_version_parts(cuda_version, "nccl_cuda_version")
    errors = nccl_pin_errors(package_version, nccl_version, cuda_version, "nccl_cuda_version")
    if errors:
        example = f'"{nccl_version}-{parsed["build"]}+cuda{cuda_version}"'
        raise PackageError(
            "; ".join(errors) + (f", e.g. {example}" if parsed["cuda"] != cuda_version else "")
        )
    return parsed


def _check_header(files: dict, header_path: str, package_version: str, version: str) -> None:
    """Packages at the pin while nccl.h says another version: another package or a hand install
    replaced the header builds compile against."""
    found = nccl_header_version((files.get(header_path) or {}).get("content") or "")
    if found != version:
        raise PackageError(
            f"libnccl2 and libnccl-dev are {package_version} but nccl.h (nccl_header_path) says "
            f"{found or 'nothing (missing, or no NCCL_MAJOR/MINOR/PATCH)'}: another package or a hand "
            f"install replaced it; run `apt-get install --reinstall libnccl-dev` on the node, or fix "
            f"nccl_header_path"
        )


@dataclass(frozen=True)
class Inputs:
    """What the plan reads besides the pins: ``installed``: preflight's wireup_node.nccl.packages
    (dpkg's libnccl2 and libnccl-dev, {name: {version, held}}); ``files``: wireup_file_state's files
    (the pin file and ``header_path``); ``manage``: nccl_install_system; ``node_nccl``: preflight's
    wireup_node.nccl, for the line when the role does not manage NCCL."""

    installed: dict | None = None
    files: dict | None = None
    header_path: str = ""
    manage: bool = True
    node_nccl: dict | None = None


def plan(package_version, nccl_version, cuda_version, **inputs) -> NcclPlan:
    """Everything the nccl role decides: validated libnccl2/libnccl-dev specs, consistent with
    nccl_version and the node's CUDA, from what dpkg has (Inputs): which packages apt must install,
    which dpkg must hold, the pin file's text and ``apply``: whether dpkg is off the plan or the pin
    file is missing (the pin's content and mode are copy's to keep whenever the steps run; a rerun
    runs none of them). Packages at the pin while nccl.h says another version raise PackageError.
    ``manage`` false (nccl_install_system: false): nothing to apply; ``report`` says what the node
    has instead."""
    given = Inputs(**inputs)
    parsed = _checked_pins(package_version, nccl_version, cuda_version)
    names, status, files = list(PACKAGES), given.installed or {}, given.files or {}
    install = [n for n in names if status.get(n, {}).get("version") != package_version]
    hold = [n for n in names if not status.get(n, {}).get("held")]
    if files and not install:
        _check_header(files, given.header_path, package_version, parsed["version"])
    pin_missing = not (files.get(PIN_PATH) or {}).get("exists")
    return {
        "names": names,
        "specs": [f"{name}={package_version}" for name in names],
        "version": parsed["version"],
        "package_version": package_version,
        "cuda": parsed["cuda"],
        "install": install,
        "hold": hold,
        # dpkg_selections fails on a package dpkg has never seen: in --check on a fresh node (where
        # apt installed nothing) only these are held.
        "known": [n for n in names if n in status],
        "pin_path": PIN_PATH,
        "pin": pin_text(names, package_version),
        "apply": bool(given.manage) and bool(install or hold or pin_missing),
        "report": [] if given.manage else [unmanaged_report(given.node_nccl)],
    }


def install_problems(the_plan: NcclPlan, apt_result, header, check_mode: bool) -> list[str]:
    """After apt installed the pin: what is wrong ([] when nothing). In --check on a fresh node the
    CUDA source is not fetched yet, so apt cannot know the packages and nothing is checked."""
    if check_mode:
        return []
    apt_result = apt_result or {}
    if apt_result.get("failed"):
        return [
            f"{' and '.join(the_plan['specs'])} are not available from this node's apt sources: run the "
            f"cuda_repo role first (tags cuda_repo,nccl), check that cuda_repo_base_url carries that "
            f"version, or fix nccl_package_version. apt said: {str(apt_result.get('msg', '')).strip()}"
        ]
    found = nccl_header_version(header or "")
    if found != the_plan["version"]:
        return [
            f"apt installed libnccl-dev {the_plan['package_version']} but nccl.h (nccl_header_path) says "
            f"{found or 'nothing'}: point nccl_header_path at the header libnccl-dev installs"
        ]
    return []


def unmanaged_report(node_nccl) -> str:
    """The nccl role's line when nccl_install_system is false: what the node has instead."""
    nccl = node_nccl or {}
    found = (
        f"{nccl['version']} ({nccl.get('source')})"
        if nccl.get("version")
        else ("none (jobs use the NCCL bundled with torch)")
    )
    return f"system NCCL not installed (nccl_install_system: false); found on the node: {found}"


def _torch_nccl(venv_info, probe) -> tuple[bool, str] | None:
    """(torch imports, its NCCL version) from pytorch_venv_info, else from the probe's result;
    None when neither says (no venv yet)."""
    if venv_info:
        return True, str(venv_info.get("nccl_version") or "")
    if probe and not probe.get("skipped") and "rc" in probe:
        torch_ok = probe.get("rc") == 0
        return torch_ok, parse_torch_nccl_version(probe.get("stdout", "")) if torch_ok else ""
    return None


def torch_comparison(system_version, host: str, venv_path: str, venv_info=None, probe=None) -> str:
    """The nccl role's comparison of torch's bundled NCCL with the system NCCL, as one line ('' when
    there is nothing to compare: no venv yet). ``venv_info``: pytorch_venv_info (from a torch that
    imported), else ``probe``: the registered result of files/torch_nccl.py run by the venv's
    python (skipped when the venv does not exist)."""
    found = _torch_nccl(venv_info, probe)
    if found is None:
        return ""
    torch_ok, torch = found
    shown = torch or ("none (CPU build)" if torch_ok else "unknown: torch does not import")
    line = (
        f"nccl on {host}: torch in {venv_path} bundles NCCL {shown}; system NCCL {system_version or 'none'}"
    )
    if mismatch(system_version or "", torch):
        line = (
            f"WARNING: {line}; they differ in major.minor, so jobs (torch NCCL) and nccl-tests (system "
            f"NCCL) are not comparable: align nccl_package_version with torch, or the torch pin with NCCL"
        )
    return line


def torch_lines(
    system_version, host: str, venv_path: str, venv_info=None, probe=None, *, check=True
) -> list[str]:
    """The entry point torch's report: torch_comparison's line, or none when nccl_check_torch
    (``check``) is false or there is nothing to compare (one debug task loops over it)."""
    line = torch_comparison(system_version, host, venv_path, venv_info, probe) if check else ""
    return [line] if line else []


def parse_torch_nccl_version(text) -> str:
    """What `torch.cuda.nccl.version()` printed -> 'X.Y.Z' ('' for none / CPU builds).

    Newer torch returns a tuple (2, 28, 9), printed here as '2.28.9'; older ones an int code:
    major*1000+minor*100+patch before NCCL 2.9 (2708), major*10000+minor*100+patch after (22809).
    """
    value = str(text).strip().strip("()").replace(",", ".").replace(" ", "")
    if not value or value.lower() == "none":
        return ""
    if re.fullmatch(r"\d+\.\d+\.\d+", value):
        return value
    if value.isdigit():
        code = int(value)
        if code >= 20900:
            return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        return f"{code // 1000}.{code // 100 % 10}.{code % 100}"
    raise PackageError(f"torch.cuda.nccl.version() printed {text!r}: not an NCCL version")


def mismatch(system_version: str, torch_version: str) -> bool:
    """True when both are known and differ in major.minor (patch differences are harmless):
    packaging.version's release numbers (this module runs on the controller only)."""
    # packaging is imported where it is used: the wireup package must import without third-party
    # packages: modules carry it to nodes (ansible-test sanity's import test checks it).
    from packaging.version import Version

    if not system_version or not torch_version:
        return False
    return Version(system_version).release[:2] != Version(torch_version).release[:2]
