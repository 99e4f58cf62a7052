"""wireup.probe.nics: NIC facts from sysfs trees written from the kernel's ABI documents, GPU-NIC
closeness from the NIC columns of real `topo -m` outputs, cross-node findings and the expected
inter-node busbw."""

import pathlib
import shutil

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nics as probe_nics
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import topology

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
SYSFS = FIXTURES / "sysfs"
PUBLIC = FIXTURES / "public"


def facts(name):
    return probe_nics.parse_nic_facts(probe_nics.read_tree(str(SYSFS / name)))


def codes(items):
    return sorted(f["code"] for f in items)


def test_healthy_ndr_node_has_eight_rails_and_no_finding():
    f = facts("ndr8_healthy")
    assert (f["transport"], f["rails"], f["rail_gbps"]) == ("ib", 8, 400.0)
    port = f["ib_ports"][0]
    assert port["state"] == "ACTIVE" and port["phys_state"] == "LinkUp"
    assert (port["width"], port["speed"], port["link_layer"], port["pci"]) == (
        4,
        "NDR",
        "InfiniBand",
        "0000:18:00.0",
    )
    assert f["peermem"] == {"loaded": True, "module": "nvidia_peermem", "modules_read": True}
    assert f["iommu"]["mode"] == "passthrough"
    assert f["findings"] == []
    # eno1 (Ethernet, 25G, MTU 9000) is listed; lo is not.
    assert next(i["name"] for i in f["interfaces"]) == "eno1"
    assert "lo" not in [i["name"] for i in f["interfaces"]]


def test_down_port_and_hdr_rail_are_findings_and_leave_the_usable_rails():
    f = facts("ndr8_one_rail_hdr_one_down")
    assert codes(f["findings"]) == ["nic_port_down", "nic_rate_low"]
    assert "mlx5_7:1 is DOWN/Disabled" in f["findings"][0]["message"]
    assert "mlx5_5:1 runs at 200 Gb/sec (4X HDR)" in f["findings"][1]["message"]
    # 7 active rails, paced by the slowest (HDR) one.
    assert (f["rails"], f["rail_gbps"]) == (7, 200.0)
    # The down IPoIB interface has no readable speed.
    down = next(i for i in f["interfaces"] if i["operstate"] == "down")
    assert down["speed_mbps"] is None and down["type"] == "infiniband"


def test_roce_without_peermem_and_translating_iommu():
    f = facts("roce2_no_peermem_iommu_dma")
    assert (f["transport"], f["rails"]) == ("roce", 2)
    assert f["ib_ports"][0]["roce"] == "RoCE v2" and f["ib_ports"][0]["netdev"] == "ens1f0np0"
    assert codes(f["findings"]) == ["iommu_translated", "peermem_missing"]
    assert [i["name"] for i in f["interfaces"]] == ["ens1f0np0", "ens1f1np1"]  # docker0 skipped


def test_testbed_veth_is_a_virtual_socket_rail():
    f = facts("testbed_veth")
    assert (f["transport"], f["rails"], f["rail_gbps"], f["devices"]) == ("socket", 1, 10.0, ["host0"])
    assert f["interfaces"][0]["virtual"] is True and f["speed_assumed"] is False
    assert f["ib_ports"] == [] and f["findings"] == [] and f["iommu"]["mode"] == "off"


