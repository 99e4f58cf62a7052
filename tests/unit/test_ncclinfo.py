"""wireup.probe.ncclinfo on real NCCL INFO logs: today's H200 captures (NET/Socket between two ranks
with distinct NCCL_HOSTID, one rank alone) and logs pasted into public issues, NCCL 2.3 to 2.30
(NET/IB with and without GDRDMA, PXN, RoCE and merged ports, the IBext and "NCCL RDMA Plugin"
plugins, gIB, aws-ofi-nccl for EFA, socket fallbacks, P2P/SHM kinds, pastes without host:pid:tid,
launcher prefixes, WARN failures). Derived variants (lines joined, timestamps, a line added or
removed) say so where they are made; each finding test shows what changes the verdict."""

import pathlib
import time

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import ncclinfo, nics

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "ncclinfo"
SYSFS = FIXTURES / "sysfs"


def parse(name):
    return ncclinfo.parse_nccl_info((LOGS / name).read_text(encoding="utf-8", errors="replace"))


def facts(name):
    return nics.parse_nic_facts(nics.read_tree(str(SYSFS / name)))


# (file, network, inter_node, gdrdma, intra_node, channels, nnodes, ib devices, version)
CASES = [
    ("h200x1_nccl-2.28.9_twohost_socket_rank0.txt", "Socket", "socket", False, [], 2, 2, 0, "2.28.9"),
    ("h200x1_nccl-2.28.9_twohost_socket_rank1.txt", "Socket", "socket", False, [], 2, 2, 0, "2.28.9"),
    ("h200x1_nccl-2.28.9_one_rank_all_reduce.txt", "Socket", None, None, [], 64, 1, 0, "2.28.9"),
    ("a100_nccl-707_gdrdma_channels.txt", None, "ib", True, [], None, None, 0, None),
    (
        "h100x8x2_aks-rdma-infiniband-30_gdrdma_p2p_cumem.txt",
        None,
        "ib",
        True,
        ["P2P/CUMEM"],
        None,
        None,
        0,
        None,
    ),
    ("efa_aws-ofi-nccl-24_libfabric_mpirun_prefix.txt", None, "ofi", False, ["P2P/IPC"], None, None, 0, None),
    ("h200x8x2_nccl-1597_ofi_efa_provider.txt", "Libfabric", None, None, [], None, None, 0, None),
    ("ib_nv_peer_memory-56_no_gdrdma.txt", None, None, None, [], None, None, 1, "2.5.6"),
    ("ibext_nccl-988_sharp_plugin.txt", "IBext", None, None, [], None, None, 8, "2.12.9"),
    ("roce_nccl-1537_gdr_disabled_peermem_loaded.txt", "IB", None, None, [], None, None, 2, None),
    # NCCL 2.26 on RoCE bonds through a rebuilt nccl-rdma-sharp plugin whose name has spaces
    (
        "h20x2x2_nccl-tests-321_rdma_plugin_pxn_roce.txt",
        "NCCL RDMA Plugin v6",
        "ib",
        True,
        ["P2P/CUMEM"],
        4,
        2,
        2,
        "2.26.5",
    ),
    ("roce_nccl-tests-373_ibext_v8_merged_nics.txt", "IBext_v8", "ib", False, [], None, 3, 4, None),
    ("h200x4x2_nccl-2345_mixed_gdr_rails.txt", None, "ib", True, [], None, 2, 0, None),
    (
        "gtx1080_pytorch-22531_nccl-2.4.2_socket_no_verbs_cut.txt",
        None,
        "socket",
        False,
        [],
        1,
        None,
        0,
        "2.4.2",
    ),
    (
        "v100x8x2_nccl-392_nccl-2.5.7_hostless_roce_shm_cut.txt",
        None,
        "ib",
        False,
        ["P2P/IPC", "SHM/direct"],
        2,
        None,
        1,
        "2.5.7",
    ),
    ("h800_nccl-1814_ibext_v8_completion_error_cut.txt", None, "ib", False, [], 16, None, 0, None),
    ("h100_nccl-tests-185_roce_ibv_modify_qp_cut.txt", "IB", None, None, [], None, None, 2, "2.19.3"),
    ("gb200_nccl-1925_nccl-2.28_assigned_net_plugin_cut.txt", "IB", None, None, [], None, None, 1, None),
    (
        "h100x8_nccl-952_angle_bracket_host_socket_fallback_cut.txt",
        None,
        "socket",
        False,
        ["P2P/IPC"],
        None,
        None,
        0,
        None,
    ),
    (
        "aws_nccl-226_nccl-2.4.7_socket_no_ib_device_cut.txt",
        None,
        "socket",
        False,
        [],
        None,
        None,
        0,
        "2.4.7",
    ),
    ("p4d_nccl-520_pdsh_prefix_ring_no_loopback_cut.txt", None, None, None, [], None, None, 0, None),
    (
        "a100_nccl-577_srun_prefix_ring_no_loopback_torch_version.txt",
        None,
        None,
        None,
        [],
        None,
        None,
        0,
        None,
    ),
    (
        "h20_nccl-1713_mpirun_gdrdma_shared_merged_row_cut.txt",
        None,
        "ib",
        True,
        ["P2P/CUMEM"],
        None,
        None,
        0,
        None,
    ),
    (
        "a100x8x2_nccl-tests-188_ib_disabled_on_purpose_cut.txt",
        "Socket",
        "socket",
        False,
        ["P2P/IPC"],
        None,
        None,
        0,
        "2.18.1",
    ),
    ("h200x8_gcp-gib-doc_spaced_device_brackets.txt", "gIB", None, None, [], None, None, 0, None),
    (
        "gpux2_nccl-1358_single_node_p2p_direct_pointer_cut.txt",
        None,
        None,
        None,
        ["P2P/direct pointer"],
        2,
        1,
        0,
        None,
    ),
    ("p40_pytorch-14870_nccl-2.3_info_without_nccl_word_cut.txt", "IB", None, None, [], None, None, 1, None),
    ("server_nccl-tests-29_socket_empty_addresses_cut.txt", None, None, None, [], None, None, 2, None),
    ("nccl-1232_rank_prefix_socket_ifname.txt", None, None, None, [], None, None, 0, None),
    (
        "gpux8_nccl-1538_nccl-2.22.3_nvls_ibext_v8_roce_cut.txt",
        "IBext_v8",
        None,
        None,
        ["P2P/CUMEM"],
        None,
        None,
        8,
        None,
    ),
    (
        "v100x8x2_nccl-tests-166_shm_direct_socket_connect_abort_cut.txt",
        None,
        "socket",
        False,
        ["SHM/direct"],
        None,
        None,
        0,
        None,
    ),
    ("h200x8_gpu-recipes-5_network_gib_not_found_cut.txt", None, None, None, [], None, None, 0, None),
    (
        "gpu_nccl-1029_pod_prefix_cuda_failure_ibext_sharp_cut.txt",
        "IBext",
        None,
        None,
        [],
        None,
        None,
        1,
        None,
    ),
]


