"""GPU health from ``nvidia-smi -q -x`` (or the plain ``nvidia-smi -q`` text): pure Python, stdlib only.

Why nvidia-smi and not NVML for the health read: every node with an NVIDIA driver has nvidia-smi
(no venv, no pip package: the read runs in seconds, before pytorch_venv, and on the system
python3 of a node check); its XML is versioned by a DTD (``nvsmi_device_v13.dtd``); nvidia-smi
knows its own driver's field numbering (NVML's field ids for the clock-event counters moved
between header versions: 251-253 on driver 580, 269-271 in nvidia-ml-py 13.615's header); and a
stand-in ``nvidia-smi`` printing a captured XML is how the testbed shows a faulty GPU.

``parse(text)`` reads both formats into one shape (the XML's tags and the text's labels name the
same tree, so each field below has an XML path and a text path)::

    {"driver_version", "cuda_version", "attached_gpus", "format": "xml"|"text",
     "gpus": [{"index", "bus_id", "uuid", "serial", "name", "persistence_mode", "ecc_mode",
               "ecc": {"volatile": {...}, "aggregate": {...}, "sram_threshold_exceeded",
                       "channel_repair_pending", "tpc_repair_pending", "unrepairable_memory"},
               "retired_pages": {"single_bit", "double_bit", "pending"},
               "remapped_rows": {"correctable", "uncorrectable", "pending", "failure",
                                 "banks": {"max", "high", "partial", "low", "none"}},
               "recovery_action", "clock_event_reasons": {reason: bool},
               "clock_event_counters_us": {reason: int},
               "temperature": {"gpu", "memory"}, "power": {"draw", "limit", "default_limit"},
               "clocks": {"sm", "sm_max"},
               "pcie": {"replay_counter", "gen_current", "gen_max", "width_current", "width_max"}}]}

ECC counts per scope: ``corrected``/``uncorrected`` (totals), and ``sram_corrected``,
``sram_uncorrected``, ``dram_corrected``, ``dram_uncorrected`` where the driver splits them
(R515+; R535+ splits SRAM uncorrectable into parity and SEC-DED, summed here). Older drivers
print single/double bit totals: those become corrected/uncorrected. Anything not reported
(``N/A``, ``[N/A]``, ``Not Supported``, ``Unknown Error``, a missing tag, a mangled value) is None:
never a failure. ``index`` is the GPU's position in the document (nvidia-smi lists GPUs in its
index order, by PCI bus id). ``recovery_action`` is the driver's (R570+ ``gpu_recovery_action``:
none, reset, reboot, drain_p2p, drain_and_reset, ...), or derived from R535-R560's "GPU Reset
Status" (Reset Required -> reset, Drain and Reset Recommended -> drain_and_reset).

``findings(parsed, previous=None)`` applies the rules of the table ``RULES`` (roles/gpu_trial/
README.md repeats it); each finding has the project's shape (health.finding) plus
``source: "gpu_health"``, ``remediation`` (isolate | reset | reboot | monitor) and ``gpu``
({index, bus_id, uuid, serial}). ``previous`` is the health of the same GPUs in their last
passing run (a parse() result or its "gpus" list; matched by serial, else UUID): counters that
grew since then are ``monitor`` warnings.
"""

from __future__ import annotations

import re
import textwrap
import xml.etree.ElementTree as ET
from typing import TypedDict

from . import health


class _HealthGpuId(TypedDict):
    index: int
    bus_id: str | None
    uuid: str | None
    serial: str | None
    name: str | None


class HealthGpu(_HealthGpuId, total=False):
    """One GPU of parse() (the module docstring's fields; the parts are not typed deeper here)."""

    persistence_mode: bool | None
    ecc_mode: bool | None
    ecc: dict
    retired_pages: dict
    remapped_rows: dict
    recovery_action: str | None
    clock_event_reasons: dict
    clock_event_counters_us: dict
    temperature: dict
    power: dict
    clocks: dict
    pcie: dict


class HealthDoc(TypedDict):
    """parse()'s answer: what a node's health read gives the controller (gpurecord checks a node's
    against it before judging: shape.py)."""

    format: str
    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: list[HealthGpu]