def test_h200_netns_veth_is_an_ethernet_socket_rail_at_its_sysfs_speed():
    """A simulated host on the 1x H200 (tests/gpu/fabric_netns.py): what the NIC facts read inside
    its network namespace, as a container's eth0 is, a veth: Ethernet, 10000 Mb/s, no PCI device."""
    f = facts("h200x1_netns_veth")
    assert f["interfaces"] == [
        {
            "name": "eth0",
            "operstate": "up",
            "speed_mbps": 10000,
            "mtu": 1500,
            "type": "ether",
            "pci": None,
            "virtual": True,
        }
    ]
    assert (f["transport"], f["rails"], f["rail_gbps"], f["devices"], f["speed_assumed"]) == (
        "socket",
        1,
        10.0,
        ["eth0"],
        False,
    )
    # No RDMA: no HCA, no peermem, nothing to find; the node's one GPU is counted.
    assert f["ib_ports"] == [] and f["peermem"]["loaded"] is False and f["findings"] == []
    assert f["nvidia_gpus"] == 1 and f["iommu"]["mode"] == "off"
    # The expectation from the veth NCCL named: 10 Gb/s x sockets' 0.45, no GDR variant.
    on_veth = probe_nics.on_interface(f, "eth0")
    assert (on_veth["rail_gbps"], on_veth["speed_assumed"]) == (10.0, False)
    e = probe_nics.expected_busbw({"n3": on_veth, "n4": on_veth}, 1, transport="socket", gdr=False)
    assert (e["expected_gbs"], e["network_gbs"], e["transport"], e["efficiency"]) == (
        0.562,
        1.25,
        "socket",
        0.45,
    )


def test_h200_vm_unknown_speed_takes_ncclss_own_10g_default():
    f = facts("h200vm_virtio_no_ib")
    assert (f["transport"], f["devices"], f["rail_gbps"], f["speed_assumed"]) == (
        "socket",
        ["eth0"],
        10.0,
        True,
    )
    assert f["interfaces"][0]["speed_mbps"] is None  # sysfs says -1


def test_missing_root_gives_no_nic_and_no_crash(tmp_path):
    f = probe_nics.parse_nic_facts(probe_nics.read_tree(str(tmp_path)))
    assert f["transport"] is None and f["ib_ports"] == [] and f["interfaces"] == []
    # /proc/modules unreadable: no peermem verdict either way
    assert f["peermem"]["modules_read"] is False


def test_mangled_sysfs_values_are_unknown_not_errors(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(SYSFS / "ndr8_healthy", root, symlinks=True)
    port = root / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "rate").write_text("\x00garbage\n")
    (port / "state").write_bytes(b"4:\xff ACTIVE")
    (root / "sys/class/net/eno1/mtu").write_text("")
    f = probe_nics.parse_nic_facts(probe_nics.read_tree(str(root)))
    p0 = f["ib_ports"][0]
    assert p0["rate_gbps"] is None and p0["state"] is None and p0["active"] is False
    assert next(i for i in f["interfaces"] if i["name"] == "eno1")["mtu"] is None
    assert "nic_port_down" in codes(f["findings"])


@pytest.mark.parametrize(
    "text,expected",
    [
        ("400 Gb/sec (4X NDR)", {"gbps": 400.0, "width": 4, "speed": "NDR"}),
        ("2.5 Gb/sec (1X SDR)", {"gbps": 2.5, "width": 1, "speed": "SDR"}),
        ("25 Gb/sec (1X EDR)\n", {"gbps": 25.0, "width": 1, "speed": "EDR"}),
        ("100 Gb/sec", {"gbps": 100.0, "width": None, "speed": None}),
        ("", None),
        ("fast", None),
    ],
)
def test_parse_rate(text, expected):
    assert probe_nics.parse_rate(text) == expected


def test_parse_modules_ignores_unloading_modules():
    text = "nvidia_peermem 16384 0 - Unloading 0x0\nnv_peer_mem 1 0 - Live 0x0\n"
    assert probe_nics.parse_modules(text) == {"nv_peer_mem"}


def test_closeness_on_h100x8_with_ten_nics():
    topo = topology.parse_topo_matrix((PUBLIC / "h100x8_nccl-1264_topo_m_cut.txt").read_text())
    c = probe_nics.gpu_nic_closeness(topo)
    assert [g["class"] for g in c["gpus"]] == ["PIX"] * 8
    assert c["gpus"][3]["nics"] == ["NIC5"] and c["findings"] == []


