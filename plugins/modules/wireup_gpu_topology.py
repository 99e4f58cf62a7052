#!/usr/bin/python
"""Read a node's GPU topology and health: a thin wrapper around wireup.probe.topology and
wireup.probe.health."""

DOCUMENTATION = r"""
---
module: wireup_gpu_topology
short_description: Read GPU topology, NVLink, P2P and PCIe state and derive health findings
description:
  - Runs C(nvidia-smi topo -m), C(topo -p2p) for each requested mode, C(nvlink -s),
    C(--query-gpu) (index, name, uuid, bus id, driver, PCIe gen/width current and max, memory,
    compute capability, persistence mode) and C(-q -x), reads the kernel log since boot
    (C(journalctl -k -b), else C(dmesg)) for NVRM Xid lines, C(lspci -D -nn -vvv) for ACS and
    NVSwitch devices, /sys/bus/pci for NVSwitch devices and /proc for a running nv-fabricmanager.
  - Parses everything with the pure-Python C(wireup.probe.topology), C(wireup.probe.nvlink) and
    C(wireup.probe.health) and returns structured topology plus findings. Changes nothing.
  - A failed or unparsable probe becomes a finding, not a module failure, so a sick node still
    reports what it can; callers decide whether critical findings fail the play. nvidia-smi output
    that is not UTF-8 is a C(parse_failed) finding too (its raw text keeps the bad bytes escaped).
version_added: "1.0.0"
options:
  nvidia_smi:
    description: Path of nvidia-smi. Empty to search PATH and /usr/local/nvidia/bin.
    type: path
    default: ""
  p2p_modes:
    description:
      - P2P capability modes of C(nvidia-smi topo -p2p) to read.
      - r read, w write, n nvlink, a atomics, p prop.
    type: list
    elements: str
    choices: [r, w, n, a, p]
    default: [r, w, n]
  expected_gpus:
    description:
      - GPUs the node should have; fewer visible to nvidia-smi is a critical finding.
      - 0 skips the check.
    type: int
    default: 0
  read_kernel_log:
    description: Read the kernel log since boot for Xid errors (journalctl -k -b, else dmesg).
    type: bool
    default: true
  read_lspci:
    description: Read C(lspci -D -nn -vvv) for ACS on bridges above GPUs and for NVSwitch devices.
    type: bool
    default: true
notes:
  - Commands run as argv lists with C(LC_ALL=C). Without root, dmesg may be refused and lspci hides
    ACS capabilities; the result then says so (C(kernel_log.readable), C(acs.readable)).
attributes:
  platform:
    support: full
    platforms: linux
    description: Linux GPU nodes (it reads nvidia-smi, /proc and /sys).
extends_documentation_fragment:
  - wireup.cluster.attributes
  - wireup.cluster.attributes.read_only
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Read the GPU topology
  wireup_gpu_topology:
    expected_gpus: 8
    p2p_modes: [r, w]
  register: __gpu_topology_probe
# The fact gpu_topology_facts is set; __gpu_topology_probe.summary holds the lines to print.
"""

