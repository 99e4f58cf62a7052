"""Node facts: pure parsers for what preflight reads off a node.

Text in, plain data out; no Ansible imports, so pytest runs them on captured outputs and the
``wireup_node_facts`` module wraps them.
"""

from __future__ import annotations

import json
import re

NVIDIA_PCI_VENDOR = "0x10de"
# PCI base class 0x03 is "display controller": 0x0300 VGA (workstation cards), 0x0302 3D
# controller (data-centre GPUs such as H100/H200). NVSwitch chips report 0x0680 ("other bridge").
_GPU_CLASS_PREFIX = "0x03"
_NVSWITCH_CLASS_PREFIX = "0x0680"

# Distributions wireup supports, with NVIDIA's CUDA-repository name for each.
SUPPORTED_OS = {
    ("ubuntu", "22.04"): "ubuntu2204",
    ("ubuntu", "24.04"): "ubuntu2404",
    ("ubuntu", "26.04"): "ubuntu2604",
    ("debian", "12"): "debian12",
    ("debian", "13"): "debian13",
}
# uname -m -> (Debian architecture, CUDA repository architecture). arm64 servers (Grace) use the
# "sbsa" repositories.
ARCHITECTURES = {
    "x86_64": ("amd64", "x86_64"),
    "aarch64": ("arm64", "sbsa"),
}


def classify_pci_devices(devices: list[dict]) -> dict:
    """Count NVIDIA GPUs and NVSwitches among PCI devices.

    ``devices``: [{"address": "0000:00:06.0", "vendor": "0x10de", "class": "0x030200"}, ...]
    as read from /sys/bus/pci/devices/*/{vendor,class}.
    """
    gpus, switches = [], []
    for dev in devices:
        if dev.get("vendor", "").strip().lower() != NVIDIA_PCI_VENDOR:
            continue
        pci_class = dev.get("class", "").strip().lower()
        if pci_class.startswith(_GPU_CLASS_PREFIX):
            gpus.append(dev["address"])
        elif pci_class.startswith(_NVSWITCH_CLASS_PREFIX):
            switches.append(dev["address"])
    return {"gpu_addresses": sorted(gpus), "nvswitch_addresses": sorted(switches)}


def parse_proc_net_route(text: str) -> list[dict]:
    """Parse /proc/net/route (the kernel's IPv4 routing table; hex, little-endian addresses)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].split()[:2] == ["Iface", "Destination"]:
        raise ValueError("not /proc/net/route: expected a header starting 'Iface Destination'")
    header = lines[0].split()
    routes = []
    for line in lines[1:]:
        fields = dict(zip(header, line.split(), strict=False))
        routes.append(
            {
                "interface": fields["Iface"],
                "destination": _hex_le_to_ipv4(fields["Destination"]),
                "gateway": _hex_le_to_ipv4(fields["Gateway"]),
                "mask": _hex_le_to_ipv4(fields["Mask"]),
                "flags": int(fields["Flags"], 16),
                "metric": int(fields["Metric"]),
            }
        )
    return routes


def default_route_interface(routes: list[dict]) -> str:
    """The interface of the default route with the lowest metric ('' when there is none)."""
    route_up = 0x1
    defaults = [
        r
        for r in routes
        if r["destination"] == "0.0.0.0" and r["mask"] == "0.0.0.0" and r["flags"] & route_up
    ]
    if not defaults:
        return ""
    return min(defaults, key=lambda r: r["metric"])["interface"]


def _hex_le_to_ipv4(value: str) -> str:
    raw = int(value, 16).to_bytes(4, "little")
    return ".".join(str(b) for b in raw)


def parse_os_release(text: str) -> dict:
    """Parse /etc/os-release into {id, version, codename}."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"').strip("'")
    if "ID" not in values:
        raise ValueError("not an os-release file: no ID= line")
    return {
        "id": values["ID"].lower(),
        "version": values.get("VERSION_ID", ""),
        "codename": values.get("VERSION_CODENAME", ""),
        "pretty_name": values.get("PRETTY_NAME", ""),
    }