class HealthRead(TypedDict):
    """wireup_gpu_health_info's answer (answer()); the gpu_trial role registers it as
    __gpu_trial_health_before and __gpu_trial_health_after."""

    changed: bool
    health: HealthDoc | None
    error: str
    findings: list[dict]
    summary: list[str]
    dcgmi: str


REMEDIATIONS = ("isolate", "reset", "reboot", "monitor")
MISSING = {
    "",
    "n/a",
    "[n/a]",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "requested functionality has been deprecated",
    "[insufficient permissions]",
    "insufficient permissions",
}
_GPU_HEADER_RE = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_TEXT_LINE_RE = re.compile(r"^( *)(\S[^:]*?)\s+:(?:\s(.*))?$")
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_GPU_MARK = "\x00gpu"  # a GPU header line; no label can be this ("Gpu : 0 %" is a utilisation line)
_TRUE = {"yes", "enabled", "active", "on"}
_FALSE = {"no", "disabled", "not active", "off"}


# ---------------------------------------------------------------- one tree for both formats
class Node:
    """One element of nvidia-smi's tree: its name (XML tag, or the text label in lower case),
    its value (None for a section) and its children in document order."""

    __slots__ = ("children", "name", "value")

    def __init__(self, name, value=None):
        self.name = name
        self.value = value
        self.children = []

    def child(self, name):
        for node in self.children:
            if node.name == name:
                return node
        return None

    def find(self, path):
        node = self
        for part in path.split("/"):
            node = node.child(part) if node is not None else None
        return node

    def descendants(self):
        for node in self.children:
            yield node
            yield from node.descendants()


def _from_xml(element):
    node = Node(element.tag, (element.text or "").strip() if len(element) == 0 else None)
    node.children = [_from_xml(child) for child in element]
    if element.get("id"):
        node.children.append(Node("@id", element.get("id")))
    return node


def _xml_tree(text):
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as err:
        raise ValueError(
            f"the output of `nvidia-smi -q -x` is not a whole XML document ({err}): cut off or mangled"
        ) from err
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"expected nvidia-smi's <nvidia_smi_log> document, got <{root.tag}>")
    return _from_xml(root)


def _text_lines(text):
    """(indent, name, value) per line of `nvidia-smi -q` that has a label; GPU headers as
    (0, _GPU_MARK, bus id)."""
    for raw in textwrap.dedent(text.expandtabs(4)).splitlines():
        header = _GPU_HEADER_RE.match(raw.strip()) if not raw.startswith(" ") else None
        if header:
            yield 0, _GPU_MARK, header.group(1)
            continue
        m = _TEXT_LINE_RE.match(raw)
        if m:
            yield len(m.group(1)), " ".join(m.group(2).lower().split()), (m.group(3) or "").strip()
        elif raw.strip() and not raw.strip().startswith(("=", "[...]", "...")):
            name = " ".join(raw.strip().lower().split())
            yield len(raw) - len(raw.lstrip(" ")), name, None


def _text_tree(text):
    """The indentation tree of `nvidia-smi -q`: a GPU header opens a GPU; deeper lines are the
    children of the nearest shallower one."""
    root = Node("nvidia_smi_log")
    stack = [(-1, root)]
    for indent, name, value in _text_lines(text):
        if name == _GPU_MARK:
            gpu = Node("gpu")
            gpu.children.append(Node("@id", value))
            root.children.append(gpu)
            stack = [(-1, root), (0, gpu)]
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        node = Node(name, value if value else None)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    if not root.children or not any(n.name in ("gpu", "driver version") for n in root.children):
        raise ValueError(
            "not the output of `nvidia-smi -q` (no 'Driver Version' line and no 'GPU <bus id>' section)"
        )
    return root


# ---------------------------------------------------------------- values
def _value(node):
    if node is None or node.value is None:
        return None
    text = " ".join(node.value.split())
    return None if text.lower() in MISSING else text


def _first(node, paths):
    """The first reported value among alternative paths (XML tags or text labels)."""
    for path in paths:
        value = _value(node.find(path))
        if value is not None:
            return value
    return None


