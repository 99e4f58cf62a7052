"""Network facts of a node and the inter-node bandwidth they promise (pure Python, stdlib only).

Files in, dict out. The probe (:func:`read_tree`) copies the few sysfs/procfs files wireup reads
into ``{path: text}``; every decision is made by the functions below from that dict, so the unit
tests run them on trees written from the kernel's sysfs ABI documents
(Documentation/ABI/stable/sysfs-class-infiniband, Documentation/ABI/testing/sysfs-class-net).

What is read, per the ABI documents and drivers/infiniband/core/sysfs.c:

* ``/sys/class/infiniband/<hca>/ports/<n>/state``: ``4: ACTIVE`` (DOWN, INIT, ARMED, ACTIVE,
  ACTIVE_DEFER); ``phys_state``: ``5: LinkUp`` (Sleep, Polling, Disabled, ...); ``rate``: active
  width x speed, ``400 Gb/sec (4X NDR)``, ``2.5 Gb/sec (1X SDR)``; ``link_layer``: ``InfiniBand``
  or ``Ethernet`` (RoCE); ``gid_attrs/types/<i>``: ``IB/RoCE v1`` or ``RoCE v2``;
  ``gid_attrs/ndevs/<i>``: the netdev of a RoCE GID. ``/sys/class/infiniband/<hca>/device`` links
  to the PCI function (its basename is the PCI address); ``device/driver`` names its driver
  (``mlx5_core``, ``efa``), ``device/physfn`` is present on an SR-IOV virtual function and names
  its physical function (drivers/pci/iov.c), ``board_id`` is the card model (mlx4/mlx5, bnxt_re;
  what ``ibv_devinfo`` prints as ``board_id``) and ``hca_type`` names the model too (mlx5:
  ``MT4129``, the PCI device id; the kernel's ABI document: "CA type"), read where ``board_id``
  is missing or empty (drivers that have no board id, or give an empty one).
  The kernel's formats (drivers/infiniband/core/sysfs.c): ``state`` ``%d: %s`` (NOP, DOWN, INIT,
  ARMED, ACTIVE, ACTIVE_DEFER); ``phys_state`` ``1: Sleep`` ... ``5: LinkUp``,
  ``6: LinkErrorRecovery``, ``7: Phy Test`` (names with spaces), ``%d: <unknown>``; ``rate``
  ``%d%s Gb/sec (%dX%s)``, whole or ``.5`` (``56 Gb/sec (4X FDR)``, ``200 Gb/sec (2X NDR)``,
  ``800 Gb/sec (4X XDR)``; older kernels printed SDR unnamed, ``(4X)``); a down port still
  reports a rate (``10 Gb/sec (4X SDR)``, ``40 Gb/sec (4X QDR)`` on a RoCE port);
  ``link_layer`` ``InfiniBand``, ``Ethernet`` or ``Unknown``. AWS's EFA answers ``Unknown``
  (its driver returns IB_LINK_LAYER_UNSPECIFIED; linux-rdma/rdma-core#884), always
  ``4: ACTIVE``/``5: LinkUp`` and, before its driver read the link speed, always
  ``100 Gb/sec (4X EDR)`` (drivers/infiniband/hw/efa/efa_verbs.c ``efa_query_port``).
* ``/sys/class/net/<if>/speed`` (Mb/s; -1 or unreadable when the link is down or the driver
  does not know; older kernels printed ethtool_cmd_speed() with ``%u``, so the unknown speed
  reads 4294967295, and drivers that filled only ethtool's 16-bit field give 65535: both mean
  unknown), ``mtu``, ``operstate`` (RFC 2863: up, down, dormant, unknown, ...), ``type``
  (ARPHRD: 1 Ethernet, 32 InfiniBand/IPoIB, 772 loopback), ``device`` (a link to the bus device;
  absent for virtual interfaces: veth, bridges, bonds).
* ``/proc/modules``: ``nvidia_peermem`` (driver >= 470) or ``nv_peer_mem`` (the older Mellanox
  module) loaded = GPUDirect RDMA can register GPU memory with the HCA (NCCL's troubleshooting
  guide, "GPU Direct RDMA"); DMA-BUF (kernel >= 5.12 with the open driver) also works without it.
* ``/proc/driver/nvidia/gpus/<pci>/``: one directory per GPU the NVIDIA driver drives (how many
  GPUs share the node's rails).
* ``/proc/cmdline`` and ``/sys/kernel/iommu_groups/<g>/type`` (``identity`` = passthrough,
  ``DMA``/``DMA-FQ`` = translated): NCCL's troubleshooting guide says IOMMU translation on bare
  metal hurts GPU peer and GPU-NIC traffic; ``iommu=pt`` keeps it out of the way.
"""

import os
import re

from .health import finding
from .topology import link_class_key

IB_ROOT = "sys/class/infiniband"
NET_ROOT = "sys/class/net"
IOMMU_ROOT = "sys/kernel/iommu_groups"
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
SOCKET_DEFAULT_GBPS = 10.0

