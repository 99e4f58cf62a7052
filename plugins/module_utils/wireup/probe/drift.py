"""What may drift between nodes, read from preflight's wireup_node fact (issue 37 item 5).

Text and plain data in, plain data out; no Ansible imports. ``node_values`` turns one node's
wireup_node into {field: value}: each value follows its field's grammar (re.fullmatch), is NONE
where the node says it has none (no driver, no system NCCL, no net plugin, no InfiniBand), and is
UNKNOWN where the fact lacks it or holds something of another shape (an older node's facts, a
hostile string): an unknown value is never counted as an outlier (capability/drift.py).
``net_plugin_dirs`` and ``net_plugin_names`` are the node side of the NCCL net plugin's read
(wireup_node_facts): where NCCL's dlopen looks, and which plugin files lie there; ``torch_fact``
reads pytorch_venv's local fact (torch's own version, CUDA and NCCL) and ``fabric_manager`` the
fabric manager's package and service state, the node side of those fields.
"""

from __future__ import annotations

import json
import re
from typing import TypedDict

from ..core import apt

NONE = "none"
UNKNOWN = "unknown"

_VERSION = r"\d{1,6}(?:\.\d{1,6}){0,3}"
_WORD = r"[A-Za-z0-9][A-Za-z0-9._+~:-]{0,63}"
# PEP 440 as torch's releases, nightlies and vendor builds spell it: 2.13.0+cpu, 2.11.0+cu130,
# 2.10.0.dev20260101+cu128, 2.6.0a0+ecf3bae40a.nv25.01.
_TORCH = (
    r"\d{1,6}(?:\.\d{1,6}){0,3}(?:(?:a|b|rc)\d{1,6})?(?:\.post\d{1,6})?(?:\.dev\d{1,14})?"
    r"(?:\+[A-Za-z0-9]{1,40}(?:\.[A-Za-z0-9]{1,40}){0,7})?"
)
_PLUGIN = r"libnccl-net(?:-[A-Za-z0-9_.]{1,64})?\.so(?:\.\d{1,6}){0,3}"
GRAMMARS = {
    "os": rf"{_WORD} {_VERSION}",
    "kernel": _WORD,
    "driver": _VERSION,
    "driver_branch": r"\d{1,6}",
    "kernel_module": r"open|proprietary",
    "fabric_manager": rf"{_VERSION}(?:/{_VERSION}){{0,3}}",
    # systemd's ActiveState values (systemd.unit(5), org.freedesktop.systemd1(5)).
    "fabric_manager_state": (
        r"active|reloading|inactive|failed|activating|deactivating|maintenance|refreshing"
    ),
    "cuda": _VERSION,
    "nccl": _VERSION,
    "nccl_net_plugin": rf"{_PLUGIN}(?:,{_PLUGIN}){{0,15}}",
    "torch": _TORCH,
    "torch_cuda": _VERSION,
    "torch_nccl": _VERSION,
    "gpu_model": r"[A-Za-z0-9][A-Za-z0-9 ._()/-]{0,127}",
    "vbios": r"[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f]{2}){3,5}(?:/[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f]{2}){3,5}){0,15}",
    "persistence_mode": r"(?:Enabled|Disabled)(?:/(?:Enabled|Disabled))?",
    "ecc_mode": r"(?:Enabled|Disabled)(?:/(?:Enabled|Disabled))?",
    "mig_mode": r"(?:Enabled|Disabled)(?:/(?:Enabled|Disabled))?",
    "ib_firmware": rf"{_VERSION}(?:/{_VERSION}){{0,15}}",
}
# The fields, in the order the table shows them.
FIELDS = tuple(GRAMMARS)
# The per-GPU fields: wireup_node_facts' extra nvidia-smi query columns (GPU_QUERY), kept under the
# field's name in each gpu.devices entry ('' where nvidia-smi says [N/A]).
GPU_QUERY = {
    "vbios": "vbios_version",
    "persistence_mode": "persistence_mode",
    "ecc_mode": "ecc.mode.current",
    "mig_mode": "mig.mode.current",
}
GPU_FIELDS = tuple(GPU_QUERY)
# Where NCCL's dlopen finds libnccl-net*.so without LD_LIBRARY_PATH (ld.so(8): the trusted
# directories, Debian's and Red Hat's multiarch folders), besides /etc/ld.so.conf's.
DEFAULT_LIB_DIRS = (
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)
_LIB_DIR = r"/[A-Za-z0-9._+/-]{1,255}"
# pytorch_venv's local fact (roles/pytorch_venv: pytorch_venv_fact_dir, plans/pytorch_venv.FACT_NAME):
# read by wireup_node_facts from this folder unless preflight passes the role's variable. A file
# larger than TORCH_FACT_MAX is not the role's (about 500 bytes) and reads as unknown.
TORCH_FACT_DIR = "/etc/ansible/facts.d"
TORCH_FACT_NAME = "wireup_torch.fact"
TORCH_FACT_MAX = 65536
_TORCH_KEYS = {"version": "torch_version", "cuda": "cuda_version", "nccl": "nccl_version"}
# The fabric manager: NVIDIA's and Ubuntu's packages are nvidia-fabricmanager-BRANCH (later ones
# nvidia-fabricmanager), beside -dev and the cuda-drivers-fabricmanager meta packages, which the
# package grammar leaves out; asked in the one dpkg-query that reads NCCL's packages.
FM_SERVICE = "nvidia-fabricmanager.service"
_FM_PACKAGE = r"nvidia-fabricmanager(?:-\d{1,4})?"
DPKG_PATTERNS = (*apt.NCCL_PACKAGES, "nvidia-fabricmanager*")


