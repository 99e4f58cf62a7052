"""What NCCL chose, from its own ``NCCL_DEBUG=INFO`` log (pure Python, stdlib only).

Text in, dict out. NCCL prints one record per fact, ``host:pid:tid [cudaDev] NCCL INFO msg`` (WARN
records name their source line first: ``[7] net_ib.cu:788 NCCL WARN``; NCCL 2.3 printed ``INFO``
without ``NCCL``). Launchers and log collectors add their own prefixes (``[1,7]<stdout>:``, srun's ``52: ``,
``[0] ``, ``host: `` from pdsh or a pod log, torchrun's ``[default0]:``, a markdown backtick, the
``[2025-06-01 12:00:00] `` timestamp NCCL >= 2.26 puts before WARN records, or before every record
with ``NCCL_DEBUG_TIMESTAMP_LEVELS``), logs of several ranks interleave, a paste may drop the
``host:pid:tid`` part (``[0] NCCL INFO ...``) or pad the device (``[ 6 ]``), a benchmark row may
be glued before a record, and a collector may join records into one line: every record is found
wherever it starts and runs to the next one.
Lines read (NCCL 2.3 to 2.30, checked against the logs in tests/fixtures/ncclinfo/):

* ``NCCL version 2.28.9+cuda13.0`` (a record, or the bare banner line; a ``..., NCCL version
  21.1.4`` inside a framework's error message is not NCCL's banner and is not read).
* ``Using network IB`` / ``Socket`` / ``IBext`` / ``IBext_v8`` / ``Libfabric`` / ``NCCL RDMA
  Plugin v6`` / ``gIB`` (2.3: ``Using internal Network IB``): the network the communicator took.
  ``IBext*`` and ``NCCL RDMA Plugin`` are the nccl-rdma-sharp-plugins (HPC-X, also rebuilt by
  clouds), ``gIB`` Google's RDMA plugin; all use IB verbs (IB or RoCE). ``Libfabric`` and ``AWS
  Libfabric`` are aws-ofi-nccl (EFA). Other names (Google's TCP offload plugins GPUDirectTCPX and
  FasTrak; no capture here) are kind ``other``: neither RDMA nor NCCL's socket transport.
* ``Initialized NET plugin IB`` / ``Failed to initialize NET plugin IB`` / ``Assigned NET plugin
  IB to comm`` (2.27+), ``NET/Plugin: Loaded net plugin NCCL RDMA Plugin v6 (v6)``.
* ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>``, merged ports
  ``[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE}``, ``/IB/SHARP`` with the SHARP plugin, 2.3's
  ``NET/IB: [0] mlx5_1:1/IB`` one per line; ``NET/IB : No device found.``
* ``NET/Socket : Using [0]eth0:10.0.0.1<0> [1]veth0:fe80::1%veth0<0>`` (an address may be empty:
  ``[0]enp41s0f1:<0>``).
* ``NET/OFI Selected Provider is efa (found 16 nics)``.
* ``NET/IB : GPU Direct RDMA Enabled|Disabled for HCA 0 'mlx5_0'`` (2.4: ``... for GPU 0[0] / HCA
  0 (distance 4 >= 2)``); the ``NET/Socket`` form names an interface, not an HCA, and is left out.
* ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`` (2.4-2.8: ``Ring 00 : 7 -> 8 [send]
  via NET/AWS Libfabric/0``): the transport of each connection: ``NET/<plugin>/<dev>[(<proxy
  rank>)][/GDRDMA][/Shared]`` between nodes (the plugin name may hold spaces; ``(2)`` is PXN, the
  rank whose NIC carries the data), ``P2P/CUMEM``, ``P2P/IPC/read``, ``P2P/direct pointer``,
  ``SHM/direct/direct`` (2.5: ``via direct shared memory``) inside one.
* ``Channel 00/02 :    0   1`` (ring order, NN/total; 2.4: ``Channel 00 :    0   1``) and ``16
  coll channels, 0 collnet channels, 16 nvls channels, ...``: channel counts.
* ``comm 0x... rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0`` (2.19+), older
  ``rank 0 nranks 8``; several communicators in one log: the largest counts.
* ``NVLS multicast support is available on dev 0`` / ``is not available``.
* ``Connected all rings, use ring PXN 0 GDR 0`` (2.2x+): whether PXN and GDR are used at all.
* ``NCCL_IB_DISABLE set by environment to 1.``, ``NCCL_IB_HCA set to mlx5_0``: the environment
  NCCL saw (``env``), so a transport chosen on purpose is not reported as a fault.
* ``NCCL WARN ...``: every WARN record, and ``failures``: the known failure shapes among them
  (``FAILURES``; the captures show ``Connect to ... failed``, ``Connection closed by remote peer``,
  ``Got completion from peer ... with status=12``, ``Call to ibv_modify_qp failed``, ``Failed to
  open libibverbs``, ``ring 2 does not loop back``, ``network gIB not found``, ``Failed to execute
  operation Connect``, ``socketFinalizeAccept: wrong type``, ``Cuda failure``, ``NET/OFI Couldn't
  open AV``, and on our H200 (tests/gpu/nccl_scenarios.py) ``Bootstrap : no socket interface
  found``, ``Failed to initialize any NET plugin`` (NCCL_NET=IB without IB), ``socketProgress:
  Connection closed by remote peer`` (a rank killed) and ``Duplicate GPU detected``).
"""

