"""Parsers for nvidia-smi's topology and inventory outputs (pure Python, stdlib only).

Text in, dict out; garbage raises ValueError saying what was expected. Formats follow
nvidia-smi's documentation and legends, checked against real captures (tests/fixtures/h200x2):

* ``nvidia-smi topo -m``: a tab-separated matrix (the header may carry ANSI escapes), GPU and
  NIC rows and columns, then optional "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID" columns
  (older drivers lack the last two; newer ones print an empty cell before "GPU NUMA ID"), a
  "Legend:" block and, on newer drivers, a "NIC Legend:" block (``NIC0: mlx5_0``). Old drivers name
  NIC columns by device (``mlx4_0``) and have no NIC legend.
  Copies pasted into tickets are read too: tabs expanded or collapsed to one space, a shell
  prompt on the header line, a legend without its ``Legend:`` title.
* ``nvidia-smi topo -p2p r|w|n|a|p``: the same matrix shape with P2P status codes and a legend.
* ``nvidia-smi --query-gpu=... --format=csv``: header-driven CSV.
* ``nvidia-smi -L`` and ``nvidia-smi -q -x`` (only the fields wireup uses).

``Topology`` is the structure they make (build_topology, the wireup_gpu_topology module's fact):
the store checks a node's against it before it judges anything (core/shape.py).
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from typing import TypedDict

from . import health
from .nvlink import parse_nvlink_status

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CELL_SPLIT_RE = re.compile(r"\t| {2,}")
NV_RE = re.compile(r"^NV(\d+)$")
GPU_RE = re.compile(r"^GPU(\d+)$")
NIC_RE = re.compile(r"^NIC(\d+)$")
LEGEND_ENTRY_RE = re.compile(r"^\s*([A-Z#]+)\s+=\s+(.+?)\s*$")
NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
HEADER_TOKEN_RE = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|\S+")

AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
AFFINITY_KEYS = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}

# Link classes from best to worst, as nvidia-smi's legend orders them (NV# is best; among NV#,
# more bonded links is better). SOC is the pre-2017 name of SYS.
LINK_CLASS_ORDER = ("NV#", "PIX", "PXB", "PHB", "NODE", "SYS")
PCIE_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
LINK_CLASS_ALIASES = {"SOC": "SYS"}

# P2P status codes of `topo -p2p` (its legend); "OK" is the only good one.
P2P_CODES = {
    "X": "Self",
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "DR": "Disabled by regkey",
    "U": "Unknown",
}
P2P_MODES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}

MISSING_VALUES = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]", "[Unknown]"}
UNIT_RE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(MiB|GiB|KiB|W|MHz|%|C|GB/s|x)$")
INT_RE = re.compile(r"^-?\d+$")
FLOAT_RE = re.compile(r"^-?\d+\.\d+$")
# Dotted values that are versions, not numbers ("9.0" and "9.10" must stay apart).
VERSION_FIELDS = {"compute_cap", "driver_version", "vbios_version", "cuda_version", "inforom.img"}


# A GPU-GPU link of `topo -m` ("class" is a Python keyword: the functional form).
TopoLink = TypedDict("TopoLink", {"a": str, "b": str, "class": str})


class NvlinkTotals(TypedDict, total=False):
    """A GPU's NVLinks as `nvidia-smi nvlink -s` counts them (combine_topology's gpus[].nvlink)."""

    active: int
    inactive: int
    speed_gbps: float | None
    total_gbps: float | None


class _GpuIndex(TypedDict):
    index: int


class TopoGpu(_GpuIndex, total=False):
    """One GPU of combine_topology (the fields a reader of the topology relies on; it has more)."""

    name: str | None
    uuid: str | None
    bus_id: str | None
    pcie: dict | None
    nvlink: NvlinkTotals | None


class Topology(TypedDict, total=False):
    """build_topology's answer and the module's fact gpu_topology_facts (the module adds
    findings, findings_count, kernel_log, acs, fabric and raw); a GPU-less node's may be {}."""

    gpu_count: int
    driver_version: str | None
    cuda_version: str | None
    gpus: list[TopoGpu]
    links: list[TopoLink]
    link_classes: list[str]
    best_link: str | None
    worst_link: str | None
    nics: list
    matrix: dict
    p2p: dict
    nvlink: dict | None
    findings: list[health.Finding]
    findings_count: dict
    kernel_log: dict
    acs: dict
    fabric: dict
    raw: dict