class DriftValues(TypedDict, total=False):
    """One node's values, {field: value}: a value of its grammar, NONE or UNKNOWN (every field)."""

    os: str
    kernel: str
    driver: str
    driver_branch: str
    kernel_module: str
    fabric_manager: str
    fabric_manager_state: str
    cuda: str
    nccl: str
    nccl_net_plugin: str
    torch: str
    torch_cuda: str
    torch_nccl: str
    gpu_model: str
    vbios: str
    persistence_mode: str
    ecc_mode: str
    mig_mode: str
    ib_firmware: str


def checked(field: str, value) -> str:
    """value when it is a string of field's grammar; NONE for an empty string; else UNKNOWN."""
    if not isinstance(value, str):
        return UNKNOWN
    if value == "":
        return NONE
    return value if re.fullmatch(GRAMMARS[field], value) else UNKNOWN


def _get(facts, *path):
    """facts[path...], or None where a step is missing or not an object."""
    for key in path:
        if not isinstance(facts, dict):
            return None
        facts = facts.get(key)
    return facts


def _joined(values):
    """Distinct non-empty strings joined by '/' in sorted order ('' for none: no GPU, a GPU that
    has no such mode); None when values is not a list of strings."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return "/".join(sorted({v for v in values if v}))


def _gpu_values(facts) -> dict:
    """The per-GPU fields, each the distinct values across the node's GPUs ('' with no GPU)."""
    devices = _get(facts, "gpu", "devices")
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        return dict.fromkeys(GPU_FIELDS)
    values = {}
    for field in GPU_FIELDS:
        present = [d.get(field) for d in devices]
        values[field] = _joined(present) if all(field in d for d in devices) else None
    return values


def _os_value(facts):
    os_id, version = _get(facts, "os", "id"), _get(facts, "os", "version")
    if not isinstance(os_id, str) or not isinstance(version, str) or not os_id:
        return None
    return f"{os_id} {version}"


def _ib_value(facts):
    firmware = _get(facts, "infiniband_fw")
    if not isinstance(firmware, dict):
        return None
    return _joined(list(firmware.values()))


def node_values(facts) -> DriftValues:
    """One node's DriftValues from its wireup_node fact (any shape: what fails is UNKNOWN)."""
    raw = {
        "os": _os_value(facts),
        "kernel": _get(facts, "kernel"),
        "driver": _get(facts, "driver", "version"),
        "driver_branch": _get(facts, "driver", "branch"),
        "kernel_module": _get(facts, "driver", "kernel_module"),
        "fabric_manager": _get(facts, "fabric_manager", "version"),
        "fabric_manager_state": _get(facts, "fabric_manager", "state"),
        "cuda": _get(facts, "cuda", "full") or _get(facts, "cuda", "version"),
        "nccl": _get(facts, "nccl", "version"),
        "nccl_net_plugin": _joined_plugins(_get(facts, "nccl", "net_plugins")),
        "torch": _get(facts, "torch", "version"),
        "torch_cuda": _get(facts, "torch", "cuda"),
        "torch_nccl": _get(facts, "torch", "nccl"),
        "gpu_model": _joined(_get(facts, "gpu", "models")),
        "ib_firmware": _ib_value(facts),
        **_gpu_values(facts),
    }
    return {field: checked(field, raw[field]) for field in FIELDS}


