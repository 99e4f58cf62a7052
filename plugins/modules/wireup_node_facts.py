#!/usr/bin/python
"""Ansible module: read what wireup needs to know about a node, change nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_node_facts
short_description: Gather wireup's node facts (OS, GPUs, driver, CUDA, NCCL, network, disk)
description:
  - Reads the node without changing it and returns the fact C(wireup_node).
  - GPUs are counted on the PCI bus (vendor 0x10de, display-controller class), so a node whose
    driver is missing or broken is still recognised as a GPU node; nvidia-smi adds models,
    compute capabilities and the loaded driver.
  - The default-route interface and its IPv4 address are read from /proc/net/route and an
    ioctl, so nodes without the C(ip) command are handled.
  - Also the host name, the Python running the module and the service manager, the only facts of
    C(ansible.builtin.setup) that wireup reads, so no play needs to run C(setup).
options:
  venv_path:
    description: Path where the PyTorch venv goes; free disk is measured on its filesystem.
    type: path
    required: true
  interface:
    description: Interface carrying the cluster network; empty means the default-route interface.
    type: str
    default: ""
  address:
    description: Address other nodes use to reach this one; empty means the interface's IPv4 address.
    type: str
    default: ""
  cuda_home:
    description: Where the CUDA toolkit lives.
    type: path
    default: /usr/local/cuda
  connection:
    description: The node's C(ansible_connection); C(local) sets C(wireup_node.is_local).
    type: str
    default: ""
  master:
    description: The rendezvous master's inventory name, returned as the fact C(wireup_master).
    type: str
    default: ""
  min_free_mb:
    description: Free MiB needed on the filesystem holding venv_path; fewer fails the node (0 checks nothing).
    type: int
    default: 0
  require_supported_os:
    description: Fail a node whose OS wireup does not support (Ubuntu 22.04/24.04, Debian 12).
    type: bool
    default: true
  torch_fact_dir:
    description:
      - The folder of pytorch_venv's local fact C(wireup_torch.fact) (the role's
        C(pytorch_venv_fact_dir)), read for torch's version, CUDA and NCCL without importing torch.
    type: path
    default: /etc/ansible/facts.d
attributes:
  platform:
    support: full
    platforms: linux
    description: Linux nodes (it reads /etc/os-release, /proc, /sys, dpkg and nvidia-smi).
extends_documentation_fragment:
  - wireup.cluster.attributes
  - wireup.cluster.attributes.read_only
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Gather node facts
  wireup_node_facts:
    venv_path: /opt/wireup/venv
"""

