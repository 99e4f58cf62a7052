"""Which PyTorch wheel a node gets, whether a preinstalled torch is good enough, whether the
installed torch works, and `plan`: every decision and message of the pytorch_venv role for one
node. Pure functions (stdlib, and packaging for PEP 440 versions, imported inside the functions
that use it: it ships with ansible-core, and this module runs on the controller only, through
plugins/filter/wireup_torch.py).

Why the DRIVER decides, not the toolkit: a PyTorch CUDA wheel bundles its own CUDA runtime
(cudart, cuBLAS, cuDNN, NCCL come as nvidia-* wheels), so the node's CUDA toolkit is never loaded
by torch. What a wheel needs from the node is a kernel driver new enough for the CUDA it was
built with. The driver branch therefore sets the ceiling; the toolkit only matters as a
tie-breaker (building CUDA extensions such as flash-attn against torch wants nvcc's version to
match torch.version.cuda) and as a last-resort proxy when no driver is loaded yet.

Sources (checked 2026-11-29):
- torch release -> CUDA variants: pytorch/pytorch RELEASE.md "Release Compatibility Matrix" and
  "PyTorch CUDA Support Matrix" (PRs #175253 for 2.11, #182849 for 2.12, #187075 for 2.13,
  #194367 for 2.14) and the RFCs #172663 (2.11), #178665 (2.12), #190355 (2.14).
- driver branch -> CUDA: NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding
  Driver Versions" (the CUDA version a branch supports natively, as nvidia-smi prints it) and
  "Minimum Required Driver Version for CUDA Minor Version Compatibility" (525.60.13 for 12.x,
  580.65.06 for 13.x); NVIDIA data-center docs: R535/R570 run CUDA 12.x, R580 runs CUDA 13.x
  through minor-version compatibility.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import TypedDict
from urllib.parse import urlsplit

from ..core import redact
from ..core.apt import dpkg_query_argv, parse_dpkg_status
from ..core.checks import check_version_range
from ..probe import node

# Release series -> architecture -> wheel variants on download.pytorch.org/whl/<variant>.
# aarch64 means Linux arm64 servers (CUDA "sbsa"). Every variant's wheel carries the local
# version label "+<variant>" (torch-2.13.0+cu130-..., torch-2.13.0+cpu-...).
TORCH_VARIANTS: dict[str, dict[str, list[str]]] = {
    "2.7": {"x86_64": ["cpu", "cu118", "cu126", "cu128"], "aarch64": ["cpu", "cu128"]},
    "2.8": {"x86_64": ["cpu", "cu126", "cu128", "cu129"], "aarch64": ["cpu", "cu128", "cu129"]},
    "2.9": {"x86_64": ["cpu", "cu126", "cu128", "cu130"], "aarch64": ["cpu", "cu126", "cu128", "cu130"]},
    "2.10": {"x86_64": ["cpu", "cu126", "cu128", "cu130"], "aarch64": ["cpu", "cu126", "cu128", "cu130"]},
    "2.11": {"x86_64": ["cpu", "cu126", "cu128", "cu130"], "aarch64": ["cpu", "cu126", "cu128", "cu130"]},
    # 2.12 dropped CUDA 12.8 and added 13.2 (experimental in 2.12/2.13, default in 2.14).
    "2.12": {"x86_64": ["cpu", "cu126", "cu130", "cu132"], "aarch64": ["cpu", "cu126", "cu130", "cu132"]},
    "2.13": {"x86_64": ["cpu", "cu126", "cu130", "cu132"], "aarch64": ["cpu", "cu126", "cu130", "cu132"]},
    "2.14": {"x86_64": ["cpu", "cu126", "cu130", "cu132"], "aarch64": ["cpu", "cu126", "cu130", "cu132"]},
}

# Oldest Python each release series ships wheels for.
TORCH_MIN_PYTHON: dict[str, str] = {
    "2.7": "3.9",
    "2.8": "3.9",
    "2.9": "3.10",
    "2.10": "3.10",
    "2.11": "3.10",
    "2.12": "3.10",
    "2.13": "3.10",
    "2.14": "3.10",
}

# Driver branch -> the newest CUDA it supports natively (nvidia-smi's "CUDA Version").
# A branch newer than the last row is assumed to support at least that row's CUDA.
DRIVER_BRANCH_CUDA: list[tuple[int, str]] = [
    (450, "11.0"),
    (455, "11.1"),
    (460, "11.2"),
    (465, "11.3"),
    (470, "11.4"),
    (495, "11.5"),
    (510, "11.6"),
    (515, "11.7"),
    (520, "11.8"),
    (525, "12.0"),
    (530, "12.1"),
    (535, "12.2"),
    (545, "12.3"),
    (550, "12.4"),
    (555, "12.5"),
    (560, "12.6"),
    (565, "12.7"),
    (570, "12.8"),
    (575, "12.9"),
    (580, "13.0"),
    (590, "13.1"),
    (595, "13.2"),
]

# CUDA major -> oldest driver branch that runs every minor release of it (minor-version
# compatibility: 450.80.02 for 11.x, 525.60.13 for 12.x, 580.65.06 for 13.x).
MINOR_COMPAT_BRANCH: dict[int, int] = {11: 450, 12: 525, 13: 580}

DEFAULT_INDEX_BASE_URL = "https://download.pytorch.org/whl"

_ARCH_ALIASES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "sbsa": "aarch64",
}


class TorchIndexError(ValueError):
    """Bad input; the message names the variable to change."""


def _release(text, length: int = 2) -> tuple[int, ...]:
    """The first ``length`` numbers of a version's release, padded with zeros (packaging.version:
    '13.0.88' -> (13, 0), '13' -> (13, 0), '2.13.0+cu130' -> (2, 13)); ValueError for no version."""
    # packaging is imported where it is used: the wireup package must import without third-party
    # packages: modules carry it to nodes (ansible-test sanity's import test checks it).
    from packaging.version import InvalidVersion, Version

    try:
        release = Version(str(text).strip()).release
    except InvalidVersion as exc:
        raise ValueError(f"not a version: {text!r}") from exc
    return (*release, *(0,) * length)[:length]


def _major_minor(text) -> str:
    """'13.0.88' -> '13.0'."""
    return "{}.{}".format(*_release(text))


def release_series(torch_version) -> str:
    """'2.13.0' or '2.13.0+cu130' -> '2.13'."""
    if not isinstance(torch_version, str) or not re.fullmatch(
        r"\d+\.\d+(\.\d+)?([a-z0-9.+]*)", torch_version
    ):
        raise TorchIndexError(
            f"pytorch_venv_torch_version={torch_version!r} is not a version: set it as a quoted "
            f'string like "2.13.0" (group_vars/all.yml)'
        )
    try:
        return _major_minor(torch_version)
    except ValueError:
        raise TorchIndexError(
            f"pytorch_venv_torch_version={torch_version!r} is not a version: set it as a quoted "
            f'string like "2.13.0" (group_vars/all.yml)'
        ) from None


def normalize_arch(arch) -> str:
    """x86_64/amd64 -> x86_64; aarch64/arm64/sbsa -> aarch64."""
    key = str(arch or "").lower()
    if key not in _ARCH_ALIASES:
        raise TorchIndexError(
            f"architecture {arch!r} has no PyTorch Linux wheels (x86_64 and aarch64 only): "
            f"this node cannot get torch from pytorch_venv"
        )
    return _ARCH_ALIASES[key]


def variant_cuda(variant: str) -> str:
    """'cu130' -> '13.0', 'cu126' -> '12.6', 'cpu' -> ''."""
    if variant == "cpu":
        return ""
    match = re.fullmatch(r"cu(\d{2})(\d+)", variant or "")
    if not match:
        raise TorchIndexError(
            f"wheel variant {variant!r} is not 'cpu' or 'cuXYZ' (e.g. cu130): fix "
            f"pytorch_venv_cuda_variant or pytorch_venv_torch_variants"
        )
    return f"{int(match.group(1))}.{int(match.group(2))}"


def driver_branch_of(driver_version) -> int | None:
    """'580.159.04' -> 580, '580' -> 580, '' -> None."""
    text = str(driver_version or "").strip()
    if not text:
        return None
    branch = node.driver_branch(text)  # the one reading of a driver version's branch
    if not branch:
        raise TorchIndexError(f"driver version {driver_version!r} is not like '580.159.04' or '580'")
    return int(branch)


def branch_native_cuda(branch: int) -> str:
    """Newest CUDA a driver branch supports natively ('' for a branch older than CUDA 11)."""
    best = ""
    for first_branch, cuda in DRIVER_BRANCH_CUDA:
        if branch >= first_branch:
            best = cuda
    return best


def variants_for(torch_version, arch, extra_variants=None) -> list[str]:
    """The variants a release series ships for an architecture (the built-in table, with
    pytorch_venv_torch_variants merged over it)."""
    series = release_series(torch_version)
    arch = normalize_arch(arch)
    table = {k: dict(v) for k, v in TORCH_VARIANTS.items()}
    for key, per_arch in (extra_variants or {}).items():
        if not isinstance(per_arch, dict):
            raise TorchIndexError(
                f"pytorch_venv_torch_variants[{key!r}] must map an architecture to a list, e.g. "
                f"{{'{key}': {{'x86_64': ['cpu', 'cu130']}}}}"
            )
        table.setdefault(str(key), {}).update({normalize_arch(a): list(v) for a, v in per_arch.items()})
    if series not in table or arch not in table[series]:
        raise TorchIndexError(
            f"torch {series}.x on {arch} is not in wireup's wheel table (known series: "
            f"{', '.join(sorted(table, key=_release))}): set pytorch_venv_cuda_variant (e.g. cu130 or "
            f"cpu), or describe the release in pytorch_venv_torch_variants"
        )
    variants = table[series][arch]
    for variant in variants:
        variant_cuda(variant)
    return sorted(variants, key=lambda v: (v != "cpu", _release(variant_cuda(v) or "0")))


def driver_cuda(driver_version="", driver_branch="", toolkit_version="") -> dict:
    """What the node's driver supports, from the best source available.

    Order: the loaded driver (preflight's wireup_node.driver.version), then the branch that is
    about to be installed (pytorch_venv_driver_branch, e.g. a reboot is still pending), then the
    CUDA toolkit as a proxy (whoever installed toolkit X.Y means to run a driver for X.Y).
    """
    for source, value in (("loaded driver", driver_version), ("pytorch_venv_driver_branch", driver_branch)):
        branch = driver_branch_of(value)
        if branch is not None:
            return {
                "source": source,
                "driver": str(value),
                "branch": branch,
                "cuda": branch_native_cuda(branch),
            }
    if str(toolkit_version or "").strip():
        return {"source": "CUDA toolkit", "driver": "", "branch": None, "cuda": _major_minor(toolkit_version)}
    return {"source": "", "driver": "", "branch": None, "cuda": ""}


def _allowed(variant: str, drv: dict) -> str:
    """'native', 'minor-compat' or '' for a CUDA variant under a driver."""
    cuda = _release(variant_cuda(variant))
    native = drv["cuda"]
    if native and cuda <= _release(native):
        return "native"
    floor = MINOR_COMPAT_BRANCH.get(cuda[0])
    if drv["branch"] is not None and floor is not None and drv["branch"] >= floor:
        return "minor-compat"
    return ""


@dataclass(frozen=True)
class WheelOptions:
    """What besides the release, the architecture and the GPUs decides the wheel (the role's
    variables and preflight's driver and CUDA)."""

    driver_version: str = ""
    driver_branch: str = ""
    toolkit_version: str = ""
    override: str = "auto"
    extra_variants: dict | None = None
    match_toolkit: bool = True
    index_base_url: str = DEFAULT_INDEX_BASE_URL
    pin_variant: bool = True


def _pick(torch_version, arch, gpu_present, o: WheelOptions) -> tuple[str, str, str, dict]:
    """(series, variant, why, what the driver supports); TorchIndexError when no variant fits."""
    series = release_series(torch_version)
    variants = variants_for(torch_version, arch, o.extra_variants)
    drv = driver_cuda(o.driver_version, o.driver_branch, o.toolkit_version)
    override = str(o.override or "auto")
    if override != "auto":
        variant_cuda(override)
        note = (
            ""
            if override in variants
            else f" (not in the table for torch {series} on {normalize_arch(arch)})"
        )
        return series, override, f"pytorch_venv_cuda_variant={override}{note}", drv
    if not gpu_present:
        return series, "cpu", "no NVIDIA GPU on the node: CPU wheels", drv
    variant, why = _choose_cuda(series, variants, drv, o.toolkit_version, o.match_toolkit)
    return series, variant, why, drv


def choose(torch_version, arch, gpu_present, **options) -> dict:
    """Pick the wheel variant, index URL and pip requirement for torch on one node (``options``:
    WheelOptions' fields).

    Returns {ok, error, variant, cuda, series, requirement, index_url, reason, driver}.
    ok is False (with error naming the variable to change) when no variant fits.
    """
    o = WheelOptions(**options)
    try:
        series, variant, reason, drv = _pick(torch_version, arch, gpu_present, o)
    except TorchIndexError as exc:
        return {"ok": False, "error": str(exc)}
    base = str(o.index_base_url or DEFAULT_INDEX_BASE_URL).rstrip("/")
    pin = torch_version if ("+" in torch_version or not o.pin_variant) else f"{torch_version}+{variant}"
    return {
        "ok": True,
        "error": "",
        "variant": variant,
        "cuda": variant_cuda(variant),
        "series": series,
        "requirement": f"torch=={pin}",
        "index_url": f"{base}/{variant}",
        "reason": reason,
        "driver": drv,
    }


def _choose_cuda(series, variants, drv, toolkit_version, match_toolkit) -> tuple[str, str]:
    cuda_variants = [v for v in variants if v != "cpu"]
    if not drv["source"]:
        raise TorchIndexError(
            "the node has NVIDIA GPUs but no loaded driver, no pytorch_venv_driver_branch and no "
            "CUDA toolkit tell which CUDA its driver supports: set pytorch_venv_driver_branch "
            '(e.g. "580") or pytorch_venv_cuda_variant (e.g. cu130)'
        )
    native = [v for v in cuda_variants if _allowed(v, drv) == "native"]
    compat = [v for v in cuda_variants if _allowed(v, drv) == "minor-compat"]
    what = f"{drv['source']} {drv['driver'] or drv['cuda']}".strip()
    if native:
        toolkit = _major_minor(toolkit_version) if str(toolkit_version or "").strip() else ""
        same = [v for v in native if variant_cuda(v) == toolkit]
        if match_toolkit and same:
            return same[0], (
                f"{what} supports CUDA {drv['cuda']}; torch {series} ships {', '.join(cuda_variants)}; "
                f"{same[0]} matches the node's CUDA toolkit {toolkit}"
            )
        return native[-1], (
            f"{what} supports CUDA {drv['cuda']}; torch {series} ships {', '.join(cuda_variants)}; "
            f"{native[-1]} is the newest it runs"
        )
    if compat:
        floor = MINOR_COMPAT_BRANCH[_release(variant_cuda(compat[-1]))[0]]
        return compat[-1], (
            f"{what} supports CUDA {drv['cuda']} natively; {compat[-1]} runs on it through CUDA "
            f"minor-version compatibility (branch >= {floor})"
        )
    raise TorchIndexError(
        f"{what} supports CUDA {drv['cuda'] or 'none'}, but torch {series} ships only "
        f"{', '.join(cuda_variants)}: upgrade the driver (nvidia_driver_branch), pick an older torch "
        f"(pytorch_venv_torch_version), or force a wheel with pytorch_venv_cuda_variant"
    )


def check_spec(spec) -> str:
    """'' when pytorch_venv_accept_preinstalled is a PEP 440 range, else the message."""
    # packaging is imported where it is used: the wireup package must import without third-party
    # packages: modules carry it to nodes (ansible-test sanity's import test checks it).
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if isinstance(spec, str) and spec.strip():
        try:
            SpecifierSet(spec)
            return ""
        except InvalidSpecifier:
            pass
    return (
        f"pytorch_venv_accept_preinstalled={spec!r} is not a version range: use e.g. '>=2.11', "
        f"'>=2.11,<3', '==2.11.*' or '~=2.11'"
    )


def version_in_range(version, spec) -> bool:
    """checks.check_version_range (packaging.specifiers): a local label (+cu130) is ignored and
    a pre-release counts as its release. ValueError naming the variable for a bad range."""
    problem = check_spec(spec)
    if problem:
        raise TorchIndexError(problem)
    return check_version_range(str(version), spec)


def python_ok(python_version, torch_version) -> str:
    """'' when the base Python can run the torch series, else the message."""
    series = release_series(torch_version)
    minimum = TORCH_MIN_PYTHON.get(series)
    if minimum and _release(python_version) < _release(minimum):
        return (
            f"pytorch_venv_base_python runs Python {python_version}, but torch {series} needs Python >= "
            f"{minimum}: point pytorch_venv_base_python at a newer interpreter or pick an older "
            f"pytorch_venv_torch_version"
        )
    return ""


def preinstalled(found, spec, gpu_present, choice) -> dict:
    """Whether the base interpreter's torch can be used instead of installing one.

    found: {'version': '2.11.0+cu130', 'cuda': '13.0'} from the base Python ({} or None: no torch).
    Acceptable means: the version is in pytorch_venv_accept_preinstalled, and on a GPU node it is
    a CUDA build the driver can run (the same rule as for a fresh install).
    Returns {use, version, cuda, reason}.
    """
    found = found or {}
    version = str(found.get("version") or "")
    cuda = str(found.get("cuda") or "")
    if not version:
        return {"use": False, "version": "", "cuda": "", "reason": "the base interpreter has no torch"}
    refusal = _preinstalled_refusal(version, cuda, spec, gpu_present, choice)
    return {
        "use": not refusal,
        "version": version,
        "cuda": cuda,
        "reason": refusal
        or f"torch {version} in the base interpreter satisfies pytorch_venv_accept_preinstalled '{spec}'",
    }


def _preinstalled_refusal(version: str, cuda: str, spec, gpu_present, choice) -> str:
    """Why the base interpreter's torch cannot be used ('' when it can): outside the accepted
    range, or on a GPU node a CPU build or a CUDA build the driver cannot run."""
    if not version_in_range(version, spec):
        return f"torch {version} in the base interpreter is outside pytorch_venv_accept_preinstalled '{spec}'"
    if not gpu_present:
        return ""
    if not cuda:
        return f"torch {version} in the base interpreter is a CPU build on a GPU node"
    drv = (choice or {}).get("driver") or {"source": "", "cuda": "", "branch": None}
    if drv.get("source") and not _allowed("cu{}{}".format(*_release(cuda)), drv):
        driver = drv.get("driver") or drv.get("cuda")
        return f"torch {version} (CUDA {cuda}) needs a newer driver than {driver}"
    return ""


def verify_problems(report, gpu_present, gpu_count, venv_path="") -> list[str]:
    """What is wrong with the torch a venv imports (report: the JSON of the role's
    verify_torch.py). Empty list: torch works as the node's hardware says it should."""
    report = report or {}
    where = f" in {venv_path}" if venv_path else ""
    if report.get("import_error"):
        return [f"torch does not import{where}: {report['import_error']}"]
    problems = []
    if gpu_present:
        if not report.get("cuda_version"):
            problems.append(
                f"torch {report.get('torch_version')}{where} is a CPU build on a node with {gpu_count} "
                f"NVIDIA GPU(s): unset pytorch_venv_cuda_variant=cpu or put a CUDA wheel in the wheelhouse"
            )
        elif not report.get("cuda_available"):
            problems.append(
                f"torch.cuda.is_available() is False{where} (torch {report.get('torch_version')}, CUDA "
                f"{report.get('cuda_version')}): the driver is missing or too old for this wheel "
                f"({report.get('cuda_error') or 'no error text'}); check nvidia-smi, nvidia_driver_branch "
                f"and pytorch_venv_cuda_variant"
            )
        elif int(report.get("device_count") or 0) != int(gpu_count):
            problems.append(
                f"torch sees {report.get('device_count')} GPU(s){where}, preflight found {gpu_count}: "
                f"check CUDA_VISIBLE_DEVICES in wireup_job_env / the environment and nvidia-smi"
            )
    return problems


_PINNED_REQ = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!_-]+)\s*")