import re

from .health import finding
from .nics import rail_ports

# One NCCL record header: [host:pid:tid ][dev] [src:line ][NCCL ]INFO|WARN. Found from its "[dev]"
# bracket (a scan that starts only at "[" stays linear on long lines), then host:pid:tid is looked
# for right before it; without it (a paste that dropped it) the record needs the word NCCL. A host
# never holds whitespace, ':', brackets or parentheses.
DEV_RE = re.compile(
    r"\[\s*(?P<dev>\d+)\s*\] (?:(?P<src>[\w./\-]{1,200}:\d+) )?(?P<nccl>NCCL )?(?P<level>INFO|WARN)(?= |$)"
)
HOST_TAIL_RE = re.compile(r"(?P<host>[^\s:\[\]()]{1,255}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) \Z")
# NCCL formats a record into a fixed buffer (1-4 KiB): more text is other output joined to it.
MAX_MESSAGE = 4096
# NCCL's banner: alone on its line (after a launcher prefix), major version 2 to 9.
BANNER_RE = re.compile(r"(?:^|[\s:>\]])NCCL version ([2-9]\.\d{1,3}\.\d{1,3})(?:\+(\S+))?\s*$")
VERSION_RE = re.compile(r"^NCCL version ([2-9]\.\d{1,3}\.\d{1,3})(?:\+(\S+))?\s*$")
NETWORK_RE = re.compile(r"^Using (?:internal )?[Nn]etwork (.+?)\s*$")
PLUGIN_RE = re.compile(r"^(Initialized|Failed to initialize|Assigned) NET plugin (\S+)(?: to comm)?\s*$")
LOADED_RE = re.compile(r"^NET/Plugin ?: Loaded net plugin (.+?)(?: \(v\d+\))?\s*$")
ENV_RE = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\s*$")
IB_USING_RE = re.compile(r"^NET/IB\w* : Using (.*?)\s*(?:;\s*OOB\s+(\S*))?\s*$")
IB_MERGED_RE = re.compile(r"\[(\d+)\]=\{([^}]*)\}")
IB_DEV_RE = re.compile(r"\[(\d+)\] ?([\w.\-]+):(\d+)/([A-Za-z]+)(/SHARP)?")
IB_OLD_DEV_RE = re.compile(r"^NET/IB: \[(\d+)\] ([\w.\-]+):(\d+)/([A-Za-z]+)(/SHARP)?\s*$")
SOCKET_USING_RE = re.compile(r"^NET/Socket : Using (.*)$")
SOCKET_DEV_RE = re.compile(r"\[(\d+)\]([\w.\-@]+):([0-9A-Za-z.:%_\-]*)<\d+>")
OFI_RE = re.compile(r"^NET/OFI Selected Provider is (\S+)(?: \(found (\d+) nics\))?")
GDR_HCA_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']+)'")
GDR_OLD_RE = re.compile(r"^NET/(\w+) ?: GPU Direct RDMA (Enabled|Disabled) for GPU \S+ / HCA (\d+)")
VIA_RE = re.compile(
    r"^(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[\w+\])? -> (\d+)(?:\[\w+\])?"
    r"(?: \[(send|receive)\])? via (.+?)\s*$"
)
NET_PATH_RE = re.compile(r"^NET/(?P<plugin>.+?)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>(?:/\w+)*)$")
RING_RE = re.compile(r"^Channel (\d{2})(?:/(\d{2,}))? :(?: +\d+)+\s*$")
COLL_CHANNELS_RE = re.compile(r"^(\d+) coll channels")
NVLS_CHANNELS_RE = re.compile(r"\b(\d+) nvls channels")
COMM_RE = re.compile(
    r"rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)(?: localRank (\d+))?(?: MNNVL (\d+))?"
)
NRANKS_RE = re.compile(r"\brank (\d+) nranks (\d+)\b")
CONNECTED_RE = re.compile(r"Connected all rings(?:, use ring PXN (\d) GDR (\d))?")
NVLS_RE = re.compile(r"^NVLS multicast support is (not )?available on dev (\d+)")
NO_DEVICE_RE = re.compile(r"^NET/IB\w* : No device found")

