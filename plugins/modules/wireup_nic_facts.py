#!/usr/bin/python
"""Ansible module: read a node's NICs, GPUDirect RDMA readiness and IOMMU mode; change nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_nic_facts
short_description: Read the NICs that can carry training traffic between nodes
description:
  - Reads C(/sys/class/infiniband/*/ports/*) (state, physical state, rate, link layer, RoCE GID
    types), each HCA's board_id and hca_type, driver and SR-IOV physfn, C(/sys/class/net/*) (speed, MTU,
    operstate, type, device), C(/proc/driver/nvidia/gpus), C(/proc/modules)
    (nvidia_peermem or nv_peer_mem), C(/proc/cmdline) and the IOMMU group type, once, and parses
    them with C(plugins/module_utils/wireup/probe/nics.py) (parse_nic_facts).
  - Returns the fact C(gpu_topology_nics). Changes nothing; works in check mode and without a GPU.
options:
  root:
    description: Root under which C(sys/) and C(proc/) are read (tests point it at a fixture tree).
    type: path
    default: /
author: wireup (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the node's NICs
  wireup_nic_facts:
"""

RETURN = r"""
ansible_facts:
  description: The fact C(gpu_topology_nics).
  returned: always
  type: dict
  contains:
    gpu_topology_nics:
      description: The NIC facts of this node.
      type: dict
      contains:
        ib_ports:
          description: >-
            Every InfiniBand/RoCE/EFA HCA port - hca, port, name (mlx5_0:1), state (ACTIVE), phys_state
            (LinkUp), rate_gbps, width, speed (NDR), rate (the sysfs text), link_layer (InfiniBand,
            Ethernet or Unknown), kind (ib, efa, roce or None), roce (RoCE v2 or None), netdev, pci,
            driver, board_id, hca_type, model (the card model - board_id, else hca_type), vf_of (an
            SR-IOV VF's physical function), active, role (rail,
            frontend, vf, other_card) and set_aside (why it is no rail, or None).
          type: list
          elements: dict
        interfaces:
          description: >-
            Network interfaces but loopback and container bridges - name, operstate, speed_mbps
            (None when unknown), mtu, type (ether, infiniband), pci, virtual (no bus device).
          type: list
          elements: dict
        peermem:
          description: loaded (bool), module (nvidia_peermem, nv_peer_mem or None), modules_read.
          type: dict
        iommu:
          description: mode - off, passthrough, translated or unknown.
          type: dict
        nvidia_gpus:
          description: GPUs in /proc/driver/nvidia/gpus (None without the NVIDIA driver).
          type: int
        transport:
          description: What NCCL would use between nodes - ib, efa, roce, socket or None.
          type: str
        rails:
          description: Active rails of that transport.
          type: int
        rail_gbps:
          description: >-
            The slowest active rail's rate in Gb/s (10 when the socket interface's speed is
            unknown, as NCCL assumes).
          type: float
        devices:
          description: The rails (mlx5_0:1 or the interface name).
          type: list
          elements: str
        set_aside:
          description: Ports that are no training rails - name, role, reason.
          type: list
          elements: dict
        findings:
          description: >-
            Node findings {severity, code, gpus, message} - nic_port_down, nic_set_aside,
            nic_rate_low, peermem_missing, iommu_translated (roles/gpu_topology/README.md).
          type: list
          elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nics


def main():
    module = AnsibleModule(
        argument_spec={"root": {"type": "path", "default": "/"}},
        supports_check_mode=True,
    )
    facts = nics.parse_nic_facts(nics.read_tree(module.params["root"]))
    module.exit_json(changed=False, ansible_facts={"gpu_topology_nics": facts})


if __name__ == "__main__":
    main()
