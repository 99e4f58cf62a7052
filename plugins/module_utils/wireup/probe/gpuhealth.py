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
     "lost": [{"bus_id", "why"}],   # nvidia-smi's lines about GPUs it cannot open (lost_gpus)
     "gpus": [{"index", "bus_id", "uuid", "serial", "name", "persistence_mode", "ecc_mode",
               "ecc": {"volatile": {...}, "aggregate": {...}, "sram_threshold_exceeded",
                       "channel_repair_pending", "tpc_repair_pending", "unrepairable_memory"},
               "retired_pages": {"single_bit", "double_bit", "pending"},
               "remapped_rows": {"correctable", "uncorrectable", "pending", "failure",
                                 "banks": {"max", "high", "partial", "low", "none"}},
               "recovery_action", "clock_event_reasons": {reason: bool},
               "clock_event_counters_us": {reason: int},   # COUNTERS: one name in both formats
               "temperature": {"gpu", "memory"}, "power": {"draw", "limit", "default_limit"},
               "clocks": {"sm", "sm_max"},
               "pcie": {"replay_counter", "gen_current", "gen_max", "width_current", "width_max"}}]}

``read(text, stderr=, lspci=, kernel_log=)`` (wireup_gpu_health_info's read) adds ``pci_gpus`` (the
NVIDIA GPUs lspci lists) and ``fallen`` (the GPUs the kernel log says fell off the bus, Xid 79), as
``pci_address`` writes them; None where not read. A read is refused (ValueError) over MAX_BYTES,
deeper than MAX_DEPTH, with more than MAX_ELEMENTS elements or lines or MAX_GPUS GPUs, or with XML
entities: the tree is built as the document streams in, never recursively.

ECC counts per scope: ``corrected``/``uncorrected`` (totals), and ``sram_corrected``,
``sram_uncorrected``, ``dram_corrected``, ``dram_uncorrected`` where the driver splits them
(R515+; R535+ splits SRAM uncorrectable into parity and SEC-DED, summed here). Older drivers
print single/double bit totals: those become corrected/uncorrected. Anything not reported
(``N/A``, ``[N/A]``, ``Not Supported``, ``Unknown Error``, ``Not Found``, a missing tag, a mangled
value) is None: never a failure; a placeholder serial (``0``, ``0000000000000``) is None too.
``index`` is the GPU's position in the document (nvidia-smi lists GPUs in its index order, by PCI
bus id). ``recovery_action`` is the driver's (R570+ ``gpu_recovery_action``:
none, reset, reboot, drain_p2p, drain_and_reset, ...), or derived from R535-R560's "GPU Reset
Status" (Reset Required -> reset, Drain and Reset Recommended -> drain_and_reset).