def pip_satisfied(requirement: str, installed: dict) -> bool:
    """Whether a pinned requirement ('name==version', as pytorch_venv demands) is met by what the
    venv has installed ({normalised name: version}, from the role's probe), by PEP 440's '=='
    (packaging.specifiers): release segments compare zero-padded, and a pin without a local label
    ('+cu130') accepts any local label. Anything else (extras, a range, an unparsable version) is
    'not met', so pip decides: this only lets a rerun skip pip when the answer is certain."""
    # packaging is imported where it is used: the wireup package must import without third-party
    # packages: modules carry it to nodes (ansible-test sanity's import test checks it).
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    match = _PINNED_REQ.fullmatch(str(requirement))
    if not match or match.group(2):
        return False
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    try:
        return SpecifierSet(f"=={match.group(3)}").contains(
            Version(installed.get(name, "")), prereleases=True
        )
    except (InvalidSpecifier, InvalidVersion):
        return False


def pip_missing(requirements, installed) -> list:
    """The requirements pip still has to install (see pip_satisfied); all of them when the probe
    found no venv (installed is None or empty)."""
    if isinstance(requirements, str):
        requirements = [requirements]
    installed = installed or {}
    return [req for req in requirements or [] if not pip_satisfied(req, installed)]


class TorchInfo(TypedDict):
    """pytorch_venv_info (and the local fact wireup_torch): what the venv's torch is."""

    venv: str
    python: str
    torch_version: str
    torch_path: str
    cuda_version: str
    nccl_version: str
    cuda_available: bool
    device_count: int
    variant: str
    preinstalled: bool
    base_python: str