def to_int(value):
    """'16x' -> 16, '39 C' -> 39, '0 us' -> 0, '0x19' -> None (not a count); None when unreadable."""
    if value is None:
        return None
    m = _NUMBER_RE.match(str(value))
    if not m or str(value).strip().lower().startswith("0x"):
        return None
    return int(float(m.group(1)))


def to_float(value):
    if value is None:
        return None
    m = _NUMBER_RE.match(str(value))
    return float(m.group(1)) if m else None


def to_bool(value):
    """Yes/No, Enabled/Disabled, Active/Not Active (a paster's note after it is ignored)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    for words, answer in ((_FALSE, False), (_TRUE, True)):
        for word in sorted(words, key=len, reverse=True):
            if text == word or text.startswith(word + " "):
                return answer
    return None


def _sum(values):
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# ---------------------------------------------------------------- fields
# Each field: (XML paths, text paths). Text labels are matched in lower case.
_ECC_PARTS = {
    "sram_corrected": (["sram_correctable"], ["sram correctable"]),
    "sram_uncorrected": (
        ["sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded"],
        ["sram uncorrectable", "sram uncorrectable parity", "sram uncorrectable sec-ded"],
    ),
    "dram_corrected": (["dram_correctable"], ["dram correctable"]),
    "dram_uncorrected": (["dram_uncorrectable"], ["dram uncorrectable"]),
    "single_bit": (["single_bit/total"], ["single bit/total"]),
    "double_bit": (["double_bit/total"], ["double bit/total"]),
}


def _ecc_scope(scope):
    """{corrected, uncorrected, sram_*, dram_*} of one scope node (volatile or aggregate)."""
    out = {}
    for key, (xml_paths, text_paths) in _ECC_PARTS.items():
        out[key] = _sum([to_int(_value(scope.find(p))) if scope else None for p in xml_paths + text_paths])
    corrected = _sum([out["sram_corrected"], out["dram_corrected"]])
    uncorrected = _sum([out["sram_uncorrected"], out["dram_uncorrected"]])
    return {
        "corrected": corrected if corrected is not None else out["single_bit"],
        "uncorrected": uncorrected if uncorrected is not None else out["double_bit"],
        **{k: v for k, v in out.items() if k not in ("single_bit", "double_bit")},
    }


# The ECC section's flags: their XML and text paths.
_ECC_FLAGS = {
    "sram_threshold_exceeded": ["aggregate/sram_threshold_exceeded", "aggregate/sram threshold exceeded"],
    "channel_repair_pending": ["channel_repair_pending", "channel repair pending"],
    "tpc_repair_pending": ["tpc_repair_pending", "tpc repair pending"],
    "unrepairable_memory": ["unrepairable_memory", "unrepairable memory"],
}


def _ecc(gpu):
    errors = gpu.find("ecc_errors") or gpu.find("ecc errors")
    out = {scope: _ecc_scope(errors.find(scope) if errors else None) for scope in ("volatile", "aggregate")}
    for key, paths in _ECC_FLAGS.items():
        out[key] = to_bool(_first(errors, paths)) if errors else None
    return out


def _retired_pages(gpu):
    pending = [
        to_bool(_first(gpu, [p]))
        for p in (
            "retired_pages/pending_blacklist",
            "retired_pages/pending_retirement",
            "retired pages/pending page blacklist",
            "retired pages/pending",
        )
    ]
    known = [p for p in pending if p is not None]
    return {
        "single_bit": to_int(
            _first(
                gpu,
                [
                    "retired_pages/multiple_single_bit_retirement/retired_count",
                    "retired pages/single bit ecc",
                ],
            )
        ),
        "double_bit": to_int(
            _first(gpu, ["retired_pages/double_bit_retirement/retired_count", "retired pages/double bit ecc"])
        ),
        "pending": any(known) if known else None,
    }


_BANKS = ("max", "high", "partial", "low", "none")


def _remapped_rows(gpu):
    def one(xml, text):
        return _first(gpu, [f"remapped_rows/{xml}", f"remapped rows/{text}"])

    banks = {
        level: to_int(
            one(
                f"row_remapper_histogram/row_remapper_histogram_{level}",
                f"bank remap availability histogram/{level}",
            )
        )
        for level in _BANKS
    }
    return {
        "correctable": to_int(one("remapped_row_corr", "correctable error")),
        "uncorrectable": to_int(one("remapped_row_unc", "uncorrectable error")),
        "pending": to_bool(one("remapped_row_pending", "pending")),
        "failure": to_bool(one("remapped_row_failure", "remapping failure occurred")),
        "banks": banks,
    }


_RECOVERY = {
    "none": "none",
    "reset": "reset",
    "gpu reset": "reset",
    "reboot": "reboot",
    "node reboot": "reboot",
    "drain p2p": "drain_p2p",
    "drain and reset": "drain_and_reset",
}


def _recovery_action(gpu):
    """The driver's recovery action (R570+), else R535-R560's reset status; None when neither says."""
    action = _first(gpu, ["gpu_recovery_action", "gpu recovery action"])
    if action is not None:
        text = action.lower()
        return _RECOVERY.get(text, re.sub(r"[^a-z0-9]+", "_", text).strip("_") or None)
    reset = to_bool(_first(gpu, ["gpu_reset_status/reset_required", "gpu reset status/reset required"]))
    drain = to_bool(
        _first(
            gpu,
            ["gpu_reset_status/drain_and_reset_recommended", "gpu reset status/drain and reset recommended"],
        )
    )
    if drain:
        return "drain_and_reset"
    if reset:
        return "reset"
    return "none" if (reset is False or drain is False) else None


_REASON_ALIASES = {
    "idle": "gpu_idle",
    "display_clock_setting": "display_clocks_setting",
    "sw_therm_slowdown": "sw_thermal_slowdown",
    "hw_therm_slowdown": "hw_thermal_slowdown",
    "hw_power_brake": "hw_power_brake_slowdown",
    "sw_power_capping": "sw_power_cap",
}
_REASON_PREFIXES = ("clocks_event_reasons_counters_", "clocks_event_reason_", "clocks_throttle_reason_")


def reason_key(name):
    """A clock-event reason's key from an XML tag or a text label ('HW Slowdown' -> hw_slowdown)."""
    key = name.lower()
    for prefix in _REASON_PREFIXES:
        key = key.removeprefix(prefix)
    key = re.sub(r"[^a-z0-9]+", "_", key).strip("_")
    return _REASON_ALIASES.get(key, key)