RETURN = r"""
ansible_facts:
  description: The fact C(gpu_topology_facts), the same dict as C(topology).
  returned: always
  type: dict
  contains:
    gpu_topology_facts:
      description: As C(topology).
      type: dict
      sample: {"gpu_count": 2, "driver_version": "580.159.04", "best_link": "NV18", "worst_link": "NV18"}
topology:
  description: >-
    Structured topology with findings and raw texts; every field with an example is in
    roles/gpu_topology/README.md (the fact's table).
  returned: always
  type: dict
  contains:
    gpu_count:
      description: GPUs nvidia-smi lists.
      type: int
      sample: 2
    driver_version:
      description: Driver version from query-gpu or C(-q -x).
      type: str
      sample: "580.159.04"
    cuda_version:
      description: CUDA version the driver supports (C(-q -x)).
      type: str
      sample: "13.0"
    gpus:
      description: One entry per GPU by index (index, name, uuid, bus_id, compute_cap, memory_total_mib,
        persistence_mode, pcie, cpu_affinity, numa_affinity, gpu_numa_id, nearest_nics, nvlink,
        fabric_state, fabric_status).
      type: list
      sample:
        - index: 0
          name: NVIDIA H200
          uuid: GPU-47e4f408-4b1e-2c8a-9d55-0c3b1e7f2a61
          bus_id: '00000000:18:00.0'
          compute_cap: '9.0'
          numa_affinity: '0'
      elements: dict
    nics:
      description: NIC columns of C(topo -m) (name, device).
      type: list
      sample: [{"name": "NIC0", "device": "mlx5_0"}]
      elements: dict
    matrix:
      description: The whole C(topo -m) matrix, GPU and NIC rows and columns.
      type: dict
      sample: {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}}
    links:
      description: Every GPU pair once (a, b, class, kind nvlink|pcie, nvlinks).
      type: list
      sample: [{"a": "GPU0", "b": "GPU1", "class": "NV18", "kind": "nvlink", "nvlinks": 18}]
      elements: dict
    link_classes:
      description: Classes among GPU pairs, best first.
      type: list
      sample: ["NV18"]
      elements: str
    best_link:
      description: First of link_classes (null with one GPU).
      type: str
      sample: "NV18"
    worst_link:
      description: Last of link_classes, the bottleneck of an all-GPU collective.
      type: str
      sample: "NV18"
    affinity_columns:
      description: Which affinity columns this driver prints.
      type: list
      sample: ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
      elements: str
    p2p:
      description: Per P2P mode read, C({matrix, not_ok, all_ok}).
      type: dict
      sample:
        r:
          matrix:
            GPU0:
              GPU0: X
              GPU1: OK
            GPU1:
              GPU0: OK
              GPU1: X
          not_ok: []
          all_ok: true
    nvlink:
      description: Node totals from C(nvlink -s) (gpus, gpus_with_nvlink, active_links, inactive_links,
        links_per_gpu, per_link_gbps, per_gpu_gbps); null when it failed.
      type: dict
      sample:
        gpus: 2
        gpus_with_nvlink: 2
        active_links: 36
        inactive_links: 0
        links_per_gpu: 18
        per_link_gbps: 26.562
        per_gpu_gbps: 478.116
    kernel_log:
      description: C({readable, source, xid}) from the kernel log since boot.
      type: dict
      sample: {"readable": true, "source": "dmesg", "xid": []}
    acs:
      description: C({checked, readable, bridges}) from lspci.
      type: dict
      sample: {"checked": false, "readable": false, "bridges": []}
    fabric:
      description: C({nvswitches, manager_running}).
      type: dict
      sample: {"nvswitches": [], "manager_running": null}
    findings:
      description: As the C(findings) return value.
      type: list
      sample: []
      elements: dict
    findings_count:
      description: As the C(findings_count) return value.
      type: dict
      sample: {"critical": 0, "warning": 0, "info": 0}
    raw:
      description: The commands' stdout unchanged (plus C(<key>_stderr) where one failed) and the kernel
        log's NVRM lines.
      type: dict
      sample:
        topo_m: "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\t0-47\t0\t\t\
          N/A\n"
findings:
  description: Health findings, critical first.
  returned: always
  type: list
  elements: dict
  contains:
    severity:
      description: critical, warning or info.
      type: str
      sample: "critical"
    code:
      description: The rule that fired (the table in roles/gpu_topology/README.md).
      type: str
      sample: "nvlink_inactive"
    gpus:
      description: GPU indexes concerned (empty for the whole node).
      type: list
      sample: [1]
    message:
      description: One line naming what is wrong and what to do.
      type: str
      sample: "GPU1 has 2 inactive NVLink links: reseat or replace the GPU (nvidia-smi nvlink -s)"
findings_count:
  description: Number of findings per severity.
  returned: always
  type: dict
  contains:
    critical:
      description: Critical findings.
      type: int
      sample: 0
    warning:
      description: Warnings.
      type: int
      sample: 1
    info:
      description: Notes.
      type: int
      sample: 2
summary:
  description: What the role prints, one summary line, then one line per critical or warning finding.
  returned: always
  type: list
  sample:
    - 2 GPUs (NVIDIA H200), driver 580.159.04, CUDA 13.0, links NV18 best, NV18 worst; 0 critical, 0 warning
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe.health import (
    SEVERITIES,
    acs_above_gpus,
    count_by_severity,
    finding,
    findings,
    is_nvswitch,
    parse_lspci,
    parse_xid,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe.nvlink import parse_nvlink_status
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe.topology import (
    combine_topology,
    decode_output,
    gpu_count_of,
    parse_query_gpu_csv,
    parse_smi_xml,
    parse_topo_matrix,
    parse_topo_p2p,
    summary_lines,
)

QUERY_FIELDS = (
    "index,name,uuid,pci.bus_id,driver_version,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max,memory.total,compute_cap,persistence_mode"
)
ENV = {"LC_ALL": "C", "LANG": "C"}
FABRIC_MANAGER_COMM = "nv-fabricmanage"  # /proc/PID/comm keeps 15 characters of nv-fabricmanager


def run(module, argv):
    """(rc, stdout, stderr) as text; bytes that are not UTF-8 become U+FFFD (kernel log, lspci)."""
    rc, out, err = module.run_command(argv, environ_update=ENV, encoding=None)
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def run_strict(module, argv, command):
    """(rc, stdout, stderr, decode error): nvidia-smi output must be UTF-8 to be parsed. Raw bytes are
    read (run_command's default decoding lets a stray byte through as a surrogate, and then the
    whole result cannot be returned); a bad byte is reported, the text kept with it escaped."""
    rc, out, err = module.run_command(argv, environ_update=ENV, encoding=None)
    try:
        return rc, decode_output(out, command), err.decode("utf-8", "replace"), None
    except ValueError as exc:
        return rc, out.decode("utf-8", "backslashreplace"), err.decode("utf-8", "replace"), str(exc)


def fabric_manager_running():
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
                if handle.read().strip() == FABRIC_MANAGER_COMM:
                    return True
        except OSError:
            continue
    return False


def sysfs_nvswitches(root="/sys/bus/pci/devices"):
    """PCI addresses of NVIDIA NVSwitch devices (vendor 0x10de, class 0x0680xx), lspci or not."""
    found = []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return found
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "vendor"), encoding="ascii") as handle:
                vendor = handle.read().strip().lower()
            with open(os.path.join(root, entry, "class"), encoding="ascii") as handle:
                pci_class = handle.read().strip().lower()
        except OSError:
            continue
        if vendor == "0x10de" and pci_class.startswith("0x0680"):
            found.append(entry)
    return found


def read_kernel_log(module):
    """(source, text) of the kernel log since boot, or (None, None) where it cannot be read.

    The journal first (it keeps the whole boot; dmesg's ring buffer may have wrapped on a node
    that has run for weeks), then dmesg. Empty output counts as unreadable: a kernel log since
    boot is never empty, but journalctl without journal access and dmesg in some containers
    print nothing and exit 0.
    """
    candidates = (
        ("journalctl -k -b", "journalctl", ["-k", "-b", "--no-pager", "-q", "-o", "short"]),
        ("dmesg", "dmesg", []),
    )
    for source, tool, args in candidates:
        path = module.get_bin_path(tool)
        if path:
            rc, out, _err = run(module, [path, *args])
            if rc == 0 and out.strip():
                return source, out
    return None, None


def parse_probes(texts, p2p_modes, extra):
    """Parse what the probes printed, each text once; an output that does not parse is dropped with a
    parse_failed finding (appended to extra), so the rest still makes a topology. Returns
    (topology, nvlink)."""
    parsed = {}
    order = ["query_gpu", "topo_m", "nvidia_smi_q_x", "nvlink_s"] + [f"topo_p2p_{m}" for m in p2p_modes]
    for key in [k for k in order if k in texts]:
        try:
            if key == "query_gpu":
                parsed[key] = parse_query_gpu_csv(texts[key])
            elif key == "topo_m":
                parsed[key] = parse_topo_matrix(texts[key])
            elif key == "nvidia_smi_q_x":
                parsed[key] = parse_smi_xml(texts[key])
            elif key == "nvlink_s":
                count = gpu_count_of(parsed.get("query_gpu"), parsed.get("topo_m"))
                parsed[key] = parse_nvlink_status(texts[key], count)
            else:
                parsed[key] = parse_topo_p2p(texts[key], key.rsplit("_", 1)[1])
        except ValueError as exc:
            extra.append(finding("critical", "parse_failed", f"{key}: {exc}"))
    try:
        topology = combine_topology(
            topo=parsed.get("topo_m"),
            p2p={m: parsed[f"topo_p2p_{m}"] for m in p2p_modes if f"topo_p2p_{m}" in parsed},
            nvlink=parsed.get("nvlink_s"),
            query=parsed.get("query_gpu"),
            xml=parsed.get("nvidia_smi_q_x"),
        )
    except ValueError as exc:  # the outputs parse alone but contradict each other
        extra.append(finding("critical", "parse_failed", f"combining the nvidia-smi outputs: {exc}"))
        topology = combine_topology()
    return topology, parsed.get("nvlink_s")


def probe_smi(module, smi, p2p_modes):
    """(raw outputs, {command: error text}, {key: text that parses}, findings) of every nvidia-smi
    probe; a missing nvidia-smi is one critical finding."""
    raw, errors, texts, extra = {}, {}, {}, []
    if not smi or not os.access(smi, os.X_OK):
        message = f"nvidia-smi not found ({smi or 'not on PATH'}): the NVIDIA driver is not installed"
        return raw, errors, texts, [finding("critical", "nvidia_smi_missing", message)]
    probes = [("topo -m", "topo_m", [smi, "topo", "-m"])]
    probes += [(f"topo -p2p {m}", f"topo_p2p_{m}", [smi, "topo", "-p2p", m]) for m in p2p_modes]
    probes += [
        ("nvlink -s", "nvlink_s", [smi, "nvlink", "-s"]),
        ("--query-gpu", "query_gpu", [smi, f"--query-gpu={QUERY_FIELDS}", "--format=csv"]),
        ("-q -x", "nvidia_smi_q_x", [smi, "-q", "-x"]),
    ]
    for name, key, argv in probes:
        rc, out, err, bad = run_strict(module, argv, f"nvidia-smi {name}")
        raw[key] = out
        if rc != 0:
            errors[name] = (err or out).strip()
            raw[key + "_stderr"] = err
        elif bad:
            extra.append(finding("critical", "parse_failed", f"{key}: {bad}"))
        else:
            texts[key] = out
    return raw, errors, texts, extra


def read_lspci(module, wanted):
    """lspci -D -nn -vvv's text, or None (not asked for, not installed, or it failed)."""
    lspci = module.get_bin_path("lspci") if wanted else None
    if not lspci:
        return None
    rc, out, _err = run(module, [lspci, "-D", "-nn", "-vvv"])
    return out if rc == 0 else None