def fact(report, choice, decision, venv_path, python_executable="") -> TorchInfo:
    """The pytorch_venv_info fact (and the local fact file's content): stable values only."""
    report = report or {}
    decision = decision or {}
    return {
        "venv": venv_path,
        "python": report.get("python", ""),
        "torch_version": report.get("torch_version", ""),
        "torch_path": report.get("torch_file", ""),
        "cuda_version": report.get("cuda_version", ""),
        "nccl_version": report.get("nccl_version", ""),
        "cuda_available": bool(report.get("cuda_available")),
        "device_count": int(report.get("device_count") or 0),
        "variant": (choice or {}).get("variant", ""),
        "preinstalled": bool(decision.get("use")),
        "base_python": python_executable,
    }


def summary(info, hostname="") -> str:
    """One line for the play output."""
    where = f" on {hostname}" if hostname else ""
    cuda = info.get("cuda_version") or "none (CPU build)"
    nccl = info.get("nccl_version") or "none"
    origin = f"preinstalled, from {info.get('base_python')}" if info.get("preinstalled") else "installed"
    gpus = f"{info.get('device_count')} GPU(s) visible" if info.get("cuda_available") else "no GPU in use"
    return (
        f"pytorch_venv{where}: torch {info.get('torch_version')} ({origin}), CUDA {cuda}, NCCL {nccl}, "
        f"{gpus}, venv {info.get('venv')}"
    )


