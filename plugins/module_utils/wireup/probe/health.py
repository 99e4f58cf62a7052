"""Health findings for a GPU node (pure Python, stdlib only).

Each finding is {severity: critical|warning|info, code, gpus: [index, ...], message} with a
one-line message. ``findings()`` takes what the gpu_topology module gathered (parsed topology,
raw kernel log and lspci text, nvidia-smi errors) and applies the rules below.

Rules (documented in roles/gpu_topology/README.md too):
* nvlink_inactive (critical): a GPU has some NVLinks inactive while others are active.
* nvlink_gpu_down (critical): a GPU has no active NVLink (its links all listed inactive, or NVML's
  "all links are inActive") on a node whose other GPUs should reach it over NVLink: an NVSwitch
  node (NVSwitch devices on the PCI bus), or GPUs of the same model with active links that `topo -m`
  shows joined all to all (a mesh of 3 or more, as on HGX/DGX boards). A workstation with a bridged
  pair beside an unbridged GPU is not flagged: nothing says that GPU has a partner.
* nvlink_below_matrix (critical): topo -m says NV# between two GPUs but one of them has fewer
  than # active links in `nvlink -s`.
* nvlink_speed_mixed (warning): a GPU's active links run at different speeds.
* pcie_width_reduced (warning): PCIe link width below its max (x8 instead of x16). nvidia-smi
  documents both current gen and width as "may be reduced when the GPU is not in use", but in
  practice idle GPUs drop the generation, not the lanes: a narrow link is the usual sign of a badly
  seated card, riser or slot, so it is a warning (not critical: confirm under load). A reduced
  generation on the same GPU is folded into this finding.
* pcie_gen_below_max (info): PCIe generation below its max with full width: the idle power-saving
  downshift, expected at probe time (bench measures bandwidth under load). "max" is
  pcie.link.gen.max, the most the GPU AND the slot can do, so a Gen5 GPU in a Gen4 slot is not flagged.
* p2p_not_ok: topo -p2p r/w reports a status other than OK for GPU pairs (one finding per link
  class and failing modes, listing the pairs): critical where the pair
  is NVLink-connected (P2P must work there), warning on PCIe pairs (consumer GPUs and some
  chipsets lack PCIe P2P; NCCL then goes through host memory). Modes n/a/p are only judged on
  NVLink pairs (NVLink P2P, atomics and properties are "NS" on PCIe pairs by design).
* gpu_count_low (critical) / gpu_count_high (info): GPUs visible to nvidia-smi vs expected.
* nvml_driver_mismatch (critical): "Failed to initialize NVML: Driver/library version mismatch"
  (user-space library upgraded without reloading the kernel module: reboot or reload nvidia).
* nvml_failed (critical): other NVML/driver communication failures; probe_failed (warning): a
  probe command failed for another reason.
* xid (critical or warning by Xid number): NVRM Xid errors in the kernel log since boot; a GPU
  that "has fallen off the bus" without an Xid line (newer drivers) counts as Xid 79.
* kernel_log_unreadable (info): the kernel log could not be read (containers refuse dmesg).
* fabric_not_ready (critical): a GPU's NVSwitch fabric state is not Completed/Success.
* fabric_manager_not_running (critical): NVSwitch devices on the node's PCI bus but no
  nv-fabricmanager process (GPUs on NVSwitch systems cannot use NVLink without it).
* acs_enabled (warning): ACS source validation/redirect on a PCIe bridge above a GPU, which
  routes GPU peer traffic up through the root complex (or blocks it).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Literal, TypedDict

SEVERITIES = ("critical", "warning", "info")


class Finding(TypedDict):
    """finding()'s answer, wherever a finding is made (the keys a caller adds by keyword, such as
    source, come beside these); a reader of a node's findings checks them against it (core/shape.py)."""

    severity: Literal["critical", "warning", "info"]  # SEVERITIES
    code: str
    gpus: list[int]
    message: str