@pytest.mark.parametrize("name,network,inter,gdr,intra,channels,nnodes,ibdevs,version", CASES)
def test_real_logs(name, network, inter, gdr, intra, channels, nnodes, ibdevs, version):  # noqa: PLR0917
    info = parse(name)
    assert info["network"] == network
    assert info["inter_node"] == inter
    assert info["gdrdma"] is gdr
    assert info["intra_node"] == intra
    assert info["channels"] == channels
    assert info["nnodes"] == nnodes
    assert len(info["ib_devices"]) == ibdevs
    assert info["version"] == version


def test_twohost_socket_details():
    info = parse("h200x1_nccl-2.28.9_twohost_socket_rank0.txt")
    assert info["ib_no_device"] is True
    assert info["socket_interfaces"] == [{"index": 0, "name": "lo", "address": "127.0.0.1"}]
    assert info["connections"] == {"NET/Socket": 4}
    assert info["ring_gdr"] is False and info["nranks"] == 2
    assert info["evidence"]["inter_node"].endswith("[receive] via NET/Socket/0")
    assert info["evidence"]["ib_no_device"].endswith("NET/IB : No device found.")


def test_netns_socket_lines_name_the_veth_and_its_address():
    """Two simulated hosts in network namespaces on the 1x H200 (tests/gpu/fabric_netns.py), NCCL
    on each host's veth eth0 (NCCL_SOCKET_IFNAME=eth0), no IB device, the GPU not usable for RDMA."""
    for rank, address in ((0, "10.250.0.13"), (1, "10.250.0.14")):
        info = parse(f"h200x1_nccl-2.28.9_torch-2.11_netns_veth_eth0_shaped_rank{rank}.txt")
        assert info["socket_interfaces"] == [{"index": 0, "name": "eth0", "address": address}]
        assert (info["network"], info["inter_node"], info["gdrdma"], info["ib_no_device"]) == (
            "Socket",
            "socket",
            False,
            True,
        )
        assert info["connections"] == {"NET/Socket": 4} and info["nnodes"] == 2 and info["intra_node"] == []
        assert info["evidence"]["inter_node"].endswith("[receive] via NET/Socket/0")
        # A veth the node's facts list, no HCA up: sockets are no fault there.
        assert ncclinfo.transport_findings(info, facts("h200x1_netns_veth"), host="n3") == []