class TopologyProbe(TypedDict):
    """What the wireup_gpu_topology module returns (its RETURN documents each key): the topology
    (also the fact gpu_topology_facts), its findings and their counts, the role's summary lines."""

    changed: bool
    ansible_facts: dict
    topology: Topology
    findings: list[health.Finding]
    findings_count: dict[str, int]
    summary: list[str]


def strip_ansi(text):
    """Remove terminal escape sequences (nvidia-smi underlines the topo header even off a tty)."""
    return ANSI_RE.sub("", text)


def _cells(line):
    return [c.strip() for c in CELL_SPLIT_RE.split(line)]


def _header_cells(line):
    """The names in a header line. Tab-separated output splits on tabs; a space-aligned copy
    (tabs expanded, or collapsed to one space by a web page: `GPU0 GPU1`, `mlx5_10 mlx5_11`)
    splits on any run of spaces, keeping the three two- and three-word affinity names whole."""
    if "\t" in line:
        return [c for c in _cells(line) if c]
    return HEADER_TOKEN_RE.findall(line)


def _row_cells(line, tabbed):
    """The cells of one matrix line. nvidia-smi separates cells with tabs and leaves a cell empty
    where it knows no value (GB200's CPU Affinity, GPU NUMA ID N/A on older boards, the spacer
    before GPU NUMA ID), so tab-separated lines keep their empty cells (only trailing ones go).
    Space-aligned copies (pasted into tickets, tabs expanded) can only be split on runs of
    spaces, where empty cells are lost; no cell value holds a space, so one space separates too
    (tab expansion leaves a single space after an 8-character cell such as `mlx5_10`)."""
    if not tabbed:
        return line.split()
    cells = [c.strip() for c in line.split("\t")]
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _affinity_values(extra, trailing):
    """Map the cells after the matrix to the affinity columns; nvidia-smi prints an extra empty
    cell before "GPU NUMA ID" (its header is one tab stop wider), which is dropped here."""
    if "GPU NUMA ID" in trailing and len(extra) == len(trailing) + 1:
        spacer = trailing.index("GPU NUMA ID")
        if not extra[spacer]:
            extra = extra[:spacer] + extra[spacer + 1 :]
    return extra


def _require_text(text, what, command):
    if not isinstance(text, str):
        raise ValueError(f"{what}: expected the text output of `{command}`, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{what}: the output of `{command}` is empty")


def link_class_key(cls):
    """Sort key for a link class: smaller is better (NV18 < NV4 < PIX < PXB < PHB < NODE < SYS)."""
    m = NV_RE.match(cls)
    if m:
        return (0, -int(m.group(1)))
    cls = LINK_CLASS_ALIASES.get(cls, cls)
    if cls in LINK_CLASS_ORDER:
        return (LINK_CLASS_ORDER.index(cls), 0)
    return (len(LINK_CLASS_ORDER), 0)


def rank_link_classes(classes):
    """Unique classes sorted best first."""
    return sorted(set(classes), key=link_class_key)


def _nvlink_count(cls):
    m = NV_RE.match(cls)
    return int(m.group(1)) if m else 0


def _parse_legend(lines):
    legend = {}
    for line in lines:
        m = LEGEND_ENTRY_RE.match(line)
        if m:
            legend[m.group(1)] = m.group(2)
    return legend


def _find_header(lines, what, command):
    """(index, cells) of the header line: the first line whose cells start with GPU0 or two GPU
    columns (a shell prompt pasted on the same line may come before them)."""
    for i, line in enumerate(lines):
        cells = _header_cells(line)
        start = next((k for k, c in enumerate(cells) if GPU_RE.match(c)), None)
        if start is None:
            continue
        cells = cells[start:]
        if cells[0] == "GPU0" or (len(cells) > 1 and GPU_RE.match(cells[1])):
            return i, cells
    raise ValueError(
        f"{what}: no header line with GPU columns (expected a line like '\\tGPU0\\tGPU1...') "
        f"in the output of `{command}`"
    )


def _header_columns(header, what, command):
    """(device columns, affinity columns after them) of a header."""
    devices, trailing = [], []
    for name in header:
        if name in AFFINITY_COLUMNS:
            trailing.append(name)
        elif trailing:
            raise ValueError(f"{what}: device column {name!r} after the affinity columns in `{command}`")
        else:
            devices.append(name)
    return devices, trailing