# Common Xid numbers: (severity, short meaning). From NVIDIA's Xid catalogue.
XID_MEANINGS = {
    13: ("warning", "graphics engine exception (often an application fault)"),
    31: ("warning", "GPU memory page fault (often an application fault)"),
    43: ("warning", "GPU stopped processing (a user application faulted)"),
    45: ("warning", "preemptive cleanup after a previous error (processes killed)"),
    48: ("critical", "double-bit ECC error"),
    63: ("warning", "ECC page retirement or row remapping recorded"),
    64: ("critical", "ECC page retirement or row remapping failed"),
    74: ("critical", "NVLink error"),
    79: ("critical", "GPU has fallen off the bus"),
    92: ("warning", "high single-bit ECC error rate"),
    94: ("warning", "contained ECC error (the faulting application was stopped)"),
    95: ("critical", "uncontained ECC error (GPU reset needed)"),
    119: ("critical", "GSP RPC timeout"),
    120: ("critical", "GSP error"),
}

XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})[^)]*\):\s*(\d+)\s*,?\s*(.*)"
)
FALLEN_PCI_RE = re.compile(r"\b([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\b")
NVML_MISMATCH_RE = re.compile(r"Driver/library version mismatch", re.IGNORECASE)
NVML_FAILED_RE = re.compile(
    r"Failed to initialize NVML|couldn't communicate with the NVIDIA driver|No devices were found",
    re.IGNORECASE,
)

LSPCI_HEADER_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])\s+"
    r"(?P<classname>[^:\[]+?)(?:\s*\[(?P<classcode>[0-9a-fA-F]{4})\])?:\s*(?P<rest>.*)$"
)
LSPCI_IDS_RE = re.compile(r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]")
LSPCI_BUS_RE = re.compile(
    r"Bus: primary=([0-9a-fA-F]+), secondary=([0-9a-fA-F]+), subordinate=([0-9a-fA-F]+)"
)
ACS_CTL_RE = re.compile(r"ACSCtl:\s*(.*)$")
ACS_FLAG_RE = re.compile(r"(\w+)([+-])")
NVIDIA_VENDOR = "10de"
GPU_CLASSES = {"0300", "0302"}
NVSWITCH_CLASS = "0680"
BRIDGE_CLASS = "0604"


def finding(severity, code, message, gpus=(), **extra) -> Finding:
    """The one shape of a finding, wherever it is made: {severity, code, gpus (sorted indexes),
    message (one line)}, plus what the caller adds by keyword (source: the part of a run that
    found it, nodes, evidence: the line it rests on, ...)."""
    if severity not in SEVERITIES:
        raise ValueError(f"finding: severity {severity!r} is not one of {SEVERITIES}")
    return {
        "severity": severity,
        "code": code,
        "gpus": sorted(gpus),
        "message": " ".join(message.split()),
        **extra,
    }


class GpuIdentity(TypedDict, total=False):
    """How a finding names its GPU (gpuhealth.identity): all four keys for a finding about one
    GPU (a key nvidia-smi did not report is None), none ({}) for a finding about no one GPU
    (gpu_health_incomplete)."""

    index: int | None
    bus_id: str | None
    uuid: str | None
    serial: str | None


class GpuFinding(TypedDict):
    """A GPU health finding as wireup.probe.gpuhealth makes it (gpu_finding, findings): finding()'s keys
    plus the part that found it, what to do (gpuhealth.REMEDIATIONS) and the GPU. The one shape
    wireup-check's rules (quick.gpu_health_problems) and its metrics (promtext) read;
    tests/unit/test_checkrun.py holds gpuhealth's real findings to it."""

    severity: str
    code: str
    gpus: list[int]
    message: str
    source: str
    remediation: str
    gpu: GpuIdentity


def _bus_key(text):
    """'00000000:3B:00.0', '0000:3b:00', 'PCI:0000:3b:00' -> '3b:00' (bus:device, lower case)."""
    m = re.search(r"([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?$", text.strip())
    return f"{m.group(1)}:{m.group(2)}".lower() if m else text.strip().lower()