# --- The role's plan: every decision and every message of pytorch_venv, from its inputs and one probe


PTH_NAME = "wireup-base-site.pth"
FACT_NAME = "wireup_torch.fact"
_PINNED_EXTRA = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+")
_PIP_COMMON = {
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INPUT": "1",
    "PIP_NO_CACHE_DIR": "1",
    "PIP_PROGRESS_BAR": "off",
}
TORCHRUN = """#!{venv}/bin/python
# torchrun for the torch reused from {base} (written by pytorch_venv).
import sys

from torch.distributed.run import main

if __name__ == "__main__":
    sys.exit(main())
"""


@dataclass(frozen=True)
class Settings:
    """The role's variables the plan reads: pytorch_venv_<field>, each passed by name
    (tasks/main.yml's one mapping, which the probe's request and the plan share)."""

    path: str
    owner: str
    group: str
    create_owner: bool
    base_python: str
    os_packages: list
    system_site_packages: bool
    accept_preinstalled: str
    torch_version: str
    cuda_variant: str
    driver_branch: str
    match_toolkit: bool
    pin_variant: bool
    torch_variants: dict
    index_base_url: str
    extra_index_url: str
    wheelhouse_url: str
    wheelhouse_dir: str
    wheelhouse_node_dir: str
    extra_packages: list
    requirements_file: str
    pip_wait_timeout: int
    verify_env: dict
    fact_dir: str