def os_support(os_id: str, version: str) -> dict:
    """Whether wireup supports this distribution, and its CUDA-repository name."""
    distro = SUPPORTED_OS.get((os_id, version), "")
    return {"supported": bool(distro), "cuda_repo_distro": distro}


def arch_names(machine: str) -> dict:
    deb, cuda = ARCHITECTURES.get(machine, ("", ""))
    return {"machine": machine, "deb": deb, "cuda": cuda}


_DRIVER_VERSION_RE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def parse_proc_driver_version(text: str) -> dict:
    """Parse /proc/driver/nvidia/version: loaded kernel module version and flavour."""
    first = text.splitlines()[0] if text.strip() else ""
    match = _DRIVER_VERSION_RE.search(first)
    if not first.startswith("NVRM version:") or not match:
        raise ValueError("not /proc/driver/nvidia/version: expected 'NVRM version: ... Kernel Module'")
    version = match.group(1)
    return {
        "version": version,
        "branch": driver_branch(version),
        "kernel_module": "open" if "Open Kernel Module" in first else "proprietary",
    }


_DRIVER_BRANCH_RE = re.compile(r"(\d+)(?:\.\d+)*")


def driver_branch(version: str) -> str:
    """The branch of a driver version: '580.159.04' -> '580', '580' -> '580'; '' for anything else
    ('[N/A]', ''). The one reading of it: preflight's facts and pytorch_venv's wheel choice."""
    match = _DRIVER_BRANCH_RE.fullmatch(str(version or "").strip())
    return match.group(1) if match else ""


_NVCC_RE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")


def parse_nvcc_version(text: str) -> dict:
    """Parse `nvcc --version`: {'version': '13.0', 'full': '13.0.88'}."""
    match = _NVCC_RE.search(text)
    if not match:
        raise ValueError("not nvcc --version output: no 'release X.Y, VX.Y.Z' line")
    return {"version": match.group(1), "full": match.group(2)}


def parse_cuda_version_json(text: str) -> dict:
    """Parse <CUDA_HOME>/version.json: {'version': '13.0', 'full': '13.0.2'}."""
    data = json.loads(text)
    full = data.get("cuda", {}).get("version", "")
    if not re.match(r"^\d+\.\d+", full):
        raise ValueError("version.json has no cuda.version")
    major, minor = full.split(".")[:2]
    return {"version": f"{major}.{minor}", "full": full}


_NCCL_DEFINE_RE = re.compile(r"^#define\s+NCCL_(MAJOR|MINOR|PATCH)\s+(\d+)", re.MULTILINE)


def parse_nccl_header(text: str) -> str:
    """NCCL version from nccl.h's NCCL_MAJOR/MINOR/PATCH defines ('2.28.9')."""
    parts = dict(_NCCL_DEFINE_RE.findall(text))
    if not {"MAJOR", "MINOR", "PATCH"} <= parts.keys():
        raise ValueError("nccl.h lacks NCCL_MAJOR/NCCL_MINOR/NCCL_PATCH defines")
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def parse_gpu_inventory(text: str, fields: list[str]) -> list[dict]:
    """Parse `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` rows."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise ValueError(
                f"nvidia-smi query row has {len(values)} values, expected {len(fields)}: {line!r}"
            )
        row = {}
        for field, value in zip(fields, values, strict=True):
            row[field] = None if value in ("[N/A]", "N/A", "[Not Supported]") else value
        gpus.append(row)
    return gpus


def summarize_gpus(pci: dict, inventory: list[dict]) -> dict:
    """The GPU part of wireup_node from the PCI scan and nvidia-smi's inventory."""
    devices = [
        {
            "index": int(g["index"]),
            "name": g.get("name") or "",
            "uuid": g.get("uuid") or "",
            "pci_bus_id": g.get("pci.bus_id") or "",
            "compute_cap": g.get("compute_cap") or "",
            "memory_total_mib": int(g["memory.total"]) if g.get("memory.total") else 0,
        }
        for g in inventory
    ]
    return {
        "present": bool(pci["gpu_addresses"]) or bool(devices),
        "pci_count": len(pci["gpu_addresses"]),
        "count": len(devices),
        "models": sorted({d["name"] for d in devices if d["name"]}),
        "compute_capabilities": sorted({d["compute_cap"] for d in devices if d["compute_cap"]}),
        "nvswitch_count": len(pci["nvswitch_addresses"]),
        "devices": devices,
    }