def parse_xid(text):
    """NVRM Xid lines of a kernel log -> [{pci, xid, count, severity, meaning, detail}], by PCI and Xid."""
    if text is None:
        return []
    seen = {}
    lines = text.splitlines()
    for line in lines:
        m = XID_RE.search(line)
        if not m:
            continue
        key = (m.group(1).lower(), int(m.group(2)))
        if key not in seen:
            seen[key] = _xid_entry(key, m.group(3).strip()[:120])
        seen[key]["count"] += 1
    for key in _fallen_off_keys(lines):
        if key not in seen:  # an Xid 79 line for the same GPU already says it
            seen[key] = dict(
                _xid_entry(key, "NVRM: fallen off the bus and is not responding to commands (no Xid line)"),
                count=1,
            )
    return list(seen.values())


def _xid_entry(key, detail):
    severity, meaning = XID_MEANINGS.get(key[1], ("warning", "see NVIDIA's Xid catalogue"))
    return {
        "pci": key[0],
        "xid": key[1],
        "count": 0,
        "severity": severity,
        "meaning": meaning,
        "detail": detail,
    }


def _fallen_off_keys(lines):
    """(pci, 79) of each GPU the log says fell off the bus without an Xid line. Newer drivers (seen
    on 570.158.01) may report a lost GPU over several lines: "NVRM: The NVIDIA GPU 0000:b3:00.0 /
    NVRM: (PCI ID: ...) installed in this system has / NVRM: fallen off the bus and is not
    responding to commands." It is Xid 79 all the same."""
    keys = []
    for number, line in enumerate(lines):
        if "fallen off the bus" not in line or "NVRM" not in line or XID_RE.search(line):
            continue
        found = FALLEN_PCI_RE.findall(" ".join(lines[max(number - 2, 0) : number + 1]))
        if found:
            keys.append((found[-1].lower(), 79))
    return keys


def parse_lspci(text):
    """``lspci -D -nn -vvv`` -> [{address, bus, class_code, class_name, vendor, device, secondary,
    subordinate, acs_ctl: {flag: bool} | None, caps_readable}]."""
    if text is None:
        return []
    devices = []
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            current = _lspci_device(line)
            devices += [current] if current else []
        elif current is not None:
            _lspci_detail(current, line.strip())
    return devices


def _lspci_device(line):
    """A device from its header line (None when the line is not one)."""
    m = LSPCI_HEADER_RE.match(line)
    if not m:
        return None
    ids = LSPCI_IDS_RE.findall(m.group("rest"))
    vendor, device = ids[-1] if ids else (None, None)
    if vendor is None and "NVIDIA" in m.group("rest"):
        vendor = NVIDIA_VENDOR
    domain = (m.group("domain") or "0000").lower()
    return {
        "address": f"{domain}:{m.group('bus')}:{m.group('dev')}.{m.group('fn')}".lower(),
        "domain": domain,
        "bus": int(m.group("bus"), 16),
        "class_code": (m.group("classcode") or "").lower() or None,
        "class_name": m.group("classname").strip(),
        "vendor": vendor.lower() if vendor else None,
        "device": device.lower() if device else None,
        "description": m.group("rest").strip(),
        "secondary": None,
        "subordinate": None,
        "acs_ctl": None,
        "caps_readable": True,
    }


def _lspci_detail(device, stripped):
    """What one indented line says of its device: unreadable capabilities, the bus range, ACSCtl."""
    if "<access denied>" in stripped:
        device["caps_readable"] = False
    _lspci_bus_range(device, stripped)
    m = ACS_CTL_RE.search(stripped)
    if m:
        device["acs_ctl"] = {flag: sign == "+" for flag, sign in ACS_FLAG_RE.findall(m.group(1))}


def _lspci_bus_range(device, stripped):
    """A bridge's secondary and subordinate bus numbers, from its 'Bus:' line."""
    m = LSPCI_BUS_RE.search(stripped)
    if m:
        device["secondary"] = int(m.group(2), 16)
        device["subordinate"] = int(m.group(3), 16)