# The section's names (XML and text, before and after NVIDIA renamed throttle reasons).
_REASON_SECTIONS = (
    "clocks_event_reasons",
    "clocks_throttle_reasons",
    "clocks event reasons",
    "clocks throttle reasons",
)


def _reasons(gpu):
    section = None
    for name in _REASON_SECTIONS:
        section = section or gpu.child(name)
    if section is None:
        return {}
    return {reason_key(n.name): to_bool(_value(n)) for n in section.descendants() if n.value is not None}


def _counters(gpu):
    section = gpu.child("clocks_event_reasons_counters") or gpu.child("clocks event reasons counters")
    if section is None:
        return {}
    return {reason_key(n.name): to_int(_value(n)) for n in section.children}


def _power(gpu):
    readings = ["gpu_power_readings", "power_readings", "gpu power readings", "power readings"]

    def pick(names):
        return to_float(_first(gpu, [f"{r}/{n}" for r in readings for n in names]))

    return {
        "draw": pick(
            [
                "power_draw",
                "average_power_draw",
                "instant_power_draw",
                "power draw",
                "average power draw",
                "instantaneous power draw",
            ]
        ),
        "limit": pick(
            [
                "current_power_limit",
                "enforced_power_limit",
                "power_limit",
                "current power limit",
                "enforced power limit",
                "power limit",
            ]
        ),
        "default_limit": pick(["default_power_limit", "default power limit"]),
    }