``findings(parsed, previous=None)`` applies the rules of the table ``RULES`` (roles/gpu_trial/
README.md repeats it): ``gpu_findings`` per GPU (the PCIe link by the topology check's own rule,
health.pcie_findings) and ``node_findings`` (``gpu_lost``: a GPU the node has that nvidia-smi cannot
read); each finding has the project's shape (health.finding) plus ``source: "gpu_health"``,
``remediation`` (isolate | reset | reboot | monitor) and ``gpu`` ({index, bus_id, uuid, serial}; {}
for a node finding). ``previous`` is the health of the same GPUs in their last passing run (a
parse() result or its "gpus" list; matched by UUID, ``gpu_key``, never by serial): counters that
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
    against it before judging: core/shape.py)."""

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
    "not found",
    "[not found]",
    "unknown",
}
# What a read may be (issue 35): nvidia-smi's real output is a few hundred KB even on 16 GPUs (54 KB
# for our 2x H200) and nests about 7 levels deep. Anything bigger, deeper or with more GPUs is refused
# before it is read (a 12 MB document once took 151 s and 5.6 GB; a deep one crashed the reader).
MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_GPUS = 64
MAX_ELEMENTS = 50_000  # elements or labelled lines: a 16-GPU read has about 9,000
_LOST_RE = re.compile(r"Unable to determine the device handle for (.*)", re.IGNORECASE)
_BUS_IN_RE = re.compile(r"[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_XML_START_RE = re.compile(r"^\s*<(?:\?xml|!DOCTYPE|nvidia_smi_log)", re.MULTILINE)
_PCI_RE = re.compile(r"(?:PCI:)?(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?")
# A GPU's UUID as NVML prints it; its history is keyed by it (never by the serial: boards with two
# GPUs share one, and some cards print 0).
UUID_RE = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_GPU_HEADER_RE = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_TEXT_LINE_RE = re.compile(r"^( *)(\S[^:]*?)\s+:(?:\s(.*))?$")
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_GPU_MARK = "\x00gpu"  # a GPU header line; no label can be this ("Gpu : 0 %" is a utilisation line)
_TRUE = {"yes", "enabled", "active", "on"}
_FALSE = {"no", "disabled", "not active", "off"}


# ---------------------------------------------------------------- one tree for both formats
class Node:
    """One element of nvidia-smi's tree: its name (XML tag, or the text label in lower case),
    its value (None for a section) and its children in document order. child() looks a name up
    in a dict made at its first call (after the tree is built), so a read costs the same per
    field whatever the number of siblings."""

    __slots__ = ("_index", "children", "name", "value")

    def __init__(self, name, value=None):
        self.name = name
        self.value = value
        self.children = []
        self._index = None

    def child(self, name):
        if self._index is None:
            self._index = {}
            for node in self.children:
                self._index.setdefault(node.name, node)
        return self._index.get(name)

    def find(self, path):
        node = self
        for part in path.split("/"):
            node = node.child(part) if node is not None else None
        return node

    def descendants(self):
        for node in self.children:
            yield node
            yield from node.descendants()


def _too_deep(what):
    return ValueError(
        f"{what} nests deeper than {MAX_DEPTH} levels (nvidia-smi's own output nests about 7): "
        "refused, not parsed"
    )


def _count(seen, name):
    """seen + 1, or ValueError once a read has more than MAX_ELEMENTS elements (or lines)."""
    if seen >= MAX_ELEMENTS:
        raise ValueError(
            f"the output of nvidia-smi has more than {MAX_ELEMENTS:,} {name} (a 16-GPU read has about "
            "9,000): refused, not parsed"
        )
    return seen + 1


def _too_many_gpus(count):
    return ValueError(f"nvidia-smi listed {count} GPUs, more than the {MAX_GPUS} a node may have: refused")


class _XmlBuilder:
    """The target of ET.XMLParser: builds the Node tree as the document streams in (no element
    tree, no recursion), refusing a document nested deeper than MAX_DEPTH."""

    def __init__(self):
        self.stack, self.texts, self.ids, self.root = [], [], [], None
        self.seen = self.gpus = 0

    def start(self, tag, attrib):
        if len(self.stack) >= MAX_DEPTH:
            raise _too_deep("the output of `nvidia-smi -q -x`")
        self.seen = _count(self.seen, "elements")
        if tag == "gpu" and len(self.stack) == 1:
            self.gpus += 1
            if self.gpus > MAX_GPUS:
                raise _too_many_gpus(f"{MAX_GPUS + 1} or more")
        node = Node(tag)
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)
        self.texts.append([])
        self.ids.append(attrib.get("id"))

    def data(self, text):
        if self.texts:
            self.texts[-1].append(text)

    def end(self, _tag):
        node, text, ident = self.stack.pop(), self.texts.pop(), self.ids.pop()
        if not node.children:
            node.value = "".join(text).strip()
        if ident:
            node.children.append(Node("@id", ident))

    def close(self):
        return self.root


def _xml_tree(text):
    if "<!ENTITY" in text:
        raise ValueError(
            "the output of `nvidia-smi -q -x` declares XML entities (nvidia-smi's never does): refused"
        )
    parser = ET.XMLParser(target=_XmlBuilder())
    try:
        parser.feed(text.strip())
        root = parser.close()
    except ET.ParseError as err:
        raise ValueError(
            f"the output of `nvidia-smi -q -x` is not a whole XML document ({err}): cut off or mangled"
        ) from err
    if root is None or root.name != "nvidia_smi_log":
        raise ValueError(
            f"expected nvidia-smi's <nvidia_smi_log> document, got <{getattr(root, 'name', '')}>"
        )
    return root


def _text_lines(text):
    """(indent, name, value) per line of `nvidia-smi -q` that has a label; GPU headers as
    (0, _GPU_MARK, bus id). nvidia-smi's lines about a GPU it cannot open (lost_gpus) are no label."""
    for raw in textwrap.dedent(text.expandtabs(4)).splitlines():
        header = _GPU_HEADER_RE.match(raw.strip()) if not raw.startswith(" ") else None
        if header:
            yield 0, _GPU_MARK, header.group(1)
            continue
        if _LOST_RE.search(raw):
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
    stack, seen = [(-1, root)], 0
    for indent, name, value in _text_lines(text):
        seen = _count(seen, "lines")
        if name == _GPU_MARK:
            gpu = Node("gpu")
            gpu.children.append(Node("@id", value))
            root.children.append(gpu)
            stack = [(-1, root), (0, gpu)]
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        if len(stack) > MAX_DEPTH:
            raise _too_deep("the output of `nvidia-smi -q`")
        node = Node(name, value if value else None)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    if not root.children or not any(n.name in ("gpu", "driver version") for n in root.children):
        raise ValueError(
            "not the output of `nvidia-smi -q` (no 'Driver Version' line and no 'GPU <bus id>' section)"
        )
    return root