RETURN = r"""
ansible_facts:
  description: The facts C(wireup_node) and C(wireup_master); roles/preflight/README.md shows examples.
  returned: success
  type: dict
  contains:
    wireup_master:
      description: The rendezvous master's inventory name (the C(master) option).
      type: str
      sample: "node1"
    wireup_node:
      description: What wireup knows about the node.
      type: dict
      contains:
        os:
          description: C({id, version, codename, pretty_name, supported}) from /etc/os-release.
          type: dict
          sample:
            id: ubuntu
            version: '24.04'
            codename: noble
            pretty_name: Ubuntu 24.04.3 LTS
            supported: true
        cuda_repo_distro:
          description: The CUDA repository's name for this OS (e.g. C(ubuntu2404)); empty when unsupported.
          type: str
          sample: "ubuntu2404"
        arch:
          description: C({machine, deb, cuda}) names of the architecture (deb empty when unsupported).
          type: dict
          sample: {"machine": "x86_64", "deb": "amd64", "cuda": "x86_64"}
        gpu:
          description: C({present, pci_count, count, models, compute_capabilities, nvidia_smi, devices, ...});
            GPUs counted on the PCI bus (vendor 10de), nvidia-smi adds the rest. Each of C(devices) also
            holds
            C(vbios), C(persistence_mode), C(ecc_mode) and C(mig_mode) (empty for N/A; absent when
            nvidia-smi refuses those columns), which the fleet's drift compares.
          type: dict
          sample:
            present: true
            pci_count: 8
            count: 8
            models:
            - NVIDIA H200
            compute_capabilities:
            - '9.0'
            nvidia_smi: /usr/bin/nvidia-smi
        driver:
          description: C({loaded, version, branch, kernel_module}) of the NVIDIA driver.
          type: dict
          sample: {"loaded": true, "version": "580.159.04", "branch": "580", "kernel_module": "nvidia"}
        cuda:
          description: C({version, full, home, nvcc}) of the CUDA toolkit.
          type: dict
          sample:
            version: '13.0'
            full: 13.0.2
            home: /usr/local/cuda
            nvcc: /usr/local/cuda/bin/nvcc
        nccl:
          description: C({version, package, source, packages, net_plugins}) of the system NCCL (dpkg, else
            nccl.h); C(packages) maps libnccl2 and libnccl-dev, where dpkg has them installed, to
            C({version, held});
            C(net_plugins) the NCCL net plugin files (libnccl-net*.so) where NCCL's dlopen finds them
            (LD_LIBRARY_PATH, /etc/ld.so.conf, the default folders).
          type: dict
          sample:
            version: 2.28.9
            package: libnccl2
            source: dpkg
            packages:
              libnccl2:
                version: 2.28.9-1+cuda13.0
                held: true
            net_plugins: []
        torch:
          description: C({version, cuda, nccl}) of the venv's torch as pytorch_venv's local fact
            C(wireup_torch.fact) says (empty strings without the file; null for a value the file
            does not hold as a string, or a file that is not the role's JSON object).
          type: dict
          sample: {"version": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9"}
        fabric_manager:
          description: C({version, package, state}) of the NVIDIA fabric manager (NVSwitch systems),
            the version of its C(nvidia-fabricmanager*) package, the package's name and
            C(nvidia-fabricmanager.service)'s ActiveState (null when systemctl could not say);
            empty strings without the package.
          type: dict
          sample: {"version": "580.159.03", "package": "nvidia-fabricmanager-580", "state": "active"}
        network:
          description: C({interface, address}) of the cluster network.
          type: dict
          sample: {"interface": "eth0", "address": "10.0.0.11"}
        infiniband:
          description: InfiniBand devices under /sys/class/infiniband.
          type: list
          sample: ["mlx5_0", "mlx5_1"]
          elements: str
        infiniband_fw:
          description: C({device, firmware}) from /sys/class/infiniband/DEVICE/fw_ver ({} without InfiniBand).
          type: dict
          sample: {"mlx5_0": "28.39.1002"}
        disk:
          description: C({path, free_mb}) of the filesystem holding venv_path.
          type: dict
          sample: {"path": "/opt/wireup", "free_mb": 812344}
        secure_boot:
          description: Whether UEFI Secure Boot is on (null when unknown).
          type: bool
          sample: false
        hostname:
          description: The node's name up to the first dot.
          type: str
          sample: "node1"
        python:
          description: C({executable, version}) of the Python running the module.
          type: dict
          sample: {"executable": "/usr/bin/python3", "version": "3.12.3"}
        service_mgr:
          description: C(systemd) or the init process's name.
          type: str
          sample: "systemd"
        is_local:
          description: Whether the node is the control node itself (C(connection) is C(local)).
          type: bool
          sample: false
"""

import contextlib
import fcntl
import glob
import os
import platform
import socket
import struct
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import drift, node

QUERY_FIELDS = ["index", "name", "uuid", "pci.bus_id", "compute_cap", "memory.total", "driver_version"]
SIOCGIFADDR = 0x8915


def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as handle:
            return handle.read()
    except OSError:
        return None


def _pci_devices():
    devices = []
    for path in sorted(glob.glob("/sys/bus/pci/devices/*")):
        vendor = _read(os.path.join(path, "vendor"))
        pci_class = _read(os.path.join(path, "class"))
        if vendor and pci_class:
            devices.append({"address": os.path.basename(path), "vendor": vendor, "class": pci_class})
    return devices