# Known failure shapes among the WARN records: (code, pattern, what it means).
FAILURES = [
    (
        "connect_failed",
        re.compile(r"Connect to \S+ failed|Call to connect (?:failed|returned)", re.I),
        "a TCP connect to a peer failed (wrong NCCL_SOCKET_IFNAME, a firewall, or the peer died)",
    ),
    (
        "peer_closed",
        re.compile(r"Connection closed by remote peer"),
        "a peer closed its socket (it failed first: read that rank's log)",
    ),
    (
        "ib_completion_error",
        re.compile(r"Got completion (?:from peer \S+ )?with (?:error|status)"),
        "an RDMA work request failed (link flap, fabric or GID/routing error, NCCL_IB_TIMEOUT too short)",
    ),
    (
        "ibverbs_call_failed",
        re.compile(r"Call to ibv_\w+ failed"),
        "an IB verbs call failed (GID index, subnet, or the port is down)",
    ),
    (
        "ibverbs_missing",
        re.compile(r"Failed to open libibverbs"),
        "NCCL could not load libibverbs, so it cannot use IB/RoCE at all",
    ),
    (
        "no_socket_interface",
        re.compile(r"no (?:socket|NCCL_SOCKET_IFNAME) interface found", re.I),
        "no interface matches NCCL_SOCKET_IFNAME (or none is up)",
    ),
    (
        "ring_no_loopback",
        re.compile(r"ring \d+ does not loop back"),
        "the ranks computed different rings (mixed NCCL versions or topologies across ranks)",
    ),
    (
        "net_not_found",
        re.compile(r"network \S+ not found"),
        "NCCL_NET names a network no loaded plugin provides",
    ),
    ("net_init_failed", re.compile(r"Failed to initialize any NET plugin"), "no NET plugin initialized"),
    (
        "proxy_failed",
        re.compile(r"Proxy Call to rank \d+ failed|Failed to execute operation|Socket recv failed"),
        "the proxy thread could not set up or serve a connection",
    ),
    ("socket_type_mismatch", re.compile(r"wrong type \d+ != \d+"), "a bootstrap socket met the wrong peer"),
    (
        "duplicate_gpu",
        re.compile(r"Duplicate GPU detected"),
        "two ranks of one host on the same GPU (each local rank needs its own GPU: LOCAL_RANK to "
        "cuda device, CUDA_VISIBLE_DEVICES)",
    ),
    ("cuda_failure", re.compile(r"Cuda failure"), "a CUDA call failed inside NCCL"),
    ("ofi_error", re.compile(r"NET/OFI .*(?:Couldn't|[Ff]ailed|[Ee]rror)"), "aws-ofi-nccl reported an error"),
]

# Network plugin names (as "Using network" and "via NET/<name>/" print them) -> kind.
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
    """'ib' for IB-verbs plugins (NCCL's IB, nccl-rdma-sharp-plugins' IBext / "NCCL RDMA Plugin",
    Google's gIB), 'socket', 'ofi' (aws-ofi-nccl), else 'other' (GPUDirectTCPX, FasTrak, ...)."""
    name = (plugin or "").strip()
    for key, kind in NET_KINDS.items():
        if name == key or name.startswith(key + "_"):
            return kind
    low = name.lower()
    if "libfabric" in low or low.startswith("ofi"):
        return "ofi"
    if name.startswith("IB") or low.startswith("gib") or ("rdma" in low and "plugin" in low):
        return "ib"
    return "other"


def _via(path):
    """``NET/IB/0(2)/GDRDMA/Shared`` -> {family: 'NET', plugin: 'IB', device: 0, proxy: 2, gdr:
    True, shared: True}; ``P2P/CUMEM/read`` -> family 'P2P', plugin 'CUMEM'. A NET path cut before
    its device number is None (not counted)."""
    out = {"path": path, "family": None, "plugin": None, "device": None, "proxy": None}
    out.update(gdr=False, shared=False)
    if path.startswith("NET/"):
        m = NET_PATH_RE.match(path)
        if not m:
            return None
        flags = m.group("flags").split("/")
        out.update(
            family="NET",
            plugin=m.group("plugin"),
            device=int(m.group("dev")),
            proxy=int(m.group("proxy")) if m.group("proxy") else None,
            gdr="GDRDMA" in flags,
            shared="Shared" in flags,
        )
        return out
    if path in ("direct shared memory", "shared memory"):  # NCCL 2.4-2.6 SHM wording
        out.update(family="SHM", plugin="direct" if path.startswith("direct") else None)
        return out
    parts = path.split("/")
    out.update(family=parts[0], plugin=parts[1] if len(parts) > 1 and parts[1] else None)
    return out