def lost_gpus(text):
    """[{bus_id (as nvidia-smi wrote it, None when it named none), why}] of nvidia-smi's lines about
    a GPU it cannot open: 'Unable to determine the device handle for GPU 0000:0B:00.0: Unknown
    Error', '... for GPU1: 0000:34:00.0: Unknown Error' (R580+), '...: GPU is lost. Reboot the
    system to recover this GPU'. nvidia-smi prints them beside the GPUs it can read."""
    out = []
    for line in str(text or "").splitlines():
        m = _LOST_RE.search(line)
        if not m:
            continue
        rest = m.group(1)
        bus = _BUS_IN_RE.search(rest)
        why = (rest[bus.end() :] if bus else rest.partition(":")[2]).strip(" :.")
        out.append({"bus_id": bus.group(0) if bus else None, "why": " ".join(why.split())[:100] or "lost"})
    return out


def _split_xml(text):
    """(lines before the XML document, the document) when the text is XML, else None. nvidia-smi
    may print the lines about GPUs it cannot open before the document."""
    m = _XML_START_RE.search(text)
    if not m or any(_GPU_HEADER_RE.match(line.strip()) for line in text[: m.start()].splitlines()):
        return None
    return text[: m.start()], text[m.start() :]


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
            "retired pages/pending page retirement",
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
    "hw_power_braking": "hw_power_brake_slowdown",
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


# The clock-event counters (µs each reason held the clocks since the driver loaded; R535+ XML, R550+
# text), each under the key of the reason it counts, one name in both paths. nvidia-smi's
# documentation names them "SW Power Capping", "Sync Boost", "SW Thermal Slowdown", "HW Thermal
# Slowdown", "HW Power Braking" (text) and clocks_event_reasons_counters_sw_power_cap, _sync_boost,
# _sw_therm_slowdown, _hw_therm_slowdown, _hw_power_brake (XML).
COUNTERS = {
    "sw_power_cap": ("clocks_event_reasons_counters_sw_power_cap", "sw power capping"),
    "sync_boost": ("clocks_event_reasons_counters_sync_boost", "sync boost"),
    "sw_thermal_slowdown": ("clocks_event_reasons_counters_sw_therm_slowdown", "sw thermal slowdown"),
    "hw_thermal_slowdown": ("clocks_event_reasons_counters_hw_therm_slowdown", "hw thermal slowdown"),
    "hw_power_brake_slowdown": ("clocks_event_reasons_counters_hw_power_brake", "hw power braking"),
}


def _counters(gpu):
    """{reason: µs or None} of the COUNTERS; {} where the driver prints no counters."""
    section = gpu.child("clocks_event_reasons_counters") or gpu.child("clocks event reasons counters")
    if section is None:
        return {}
    return {key: to_int(_first(section, list(paths))) for key, paths in COUNTERS.items()}


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


def _serial(value):
    """The board serial, None for a placeholder ('0', '0000000000000': cloud and GeForce cards)."""
    return None if value is None or re.fullmatch(r"0+", value) else value