def test_ib_devices_link_layer_and_sharp():
    roce = parse("roce_nccl-1537_gdr_disabled_peermem_loaded.txt")
    assert [(d["device"], d["link_layer"]) for d in roce["ib_devices"]] == [
        ("mlx5_0", "RoCE"),
        ("mlx5_1", "RoCE"),
    ]
    assert roce["gdr_hca"] == {"mlx5_0": False, "mlx5_1": False}
    sharp = parse("ibext_nccl-988_sharp_plugin.txt")
    assert all(d["sharp"] and d["link_layer"] == "IB" for d in sharp["ib_devices"])
    assert sharp["network_kind"] == "ib"


def test_ofi_provider_and_warning_behind_mpirun_prefix():
    efa = parse("h200x8x2_nccl-1597_ofi_efa_provider.txt")
    assert efa["ofi_provider"] == "efa" and efa["network_kind"] == "ofi"
    aws = parse("efa_aws-ofi-nccl-24_libfabric_mpirun_prefix.txt")
    assert aws["connections"]["NET/AWS Libfabric"] == 3
    assert len(aws["warnings"]) == 1 and "Couldn't open AV" in aws["warnings"][0]
    assert aws["hosts"] == ["ip-172-32-34-121", "ip-172-32-36-209", "ip-172-32-38-1", "ip-172-32-45-165"]


def test_socket_with_ib_up_is_a_finding_quoting_nccl():
    info = parse("h200x1_nccl-2.28.9_twohost_socket_rank0.txt")
    out = ncclinfo.transport_findings(info, facts("ndr8_healthy"), host="n1")
    assert [f["code"] for f in out] == ["nccl_socket_with_ib_up"]
    assert out[0]["message"].startswith("n1: NCCL carried inter-node traffic over TCP sockets")
    assert out[0]["evidence"].endswith("via NET/Socket/0")
    # Without IB on the node (the H200 VM) sockets are the right answer: no finding.
    assert ncclinfo.transport_findings(info, facts("h200vm_virtio_no_ib")) == []
    # Azure's Accelerated Networking VF (mlx5_an0) is up but carries no training traffic: sockets
    # on a VM without InfiniBand are no fallback. With the IB rails of an ND v5 beside it, they are.
    assert ncclinfo.transport_findings(info, facts("azure_an0_only")) == []
    out = ncclinfo.transport_findings(info, facts("azure_ndv5_ib8_an0"))
    assert [f["code"] for f in out] == ["nccl_socket_with_ib_up"]
    assert "mlx5_an0" not in out[0]["message"]


def test_gdr_skipped_with_peermem_loaded():
    info = parse("roce_nccl-1537_gdr_disabled_peermem_loaded.txt")
    out = ncclinfo.transport_findings(info, facts("ndr8_healthy"))
    assert [f["code"] for f in out] == ["nccl_gdr_skipped"]
    assert out[0]["evidence"].endswith("GPU Direct RDMA Disabled for HCA 0 'mlx5_0'")
    # peermem not loaded: the node finding (peermem_missing) says it; no transport finding.
    assert ncclinfo.transport_findings(info, facts("roce2_no_peermem_iommu_dma")) == []
    # GDRDMA used: nothing to say
    assert (
        ncclinfo.transport_findings(parse("a100_nccl-707_gdrdma_channels.txt"), facts("ndr8_healthy")) == []
    )


def test_multi_node_log_without_net_lines_is_an_info_finding():
    text = (LOGS / "h200x1_nccl-2.28.9_twohost_socket_rank0.txt").read_text()
    cut = "\n".join(
        line for line in text.splitlines() if "via NET" not in line and "Using network" not in line
    )
    out = ncclinfo.transport_findings(ncclinfo.parse_nccl_info(cut), facts("h200vm_virtio_no_ib"))
    assert [f["code"] for f in out] == ["nccl_no_network"]


def test_truncated_and_mangled_logs():
    text = (LOGS / "h100x8x2_aks-rdma-infiniband-30_gdrdma_p2p_cumem.txt").read_text()
    # CRLF line ends, a NUL and an invalid byte decoded as U+FFFD, the last line cut mid-word
    mangled = text.replace("\n", "\r\n").replace("[Proxy Progress]", "[Proxy\x00 Progress\ufffd]")[:-40]
    info = ncclinfo.parse_nccl_info(mangled)
    assert info["inter_node"] == "ib" and info["gdrdma"] is True
    assert info["intra_node"] == ["P2P/CUMEM"]
    # the cut "Channel 02/0 : 11" line is not a ring line
    assert info["channels"] is None


def test_no_nccl_line_raises():
    with pytest.raises(ValueError, match="NCCL_DEBUG=INFO"):
        ncclinfo.parse_nccl_info((LOGS / "roce_nccl-1537_lsmod_peermem.txt").read_text())
    with pytest.raises(ValueError, match="expected the text"):
        ncclinfo.parse_nccl_info(None)