def _line_section(line, section):
    """The section a line after the header belongs to (matrix, legend, nic), or None for a title
    or an empty line. A legend pasted without its "Legend:" title (or only the NIC legend, without
    "NIC Legend:") starts where its first entry does."""
    stripped = line.strip()
    titles = {"Legend:": "legend", "NIC Legend:": "nic"}
    if stripped in titles:
        return None, titles[stripped]
    if not stripped:
        return None, section
    if section == "matrix" and LEGEND_ENTRY_RE.match(line):
        section = "legend"
    if section == "matrix" and NIC_LEGEND_RE.match(line):
        section = "nic"
    return section, section


def _split_matrix(text, what, command):
    """Return (header device names, trailing header columns, rows, legend lines, nic legend lines)."""
    _require_text(text, what, command)
    lines = strip_ansi(text).splitlines()
    header_idx, header = _find_header(lines, what, command)
    tabbed = "\t" in lines[header_idx]
    devices, trailing = _header_columns(header, what, command)
    rows, parts = {}, {"legend": [], "nic": []}
    section = "matrix"
    for line in lines[header_idx + 1 :]:
        kind, section = _line_section(line, section)
        if kind in parts:
            parts[kind].append(line)
        elif kind == "matrix":
            cells = _row_cells(line, tabbed and "\t" in line)
            if cells[0] not in devices:
                raise ValueError(
                    f"{what}: unexpected row {cells[0]!r} in `{command}`; expected one of {devices}"
                )
            rows[cells[0]] = cells[1:]
    return devices, trailing, rows, parts["legend"], parts["nic"]


def _class_checker(legend):
    """A function telling whether a link class is one nvidia-smi (or the output's legend) names."""
    known = set(PCIE_CLASSES) | {"X"} | {k for k in legend if not k.endswith("#")}
    # Legend entries ending in "#" (NV#) stand for a prefix and a count (NV18).
    counted = [re.compile(rf"^{re.escape(k[:-1])}\d+$") for k in legend if k.endswith("#") and len(k) > 1]
    return lambda cls: bool(NV_RE.match(cls) or cls in known or any(c.match(cls) for c in counted))


def _matrix_row(name, cells, devices, is_class, where):
    """{peer: class} of one row, each class checked (self must be X)."""
    what, command = where
    n = len(devices)
    if len(cells) < n:
        raise ValueError(
            f"{what}: row {name} has {len(cells)} cells, expected {n} link classes "
            f"(one per column {devices}) in `{command}`"
        )
    links = dict(zip(devices, cells[:n], strict=True))
    for peer, cls in links.items():
        if peer == name and cls != "X":
            raise ValueError(f"{what}: {name}->{name} is {cls!r}, expected 'X' (self) in `{command}`")
        if peer != name and not is_class(cls):
            raise ValueError(
                f"{what}: {name}->{peer} has unknown link class {cls!r}; expected X, NV#, PIX, PXB, "
                f"PHB, NODE or SYS (or a class the output's Legend defines) in `{command}`"
            )
    return links


def _row_affinity(name, extra, trailing, where):
    """{cpu_affinity, numa_affinity, gpu_numa_id} of one row from the cells after its matrix."""
    what, command = where
    extra = _affinity_values(extra, trailing)
    if len(extra) > len(trailing):
        raise ValueError(
            f"{what}: row {name} has {len(extra)} values after the matrix but the header has only "
            f"{trailing} in `{command}`"
        )
    out = {AFFINITY_KEYS[col]: None for col in AFFINITY_COLUMNS}
    for col, value in zip(trailing, extra, strict=False):
        out[AFFINITY_KEYS[col]] = None if value in MISSING_VALUES else value
    return out


def _topo_nics(nic_names, legend_lines):
    """[{name, device}] of the NIC columns. NIC Legend entries (``NIC0: mlx5_0``) are read in the
    link-class legend too: a paste that lost the "NIC Legend:" title line keeps them there."""
    devices = {m.group(1): m.group(2) for m in map(NIC_LEGEND_RE.match, legend_lines) if m}
    # Old layout: the column is the device itself (mlx4_0).
    return [
        {"name": name, "device": devices.get(name) or (None if NIC_RE.match(name) else name)}
        for name in nic_names
    ]