SETTINGS = tuple(f.name for f in fields(Settings))


def probe_request(settings) -> dict:
    """What files/probe_python.py is asked (its WIREUP_PROBE environment variable): the owner, dpkg's
    read of the OS packages (apt.dpkg_query_argv), the venv (its python, packages, pyvenv.cfg flag,
    the base-site .pth, torchrun) and the local fact."""
    s = Settings(**settings)
    packages = list(s.os_packages or [])
    return {
        "owner": s.owner,
        "packages": packages,
        "dpkg": dpkg_query_argv(*packages) if packages else [],
        "venv": s.path,
        "pip_wait": s.pip_wait_timeout,
        "torch": bool(s.system_site_packages),
        "site": bool(s.system_site_packages),  # the base's distributions, which such a venv sees
        "pth": PTH_NAME,
        "fact": f"{s.fact_dir}/{FACT_NAME}",
    }


def read_probe(result) -> dict | None:
    """The probe's JSON (its last line of output) from the registered script result, or None."""
    result = result or {}
    lines = result.get("stdout_lines") or str(result.get("stdout") or "").splitlines()
    if result.get("rc") != 0 or not lines or not lines[-1].startswith("{"):
        return None
    try:
        return json.loads(lines[-1])
    except ValueError:
        return None


def _path_errors(s: Settings, controller: dict) -> list[str]:
    errors = [
        f"pytorch_venv_{name}={getattr(s, name)!r} must be an absolute path (starting with /)"
        for name in ("path", "base_python", "wheelhouse_node_dir")
        if not str(getattr(s, name) or "").startswith("/")
    ]
    url, folder = str(s.wheelhouse_url or ""), str(s.wheelhouse_dir or "")
    if url and folder:
        errors.append(
            "set at most one of pytorch_venv_wheelhouse_url and pytorch_venv_wheelhouse_dir (both are set)"
        )
    if url and not re.match(r"^(https?|file)://", url):
        errors.append(
            f"pytorch_venv_wheelhouse_url={redact.redact_url(url)!r} must be an http(s):// or file:// URL"
        )
    if folder and not controller.get("wheelhouse_dir"):
        errors.append(
            f"pytorch_venv_wheelhouse_dir={folder!r} is not a directory on the controller: point it at "
            f"the wheelhouse folder, or leave it empty"
        )
    return errors


def input_errors(settings, controller=None) -> list[str]:
    """The checks that need no node (paths, sources, pins): each names the variable and the fix.
    controller: {'wheelhouse_dir': is a directory, 'requirements_file': is a file} on the controller."""
    s, controller = Settings(**settings), controller or {}
    errors = _path_errors(s, controller)
    if not s.owner or not s.group:
        errors.append("pytorch_venv_owner and pytorch_venv_group must not be empty")
    wheelhouse = bool(s.wheelhouse_url or s.wheelhouse_dir)
    if s.requirements_file and not (wheelhouse and controller.get("requirements_file")):
        errors.append(
            f"pytorch_venv_requirements_file={s.requirements_file} needs a wheelhouse "
            f"(pytorch_venv_wheelhouse_url or pytorch_venv_wheelhouse_dir) and must be a file on the "
            f"controller: make it with "
            f"python3 plugins/module_utils/wireup/core/wheelhouse.py WHEELHOUSE > FILE"
        )
    unpinned = [p for p in s.extra_packages or [] if not _PINNED_EXTRA.fullmatch(str(p))]
    if unpinned:
        errors.append(
            f"pytorch_venv_extra_packages entries must be pinned as name==version (reruns stay changed=0 "
            f"and every node gets the same build); fix: {', '.join(map(str, unpinned))}"
        )
    if s.system_site_packages:
        errors.append(check_spec(s.accept_preinstalled))
    return [e for e in errors if e]


def _choice(s: Settings, node: dict) -> dict:
    gpu, driver = node.get("gpu") or {}, node.get("driver") or {}
    return choose(
        str(s.torch_version),
        (node.get("arch") or {}).get("machine", ""),
        bool(gpu.get("present")),
        driver_version=driver.get("version", "") if driver.get("loaded") else "",
        driver_branch=s.driver_branch or "",
        toolkit_version=(node.get("cuda") or {}).get("version", "") or "",
        override=s.cuda_variant or "auto",
        extra_variants=s.torch_variants or {},
        match_toolkit=bool(s.match_toolkit),
        index_base_url=s.index_base_url or DEFAULT_INDEX_BASE_URL,
        pin_variant=bool(s.pin_variant),
    )


def _pip_waited(s: Settings, probe: dict) -> tuple[list[str], list[str]]:
    """(notes, errors) of pip processes the probe found installing into the venv."""
    pip, notes, errors = probe.get("pip") or {}, [], []
    if pip.get("found"):
        pids = ", ".join(str(p["pid"]) for p in pip["found"])
        cmdlines = "; ".join(p.get("cmdline", "") for p in pip["found"])[:200]
        then = "" if pip.get("running") else ", then read the venv it left"
        notes.append(
            f"found pip still installing into {s.path} (an interrupted earlier run?): {pids} "
            f"({cmdlines}); waited {pip.get('waited_s')} s for it instead of starting a second pip{then}"
        )
    if pip.get("running"):
        pids = [str(p["pid"]) for p in pip["running"]]
        errors.append(
            f"pip PID {', '.join(pids)} still installs into {s.path} after {pip.get('waited_s')} s "
            f"(pytorch_venv_pip_wait_timeout): let it finish and rerun, or stop it (kill {' '.join(pids)}) "
            f"and rerun"
        )
    return notes, errors


def _node_errors(s: Settings, probe: dict) -> list[str]:
    errors = []
    if not probe.get("owner_exists") and not s.create_owner:
        errors.append(
            f"pytorch_venv_owner '{s.owner}' does not exist on the node: create it, set "
            f"pytorch_venv_create_owner: true, or pick an existing user"
        )
    problem = python_ok(probe.get("python_version", "0"), str(s.torch_version))
    return errors + ([problem] if problem else [])