def test_closeness_one_dual_port_card_for_eight_gpus_is_one_info_finding():
    # Real: NVIDIA/go-gpuallocator#17: NIC0 and NIC1 are PIX to each other with the same class to
    # every GPU (the two ports of one card); 7 GPUs are SYS to it, GPU6 PHB. One card cannot sit
    # on eight GPUs' switches: the node's layout, not eight warnings.
    topo = topology.parse_topo_matrix((PUBLIC / "rtx4090x8_go-gpuallocator-17_topo_m.txt").read_text())
    c = probe_nics.gpu_nic_closeness(topo)
    far = [g["gpu"] for g in c["gpus"] if not g["close"]]
    assert far == list(range(8))
    assert [(f["severity"], f["code"], f["gpus"]) for f in c["findings"]] == [
        ("info", "gpu_without_close_nic", far)
    ]
    assert "no GPU shares a PCIe switch with any NIC" in c["findings"][0]["message"]


def test_closeness_skips_inactive_nics_by_device_name():
    topo = topology.parse_topo_matrix((PUBLIC / "h100x4_nccl-1617_topo_m.txt").read_text())
    nics = {"ib_ports": [{"hca": n["name"], "active": n["name"] != "NIC0"} for n in topo["nics"]]}
    c = probe_nics.gpu_nic_closeness(topo, nics)
    assert c["gpus"][0]["class"] == "SYS" and not c["gpus"][0]["close"]
    assert [f["gpus"] for f in c["findings"]] == [[0]]


def test_single_nic_node_has_no_closeness_finding():
    topo = topology.parse_topo_matrix((FIXTURES / "h200x2" / "topo_m.txt").read_text())
    assert probe_nics.gpu_nic_closeness(topo) == {
        "gpus": [
            {"gpu": 0, "nics": [], "class": None, "close": False},
            {"gpu": 1, "nics": [], "class": None, "close": False},
        ],
        "findings": [],
    }


def test_cross_node_findings_name_the_odd_node():
    nodes = {"a": facts("ndr8_healthy"), "b": facts("ndr8_healthy"), "c": facts("ndr8_one_rail_hdr_one_down")}
    out = probe_nics.cross_node_findings(nodes)
    assert codes(out) == ["fabric_rate_mismatch"]
    assert out[0]["nodes"] == ["c"] and "c 1400 Gb/s" in out[0]["message"]
    mixed = probe_nics.cross_node_findings(
        {"a": facts("ndr8_healthy"), "r": facts("roce2_no_peermem_iommu_dma"), "b": facts("ndr8_healthy")}
    )
    assert {f["code"]: f["nodes"] for f in mixed}["fabric_transport_mismatch"] == ["r"]


def test_a_node_faster_than_most_is_info_not_critical():
    fast = facts("ndr8_healthy")
    slow = facts("ndr8_one_rail_hdr_one_down")
    out = probe_nics.cross_node_findings({"a": slow, "b": dict(slow), "c": fast})
    assert [(f["severity"], f["code"], f["nodes"]) for f in out] == [
        ("info", "fabric_rate_above_peers", ["c"])
    ]
    assert "jobs spanning them run at the lower rate" in out[0]["message"]
    # Slower and faster odd ones together: each named under its own finding.
    out = probe_nics.cross_node_findings({"a": fast, "b": dict(fast), "s": slow, "x": dict(fast, rails=16)})
    assert sorted((f["severity"], f["code"], f["nodes"]) for f in out) == [
        ("critical", "fabric_rate_mismatch", ["s"]),
        ("info", "fabric_rate_above_peers", ["x"]),
    ]


def test_cross_node_mtu_mismatch():
    a = facts("testbed_veth")
    b = facts("testbed_veth")
    c = facts("testbed_veth")
    c["interfaces"][0]["mtu"] = 9000
    out = probe_nics.cross_node_findings({"a": a, "b": b, "c": c})
    assert [(f["code"], f["nodes"]) for f in out] == [("fabric_mtu_mismatch", ["c"])]


