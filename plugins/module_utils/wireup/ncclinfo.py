"""What NCCL chose, from its own ``NCCL_DEBUG=INFO`` log (pure Python, stdlib only).

Text in, dict out. NCCL prints one line per fact, prefixed ``host:pid:tid [cudaDev] NCCL INFO``;
launchers add their own prefixes (``[1,7]<stdout>:``, ``[0] ``, timestamps, a pod name), and logs
of several ranks interleave, so every line is matched anywhere after its prefix. Lines read
(NCCL 2.4 to 2.28, checked against the logs in tests/fixtures/ncclinfo/):

* ``NCCL version 2.28.9+cuda13.0``
* ``Using network IB`` / ``Socket`` / ``IBext`` / ``AWS Libfabric`` / ``Libfabric``: the network
  plugin the communicator took (``IBext`` is HPC-X's SHARP plugin, ``Libfabric`` and
  ``AWS Libfabric`` aws-ofi-nccl for EFA).
* ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>``: the HCAs and
  their link layer (``/IB/SHARP`` with the SHARP plugin); ``NET/IB : No device found.``
* ``NET/Socket : Using [0]eth0:10.0.0.1<0>``: the interfaces of the socket transport.
* ``NET/OFI Selected Provider is efa (found 16 nics)``.
* ``NET/IB : GPU Direct RDMA Enabled|Disabled for HCA 0 'mlx5_0'``.
* ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`` (older: ``Ring 00 : 7 -> 8 [send]
  via NET/AWS Libfabric/0``): the transport of each connection: ``NET/<plugin>/<dev>[/GDRDMA]``
  between nodes, ``P2P/...`` (NVLink or PCIe peer access), ``SHM/...`` (host memory) and
  ``CollNet``/``NVLS`` inside one.
* ``Channel 00/02 : 0 1`` (ring order, NN/total) and ``N coll channels, ...``: channel count.
* ``comm 0x... rank 0 nRanks 2 nNodes 2 localRanks 1``.
* ``Connected all rings, use ring PXN 0 GDR 0`` (2.2x+): whether GDR is used at all.
* ``NCCL WARN ...`` (WARN lines name the source line first: ``[7] net_ib.cu:788 NCCL WARN``).
"""

import re

from .health import finding

LINE_RE = re.compile(
    r"(?P<host>[\w.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:[\w./\-]+:\d+ )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$"
)
VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+(\S+))?")
NETWORK_RE = re.compile(r"^Using network (.+?)\s*$")
IB_USING_RE = re.compile(r"^NET/IB\w* : Using (.*?)\s*(?:;\s*OOB\s+(\S+))?\s*$")
IB_DEV_RE = re.compile(r"\[(\d+)\]([\w.\-]+):(\d+)/(\w+)(/SHARP)?")
SOCKET_USING_RE = re.compile(r"^NET/Socket : Using (.*)$")
SOCKET_DEV_RE = re.compile(r"\[(\d+)\]([\w.\-@]+):([0-9a-fA-F.:%\w]+)<\d+>")
OFI_RE = re.compile(r"^NET/OFI Selected Provider is (\S+)(?: \(found (\d+) nics\))?")
GDR_HCA_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']+)'")
VIA_RE = re.compile(
    r"^(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[\w+\])? -> (\d+)(?:\[\w+\])?"
    r"(?: \[(send|receive)\])? via (\S+(?: Libfabric)?\S*)"
)
RING_RE = re.compile(r"^Channel (\d{2})/(\d{2,}) :(?: \d+)+\s*$")
COLL_CHANNELS_RE = re.compile(r"^(\d+) coll channels")
COMM_RE = re.compile(r"rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)")
NRANKS_RE = re.compile(r"rank (\d+) nranks (\d+) ")
CONNECTED_RE = re.compile(r"Connected all rings(?:, use ring PXN (\d) GDR (\d))?")
NO_DEVICE_RE = re.compile(r"^NET/IB\w* : No device found")

# "via" transports -> kind. AWS's plugin names itself "AWS Libfabric" (older) or "Libfabric".
NET_KINDS = {
    "IB": "ib",
    "IBext": "ib",
    "IBext_v8": "ib",
    "Socket": "socket",
    "AWS Libfabric": "ofi",
    "Libfabric": "ofi",
    "OFI": "ofi",
}


def _net_kind(plugin):
    for name, kind in NET_KINDS.items():
        if plugin == name or plugin.startswith(name + "_"):
            return kind
    if "Libfabric" in plugin or "OFI" in plugin:
        return "ofi"
    if plugin.startswith("IB"):
        return "ib"
    return "other"