def is_gpu(dev):
    """Whether a parse_lspci device is an NVIDIA GPU (a 3D or VGA controller of vendor 10de)."""
    if dev["vendor"] != NVIDIA_VENDOR:
        return False
    if dev["class_code"]:
        return dev["class_code"] in GPU_CLASSES
    return dev["class_name"] in ("3D controller", "VGA compatible controller")


def _is_bridge(dev):
    return dev["class_code"] == BRIDGE_CLASS if dev["class_code"] else dev["class_name"] == "PCI bridge"


def is_nvswitch(dev):
    if dev["vendor"] != NVIDIA_VENDOR:
        return False
    if dev["class_code"]:
        return dev["class_code"] == NVSWITCH_CLASS
    return dev["class_name"] == "Bridge"


def acs_above_gpus(devices):
    """Bridges whose bus range holds a GPU and whose ACSCtl enables SrcValid or P2P redirects.

    Returns (bridges: [{address, flags, gpus: [gpu address]}], readable: bool). readable is False
    when lspci could not show capabilities (not root), so ACS is unknown.
    """
    gpus = [d for d in devices if is_gpu(d)]
    bridges = [d for d in devices if _is_bridge(d) and d["secondary"] is not None]
    readable = all(b["caps_readable"] for b in bridges)
    result = []
    for bridge in bridges:
        below = [
            g["address"]
            for g in gpus
            if g["domain"] == bridge["domain"] and bridge["secondary"] <= g["bus"] <= bridge["subordinate"]
        ]
        acs = bridge["acs_ctl"]
        if not below or not acs:
            continue
        on = [
            flag
            for flag in ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
            if acs.get(flag)
        ]
        if on:
            result.append({"address": bridge["address"], "flags": on, "gpus": below})
    return result, readable


def _gpu_index_by_bus(gpus):
    return {_bus_key(g["bus_id"]): g["index"] for g in gpus if g.get("bus_id")}


def _full_mesh(indexes, topology):
    """Whether ``topo -m`` joins every pair of these GPU indexes by NV#."""
    joined = {
        frozenset((int(link["a"][3:]), int(link["b"][3:])))
        for link in (topology or {}).get("links", [])
        if link.get("nvlinks")
    }
    ids = sorted(indexes)
    return all(frozenset((a, b)) in joined for i, a in enumerate(ids) for b in ids[i + 1 :])


def _nvlink_down_findings(topology, nvlink, nvswitches):
    """nvlink_gpu_down (see the module docstring)."""
    gpus = nvlink["gpus"]
    up = [g for g in gpus if g["active"]]
    down = [g for g in gpus if not g["active"] and (g["links"] or g.get("all_inactive_note"))]
    if not up or not down:
        return []
    models = {g["name"] for g in up}
    mesh = len(up) >= 3 and _full_mesh([g["index"] for g in up], topology)
    out = []
    for gpu in down:
        if not (nvswitches or (mesh and gpu["name"] in models)):
            continue
        how = f"all {len(gpu['links'])} links inactive" if gpu["links"] else "NVML: all links are inActive"
        peers = _gpu_list(g["index"] for g in up)
        why = f"{nvswitches} NVSwitch device(s) on the bus" if nvswitches else "joined all to all by NVLink"
        out.append(
            finding(
                "critical",
                "nvlink_gpu_down",
                f"GPU{gpu['index']}: no active NVLink ({how}) while {peers} have theirs ({why}): "
                "its traffic to them crosses PCIe and host memory; check the GPU's baseboard seating, "
                "the NVSwitch fabric and Fabric Manager, then the Xid log",
                [gpu["index"]],
            )
        )
    return out


def _nvlink_findings(topology, nvlink, nvswitches=0):
    if not nvlink:
        return []
    return [
        *_nvlink_down_findings(topology, nvlink, nvswitches),
        *(f for gpu in nvlink["gpus"] for f in _gpu_link_findings(gpu)),
        *_below_matrix_findings(topology, {g["index"]: g for g in nvlink["gpus"]}),
    ]


