#!/usr/bin/python
"""Ansible module: read every GPU's health with nvidia-smi -q -x (a thin wrapper of wireup.gpuhealth)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_gpu_health_info
short_description: Read every GPU's memory, error, throttle, power and PCIe health in one nvidia-smi call
description:
  - "Runs C(nvidia-smi -q -x) (argv, C(LC_ALL=C)) and parses it with C(wireup.gpuhealth) (pure Python,
    stdlib only): ECC counts, retired pages, remapped rows, the driver's recovery action, clock event
    reasons and their counters, temperatures, power and its limit, PCIe replays and link, persistence mode."
  - Returns the findings of the read alone (the controller adds the ones against the GPU's last
    passing run) and whether C(dcgmi) is installed. Changes nothing.
  - An nvidia-smi that fails or prints what cannot be parsed is reported in C(error), not a module
    failure; the controller judges it (a health read that cannot be read never passes).
options:
  nvidia_smi:
    description: Path of nvidia-smi. Empty to search PATH and /usr/local/nvidia/bin.
    type: path
    default: ""
  timeout:
    description: Seconds nvidia-smi may take (a GPU that hangs the driver makes it hang).
    type: int
    default: 60
author: wireup (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the GPUs' health
  wireup_gpu_health_info:
    nvidia_smi: /usr/bin/nvidia-smi
  register: __gpu_trial_health
"""

RETURN = r"""
health:
  description: The parsed read (null when it failed); every field in plugins/module_utils/wireup/gpuhealth.py.
  returned: always
  type: dict
  contains:
    driver_version: {description: The driver's version, type: str}
    attached_gpus: {description: GPUs the driver reports attached, type: int}
    gpus:
      description: One entry per GPU (index, bus_id, uuid, serial, name, ecc, retired_pages, remapped_rows,
        recovery_action, clock_event_reasons, clock_event_counters_us, temperature, power, clocks, pcie,
        persistence_mode, ecc_mode); null for what the driver does not report.
      type: list
      elements: dict
error:
  description: Why the read failed (empty when it did not).
  returned: always
  type: str
findings:
  description: Findings of this read alone (project shape plus remediation and gpu).
  returned: always
  type: list
  elements: dict
summary:
  description: One line for the play output.
  returned: always
  type: list
  elements: str
dcgmi:
  description: Path of dcgmi, empty when DCGM is not installed.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import gpuhealth

ENV = {"LC_ALL": "C", "LANG": "C"}


def read(module, smi, timeout):
    """(health, error): the parsed read, or None and why."""
    timeout_bin = module.get_bin_path("timeout")
    argv = [timeout_bin, "-k", "5", str(timeout), smi, "-q", "-x"] if timeout_bin else [smi, "-q", "-x"]
    rc, out, err = module.run_command(argv, environ_update=ENV, encoding=None)
    text = out.decode("utf-8", "replace")
    if rc != 0:
        first = next(
            (line.strip() for line in (text + err.decode("utf-8", "replace")).splitlines() if line.strip()),
            "",
        )
        why = "timed out" if rc == 124 else f"rc {rc}"
        return None, f"`nvidia-smi -q -x` failed ({why}): {first[:200] or 'no output'}"
    try:
        return gpuhealth.parse(text), ""
    except ValueError as exc:
        return None, f"`nvidia-smi -q -x`: {exc}"


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "path", "default": ""},
            "timeout": {"type": "int", "default": 60},
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