def _records(line):
    """[(header text, host or None, level, message)] of every NCCL record in one line."""
    if "INFO" not in line and "WARN" not in line:
        return []
    heads = []
    for m in DEV_RE.finditer(line):
        lo = max(0, m.start() - 300)
        h = HOST_TAIL_RE.search(line, lo, m.start())
        if h:
            heads.append((h.start(), h.group("host"), m))
        elif m.group("nccl") and (m.start() == 0 or not re.match(r"[\w\]]", line[m.start() - 1])):
            heads.append((m.start(), None, m))
    out = []
    for i, (start, host, m) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(line)
        out.append((line[start : m.end()], host, m.group("level"), line[m.end() : end][: MAX_MESSAGE + 1]))
    return out


def _ib_devices(text, out):
    merged = []
    for g in IB_MERGED_RE.finditer(text):
        merged.extend((int(g.group(1)), d) for d in IB_DEV_RE.finditer(g.group(2)))
    rest = IB_MERGED_RE.sub(" ", text)
    for vnic, d in merged + [(None, d) for d in IB_DEV_RE.finditer(rest)]:
        entry = {
            "index": int(d.group(1)),
            "device": d.group(2),
            "port": int(d.group(3)),
            "link_layer": d.group(4),
            "sharp": bool(d.group(5)),
            "vnic": vnic,
        }
        if entry not in out["ib_devices"]:
            out["ib_devices"].append(entry)
    return bool(merged) or bool(IB_DEV_RE.search(rest))


def _env_value(raw):
    """NCCL prints integers as ``to 1.`` and strings as ``to eth0``."""
    return raw[:-1] if re.fullmatch(r"-?\d+\.", raw) else raw


def parse_nccl_info(text):
    """Parse an NCCL INFO log (one rank or many interleaved). Returns a dict:

    version, hosts (sorted), network (the plugin name NCCL reported first, e.g. ``IB``), networks
    (every one seen), network_kind, net_plugins {initialized, failed, assigned, loaded: [name]},
    ib_devices [{index, device, port, link_layer, sharp, vnic}] (``vnic``: the merged NIC a port
    belongs to, else None), ib_no_device (bool), socket_interfaces [{index, name, address}],
    ofi_provider, gdr_hca {device: bool}, connections {family/plugin: count} (``NET/IB``,
    ``NET/Socket``, ``P2P/CUMEM``, ``SHM/direct``), inter_node (the kind of the first NET
    connection: 'ib', 'socket', 'ofi', 'other', or from ``network`` where the communicator spans
    nodes; else None), inter_node_kinds (every NET kind seen), inter_node_plugin (its name),
    inter_node_link ('IB' or 'RoCE' where inter_node is 'ib' and every port NCCL listed has that
    link layer, else None), gdrdma (True/False over NET connections, None without any),
    net_gdr_counts {gdr, no_gdr}, pxn_proxy_ranks (sorted ranks that proxied NET traffic),
    intra_node (sorted P2P/SHM kinds), channels, nvls_channels, nvls_available, nranks, nnodes,
    local_ranks, mnnvl, ring_gdr / ring_pxn (``Connected all rings``), env {NCCL_*: value},
    warnings [line], failures [{code, count, line, meaning}] (first appearance order), evidence
    {key: line} (the first NCCL line behind each conclusion, quoted in findings), lines (NCCL
    records read). Text without any NCCL record or banner raises ValueError.
    """
    if not isinstance(text, str):
        raise ValueError(
            f"parse_nccl_info: expected the text of an NCCL_DEBUG=INFO log, got {type(text).__name__}"
        )
    out = _new_info()
    st = {"out": out, "ev": out["evidence"], "ring_totals": [], "ring_ids": set(), "failures": {}}
    for raw in text.splitlines():
        _read_line(st, raw.replace("\r", "").replace("\x00", "").rstrip())
    if not out["lines"] and out["version"] is None:
        raise ValueError(
            "parse_nccl_info: no NCCL line (host:pid:tid [dev] NCCL INFO ...) in the log; "
            "was NCCL_DEBUG=INFO set?"
        )
    return _conclude(st)