def _nearest_nics(row, nic_names):
    if not nic_names:
        return []
    best = min(link_class_key(row[nic]) for nic in nic_names)
    return [nic for nic in nic_names if link_class_key(row[nic]) == best]


def _gpu_links(gpu_names, matrix, where):
    """[{a, b, class, kind, nvlinks}] of every GPU pair; both directions must agree."""
    what, command = where
    links = []
    for i, a in enumerate(gpu_names):
        for b in gpu_names[i + 1 :]:
            cls, back = matrix[a][b], matrix[b][a]
            if back != cls:
                raise ValueError(
                    f"{what}: {a}->{b} is {cls} but {b}->{a} is {back}; `{command}` is not symmetric"
                )
            count = _nvlink_count(cls)
            links.append(
                {"a": a, "b": b, "class": cls, "kind": "nvlink" if count else "pcie", "nvlinks": count}
            )
    return links


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``.

    Returns a dict:
      gpus: [{index, name ("GPU0"), cpu_affinity, numa_affinity, gpu_numa_id, nearest_nics}]
      nics: [{name ("NIC0"), device ("mlx5_0" or None)}]
      matrix: {"GPU0": {"GPU1": "NV18", "NIC0": "PIX", ...}, "NIC0": {...}} (self is "X")
      links: [{a: "GPU0", b: "GPU1", class: "NV18", kind: "nvlink"|"pcie", nvlinks: 18}] GPU pairs
      link_classes: GPU-GPU classes present, best first
      best_link, worst_link: best and worst GPU-GPU class (None with one GPU)
      legend: {"NV#": "Connection traversing a bonded set of # NVLinks", ...}
      columns: the affinity columns present
    """
    where = ("parse_topo_matrix", "nvidia-smi topo -m")
    devices, trailing, rows, legend_lines, nic_lines = _split_matrix(text, *where)
    legend = _parse_legend(legend_lines)
    gpu_names = [d for d in devices if GPU_RE.match(d)]
    nic_names = [d for d in devices if not GPU_RE.match(d)]
    if not gpu_names:
        raise ValueError(f"{where[0]}: no GPU columns in the header of `{where[1]}`")
    missing = [d for d in gpu_names if d not in rows]
    if missing:
        raise ValueError(f"{where[0]}: the header names {missing} but `{where[1]}` has no row for them")
    is_class = _class_checker(legend)
    matrix = {name: _matrix_row(name, cells, devices, is_class, where) for name, cells in rows.items()}
    affinity = {
        name: _row_affinity(name, cells[len(devices) :], trailing, where) for name, cells in rows.items()
    }
    gpus = [
        {
            "index": int(GPU_RE.match(name).group(1)),
            "name": name,
            **affinity[name],
            "nearest_nics": _nearest_nics(matrix[name], nic_names),
        }
        for name in sorted(gpu_names, key=lambda g: int(GPU_RE.match(g).group(1)))
    ]
    links = _gpu_links(gpu_names, matrix, where)
    classes = rank_link_classes(link["class"] for link in links)
    return {
        "gpus": gpus,
        "nics": _topo_nics(nic_names, nic_lines + legend_lines),
        "matrix": matrix,
        "links": links,
        "link_classes": classes,
        "best_link": classes[0] if classes else None,
        "worst_link": classes[-1] if classes else None,
        "legend": legend,
        "columns": trailing,
    }


def _p2p_row(name, rows, devices, codes, where):
    """{peer: status} of one GPU's row of ``topo -p2p``, every status a known code."""
    what, command = where
    if name not in rows:
        raise ValueError(f"{what}: no row for {name} in `{command}`")
    cells = rows[name]
    if len(cells) != len(devices):
        raise ValueError(f"{what}: row {name} has {len(cells)} cells, expected {len(devices)} in `{command}`")
    for peer, status in zip(devices, cells, strict=True):
        if status not in codes:
            raise ValueError(
                f"{what}: {name}->{peer} has unknown status {status!r}; expected one of "
                f"{sorted(codes)} in `{command}`"
            )
    return dict(zip(devices, cells, strict=True))


def _p2p_pairs(devices, matrix, legend):
    """[{a, b, status, meaning}] of every GPU pair, with the worse direction's status: a pair is
    OK only if both directions are."""
    return [_p2p_pair(a, b, matrix, legend) for i, a in enumerate(devices) for b in devices[i + 1 :]]


