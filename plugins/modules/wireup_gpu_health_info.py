#!/usr/bin/python
"""Ansible module: read every GPU's health with nvidia-smi -q -x (a thin wrapper of
wireup.probe.gpuhealth)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_gpu_health_info
short_description: Read every GPU's memory, error, throttle, power and PCIe health in one nvidia-smi call
description:
  - "Runs C(nvidia-smi -q -x) (argv, C(LC_ALL=C)) and parses it with C(wireup.probe.gpuhealth) (pure Python,
    stdlib only): ECC counts, retired pages, remapped rows, the driver's recovery action, clock event
    reasons and their counters, temperatures, power and its limit, PCIe replays and link, persistence mode."
  - Returns the findings of the read alone (the controller adds the ones against the GPU's last
    passing run) and whether C(dcgmi) is installed. Changes nothing.
  - "A GPU the node has but nvidia-smi cannot read fails the read (C(gpu_lost), reboot): nvidia-smi's
    own lines about a GPU it cannot open (C(Unable to determine the device handle ...), C(GPU is
    lost)), fewer GPUs listed than attached, NVIDIA GPUs that C(lspci -D -nn) lists and nvidia-smi
    does not, and GPUs the kernel log says fell off the bus since boot (Xid 79). Only the bus ids
    are kept of lspci and the kernel log."
  - An nvidia-smi that fails or prints what cannot be parsed is reported in C(error), not a module
    failure; the controller judges it (a health read that cannot be read never passes). An
    nvidia-smi that exits non-zero but prints a whole document (a GPU lost beside readable ones)
    is read, its GPUs judged.
  - Output over 4 MiB, nested deeper than 32 levels, with XML entities or more than 64 GPUs is
    refused (C(error)), never parsed.
options:
  nvidia_smi:
    description: Path of nvidia-smi. Empty to search PATH and /usr/local/nvidia/bin.
    type: path
    default: ""
  timeout:
    description: Seconds nvidia-smi may take (a GPU that hangs the driver makes it hang).
    type: int
    default: 60
  read_lspci:
    description: List the NVIDIA GPUs on the PCI bus with C(lspci -D -nn) (skipped where lspci is not
      installed).
    type: bool
    default: true
  read_kernel_log:
    description: Read the kernel log since boot (C(journalctl -k -b), else C(dmesg)) for GPUs that fell
      off the bus (Xid 79); refused without root on hardened kernels, then not read.
    type: bool
    default: true
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
- name: Read the GPUs' health
  wireup_gpu_health_info:
    nvidia_smi: /usr/bin/nvidia-smi
  register: __gpu_trial_health
"""

RETURN = r"""
health:
  description: The parsed read (null when it failed); every field in
    plugins/module_utils/wireup/probe/gpuhealth.py.
  returned: always
  type: dict
  contains:
    driver_version: {description: The driver's version, type: str, sample: "580.159.04"}
    attached_gpus: {description: GPUs the driver reports attached, type: int, sample: 8}
    lost:
      description: nvidia-smi's lines about a GPU it cannot open, as {bus_id, why}.
      type: list
      sample: []
      elements: dict
    pci_gpus:
      description: Addresses (domain:bus:device) of the NVIDIA GPUs lspci lists; null when lspci was not read.
      type: list
      sample: ["0000:18:00.0", "0000:2a:00.0"]
      elements: str
    fallen:
      description: Addresses of the GPUs the kernel log says fell off the bus since boot (Xid 79); null when
        the kernel log was not read.
      type: list
      sample: []
      elements: str
    gpus:
      description: One entry per GPU (index, bus_id, uuid, serial, name, ecc, retired_pages, remapped_rows,
        recovery_action, clock_event_reasons, clock_event_counters_us, temperature, power, clocks, pcie,
        persistence_mode, ecc_mode); null for what the driver does not report.
      type: list
      sample:
        - index: 0
          bus_id: '00000000:18:00.0'
          uuid: GPU-47e4f408-4b1e-2c8a-9d55-0c3b1e7f2a61
          name: NVIDIA H200
          temperature:
            gpu_c: 31
      elements: dict
error:
  description: Why the read failed (empty when it did not).
  returned: always
  type: str
  sample: ""
findings:
  description: Findings of this read alone (project shape plus remediation and gpu).
  returned: always
  type: list
  sample:
    - severity: warning
      code: gpu_retired_pages
      gpus:
      - 3
      message: 'GPU 3 has 2 retired pages: watch it, replace it when the count grows'
      source: gpu_health
  elements: dict
summary:
  description: One line for the play output.
  returned: always
  type: list
  sample: ["gpu_health: 8 GPUs read, 0 critical, 1 warning"]
  elements: str
dcgmi:
  description: Path of dcgmi, empty when DCGM is not installed.
  returned: always
  type: str
  sample: "/usr/bin/dcgmi"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth

ENV = {"LC_ALL": "C", "LANG": "C"}
KERNEL_LOGS = (
    ("journalctl", ["-k", "-b", "--no-pager", "-q", "-o", "short"]),
    ("dmesg", []),
)


def run(module, argv):
    """(rc, stdout, stderr) as text; bytes that are not UTF-8 become U+FFFD."""
    rc, out, err = module.run_command(argv, environ_update=ENV, encoding=None)
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def evidence(module):
    """{lspci, kernel_log}: the texts gpuhealth.read takes (None where not read or not readable)."""
    out = {"lspci": None, "kernel_log": None}
    lspci = module.get_bin_path("lspci") if module.params["read_lspci"] else None
    if lspci:
        rc, text, _err = run(module, [lspci, "-D", "-nn"])
        out["lspci"] = text if rc == 0 else None
    for tool, args in KERNEL_LOGS if module.params["read_kernel_log"] else ():
        path = module.get_bin_path(tool)
        rc, text, _err = run(module, [path, *args]) if path else (1, "", "")
        if rc == 0 and text.strip():
            out["kernel_log"] = text
            break
    return out


def read(module, smi, timeout):
    """(health, error): the parsed read, or None and why."""
    timeout_bin = module.get_bin_path("timeout")
    argv = [timeout_bin, "-k", "5", str(timeout), smi, "-q", "-x"] if timeout_bin else [smi, "-q", "-x"]
    rc, text, err = run(module, argv)
    try:
        health = gpuhealth.read(text, stderr=err, **evidence(module))
    except ValueError as exc:
        if rc == 0:
            return None, f"`nvidia-smi -q -x`: {exc}"
        health = None
    if rc == 0 or (health and health["lost"]):
        return health, ""  # a GPU nvidia-smi names as lost explains its exit code: the rest is judged
    first = next((line.strip() for line in (text + err).splitlines() if line.strip()), "")
    why = "timed out" if rc == 124 else f"rc {rc}"
    return None, f"`nvidia-smi -q -x` failed ({why}): {first[:200] or 'no output'}"


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "path", "default": ""},
            "timeout": {"type": "int", "default": 60},
            "read_lspci": {"type": "bool", "default": True},
            "read_kernel_log": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    smi = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi", opt_dirs=["/usr/local/nvidia/bin"])
    dcgmi = module.get_bin_path("dcgmi") or ""
    if not smi:
        health, error = None, "nvidia-smi not found: the NVIDIA driver is not installed"
    else:
        health, error = read(module, smi, max(1, module.params["timeout"]))
    module.exit_json(**gpuhealth.answer(health, error, dcgmi))


if __name__ == "__main__":
    main()