def _new_info():
    """parse_nccl_info's answer before the first line."""
    return {
        "version": None,
        "hosts": set(),
        "network": None,
        "networks": [],
        "net_plugins": {"initialized": [], "failed": [], "assigned": [], "loaded": []},
        "ib_devices": [],
        "ib_no_device": False,
        "socket_interfaces": [],
        "ofi_provider": None,
        "gdr_hca": {},
        "connections": {},
        "inter_node": None,
        "inter_node_kinds": [],
        "inter_node_plugin": None,
        "gdrdma": None,
        "net_gdr_counts": {"gdr": 0, "no_gdr": 0},
        "pxn_proxy_ranks": set(),
        "intra_node": set(),
        "channels": None,
        "nvls_channels": None,
        "nvls_available": None,
        "nranks": None,
        "nnodes": None,
        "local_ranks": None,
        "mnnvl": None,
        "ring_gdr": None,
        "ring_pxn": None,
        "env": {},
        "warnings": [],
        "failures": [],
        "evidence": {},
        "lines": 0,
    }


def _read_line(st, line):
    """Every NCCL record of one line, or NCCL's banner when the line holds no record."""
    records = _records(line)
    if records:
        for head, host, level, message in records:
            _record(st, head, host, level, message.strip())
        return
    out = st["out"]
    banner = BANNER_RE.search(line)
    if banner and "NCCL error" not in line and out["version"] is None:
        out["version"] = banner.group(1)
        st["ev"].setdefault("version", line.strip())


def _real_hosts(hosts):
    """A benchmark row glued to a record ("...  -1host:1:2 [0] NCCL INFO") makes "-1host": keep "host"."""
    return sorted(
        h
        for h in hosts
        if not any(o != h and h.endswith(o) and re.fullmatch(r"[-\d]+", h[: -len(o)]) for o in hosts)
    )


def _conclude(st):
    """What the whole log says, from what its lines said (channels, GDR, the inter-node kind)."""
    out, ev = st["out"], st["ev"]
    if out["channels"] is None and (st["ring_totals"] or st["ring_ids"]):
        out["channels"] = max(st["ring_totals"]) if st["ring_totals"] else max(st["ring_ids"]) + 1
    counts = out["net_gdr_counts"]
    if counts["gdr"] or counts["no_gdr"]:
        out["gdrdma"] = counts["gdr"] > 0
    out["network_kind"] = _net_kind(out["network"]) if out["network"] else None
    if out["inter_node"] is None and out["network"] and (out["nnodes"] or 0) > 1:
        out["inter_node"] = out["network_kind"]
        out["inter_node_plugin"] = out["network"]
        ev.setdefault("inter_node", ev.get("network"))
    layers = {d["link_layer"] for d in out["ib_devices"]}
    out["inter_node_link"] = (
        next(iter(layers)) if out["inter_node"] == "ib" and layers in ({"IB"}, {"RoCE"}) else None
    )
    out["failures"] = sorted(st["failures"].values(), key=lambda f: f.pop("_order"))
    out["hosts"] = _real_hosts(out["hosts"])
    out["intra_node"] = sorted(out["intra_node"])
    out["pxn_proxy_ranks"] = sorted(out["pxn_proxy_ranks"])
    return out


def _record(st, head, host, level, msg):
    """Fold one NCCL record (its header text, host, level and message) into ``st["out"]``: a WARN
    is a warning (and a known failure shape), an INFO the first of _INFO_RULES that matches."""
    out = st["out"]
    out["lines"] += 1
    if host:
        out["hosts"].add(host)
    quoted = f"{head} {msg[:MAX_MESSAGE]}".strip()
    if level == "WARN":
        _warn(st, msg, quoted)
        return
    if len(msg) > MAX_MESSAGE:
        return
    for match, fold in _INFO_RULES:
        m = match(msg)
        if m:
            fold(st, m, quoted)
            return


def _warn(st, msg, quoted):
    st["out"]["warnings"].append(quoted)
    failures = st["failures"]
    for code, pattern, meaning in FAILURES:
        if pattern.search(msg):
            f = failures.setdefault(
                code, {"code": code, "count": 0, "line": quoted, "meaning": meaning, "_order": len(failures)}
            )
            f["count"] += 1
            return


def _add_once(items, item):
    if item not in items:
        items.append(item)


def _on_version(st, m, quoted):
    st["out"]["version"] = st["out"]["version"] or m.group(1)
    st["ev"].setdefault("version", quoted)


def _on_env(st, m, quoted):
    st["out"]["env"].setdefault(m.group(1), _env_value(m.group(2)))
    st["ev"].setdefault(f"env:{m.group(1)}", quoted)


def _on_network(st, m, quoted):
    out = st["out"]
    _add_once(out["networks"], m.group(1))
    out["network"] = out["network"] or m.group(1)
    st["ev"].setdefault("network", quoted)