def _p2p_pair(a, b, matrix, legend):
    status = matrix[a][b] if matrix[a][b] != "OK" else matrix[b][a]
    return {"a": a, "b": b, "status": status, "meaning": legend.get(status, P2P_CODES.get(status))}


def parse_topo_p2p(text, mode=None):
    """Parse ``nvidia-smi topo -p2p MODE`` (r, w, n, a or p).

    Returns {mode, matrix: {"GPU0": {"GPU1": "OK"}}, pairs: [{a, b, status, meaning}],
    not_ok: [pairs whose status is not OK], all_ok: bool, legend: {"OK": "Status Ok", ...}}.
    """
    what = "parse_topo_p2p"
    command = f"nvidia-smi topo -p2p {mode or '<mode>'}"
    if mode is not None and mode not in P2P_MODES:
        raise ValueError(f"{what}: mode {mode!r} is not one of {sorted(P2P_MODES)}")
    devices, trailing, rows, legend_lines, _nic_legend = _split_matrix(text, what, command)
    legend = _parse_legend(legend_lines) or dict(P2P_CODES)
    codes = set(legend) | set(P2P_CODES)
    if trailing or any(not GPU_RE.match(d) for d in devices):
        raise ValueError(f"{what}: expected only GPU columns in `{command}`, got {devices + trailing}")
    matrix = {name: _p2p_row(name, rows, devices, codes, (what, command)) for name in devices}
    pairs = _p2p_pairs(devices, matrix, legend)
    not_ok = [p for p in pairs if p["status"] != "OK"]
    return {
        "mode": mode,
        "matrix": matrix,
        "pairs": pairs,
        "not_ok": not_ok,
        "all_ok": not not_ok,
        "legend": legend,
    }


def _convert(field, value):
    value = value.strip()
    if value in MISSING_VALUES:
        return None
    if field in VERSION_FIELDS:
        return value
    m = UNIT_RE.match(value)
    if m:
        number = m.group(1)
        return float(number) if "." in number else int(number)
    if INT_RE.match(value):
        return int(value)
    if FLOAT_RE.match(value):
        return float(value)
    return value


def parse_query_gpu_csv(text):
    """Parse ``nvidia-smi --query-gpu=FIELDS --format=csv`` (with its header line).

    Returns [{field: value}] in output order, keyed by the query field names ("memory.total",
    units stripped from the header). "[Not Supported]" and "N/A" become None; "143771 MiB"
    becomes 143771; integers become int; compute_cap and versions stay strings.
    """
    what = "parse_query_gpu_csv"
    command = "nvidia-smi --query-gpu=... --format=csv"
    _require_text(text, what, command)
    rows = _csv_rows(text, what, command)
    header = [re.sub(r"\s*\[[^\]]*\]\s*$", "", h.strip()) for h in rows[0]]
    if not header or not all(re.match(r"^[a-z_][a-z0-9_.]*$", h) for h in header):
        raise ValueError(
            f"{what}: the first line {rows[0][:4]!r} is not a header of query field names; run "
            f"`{command}` with --format=csv (not csv,noheader)"
        )
    return [_query_row(number, row, header, (what, command)) for number, row in enumerate(rows[1:], start=2)]


def _csv_rows(text, what, command):
    """The non-empty CSV rows of the output (the header first)."""
    try:
        reader = csv.reader(io.StringIO(text.strip()), skipinitialspace=True)
        rows = [r for r in reader if r and any(c.strip() for c in r)]
    except csv.Error as exc:
        raise ValueError(f"{what}: the output of `{command}` is not CSV ({exc})") from exc
    if not rows:
        raise ValueError(f"{what}: the output of `{command}` has no values")
    return rows


def _query_row(number, row, header, where):
    """One GPU's {field: value}; its index (when queried) must be a GPU number."""
    what, command = where
    if len(row) != len(header):
        raise ValueError(
            f"{what}: line {number} has {len(row)} values, the header has {len(header)} fields "
            f"({', '.join(header)})"
        )
    item = {field: _convert(field, value) for field, value in zip(header, row, strict=True)}
    index = item.get("index")
    if "index" in item and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise ValueError(
            f"{what}: line {number} has index {row[header.index('index')].strip()!r}; expected a GPU "
            f"number (0, 1, ...) in `{command}`"
        )
    return item