def _joined_plugins(names):
    """The net plugins' file names joined by ',' ('' for none), None when not a list of strings."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return ",".join(sorted(set(names)))


def parse_ld_so_conf(text: str) -> list[str]:
    """The library folders an ld.so.conf(.d) file names (comments, include lines and anything that
    is not an absolute path of plain characters left out)."""
    dirs = []
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry and re.fullmatch(_LIB_DIR, entry):
            dirs.append(entry)
    return dirs


def net_plugin_dirs(conf_texts: list[str], ld_library_path: str = "") -> list[str]:
    """Where NCCL looks for its net plugin, in dlopen's order without duplicates: LD_LIBRARY_PATH's
    folders (of the probe's environment), /etc/ld.so.conf's, then the default ones."""
    listed = [d for d in (ld_library_path or "").split(":") if re.fullmatch(_LIB_DIR, d)]
    for text in conf_texts:
        listed.extend(parse_ld_so_conf(text))
    listed.extend(DEFAULT_LIB_DIRS)
    return list(dict.fromkeys(listed))


def net_plugin_names(file_names: list[str]) -> list[str]:
    """The NCCL net plugin files among file names (libnccl-net.so, libnccl-net-NAME.so[.N]),
    sorted, without duplicates."""
    return sorted({name for name in file_names if re.fullmatch(_PLUGIN, name)})


def device_modes(row: dict) -> dict:
    """The per-GPU fields of one parsed nvidia-smi query row ({field: value}, '' for [N/A]); {}
    when the row lacks the extra columns (an nvidia-smi that refused them: the fields are UNKNOWN)."""
    if not all(column in row for column in GPU_QUERY.values()):
        return {}
    return {field: row[column] or "" for field, column in GPU_QUERY.items()}


def is_ib_device(name: str) -> bool:
    """An InfiniBand device's name as the kernel gives it (mlx5_0, ibp12s0, hfi1_0)."""
    return bool(re.fullmatch(r"[A-Za-z0-9_]{1,32}", name))


def ib_firmware(read_fw: dict) -> dict:
    """{device: firmware} from /sys/class/infiniband/DEVICE/fw_ver's texts (stripped; a device
    whose file could not be read, None, is left out)."""
    return {dev: text.strip() for dev, text in sorted(read_fw.items()) if isinstance(text, str)}


def _json_object(data: bytes) -> dict:
    """The JSON object data holds ({} for anything else: too large, not UTF-8, not JSON, nested
    past the parser's depth, not an object)."""
    if len(data) > TORCH_FACT_MAX:
        return {}
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def torch_fact(data: bytes | None) -> dict:
    """wireup_node's torch part, {version, cuda, nccl}, from pytorch_venv's local fact file's
    bytes (None: no file, so no torch of wireup's: '' each). A value is the fact's string, None
    where the file is not the role's JSON object or the value not a string (node_values: unknown).
    """
    if data is None:
        return dict.fromkeys(_TORCH_KEYS, "")
    fact = _json_object(data)
    return {key: _string(fact.get(name)) for key, name in _TORCH_KEYS.items()}


def _string(value):
    return value if isinstance(value, str) else None


def nccl_packages(packages: dict) -> dict:
    """NCCL's packages among parse_dpkg_status's (the nccl role's plan reads them)."""
    return {name: found for name, found in packages.items() if name in apt.NCCL_PACKAGES}


def _fm_packages(packages: dict) -> list[str]:
    return sorted(name for name in packages if re.fullmatch(_FM_PACKAGE, name))


def fabric_manager_installed(packages: dict) -> bool:
    """Whether dpkg has a fabric manager package installed (only then is its service asked)."""
    return bool(_fm_packages(packages))


def active_state(text: str | None) -> str | None:
    """ActiveState's value in ``systemctl show --property=ActiveState`` output; None without it."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key == "ActiveState":
            return value
    return None


def fabric_manager(packages: dict, show_text: str | None) -> dict:
    """wireup_node's fabric_manager part, {version, package, state}: the installed packages'
    upstream versions ('/' joined: Ubuntu's transitional packages carry the same one), their
    names, and the service's ActiveState from ``show_text`` (None: systemctl not asked or
    failed). '' each where no fabric manager package is installed."""
    names = _fm_packages(packages)
    if not names:
        return {"version": "", "package": "", "state": ""}
    versions = sorted({apt.upstream_version(packages[name].get("version")) for name in names})
    return {"version": "/".join(versions), "package": ",".join(names), "state": active_state(show_text)}