def _via(path):
    """``NET/IB/0/GDRDMA`` -> {family: 'NET', plugin: 'IB', device: 0, gdr: True}."""
    parts = path.split("/")
    family = parts[0]
    out = {"family": family, "path": path, "plugin": None, "device": None, "gdr": False}
    if family == "NET" and len(parts) >= 2:
        out["plugin"] = parts[1]
        if len(parts) >= 3 and parts[2].isdigit():
            out["device"] = int(parts[2])
        out["gdr"] = "GDRDMA" in parts[3:]
    else:
        out["plugin"] = parts[1] if len(parts) > 1 else None
    return out


def parse_nccl_info(text):
    """Parse an NCCL INFO log (one rank or many interleaved). Returns a dict:

    version, hosts (sorted), network (the plugin name NCCL reported, e.g. ``IB``), networks (every
    one seen), ib_devices [{index, device, port, link_layer, sharp}], ib_no_device (bool),
    socket_interfaces [{index, name, address}], ofi_provider, gdr_hca {device: bool},
    connections {family/plugin: count} (``NET/IB``, ``NET/Socket``, ``P2P/CUMEM``, ``SHM/direct``),
    inter_node ('ib', 'socket', 'ofi', 'other' or None), gdrdma (True/False over NET connections,
    None without any), intra_node (sorted P2P/SHM kinds), channels, nranks, nnodes,
    ring_gdr (the ``GDR`` flag of ``Connected all rings``), warnings [line], evidence {key: line}
    (the first NCCL line behind each conclusion, quoted in findings), lines (NCCL lines read).
    Text without any NCCL line raises ValueError.
    """
    if not isinstance(text, str):
        raise ValueError(
            f"parse_nccl_info: expected the text of an NCCL_DEBUG=INFO log, got {type(text).__name__}"
        )
    out = {
        "version": None,
        "hosts": set(),
        "network": None,
        "networks": [],
        "ib_devices": [],
        "ib_no_device": False,
        "socket_interfaces": [],
        "ofi_provider": None,
        "gdr_hca": {},
        "connections": {},
        "inter_node": None,
        "gdrdma": None,
        "intra_node": set(),
        "channels": None,
        "nranks": None,
        "nnodes": None,
        "ring_gdr": None,
        "warnings": [],
        "evidence": {},
        "lines": 0,
    }
    ev = out["evidence"]
    net_gdr = []
    ring_totals = []
    for raw in text.splitlines():
        line = raw.replace("\r", "").rstrip()
        m = LINE_RE.search(line)
        if not m:
            vm = VERSION_RE.search(line)
            if vm and "NCCL version" in line and out["version"] is None:
                out["version"] = vm.group(1)
                ev.setdefault("version", line.strip())
            continue
        out["lines"] += 1
        out["hosts"].add(m.group("host"))
        msg = m.group("msg").strip()
        quoted = line[m.start() :].strip()
        if m.group("level") == "WARN":
            out["warnings"].append(quoted)
            continue
        vm = VERSION_RE.match(msg)
        if vm:
            out["version"] = out["version"] or vm.group(1)
            ev.setdefault("version", quoted)
            continue
        nm = NETWORK_RE.match(msg)
        if nm:
            name = nm.group(1)
            if name not in out["networks"]:
                out["networks"].append(name)
            out["network"] = out["network"] or name
            ev.setdefault("network", quoted)
            continue
        if NO_DEVICE_RE.match(msg):
            out["ib_no_device"] = True
            ev.setdefault("ib_no_device", quoted)
            continue
        im = IB_USING_RE.match(msg)
        if im:
            for d in IB_DEV_RE.finditer(im.group(1)):
                entry = {
                    "index": int(d.group(1)),
                    "device": d.group(2),
                    "port": int(d.group(3)),
                    "link_layer": d.group(4),
                    "sharp": bool(d.group(5)),
                }
                if entry not in out["ib_devices"]:
                    out["ib_devices"].append(entry)
            if IB_DEV_RE.search(im.group(1)):
                ev.setdefault("ib_using", quoted)
            continue
        sm = SOCKET_USING_RE.match(msg)
        if sm:
            for d in SOCKET_DEV_RE.finditer(sm.group(1)):
                entry = {"index": int(d.group(1)), "name": d.group(2), "address": d.group(3)}
                if entry not in out["socket_interfaces"]:
                    out["socket_interfaces"].append(entry)
            ev.setdefault("socket_using", quoted)
            continue
        om = OFI_RE.match(msg)
        if om:
            out["ofi_provider"] = om.group(1)
            ev.setdefault("ofi_provider", quoted)
            continue
        gm = GDR_HCA_RE.search(msg)
        if gm:
            enabled = gm.group(1) == "Enabled"
            out["gdr_hca"][gm.group(3)] = out["gdr_hca"].get(gm.group(3), False) or enabled
            if not enabled:
                ev.setdefault("gdr_disabled", quoted)
            continue
        cm = VIA_RE.match(msg)
        if cm:
            via = _via(cm.group(5))
            key = f"{via['family']}/{via['plugin']}" if via["plugin"] else via["family"]
            out["connections"][key] = out["connections"].get(key, 0) + 1
            if via["family"] == "NET":
                net_gdr.append(via["gdr"])
                kind = _net_kind(via["plugin"] or "")
                if out["inter_node"] is None:
                    out["inter_node"] = kind
                    ev.setdefault("inter_node", quoted)
                if not via["gdr"]:
                    ev.setdefault("net_without_gdr", quoted)
                else:
                    ev.setdefault("net_gdr", quoted)
            elif via["family"] in ("P2P", "SHM"):
                out["intra_node"].add(key)
                ev.setdefault("intra_node", quoted)
            continue
        rm = RING_RE.match(msg)
        if rm:
            ring_totals.append(int(rm.group(2)))
            continue
        ccm = COLL_CHANNELS_RE.match(msg)
        if ccm:
            out["channels"] = max(out["channels"] or 0, int(ccm.group(1)))
            continue
        km = COMM_RE.search(msg)
        if km:
            out["nranks"] = int(km.group(2))
            out["nnodes"] = int(km.group(3))
            continue
        km = NRANKS_RE.search(msg)
        if km and out["nranks"] is None:
            out["nranks"] = int(km.group(2))
            continue
        cm = CONNECTED_RE.search(msg)
        if cm and cm.group(2) is not None:
            out["ring_gdr"] = cm.group(2) == "1"
            ev.setdefault("ring_gdr", quoted)
    if not out["lines"] and out["version"] is None:
        raise ValueError(
            "parse_nccl_info: no NCCL line (host:pid:tid [dev] NCCL INFO ...) in the log; "
            "was NCCL_DEBUG=INFO set?"
        )
    if out["channels"] is None and ring_totals:
        out["channels"] = max(ring_totals)
    if net_gdr:
        out["gdrdma"] = any(net_gdr)
    out["network_kind"] = _net_kind(out["network"]) if out["network"] else None
    if out["inter_node"] is None and out["network"] and (out["nnodes"] or 0) > 1:
        out["inter_node"] = _net_kind(out["network"])
        ev.setdefault("inter_node", ev.get("network"))
    out["hosts"] = sorted(out["hosts"])
    out["intra_node"] = sorted(out["intra_node"])
    return out