def read_node(module, params):
    """What the findings need besides nvidia-smi: the kernel log (its source and text; None where
    it cannot be read), lspci's text and devices, the NVSwitches, whether Fabric Manager runs."""
    source, kernel_log = read_kernel_log(module) if params["read_kernel_log"] else (None, None)
    if kernel_log is None:
        source = "not readable" if params["read_kernel_log"] else "not read"
    lspci_text = read_lspci(module, params["read_lspci"])
    devices = parse_lspci(lspci_text)
    switches = sorted({d["address"] for d in devices if is_nvswitch(d)} | set(sysfs_nvswitches()))
    return {
        "source": source,
        "kernel_log": kernel_log,
        "lspci": lspci_text,
        "devices": devices,
        "switches": switches,
        "fm_running": fabric_manager_running() if switches else None,
    }


ARGUMENT_SPEC = {
    "nvidia_smi": {"type": "path", "default": ""},
    "p2p_modes": {
        "type": "list",
        "elements": "str",
        "choices": ["r", "w", "n", "a", "p"],
        "default": ["r", "w", "n"],
    },
    "expected_gpus": {"type": "int", "default": 0},
    "read_kernel_log": {"type": "bool", "default": True},
    "read_lspci": {"type": "bool", "default": True},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["expected_gpus"] < 0:
        module.fail_json(
            msg=f"expected_gpus must be 0 (no check) or a positive number, got {params['expected_gpus']}"
        )
    smi = params["nvidia_smi"] or module.get_bin_path("nvidia-smi", opt_dirs=["/usr/local/nvidia/bin"])
    raw, errors, texts, extra = probe_smi(module, smi, params["p2p_modes"])
    topology, nvlink = parse_probes(texts, params["p2p_modes"], extra)
    node = read_node(module, params)
    kernel_log = node["kernel_log"]
    raw["kernel_log_nvrm"] = "\n".join(
        [line for line in (kernel_log or "").splitlines() if "NVRM" in line][-200:]
    )
    items = findings(
        topology,
        nvlink,
        expected_gpus=params["expected_gpus"],
        command_errors=errors,
        kernel_log=kernel_log,
        kernel_log_readable=kernel_log is not None,
        lspci=node["lspci"],
        nvswitch_fabric_manager_running=node["fm_running"],
        nvswitches=len(node["switches"]),
    )
    items = sorted(items + extra, key=lambda f: (SEVERITIES.index(f["severity"]), f["code"], f["gpus"]))
    acs_bridges, acs_readable = acs_above_gpus(node["devices"])
    topology.update(
        kernel_log={
            "readable": kernel_log is not None,
            "source": node["source"],
            "xid": parse_xid(kernel_log),
        },
        acs={
            "checked": node["lspci"] is not None,
            "readable": bool(node["lspci"]) and acs_readable,
            "bridges": acs_bridges,
        },
        fabric={"nvswitches": node["switches"], "manager_running": node["fm_running"]},
        findings=items,
        findings_count=count_by_severity(items),
        raw=raw,
    )
    module.exit_json(
        changed=False,
        ansible_facts={"gpu_topology_facts": topology},
        topology=topology,
        findings=items,
        findings_count=topology["findings_count"],
        summary=summary_lines(topology),
    )


if __name__ == "__main__":
    main()