_PLUGIN_STATES = {"Initialized": "initialized", "Failed to initialize": "failed", "Assigned": "assigned"}


def _on_plugin(st, m, quoted):
    _add_once(st["out"]["net_plugins"][_PLUGIN_STATES[m.group(1)]], m.group(2))


def _on_loaded(st, m, quoted):
    _add_once(st["out"]["net_plugins"]["loaded"], m.group(1))


def _on_no_device(st, m, quoted):
    st["out"]["ib_no_device"] = True
    st["ev"].setdefault("ib_no_device", quoted)


def _on_ib_using(st, m, quoted):
    if _ib_devices(m.group(1), st["out"]):
        st["ev"].setdefault("ib_using", quoted)


def _on_ib_old(st, m, quoted):
    _ib_devices(m.string[len("NET/IB: ") :], st["out"])
    st["ev"].setdefault("ib_using", quoted)


def _on_socket(st, m, quoted):
    for d in SOCKET_DEV_RE.finditer(m.group(1)):
        _add_once(
            st["out"]["socket_interfaces"],
            {"index": int(d.group(1)), "name": d.group(2), "address": d.group(3)},
        )
    st["ev"].setdefault("socket_using", quoted)


def _on_ofi(st, m, quoted):
    st["out"]["ofi_provider"] = st["out"]["ofi_provider"] or m.group(1)
    st["ev"].setdefault("ofi_provider", quoted)


def _gdr_match(msg):
    """(enabled, HCA name) of a GPU Direct RDMA line (2.12+ names the HCA, older ones its index);
    a NET/Socket line says nothing about GPUDirect RDMA: (None, None). None: no such line."""
    new, old = GDR_HCA_RE.search(msg), GDR_OLD_RE.match(msg)
    if not (new or old):
        return None
    if msg.startswith("NET/Socket"):
        return None, None
    if new:
        return new.group(1) == "Enabled", new.group(3)
    return old.group(2) == "Enabled", f"HCA {old.group(3)}"


def _on_gdr(st, m, quoted):
    enabled, name = m
    if name is None:
        return
    st["out"]["gdr_hca"][name] = st["out"]["gdr_hca"].get(name, False) or enabled
    if not enabled:
        st["ev"].setdefault("gdr_disabled", quoted)


def _on_net_connection(st, via, key, quoted):
    out, ev = st["out"], st["ev"]
    out["net_gdr_counts"]["gdr" if via["gdr"] else "no_gdr"] += 1
    kind = _net_kind(via["plugin"])
    _add_once(out["inter_node_kinds"], kind)
    if via["proxy"] is not None:
        out["pxn_proxy_ranks"].add(via["proxy"])
        ev.setdefault("pxn", quoted)
    if out["inter_node"] is None:
        out["inter_node"], out["inter_node_plugin"] = kind, via["plugin"]
        ev.setdefault("inter_node", quoted)
    ev.setdefault("net_gdr" if via["gdr"] else "net_without_gdr", quoted)


def _on_via(st, m, quoted):
    via = _via(m.group(5))
    if via is None:
        return
    out = st["out"]
    key = f"{via['family']}/{via['plugin']}" if via["plugin"] else via["family"]
    out["connections"][key] = out["connections"].get(key, 0) + 1
    if via["family"] == "NET":
        _on_net_connection(st, via, key, quoted)
    elif via["family"] in ("P2P", "SHM"):
        out["intra_node"].add(key)
        st["ev"].setdefault("intra_node", quoted)


def _on_ring(st, m, quoted):
    if m.group(2):
        st["ring_totals"].append(int(m.group(2)))
    else:
        st["ring_ids"].add(int(m.group(1)))


def _on_coll_channels(st, m, quoted):
    out = st["out"]
    out["channels"] = max(out["channels"] or 0, int(m.group(1)))
    nv = NVLS_CHANNELS_RE.search(m.string)
    if nv:
        out["nvls_channels"] = max(out["nvls_channels"] or 0, int(nv.group(1)))


def _on_nvls(st, m, quoted):
    st["out"]["nvls_available"] = bool(st["out"]["nvls_available"]) or not m.group(1)


def _on_comm(st, m, quoted):
    out = st["out"]
    for key, group in (("nranks", 2), ("nnodes", 3), ("local_ranks", 4)):
        out[key] = max(out[key] or 0, int(m.group(group)))
    if m.group(6) is not None:
        out["mnnvl"] = bool(out["mnnvl"]) or m.group(6) != "0"
    st["ev"].setdefault("comm", quoted)


def _on_nranks(st, m, quoted):
    st["out"]["nranks"] = max(st["out"]["nranks"] or 0, int(m.group(2)))