def _preinstalled(s: Settings, probe: dict, gpu: dict, choice: dict) -> tuple[dict, list[str]]:
    """(whether the base's torch is reused, the note saying so)."""
    if not s.system_site_packages:
        reason = "pytorch_venv_system_site_packages is false"
        return {"use": False, "version": "", "cuda": "", "reason": reason}, []
    decision = preinstalled(probe.get("torch"), s.accept_preinstalled, bool(gpu.get("present")), choice)
    action = (
        "reusing it, torch is not installed into the venv"
        if decision["use"]
        else f"installing {choice['requirement']}"
    )
    return decision, [f"{decision['reason']}; {action}"]


def _apt(s: Settings, node: dict, probe: dict) -> list[str]:
    """The listed packages dpkg lacks, for the system interpreter of Debian/Ubuntu only."""
    system = str(s.base_python).startswith("/usr/bin/")
    if not system or (node.get("os") or {}).get("id") not in ("debian", "ubuntu"):
        return []
    have = parse_dpkg_status(probe.get("dpkg") or "") if probe.get("dpkg") is not None else {}
    return [p for p in s.os_packages or [] if p not in have]


def _venv_tools(s: Settings, probe: dict, apt: list[str], needs_pip: bool) -> tuple[bool, list[str]]:
    """(whether the base has ensurepip, the error when it cannot make the venv). A python3-venv among
    the apt packages brings venv and ensurepip: the plan counts on them after apt."""
    brings_venv = any(re.fullmatch(r"python3(\.\d+)?-venv", p) for p in apt)
    has_venv = bool(probe.get("has_venv")) or brings_venv
    has_ensurepip = bool(probe.get("has_ensurepip")) or brings_venv
    if has_venv and (has_ensurepip or not needs_pip):
        return has_ensurepip, []
    return has_ensurepip, [
        f"{s.base_python} lacks the venv/ensurepip modules: install python3-venv (keep it in "
        f"pytorch_venv_os_packages), point pytorch_venv_base_python at an interpreter that has them, or, "
        f"when the base's torch is reused, set pytorch_venv_extra_packages: [] (a venv without pip of "
        f"its own is then enough)"
    ]


def _venv_changes(the_plan: dict, venv: dict) -> list[str]:
    """What the venv lacks, from the probe's read of it (``venv``): its python, the
    system-site-packages flag python -m venv wrote, the base's site folders in the .pth (or a stale
    .pth), torchrun for a reused torch. The venv folder's mode and owner are the file task's, run
    every time; contents are the builtins' own whenever the build runs."""
    changes = [f"apt packages {', '.join(the_plan['apt'])}"] if the_plan["apt"] else []
    if not venv.get("python"):
        return [*changes, "the venv's python"]
    if the_plan["venv_ready"] and str(venv.get("system_site_packages")).lower() != the_plan["pyvenv_flag"]:
        changes.append("pyvenv.cfg include-system-site-packages")
    wanted = the_plan["pth"]["content"]
    if (wanted or None) != ("".join(f"{d}\n" for d in venv["pth"]) if venv.get("pth") is not None else None):
        changes.append(the_plan["pth"]["path"])
    if the_plan["torchrun"] and not venv.get("torchrun"):
        changes.append("bin/torchrun")
    return changes


class PipInstall(TypedDict, total=False):
    key: str  # torch, extras or hashed: names its failure message
    label: str
    name: list[str]
    requirements: str
    extra_args: str
    env: dict


class PipPlan(TypedDict):
    run: bool  # the venv lacks a pinned package
    copies: list[dict]  # the wheelhouse and the hash-checked requirements file, to the node
    installs: list[PipInstall]
    torch: list[str]
    extras: list[str]
    env: dict
    extras_env: dict
    requirements: str
    hashed: bool
    failures: dict  # install key -> the message, '{error}' standing for pip's last words


class VenvPlan(TypedDict):
    """``__pytorch_venv_plan``: what roles/pytorch_venv/tasks read."""

    errors: list[str]
    choice: dict  # choose()'s wheel: variant, requirement, index_url, reason, driver
    gpu: dict  # {present, count}
    apt: list[str]
    become: bool  # the tasks' user is not the venv's owner
    venv_argv: list[str]
    venv_ready: bool  # the venv exists, or is made in this run (not in check mode)
    pyvenv_flag: str
    pth: dict  # {path, content}: content None removes a stale one
    torchrun: str  # for a reused torch: the script, else ''
    files: list[dict]  # {key, dest, content, mode}: the .pth link and torchrun the build writes
    stale: list[str]  # what the build removes: a stale .pth
    preinstalled: dict
    notes: list[str]
    pip: PipPlan
    changes: list[str]  # what the venv lacks (_venv_changes): the build steps run for any
    steps: list[str]  # the task files main.yml includes after the venv's folder, in turn (_steps)
    verify: bool
    skip_verify: str
    verify_env: dict
    dirs: list[dict]  # {path, owner, group}: the venv's folder (made every run), the local facts folder
    fact_path: str
    fact_now: dict | None  # the local fact as the probe read it


def _refused(errors: list[str], choice: dict, gpu: dict) -> VenvPlan:
    """The plan of a node the role stops on: its errors; nothing else is read."""
    return {
        "errors": errors,
        "choice": choice,
        "gpu": gpu,
        "apt": [],
        "become": False,
        "venv_argv": [],
        "venv_ready": False,
        "pyvenv_flag": "",
        "pth": {"path": "", "content": None},
        "torchrun": "",
        "files": [],
        "stale": [],
        "preinstalled": {},
        "notes": [],
        "pip": {},  # type: ignore[typeddict-item]
        "changes": [],
        "steps": [],
        "verify": False,
        "skip_verify": "",
        "verify_env": {},
        "dirs": [],
        "fact_path": "",
        "fact_now": None,
    }