def _gpu_link_findings(gpu):
    """nvlink_inactive (some links down beside active ones) and nvlink_speed_mixed of one GPU."""
    out = []
    if gpu["active"] and gpu["inactive"]:
        links = ", ".join(str(n) for n in gpu["inactive_links"])
        out.append(
            finding(
                "critical",
                "nvlink_inactive",
                f"GPU{gpu['index']}: {gpu['inactive']} of {gpu['active'] + gpu['inactive']} NVLinks "
                f"inactive (links {links}); NVLink bandwidth is reduced",
                [gpu["index"]],
            )
        )
    if len(gpu["speeds_gbps"]) > 1:
        speeds = "/".join(f"{s:g}" for s in gpu["speeds_gbps"])
        message = f"GPU{gpu['index']}: active NVLinks run at different speeds ({speeds} GB/s)"
        out.append(finding("warning", "nvlink_speed_mixed", message, [gpu["index"]]))
    return out


def _below_matrix_findings(topology, by_index):
    """nvlink_below_matrix: topo -m says NV# for a pair, but a GPU of it has fewer active links."""
    out = []
    for link in (topology or {}).get("links", []):
        if not link["nvlinks"]:
            continue
        a, b = int(link["a"][3:]), int(link["b"][3:])
        short = [
            (i, by_index[i]["active"])
            for i in (a, b)
            if i in by_index and by_index[i]["active"] < link["nvlinks"]
        ]
        if short:
            detail = ", ".join(f"GPU{i} has {n} active" for i, n in short)
            message = f"GPU{a}-GPU{b}: topo -m says {link['class']} but {detail}"
            out.append(finding("critical", "nvlink_below_matrix", message, [a, b]))
    return out


def _gpu_list(indexes):
    return ", ".join(f"GPU{i}" for i in sorted(indexes))


def _pcie_low(gpu):
    """(gen, gen max, width, width max, gen below max, width below max) of a GPU's PCIe link."""
    p = gpu.get("pcie") or {}
    gen, gen_max = p.get("gen_current"), p.get("gen_max")
    width, width_max = p.get("width_current"), p.get("width_max")
    gen_low = isinstance(gen, int) and isinstance(gen_max, int) and gen < gen_max
    width_low = isinstance(width, int) and isinstance(width_max, int) and width < width_max
    return gen, gen_max, width, width_max, gen_low, width_low


def pcie_findings(gpus):
    """Width below max: a warning per GPU. Gen below max at full width: one info per (gen, max, width).
    The one copy of the rule: the topology check calls it on the node's GPUs, the GPU health read
    (gpuhealth) on each GPU of its read (both give {index, pcie: {gen_current, gen_max,
    width_current, width_max}})."""
    out, idle = [], {}
    for gpu in gpus:
        gen, gen_max, width, width_max, gen_low, width_low = _pcie_low(gpu)
        if width_low:
            extra = f", Gen{gen} of Gen{gen_max}" if gen_low else ""
            out.append(
                finding(
                    "warning",
                    "pcie_width_reduced",
                    f"GPU{gpu['index']}: PCIe link x{width} of x{width_max}{extra}; if it stays narrow under "
                    "load, reseat the GPU or check the slot/riser",
                    [gpu["index"]],
                )
            )
        elif gen_low:
            idle.setdefault((gen, gen_max, width), []).append(gpu["index"])
    return out + [
        finding(
            "info",
            "pcie_gen_below_max",
            f"{_gpu_list(indexes)}: PCIe Gen{gen} of Gen{gen_max} at x{width}; expected on an idle GPU "
            "(power saving), bench measures under load",
            indexes,
        )
        for (gen, gen_max, width), indexes in sorted(idle.items())
    ]


def _gpu_number(name):
    return int(name[3:])