def transport_findings(info, nic_facts=None, host=None):
    """Findings from what NCCL used against what the node has (fabric.parse_nic_facts):

    * nccl_socket_with_ib_up (critical): inter-node traffic went over NET/Socket (or NCCL found no
      IB device) while the node has active IB/RoCE ports.
    * nccl_gdr_skipped (warning): NET/IB connections without GDRDMA (or ``GPU Direct RDMA
      Disabled``) while nvidia_peermem is loaded.
    * nccl_no_network (info): a multi-node communicator with no NET connection line (the log was
      cut, or NCCL_DEBUG_SUBSYS left NET out).
    Each finding quotes the NCCL line it rests on in ``evidence``."""
    out = []
    who = f"{host}: " if host else ""
    facts = nic_facts or {}
    rdma_up = [p for p in facts.get("ib_ports", []) if p.get("active")]
    ev = info.get("evidence", {})
    if rdma_up and (info.get("inter_node") == "socket" or info.get("ib_no_device")):
        line = ev.get("inter_node") if info.get("inter_node") == "socket" else ev.get("ib_no_device")
        f = finding(
            "critical",
            "nccl_socket_with_ib_up",
            f"{who}NCCL carried inter-node traffic over TCP sockets although "
            f"{', '.join(p['name'] for p in rdma_up)} {'is' if len(rdma_up) == 1 else 'are'} ACTIVE "
            "(check NCCL_IB_DISABLE, NCCL_IB_HCA, libibverbs in the job's environment)",
        )
        f["evidence"] = line or ev.get("socket_using") or ev.get("network")
        out.append(f)
    peer = facts.get("peermem", {})
    used = info.get("inter_node") or info.get("network_kind")
    skipped = used == "ib" and (
        info.get("gdrdma") is False or (info.get("gdr_hca") and not any(info["gdr_hca"].values()))
    )
    if skipped and peer.get("loaded"):
        f = finding(
            "warning",
            "nccl_gdr_skipped",
            f"{who}NCCL used NET/IB without GPUDirect RDMA although {peer.get('module')} is loaded "
            "(GPU and NIC too far apart for NCCL_NET_GDR_LEVEL, ACS on the path, or peermem not registered)",
        )
        f["evidence"] = ev.get("gdr_disabled") or ev.get("net_without_gdr")
        out.append(f)
    if (info.get("nnodes") or 0) > 1 and not info.get("inter_node"):
        f = finding(
            "info",
            "nccl_no_network",
            f"{who}the communicator spans {info['nnodes']} nodes but the log shows no NET connection "
            "(cut short, or NCCL_DEBUG_SUBSYS without INIT,NET)",
        )
        f["evidence"] = ev.get("network")
        out.append(f)
    return out