def _gpu(index, gpu):
    return {
        "index": index,
        "bus_id": _first(gpu, ["@id", "pci/pci_bus_id", "pci/bus id"]),
        "uuid": _first(gpu, ["uuid", "gpu uuid"]),
        "serial": _serial(_first(gpu, ["serial", "serial number"])),
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
    text without nvidia-smi's labels, more than MAX_BYTES, nested deeper than MAX_DEPTH, more than
    MAX_GPUS GPUs, XML entities. A cut-off text keeps the GPUs and fields it has."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("nvidia-smi printed nothing")
    if len(text) > MAX_BYTES:
        raise ValueError(
            f"nvidia-smi printed {len(text):,} characters, over the {MAX_BYTES // 1048576} MiB a read may "
            "have (its real output is a few hundred KB even on 16 GPUs): refused, not parsed"
        )
    xml = _split_xml(text)
    root = _xml_tree(xml[1]) if xml else _text_tree(text)
    gpus = [c for c in root.children if c.name == "gpu"]
    if len(gpus) > MAX_GPUS:
        raise _too_many_gpus(len(gpus))
    return {
        "format": "xml" if xml else "text",
        "driver_version": _first(root, ["driver_version", "driver version"]),
        "cuda_version": _first(root, ["cuda_version", "cuda version"]),
        "attached_gpus": to_int(_first(root, ["attached_gpus", "attached gpus"])),
        "gpus": [_gpu(i, g) for i, g in enumerate(gpus)],
        "lost": lost_gpus(xml[0] if xml else text),
    }


def read(text, *, stderr="", lspci=None, kernel_log=None):
    """parse(text) with what else says a GPU is missing (wireup_gpu_health_info's read): the GPUs
    nvidia-smi could not open (its lines in stdout and stderr, ``lost``), the NVIDIA GPUs on the
    PCI bus (``pci_gpus``: NVIDIA 3D/VGA controllers in ``lspci -D -nn``; None when not read) and
    the GPUs the kernel log says fell off the bus since boot (``fallen``: Xid 79, health.parse_xid;
    None when not read). Addresses as pci_address writes them."""
    parsed = parse(text)
    parsed["lost"] = parsed["lost"] + lost_gpus(stderr)
    parsed["pci_gpus"] = (
        None
        if lspci is None
        else sorted({pci_address(d["address"]) for d in health.parse_lspci(lspci) if health.is_gpu(d)})
    )
    parsed["fallen"] = (
        None
        if kernel_log is None
        else sorted({pci_address(x["pci"]) for x in health.parse_xid(kernel_log) if x["xid"] == 79})
    )
    return parsed


def pci_address(text):
    """'00000000:19:00.0', '0000:19:00', 'PCI:0000:19:00' -> '0000:19:00' (domain, bus, device:
    how nvidia-smi, lspci and the kernel log name one slot); None when text is no PCI address."""
    m = _PCI_RE.fullmatch(str(text or "").strip())
    if not m:
        return None
    return f"{int(m.group(1) or '0', 16):04x}:{m.group(2)}:{m.group(3)}".lower()


# ---------------------------------------------------------------- findings
# code: (severity, remediation, what it means). roles/gpu_trial/README.md repeats this table.
RULES = {
    "gpu_lost": ("critical", "reboot", "a GPU nvidia-smi cannot read: fallen off the bus or lost (Xid 79)"),
    "gpu_row_remap_failure": ("critical", "isolate", "row remapping failed: no spare row left (RMA)"),
    "gpu_ecc_uncorrectable": ("critical", "isolate", "uncorrectable ECC errors since the driver loaded"),
    "gpu_sram_threshold_exceeded": ("critical", "isolate", "aggregate SRAM errors above NVIDIA's threshold"),
    "gpu_unrepairable_memory": ("critical", "isolate", "the driver marks the GPU memory unrepairable"),
    "gpu_row_remap_pending": ("critical", "reset", "a row remap waits for a GPU reset"),
    "gpu_retired_pages_limit": ("critical", "isolate", "60 or more retired pages: NVIDIA's RMA limit"),
    "gpu_page_retirement_pending": ("critical", "reset", "a page retirement waits for a GPU reset"),
    "gpu_repair_pending": ("critical", "reset", "a channel/TPC repair waits for a GPU reset"),
    "gpu_recovery_action": ("critical", "reset", "the driver asks for a recovery action"),
    "gpu_throttling_now": ("warning", "monitor", "clocks held down by a hardware or thermal reason"),
    "gpu_power_limit_reduced": ("warning", "monitor", "power limit below the GPU's default"),
    "gpu_ecc_corrected_growing": ("warning", "monitor", "corrected ECC errors grew since the last pass"),
    "gpu_row_remaps_growing": ("warning", "monitor", "remapped rows grew since the last pass"),
    "gpu_retired_pages_growing": ("warning", "monitor", "retired pages grew since the last pass"),
    "gpu_pcie_replays_growing": ("warning", "monitor", "PCIe replays grew since the last pass"),
    "pcie_width_reduced": (
        "warning",
        "monitor",
        "PCIe link narrower than its maximum (health.pcie_findings)",
    ),
    "gpu_ecc_uncorrectable_history": ("info", "monitor", "lifetime uncorrectable ECC errors, none now"),
    "gpu_ecc_corrected": ("info", "monitor", "corrected ECC errors since the driver loaded"),
    "gpu_row_remaps": ("info", "monitor", "rows remapped over the GPU's life"),
    "gpu_retired_pages": ("info", "monitor", "pages retired over the GPU's life"),
    "gpu_pcie_replays": ("info", "monitor", "PCIe link replays since the driver loaded"),
    "pcie_gen_below_max": ("info", "monitor", "PCIe generation below its maximum at full width (idle)"),
    "gpu_persistence_off": ("info", "monitor", "persistence mode off"),
    "gpu_ecc_disabled": ("info", "monitor", "ECC disabled"),
}
_RECOVERY_REMEDIATION = {"reboot": "reboot", "system_reboot": "reboot"}
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


RETIRED_PAGES_LIMIT = 60  # DCGM_LIMIT_MAX_RETIRED_PAGES: single-bit plus double-bit, as DCGM counts them


def gpu_key(gpu):
    """The key of a GPU's history: its UUID in lower case, None when it has none a GPU can have
    (missing, not NVML's grammar, all zeros). The serial is never a key: boards with two GPUs
    share one (K80) and cloud and GeForce cards print 0 or N/A."""
    uuid = str((gpu or {}).get("uuid") or "").strip()
    if not UUID_RE.fullmatch(uuid) or not uuid[4:].strip("0-"):
        return None
    return uuid.lower()


def identity(gpu):
    """The keys that name a GPU in findings and records: {index, bus_id, uuid, serial} (uuid is the
    key, the serial only what is printed on the board)."""
    return {k: gpu.get(k) for k in ("index", "bus_id", "uuid", "serial")}


def _uuid_short(gpu):
    """'GPU-ee7954ec' (what CUDA_VISIBLE_DEVICES and nvidia-smi -i take as a prefix), '' without one."""
    key = gpu_key(gpu)
    return gpu["uuid"].strip()[:12] if key else ""


def label(gpu):
    """'GPU3 (00000000:19:00.0, GPU-ee7954ec, S/N 1650124031592)': how findings name a GPU."""
    serial = gpu.get("serial")
    ids = [gpu.get("bus_id") or "", _uuid_short(gpu), f"S/N {serial}" if serial else ""]
    ids = [i for i in ids if i]
    return f"GPU{gpu.get('index')}" + (f" ({', '.join(ids)})" if ids else "")


def short(found):
    """A GPU finding as one short phrase for the launch gate's reason and Slurm's drain reason
    ('' for a finding about no GPU): 'GPU0 GPU-47e4f408: row_remap_pending -> reset'."""
    gpu = found.get("gpu") or {}
    if not gpu or not found.get("remediation"):
        return ""
    who = _uuid_short(gpu) or gpu.get("bus_id") or ""
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
    name, ecc, rows = label(gpu), gpu["ecc"], gpu["remapped_rows"]
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
            ecc["channel_repair_pending"] or ecc["tpc_repair_pending"],
            "gpu_repair_pending",
            f"{name}: memory channel/TPC repair pending: reset the GPU or reboot to apply it",
        ),
    )
    out += [gpu_finding(gpu, code, message) for hit, code, message in checks if hit]
    out += _page_findings(gpu)
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