def _on_connected(st, m, quoted):
    if m.group(2) is not None:
        st["out"]["ring_pxn"] = m.group(1) == "1"
        st["out"]["ring_gdr"] = m.group(2) == "1"
        st["ev"].setdefault("ring_gdr", quoted)


# An INFO record's message -> the first rule whose matcher answers folds it in (order matters: a
# GPU Direct RDMA line of the Socket plugin is taken and ignored before it could count elsewhere).
_INFO_RULES = (
    (VERSION_RE.match, _on_version),
    (ENV_RE.match, _on_env),
    (NETWORK_RE.match, _on_network),
    (PLUGIN_RE.match, _on_plugin),
    (LOADED_RE.match, _on_loaded),
    (NO_DEVICE_RE.match, _on_no_device),
    (IB_USING_RE.match, _on_ib_using),
    (IB_OLD_DEV_RE.match, _on_ib_old),
    (SOCKET_USING_RE.match, _on_socket),
    (OFI_RE.match, _on_ofi),
    (_gdr_match, _on_gdr),
    (VIA_RE.match, _on_via),
    (RING_RE.match, _on_ring),
    (COLL_CHANNELS_RE.match, _on_coll_channels),
    (NVLS_RE.match, _on_nvls),
    (COMM_RE.search, _on_comm),
    (NRANKS_RE.search, _on_nranks),
    (CONNECTED_RE.search, _on_connected),
)


def _truthy(value):
    return str(value).strip().lower() not in ("", "0", "false", "no", "off", "none")


def transport_findings(info, nic_facts=None, host=None):
    """Findings from what NCCL used against what the node has (nics.parse_nic_facts):

    * nccl_socket_with_ib_up (critical): inter-node traffic went over NET/Socket (or NCCL found no
      IB device in a communicator spanning nodes) while the node has active IB/RoCE ports and the
      job did not ask for sockets.
    * nccl_ib_disabled (warning): the same, but the log shows the job asked for it
      (``NCCL_IB_DISABLE=1``, ``NCCL_NET=Socket``): NCCL did what it was told (NCCL's
      documentation: NCCL_IB_DISABLE "prevents the IB/RoCE transport from being used ... NCCL will
      fall back to using IP sockets").
    * nccl_ib_not_found (warning): NCCL found no IB device although ports are active, in a
      communicator that did not leave the node (or whose span the log does not show): no traffic
      went over sockets here, a multi-node job would.
    * nccl_gdr_skipped (warning): NET/IB (IB or RoCE) connections without GDRDMA (or only ``GPU
      Direct RDMA Disabled`` lines, in a communicator not known to be single-node) while
      nvidia_peermem is loaded; with NCCL_NET_GDR_LEVEL=LOC (or 0) in the job's environment it is
      ``nccl_gdr_disabled_by_env`` (info) instead.
    * nccl_no_network (info): a multi-node communicator with no NET connection line (the log was
      cut, or NCCL_DEBUG_SUBSYS left NET out).
    * nccl_failure (warning): one per failure shape among the WARN records (``failures``).
    Each finding quotes the NCCL line it rests on in ``evidence``."""
    who = f"{host}: " if host else ""
    facts = nic_facts or {}
    return [
        *_socket_findings(info, facts, who),
        *_gdr_findings(info, facts, who),
        *_no_network_findings(info, who),
        *(_failure_finding(fail, who) for fail in info.get("failures", [])),
    ]


def _failure_finding(fail, who):
    """nccl_failure: one known failure shape among the WARN records, quoting its first line."""
    times = f" ({fail['count']} times)" if fail["count"] > 1 else ""
    message = f"{who}NCCL WARN: {fail['meaning']}{times}"
    return finding("warning", "nccl_failure", message, evidence=fail["line"], failure=fail["code"])


def _asked_for_sockets(env):
    """(variable, value) by which the job's environment told NCCL not to use IB, or None."""
    if _truthy(env.get("NCCL_IB_DISABLE", "0")):
        return "NCCL_IB_DISABLE", env["NCCL_IB_DISABLE"]
    if str(env.get("NCCL_NET", "")).strip().lower() == "socket":
        return "NCCL_NET", env["NCCL_NET"]
    return None