def test_lsmod_of_the_same_issue_shows_peermem_loaded():
    # The same issue's lsmod: the module is loaded, which is what makes the GDR skip a finding.
    assert "nvidia_peermem" in nics.parse_modules(
        "\n".join(
            line.split()[0] + " 0 0 - Live 0x0"
            for line in (LOGS / "roce_nccl-1537_lsmod_peermem.txt").read_text().splitlines()
        )
    )


# ---------------------------------------------------------------- shapes of the public captures


def test_plugin_name_with_spaces_pxn_and_roce_link():
    info = parse("h20x2x2_nccl-tests-321_rdma_plugin_pxn_roce.txt")
    # "via NET/NCCL RDMA Plugin v6/0(2)/GDRDMA/Shared": the whole plugin name, PXN's proxy rank
    assert info["connections"] == {"NET/NCCL RDMA Plugin v6": 32, "P2P/CUMEM": 8}
    assert info["inter_node_plugin"] == "NCCL RDMA Plugin v6" and info["network_kind"] == "ib"
    assert info["inter_node_link"] == "RoCE"
    assert info["net_gdr_counts"] == {"gdr": 32, "no_gdr": 0}
    assert info["pxn_proxy_ranks"] == [0, 1, 2, 3]
    assert info["evidence"]["pxn"].endswith("[send] via NET/NCCL RDMA Plugin v6/0(2)/GDRDMA/Shared")
    assert info["net_plugins"]["loaded"] == ["NCCL RDMA Plugin v6"]
    assert info["nranks"] == 4 and info["local_ranks"] == 2 and info["mnnvl"] is False
    assert info["env"]["NCCL_NET_GDR_LEVEL"] == "PIX" and info["env"]["NCCL_PXN_DISABLE"] == "0"


def test_merged_nics_keep_each_port_and_its_virtual_nic():
    info = parse("roce_nccl-tests-373_ibext_v8_merged_nics.txt")
    assert [(d["index"], d["device"], d["vnic"]) for d in info["ib_devices"]] == [
        (0, "mlx5_2", 0),
        (1, "mlx5_3", 0),
        (2, "mlx5_0", 1),
        (3, "mlx5_1", 1),
    ]
    assert info["inter_node_link"] == "RoCE" and info["connections"] == {"NET/IBext_v8": 4}
    assert [f["code"] for f in info["failures"]] == ["socket_type_mismatch"]
    assert info["failures"][0]["line"].endswith(
        "socket.c:446 NCCL WARN socketFinalizeAccept: wrong type 3 != 4"
    )


def test_some_net_connections_without_gdr():
    info = parse("h200x4x2_nccl-2345_mixed_gdr_rails.txt")
    assert info["gdrdma"] is True and info["net_gdr_counts"] == {"gdr": 2, "no_gdr": 2}
    assert info["evidence"]["net_without_gdr"].endswith("[receive] via NET/IB/1")
    assert info["nranks"] == 8 and info["local_ranks"] == 4 and info["inter_node_link"] is None


def test_older_nccl_formats():
    # 2.4.2: "Channel 00 :    0   1" without /NN, the socket transport's GDR line names no HCA
    old = parse("gtx1080_pytorch-22531_nccl-2.4.2_socket_no_verbs_cut.txt")
    assert old["channels"] == 1 and old["gdr_hca"] == {} and old["nranks"] == 2
    assert [f["code"] for f in old["failures"]] == ["ibverbs_missing"]
    # 2.5.7 pasted without host:pid:tid, "via direct shared memory", cut at "[0] NCCL INFO Rin"
    bare = parse("v100x8x2_nccl-392_nccl-2.5.7_hostless_roce_shm_cut.txt")
    assert bare["hosts"] == [] and bare["lines"] == 18
    assert bare["connections"] == {"NET/IB": 2, "P2P/IPC": 2, "SHM/direct": 1}
    assert bare["env"] == {"NCCL_IB_DISABLE": "0", "NCCL_IB_GID_INDEX": "3"}
    # 2.3: "INFO" without "NCCL", one "NET/IB: [0] mlx4_0:2/RoCE" per line, "Using internal Network IB"
    v23 = parse("p40_pytorch-14870_nccl-2.3_info_without_nccl_word_cut.txt")
    assert [(d["device"], d["port"], d["link_layer"]) for d in v23["ib_devices"]] == [("mlx4_0", 2, "RoCE")]
    assert v23["network"] == "IB" and v23["nranks"] == 8
    # 2.4.7 on AWS: no IB device, sockets between 20+ hosts
    aws = parse("aws_nccl-226_nccl-2.4.7_socket_no_ib_device_cut.txt")
    assert aws["ib_no_device"] is True and aws["connections"] == {"NET/Socket": 15}
    assert {s["name"] for s in aws["socket_interfaces"]} == {"ens3"}