def _p2p_findings(topology):
    """One finding per (link class, failing modes): the pairs that share them, listed."""
    groups = {}
    for (a, b), info in _p2p_failures(topology).items():
        key = (info["class"] or "unknown link", ", ".join(info["modes"]))
        groups.setdefault(key, []).append((a, b))
    out = []
    for (cls, modes), pairs in sorted(groups.items()):
        pairs.sort(key=lambda p: (_gpu_number(p[0]), _gpu_number(p[1])))
        nvlinked = cls.startswith("NV")
        listed = ", ".join(f"{a}-{b}" for a, b in pairs)
        out.append(
            finding(
                "critical" if nvlinked else "warning",
                "p2p_not_ok",
                f"P2P not OK ({modes}) over {cls} for {len(pairs)} GPU pair(s): {listed}"
                + ("" if nvlinked else "; NCCL falls back to host memory"),
                {_gpu_number(g) for pair in pairs for g in pair},
            )
        )
    return out


def _p2p_failures(topology):
    """{(a, b): {class, modes: ["r=CNS", ...]}} of the pairs whose P2P status is not OK (modes
    other than read and write only on NVLink pairs: on PCIe they are "NS" by design)."""
    classes = {(link["a"], link["b"]): link["class"] for link in topology.get("links", [])}
    bad = {}
    for mode, data in sorted((topology.get("p2p") or {}).items()):
        for pair in data["not_ok"]:
            cls = classes.get((pair["a"], pair["b"])) or classes.get((pair["b"], pair["a"]))
            if mode not in ("r", "w") and not (cls and cls.startswith("NV")):
                continue
            entry = bad.setdefault((pair["a"], pair["b"]), {"class": cls, "modes": []})
            entry["modes"].append(f"{mode}={pair['status']}")
    return bad


def classify_smi_error(text):
    """(code, first line) for an nvidia-smi failure text, or (None, None) when it names no NVML problem."""
    if not text:
        return None, None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if NVML_MISMATCH_RE.search(text):
        return "nvml_driver_mismatch", first
    if NVML_FAILED_RE.search(text):
        return "nvml_failed", first
    return None, first


@dataclasses.dataclass(frozen=True)
class NodeReads:
    """What findings() judges besides the topology and NVLink status (each read by the
    gpu_topology module): expected_gpus (0 skips the count check), found_gpus (GPUs nvidia-smi
    sees; None: the topology's), command_errors ({"topo -m": "stderr text", ...} of probes that
    failed), kernel_log (dmesg or journal text; None with kernel_log_readable False when refused),
    lspci (`lspci -D -nn -vvv` text or None), nvswitch_fabric_manager_running (whether an
    nv-fabricmanager process runs; None: unknown), nvswitches (NVSwitch devices on the node's PCI
    bus; None: count them in lspci)."""

    expected_gpus: int = 0
    found_gpus: int | None = None
    command_errors: dict | None = None
    kernel_log: str | None = None
    kernel_log_readable: bool = True
    lspci: str | None = None
    nvswitch_fabric_manager_running: bool | None = None
    nvswitches: int | None = None


def findings(topology=None, nvlink=None, **reads):
    """Apply the rules in this module's docstring; return findings sorted critical first.

    topology: build_topology()'s dict (gpus, links, p2p); nvlink: parse_nvlink_status()'s dict;
    reads: NodeReads' fields by name (a name it does not have is a TypeError)."""
    reads = NodeReads(**reads)
    expected = reads.expected_gpus
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise ValueError(f"findings: expected_gpus must be a non-negative integer, got {expected!r}")
    topology = topology or {}
    gpus = topology.get("gpus", [])
    devices = parse_lspci(reads.lspci)
    switches = len([d for d in devices if is_nvswitch(d)]) if reads.nvswitches is None else reads.nvswitches
    by_bus = _gpu_index_by_bus(gpus)
    out = [
        *_command_findings(reads.command_errors or {}),
        *_count_findings(expected, len(gpus) if reads.found_gpus is None else reads.found_gpus),
        *_nvlink_findings(topology, nvlink, switches),
        *pcie_findings(gpus),
        *_p2p_findings(topology),
        *_xid_findings(reads, by_bus),
        *_fabric_state_findings(gpus),
        *_fabric_manager_findings(switches, reads.nvswitch_fabric_manager_running),
        *_acs_findings(devices, by_bus),
    ]
    return sorted(out, key=lambda f: (SEVERITIES.index(f["severity"]), f["code"], f["gpus"]))