def service_manager(systemd_booted: bool, init_comm: str) -> str:
    """The init system, named as Ansible's service_mgr fact names it for the cases wireup meets:
    'systemd' when /run/systemd/system exists (sd_booted(3), true inside systemd-nspawn too),
    otherwise PID 1's command name ('init' for sysvinit, 'tini', 'sh', ...; 'unknown' if
    unreadable). Only 'systemd' matters to wireup (nvidia_driver manages services with it)."""
    if systemd_booted:
        return "systemd"
    comm = (init_comm or "").strip()
    return comm or "unknown"


def free_megabytes(f_bavail: int, f_frsize: int) -> int:
    """Free space for unprivileged users from statvfs fields, in MiB."""
    return (f_bavail * f_frsize) // (1024 * 1024)


def parse_secure_boot_efivar(data: bytes) -> bool:
    """SecureBoot-8be4df61-... efivar: 4 bytes of attributes, then 1 byte state (1 = enabled)."""
    if len(data) < 5:
        raise ValueError("SecureBoot efivar is shorter than 5 bytes")
    return data[4] == 1


def summary(facts: dict, master: str) -> str:
    """One line describing a node, as preflight prints it."""
    gpu, driver = facts["gpu"], facts["driver"]
    if gpu["present"]:
        gpus = f"{gpu['pci_count']} NVIDIA GPU(s) on PCI"
        if gpu["count"]:
            gpus += (
                f", {gpu['count']}x {'/'.join(gpu['models'])} (cc {'/'.join(gpu['compute_capabilities'])})"
            )
        if gpu.get("nvidia_smi_error"):
            gpus += f", nvidia-smi: {gpu['nvidia_smi_error']}"
        gpus += f"; driver {driver['version'] or 'not loaded'}"
        if driver.get("kernel_module"):
            gpus += f" ({driver['kernel_module']})"
    else:
        gpus = "no NVIDIA GPU (GPU roles will skip this node)"
    net = facts["network"]
    return "; ".join(
        [
            f"{facts['os'].get('pretty_name') or facts['os']['id']} {facts['arch']['machine']}",
            gpus,
            f"CUDA {facts['cuda']['version'] or 'none'}",
            f"NCCL {facts['nccl']['version'] or 'none'}",
            f"{net['interface'] or 'no interface'} {net['address'] or 'no address'}",
            f"{facts['disk']['free_mb']} MiB free at {facts['disk']['path']}",
            f"master {master}",
        ]
    )


def node_errors(facts: dict, min_free_mb: int = 0, require_supported_os: bool = True) -> list[str]:
    """What makes a node unfit for wireup (it fails alone; the others go on): an unsupported OS
    or architecture, too little free disk for the venv. Each message names the fix."""
    errors = []
    os_facts, arch, disk = facts["os"], facts["arch"], facts["disk"]
    if require_supported_os and not os_facts.get("supported"):
        errors.append(
            f"{os_facts.get('pretty_name') or os_facts.get('id')} is not supported: wireup supports Ubuntu "
            f"22.04/24.04/26.04 and Debian 12/13 (set preflight_require_supported_os: false to try anyway)"
        )
    if not arch.get("deb"):
        errors.append(f"{arch.get('machine')} is not supported: wireup supports x86_64 and aarch64")
    if disk.get("free_mb") is not None and disk["free_mb"] < int(min_free_mb):
        errors.append(
            f"{disk.get('path')} has {disk['free_mb']} MiB free, fewer than preflight_min_free_mb "
            f"({min_free_mb}): free space there or move wireup_venv_path"
        )
    return errors