# ``4: ACTIVE``, ``7: Phy Test``, ``9: <unknown>``: the kernel's names are words of letters.
STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*([A-Za-z_<>]+(?: [A-Za-z_<>]+)*)\s*$")
RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((\d+)X\s*([A-Za-z0-9]*)\))?")
ARPHRD = {1: "ether", 32: "infiniband", 772: "loopback", 65534: "none"}
# ethtool's SPEED_UNKNOWN (-1) as old kernels printed it (unsigned, 32 bits) and as drivers that
# set only the low 16 bits of ethtool_cmd's speed report it.
SPEED_UNKNOWN = (4294967295, 65535)
NVIDIA_GPUS = "proc/driver/nvidia/gpus"
# Azure's images name the Accelerated Networking VF (host Ethernet, not the training fabric)
# mlx5_an0 and the InfiniBand VFs mlx5_ib0...; Azure's health checks test mlx5_an0 apart
# (Azure/azurehpc-health-checks: `check_hw_ib 40 mlx5_an0:1`), jobs list NCCL_IB_HCA=mlx5_ib*.
FRONTEND_HCA = re.compile(r"^mlx5_an\d+$")
# Which transport NCCL prefers between nodes: NET/IB over InfiniBand ports, then AWS's EFA (the
# aws-ofi-nccl plugin), then NET/IB over RoCE ports. A down port of a kind below the node's
# transport carries no training traffic either way.
KIND_RANK = {"ib": 0, "efa": 1, "roce": 2}
KIND_LABEL = {"ib": "InfiniBand", "efa": "EFA", "roce": "RoCE"}
# Interface names that never carry training traffic between nodes.
SKIP_NET = re.compile(r"^(lo|docker\d*|virbr\d*|cni\d*|flannel.*|cali.*|vxlan.*|tun\d*|tap\d*)$")

# Fraction of the per-node NIC bandwidth that NCCL's all-reduce busbw reaches across nodes, per
# transport. nccl-tests' doc/PERFORMANCE.md defines busbw so that it "reflects how optimally the
# hardware is used" and compares to the hardware's peak: across nodes a ring crosses each node's
# NICs, so busbw tops out at the node's NIC bandwidth (rails x rate). Where the factors come from
# (roles/bench_fabric/README.md repeats this table):
# - ib_gdr 0.90: NDR 8x400G clusters report 360-370 GB/s all_reduce busbw of 400 GB/s in
#   NVIDIA's DGX H100 reference figures; NVIDIA/nccl#1412 reached 93 of ~100 GB/s once GDR was on;
#   an NCCL maintainer: "For NDR @ 400Gbps you should see 46-48GB/s per NIC" (0.92-0.96 of
#   50 GB/s; NVIDIA/nccl-tests#290, 2025-03, advising NCCL_ALGO=RING for two-node tests).
# - efa: none. AWS's captures (tests/fixtures/public/p4dex2_*, p5x2_*) beat the NIC figure
#   (tree algorithms), so they give no ring efficiency; EFA pairs get no expectation (reason given).
# - ib 0.75: NVIDIA/nccl#1412 measured 33 GB/s before enabling GDR on the same 4x NIC nodes
#   (host bounce buffers; the CPU memory copy bounds it); 0.75 is the optimistic side.
# - roce_gdr 0.85, roce 0.70: RoCE pays congestion control and lossy-fabric retries over IB.
# - socket 0.45: NCCL's socket transport (kernel TCP, NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS
#   streams) reaches about half a 100 GbE link; its own "Could not get speed" default is 10 Gbps.
# - gloo 0.30: torch's gloo over TCP on CPU tensors (the testbed): CPU-bound, judged against the
#   median of the pairs rather than this figure where the link is a veth.
TRANSPORT_EFFICIENCY = {
    "ib_gdr": 0.90,
    "ib": 0.75,
    "roce_gdr": 0.85,
    "roce": 0.70,
    "socket": 0.45,
    "gloo": 0.30,
}