def _pcie(gpu):
    link = ["pci/pci_gpu_link_info", "pci/gpu link info"]

    def pick(xml, text):
        return to_int(_first(gpu, [f"{link[0]}/{xml}", f"{link[1]}/{text}"]))

    return {
        "replay_counter": to_int(_first(gpu, ["pci/replay_counter", "pci/replays since reset"])),
        "gen_current": pick("pcie_gen/current_link_gen", "pcie generation/current"),
        "gen_max": pick("pcie_gen/max_link_gen", "pcie generation/max"),
        "width_current": pick("link_widths/current_link_width", "link width/current"),
        "width_max": pick("link_widths/max_link_width", "link width/max"),
    }


def _gpu(index, gpu):
    return {
        "index": index,
        "bus_id": _first(gpu, ["@id", "pci/pci_bus_id", "pci/bus id"]),
        "uuid": _first(gpu, ["uuid", "gpu uuid"]),
        "serial": _first(gpu, ["serial", "serial number"]),
        "name": _first(gpu, ["product_name", "product name"]),
        "persistence_mode": to_bool(_first(gpu, ["persistence_mode", "persistence mode"])),
        "ecc_mode": to_bool(_first(gpu, ["ecc_mode/current_ecc", "ecc mode/current"])),
        "ecc": _ecc(gpu),
        "retired_pages": _retired_pages(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "recovery_action": _recovery_action(gpu),
        "clock_event_reasons": _reasons(gpu),
        "clock_event_counters_us": _counters(gpu),
        "temperature": {
            "gpu": to_int(_first(gpu, ["temperature/gpu_temp", "temperature/gpu current temp"])),
            "memory": to_int(_first(gpu, ["temperature/memory_temp", "temperature/memory current temp"])),
        },
        "power": _power(gpu),
        "clocks": {
            "sm": to_int(_first(gpu, ["clocks/sm_clock", "clocks/sm"])),
            "sm_max": to_int(_first(gpu, ["max_clocks/sm_clock", "max clocks/sm"])),
        },
        "pcie": _pcie(gpu),
    }


def parse(text) -> HealthDoc:
    """``nvidia-smi -q -x`` (XML) or ``nvidia-smi -q`` (text) -> the dict of this module's docstring.

    ValueError (saying what is wrong) when the text is neither: empty, an XML document cut off,
    text without nvidia-smi's labels. A cut-off text keeps the GPUs and fields it has."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("nvidia-smi printed nothing")
    is_xml = text.lstrip().startswith("<")
    root = _xml_tree(text) if is_xml else _text_tree(text)
    gpus = [c for c in root.children if c.name == "gpu"]
    attached = to_int(_first(root, ["attached_gpus", "attached gpus"]))
    return {
        "format": "xml" if is_xml else "text",
        "driver_version": _first(root, ["driver_version", "driver version"]),
        "cuda_version": _first(root, ["cuda_version", "cuda version"]),
        "attached_gpus": attached,
        "gpus": [_gpu(i, g) for i, g in enumerate(gpus)],
    }


# ---------------------------------------------------------------- findings
# code: (severity, remediation, what it means). roles/gpu_trial/README.md repeats this table.
RULES = {
    "gpu_row_remap_failure": ("critical", "isolate", "row remapping failed: no spare row left (RMA)"),
    "gpu_ecc_uncorrectable": ("critical", "isolate", "uncorrectable ECC errors since the driver loaded"),
    "gpu_sram_threshold_exceeded": ("critical", "isolate", "aggregate SRAM errors above NVIDIA's threshold"),
    "gpu_unrepairable_memory": ("critical", "isolate", "the driver marks the GPU memory unrepairable"),
    "gpu_row_remap_pending": ("critical", "reset", "a row remap waits for a GPU reset"),
    "gpu_page_retirement_pending": ("critical", "reset", "a page retirement waits for a GPU reset"),
    "gpu_repair_pending": ("critical", "reset", "a channel/TPC repair waits for a GPU reset"),
    "gpu_recovery_action": ("critical", "reset", "the driver asks for a recovery action"),
    "gpu_throttling_now": ("warning", "monitor", "clocks held down by a hardware or thermal reason"),
    "gpu_power_limit_reduced": ("warning", "monitor", "power limit below the GPU's default"),
    "gpu_ecc_corrected_growing": ("warning", "monitor", "corrected ECC errors grew since the last pass"),
    "gpu_row_remaps_growing": ("warning", "monitor", "remapped rows grew since the last pass"),
    "gpu_retired_pages_growing": ("warning", "monitor", "retired pages grew since the last pass"),
    "gpu_pcie_replays_growing": ("warning", "monitor", "PCIe replays grew since the last pass"),
    "gpu_health_incomplete": ("warning", "monitor", "nvidia-smi listed fewer GPUs than attached"),
    "gpu_ecc_uncorrectable_history": ("info", "monitor", "lifetime uncorrectable ECC errors, none now"),
    "gpu_ecc_corrected": ("info", "monitor", "corrected ECC errors since the driver loaded"),
    "gpu_row_remaps": ("info", "monitor", "rows remapped over the GPU's life"),
    "gpu_retired_pages": ("info", "monitor", "pages retired over the GPU's life"),
    "gpu_pcie_replays": ("info", "monitor", "PCIe link replays since the driver loaded"),
    "gpu_persistence_off": ("info", "monitor", "persistence mode off"),
    "gpu_ecc_disabled": ("info", "monitor", "ECC disabled"),
}
_RECOVERY_REMEDIATION = {"reboot": "reboot", "system_reboot": "reboot"}
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def identity(gpu):
    """The keys that name a GPU in findings and records: {index, bus_id, uuid, serial}."""
    return {k: gpu.get(k) for k in ("index", "bus_id", "uuid", "serial")}


def label(gpu):
    """'GPU3 (00000000:19:00.0, S/N 1650124031592)': how findings name a GPU."""
    ids = [gpu.get("bus_id") or "", f"S/N {gpu['serial']}" if gpu.get("serial") else gpu.get("uuid") or ""]
    ids = [i for i in ids if i]
    return f"GPU{gpu.get('index')}" + (f" ({', '.join(ids)})" if ids else "")


def short(found):
    """A GPU finding as one short phrase for the launch gate's reason and Slurm's drain reason
    ('' for a finding about no GPU): 'GPU0 S/N 1653724057182: row_remap_pending -> reset'."""
    gpu = found.get("gpu") or {}
    if not gpu or not found.get("remediation"):
        return ""
    who = f"S/N {gpu['serial']}" if gpu.get("serial") else gpu.get("uuid") or gpu.get("bus_id") or ""
    code = str(found.get("code", "")).removeprefix("gpu_")
    return " ".join(f"GPU{gpu.get('index')} {who}".split()) + f": {code} -> {found['remediation']}"


def gpu_finding(gpu, code, message, *, source="gpu_health", remediation=None, severity=None):
    """One finding about one GPU in the project's shape (health.finding) plus source, remediation
    and the GPU's identity. severity/remediation default to RULES[code]."""
    rule = RULES.get(code, ("warning", "monitor", ""))
    out = health.finding(
        severity or rule[0], code, message, [gpu["index"]] if gpu.get("index") is not None else []
    )
    return dict(out, source=source, remediation=_checked(remediation or rule[1]), gpu=identity(gpu))


def _checked(remediation):
    """remediation when it is one of REMEDIATIONS, else ValueError."""
    if remediation not in REMEDIATIONS:
        raise ValueError(f"remediation {remediation!r} is not one of {REMEDIATIONS}")
    return remediation


def _memory_findings(gpu):
    name, ecc, rows, pages = label(gpu), gpu["ecc"], gpu["remapped_rows"], gpu["retired_pages"]
    volatile, aggregate = ecc["volatile"], ecc["aggregate"]
    out = []
    checks = (
        (
            rows["failure"],
            "gpu_row_remap_failure",
            f"{name}: row remapping FAILED: isolate it and RMA the GPU",
        ),
        (
            (volatile["uncorrected"] or 0) > 0,
            "gpu_ecc_uncorrectable",
            f"{name}: {volatile['uncorrected']} uncorrectable ECC error(s) since the driver loaded: "
            "isolate it, then reset it and run dcgmi diag -r 3",
        ),
        (
            ecc["sram_threshold_exceeded"],
            "gpu_sram_threshold_exceeded",
            f"{name}: aggregate SRAM ECC errors exceeded NVIDIA's threshold: isolate it and RMA the GPU",
        ),
        (
            ecc["unrepairable_memory"],
            "gpu_unrepairable_memory",
            f"{name}: memory unrepairable: isolate it, RMA",
        ),
        (
            rows["pending"],
            "gpu_row_remap_pending",
            f"{name}: row remap pending ({rows['uncorrectable'] or 0} uncorrectable, "
            f"{rows['correctable'] or 0} correctable rows): reset the GPU (nvidia-smi -r) or reboot "
            "to apply it",
        ),
        (
            pages["pending"],
            "gpu_page_retirement_pending",
            f"{name}: page retirement pending: reset the GPU (nvidia-smi -r) or reboot to retire the page",
        ),
        (
            ecc["channel_repair_pending"] or ecc["tpc_repair_pending"],
            "gpu_repair_pending",
            f"{name}: memory channel/TPC repair pending: reset the GPU or reboot to apply it",
        ),
    )
    out += [gpu_finding(gpu, code, message) for hit, code, message in checks if hit]
    if not volatile["uncorrected"] and (aggregate["uncorrected"] or 0) > 0:
        out.append(
            gpu_finding(
                gpu,
                "gpu_ecc_uncorrectable_history",
                f"{name}: {aggregate['uncorrected']} uncorrectable ECC error(s) over its life, none since "
                "the driver loaded (repaired by row remapping or page retirement)",
            )
        )
    return out


def _recovery_text(action):
    return "reboot the node" if _RECOVERY_REMEDIATION.get(action) else "drain its jobs and reset the GPU"


def _state_findings(gpu):
    """The driver's recovery action, throttling now, a lowered power limit: (hit, code, message,
    remediation or None for the rule's) each, as one table."""
    name, action, power, clocks = label(gpu), gpu["recovery_action"], gpu["power"], gpu["clocks"]
    now = [r for r in THROTTLE_REASONS if gpu["clock_event_reasons"].get(r)]
    checks = (
        (
            action not in (None, "none"),
            "gpu_recovery_action",
            f"{name}: the driver's recovery action is {action}: {_recovery_text(action)}",
            _RECOVERY_REMEDIATION.get(action, "reset"),
        ),
        (
            bool(now),
            "gpu_throttling_now",
            f"{name}: clocks held down now by {', '.join(now)} (SM {clocks['sm'] or '?'} of "
            f"{clocks['sm_max'] or '?'} MHz): check cooling and the power supply",
            None,
        ),
        (
            bool(
                power["limit"] and power["default_limit"] and power["limit"] < 0.99 * power["default_limit"]
            ),
            "gpu_power_limit_reduced",
            f"{name}: power limit {power['limit'] or 0:.0f} W of its default "
            f"{power['default_limit'] or 0:.0f} W: figures will be lower (nvidia-smi -pl resets it)",
            None,
        ),
    )
    return [gpu_finding(gpu, code, message, remediation=fix) for hit, code, message, fix in checks if hit]


def _note_findings(gpu):
    name, out = label(gpu), []
    notes = (
        (
            (gpu["ecc"]["volatile"]["corrected"] or 0) > 0,
            "gpu_ecc_corrected",
            f"{name}: {gpu['ecc']['volatile']['corrected']} corrected ECC error(s) since the driver loaded",
        ),
        (
            (gpu["remapped_rows"]["correctable"] or 0) + (gpu["remapped_rows"]["uncorrectable"] or 0) > 0,
            "gpu_row_remaps",
            f"{name}: {gpu['remapped_rows']['correctable'] or 0} correctable and "
            f"{gpu['remapped_rows']['uncorrectable'] or 0} uncorrectable row remap(s) over its life",
        ),
        (
            (gpu["retired_pages"]["single_bit"] or 0) + (gpu["retired_pages"]["double_bit"] or 0) > 0,
            "gpu_retired_pages",
            f"{name}: {gpu['retired_pages']['single_bit'] or 0} single-bit and "
            f"{gpu['retired_pages']['double_bit'] or 0} double-bit retired page(s)",
        ),
        (
            (gpu["pcie"]["replay_counter"] or 0) > 0,
            "gpu_pcie_replays",
            f"{name}: {gpu['pcie']['replay_counter']} PCIe replay(s) since the driver loaded",
        ),
        (
            gpu["persistence_mode"] is False,
            "gpu_persistence_off",
            f"{name}: persistence mode off (the driver re-initialises the GPU for each job; "
            "nvidia-persistenced keeps it)",
        ),
        (gpu["ecc_mode"] is False, "gpu_ecc_disabled", f"{name}: ECC disabled: memory errors go undetected"),
    )
    out += [gpu_finding(gpu, code, message) for hit, code, message in notes if hit]
    return out


def _counts(gpu):
    rows, pages = gpu.get("remapped_rows") or {}, gpu.get("retired_pages") or {}
    return {
        "ecc corrected (lifetime)": ((gpu.get("ecc") or {}).get("aggregate") or {}).get("corrected"),
        "remapped rows": _sum([rows.get("correctable"), rows.get("uncorrectable")]),
        "retired pages": _sum([pages.get("single_bit"), pages.get("double_bit")]),
        "PCIe replays": (gpu.get("pcie") or {}).get("replay_counter"),
    }


_GROWTH_CODES = {
    "ecc corrected (lifetime)": "gpu_ecc_corrected_growing",
    "remapped rows": "gpu_row_remaps_growing",
    "retired pages": "gpu_retired_pages_growing",
    "PCIe replays": "gpu_pcie_replays_growing",
}


def _growth_findings(gpu, before):
    """Counters that grew since the GPU's last passing run ('monitor')."""
    now, then = _counts(gpu), _counts(before)
    out = []
    for what, code in _GROWTH_CODES.items():
        if isinstance(now[what], int) and isinstance(then[what], int) and now[what] > then[what]:
            out.append(
                gpu_finding(
                    gpu,
                    code,
                    f"{label(gpu)}: {what} grew from {then[what]} to {now[what]} since its last "
                    "passing run: watch it (a steady climb precedes uncorrectable errors)",
                )
            )
    return out


def previous_by_key(previous):
    """{serial or uuid: gpu health} of a parse() result or a list of GPU health dicts."""
    gpus = previous.get("gpus") if isinstance(previous, dict) else previous
    out = {}
    for gpu in [g for g in gpus or [] if isinstance(g, dict)]:
        for key in (gpu.get("serial"), gpu.get("uuid")):
            if key:
                out.setdefault(key, gpu)
    return out


def findings(parsed, previous=None):
    """The health findings of every GPU of a parse() result, critical first (RULES)."""
    before = previous_by_key(previous)
    out = []
    for gpu in parsed.get("gpus") or []:
        out += _memory_findings(gpu) + _state_findings(gpu) + _note_findings(gpu)
        old = before.get(gpu.get("serial")) or before.get(gpu.get("uuid"))
        if old:
            out += _growth_findings(gpu, old)
    attached, listed = parsed.get("attached_gpus"), len(parsed.get("gpus") or [])
    if isinstance(attached, int) and attached > listed:
        out.append(
            dict(
                health.finding(
                    "warning",
                    "gpu_health_incomplete",
                    f"nvidia-smi lists {listed} of {attached} attached GPUs (output cut off): the others "
                    "were not read",
                ),
                source="gpu_health",
                remediation="monitor",
                gpu={},
            )
        )
    order = health.SEVERITIES
    return sorted(out, key=lambda f: (order.index(f["severity"]), f["gpus"], f["code"]))


def answer(parsed, error, dcgmi=""):
    """wireup_gpu_health_info's answer (a HealthRead): the read (None when it failed, error says
    why), its findings, one line for the play output, and where dcgmi is ('' when not installed)."""
    found = findings(parsed) if parsed else []
    if error:
        line = f"GPU health not read: {error}"
    else:
        bad = [f for f in found if f["severity"] in ("critical", "warning")]
        line = f"{len(parsed['gpus'])} GPU(s), driver {parsed.get('driver_version')}: " + (
            "; ".join(f"{f['message']} [{f['remediation']}]" for f in bad) or "no health finding"
        )
    return {
        "changed": False,
        "health": parsed,
        "error": error,
        "findings": found,
        "summary": [line],
        "dcgmi": dcgmi,
    }