def test_nccl_2_28_plugin_lines_and_environment():
    info = parse("gb200_nccl-1925_nccl-2.28_assigned_net_plugin_cut.txt")
    assert info["net_plugins"] == {"initialized": ["IB"], "failed": [], "assigned": ["IB"], "loaded": []}
    assert info["env"] == {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5_0"}
    assert info["nranks"] == 8 and info["hosts"] == [
        "nccl-sleep-c7d759db6-2bp29",
        "nccl-sleep-c7d759db6-cgz82",
    ]
    # our own 2.28.9 capture: IB failed, sockets took over
    ours = parse("h200x1_nccl-2.28.9_twohost_socket_rank0.txt")
    assert ours["net_plugins"]["failed"] == ["IB"] and ours["net_plugins"]["assigned"] == ["Socket"]
    assert ours["env"]["NCCL_SOCKET_IFNAME"] == "lo" and ours["gdr_hca"] == {}


def test_socket_interfaces_with_empty_addresses():
    info = parse("server_nccl-tests-29_socket_empty_addresses_cut.txt")
    assert info["socket_interfaces"] == [
        {"index": 0, "name": "enp41s0f1", "address": ""},
        {"index": 1, "name": "virbr0", "address": ""},
    ]
    assert [d["device"] for d in info["ib_devices"]] == ["mlx5_0", "mlx5_1"]


def test_failure_summaries_in_first_seen_order():
    qp = parse("h100_nccl-tests-185_roce_ibv_modify_qp_cut.txt")
    assert [(f["code"], f["count"]) for f in qp["failures"]] == [
        ("ibverbs_call_failed", 1),
        ("proxy_failed", 2),
        ("peer_closed", 1),
    ]
    assert qp["failures"][0]["line"].endswith(
        "Call to ibv_modify_qp failed with error Network is unreachable"
    )
    cq = parse("h800_nccl-1814_ibext_v8_completion_error_cut.txt")
    assert [(f["code"], f["count"]) for f in cq["failures"]] == [("ib_completion_error", 3)]
    assert cq["nvls_channels"] == 16 and cq["nranks"] == 64
    ring = parse("p4d_nccl-520_pdsh_prefix_ring_no_loopback_cut.txt")
    assert [(f["code"], f["count"]) for f in ring["failures"]] == [("ring_no_loopback", 3)]
    assert ring["hosts"] == ["compute-dy-p4d24xlarge-5"]


def test_more_failure_shapes_and_nvls():
    shm = parse("v100x8x2_nccl-tests-166_shm_direct_socket_connect_abort_cut.txt")
    assert [(f["code"], f["count"]) for f in shm["failures"]] == [
        ("connect_failed", 1),
        ("proxy_failed", 2),
        ("peer_closed", 1),
    ]
    # the last line is cut inside "via NET/Sock": not counted
    assert shm["connections"] == {"SHM/direct": 3, "NET/Socket": 13}
    gib = parse("h200x8_gpu-recipes-5_network_gib_not_found_cut.txt")
    assert [f["code"] for f in gib["failures"]] == ["net_not_found"] and gib["network"] is None
    cuda = parse("gpu_nccl-1029_pod_prefix_cuda_failure_ibext_sharp_cut.txt")
    assert [(f["code"], f["count"]) for f in cuda["failures"]] == [("cuda_failure", 3)]
    assert cuda["hosts"] == ["rdma-test-gpu-worker-0", "rdma-test-gpu-worker-1"]
    assert cuda["ib_devices"][0]["sharp"] is True
    nvls = parse("gpux8_nccl-1538_nccl-2.22.3_nvls_ibext_v8_roce_cut.txt")
    assert nvls["nvls_available"] is True and {d["link_layer"] for d in nvls["ib_devices"]} == {"RoCE"}
    assert parse("h200x1_nccl-2.28.9_twohost_socket_rank0.txt")["nvls_available"] is None


def test_version_only_from_nccls_own_banner():
    # torch's "..., internal error, NCCL version 21.1.4" is not NCCL's banner
    assert parse("a100_nccl-577_srun_prefix_ring_no_loopback_torch_version.txt")["version"] is None
    # the docs page's "NCCL version 2 .23.4+cuda12.2" (a space inside) cannot be read for sure
    assert parse("h200x8_gcp-gib-doc_spaced_device_brackets.txt")["version"] is None
    assert parse("h100_nccl-tests-185_roce_ibv_modify_qp_cut.txt")["version"] == "2.19.3"


def test_launcher_prefixes_and_odd_hosts():
    assert parse("h100x8_nccl-952_angle_bracket_host_socket_fallback_cut.txt")["hosts"] == ["<cluster_name>"]
    # "...  none      -1aiplatform-wlf2-ge78-72:58070:58112 [0] NCCL INFO": a benchmark row glued on
    assert parse("h20_nccl-1713_mpirun_gdrdma_shared_merged_row_cut.txt")["hosts"] == [
        "aiplatform-wlf2-ge78-70",
        "aiplatform-wlf2-ge78-72",
    ]
    ranked = parse("nccl-1232_rank_prefix_socket_ifname.txt")
    assert ranked["hosts"] == ["node0", "node2"] and ranked["env"]["NCCL_SOCKET_IFNAME"] == "en,eth,em,bond"
    gib = parse("h200x8_gcp-gib-doc_spaced_device_brackets.txt")
    assert gib["hosts"] == ["a3ultra-vm-0"] and gib["network_kind"] == "ib" and gib["lines"] == 2
    single = parse("gpux2_nccl-1358_single_node_p2p_direct_pointer_cut.txt")
    assert (
        single["nnodes"] == 1
        and single["inter_node"] is None
        and single["connections"] == {"P2P/direct pointer": 1}
    )


def test_nccls_own_documented_examples():
    info = parse("nccl-docs-2.30_logging_examples_timestamped_warn.txt")
    assert info["version"] == "2.30.3" and info["network"] == "IB" and info["hosts"] == ["node-01"]
    assert info["net_plugins"]["initialized"] == ["IB"] and info["net_plugins"]["assigned"] == ["IB"]
    # the timestamp NCCL >= 2.26 puts before WARN records by default
    assert info["warnings"] == [
        "node-01:189884:189884 [3] plugin/net.cc:334 NCCL WARN Failed to initialize any NET plugin"
    ]
    assert [f["code"] for f in info["failures"]] == ["net_init_failed"]


def test_records_joined_on_one_line_and_timestamps():
    text = (LOGS / "h100_nccl-tests-185_roce_ibv_modify_qp_cut.txt").read_text()
    # a collector that joined every line with a space (newlines lost)
    joined = ncclinfo.parse_nccl_info(" ".join(text.splitlines()))
    assert [f["code"] for f in joined["failures"]] == ["ibverbs_call_failed", "proxy_failed", "peer_closed"]
    assert len(joined["ib_devices"]) == 2 and joined["network"] == "IB"
    # NCCL_DEBUG_TIMESTAMP_LEVELS=ALL with the default format "[%F %T] " before every record
    stamped = ncclinfo.parse_nccl_info(
        "\n".join(f"[2025-06-13 12:00:0{n % 10}] {line}" for n, line in enumerate(text.splitlines()))
    )
    assert stamped["failures"] == parse("h100_nccl-tests-185_roce_ibv_modify_qp_cut.txt")["failures"]
    assert stamped["hosts"] == ["dgxh100-3", "dgxh100-4"]
    # torchrun --tee's "[default0]:" before each line of our own two-host capture
    ours = (LOGS / "h200x1_nccl-2.28.9_twohost_socket_rank0.txt").read_text()
    tagged = ncclinfo.parse_nccl_info("\n".join(f"[default0]:{line}" for line in ours.splitlines()))
    plain = ncclinfo.parse_nccl_info(ours)
    assert {k: tagged[k] for k in ("hosts", "connections", "env", "nnodes", "lines")} == {
        k: plain[k] for k in ("hosts", "connections", "env", "nnodes", "lines")
    }


def test_a_long_line_without_a_record_is_read_in_linear_time():
    # 100 kB of output without a colon (an attachment's base64, a collector's joined blob) before a
    # record: a host pattern tried at every position made this quadratic (about 50 s before)
    blob = "QUJD" * 25_000
    text = (LOGS / "h100_nccl-tests-185_roce_ibv_modify_qp_cut.txt").read_text()
    began = time.perf_counter()
    info = ncclinfo.parse_nccl_info(blob + " " + text.replace("\n", "\n" + blob + " ", 3))
    assert time.perf_counter() - began < 2.0
    assert info["network"] == "IB" and info["version"] == "2.19.3" and len(info["ib_devices"]) == 2


def test_several_communicators_in_one_log_keep_the_widest():
    text = (LOGS / "h200x1_nccl-2.28.9_twohost_socket_rank0.txt").read_text()
    text += (LOGS / "gpux2_nccl-1358_single_node_p2p_direct_pointer_cut.txt").read_text()
    info = ncclinfo.parse_nccl_info(text)
    assert info["nnodes"] == 2 and info["nranks"] == 2 and info["inter_node"] == "socket"


# ---------------------------------------------------------------- transport findings


def codes(findings):
    return [(f["code"], f["severity"]) for f in findings]


def test_ib_disabled_on_purpose_is_a_warning_not_a_fault():
    info = parse("a100x8x2_nccl-tests-188_ib_disabled_on_purpose_cut.txt")
    out = ncclinfo.transport_findings(info, facts("ndr8_healthy"), host="user")
    assert codes(out) == [("nccl_ib_disabled", "warning")]
    assert out[0]["message"].startswith("user: NCCL_IB_DISABLE=1 in the job's environment")
    assert out[0]["evidence"].endswith("NCCL INFO NCCL_IB_DISABLE set by environment to 1.")
    # the same log without the environment line: nothing says it was asked for
    text = (LOGS / "a100x8x2_nccl-tests-188_ib_disabled_on_purpose_cut.txt").read_text()
    unasked = ncclinfo.parse_nccl_info(
        "\n".join(line for line in text.splitlines() if "NCCL_IB_DISABLE" not in line)
    )
    assert codes(ncclinfo.transport_findings(unasked, facts("ndr8_healthy"))) == [
        ("nccl_socket_with_ib_up", "critical")
    ]


def test_single_node_communicator_without_ib_device_is_not_a_socket_fault():
    info = parse("h200x1_nccl-2.28.9_one_rank_all_reduce.txt")
    out = ncclinfo.transport_findings(info, facts("ndr8_healthy"))
    assert codes(out) == [("nccl_ib_not_found", "warning")]
    assert "single-node communicator" in out[0]["message"]
    assert out[0]["evidence"].endswith("NET/IB : No device found.")
    assert ncclinfo.transport_findings(info, facts("h200vm_virtio_no_ib")) == []


def test_socket_fallback_names_the_missing_libibverbs():
    info = parse("gtx1080_pytorch-22531_nccl-2.4.2_socket_no_verbs_cut.txt")
    out = ncclinfo.transport_findings(info, facts("ndr8_healthy"))
    assert codes(out) == [("nccl_socket_with_ib_up", "critical"), ("nccl_failure", "warning")]
    assert "could not open libibverbs" in out[0]["message"]
    assert out[0]["evidence"].endswith("[receive] via NET/Socket/0")
    assert out[1]["failure"] == "ibverbs_missing" and out[1]["evidence"].endswith("libibverbs.so[.1]")


def test_a_net_plugin_other_than_sockets_is_not_a_socket_fallback():
    # aws-ofi-nccl carried the traffic; NCCL's own IB transport finding no device does not matter
    text = (LOGS / "efa_aws-ofi-nccl-24_libfabric_mpirun_prefix.txt").read_text()
    text = "[1,7]<stdout>:ip-172-32-38-1:21471:21471 [7] NCCL INFO NET/IB : No device found.\n" + text
    info = ncclinfo.parse_nccl_info(text)
    assert info["ib_no_device"] is True and info["inter_node"] == "ofi"
    assert [f["code"] for f in ncclinfo.transport_findings(info, facts("ndr8_healthy"))] == ["nccl_failure"]


def test_gdr_findings_follow_the_communicator_and_the_environment():
    roce = parse("v100x8x2_nccl-392_nccl-2.5.7_hostless_roce_shm_cut.txt")
    out = ncclinfo.transport_findings(roce, facts("ndr8_healthy"))
    assert codes(out) == [("nccl_gdr_skipped", "warning")]
    assert "NCCL used NET/IB over RoCE without GPUDirect RDMA" in out[0]["message"]
    assert out[0]["evidence"] == "[0] NCCL INFO Ring 00 : 15[41000] -> 0[1b000] [receive] via NET/IB/0"
    text = (LOGS / "roce_nccl-1537_gdr_disabled_peermem_loaded.txt").read_text()
    # the same GDR-disabled HCAs in a communicator that stays on one node: no NET traffic at all
    single = text + (
        "hostname1:25668:27396 [0] NCCL INFO comm 0x55cc8aa86c70 rank 0 nRanks 8 nNodes 1 localRanks 8 "
        "localRank 0 MNNVL 0\n"
    )
    assert ncclinfo.transport_findings(ncclinfo.parse_nccl_info(single), facts("ndr8_healthy")) == []
    # GDR off by request
    loc = "hostname1:25668:27396 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC\n" + text
    out = ncclinfo.transport_findings(ncclinfo.parse_nccl_info(loc), facts("ndr8_healthy"))
    assert codes(out) == [("nccl_gdr_disabled_by_env", "info")]
    assert out[0]["evidence"].endswith("NCCL_NET_GDR_LEVEL set by environment to LOC")
    # GDR on every NET connection (PXN included): nothing to say, whatever NCCL_NET_GDR_LEVEL is
    assert (
        ncclinfo.transport_findings(
            parse("h20x2x2_nccl-tests-321_rdma_plugin_pxn_roce.txt"), facts("ndr8_healthy")
        )
        == []
    )


def test_failures_become_findings_quoting_the_first_line():
    out = ncclinfo.transport_findings(
        parse("h800_nccl-1814_ibext_v8_completion_error_cut.txt"), facts("ndr8_healthy"), host="n7"
    )
    fails = [f for f in out if f["code"] == "nccl_failure"]
    assert [(f["failure"], f["severity"]) for f in fails] == [("ib_completion_error", "warning")]
    assert (
        fails[0]["message"].startswith("n7: NCCL WARN: an RDMA work request failed")
        and "(3 times)" in fails[0]["message"]
    )
    assert fails[0]["evidence"].startswith(
        "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion"
    )


# Ours: tests/gpu/capture.sh on the 1x H200 (two torch ranks on one GPU, distinct NCCL_HOSTID).
def _ours(name, rank=0):
    return parse(f"h200x1_nccl-2.28.9_torch-2.11_{name}_rank{rank}.txt")


@pytest.mark.parametrize(
    ("name", "code", "fragment"),
    [
        ("net_ib_forced_no_ib", "net_init_failed", "Failed to initialize any NET plugin"),
        ("net_ib_forced_warn_level", "net_init_failed", "Failed to initialize any NET plugin"),
        ("socket_ifname_missing", "no_socket_interface", "Bootstrap : no socket interface found"),
        ("peer_killed_mid_run", "peer_closed", "socketProgress: Connection closed by remote peer"),
        ("one_host_same_gpu", "duplicate_gpu", "Duplicate GPU detected : rank 0 and rank 1"),
    ],
)
def test_our_failed_runs_name_their_failure(name, code, fragment):
    info = _ours(name)
    assert [f["code"] for f in info["failures"]] == [code]
    assert fragment in info["failures"][0]["line"]
    out = ncclinfo.transport_findings(info, facts("h200vm_virtio_no_ib"), host="n1")
    assert [(f["severity"], f["code"]) for f in out] == [("warning", "nccl_failure")]
    assert fragment in out[0]["evidence"]


def test_our_failed_runs_details():
    forced = _ours("net_ib_forced_no_ib")
    assert forced["version"] == "2.28.9" and forced["ib_no_device"] is True
    assert forced["net_plugins"]["failed"] == ["IB"] and forced["inter_node"] is None
    # Killed before the banner: no version, no network, only the failure.
    missing = _ours("socket_ifname_missing")
    assert missing["version"] is None and missing["env"] == {"NCCL_SOCKET_IFNAME": "wfabmissing0"}
    # The killed rank's partner saw the transport before the failure; the killed rank itself has
    # no failure line (it exited on purpose).
    killed = _ours("peer_killed_mid_run")
    assert (killed["inter_node"], killed["nnodes"], killed["failures"][0]["count"]) == ("socket", 2, 2)
    assert _ours("peer_killed_mid_run", rank=1)["failures"] == []


def test_our_healthy_socket_variants():
    for name in ("socket_lo_ib_disabled", "socket_lo_subsys_all", "socket_nsocks4_nthreads2"):
        info = _ours(name)
        assert (info["inter_node"], info["nnodes"], info["failures"]) == ("socket", 2, []), name
        assert info["socket_interfaces"] == [{"index": 0, "name": "lo", "address": "127.0.0.1"}]
    assert _ours("socket_lo_subsys_all")["lines"] > 150
    assert _ours("socket_nsocks4_nthreads2")["env"]["NCCL_NSOCKS_PERTHREAD"] == "4"
    # IB disabled on purpose, beside active IB rails: a warning that says so, not a critical fallback.
    info = _ours("socket_lo_ib_disabled")
    out = ncclinfo.transport_findings(info, facts("ndr8_healthy"), host="n1")
    assert [(f["severity"], f["code"]) for f in out] == [("warning", "nccl_ib_disabled")]
    assert "NCCL_IB_DISABLE=1" in out[0]["message"]


def test_our_nccl_tests_two_host_logs_tell_the_transport():
    # nccl-tests under mpirun (plain and --tag-output), two hosts by hostname and NCCL_HOSTID.
    for name in (
        "h200x1_v2.19.6_mpirun_two_hosts_socket_all_reduce_nccl_info.txt",
        "h200x1_v2.19.6_mpirun_tag_output_two_hosts_socket_all_gather_nccl_info.txt",
    ):
        text = (FIXTURES / "nccltests" / name).read_text()
        info = ncclinfo.parse_nccl_info(text)
        assert (info["inter_node"], info["nnodes"], info["hosts"]) == (
            "socket",
            2,
            ["wireup-cap-0", "wireup-cap-1"],
        )
        assert info["connections"]["NET/Socket"] >= 4 and info["failures"] == []