class _Tree:
    """read_tree's reader: files, links and folders under one root, into one dict."""

    def __init__(self, root):
        self.root, self.out = root, {}

    def grab(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as fh:
                self.out[rel] = fh.read(65536)
        except OSError:
            self.out[rel] = None

    def link(self, rel):
        path = os.path.join(self.root, rel)
        if os.path.islink(path) or os.path.exists(path):
            try:
                self.out[rel] = os.path.basename(os.path.realpath(path))
            except OSError:
                self.out[rel] = None

    def listdir(self, rel):
        try:
            return sorted(os.listdir(os.path.join(self.root, rel)))
        except OSError:
            return []


def _read_hca(tree, base):
    for name in ("device", "device/driver", "device/physfn"):
        tree.link(f"{base}/{name}")
    for name in ("board_id", "hca_type"):
        if os.path.exists(os.path.join(tree.root, base, name)):
            tree.grab(f"{base}/{name}")
    for port in tree.listdir(f"{base}/ports"):
        _read_port(tree, f"{base}/ports/{port}")


def _read_port(tree, pbase):
    """A port's state, rate and link layer, and its first GIDs' types and netdevs."""
    for name in ("state", "phys_state", "rate", "link_layer"):
        tree.grab(f"{pbase}/{name}")
    for idx in tree.listdir(f"{pbase}/gid_attrs/types")[:4]:
        tree.grab(f"{pbase}/gid_attrs/types/{idx}")
        tree.grab(f"{pbase}/gid_attrs/ndevs/{idx}")


def _read_node_files(tree):
    """The NVIDIA driver's GPU list, the loaded modules, the kernel command line, IOMMU groups."""
    if os.path.isdir(os.path.join(tree.root, NVIDIA_GPUS)):
        tree.out[NVIDIA_GPUS] = ""
        for bus in tree.listdir(NVIDIA_GPUS):
            tree.grab(f"{NVIDIA_GPUS}/{bus}/information")
    tree.grab("proc/modules")
    tree.grab("proc/cmdline")
    _read_iommu(tree)


def _read_iommu(tree):
    """The first IOMMU group's type; the root as None when there is no group."""
    groups = tree.listdir(IOMMU_ROOT)
    for group in groups[:1]:
        tree.grab(f"{IOMMU_ROOT}/{group}/type")
    if not groups:
        tree.out[IOMMU_ROOT] = None


def read_tree(root="/", ib_root=IB_ROOT, net_root=NET_ROOT):
    """Read the files this module parses under ``root`` into {relative path: text}.

    Symbolic links that name devices (``device``) are kept as ``path -> target basename``; a file
    that cannot be read (a down link's ``speed`` raises EINVAL) is stored as None. Bounded: only
    the files listed in the module docstring, GID tables to their first 4 entries.
    """
    tree = _Tree(root)
    for hca in tree.listdir(ib_root):
        _read_hca(tree, f"{ib_root}/{hca}")
    for ifname in tree.listdir(net_root):
        base = f"{net_root}/{ifname}"
        for name in ("speed", "mtu", "operstate", "type"):
            tree.grab(f"{base}/{name}")
        tree.link(f"{base}/device")
    _read_node_files(tree)
    return tree.out


def _text(files, rel):
    value = files.get(rel)
    return value.strip() if isinstance(value, str) else None


def _int(value):
    try:
        return int(value.strip())
    except (AttributeError, ValueError):
        return None


def parse_state(text):
    """``4: ACTIVE`` -> (4, 'ACTIVE'); None or garbage -> (None, None)."""
    m = STATE_RE.match(text or "")
    return (int(m.group(1)), m.group(2)) if m else (None, None)


def parse_rate(text):
    """``400 Gb/sec (4X NDR)`` -> {gbps: 400.0, width: 4, speed: 'NDR'}; garbage -> None."""
    m = RATE_RE.match(text or "")
    if not m:
        return None
    return {
        "gbps": float(m.group(1)),
        "width": int(m.group(2)) if m.group(2) else None,
        "speed": m.group(3) or None,
    }


def parse_modules(text):
    """Names of the loaded kernel modules in ``/proc/modules`` (first column; state Live)."""
    names = set()
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and (len(parts) < 5 or parts[4] in ("Live", "Loading")):
            names.add(parts[0])
    return names


def iommu_mode(cmdline, group_type, has_groups):
    """'off', 'passthrough', 'translated' or 'unknown' from the kernel command line and the
    first IOMMU group's type (the kernel sets one default domain type for all groups)."""
    args = (cmdline or "").split()
    if group_type:
        t = group_type.strip()
        if t == "identity":
            return "passthrough"
        if t.startswith("DMA"):
            return "translated"
    if not has_groups:
        if any(a in ("intel_iommu=on", "amd_iommu=on") for a in args) and "iommu=pt" not in args:
            return "unknown"
        return "off"
    if "iommu=pt" in args:
        return "passthrough"
    return "unknown"


def _kind(layer, driver, hca):
    """'ib', 'roce', 'efa' or None: what NCCL would run over a port of this link layer."""
    if layer == "InfiniBand":
        return "ib"
    if layer == "Ethernet":
        return "roce"
    if driver == "efa" or (driver is None and hca.startswith("efa")):
        return "efa"
    return None


def _pci_device(pci):
    """'0000:1b:00.1' -> '0000:1b:00' (the card; functions are its ports); None stays None."""
    if not pci or "." not in pci:
        return None
    return pci.rsplit(".", 1)[0]


def _set_aside(ports):
    """Give each port a ``role``: 'rail' (can carry training traffic), 'frontend' (Azure's
    Accelerated Networking VF) or 'vf' (an SR-IOV virtual function of a physical function that
    is on this node too: it shares that port, so counting it would count the port twice); the
    reason goes in ``set_aside``."""
    pcis = {p.get("pci"): p["hca"] for p in ports if p.get("pci")}
    for p in ports:
        p.setdefault("role", "rail")
        p.setdefault("set_aside", None)
        if FRONTEND_HCA.match(p["hca"]):
            p["role"] = "frontend"
            p["set_aside"] = (
                "Azure's Accelerated Networking VF (mlx5_an*): host Ethernet for the VM's own "
                "traffic, not the training fabric"
            )
        elif p.get("vf_of") and p["vf_of"] in pcis and pcis[p["vf_of"]] != p["hca"]:
            p["role"] = "vf"
            p["set_aside"] = (
                f"an SR-IOV virtual function of {pcis[p['vf_of']]} ({p['vf_of']}) on this node: it "
                "shares that port's link"
            )


def _transport_kind(ports):
    """The kind NCCL would use between nodes: the best-ranked kind with an active rail port."""
    kinds = {
        p["kind"] for p in ports if p.get("active") and p.get("role", "rail") == "rail" and p.get("kind")
    }
    return min(kinds, key=KIND_RANK.get) if kinds else None


def _other_card_models(ports, kind):
    """Active rail ports of ``kind`` slower than the fastest ones AND of another card model
    (``model``: board_id, else hca_type) than the node's main one (the model most of those ports
    are): a storage or management card on the same fabric (DGX-like nodes carry 8 compute ports
    and 2-4 storage ports, NVIDIA/nccl#1505 shows a DGX A100's storage card with ports at 200 and
    100 Gb/s), not a degraded rail. A slower port of the main model, or where models are unknown, stays a rail
    (and a finding)."""
    active = [
        p
        for p in ports
        if p.get("active") and p.get("role") == "rail" and p.get("kind") == kind and p.get("rate_gbps")
    ]
    models = {}
    for p in active:
        models.setdefault(p.get("model"), []).append(p)
    if len(models) < 2 or None in models:
        return
    main = max(models, key=lambda m: (len(models[m]), max(p["rate_gbps"] for p in models[m]), m))
    top = max(p["rate_gbps"] for p in models[main])
    for p in active:
        if p["model"] != main and p["rate_gbps"] < top:
            p["role"] = "other_card"
            p["set_aside"] = (
                f"card model {p['model']} at {p['rate']}, unlike the {len(models[main])} port(s) of model "
                f"{main} at {top:g} Gb/sec: a storage or management card, not a training rail"
            )


def parse_nic_facts(files):
    """Build the NIC facts from :func:`read_tree`'s dict.

    Returns {ib_ports: [...], interfaces: [...], peermem: {loaded, module}, iommu: {mode},
    nvidia_gpus, transport: 'ib'|'efa'|'roce'|'socket'|None, rails: int, rail_gbps: float|None,
    set_aside: [...], findings: [...]}.
    ``ib_ports`` lists every HCA port (state, phys_state, rate, link layer, kind, RoCE version,
    netdev, PCI address, driver, board_id, hca_type, model, role); ``interfaces`` every netdev but
    loopback and container bridges. ``transport``, ``rails`` and ``rail_gbps`` describe what NCCL would use
    between nodes: active InfiniBand ports first, then EFA, then RoCE ports, else the fastest
    Ethernet/IPoIB interface that is up (sockets). Ports that cannot carry training traffic
    (Azure's Accelerated Networking VF, SR-IOV VFs of a local port, a slower card of another
    model) are listed in ``set_aside`` with the reason and counted nowhere. ``nvidia_gpus``: the
    GPUs ``/proc/driver/nvidia/gpus`` lists (None without the driver).
    """
    if not isinstance(files, dict):
        raise ValueError(f"parse_nic_facts: expected a dict of sysfs files, got {type(files).__name__}")
    port_re = re.compile(rf"^{re.escape(IB_ROOT)}/([^/]+)/ports/(\d+)/state$")
    ports = [_ib_port(files, m.group(1), int(m.group(2))) for m in map(port_re.match, sorted(files)) if m]
    _set_aside(ports)
    _other_card_models(ports, _transport_kind(ports))
    if_re = re.compile(rf"^{re.escape(NET_ROOT)}/([^/]+)/operstate$")
    names = [m.group(1) for m in map(if_re.match, sorted(files)) if m and not SKIP_NET.match(m.group(1))]
    mods = parse_modules(files.get("proc/modules"))
    loaded = next((m for m in PEERMEM_MODULES if m in mods), None)
    gpu_re = re.compile(rf"^{re.escape(NVIDIA_GPUS)}/[^/]+/information$")
    facts = {
        "ib_ports": ports,
        "interfaces": [i for i in (_interface(files, name) for name in names) if i],
        "peermem": {
            "loaded": loaded is not None,
            "module": loaded,
            "modules_read": files.get("proc/modules") is not None,
        },
        "iommu": {"mode": _iommu_of(files)},
        "nvidia_gpus": sum(1 for k in files if gpu_re.match(k)) if NVIDIA_GPUS in files else None,
        "set_aside": [
            {"name": p["name"], "role": p["role"], "reason": p["set_aside"]} for p in ports if p["set_aside"]
        ],
    }
    facts.update(usable_network(facts))
    facts["findings"] = node_findings(facts)
    return facts


def _ib_port(files, hca, num):
    """One HCA port's entry of parse_nic_facts' ib_ports (before _set_aside gives it a role)."""
    base = f"{IB_ROOT}/{hca}/ports/{num}"
    code, state = parse_state(_text(files, f"{base}/state"))
    pcode, phys = parse_state(_text(files, f"{base}/phys_state"))
    rate = parse_rate(_text(files, f"{base}/rate")) or {}
    layer = _text(files, f"{base}/link_layer")
    ndevs = [_text(files, k) for k in sorted(files) if k.startswith(f"{base}/gid_attrs/ndevs/")]
    driver = _text(files, f"{IB_ROOT}/{hca}/device/driver")
    board_id = _text(files, f"{IB_ROOT}/{hca}/board_id") or None
    hca_type = _text(files, f"{IB_ROOT}/{hca}/hca_type") or None
    return {
        "hca": hca,
        "port": num,
        "name": f"{hca}:{num}",
        "state": state,
        "state_code": code,
        "phys_state": phys,
        "phys_state_code": pcode,
        "rate_gbps": rate.get("gbps"),
        "width": rate.get("width"),
        "speed": rate.get("speed"),
        "rate": _text(files, f"{base}/rate"),
        "link_layer": layer,
        "kind": _kind(layer, driver, hca),
        "roce": _roce_version(files, base) if layer == "Ethernet" else None,
        "netdev": next((n for n in ndevs if n), None),
        "pci": _text(files, f"{IB_ROOT}/{hca}/device"),
        "driver": driver,
        "board_id": board_id,
        "hca_type": hca_type,
        # The card model: board_id, else the kernel's hca_type (None when neither says).
        "model": board_id or hca_type,
        "vf_of": _text(files, f"{IB_ROOT}/{hca}/device/physfn"),
        "active": state == "ACTIVE" and (phys is None or phys == "LinkUp"),
    }


def _roce_version(files, base):
    """'RoCE v2' when a GID of the port is, else the first GID type, else 'RoCE'."""
    kinds = [_text(files, k) for k in sorted(files) if k.startswith(f"{base}/gid_attrs/types/")]
    kinds = [t for t in kinds if t]
    return "RoCE v2" if "RoCE v2" in kinds else (kinds[0] if kinds else "RoCE")


def _interface(files, name):
    """One netdev's entry of parse_nic_facts' interfaces; None for a loopback device."""
    base = f"{NET_ROOT}/{name}"
    arp = _int(_text(files, f"{base}/type"))
    if arp == 772:
        return None
    speed = _int(_text(files, f"{base}/speed"))
    return {
        "name": name,
        "operstate": _text(files, f"{base}/operstate"),
        "speed_mbps": speed if speed is not None and speed > 0 and speed not in SPEED_UNKNOWN else None,
        "mtu": _int(_text(files, f"{base}/mtu")),
        "type": ARPHRD.get(arp, str(arp) if arp is not None else None),
        "pci": _text(files, f"{base}/device"),
        "virtual": files.get(f"{base}/device") is None,
    }


def _iommu_of(files):
    group_types = [v for k, v in files.items() if k.startswith(f"{IOMMU_ROOT}/") and k.endswith("/type")]
    return iommu_mode(
        files.get("proc/cmdline"),
        next((t for t in group_types if isinstance(t, str)), None),
        bool(group_types),
    )


def rail_ports(facts):
    """The ports that can carry training traffic (ports without a role, from callers that build
    facts by hand, count as rails)."""
    return [p for p in facts.get("ib_ports", []) if p.get("role", "rail") == "rail"]


def _port_kind(p):
    if "kind" in p:
        return p["kind"]
    return "roce" if p.get("link_layer") == "Ethernet" else "ib"


def usable_network(facts):
    """What NCCL would carry inter-node traffic on: {transport, rails, rail_gbps, devices}.

    ACTIVE InfiniBand ports first (NCCL's IB transport prefers them), then EFA (aws-ofi-nccl),
    then active RoCE ports, else sockets over the fastest interface that is up. Only rails
    count (not the ports in ``set_aside``). ``rail_gbps`` is the slowest active rail (NCCL
    splits channels evenly over rails, so the slowest one paces them all)."""
    active = [p for p in rail_ports(facts) if p.get("active")]
    for kind in sorted(KIND_RANK, key=KIND_RANK.get):
        group = [p for p in active if _port_kind(p) == kind]
        rates = [p["rate_gbps"] for p in group if p.get("rate_gbps")]
        if group and rates:
            return {
                "transport": kind,
                "rails": len(group),
                "rail_gbps": min(rates),
                "devices": [p["name"] for p in group],
            }
    up = [i for i in facts.get("interfaces", []) if i.get("operstate") in ("up", "unknown")]
    if up:
        return _socket_rail(up)
    return {"transport": None, "rails": 0, "rail_gbps": None, "devices": []}


def _socket_rail(up):
    """Sockets over the fastest interface that is up (a known speed, a real device first)."""
    best = max(
        up, key=lambda i: (i["speed_mbps"] is not None, not i["virtual"], i["speed_mbps"] or 0, i["name"])
    )
    # Without a speed NCCL does the same: "Could not get speed from /sys/class/net/eth0/speed.
    # Defaulting to 10 Gbps." (tests/fixtures/ncclinfo/h200x1_nccl-2.28.9_one_rank_all_reduce.txt)
    gbps = best["speed_mbps"] / 1000.0 if best["speed_mbps"] else SOCKET_DEFAULT_GBPS
    return {
        "transport": "socket",
        "rails": 1,
        "rail_gbps": gbps,
        "devices": [best["name"]],
        "speed_assumed": not best["speed_mbps"],
    }


def on_interface(facts, ifname):
    """The facts with the socket rail set to interface ``ifname`` (the one NCCL says it used):
    its speed, or NCCL's 10 Gb/s default when sysfs has none. ``ifname`` None (the log names none):
    facts unchanged. An interface the facts do not list (loopback, a virtual one): no rail, so no
    expectation from the hardware, and expected_busbw says which interface it was."""
    if not ifname:
        return facts
    iface = next((i for i in facts.get("interfaces", []) if i["name"] == ifname), None)
    if iface is None:
        return dict(facts, rails=0, rail_gbps=None, unlisted_interface=ifname)
    speed = iface.get("speed_mbps")
    return dict(
        facts,
        transport="socket",
        rails=1,
        rail_gbps=speed / 1000.0 if speed else SOCKET_DEFAULT_GBPS,
        devices=[ifname],
        speed_assumed=not speed,
    )


def _down_port_severity(p, ports, transport):
    """(severity, why) of a port that is not ACTIVE/LinkUp. A warning where it would carry
    training traffic; info where it would not: a port set aside (role), a port of a kind NCCL
    does not pick on this node (a RoCE storage port down on an InfiniBand node), or the other
    port of a card whose first port is up (dual-port cards wired with one cable; the cross-node
    check still names a node with fewer rails than the others)."""
    if p.get("role", "rail") != "rail":
        return "info", f"not a training rail: {p['set_aside']}"
    kind = _port_kind(p)
    if transport in KIND_RANK and kind in KIND_RANK and KIND_RANK[kind] > KIND_RANK[transport]:
        return "info", (
            f"this node's inter-node transport is {KIND_LABEL[transport]}, so this {KIND_LABEL[kind]} port "
            "carries no training traffic"
        )
    card = _pci_device(p.get("pci"))
    if card:
        up = [
            q["name"]
            for q in ports
            if q is not p and q.get("active") and _pci_device(q.get("pci")) == card and _port_kind(q) == kind
        ]
        if up:
            return "info", (
                f"the other port of the card {card} whose {', '.join(up)} is up: commonly left unused "
                "(a node with fewer rails than the others is a cross-node finding)"
            )
    return "warning", "it carries no traffic"


def node_findings(facts):
    """Findings about one node's NICs (see roles/gpu_topology/README.md, "Network facts")."""
    ports = facts.get("ib_ports", [])
    rails = [p for p in rail_ports(facts) if p.get("active")]
    return [
        *_down_port_findings(ports, facts.get("transport")),
        *_set_aside_findings(ports),
        *_rate_findings(rails, facts.get("transport")),
        *_rdma_findings(facts, rails),
    ]


def _down_port_findings(ports, transport):
    return [_down_port_finding(p, ports, transport) for p in ports if not p.get("active")]


def _down_port_finding(p, ports, transport):
    severity, why = _down_port_severity(p, ports, transport)
    return finding(
        severity,
        "nic_port_down",
        f"{p['name']} is {p.get('state') or 'unknown'}/{p.get('phys_state') or 'unknown'} "
        f"({p.get('link_layer') or 'unknown link layer'}): {why}",
    )


def _set_aside_findings(ports):
    aside = [p for p in ports if p.get("active") and p.get("role", "rail") != "rail"]
    if not aside:
        return []
    listed = "; ".join(f"{p['name']} ({p['set_aside']})" for p in aside)
    return [finding("info", "nic_set_aside", f"not counted as training rails: {listed}")]


def _rate_findings(rails, transport):
    """nic_rate_low: an active rail slower or narrower than the node's other ports of its link layer."""
    compared = [
        p for p in rails if p.get("rate_gbps") and (transport not in KIND_RANK or _port_kind(p) == transport)
    ]
    out = []
    for layer in sorted({p.get("link_layer") or "" for p in compared}):
        same = [p for p in compared if (p.get("link_layer") or "") == layer]
        top = max(p["rate_gbps"] for p in same)
        widest = max((p["width"] or 0) for p in same)
        out += [
            finding(
                "critical",
                "nic_rate_low",
                f"{p['name']} runs at {p['rate']} where other {layer or 'unknown link layer'} ports "
                f"of this node run at {top:g} Gb/sec: a degraded cable, port or width "
                "(the slowest rail paces every ring)",
            )
            for p in same
            if p["rate_gbps"] < top or (p["width"] or 0) < widest
        ]
    return out


def _rdma_findings(facts, rails):
    """peermem_missing and iommu_translated, on a node with an active RDMA rail."""
    if not any(p.get("link_layer") == "InfiniBand" or p.get("roce") for p in rails):
        return []
    out = []
    peer = facts.get("peermem", {})
    if peer.get("modules_read", True) and not peer.get("loaded"):
        out.append(
            finding(
                "warning",
                "peermem_missing",
                "RDMA NICs are up but neither nvidia_peermem nor nv_peer_mem is loaded: NCCL cannot use "
                "GPUDirect RDMA (unless the driver and kernel support DMA-BUF) and stages through host "
                "memory; load it with `modprobe nvidia_peermem`",
            )
        )
    if facts.get("iommu", {}).get("mode") == "translated":
        out.append(
            finding(
                "warning",
                "iommu_translated",
                "the IOMMU translates DMA (iommu group type DMA): NCCL's troubleshooting guide advises "
                "iommu=pt on bare metal for GPU-NIC traffic",
            )
        )
    return out


CLOSE_CLASSES = ("PIX", "PXB")


def _nic_cards(topo, nics, facts_by_hca):
    """{NIC column: card id}: ports of one card count once (a dual-port card shows as two NICs).
    The card is the PCI device of the HCA in the NIC facts; without facts, NICs that are PIX to
    each other and have the same class to every GPU are taken as one card."""
    matrix = topo.get("matrix", {})
    gpus = [f"GPU{g['index']}" for g in topo.get("gpus", [])]
    cards = {}
    for n in nics:
        port = facts_by_hca.get(n.get("device") or n["name"])
        card = _pci_device(port.get("pci")) if port else None
        if card is None:
            row = tuple(matrix.get(g, {}).get(n["name"]) for g in gpus)
            twin = next(
                (
                    m
                    for m in cards
                    if matrix.get(n["name"], {}).get(m) == "PIX"
                    and tuple(matrix.get(g, {}).get(m) for g in gpus) == row
                ),
                None,
            )
            card = cards[twin] if twin else f"column:{n['name']}"
        cards[n["name"]] = card
    return cards


def _device(nic):
    return nic.get("device") or nic["name"]


def _hca_states(ports):
    """({hca: its first port}, HCAs whose ports are all set aside, HCAs without an active port)."""
    by_hca = {}
    for p in ports:
        by_hca.setdefault(p["hca"], []).append(p)
    aside = {h for h, group in by_hca.items() if all(p.get("role", "rail") != "rail" for p in group)}
    inactive = {
        h for h, group in by_hca.items() if h not in aside and not any(p.get("active") for p in group)
    }
    return {h: group[0] for h, group in by_hca.items()}, aside, inactive


def _closeness_row(gpu, links, nics, usable, down_close):
    """gpu_nic_closeness' entry of one GPU: its nearest usable NICs and their class."""
    classes = {n: links.get(n) for n in usable if links.get(n)}
    if not classes:
        return {"gpu": gpu["index"], "nics": [], "class": None, "close": False}
    best = min(classes.values(), key=link_class_key)
    names = [n for n, c in classes.items() if c == best]
    devices = [next((_device(x) for x in nics if x["name"] == n), n) for n in names]
    row = {"gpu": gpu["index"], "nics": devices, "class": best, "close": best in CLOSE_CLASSES}
    if down_close and not row["close"]:
        row["close_but_down"] = down_close
    return row


def gpu_nic_closeness(topo, nic_facts=None):
    """Which NIC sits closest to each GPU, from parse_topo_matrix's output (its NIC columns).

    Returns {gpus: [{gpu, nics, class, close}], findings: [...]}. ``close`` is True where the best
    class is PIX or PXB (same PCIe switch, the path NCCL's GPUDirect RDMA wants). With
    ``nic_facts``, NICs whose HCA (``mlx5_0``) has no active port, or is set aside (Azure's
    Accelerated Networking VF, a local SR-IOV VF, a storage card), are left out.

    Findings (``gpu_without_close_nic``): a warning for each GPU without a close NIC on a node
    built with a NIC card per GPU (as many cards on GPUs' PCIe switches as GPUs, down ones
    included, ports of one card counted once: a GPU without one there has lost its card or its
    card's link); otherwise one info finding for the node, whose layout has GPUs that reach a
    NIC only through the CPU (fewer such cards than GPUs; or no GPU shares a PCIe switch with
    any NIC, as on boards without switches and in VMs whose PCI tree is flat). Nothing on nodes
    without NICs."""
    nics = topo.get("nics", [])
    first_port, aside, inactive = _hca_states((nic_facts or {}).get("ib_ports", []))
    designed = [n for n in nics if _device(n) not in aside]
    usable = [n["name"] for n in designed if _device(n) not in inactive]
    matrix = topo.get("matrix", {})
    rows = []
    for gpu in topo.get("gpus", []):
        # parse_topo_matrix names rows GPU0...; build_topology's gpus carry the model as name.
        links = matrix.get(f"GPU{gpu['index']}", {})
        down = [
            _device(n) for n in designed if _device(n) in inactive and links.get(n["name"]) in CLOSE_CLASSES
        ]
        rows.append(_closeness_row(gpu, links, nics, usable, down))
    far = [r for r in rows if r["class"] is not None and not r["close"]]
    if not far:
        return {"gpus": rows, "findings": []}
    cards = _nic_cards(topo, designed, first_port)
    gpu_rows = [matrix.get(f"GPU{g['index']}", {}) for g in topo.get("gpus", [])]
    close_cards = {
        cards[n["name"]] for n in designed if any(r.get(n["name"]) in CLOSE_CLASSES for r in gpu_rows)
    }
    return {"gpus": rows, "findings": _far_gpu_findings(far, len(close_cards), len(rows))}


def _far_gpu_findings(far, ncards, ngpus):
    """gpu_without_close_nic: a warning per far GPU on a node built with a NIC card per GPU, else
    one info finding saying the layout explains it."""
    if ncards >= ngpus:
        return [
            finding(
                "warning",
                "gpu_without_close_nic",
                f"GPU{r['gpu']}'s nearest NIC ({', '.join(r['nics'])}) is {r['class']}, not on its PCIe "
                "switch (PIX/PXB)"
                + (
                    f"; its own NIC {', '.join(r['close_but_down'])} has no active port"
                    if r.get("close_but_down")
                    else ""
                )
                + ": its inter-node traffic crosses the CPU (no GPUDirect RDMA by default), on a node "
                f"built with {ncards} NIC card(s) on GPU switches for {ngpus} GPUs",
                gpus=[r["gpu"]],
            )
            for r in far
        ]
    why = (
        f"{ncards} NIC card(s) on a GPU's PCIe switch for {ngpus} GPUs"
        if ncards
        else "no GPU shares a PCIe switch with any NIC (a board without PCIe switches, or a VM whose PCI "
        "tree is flat: there NCCL reads the provider's topology file, NCCL_TOPO_FILE)"
    )
    return [
        finding(
            "info",
            "gpu_without_close_nic",
            f"GPUs {', '.join(str(r['gpu']) for r in far)} reach their nearest NIC only through the CPU "
            f"({', '.join(sorted({r['class'] for r in far}, key=link_class_key))}), as this node's layout "
            f"explains: {why}",
            gpus=[r["gpu"] for r in far],
        )
    ]


def _value_text(value, unit):
    return f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _most_common(values):
    """The value most nodes have (the larger one on a tie)."""
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return max(counts, key=lambda v: (counts[v], v))


def _odd_ones(values, what, code, unit, ordered=False):
    """Findings naming the nodes whose value differs from the most common one ({host: value},
    None: unknown). ordered: a node above the common value is an info finding of its own (the group
    runs at the lower rate: no fault of that node), the critical finding names the slower ones."""
    present = {h: v for h, v in values.items() if v is not None}
    if len(set(present.values())) <= 1:
        return []
    common = _most_common(present.values())
    odd = sorted(h for h, v in present.items() if v != common)
    out = []
    if ordered:
        above = [h for h in odd if present[h] > common]
        odd = [h for h in odd if present[h] < common]
        if above:
            listed = ", ".join(f"{h} {present[h]:g}{unit}" for h in above)
            out.append(
                finding(
                    "info",
                    "fabric_rate_above_peers",
                    f"{what} is higher on {listed} than on most nodes ({common:g}{unit}): jobs spanning them "
                    "run at the lower rate",
                    nodes=above,
                )
            )
    if odd:
        detail = ", ".join(f"{h} {_value_text(present[h], unit)}" for h in odd)
        out.append(
            finding(
                "critical" if code == "fabric_rate_mismatch" else "warning",
                code,
                f"{what} differs across nodes: most run {_value_text(common, unit)}; {detail}",
                nodes=odd,
            )
        )
    return out


def _mtu_of(facts):
    """The smallest MTU of the node's inter-node devices (or of their RDMA ports' netdevs)."""
    names = set(facts.get("devices", []))
    mtus = [i["mtu"] for i in facts.get("interfaces", []) if i["name"] in names and i.get("mtu")]
    if not mtus:
        netdevs = {p.get("netdev") for p in facts.get("ib_ports", []) if p["name"] in names}
        mtus = [i["mtu"] for i in facts.get("interfaces", []) if i["name"] in netdevs and i.get("mtu")]
    return min(mtus) if mtus else None


def cross_node_findings(nodes):
    """Findings across nodes: {host: nic facts} -> mismatched rates, MTUs or transports.

    Each finding names the nodes that differ from the most common value."""
    bandwidth = {
        h: (float(f["rails"] * f["rail_gbps"]) if f.get("rail_gbps") else None) for h, f in nodes.items()
    }
    return [
        *_odd_ones(
            {h: f.get("transport") for h, f in nodes.items()},
            "the inter-node transport",
            "fabric_transport_mismatch",
            "",
        ),
        *_odd_ones(
            bandwidth, "usable NIC bandwidth (rails x rate)", "fabric_rate_mismatch", " Gb/s", ordered=True
        ),
        *_odd_ones(
            {h: _mtu_of(f) for h, f in nodes.items()},
            "the MTU of the inter-node interface",
            "fabric_mtu_mismatch",
            "",
        ),
    ]


def rails_for_ranks(facts, ranks):
    """(rails a job of ``ranks`` GPUs per node drives on a node, and why).

    Each GPU drives the rails nearest it. With the node's GPU count known (``nvidia_gpus``): a
    node with at least as many rails as GPUs gives each GPU rails // GPUs of them (AWS p5: 32
    EFA devices for 8 GPUs, 4 each; a DGX with 8 compute and 1-2 storage ports: 1 each, the
    spare ports count for no GPU), so the job drives ranks x that; a node with fewer rails than
    GPUs shares them, and the job drives its share, rounded up. Where the GPU count is unknown,
    one rail per GPU in the job (DGX-like nodes)."""
    rails = facts["rails"]
    if not ranks:
        return rails, f"{rails} rail(s)"
    ranks = max(1, int(ranks))
    node_gpus = facts.get("nvidia_gpus")
    if not node_gpus:
        used = min(rails, ranks)
        return used, f"{used} of {rails} rail(s): one per GPU in the job (the node's GPU count unknown)"
    gpus = min(ranks, node_gpus)
    if rails >= node_gpus:
        per_gpu = rails // node_gpus
        used = min(rails, gpus * per_gpu)
        return used, f"{used} of {rails} rail(s): {per_gpu} per GPU for {gpus} of the node's {node_gpus} GPUs"
    used = min(rails, -(-gpus * rails // node_gpus))
    return used, f"{used} of {rails} rail(s): {gpus} of the node's {node_gpus} GPUs share them"


def expected_busbw(
    nic_facts_by_node, gpus_per_node, *, intra_node_gbs=None, transport=None, gdr=None, overrides=None
):
    """Expected all-reduce busbw (GB/s) of a group of nodes, or None with the reason.

    busbw across nodes tops out at one node's NIC bandwidth for a ring (nccl-tests
    doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n, comparable to the hardware's peak; each ring
    enters and leaves every node once through a NIC, so a node's NICs carry 2(n-1)/n of the
    buffer in the time busbw is measured over): usable = rails x rate of the slowest node, the
    rails a job of ``gpus_per_node`` GPUs drives (:func:`rails_for_ranks`). NCCL's tree
    algorithms move less across nodes and can report more than that (the 2x p4de and 2x p5
    captures in tests/fixtures/public: 78 GB/s on 4x100G EFA, 487 GB/s on 32x100G), so the figure
    is what a ring must reach. The node's own fabric (NVLink, PCIe) bounds it too: the result is
    min(usable, intra-node expected) x the transport's efficiency. ``transport`` is what NCCL
    used (from its INFO log: 'ib' for NET/IB, which also drives RoCE ports, 'socket', 'ofi' for
    EFA) where known, else what the facts promise; ``gdr`` likewise.
    Returns {expected_gbs, network_gbs, bottleneck, transport, efficiency, slowest, rails,
    rails_basis} or {expected_gbs: None, reason}."""
    eff_table = {**TRANSPORT_EFFICIENCY, **(overrides or {})}
    if not nic_facts_by_node:
        return {"expected_gbs": None, "reason": "no node has NIC facts"}
    per_node = {}
    for host, facts in nic_facts_by_node.items():
        why = _no_rate(host, facts)
        if why:
            return {"expected_gbs": None, "reason": why}
        rails, basis = rails_for_ranks(facts, gpus_per_node)
        per_node[host] = (rails * facts["rail_gbps"] / 8.0, rails, basis)  # Gb/s -> GB/s
    slowest = min(per_node, key=lambda h: (per_node[h][0], h))
    network, rails, basis = per_node[slowest]
    key = _efficiency_key(transport, gdr, nic_facts_by_node, slowest)
    if key not in eff_table:
        return {
            "expected_gbs": None,
            "reason": f"no efficiency known for transport {key!r} "
            f"(nics.TRANSPORT_EFFICIENCY has {', '.join(sorted(eff_table))})",
        }
    base, bottleneck = network, "network"
    if intra_node_gbs and intra_node_gbs < network:
        base, bottleneck = intra_node_gbs, "intra-node"
    return {
        "expected_gbs": round(base * eff_table[key], 3),
        "network_gbs": round(network, 3),
        "bottleneck": bottleneck,
        "transport": key,
        "efficiency": eff_table[key],
        "slowest": slowest,
        "rails": rails,
        "rails_basis": basis,
    }


def _no_rate(host, facts):
    """Why a node's facts give no network bandwidth ('' when they do)."""
    if facts and facts.get("unlisted_interface"):
        return _unlisted(host, facts)
    if not facts or not facts.get("rail_gbps"):
        return f"{host}: no usable NIC with a known rate"
    return ""


def _unlisted(host, facts):
    listed = ", ".join(facts.get("devices") or []) or "none"
    return (
        f"{host}: NCCL used {facts['unlisted_interface']}, not one of the NICs read ({listed}): no "
        "expectation from the hardware"
    )


def _used_kind(transport, promised):
    """What NCCL used (ofi as efa), else what the facts promise; NET/IB over RoCE ports as roce."""
    kind = {"ofi": "efa"}.get(transport, transport) or promised
    if kind == "ib" and promised == "roce":
        kind = "roce"  # NCCL's NET/IB over the node's RoCE ports
    return kind


def _efficiency_key(transport, gdr, nic_facts_by_node, slowest):
    """TRANSPORT_EFFICIENCY's key: what NCCL used (else what the slowest node's facts promise),
    NET/IB over RoCE ports as roce, with _gdr where GPUDirect RDMA was used (else where every node
    has peermem loaded)."""
    kind = _used_kind(transport, nic_facts_by_node[slowest].get("transport"))
    if kind not in ("ib", "roce"):
        return kind
    if gdr is None:
        gdr = all(f.get("peermem", {}).get("loaded") for f in nic_facts_by_node.values())
    return f"{kind}_gdr" if gdr else kind