L_LINE_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+?)\)\s*$")


def parse_gpu_list(text):
    """Parse ``nvidia-smi -L``: [{index, name, uuid}] (MIG device lines are skipped)."""
    _require_text(text, "parse_gpu_list", "nvidia-smi -L")
    matches = [L_LINE_RE.match(line.strip()) for line in text.splitlines()]
    gpus = [{"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)} for m in matches if m]
    if not gpus:
        raise ValueError("parse_gpu_list: no 'GPU N: NAME (UUID: ...)' line in the output of `nvidia-smi -L`")
    return gpus


def _xml_text(node, path):
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in MISSING_VALUES else value


def parse_smi_xml(text):
    """Parse the fields wireup uses from ``nvidia-smi -q -x``.

    Returns {driver_version, cuda_version, attached_gpus, gpus: [{bus_id, name, uuid,
    fabric_state, fabric_status}]}. fabric_state is None where the GPU has no NVSwitch fabric
    ("N/A"/"Not Supported"); "Completed" with status "Success" means the fabric is up.
    """
    _require_text(text, "parse_smi_xml", "nvidia-smi -q -x")
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ValueError(f"parse_smi_xml: the output of `nvidia-smi -q -x` is not XML ({exc})") from exc
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"parse_smi_xml: expected a <nvidia_smi_log> document, got <{root.tag}>")
    gpus = []
    for gpu in root.findall("gpu"):
        gpus.append(
            {
                "bus_id": gpu.get("id"),
                "name": _xml_text(gpu, "product_name"),
                "uuid": _xml_text(gpu, "uuid"),
                "fabric_state": _xml_text(gpu, "fabric/state"),
                "fabric_status": _xml_text(gpu, "fabric/status"),
            }
        )
    attached = _xml_text(root, "attached_gpus")
    return {
        "driver_version": _xml_text(root, "driver_version"),
        "cuda_version": _xml_text(root, "cuda_version"),
        "attached_gpus": int(attached) if attached and attached.isdigit() else len(gpus),
        "gpus": gpus,
    }


def _pcie(row):
    return {
        "gen_current": row.get("pcie.link.gen.current"),
        "gen_max": row.get("pcie.link.gen.max"),
        "width_current": row.get("pcie.link.width.current"),
        "width_max": row.get("pcie.link.width.max"),
    }


def decode_output(data, command):
    """Text of a command's raw output (bytes), or ValueError naming the first byte that is not
    UTF-8: one stray byte must become a finding, not a module that cannot return its result."""
    if isinstance(data, str):
        return data
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"the output of `{command}` is {type(data).__name__}, not bytes or text")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        around = bytes(data)[max(exc.start - 20, 0) : exc.end + 20]
        raise ValueError(
            f"the output of `{command}` is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            f"(near {around!r})"
        ) from exc


def gpu_count_of(query=None, topo=None):
    """GPUs the node has, from parsed --query-gpu rows (else the topo -m matrix); None if unknown."""
    if query:
        return len(query)
    if topo:
        return len(topo["gpus"])
    return None


def build_topology(topo_m=None, p2p=None, nvlink_s=None, query_csv=None, smi_xml=None) -> Topology:
    """Combine the raw outputs into wireup's `gpu_topology` structure (see the role README).

    Every argument is the raw text of one command (or None where it was not run / failed);
    p2p is {mode: text}. Parsing errors propagate as ValueError.
    """
    topo = parse_topo_matrix(topo_m) if topo_m is not None else None
    query = parse_query_gpu_csv(query_csv) if query_csv is not None else []
    return combine_topology(
        topo=topo,
        p2p={mode: parse_topo_p2p(text, mode) for mode, text in (p2p or {}).items() if text is not None},
        nvlink=parse_nvlink_status(nvlink_s, gpu_count_of(query, topo)) if nvlink_s is not None else None,
        query=query,
        xml=parse_smi_xml(smi_xml) if smi_xml is not None else None,
    )