def test_expected_busbw_from_the_slowest_node():
    nodes = {"a": facts("ndr8_healthy"), "c": facts("ndr8_one_rail_hdr_one_down")}
    e = probe_nics.expected_busbw(nodes, gpus_per_node=8, intra_node_gbs=344.0)
    # c: 7 rails x 200 Gb/s = 175 GB/s < a's 400 GB/s; below the intra-node figure; IB with GDR.
    assert e["slowest"] == "c" and e["network_gbs"] == 175.0 and e["bottleneck"] == "network"
    assert e["transport"] == "ib_gdr" and e["expected_gbs"] == pytest.approx(175.0 * 0.90)
    # one GPU per node drives one rail
    one = probe_nics.expected_busbw({"a": facts("ndr8_healthy")}, gpus_per_node=1)
    assert one["network_gbs"] == 50.0
    # the intra-node figure bounds it when it is lower
    low = probe_nics.expected_busbw({"a": facts("ndr8_healthy")}, gpus_per_node=8, intra_node_gbs=100.0)
    assert low["bottleneck"] == "intra-node" and low["expected_gbs"] == pytest.approx(90.0)


def test_expected_busbw_follows_what_nccl_used():
    nodes = {"a": facts("ndr8_healthy"), "b": facts("ndr8_healthy")}
    e = probe_nics.expected_busbw(nodes, 8, transport="socket")
    assert e["transport"] == "socket" and e["efficiency"] == 0.45
    assert probe_nics.expected_busbw(nodes, 8, gdr=False)["transport"] == "ib"
    roce = probe_nics.expected_busbw({"r": facts("roce2_no_peermem_iommu_dma")}, 2)
    assert roce["transport"] == "roce" and roce["expected_gbs"] == pytest.approx(50.0 * 0.70)


def test_expected_busbw_without_facts_says_why():
    assert probe_nics.expected_busbw({}, 1)["reason"] == "no node has NIC facts"
    none = probe_nics.expected_busbw({"x": probe_nics.parse_nic_facts({})}, 1)
    assert none["expected_gbs"] is None and "x: no usable NIC" in none["reason"]
    assert (
        "no efficiency"
        in probe_nics.expected_busbw({"a": facts("testbed_veth")}, 1, transport="carrier-pigeon")["reason"]
    )


def test_parse_nic_facts_rejects_non_dict():
    with pytest.raises(ValueError, match="expected a dict"):
        probe_nics.parse_nic_facts("sys")


# ---------------------------------------------------------------- kernel formats and odd values
@pytest.mark.parametrize(
    "text,expected",
    [
        ("5: LinkUp", (5, "LinkUp")),
        ("7: Phy Test\n", (7, "Phy Test")),  # drivers/infiniband/core/sysfs.c phys_state names
        ("4: PortConfigurationTraining", (4, "PortConfigurationTraining")),
        ("9: <unknown>", (9, "<unknown>")),
        ("5: ACTIVE_DEFER", (5, "ACTIVE_DEFER")),
        ("4:\ufffd ACTIVE", (None, None)),
    ],
)
def test_parse_state_takes_the_kernels_names_with_spaces(text, expected):
    assert probe_nics.parse_state(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("56 Gb/sec (4X FDR)", {"gbps": 56.0, "width": 4, "speed": "FDR"}),
        ("200 Gb/sec (2X NDR)", {"gbps": 200.0, "width": 2, "speed": "NDR"}),
        ("800 Gb/sec (4X XDR)", {"gbps": 800.0, "width": 4, "speed": "XDR"}),
        ("400 Gb/sec (8X HDR)", {"gbps": 400.0, "width": 8, "speed": "HDR"}),  # EFA's 400G mapping
        ("10 Gb/sec (4X)", {"gbps": 10.0, "width": 4, "speed": None}),  # older kernels: SDR unnamed
        ("0 GB/sec", None),
    ],
)
def test_parse_rate_kernel_strings(text, expected):
    assert probe_nics.parse_rate(text) == expected


@pytest.mark.parametrize("value", ["4294967295", "65535", "-1", "0"])
def test_unknown_ethernet_speeds_are_unknown_not_terabits(tmp_path, value):
    # Older kernels printed ethtool's SPEED_UNKNOWN unsigned (net/core/net-sysfs.c speed_show with
    # fmt_udec): 4294967295 Mb/s is no 4 Pb/s link.
    root = tmp_path / "t"
    shutil.copytree(SYSFS / "testbed_veth", root, symlinks=True)
    (root / "sys/class/net/host0/speed").write_text(value + "\n")
    f = probe_nics.parse_nic_facts(probe_nics.read_tree(str(root)))
    assert f["interfaces"][0]["speed_mbps"] is None
    assert (f["rail_gbps"], f["speed_assumed"]) == (10.0, True)


