"""Which PyTorch wheel a node gets, whether a preinstalled torch is good enough, and whether the
installed torch works: pure functions (stdlib only) behind the pytorch_venv role.

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

import re

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


def _nums(text: str) -> tuple[int, ...]:
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(text))
    if not match:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in match.group(1).split("."))


def _pad(version: tuple[int, ...], length: int) -> tuple[int, ...]:
    return version + (0,) * (length - len(version))


def release_series(torch_version) -> str:
    """'2.13.0' or '2.13.0+cu130' -> '2.13'."""
    if not isinstance(torch_version, str) or not re.match(r"^\d+\.\d+(\.\d+)?([a-z0-9.+]*)$", torch_version):
        raise TorchIndexError(
            f"pytorch_venv_torch_version={torch_version!r} is not a version: set it as a quoted "
            f'string like "2.13.0" (group_vars/all.yml)'
        )
    major, minor = _nums(torch_version)[:2]
    return f"{major}.{minor}"


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
    match = re.match(r"^cu(\d{2})(\d+)$", variant or "")
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
    try:
        return _nums(text)[0]
    except ValueError:
        raise TorchIndexError(
            f"driver version {driver_version!r} is not like '580.159.04' or '580'"
        ) from None


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
            f"{', '.join(sorted(table, key=_nums))}): set pytorch_venv_cuda_variant (e.g. cu130 or "
            f"cpu), or describe the release in pytorch_venv_torch_variants"
        )
    variants = table[series][arch]
    for variant in variants:
        variant_cuda(variant)
    return sorted(variants, key=lambda v: (-1,) if v == "cpu" else _nums(variant_cuda(v)))


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
        cuda = ".".join(str(n) for n in _nums(toolkit_version)[:2])
        return {"source": "CUDA toolkit", "driver": "", "branch": None, "cuda": cuda}
    return {"source": "", "driver": "", "branch": None, "cuda": ""}


def _allowed(variant: str, drv: dict) -> str:
    """'native', 'minor-compat' or '' for a CUDA variant under a driver."""
    cuda = _nums(variant_cuda(variant))
    native = drv["cuda"]
    if native and _pad(cuda, 2) <= _pad(_nums(native), 2):
        return "native"
    floor = MINOR_COMPAT_BRANCH.get(cuda[0])
    if drv["branch"] is not None and floor is not None and drv["branch"] >= floor:
        return "minor-compat"
    return ""


def choose(
    torch_version,
    arch,
    gpu_present,
    *,
    driver_version="",
    driver_branch="",
    toolkit_version="",
    override="auto",
    extra_variants=None,
    match_toolkit=True,
    index_base_url=DEFAULT_INDEX_BASE_URL,
    pin_variant=True,
) -> dict:
    """Pick the wheel variant, index URL and pip requirement for torch on one node.

    Returns {ok, error, variant, cuda, series, requirement, index_url, reason, driver}.
    ok is False (with error naming the variable to change) when no variant fits.
    """
    try:
        series = release_series(torch_version)
        variants = variants_for(torch_version, arch, extra_variants)
        drv = driver_cuda(driver_version, driver_branch, toolkit_version)
        override = str(override or "auto")
        if override != "auto":
            variant_cuda(override)
            known = override in variants
            note = "" if known else f" (not in the table for torch {series} on {normalize_arch(arch)})"
            variant, reason = override, f"pytorch_venv_cuda_variant={override}{note}"
        elif not gpu_present:
            variant, reason = "cpu", "no NVIDIA GPU on the node: CPU wheels"
        else:
            variant, reason = _choose_cuda(series, variants, drv, toolkit_version, match_toolkit)
    except TorchIndexError as exc:
        return {"ok": False, "error": str(exc)}
    base = str(index_base_url or DEFAULT_INDEX_BASE_URL).rstrip("/")
    pin = torch_version if ("+" in torch_version or not pin_variant) else f"{torch_version}+{variant}"
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
        toolkit = ""
        if str(toolkit_version or "").strip():
            toolkit = ".".join(str(n) for n in _nums(toolkit_version)[:2])
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
        floor = MINOR_COMPAT_BRANCH[_nums(variant_cuda(compat[-1]))[0]]
        return compat[-1], (
            f"{what} supports CUDA {drv['cuda']} natively; {compat[-1]} runs on it through CUDA "
            f"minor-version compatibility (branch >= {floor})"
        )
    raise TorchIndexError(
        f"{what} supports CUDA {drv['cuda'] or 'none'}, but torch {series} ships only "
        f"{', '.join(cuda_variants)}: upgrade the driver (nvidia_driver_branch), pick an older torch "
        f"(pytorch_venv_torch_version), or force a wheel with pytorch_venv_cuda_variant"
    )


def _parse_spec(spec) -> list[tuple[str, str]]:
    if not isinstance(spec, str) or not spec.strip():
        raise TorchIndexError(
            f"pytorch_venv_accept_preinstalled={spec!r} is not a version range: use e.g. '>=2.11' "
            f"or '>=2.11,<3'"
        )
    clauses = []
    for part in spec.split(","):
        match = re.match(r"^\s*(~=|==|!=|>=|<=|>|<)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$", part)
        if not match or (match.group(3) and match.group(1) not in ("==", "!=")):
            raise TorchIndexError(
                f"pytorch_venv_accept_preinstalled={spec!r}: clause {part.strip()!r} is not like "
                f"'>=2.11', '<3', '==2.11.*' or '~=2.11'"
            )
        clauses.append((match.group(1), match.group(2) + (match.group(3) or "")))
    return clauses


def check_spec(spec) -> str:
    """'' when the range parses, else the message."""
    try:
        _parse_spec(spec)
    except TorchIndexError as exc:
        return str(exc)
    return ""


def version_in_range(version, spec) -> bool:
    """PEP 440-style range check on the release numbers; a local label (+cu130) is ignored and a
    pre-release counts as its release."""
    have = _nums(str(version).split("+", 1)[0])
    for op, want_text in _parse_spec(spec):
        wildcard = want_text.endswith(".*")
        want = _nums(want_text[:-2] if wildcard else want_text)
        if wildcard:
            equal = _pad(have, len(want))[: len(want)] == want
            if (op == "==") != equal:
                return False
            continue
        size = max(len(have), len(want))
        a, b = _pad(have, size), _pad(want, size)
        if op == "~=":
            prefix = want[:-1] if len(want) > 1 else want
            ok = a >= b and _pad(have, len(prefix))[: len(prefix)] == prefix
        else:
            ok = {
                "==": a == b,
                "!=": a != b,
                ">=": a >= b,
                "<=": a <= b,
                ">": a > b,
                "<": a < b,
            }[op]
        if not ok:
            return False
    return True


def python_ok(python_version, torch_version) -> str:
    """'' when the base Python can run the torch series, else the message."""
    series = release_series(torch_version)
    minimum = TORCH_MIN_PYTHON.get(series)
    if minimum and _nums(python_version)[:2] < _nums(minimum):
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
    if not version_in_range(version, spec):
        return {
            "use": False,
            "version": version,
            "cuda": cuda,
            "reason": f"torch {version} in the base interpreter is outside "
            f"pytorch_venv_accept_preinstalled '{spec}'",
        }
    if gpu_present:
        if not cuda:
            return {
                "use": False,
                "version": version,
                "cuda": "",
                "reason": f"torch {version} in the base interpreter is a CPU build on a GPU node",
            }
        drv = (choice or {}).get("driver") or {"source": "", "cuda": "", "branch": None}
        if drv.get("source"):
            variant = "cu" + "".join(f"{n}" for n in (_nums(cuda)[0], _pad(_nums(cuda), 2)[1]))
            if not _allowed(variant, drv):
                return {
                    "use": False,
                    "version": version,
                    "cuda": cuda,
                    "reason": f"torch {version} (CUDA {cuda}) needs a newer driver than "
                    f"{drv.get('driver') or drv.get('cuda')}",
                }
    return {
        "use": True,
        "version": version,
        "cuda": cuda,
        "reason": f"torch {version} in the base interpreter satisfies "
        f"pytorch_venv_accept_preinstalled '{spec}'",
    }


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


_PINNED_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")


def _split_version(version: str):
    """'2.13.0+cpu' -> ((2, 13), '', 'cpu'): release without trailing zeros, the rest of the public
    version (pre/post/dev, normalised loosely), the local label. None when it is not a version."""
    text = str(version).strip().lower().lstrip("v")
    public, _, local = text.partition("+")
    match = re.match(r"^(\d+(?:\.\d+)*)(.*)$", public)
    if not match:
        return None
    release = [int(n) for n in match.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    rest = re.sub(r"[-_.]", "", match.group(2))
    return tuple(release), rest, re.sub(r"[-_]", ".", local)


def pip_satisfied(requirement: str, installed: dict) -> bool:
    """Whether a pinned requirement ('name==version', as pytorch_venv demands) is met by what the
    venv has installed ({normalised name: version}, from the role's probe), with PEP 440's rules
    for '==': release segments compare zero-padded, and a pin without a local label ('+cu130')
    accepts any local label. Anything else (extras, a range, an unparsable version) is 'not met',
    so pip decides: this only lets a rerun skip pip when the answer is certain."""
    match = _PINNED_REQ.match(str(requirement))
    if not match or match.group(2):
        return False
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    have, want = _split_version(installed.get(name, "")), _split_version(match.group(3))
    if have is None or want is None:
        return False
    return have[:2] == want[:2] and (not want[2] or have[2] == want[2])


def pip_missing(requirements, installed) -> list:
    """The requirements pip still has to install (see pip_satisfied); all of them when the probe
    found no venv (installed is None or empty)."""
    if isinstance(requirements, str):
        requirements = [requirements]
    installed = installed or {}
    return [req for req in requirements or [] if not pip_satisfied(req, installed)]


def fact(report, choice, decision, venv_path, python_executable="") -> dict:
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