def _page_findings(gpu):
    """Retired pages (older GPUs; row remapping replaced them on A100 and later) at NVIDIA's limit,
    and a retirement that waits for a reset."""
    name, pages = label(gpu), gpu["retired_pages"]
    out = []
    if _retired(pages) >= RETIRED_PAGES_LIMIT:
        message = (
            f"{name}: {_retired(pages)} retired pages ({pages['single_bit'] or 0} single-bit, "
            f"{pages['double_bit'] or 0} double-bit) reach NVIDIA's limit of {RETIRED_PAGES_LIMIT} "
            "(DCGM's retired-pages check): isolate it and RMA the GPU"
        )
        out.append(gpu_finding(gpu, "gpu_retired_pages_limit", message))
    if pages["pending"]:
        message = f"{name}: page retirement pending: reset the GPU (nvidia-smi -r) or reboot to retire it"
        out.append(gpu_finding(gpu, "gpu_page_retirement_pending", message))
    return out


def _retired(pages):
    return (pages["single_bit"] or 0) + (pages["double_bit"] or 0)


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
            0 < _retired(gpu["retired_pages"]) < RETIRED_PAGES_LIMIT,
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


def _link_findings(gpu):
    """The PCIe link against its maximum width and generation: the topology check's rule
    (health.pcie_findings, its one copy), each finding naming the GPU as this module does."""
    out = []
    for found in health.pcie_findings([gpu]):
        said = found["message"].split(": ", 1)[-1]
        out.append(gpu_finding(gpu, found["code"], f"{label(gpu)}: {said}", severity=found["severity"]))
    return out