# ---------------------------------------------------------------- NICs that are no training rails
def test_efa_devices_are_their_own_transport_not_infiniband():
    # AWS p4d: EFA's link_layer reads "Unknown" (linux-rdma/rdma-core#884); NCCL reaches EFA through
    # aws-ofi-nccl, not NET/IB, and no efficiency is known for it.
    f = facts("efa4_p4d_unknown_link_layer")
    assert (f["transport"], f["rails"], f["rail_gbps"], f["nvidia_gpus"]) == ("efa", 4, 100.0, 8)
    assert {(p["kind"], p["driver"], p["link_layer"]) for p in f["ib_ports"]} == {("efa", "efa", "Unknown")}
    assert f["findings"] == []
    e = probe_nics.expected_busbw({"a": f, "b": f}, 8)
    assert e["expected_gbs"] is None and "no efficiency known for transport 'efa'" in e["reason"]
    # NCCL's log names the plugin OFI: the same answer.
    assert probe_nics.expected_busbw({"a": f}, 8, transport="ofi")["expected_gbs"] is None


def test_azure_accelerated_networking_vf_is_set_aside():
    # Azure ND H200 v5 (its ibv_devinfo): mlx5_ib0..7 InfiniBand, mlx5_an0 Ethernet, all ACTIVE.
    f = facts("azure_ndv5_ib8_an0")
    assert (f["transport"], f["rails"], f["rail_gbps"]) == ("ib", 8, 400.0)
    assert [(a["name"], a["role"]) for a in f["set_aside"]] == [("mlx5_an0:1", "frontend")]
    assert [(x["severity"], x["code"]) for x in f["findings"]] == [("info", "nic_set_aside")]
    assert "Accelerated Networking" in f["findings"][0]["message"]


def test_azure_vm_with_only_the_accelerated_networking_vf_uses_sockets():
    # Without InfiniBand the AccelNet VF is no RoCE rail: NCCL runs over sockets (skypilot#4448's
    # log: NET/Socket on eth0 and the VF's enP7906s1) and no peermem warning is due.
    f = facts("azure_an0_only")
    assert (f["transport"], f["devices"]) == ("socket", ["eth0"])
    assert "peermem_missing" not in codes(f["findings"])
    assert codes(f["findings"]) == ["nic_set_aside"]


def test_unused_second_ports_of_ethernet_cards_on_an_ib_node_are_info():
    # imbue-ai/cluster-health#4: 8 CX-7 InfiniBand rails and two dual-port CX-6 Ethernet cards
    # whose second ports (mlx5_2, mlx5_8) are down: no training traffic is lost.
    f = facts("h100_ib8_cx6_eth_unused_ports")
    assert (f["transport"], f["rails"], f["rail_gbps"]) == ("ib", 8, 400.0)
    down = [x for x in f["findings"] if x["code"] == "nic_port_down"]
    assert [(x["severity"], x["message"].split(" ")[0]) for x in down] == [
        ("info", "mlx5_2:1"),
        ("info", "mlx5_8:1"),
    ]
    assert "transport is InfiniBand, so this RoCE port" in down[0]["message"]