def _interface_address(interface):
    """IPv4 address of an interface via SIOCGIFADDR: no packet is sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = struct.pack("256s", interface[:15].encode())
        return socket.inet_ntoa(fcntl.ioctl(sock.fileno(), SIOCGIFADDR, packed)[20:24])
    except OSError:
        return ""
    finally:
        sock.close()


def _free_mb(path):
    probe = path
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe.rstrip("/")) or "/"
    stat = os.statvfs(probe)
    return probe, node.free_megabytes(stat.f_bavail, stat.f_frsize)


def _secure_boot():
    if not os.path.isdir("/sys/firmware/efi"):
        return False
    for path in glob.glob("/sys/firmware/efi/efivars/SecureBoot-*"):
        data = _read(path, binary=True)
        if data:
            try:
                return node.parse_secure_boot_efivar(data)
            except ValueError:
                return None
    return None


def _query_gpus(module, smi):
    """nvidia-smi's inventory with the drift columns (probe/drift.py); an nvidia-smi that refuses
    them is asked again without (the drift fields are then unknown). (rows, error)."""
    rc, out, err = 1, "", ""
    for fields in (QUERY_FIELDS + list(drift.GPU_QUERY.values()), QUERY_FIELDS):
        cmd = [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
        rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
        if rc == 0:
            try:
                return node.parse_gpu_inventory(out, fields), ""
            except ValueError as exc:
                return [], str(exc)
    return [], (out + err).strip().splitlines()[0] if (out + err).strip() else f"rc={rc}"


def _gpu_facts(module):
    pci = node.classify_pci_devices(_pci_devices())
    smi = module.get_bin_path("nvidia-smi")
    inventory, smi_error = _query_gpus(module, smi) if smi else ([], "")
    gpu = node.summarize_gpus(pci, inventory)
    for device, row in zip(gpu["devices"], inventory, strict=True):
        device.update(drift.device_modes(row))
    gpu["nvidia_smi"] = smi or ""
    gpu["nvidia_smi_error"] = smi_error
    return gpu, inventory


def _driver_facts(inventory):
    text = _read("/proc/driver/nvidia/version")
    if text:
        try:
            return dict(node.parse_proc_driver_version(text), loaded=True)
        except ValueError:
            pass
    version = inventory[0].get("driver_version") if inventory else ""
    return {
        "loaded": bool(version),
        "version": version or "",
        "branch": node.driver_branch(version or ""),
        "kernel_module": "",
    }


def _cuda_facts(module, cuda_home):
    facts = {"version": "", "full": "", "home": "", "nvcc": ""}
    if os.path.isdir(cuda_home):
        facts["home"] = os.path.realpath(cuda_home)
        text = _read(os.path.join(cuda_home, "version.json"))
        if text:
            with contextlib.suppress(ValueError):
                facts.update(node.parse_cuda_version_json(text))
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    nvcc = nvcc if os.access(nvcc, os.X_OK) else module.get_bin_path("nvcc")
    if nvcc:
        facts["nvcc"] = nvcc
        rc, out, _err = module.run_command([nvcc, "--version"], environ_update={"LC_ALL": "C"})
        if rc == 0 and not facts["version"]:
            with contextlib.suppress(ValueError):
                facts.update(node.parse_nvcc_version(out))
    return facts


def _dpkg_packages(module):
    """One dpkg-query for NCCL's packages and the fabric manager's (probe/drift.DPKG_PATTERNS)."""
    dpkg_query = module.get_bin_path("dpkg-query")
    if not dpkg_query:
        return {}
    argv = apt.dpkg_query_argv(*drift.DPKG_PATTERNS)
    _rc, out, _err = module.run_command([dpkg_query, *argv[1:]], environ_update={"LC_ALL": "C"})
    return apt.parse_dpkg_status(out)  # rc 1: a name or pattern dpkg does not know


def _fabric_manager_facts(module, packages):
    """The fabric manager's package and, only where it is installed, its service's state."""
    show = None
    systemctl = module.get_bin_path("systemctl") if drift.fabric_manager_installed(packages) else None
    if systemctl:
        argv = [systemctl, "show", "--property=ActiveState", drift.FM_SERVICE]
        rc, out, _err = module.run_command(argv, environ_update={"LC_ALL": "C"})
        show = out if rc == 0 else None
    return drift.fabric_manager(packages, show)


def read_torch_fact(folder):
    """pytorch_venv's local fact file's first TORCH_FACT_MAX + 1 bytes; None without the file,
    b'' where it is there but cannot be read (probe/drift.torch_fact: unknown)."""
    try:
        with open(os.path.join(folder, drift.TORCH_FACT_NAME), "rb") as handle:
            return handle.read(drift.TORCH_FACT_MAX + 1)
    except FileNotFoundError:
        return None
    except OSError:
        return b""


def _nccl_facts(cuda_home, dpkg_packages):
    """The system NCCL: dpkg's libnccl2 and libnccl-dev (versions and holds: the nccl role's plan
    reads them), else the version nccl.h says."""
    packages = drift.nccl_packages(dpkg_packages)
    found = packages.get("libnccl2")
    if found:
        version = found["version"]
        return {
            "version": apt.nccl_release(version),
            "package": version,
            "source": "dpkg",
            "packages": packages,
        }
    for header in ("/usr/include/nccl.h", os.path.join(cuda_home, "include", "nccl.h")):
        text = _read(header)
        if text:
            try:
                return {
                    "version": node.parse_nccl_header(text),
                    "package": "",
                    "source": "header",
                    "packages": packages,
                }
            except ValueError:
                continue
    return {"version": "", "package": "", "source": "", "packages": packages}


def _net_plugins():
    """The NCCL net plugin files where NCCL's dlopen finds them (probe/drift.py's folders)."""
    confs = [
        _read(path) or "" for path in ["/etc/ld.so.conf", *sorted(glob.glob("/etc/ld.so.conf.d/*.conf"))]
    ]
    names = []
    for folder in drift.net_plugin_dirs(confs, os.environ.get("LD_LIBRARY_PATH", "")):
        names.extend(os.path.basename(path) for path in glob.glob(os.path.join(folder, "libnccl-net*.so*")))
    return drift.net_plugin_names(names)


def _ib_firmware():
    listed = os.listdir("/sys/class/infiniband") if os.path.isdir("/sys/class/infiniband") else []
    devices = [dev for dev in listed if drift.is_ib_device(dev)]
    return drift.ib_firmware({dev: _read(f"/sys/class/infiniband/{dev}/fw_ver") for dev in devices})


def _network_facts(interface, address):
    if not interface:
        routes_text = _read("/proc/net/route") or ""
        try:
            interface = node.default_route_interface(node.parse_proc_net_route(routes_text))
        except ValueError:
            interface = ""
    if not address and interface:
        address = _interface_address(interface)
    return {"interface": interface, "address": address}


def main():
    module = AnsibleModule(
        argument_spec={
            "venv_path": {"type": "path", "required": True},
            "interface": {"type": "str", "default": ""},
            "address": {"type": "str", "default": ""},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
            "connection": {"type": "str", "default": ""},
            "master": {"type": "str", "default": ""},
            "min_free_mb": {"type": "int", "default": 0},
            "require_supported_os": {"type": "bool", "default": True},
            "torch_fact_dir": {"type": "path", "default": drift.TORCH_FACT_DIR},
        },
        supports_check_mode=True,
    )
    params = module.params
    os_text = _read("/etc/os-release") or _read("/usr/lib/os-release") or ""
    try:
        os_facts = node.parse_os_release(os_text)
    except ValueError as exc:
        module.fail_json(msg=f"cannot read /etc/os-release: {exc}")
    gpu, inventory = _gpu_facts(module)
    disk_path, free_mb = _free_mb(params["venv_path"])
    support = node.os_support(os_facts["id"], os_facts["version"])
    packages = _dpkg_packages(module)
    facts = {
        "os": dict(os_facts, supported=support["supported"]),
        "cuda_repo_distro": support["cuda_repo_distro"],
        "arch": node.arch_names(os.uname().machine),
        # uname -r: nvidia_driver installs linux-headers-<kernel> for DKMS.
        "kernel": os.uname().release,
        "gpu": gpu,
        "driver": _driver_facts(inventory),
        "cuda": _cuda_facts(module, params["cuda_home"]),
        "nccl": dict(_nccl_facts(params["cuda_home"], packages), net_plugins=_net_plugins()),
        "torch": drift.torch_fact(read_torch_fact(params["torch_fact_dir"])),
        "fabric_manager": _fabric_manager_facts(module, packages),
        "network": _network_facts(params["interface"], params["address"]),
        "infiniband": sorted(os.listdir("/sys/class/infiniband"))
        if os.path.isdir("/sys/class/infiniband")
        else [],
        "infiniband_fw": _ib_firmware(),
        "disk": {"path": disk_path, "free_mb": free_mb},
        "secure_boot": _secure_boot(),
        # As setup's hostname fact: the node name up to the first dot.
        "hostname": platform.node().split(".")[0],
        "python": {"executable": sys.executable, "version": ".".join(map(str, sys.version_info[:3]))},
        "service_mgr": node.service_manager(
            os.path.isdir("/run/systemd/system"), _read("/proc/1/comm") or ""
        ),
        # The control node itself (ansible_connection local): never rebooted, files copied directly.
        "is_local": params["connection"] == "local",
    }
    errors = node.node_errors(facts, params["min_free_mb"], params["require_supported_os"])
    if errors:
        module.fail_json(msg="; ".join(errors), wireup_node=facts)
    module.exit_json(changed=False, ansible_facts={"wireup_node": facts, "wireup_master": params["master"]})


if __name__ == "__main__":
    main()
