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
attributes:
  platform:
    support: full
    platforms: linux
    description: Linux nodes (it reads /sys/class/net, /sys/class/infiniband and /proc/modules).
extends_documentation_fragment:
  - wireup.cluster.attributes
  - wireup.cluster.attributes.read_only
author: wireup maintainers (@wireup)
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
          sample:
            - hca: mlx5_0
              port: 1
              name: mlx5_0:1
              state: ACTIVE
              phys_state: LinkUp
              rate_gbps: 400
              link_layer: InfiniBand
              kind: ib
              netdev: ibp24s0
              model: MCX75310AAS-NEAT
              active: true
              role: rail
              set_aside: null
          elements: dict
        interfaces:
          description: >-
            Network interfaces but loopback and container bridges - name, operstate, speed_mbps
            (None when unknown), mtu, type (ether, infiniband), pci, virtual (no bus device).
          type: list
          sample:
            - name: eth0
              operstate: up
              speed_mbps: 25000
              mtu: 1500
              type: ether
              pci: 0000:c1:00.0
              virtual: false
          elements: dict
        peermem:
          description: loaded (bool), module (nvidia_peermem, nv_peer_mem or None), modules_read.
          type: dict
          sample: {"loaded": true, "module": "nvidia_peermem", "modules_read": true}
        iommu:
          description: mode - off, passthrough, translated or unknown.
          type: dict
          sample: {"mode": "passthrough"}
        nvidia_gpus:
          description: GPUs in /proc/driver/nvidia/gpus (None without the NVIDIA driver).
          type: int
          sample: 8
        transport:
          description: What NCCL would use between nodes - ib, efa, roce, socket or None.
          type: str
          sample: "ib"
        rails:
          description: Active rails of that transport.
          type: int
          sample: 8
        rail_gbps:
          description: >-
            The slowest active rail's rate in Gb/s (10 when the socket interface's speed is
            unknown, as NCCL assumes).
          type: float
          sample: 400.0
        devices:
          description: The rails (mlx5_0:1 or the interface name).
          type: list
          sample: ["mlx5_0:1", "mlx5_1:1"]
          elements: str
        set_aside:
          description: Ports that are no training rails - name, role, reason.
          type: list
          sample:
            - name: mlx5_8:1
              role: frontend
              reason: Ethernet port carrying the default route
          elements: dict
        findings:
          description: >-
            Node findings {severity, code, gpus, message} - nic_port_down, nic_set_aside,
            nic_rate_low, peermem_missing, iommu_translated (roles/gpu_topology/README.md).
          type: list
          sample:
            - severity: warning
              code: nic_port_down
              gpus: []
              message: 'mlx5_3:1 is DOWN (Polling): check its cable and switch port'
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