def previous_by_key(previous):
    """{gpu_key: gpu health} of a parse() result or a list of GPU health dicts (GPUs without a
    UUID have no history)."""
    gpus = previous.get("gpus") if isinstance(previous, dict) else previous
    out = {}
    for gpu in [g for g in gpus or [] if isinstance(g, dict)]:
        key = gpu_key(gpu)
        if key:
            out.setdefault(key, gpu)
    return out


def gpu_findings(gpu, before=None):
    """The findings of one GPU's health (RULES), with growth since ``before`` (the same GPU's health
    in its last passing run) where given."""
    out = _memory_findings(gpu) + _state_findings(gpu) + _link_findings(gpu) + _note_findings(gpu)
    return out + (_growth_findings(gpu, before) if before else [])


def _missing(parsed):
    """({address: (bus id as written, why)} of GPUs the read lacks, their count, {address: (bus
    id, why)} of GPUs it lists but that are lost: nvidia-smi's lines about GPUs it cannot open,
    NVIDIA GPUs lspci lists that nvidia-smi does not, GPUs the kernel log says fell off the bus
    since boot (Xid 79), and the attached count."""
    gpus = parsed.get("gpus") or []
    listed = {pci_address(g.get("bus_id")) for g in gpus} - {None}
    named, fell = {}, {}
    for lost in parsed.get("lost") or []:
        address = pci_address(lost["bus_id"])
        where = fell if address in listed else named
        where[address or lost["bus_id"] or f"#{len(named)}"] = (lost["bus_id"], lost["why"])
    for address in sorted(set(parsed.get("pci_gpus") or []) - listed):
        named.setdefault(address, (address, "on the PCI bus (lspci), not listed by nvidia-smi"))
    for address in sorted(parsed.get("fallen") or []):
        where = fell if address in listed else named
        where.setdefault(address, (address, "fell off the bus since boot (Xid 79 in the kernel log)"))
    attached = parsed.get("attached_gpus")
    count = max(len(named), (attached if isinstance(attached, int) else 0) - len(gpus))
    return named, count, fell


def node_findings(parsed):
    """gpu_lost: GPUs the node has that nvidia-smi cannot read (_missing): how many of how many,
    which bus ids when known, and the fix. A read that lists fewer GPUs than the driver attached
    never passes, even when the bus ids are unknown (a GPU lost, or nvidia-smi's output cut off)."""
    named, count, fell = _missing(parsed)
    if not count and not fell:
        return []
    total = len(parsed.get("gpus") or []) + count
    ids = [f"{bus or '?'}: {why}" for bus, why in [*named.values(), *fell.values()]]
    known = (
        "; ".join(ids) if ids else f"bus ids not known: nvidia-smi lists {total - count} of {total} attached"
    )
    message = (
        f"{count + len(fell)} of {total} GPU(s) fallen off the bus or lost ({known}): reboot the node; if a "
        "GPU stays missing, reseat it (and its riser and power cables), check the kernel log for Xid 79, "
        "then RMA it"
    )
    found = health.finding("critical", "gpu_lost", message)
    return [dict(found, source="gpu_health", remediation=RULES["gpu_lost"][1], gpu={})]


def findings(parsed, previous=None):
    """The health findings of every GPU of a read (parse or read) and of the node (node_findings),
    critical first (RULES). previous: the same GPUs' health in their last passing run (by UUID)."""
    before = previous_by_key(previous)
    out = node_findings(parsed)
    for gpu in parsed.get("gpus") or []:
        out += gpu_findings(gpu, before.get(gpu_key(gpu)))
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