def plan(probe_result, settings, node, check_mode=False, controller=None) -> VenvPlan:
    """Every decision of the pytorch_venv role for one node, and every error, at once.

    probe_result: the registered result of files/probe_python.py (run by the base interpreter);
    settings: Settings' fields; node: preflight's wireup_node; check_mode: ansible's; controller:
    see input_errors. The venv's build steps run only for what it lacks (``changes``), pip only for
    a pin it lacks (``pip.run``)."""
    s, node = Settings(**settings), node or {}
    gpu = node.get("gpu") or {}
    choice = _choice(s, node)
    errors = input_errors(settings, controller) + ([] if choice["ok"] else [choice["error"]])
    probe = read_probe(probe_result)
    if probe is None:
        result = probe_result or {}
        said = " ".join(f"{result.get('stdout') or ''} {result.get('msg') or ''}".split())[:300]
        errors.append(
            f"pytorch_venv_base_python {s.base_python} does not run (rc {result.get('rc', 'none')}: "
            f"{said}): point it at the Python the venv should be built from"
        )
    gpu = {"present": bool(gpu.get("present")), "count": int(gpu.get("count") or 0)}
    if errors:
        return _refused(errors, choice, gpu)
    notes, errors = _pip_waited(s, probe)
    errors += _node_errors(s, probe)
    decision, decided = _preinstalled(s, probe, gpu, choice)
    apt = _apt(s, node, probe)
    has_ensurepip, tool_errors = _venv_tools(s, probe, apt, not decision["use"] or bool(s.extra_packages))
    venv = probe.get("venv") or {}
    # pip: only what the venv lacks (a venv made in this run has nothing yet).
    installed = (venv.get("installed") or {}) if venv.get("python") else {}
    torch_todo = [] if decision["use"] else pip_missing(choice["requirement"], installed)
    extras_todo = pip_missing(list(s.extra_packages or []), _visible(s, probe, installed))
    pip = pip_plan(s, node, choice, (torch_todo, extras_todo), check_mode)
    the_plan = _venv(s, probe, venv, check_mode, decision)
    the_plan.update(
        errors=errors + tool_errors,
        choice=choice,
        gpu=gpu,
        apt=apt,
        become=probe.get("user") != s.owner,
        venv_argv=[s.base_python, "-m", "venv"]
        + (["--system-site-packages"] if s.system_site_packages else [])
        + ([] if has_ensurepip else ["--without-pip"])
        + [s.path],
        preinstalled=decision,
        notes=notes + decided,
        pip=pip,
        # In check mode nothing was installed: verify only a venv that exists and pip leaves alone.
        verify=the_plan["venv_ready"] and not (check_mode and pip["run"]),
    )
    the_plan["changes"] = _venv_changes(the_plan, venv)
    the_plan["steps"] = _steps(the_plan["changes"], pip["run"])
    return the_plan


def _visible(s: Settings, probe: dict, installed: dict) -> dict:
    """The distributions the venv's pip sees for the extras: its own, and with
    pytorch_venv_system_site_packages the base interpreter's too (its site-packages through the
    .pth link or --system-site-packages: pip says "already satisfied" for them, so a rerun need not
    start it). The venv's own come first, as on its sys.path; torch's pin is checked against the
    venv's own only (a base torch the plan did not accept must not count)."""
    if not s.system_site_packages:
        return installed
    return {**(probe.get("site_installed") or {}), **installed}


def _steps(changes: list[str], pip_run: bool) -> list[str]:
    """The task files after the venv's folder: build.yml where the venv lacks something, pip.yml
    for a pin it lacks; none on a converged node (one skipped loop)."""
    return (["build"] if changes else []) + (["pip"] if pip_run else [])


def _venv_files(s: Settings, pth: dict, torchrun: str) -> tuple[list[dict], list[str]]:
    """(the files the build writes, the files it removes): the base-site .pth (a stale one
    removed when none is wanted) and torchrun for a reused torch."""
    files = [{"key": "pth", "dest": pth["path"], "content": pth["content"], "mode": "0644"}]
    files = files if pth["content"] is not None else []
    if torchrun:
        files.append(
            {"key": "torchrun", "dest": f"{s.path}/bin/torchrun", "content": torchrun, "mode": "0755"}
        )
    return files, [] if pth["content"] is not None else [pth["path"]]


def _venv(s: Settings, probe: dict, venv: dict, check_mode: bool, decision: dict) -> dict:
    """The venv's own files: python -m venv once, its flag, the .pth and torchrun (none before the
    venv exists: check mode), its folders and the local fact."""
    series = probe.get("python_series", "")
    ready = bool(venv.get("python")) or not check_mode
    link = bool(s.system_site_packages) and bool(probe.get("is_venv"))
    pth = {
        "path": f"{s.path}/lib/python{series}/site-packages/{PTH_NAME}",
        "content": "".join(f"{d}\n" for d in probe.get("site_dirs") or []) if link and ready else None,
    }
    torchrun = TORCHRUN.format(venv=s.path, base=s.base_python) if decision["use"] and ready else ""
    files, stale = _venv_files(s, pth, torchrun)
    return {
        "venv_ready": ready,
        "pyvenv_flag": str(bool(s.system_site_packages)).lower(),
        "pth": pth,
        "torchrun": torchrun,
        "files": files,
        "stale": stale,
        "skip_verify": f"check mode: {s.path} is not built yet; torch is verified on the real run",
        "verify_env": {**(s.verify_env or {}), "PYTHONDONTWRITEBYTECODE": "1"},
        "dirs": [
            {"path": s.path, "owner": s.owner, "group": s.group},
            {"path": s.fact_dir, "owner": "root", "group": "root"},
        ],
        "fact_path": f"{s.fact_dir}/{FACT_NAME}",
        "fact_now": probe.get("fact"),
    }


def _pip_sources(s: Settings, links: str, choice: dict) -> tuple[dict, dict, str, str]:
    """(torch's index environment, the extras', where each comes from for the messages: an index
    URL's user:password@ never printed). A wheelhouse (``links``: where pip finds it) replaces both
    indexes."""
    url = str(s.wheelhouse_url or "")
    if url or s.wheelhouse_dir:
        index = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": links}
        if url.startswith("http://"):
            index["PIP_TRUSTED_HOST"] = urlsplit(url).hostname or ""
        source = f"wheelhouse {redact.redact_url(links)}"
        return index, index, source, source
    extra = {"PIP_INDEX_URL": s.extra_index_url} if s.extra_index_url else {}
    return (
        {"PIP_INDEX_URL": choice["index_url"]},
        extra,
        f"index {redact.redact_url(choice['index_url'])}",
        redact.redact_url(s.extra_index_url) or "pip's configured index",
    )