def _combined_gpu(index, row, topo_gpu, nvl_gpu, fabric_by_uuid):
    """One GPU of combine_topology from its query row, topo -m entry, nvlink entry and XML."""
    uuid = row.get("uuid") or (nvl_gpu or {}).get("uuid")
    fabric = fabric_by_uuid.get(uuid, {})
    nvlink = None
    if nvl_gpu:
        nvlink = {k: nvl_gpu[k] for k in ("active", "inactive", "speed_gbps", "total_gbps")}
    return {
        "index": index,
        "name": row.get("name") or (nvl_gpu or {}).get("name"),
        "uuid": uuid,
        "bus_id": row.get("pci.bus_id"),
        "compute_cap": row.get("compute_cap"),
        "memory_total_mib": row.get("memory.total"),
        "persistence_mode": row.get("persistence_mode"),
        "pcie": _pcie(row),
        "cpu_affinity": topo_gpu.get("cpu_affinity"),
        "numa_affinity": topo_gpu.get("numa_affinity"),
        "gpu_numa_id": topo_gpu.get("gpu_numa_id"),
        "nearest_nics": topo_gpu.get("nearest_nics", []),
        "nvlink": nvlink,
        "fabric_state": fabric.get("fabric_state"),
        "fabric_status": fabric.get("fabric_status"),
    }


def _combined_gpus(topo, nvl, query, xml):
    topo_gpus = {g["index"]: g for g in topo["gpus"]} if topo else {}
    nvl_gpus = {g["index"]: g for g in nvl["gpus"]} if nvl else {}
    fabric_by_uuid = {g["uuid"]: g for g in xml["gpus"]} if xml else {}
    query_by_index = {int(r["index"]): r for r in query if r.get("index") is not None}
    indexes = sorted(set(query_by_index) | set(topo_gpus) | set(nvl_gpus))
    return [
        _combined_gpu(i, query_by_index.get(i, {}), topo_gpus.get(i, {}), nvl_gpus.get(i), fabric_by_uuid)
        for i in indexes
    ]


# combine_topology's keys taken from parse_topo_matrix's answer, with their value without one.
_TOPO_KEYS = {
    "nics": ("nics", []),
    "matrix": ("matrix", {}),
    "links": ("links", []),
    "link_classes": ("link_classes", []),
    "best_link": ("best_link", None),
    "worst_link": ("worst_link", None),
    "affinity_columns": ("columns", []),
}


def combine_topology(topo=None, p2p=None, nvlink=None, query=None, xml=None) -> Topology:
    """build_topology's answer from outputs already parsed (each parsed once, by the module):
    topo from parse_topo_matrix, p2p {mode: parse_topo_p2p}, nvlink from parse_nvlink_status, query
    from parse_query_gpu_csv, xml from parse_smi_xml; None (or empty) where absent."""
    query = query or []
    gpus = _combined_gpus(topo, nvlink, query, xml)
    drivers = [row.get("driver_version") for row in query] + [xml["driver_version"] if xml else None]
    return {
        "gpu_count": len(gpus),
        "driver_version": next((d for d in drivers if d), None),
        "cuda_version": xml["cuda_version"] if xml else None,
        "gpus": gpus,
        **{key: topo[src] if topo else empty for key, (src, empty) in _TOPO_KEYS.items()},
        "p2p": {
            mode: {"matrix": parsed["matrix"], "not_ok": parsed["not_ok"], "all_ok": parsed["all_ok"]}
            for mode, parsed in (p2p or {}).items()
        },
        "nvlink": nvlink["totals"] if nvlink else None,
    }


def summary_lines(topology):
    """What the gpu_topology role prints for a node: one summary line, then one line per critical or
    warning finding ('severity: message')."""
    models = sorted({g["name"] for g in topology.get("gpus") or [] if g.get("name")})
    gpus = f"{topology.get('gpu_count', 0)} GPU(s)" + (f" ({', '.join(models)})" if models else "")
    nvlink = topology.get("nvlink") or {}
    links = (
        f"{nvlink['links_per_gpu']}x{nvlink['per_link_gbps']} GB/s per GPU"
        if nvlink.get("links_per_gpu")
        else "none"
    )
    count = topology.get("findings_count") or {}
    line = (
        f"{gpus}, links {'/'.join(topology.get('link_classes') or []) or 'none'}, NVLink {links}, "
        f"NICs {len(topology.get('nics') or [])}, findings {count.get('critical', 0)} critical / "
        f"{count.get('warning', 0)} warning / {count.get('info', 0)} info"
    )
    findings = topology.get("findings") or []
    return [line, *(f"{f['severity']}: {f['message']}" for f in findings if f["severity"] != "info")]
