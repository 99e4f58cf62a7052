"""wireup.ncclinfo on real NCCL INFO logs: today's H200 captures (NET/Socket between two ranks
with distinct NCCL_HOSTID, one rank alone) and logs pasted into public issues (NET/IB with and
without GDRDMA, RoCE, the IBext SHARP plugin, aws-ofi-nccl for EFA, P2P/CUMEM and P2P/IPC)."""

import pathlib

import pytest

from wireup import fabric, ncclinfo

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "ncclinfo"
SYSFS = FIXTURES / "sysfs"


def parse(name):
    return ncclinfo.parse_nccl_info((LOGS / name).read_text(encoding="utf-8", errors="replace"))


def facts(name):
    return fabric.parse_nic_facts(fabric.read_tree(str(SYSFS / name)))


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
    assert "nvidia_peermem" in fabric.parse_modules(
        "\n".join(
            line.split()[0] + " 0 0 - Live 0x0"
            for line in (LOGS / "roce_nccl-1537_lsmod_peermem.txt").read_text().splitlines()
        )
    )