def _pip_failures(s: Settings, choice: dict, sources: tuple[str, str], links: str) -> dict:
    fix = "Fix: put the wheels in the wheelhouse (pytorch_venv_wheelhouse_url or pytorch_venv_wheelhouse_dir)"
    source, extra_source = sources
    return {
        "torch": f"pip could not install {choice['requirement']} ({choice.get('reason', '')}) from "
        f"{source}: {{error}}. {fix}, or change pytorch_venv_torch_version, pytorch_venv_cuda_variant "
        f"or pytorch_venv_index_base_url.",
        "extras": f"pip could not install {', '.join(s.extra_packages or [])} from {extra_source}: "
        f"{{error}}. {fix}, set pytorch_venv_extra_index_url, or change pytorch_venv_extra_packages.",
        "hashed": f"pip could not install the hash-checked requirements {s.requirements_file} from "
        f"wheelhouse {redact.redact_url(links)}: {{error}}. Fix: a hash mismatch means a wheel "
        f"changed since the file was made: check the wheelhouse, then make the file again (python3 "
        f"plugins/module_utils/wireup/core/wheelhouse.py WHEELHOUSE); a missing wheel must be added to it.",
    }


def pip_plan(s: Settings, node: dict, choice: dict, todo: tuple, check_mode: bool) -> PipPlan:
    """What pip installs (only what the venv lacks), from where (pip's environment, never
    extra_args: the pip module reports every task with extra_args as changed in check mode),
    and the message for each install that fails."""
    torch_todo, extras_todo = todo
    folder = str(s.wheelhouse_dir or "")
    # pip reads a controller wheelhouse from its copy on the node (a local node's in place).
    links = str(s.wheelhouse_url or "") or (folder if node.get("is_local") else s.wheelhouse_node_dir)
    index, extra_index, source, extra_source = _pip_sources(s, links, choice)
    hashed = bool(s.requirements_file) and bool(torch_todo or extras_todo)
    requirements = f"{s.path}/wireup-requirements-hashed.txt" if hashed else ""
    copies = []
    if folder and not node.get("is_local") and (torch_todo or extras_todo):
        copies.append({"src": folder.rstrip("/") + "/", "dest": f"{s.wheelhouse_node_dir}/"})
    if hashed:
        copies.append({"src": s.requirements_file, "dest": requirements})
    env, extras_env = {**_PIP_COMMON, **index}, {**_PIP_COMMON, **extra_index}
    # The pip calls, in order: one pip task loops over them (each item's key names its failure).
    if hashed:
        label = f"hash-checked {s.requirements_file}"
        hashed_install = {"key": "hashed", "label": label, "requirements": requirements, "env": env}
        installs = [] if check_mode else [{**hashed_install, "extra_args": "--require-hashes"}]
    else:
        installs = [
            {"key": key, "label": ", ".join(names), "name": names, "env": key_env}
            for key, names, key_env in (("torch", torch_todo, env), ("extras", extras_todo, extras_env))
            if names
        ]
    return {
        "run": bool(torch_todo or extras_todo),
        "copies": copies,
        "installs": installs,
        "torch": [] if hashed else torch_todo,
        "extras": [] if hashed else extras_todo,
        "env": env,
        "extras_env": extras_env,
        # Hash-checked instead: exactly the wheels of pytorch_venv_requirements_file, each checked
        # against its sha256. In check mode the file is not on a fresh node yet.
        "requirements": requirements,
        "hashed": hashed and not check_mode,
        "failures": _pip_failures(s, choice, (source, extra_source), links),
    }


def pip_failure(result, the_plan, hostname="") -> str:
    """The message for a failed pip task (ansible_failed_result in the role's rescue): which
    install failed (the looped task's first failed item), pip's last words, and the fix from the
    plan."""
    result = result or {}
    result = next((r for r in result.get("results") or [] if r.get("failed")), result)
    failures = ((the_plan or {}).get("pip") or {}).get("failures") or {}
    lines = str(result.get("stderr") or result.get("msg") or "").strip().splitlines() or [""]
    key = (result.get("item") or {}).get("key")
    error = " ".join(lines[-4:])[:600] if key == "hashed" else lines[-1]
    where = f" on {hostname}" if hostname else ""
    # An index URL's user:password@ (in the plan's sources and in pip's words) is never printed.
    message = failures.get(key, "pip failed: {error}").replace("{error}", error)
    return redact.redact_url(f"pytorch_venv{where}: {message}")


def verify_report(result) -> dict:
    """verify_torch.py's JSON (its last line) from the registered script result; an import
    error when the script printed none."""
    result = result or {}
    lines = result.get("stdout_lines") or str(result.get("stdout") or "").splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        said = " ".join(lines[-3:]) or str(result.get("msg") or "")
        return {"import_error": f"the verification printed no report (rc {result.get('rc')}): {said[:300]}"}


class Verified(TypedDict):
    """``__pytorch_venv_verified``: what roles/pytorch_venv/tasks/main.yml's verification reads."""

    problems: list[str]
    info: TorchInfo  # the pytorch_venv_info fact ({} when the verification was skipped)
    summary: str
    write_fact: bool  # the local fact differs from info (the probe read it before)


def verified(result, the_plan, settings_path="", hostname="") -> Verified:
    """From the verification's registered result and the plan: the problems, the pytorch_venv_info
    fact, the report line and whether the local fact file is to be written. A verification the
    plan skipped (check mode before the venv exists) has no problems and says why."""
    the_plan = the_plan or {}
    notes = list(the_plan.get("notes") or [])
    if not the_plan.get("verify") or (result or {}).get("skipped"):
        where = f" on {hostname}" if hostname else ""
        skipped = f"pytorch_venv{where}: {the_plan.get('skip_verify')}"
        return {"problems": [], "info": {}, "summary": "; ".join([skipped, *notes]), "write_fact": False}
    report = verify_report(result)
    gpu = the_plan.get("gpu") or {}
    venv = settings_path or the_plan.get("dirs", [{}])[0].get("path", "")
    info = fact(report, the_plan.get("choice"), the_plan.get("preinstalled"), venv, the_plan["venv_argv"][0])
    return {
        "problems": verify_problems(report, gpu.get("present"), gpu.get("count", 0), venv),
        "info": info,
        "summary": "; ".join([summary(info, hostname), *notes]),
        "write_fact": info != the_plan.get("fact_now"),
    }