def _command_findings(errors):
    """nvml_driver_mismatch / nvml_failed once (the first NVML failure), probe_failed per command."""
    out, nvml_reported = [], False
    for command, text in sorted(errors.items()):
        code, first = classify_smi_error(text)
        if code is None:
            out.append(
                finding("warning", "probe_failed", f"`nvidia-smi {command}` failed: {first or 'no output'}")
            )
        elif not nvml_reported:
            nvml_reported = True
            out.append(finding("critical", code, _NVML_MESSAGES[code].format(first=first)))
    return out


_NVML_MESSAGES = {
    "nvml_driver_mismatch": (
        "NVML driver/library version mismatch: the user-space driver was upgraded without reloading "
        "the kernel module; reboot the node (or reload the nvidia modules)"
    ),
    "nvml_failed": "nvidia-smi cannot talk to the driver: {first}",
}


def _count_findings(expected, found):
    if expected and found < expected:
        return [
            finding(
                "critical",
                "gpu_count_low",
                f"{found} GPU(s) visible to nvidia-smi, {expected} expected "
                "(a GPU is missing, off the bus or held by another driver)",
            )
        ]
    if expected and found > expected:
        return [
            finding("info", "gpu_count_high", f"{found} GPU(s) visible to nvidia-smi, {expected} expected")
        ]
    return []


def _xid_findings(reads, by_bus):
    if not reads.kernel_log_readable or reads.kernel_log is None:
        return [
            finding(
                "info",
                "kernel_log_unreadable",
                "kernel log not read (dmesg and journalctl refused or disabled): Xid errors unchecked",
            )
        ]
    out = []
    for xid in parse_xid(reads.kernel_log):
        index = by_bus.get(_bus_key(xid["pci"]))
        who = f"GPU{index}" if index is not None else f"PCI {xid['pci']}"
        out.append(
            finding(
                xid["severity"],
                "xid",
                f"{who}: Xid {xid['xid']} x{xid['count']} since boot: {xid['meaning']}",
                [index] if index is not None else [],
            )
        )
    return out


def _fabric_state_findings(gpus):
    not_ready = {}
    for gpu in gpus:
        state, status = gpu.get("fabric_state"), gpu.get("fabric_status")
        if state in (None, "Not Supported"):
            continue
        if state != "Completed" or status not in (None, "Success"):
            not_ready.setdefault((state, status), []).append(gpu["index"])
    return [
        finding(
            "critical",
            "fabric_not_ready",
            f"{_gpu_list(indexes)}: NVSwitch fabric state {state!r}, status {status!r}; start "
            "nvidia-fabricmanager (its version must match the driver)",
            indexes,
        )
        for (state, status), indexes in sorted(not_ready.items(), key=lambda kv: str(kv[0]))
    ]


def _fabric_manager_findings(switches, running):
    if not switches or running is not False:
        return []
    message = (
        f"{switches} NVSwitch device(s) on the PCI bus but no nv-fabricmanager process; "
        "install and start nvidia-fabricmanager matching the driver"
    )
    return [finding("critical", "fabric_manager_not_running", message)]


def _acs_findings(devices, by_bus):
    acs, _readable = acs_above_gpus(devices)
    return [
        finding(
            "warning",
            "acs_enabled",
            f"ACS {'+'.join(bridge['flags'])} on bridge {bridge['address']} above "
            f"{', '.join(bridge['gpus'])}: GPU peer traffic is redirected to the root complex "
            "(disable ACS in BIOS or with setpci for P2P)",
            [by_bus[_bus_key(g)] for g in bridge["gpus"] if _bus_key(g) in by_bus],
        )
        for bridge in acs
    ]


def count_by_severity(items):
    counts = dict.fromkeys(SEVERITIES, 0)
    for item in items:
        counts[item["severity"]] += 1
    return counts