def _socket_findings(info, facts, who):
    """nccl_socket_with_ib_up, nccl_ib_disabled, nccl_ib_not_found (transport_findings)."""
    # Only ports that can carry training traffic (nics.rail_ports: Azure's mlx5_an0, SR-IOV VFs
    # and a storage card are set aside): NCCL on sockets beside those is no fallback.
    rdma_up = [p for p in rail_ports(facts) if p.get("active")]
    if not rdma_up:
        return []
    ports = f"{', '.join(p['name'] for p in rdma_up)} {'is' if len(rdma_up) == 1 else 'are'} ACTIVE"
    inter, nnodes = info.get("inter_node"), info.get("nnodes")
    no_device = info.get("ib_no_device") and inter is None and info.get("network_kind") in (None, "socket")
    asked = _asked_for_sockets(info.get("env") or {})
    if inter == "socket" or (no_device and (nnodes or 0) > 1):
        return [_sockets_used(info, ports, asked, who)]
    if no_device and not asked:
        span = (
            "a single-node communicator" if nnodes == 1 else "a communicator whose span the log does not show"
        )
        return [
            finding(
                "warning",
                "nccl_ib_not_found",
                f"{who}NCCL found no IB device although {ports} ({span}: no traffic left the node over "
                "sockets here, a multi-node job would; check libibverbs/rdma-core and /dev/infiniband "
                "where the job runs)",
                evidence=info.get("evidence", {}).get("ib_no_device"),
            )
        ]
    return []


def _sockets_used(info, ports, asked, who):
    """NCCL carried inter-node traffic over sockets beside active RDMA ports: as the job's
    environment told it (nccl_ib_disabled), or not (nccl_socket_with_ib_up)."""
    ev = info.get("evidence", {})
    line = ev.get("inter_node") if info.get("inter_node") == "socket" else ev.get("ib_no_device")
    if asked:
        return finding(
            "warning",
            "nccl_ib_disabled",
            f"{who}{asked[0]}={asked[1]} in the job's environment: NCCL carried inter-node "
            f"traffic over TCP sockets as told although {ports} (unset {asked[0]} to use RDMA)",
            evidence=ev.get(f"env:{asked[0]}") or line,
        )
    verbs = any(x["code"] == "ibverbs_missing" for x in info.get("failures", []))
    cause = (
        "NCCL could not open libibverbs: install rdma-core/libibverbs where the job runs"
        if verbs
        else "check NCCL_IB_DISABLE, NCCL_IB_HCA, libibverbs in the job's environment"
    )
    return finding(
        "critical",
        "nccl_socket_with_ib_up",
        f"{who}NCCL carried inter-node traffic over TCP sockets although {ports} ({cause})",
        evidence=line or ev.get("socket_using") or ev.get("network"),
    )


def _no_network_findings(info, who):
    nnodes = info.get("nnodes")
    if (nnodes or 0) <= 1 or info.get("inter_node"):
        return []
    return [
        finding(
            "info",
            "nccl_no_network",
            f"{who}the communicator spans {nnodes} nodes but the log shows no NET connection "
            "(cut short, or NCCL_DEBUG_SUBSYS without INIT,NET)",
            evidence=info.get("evidence", {}).get("network"),
        )
    ]


def _gdr_findings(info, facts, who):
    ev, env = info.get("evidence", {}), info.get("env") or {}
    inter, nnodes = info.get("inter_node"), info.get("nnodes")
    peer = facts.get("peermem", {})
    used = inter or (info.get("network_kind") if nnodes != 1 else None)
    hca = info.get("gdr_hca") or {}
    gdr = info.get("gdrdma")
    skipped = used == "ib" and (gdr is False or (gdr is None and hca and not any(hca.values())))
    if not (skipped and peer.get("loaded")):
        return []
    level = env.get("NCCL_NET_GDR_LEVEL")
    line = ev.get("net_without_gdr") if gdr is False else ev.get("gdr_disabled")
    if level is not None and str(level).strip().upper() in ("LOC", "0"):
        f = finding(
            "info",
            "nccl_gdr_disabled_by_env",
            f"{who}NCCL_NET_GDR_LEVEL={level} in the job's environment: NCCL used NET/IB without "
            f"GPUDirect RDMA as told although {peer.get('module')} is loaded",
            evidence=ev.get("env:NCCL_NET_GDR_LEVEL") or line,
        )
        return [f]
    why = (
        f"NCCL_NET_GDR_LEVEL={level} in the job's environment may be shorter than the GPU-NIC path, "
        "or ACS on the path, or peermem not registered"
        if level is not None
        else "GPU and NIC too far apart for NCCL_NET_GDR_LEVEL, ACS on the path, or peermem not registered"
    )
    over = "NET/IB over RoCE" if info.get("inter_node_link") == "RoCE" else "NET/IB"
    f = finding(
        "warning",
        "nccl_gdr_skipped",
        f"{who}NCCL used {over} without GPUDirect RDMA although {peer.get('module')} is loaded ({why})",
        evidence=line or ev.get("gdr_disabled") or ev.get("net_without_gdr"),
    )
    return [f]