def test_a_cards_unused_second_port_on_a_roce_node_is_info_and_a_lost_rail_a_warning(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(SYSFS / "roce2_no_peermem_iommu_dma", root, symlinks=True)
    port = root / "sys/class/infiniband/mlx5_1/ports/1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("3: Disabled\n")
    f = probe_nics.parse_nic_facts(probe_nics.read_tree(str(root)))
    down = next(x for x in f["findings"] if x["code"] == "nic_port_down")
    # mlx5_1 is 0000:3b:00.1, the second function of mlx5_0's card (0000:3b:00.0), which is up.
    assert down["severity"] == "info" and "the other port of the card 0000:3b:00" in down["message"]
    # A rail on its own card that goes down is a warning (ndr8: mlx5_7 on 0000:88:00.0).
    lost = facts("ndr8_one_rail_hdr_one_down")
    assert [x["severity"] for x in lost["findings"] if x["code"] == "nic_port_down"] == ["warning"]


def test_a_slower_storage_card_is_set_aside_not_a_degraded_rail():
    # NVIDIA/nccl#1505's DGX A100: 8 HDR compute ports and a storage card whose ports run at 200
    # and 100 Gb/s. The 100G port is another card model than the rails: no critical finding, and
    # the rails are not paced by it.
    f = facts("hdr8_storage_card_hdr_and_edr")
    assert (f["transport"], f["rail_gbps"]) == ("ib", 200.0)
    assert [(a["name"], a["role"]) for a in f["set_aside"]] == [("mlx5_5:1", "other_card")]
    assert "nic_rate_low" not in codes(f["findings"])
    # 9 rails (8 compute, the storage card's 200G port) for 8 GPUs: one each; the spare one
    # counts for no GPU.
    e = probe_nics.expected_busbw({"a": f}, 8)
    assert (e["rails"], e["network_gbs"]) == (8, 200.0)


def test_a_slower_port_of_the_same_card_model_stays_a_critical_finding(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(SYSFS / "hdr8_storage_card_hdr_and_edr", root, symlinks=True)
    (root / "sys/class/infiniband/mlx5_3/ports/1/rate").write_text("100 Gb/sec (2X HDR)\n")
    f = probe_nics.parse_nic_facts(probe_nics.read_tree(str(root)))
    low = [x for x in f["findings"] if x["code"] == "nic_rate_low"]
    assert [(x["severity"], x["message"].split(" ")[0]) for x in low] == [("critical", "mlx5_3:1")]
    assert f["rail_gbps"] == 100.0


def test_sriov_vfs_of_a_local_port_are_not_extra_rails():
    # NVIDIA/nccl#246's lspci: a GPU host whose ConnectX-5 has virtual functions enabled. They
    # share the PF's link: 2 rails, not 6, and a host without VFs does not differ from it.
    f = facts("cx5_pf_with_sriov_vfs")
    assert (f["transport"], f["rails"], f["devices"]) == ("roce", 2, ["mlx5_0:1", "mlx5_1:1"])
    assert {a["role"] for a in f["set_aside"]} == {"vf"} and len(f["set_aside"]) == 4
    plain = probe_nics.parse_nic_facts(
        {
            k: v
            for k, v in probe_nics.read_tree(str(SYSFS / "cx5_pf_with_sriov_vfs")).items()
            if "/mlx5_0/" in k or "/mlx5_1/" in k or "/net/" in k
        }
    )
    assert probe_nics.cross_node_findings({"vfs": f, "plain": plain, "other": plain}) == []


def test_bonded_roce_devices_count_one_port_rate():
    # deepseek-ai/DeepEP#150's ibstatus: mlx5_bond_0..3 at 200 Gb/sec (4X HDR), link layer Ethernet.
    # The bond's netdev says 400000 Mb/s, but NCCL's IB transport takes the port's rate (NVIDIA/nccl#1015:
    # one QP uses one port).
    f = facts("bond4_roce_h20")
    assert (f["transport"], f["rails"], f["rail_gbps"]) == ("roce", 4, 200.0)
    assert f["ib_ports"][0]["netdev"] == "bond0" and f["findings"] == []
    e = probe_nics.expected_busbw({"a": f, "b": f}, 8)
    assert (e["network_gbs"], e["transport"]) == (100.0, "roce_gdr")
    # NCCL's log says NET/IB for RoCE ports too: still RoCE's efficiency.
    assert probe_nics.expected_busbw({"a": f, "b": f}, 8, transport="ib")["transport"] == "roce_gdr"


def test_closeness_leaves_out_set_aside_nics_and_keeps_an_hca_with_one_port_up():
    topo = topology.parse_topo_matrix((PUBLIC / "gpux6_nccl-243_topo_m_mlx5_columns.txt").read_text())
    # Old layout: the columns are the devices (mlx5_1, mlx5_0). A dual-port mlx5_0 with port 2
    # down is still GPU2's PIX NIC.
    nics = {
        "ib_ports": [
            {"hca": "mlx5_0", "active": True},
            {"hca": "mlx5_0", "active": False},
            {"hca": "mlx5_1", "active": True},
        ]
    }
    c = probe_nics.gpu_nic_closeness(topo, nics)
    assert (c["gpus"][2]["nics"], c["gpus"][2]["class"]) == (["mlx5_0"], "PIX")
    # mlx5_1 set aside (a frontend VF): GPU5 loses its PIX NIC from the count, not a finding's worth.
    nics["ib_ports"][2]["role"] = "frontend"
    c = probe_nics.gpu_nic_closeness(topo, nics)
    assert c["gpus"][5]["nics"] == ["mlx5_0"] and not c["gpus"][5]["close"]


def test_closeness_picks_each_gpus_own_nic_in_reverse_order():
    # Real: NVIDIA/nccl#1453, 8x H100, 9 NICs wired in reverse (GPU0-NIC8 ... GPU7-NIC1) and NIC0
    # SYS to every GPU (a storage or management NIC): every GPU has its PIX NIC, nothing to say.
    topo = topology.parse_topo_matrix((PUBLIC / "h100x8_nccl-1453_topo_m_nic0_far_cut.txt").read_text())
    c = probe_nics.gpu_nic_closeness(topo)
    assert [g["nics"] for g in c["gpus"]] == [[f"NIC{8 - i}"] for i in range(8)]
    assert all(g["close"] for g in c["gpus"]) and c["findings"] == []


def test_closeness_four_nics_for_eight_gpus_is_the_layout_not_four_warnings():
    # Real: NVIDIA/nvshmem#52, 8x H100 with 4 NICs, each PIX to one GPU (1, 3, 4, 6): the other
    # four GPUs reach a NIC through the CPU by design.
    topo = topology.parse_topo_matrix((PUBLIC / "h100x8_nvshmem-52_topo_m_4nics_cut.txt").read_text())
    c = probe_nics.gpu_nic_closeness(topo)
    assert [g["gpu"] for g in c["gpus"] if g["close"]] == [1, 3, 4, 6]
    assert [(f["severity"], f["gpus"]) for f in c["findings"]] == [("info", [0, 2, 5, 7])]
    assert "4 NIC card(s) on a GPU's PCIe switch for 8 GPUs" in c["findings"][0]["message"]


def test_closeness_warns_when_a_gpus_own_nic_is_down():
    # Real: NVIDIA/nccl#1617, 4x H100, one PIX NIC per GPU; NIC0 inactive: GPU0 lost its rail.
    topo = topology.parse_topo_matrix((PUBLIC / "h100x4_nccl-1617_topo_m.txt").read_text())
    nics = {"ib_ports": [{"hca": n["name"], "active": n["name"] != "NIC0"} for n in topo["nics"]]}
    c = probe_nics.gpu_nic_closeness(topo, nics)
    assert [(f["severity"], f["gpus"]) for f in c["findings"]] == [("warning", [0])]
    assert "its own NIC NIC0 has no active port" in c["findings"][0]["message"]


# ---------------------------------------------------------------- expected busbw: rails and rates
def _node(transport, rails, gbps, gpus=None, peermem=True):
    return {
        "transport": transport,
        "rails": rails,
        "rail_gbps": gbps,
        "nvidia_gpus": gpus,
        "peermem": {"loaded": peermem},
    }


@pytest.mark.parametrize(
    "rails,gpus,ranks,used",
    [
        (8, 8, 8, 8),  # DGX: a rail per GPU
        (8, 8, 1, 1),
        (32, 8, 8, 32),  # AWS p5: 32 EFA devices, 4 per GPU
        (32, 8, 2, 8),
        (16, 8, 4, 8),  # two NICs per GPU
        (10, 8, 8, 8),  # 8 compute + 2 storage ports: the spares count for no GPU
        (4, 8, 8, 4),  # DGX-1: a NIC per two GPUs
        (4, 8, 3, 2),
        (4, None, 8, 4),  # GPU count unknown: one rail per GPU in the job
        (16, None, 8, 8),
    ],
)
def test_rails_a_job_drives(rails, gpus, ranks, used):
    assert probe_nics.rails_for_ranks(_node("ib", rails, 400.0, gpus), ranks)[0] == used


def test_expected_busbw_multi_rail_node_gets_every_rail():
    # 16 NDR rails for 8 GPUs: 16 x 400 Gb/s = 800 GB/s for an 8-GPU job, 400 for a 4-GPU job.
    e = probe_nics.expected_busbw({"a": _node("ib", 16, 400.0, 8), "b": _node("ib", 16, 400.0, 8)}, 8)
    assert (e["network_gbs"], e["rails"], e["expected_gbs"]) == (800.0, 16, 720.0)
    assert probe_nics.expected_busbw({"a": _node("ib", 16, 400.0, 8)}, 4)["network_gbs"] == 400.0


def test_expected_busbw_mixed_rate_cluster_is_paced_by_the_slowest_node():
    ndr = _node("ib", 8, 400.0, 8)
    hdr = _node("ib", 8, 200.0, 8)
    few = _node("ib", 4, 400.0, 8)
    e = probe_nics.expected_busbw({"ndr": ndr, "hdr": hdr}, 8)
    assert (e["slowest"], e["network_gbs"]) == ("hdr", 200.0)
    # 4 NDR rails (200 GB/s) against 8 HDR (200 GB/s): a tie, broken by name; 4 GPUs per node:
    # few drives 2 rails (100 GB/s), hdr 4 (100 GB/s).
    assert probe_nics.expected_busbw({"few": few, "hdr": hdr}, 8)["network_gbs"] == 200.0
    e4 = probe_nics.expected_busbw({"few": few, "hdr": hdr, "ndr": ndr}, 4)
    assert (e4["slowest"], e4["network_gbs"], e4["rails"]) == ("few", 100.0, 2)
    # one node without peermem takes GDR away from the group
    assert (
        probe_nics.expected_busbw({"ndr": ndr, "x": _node("ib", 8, 400.0, 8, peermem=False)}, 8)["transport"]
        == "ib"
    )
    # the cross-node check names the odd node by rails x rate
    out = probe_nics.cross_node_findings({"a": ndr, "b": dict(ndr), "c": hdr})
    assert [(f["code"], f["nodes"]) for f in out] == [("fabric_rate_mismatch", ["c"])]


def test_card_models_are_told_apart_by_hca_type_where_board_id_is_missing_or_empty(tmp_path):
    # The kernel's hca_type names the model too (mlx5: MT4123 ConnectX-6, MT4119 ConnectX-5);
    # before, ports without a board_id were all of one unknown model and the storage card's 100G
    # port was a degraded rail (a critical finding).
    root = tmp_path / "t"
    shutil.copytree(SYSFS / "hdr8_storage_card_hdr_and_edr", root, symlinks=True)
    for hca in (root / "sys/class/infiniband").iterdir():
        storage = hca.name in ("mlx5_4", "mlx5_5")
        (hca / "board_id").unlink(missing_ok=True)
        if hca.name == "mlx5_0":
            (hca / "board_id").write_text("\n")  # present but empty
        (hca / "hca_type").write_text("MT4119\n" if storage else "MT4123\n")
    f = probe_nics.parse_nic_facts(probe_nics.read_tree(str(root)))
    assert [(a["name"], a["role"]) for a in f["set_aside"]] == [("mlx5_5:1", "other_card")]
    assert "card model MT4119 at 100 Gb/sec" in f["set_aside"][0]["reason"]
    assert "nic_rate_low" not in codes(f["findings"])
    port = next(p for p in f["ib_ports"] if p["hca"] == "mlx5_0")
    assert (port["board_id"], port["hca_type"], port["model"]) == (None, "MT4123", "MT4123")
