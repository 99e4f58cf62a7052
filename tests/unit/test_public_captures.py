"""Every real output pasted into a public issue (tests/fixtures/public, sources in its README) runs
through the parser it belongs to, and the structure wireup reads from it is checked: GPU count, link
classes, NIC columns, affinity cells in their own columns, rows, sizes, busbw at the largest size,
and FAIL with the cause quoted for runs that failed."""

import contextlib
import pathlib
import re

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import bandwidth
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import (
    bench_output,
    health,
    nvlink,
    topology,
)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
PUB = FIXTURES / "public"


def read(name):
    return (PUB / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- nvidia-smi topo -m
# name: (GPUs, link classes best first, NIC columns, (cpu, numa, gpu numa id) per GPU)
TOPO_M = {
    "rtx4090x8_go-gpuallocator-17_topo_m.txt": (
        8,
        ["SYS"],
        ["NIC0", "NIC1"],
        [("0-55,112-167", "0", None)] * 4 + [("56-111,168-223", "1", None)] * 4,
    ),
    "v100x8_nccl-tests-37_topo_m.txt": (8, ["NV2", "NV1", "SYS"], [], [("0-95", None, None)] * 8),
    "rtx5090x2_club-3090-1229_topo_m.txt": (2, ["PHB"], [], [("0-63", "0", None)] * 2),
    "l4x2_cuda-samples-284_topo_m.txt": (
        2,
        ["SYS"],
        [],
        [("0-7,32-39", "0", None), ("16-23,48-55", "2", None)],
    ),
    "gpux5_open-gpu-kernel-modules-13_topo_m.txt": (5, ["PHB", "NODE"], [], [("0-63", "0", None)] * 5),
    "gpux4_open-gpu-kernel-modules-1_topo_m.txt": (4, ["PHB"], [], [("0-15", "0", None)] * 4),
    "rtx5070x2_open-gpu-kernel-modules-12_topo_m_prompt.txt": (2, ["PHB"], [], [("0-23", "0", None)] * 2),
    "h100x4_nccl-1617_topo_m.txt": (
        4,
        ["NV6"],
        ["NIC0", "NIC1", "NIC2", "NIC3"],
        [
            ("6,14,22,30", "3", None),
            ("4,12,20,28", "1", None),
            ("7,15,23,31", "7", None),
            ("5,13,21,29", "5", None),
        ],
    ),
    "gpux2_club-3090-1125_topo_m_collapsed.txt": (2, ["NODE"], [], [("0-15", "0", None)] * 2),
    "rtx6000adax4_stelline-esc8000a-e12_topo_m.txt": (
        4,
        ["NODE", "SYS"],
        ["NIC0", "NIC1", "NIC2", "NIC3"],
        [("0-31", "0", None)] * 2 + [("32-63", "1", None)] * 2,
    ),
    "gpux2_p100_gearshifft-82_topo_m_soc.txt": (2, ["SOC"], [], [("0-5", None, None), ("6-11", None, None)]),
    "a100x4_nccl-tests-331_topo_m_nv4.txt": (
        4,
        ["NV4"],
        ["NIC0", "NIC1", "NIC2", "NIC3"],
        [("0", "0-1", None)] * 4,
    ),
    "rtx3090x4_open-gpu-kernel-modules-18_topo_m_nvlink_pairs.txt": (
        4,
        ["NV4", "PHB", "NODE"],
        [],
        [("0-23", "0", None)] * 4,
    ),
    "h100x8_nccl-1264_topo_m_cut.txt": (
        8,
        ["NV18"],
        [f"NIC{i}" for i in range(10)],
        [("0-55,112-167", "0", None)] * 4 + [("56-111,168-223", "1", None)] * 4,
    ),
    "gpux6_nccl-243_topo_m_mlx5_columns.txt": (
        6,
        ["PIX", "NODE", "SYS"],
        ["mlx5_1", "mlx5_0"],
        [("0-13,28-41", None, None)] * 3 + [("14-27,42-55", None, None)] * 3,
    ),
    "h100x8_nccl-1453_topo_m_nic0_far_cut.txt": (
        8,
        ["NV18"],
        [f"NIC{i}" for i in range(9)],
        [("0-79", "0", None)] * 4 + [("80-159", "1", None)] * 4,
    ),
    "h100x8_nvshmem-52_topo_m_4nics_cut.txt": (
        8,
        ["NV18"],
        [f"NIC{i}" for i in range(4)],
        [("0-47,96-143", "0", None)] * 4 + [("48-95,144-191", "1", None)] * 4,
    ),
}


@pytest.mark.parametrize("name", sorted(TOPO_M))
def test_topo_m_capture(name):
    gpus, classes, nics, affinity = TOPO_M[name]
    topo = topology.parse_topo_matrix(read(name))
    assert len(topo["gpus"]) == gpus
    assert topo["link_classes"] == classes
    assert [n["name"] for n in topo["nics"]] == nics
    assert [(g["cpu_affinity"], g["numa_affinity"], g["gpu_numa_id"]) for g in topo["gpus"]] == affinity
    assert len(topo["links"]) == gpus * (gpus - 1) // 2


def test_nics_nearest_each_gpu_on_a_4x_h100_with_a_rail_per_gpu():
    # Real: github.com/NVIDIA/nccl/issues/1617, 4x H100 NV6, one PIX NIC per GPU, space-aligned.
    topo = topology.parse_topo_matrix(read("h100x4_nccl-1617_topo_m.txt"))
    assert [g["nearest_nics"] for g in topo["gpus"]] == [["NIC0"], ["NIC1"], ["NIC2"], ["NIC3"]]
    assert topo["matrix"]["NIC3"]["GPU3"] == "PIX" and topo["matrix"]["NIC0"]["NIC1"] == "SYS"
    assert {link["nvlinks"] for link in topo["links"]} == {6}


def test_nic_rows_without_affinity_cells_keep_the_gpu_columns():
    # Real: github.com/NVIDIA/go-gpuallocator/issues/17, NIC rows end after the matrix.
    topo = topology.parse_topo_matrix(read("rtx4090x8_go-gpuallocator-17_topo_m.txt"))
    assert topo["gpus"][6]["nearest_nics"] == ["NIC0", "NIC1"]
    assert topo["matrix"]["NIC1"]["GPU6"] == "PHB" and topo["matrix"]["NIC1"]["NIC0"] == "PIX"


def test_one_space_between_cells_is_a_separator():
    # Real: github.com/noonghunna/club-3090/issues/1125 pasted "GPU0 GPU1" and "GPU1 NODE" with one
    # space (a web page collapsed the tabs); tab expansion does the same after `mlx5_10`.
    topo = topology.parse_topo_matrix(read("gpux2_club-3090-1125_topo_m_collapsed.txt"))
    assert topo["matrix"] == {"GPU0": {"GPU0": "X", "GPU1": "NODE"}, "GPU1": {"GPU0": "NODE", "GPU1": "X"}}
    assert "NODE" in topo["legend"]
    header = "        GPU0    GPU1    mlx5_10 mlx5_11 CPU Affinity\n"
    rows = (
        "GPU0     X      NV12    PXB     PXB     0-47\n"
        "GPU1    NV12     X      SYS     SYS     48-95\n"
        "mlx5_10 PXB     SYS      X      PIX\n"
        "mlx5_11 PXB     SYS     PIX      X \n"
    )
    topo = topology.parse_topo_matrix(header + rows)
    assert [n["device"] for n in topo["nics"]] == ["mlx5_10", "mlx5_11"]
    assert topo["gpus"][1]["cpu_affinity"] == "48-95"


def test_prompt_on_the_header_line_and_a_legend_without_its_title():
    # Real: github.com/aikitoria/open-gpu-kernel-modules/issues/12 (the prompt line and the header
    # were pasted as one line; only the PHB legend line kept, without "Legend:").
    topo = topology.parse_topo_matrix(read("rtx5070x2_open-gpu-kernel-modules-12_topo_m_prompt.txt"))
    assert topo["links"] == [{"a": "GPU0", "b": "GPU1", "class": "PHB", "kind": "pcie", "nvlinks": 0}]
    assert list(topo["legend"]) == ["PHB"]


def test_nic_legend_names_the_devices_of_a_two_socket_pcie_box():
    # Real: luigifcruz/stelline docs (ASUS ESC8000A-E12, 4x RTX 6000 Ada, two dual-port NICs).
    topo = topology.parse_topo_matrix(read("rtx6000adax4_stelline-esc8000a-e12_topo_m.txt"))
    assert [n["device"] for n in topo["nics"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [g["nearest_nics"] for g in topo["gpus"]] == [["NIC0", "NIC1"]] * 2 + [["NIC2", "NIC3"]] * 2
    assert (topo["best_link"], topo["worst_link"]) == ("NODE", "SYS")


def test_nvlink_pairs_over_pcie_are_judged_on_the_pcie_path():
    # Real: aikitoria/open-gpu-kernel-modules#18 (driver 595.58.03): 4x RTX 3090, two NVLinked pairs
    # (NV4) that reach each other over PHB and NODE. The PCIe gen/width and the NVLink speed below are
    # set for the test (the paste has no --query-gpu or nvlink -s).
    topo = topology.build_topology(
        topo_m=read("rtx3090x4_open-gpu-kernel-modules-18_topo_m_nvlink_pairs.txt")
    )
    for gpu in topo["gpus"]:
        gpu["pcie"] = {"gen_max": 4, "width_max": 16}
        gpu["nvlink"] = {"speed_gbps": 14.062}
    link = bandwidth.bottleneck(topo, "all_reduce")
    assert (link["class"], link["kind"], link["gbps"], link["pair"]) == (
        "NODE",
        "host",
        31.504,
        ["GPU0", "GPU3"],
    )
    expected = bandwidth.expected_busbw(topo, "all_reduce")
    assert expected["expected_busbw"] == 15.75 and expected["link_class"] == "NODE"


def test_rows_of_a_cut_matrix_keep_every_gpu_and_nic_column():
    # Real: github.com/NVIDIA/nccl/issues/1264, 8x H100 (driver 550.54.15), 10 NICs, tab-separated;
    # the paste was cut after the NIC2 row. NIC rows end in four empty affinity cells.
    topo = topology.parse_topo_matrix(read("h100x8_nccl-1264_topo_m_cut.txt"))
    assert [g["nearest_nics"] for g in topo["gpus"]] == [
        [n] for n in ("NIC0", "NIC1", "NIC2", "NIC5", "NIC6", "NIC7", "NIC8", "NIC9")
    ]
    assert sorted(topo["matrix"]) == [f"GPU{i}" for i in range(8)] + ["NIC0", "NIC1", "NIC2"]
    assert topo["matrix"]["NIC2"]["GPU2"] == "PIX"


def test_soc_the_old_name_of_sys_is_a_host_link():
    # Real: mpicbg-scicomp/gearshifft#82 (2017): a P100 and another GPU on two sockets, "SOC".
    topo = topology.parse_topo_matrix(read("gpux2_p100_gearshifft-82_topo_m_soc.txt"))
    gpu = {"pcie": {"gen_max": 3, "width_max": 16}}
    speed = bandwidth.link_speed(topo["links"][0]["class"], gpu, gpu)
    assert (speed["kind"], speed["gbps"]) == ("host", 15.76)
    assert topology.rank_link_classes(["SOC", "PHB"]) == ["PHB", "SOC"]


# ---------------------------------------------------------------- nvidia-smi --query-gpu
@pytest.mark.parametrize(
    ("name", "header", "missing"),
    [
        (
            "gpu2gb_i3pystatus-776_query_gpu_noheader_na.txt",
            "memory.total [MiB], memory.free [MiB], memory.used [MiB], temperature.gpu, fan.speed [%], "
            "utilization.gpu [%], utilization.memory [%]",
            "fan.speed",
        ),
        (
            "gpu2gb_i3pystatus-776_query_gpu_noheader_not_supported.txt",
            "memory.total [MiB], memory.free [MiB], memory.used [MiB], temperature.gpu, fan.speed [%], "
            "utilization.gpu [%], utilization.memory [%]",
            "fan.speed",
        ),
        (
            "gb10_llama-swap-782_query_gpu_memory_na.txt",
            "memory.used [MiB], memory.total [MiB], utilization.memory [%]",
            "memory.total",
        ),
    ],
)
def test_query_gpu_values_without_header_are_refused_and_missing_cells_are_none(name, header, missing):
    # The value lines are real (csv,noheader); wireup asks for the header, so a header-less output is
    # refused with the fix. The header added here is the one nvidia-smi prints for those fields.
    with pytest.raises(ValueError, match=r"not csv,noheader"):
        topology.parse_query_gpu_csv(read(name))
    row = topology.parse_query_gpu_csv(header + "\n" + read(name))[0]
    assert row[missing] is None
    assert [v for v in row.values() if v is not None] and all(
        isinstance(v, int) for v in row.values() if v is not None
    )


# ---------------------------------------------------------------- nvidia-smi topo -p2p
# name: (pairs, statuses that are not OK)
TOPO_P2P = {
    "gpux5_open-gpu-kernel-modules-13_topo_p2p_p.txt": (10, []),
    "rtx5090x2_club-3090-1229_topo_p2p_rw.txt": (1, ["GNS"]),
    "rtx5090x2_club-3090-1130_topo_p2p_rw.txt": (1, ["GNS"]),
    "gpux2_club-3090-1125_topo_p2p_collapsed.txt": (1, ["NS"]),
}


@pytest.mark.parametrize("name", sorted(TOPO_P2P))
def test_topo_p2p_capture(name):
    pairs, bad = TOPO_P2P[name]
    p2p = topology.parse_topo_p2p(read(name))
    assert len(p2p["pairs"]) == pairs
    assert [p["status"] for p in p2p["not_ok"]] == bad
    assert p2p["all_ok"] is (not bad)


# ---------------------------------------------------------------- nvidia-smi nvlink -s
def test_v100_inactive_links_of_a_pasted_gpu():
    # Real: github.com/Azure/azhpc-diagnostics/issues/73, GPU 3 of a V100 node, UUID elided.
    out = nvlink.parse_nvlink_status(read("v100_azhpc-diagnostics-73_nvlink_s_inactive.txt"))
    gpu = out["gpus"][0]
    assert (gpu["index"], gpu["active"], gpu["inactive_links"], gpu["speed_gbps"]) == (3, 4, [3, 5], 25.781)
    assert out["totals"]["per_gpu_gbps"] == 103.124


def test_a_gpu_whose_links_nvml_cannot_list_is_complete_not_cut_off():
    # Real: siboehm/bench gpu/nvlink/README.md: 3x RTX A6000, GPUs 0-1 bridged (4 x 14.062 GB/s),
    # GPU 2 followed by NVML's "Unable to retrieve NVLink information as all links are inActive".
    out = nvlink.parse_nvlink_status(read("rtxa6000x3_siboehm-bench_nvlink_s_all_inactive_note.txt"), 3)
    assert [(g["index"], g["active"], g["total_gbps"]) for g in out["gpus"]] == [
        (0, 4, 56.248),
        (1, 4, 56.248),
        (2, 0, 0),
    ]
    assert out["gpus"][2]["all_inactive_note"] is True
    assert (out["totals"]["gpus_with_nvlink"], out["totals"]["per_link_gbps"]) == (2, 14.062)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "a100sxm4_nccl-tests-228_nvlink_s_cut.txt",
            "GPU 2 lists 1 links, other NVIDIA A100-SXM4-80GB GPUs 12",
        ),
        ("gb200_k8s-test-infra-371_nvlink_s_cut.txt", "GPU 1 lists 2 links, other NVIDIA GB200 GPUs 18"),
    ],
)
def test_nvlink_pastes_cut_with_dots_are_cut_off_not_missing_links(name, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        nvlink.parse_nvlink_status(read(name))
    # The complete GPUs before the cut carry the whole-number (25) and 53.125 GB/s speeds.
    first = "\n".join(read(name).splitlines()[: (13 if "a100" in name else 19)])
    gpu = nvlink.parse_nvlink_status(first)["gpus"][0]
    assert (gpu["active"], gpu["speed_gbps"]) == ((12, 25.0) if "a100" in name else (18, 53.125))


def test_a_b200_whose_links_are_all_down_lists_none_and_a_single_gpu_paste_is_short():
    # Real: leptonai/gpud#1085, GPU 2 of a B200 node: NVML's all-inactive line instead of 18 links.
    out = nvlink.parse_nvlink_status(read("b200_gpud-1085_nvlink_s_all_inactive.txt"))
    gpu = out["gpus"][0]
    assert (gpu["index"], gpu["name"], gpu["active"], gpu["all_inactive_note"]) == (2, "NVIDIA B200", 0, True)
    assert (out["totals"]["gpus_with_nvlink"], out["totals"]["per_link_gbps"]) == (0, None)
    # The paste holds one GPU of the node: with the node's count it is a cut-off output.
    with pytest.raises(ValueError, match=re.escape("lists 1 GPU(s) but the node has 8")):
        nvlink.parse_nvlink_status(read("b200_gpud-1085_nvlink_s_all_inactive.txt"), 8)


def test_nvidia_smi_failing_to_start_is_quoted_not_a_missing_gpu_line():
    # Real: tinygrad/open-gpu-kernel-modules#47 (driver 570.124), NVML's version-mismatch message.
    with pytest.raises(ValueError) as err:
        nvlink.parse_nvlink_status(read("gpu_open-gpu-kernel-modules-47_nvml_version_mismatch.txt"))
    assert (
        "'Failed to initialize NVML: Driver/library version mismatch' / 'NVML library version: 570.124'"
        in str(err.value)
    )


# ---------------------------------------------------------------- nccl-tests, runs with rows
# name: (collective for the verdict, rows, largest size, judged busbw there, devices, complete, problems)
RUNS = {
    "gb200nvl72_coreweave-nccl-tests-43_all_reduce.txt": ("all_reduce", 5, 8589934592, 846.82, 1, True, []),
    "p5x2_awsome-distributed-training_mpijob_tag_output_indented.txt": (
        "all_reduce",
        7,
        2147483648,
        437.89,
        0,
        True,
        [],
    ),
    "p5x2_awsome-distributed-training_srun_label_all_reduce.txt": (
        "all_reduce",
        32,
        17179869184,
        487.26,
        0,
        False,
        ["output stops mid-table after the 17179869184 B row: no 'Avg bus bandwidth' footer"],
    ),
    "p4dex2_awsome-distributed-training_srun_label_all_reduce.txt": (
        "all_reduce",
        29,
        2147483648,
        78.33,
        0,
        False,
        ["output stops mid-table after the 2147483648 B row: no 'Avg bus bandwidth' footer"],
    ),
    "multinode_nccl-tests-252_all_reduce_tail.txt": ("all_reduce", 5, 8589934592, 95.10, 0, True, []),
    "rtx4090x1_nixpkgs-251856_v2.13.6_all_gather.txt": ("all_gather", 1, 33554432, 0.0, 1, True, []),
    "rtx5090x1_nccl-tests-287_alltoall.txt": ("alltoall", 1, 33554432, 0.0, 1, True, []),
    "v100x64_nccl-tests-78_all_reduce_error_column.txt": ("all_reduce", 2, 536870912, 4.32, 0, True, []),
    "v100x64_nccl-tests-78_alltoall_error_column.txt": ("alltoall", 2, 536870912, 0.51, 0, True, []),
    "v100x8_nccl-tests-37_all_gather_oob_failed.txt": (
        "all_gather",
        1,
        4294967296,
        129.05,
        0,
        True,
        ['"Out of bounds values : 2 FAILED"'],
    ),
    "gtx1080x2_nccl-tests-104_sendrecv_error_column.txt": (
        "sendrecv",
        1,
        37748744,
        3.22,
        0,
        False,
        ["output stops mid-table after the 37748744 B row: no 'Avg bus bandwidth' footer"],
    ),
    "mi300xx8_hpc-ai-envs-30_rccl-tests_cut.txt": (
        "all_reduce",
        1,
        8388608,
        161.14,
        8,
        False,
        ["output stops mid-table after the 8388608 B row: no 'Avg bus bandwidth' footer"],
    ),
    "v100x2_nccl-tests-82_broadcast_warn_cut.txt": (
        "broadcast",
        1,
        8,
        0.0,
        2,
        False,
        [
            "output stops mid-table after the 8 B row: no 'Avg bus bandwidth' footer",
            'last NCCL WARN in the output: "v100-gpu-5:9210:9210 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to '
            'open libibverbs.so[.1]"',
        ],
    ),
    "gh200x16_sigma2-olivia-docs_all_reduce_wrong_no_footer.txt": (
        "all_reduce",
        28,
        134217728,
        89.85,
        16,
        False,
        [
            "18134 wrong elements at 2097152 B out-of-place (and 10 more row halves)",
            "output stops mid-table after the 134217728 B row: no 'Avg bus bandwidth' footer",
        ],
    ),
    "mi300xx8_ai-scripts_rccl-tests_snip.txt": ("all_reduce", 31, 8589934592, 315.91, 8, True, []),
    "mi300xx16_ai-scripts_rccl-tests_rccl_version.txt": ("all_reduce", 32, 17179869184, 357.46, 16, True, []),
    "h100x16_a3mega-ztan-fork_all_reduce.txt": ("all_reduce", 31, 8589934592, 338.82, 16, True, []),
    "h100nvlx4_nccl-2441_v2.18.3_step_bytes.txt": ("all_reduce", 11, 1500000, 11.33, 4, True, []),
    "dgxh100_nccl-1184_wrong_elided_cut.txt": (
        "all_reduce",
        3,
        524288,
        0.92,
        0,
        False,
        [
            "237858 wrong elements at 524288 B out-of-place (and 1 more row halves)",
            "output stops mid-table after the 524288 B row: no 'Avg bus bandwidth' footer",
        ],
    ),
    "gb10x2_dgx-spark-playbooks-103_v2.20.0_build_hash_cut.txt": (
        "all_reduce",
        4,
        65536,
        1.01,
        2,
        False,
        ["output stops mid-table after the 65536 B row: no 'Avg bus bandwidth' footer"],
    ),
    "gb10x2_dgx-spark-playbooks-25_all_gather_16g_cut.txt": (
        "all_gather",
        1,
        17179869184,
        20.95,
        2,
        True,
        [],
    ),
    "h100_nccl-tests-322_rows_then_test_nccl_failure_no_header.txt": (
        "all_reduce",
        5,
        17179869184,
        367.44,
        0,
        False,
        [
            "output stops mid-table after the 17179869184 B row: no 'Avg bus bandwidth' footer",
            "\"HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details) / '\"",
            "\"HCA-108: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details) / '\"",
            "\"HCA-107: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details) / '\"",
            "4 more failure lines",
        ],
    ),
    "rtx4090x3_nccl-tests-280_unindented_rows_cut.txt": (
        "all_reduce",
        3,
        32,
        0.0,
        3,
        False,
        ["output stops mid-table after the 32 B row: no 'Avg bus bandwidth' footer"],
    ),
    "a100pcie_nccl-tests-182_interleaved_rows_no_header.txt": (
        "all_reduce",
        10,
        1024,
        0.02,
        0,
        False,
        [
            "the 8 B float sum row comes after the 256 B row (and 1 more rows): the output holds more than "
            "one run's table, e.g. processes that ran alone instead of as one job",
            "output stops mid-table after the 1024 B row: no 'Avg bus bandwidth' footer",
        ],
    ),
    "gpux2_nccl-1706_destroy_lines_no_header.txt": ("all_reduce", 1, 134217728, 25.88, 0, True, []),
    "gpux8_nccl-tests-128_reduce_scatter_zero_rows_cut.txt": (
        "reduce_scatter",
        7,
        256,
        0.01,
        0,
        False,
        ["output stops mid-table after the 256 B row: no 'Avg bus bandwidth' footer"],
    ),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_nccl_tests_run_capture(name):
    collective, rows, size, busbw, devices, complete, found = RUNS[name]
    run = bench_output.assess(read(name))
    parsed = run["parsed"]
    assert len(parsed["rows"]) == rows
    largest = max(parsed["rows"], key=lambda r: r["size"])
    assert largest["size"] == size
    halves = bench_output.checked_halves(collective, parsed["rows"])
    assert bench_output.judged_busbw(largest, halves) == pytest.approx(busbw)
    assert len(parsed["devices"]) == devices
    assert parsed["complete"] is complete
    assert run["problems"] == found
    # The verdict at the largest size (>= 8 B here) against an expectation of 100 GB/s: a run
    # nccl-tests distrusts is FAIL whatever its bandwidth.
    verdict = bandwidth.verdict(
        parsed["rows"],
        {"expected_busbw": 100.0, "collective": collective},
        min_bytes=8,
        problems=run["problems"],
    )
    assert verdict["verdict"] == ("FAIL" if found or busbw < 75 else "PASS")
    assert verdict["size"] == size and verdict["measured_busbw"] == pytest.approx(busbw)


def test_launcher_prefixes_srun_label_and_indented_tag_output():
    # Real: aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md: Slurm's
    # `srun --label` ("0: ") on 2x p5.48xlarge, and an MPIJob log with `[1,0]<stdout>:` indented by the
    # README's list, with a "..." line where rows were left out.
    srun = bench_output.parse(read("p5x2_awsome-distributed-training_srun_label_all_reduce.txt"))
    assert srun["rows"][0]["size"] == 8 and srun["rows"][-1]["in_place"]["busbw"] == 487.26
    tagged = bench_output.parse(read("p5x2_awsome-distributed-training_mpijob_tag_output_indented.txt"))
    assert [r["size"] for r in tagged["rows"]][:2] == [0, 67108864]
    assert (tagged["avg_busbw"], tagged["out_of_bounds"], tagged["complete"]) == (52.9753, 0, True)


def test_gb200_nvl72_rack_judged_on_its_in_place_half_at_8_gib():
    # Real: github.com/coreweave/nccl-tests/pull/43, 72 ranks (only the last Rank line pasted).
    parsed = bench_output.parse(read("gb200nvl72_coreweave-nccl-tests-43_all_reduce.txt"))
    assert parsed["devices"][0]["rank"] == 71 and parsed["devices"][0]["host"] == "slurm-gb200-207-171"
    assert parsed["avg_busbw"] == 745.53
    result = bandwidth.verdict(parsed["rows"], {"expected_busbw": 900.0, "collective": "all_reduce"})
    assert (result["verdict"], result["measured_busbw"], result["size"]) == ("PASS", 846.82, 8589934592)


def test_old_broadcast_layout_with_root_and_no_redop():
    # Real: github.com/NVIDIA/nccl-tests/issues/82 (NCCL 2.9.6, -c 0, two hosts, NCCL WARN between).
    parsed = bench_output.parse(read("v100x2_nccl-tests-82_broadcast_warn_cut.txt"))
    row = parsed["rows"][0]
    assert (row["type"], row["redop"], row["root"]) == ("float", "", 0)
    assert row["out_of_place"]["error"] is None and row["in_place"]["busbw"] == 0.0
    assert [d["host"] for d in parsed["devices"]] == ["v100-gpu-1", "v100-gpu-5"]
    assert parsed["config"]["ngpus"] == 1 and parsed["config"]["iters"] == 100


def test_sendrecv_in_place_error_is_not_judged():
    # Real: github.com/NVIDIA/nccl-tests/issues/104, 2x GTX 1080: in-place error 3e+02 is nccl-tests'
    # unchecked in-place sendrecv; out-of-place 0e+00.
    parsed = bench_output.parse(read("gtx1080x2_nccl-tests-104_sendrecv_error_column.txt"))
    parsed["config"] = {"ngpus": 2}
    assert parsed["rows"][0]["in_place"]["error"] == 300.0
    assert bench_output.data_errors(parsed, "sendrecv") == []
    assert bench_output.data_errors(parsed, "all_reduce") == [
        (37748744, "in_place", "max error 300 > 1e-200 allowed")
    ]


# ---------------------------------------------------------------- nccl-tests, failed runs
# name: (exit code or None, the quoted cause that must lead the problems)
FAILED = {
    "p100x8_nccl-tests-5_nccl1_failure.txt": (None, "NCCL failure all_reduce.cu:95 'unhandled cuda error'"),
    "rtx2080tix4_nccl-473_test_nccl_failure.txt": (
        None,
        "fastmoe: Test NCCL failure common.cu:777 'unhandled system error'",
    ),
    "mi210x4_rccl-tests-50_test_nccl_failure.txt": (
        None,
        "sharbox-ultra: Test NCCL failure common.cu:1285 'internal error - please report this issue to the "
        "NCCL "
        "developers'",
    ),
    "gpux2_nccl-tests-92_test_cuda_failure.txt": (
        None,
        "node1: Test CUDA failure common.cu:963 'invalid device ordinal'",
    ),
    "k80_nccl-tests-1_cuda_failure_mpirun.txt": (1, "Cuda failure common.cu:891 'invalid device ordinal'"),
    "hca_nccl-tests-322_test_nccl_failure.txt": (
        3,
        "HCA-14: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
        "details) / '",
    ),
    "wsl_nccl-tests-230_test_nccl_failure_second_process.txt": (
        None,
        "DESKTOP-GGBQPHK: Test NCCL failure common.cu:990 'unhandled cuda error (run with NCCL_DEBUG=INFO "
        "for details) / '",
    ),
    "gpux4x2_nccl-tests-24_ib_completion_error.txt": (
        None,
        "gpu5:6252:6325 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, "
        "opcode 1, len 0, "
        "vendor err 81",
    ),
}


@pytest.mark.parametrize("name", sorted(FAILED))
def test_failed_run_is_fail_with_the_cause_quoted(name):
    rc, cause = FAILED[name]
    run = bench_output.assess(read(name), rc)
    assert run["parsed"] is None
    quoted = [p for p in run["problems"] if cause in p]
    assert quoted, run["problems"]
    assert run["problems"][-1] == "no result rows"
    expected = {"expected_busbw": 100.0, "collective": "all_reduce"}
    result = bandwidth.verdict([], expected, problems=run["problems"])
    assert result["verdict"] == "FAIL" and cause in result["reason"]


def test_hex_dump_of_a_failed_nic_is_not_a_row_or_a_cut_line():
    # Real: github.com/NVIDIA/nccl-tests/issues/24: "00000000 02005104 09000ac5 0000bfd2" after the header.
    text = read("gpux4x2_nccl-tests-24_ib_completion_error.txt")
    healthy_row = (
        "     8388608       2097152   float     sum    91.10   92.08  161.14  0e+00"
        "    94.94   88.36  154.63  0e+00\n"
    )
    parsed = bench_output.parse(text.replace("gpu4:5633:5633", healthy_row + "gpu4:5633:5633", 1))
    assert [r["size"] for r in parsed["rows"]] == [8388608] and parsed["cut_line"] == ""


def test_a_row_with_nccl_info_printed_into_it_is_not_read():
    # Real lines: github.com/NVIDIA/nccl/issues/1453 (NCCL_DEBUG=INFO under a launcher that prefixes
    # "[0] "): the 8192 B row is split by INFO lines ("-1[0] host:pid:tid [0] NCCL INFO ...") and the
    # 4096 B row's values arrive on their own line. The header line in front is nccl-tests' (added,
    # the paste starts after it); the last row is the real 8 GiB row of the h200x2 capture, prefixed
    # the same way.
    header = "[0] #       size         count      type   redop    root     time   algbw   busbw #wrong"
    header += "     time   algbw   busbw #wrong\n"
    real = (FIXTURES / "nccltests" / "h200x2_v2.19.6_all_reduce_perf.txt").read_text().splitlines()
    good = "[0] " + next(line for line in real if line.strip().startswith("8589934592")) + "\n"
    parsed = bench_output.parse(header + read("gpu_nccl-1453_info_interleaved_rows.txt") + good)
    assert [(r["size"], r["in_place"]["busbw"]) for r in parsed["rows"]] == [(8589934592, 347.66)]
    assert parsed["cut_line"] == ""


def test_nccl_warn_lines_of_a_completed_run_are_not_failures():
    # A WARN line WRITTEN in NCCL's format (host:pid:tid [dev] file:line NCCL WARN ...) inside the real,
    # complete h200x2 run: NCCL logs errors it recovers from, the run's own lines decide. The same
    # words from nccl-tests itself (k80_nccl-tests-1: "Cuda failure common.cu:891 ...") stay a failure.
    real = (FIXTURES / "nccltests" / "h200x2_v2.19.6_all_reduce_perf.txt").read_text()
    warn = "vm:1363:1380 [0] transport/nvls.cc:100 NCCL WARN Cuda failure 1 'invalid argument'\n"
    text = real.replace("#       size", warn + "#       size", 1)
    assert warn.strip() in text
    assert bench_output.assess(text, 0)["problems"] == []
    assert bench_output.failure_lines(read("k80_nccl-tests-1_cuda_failure_mpirun.txt"))[0].startswith(
        "Cuda failure"
    )


def test_two_processes_that_ran_alone_are_a_problem():
    # The header is real (github.com/NVIDIA/nccl-tests/issues/107: mpirun -np 2 of a binary built
    # without MPI=1, both print "Rank 0"); the rows and footers after it are written (synthetic/).
    assert "Rank  0 Pid   2066 on ip-172-31-22-230" in read("v100x2_nccl-tests-107_two_processes_header.txt")
    text = (FIXTURES / "synthetic" / "nccltests" / "two_processes_without_mpi.txt").read_text()
    run = bench_output.assess(text, 0)
    assert run["problems"] == [
        "rank 0 is listed 2 times (on ip-172-31-20-228, ip-172-31-22-230): the output holds more than one "
        "run, e.g. processes that ran alone instead of as one job (nccl-tests built without MPI=1, or "
        "started by a launcher its MPI does not know)"
    ]
    healthy = bench_output.assess(
        (FIXTURES / "nccltests" / "h200x2_v2.19.6_all_reduce_perf.txt").read_text(), 0
    )
    assert healthy["problems"] == []


def test_settings_and_rank_lines_of_old_and_sibling_tools():
    # nccl-tests 1.x: no "#", no Pid; rccl-tests: "nThreads: 1 nGpus: 4 nRanks: 1 ... warmupIters: 5".
    old = read("p100x8_nccl-tests-5_nccl1_failure.txt")
    rccl = read("mi210x4_rccl-tests-50_test_nccl_failure.txt")
    row = "           8             2   float     sum    35.76    0.00    0.00  0e+00"
    row += "    35.10    0.00    0.00  0e+00\n"
    header = "#       size         count    type   redop     time   algbw   busbw  error"
    header += "     time   algbw   busbw  error\n"
    parsed = bench_output.parse(old.replace("NCCL failure", row + "NCCL failure"))
    assert parsed["config"]["ngpus"] == 8 and parsed["config"]["iters"] == 20
    first = parsed["devices"][0]
    assert (first["rank"], first["host"], first["pid"], first["name"]) == (
        0,
        "node03",
        None,
        "Tesla P100-PCIE-16GB",
    )
    parsed = bench_output.parse(rccl.replace("sharbox-ultra: Test", header + row + "sharbox-ultra: Test"))
    assert parsed["config"]["nthreads"] == 1 and parsed["config"]["ngpus"] == 4
    assert parsed["config"]["warmup_iters"] == 5 and parsed["config"]["iters"] == 20
    assert [d["bus_id"] for d in parsed["devices"]] == [
        "0000:63:00.0",
        "0000:43:00.0",
        "0000:30:00.0",
        "0000:03:00.0",
    ]


def test_banner_with_the_build_commit_still_names_the_library():
    # Real: NVIDIA/dgx-spark-playbooks#103, nccl-tests 2.20.0 prints "(b4d5bee)" after its version.
    parsed = bench_output.parse(read("gb10x2_dgx-spark-playbooks-103_v2.20.0_build_hash_cut.txt"))
    assert (parsed["version"], parsed["nccl_headers_version"], parsed["nccl_version"]) == (
        "2.20.0",
        "2.31.2",
        "2.31.2",
    )
    assert [d["name"] for d in parsed["devices"]] == ["NVIDIA GB10", "NVIDIA GB10"]


def test_library_version_from_the_rccl_and_nccl_log_lines_without_a_banner():
    # Real: rccl-tests' "RCCL version : 2.22.3-HEAD:7d8d67c" (hisohara/ai-scripts) and NCCL's own
    # "NCCL version 2.9.6+cuda11.2" (NVIDIA/nccl-tests#82); neither output has the 2.13+ banner.
    rccl = bench_output.parse(read("mi300xx16_ai-scripts_rccl-tests_rccl_version.txt"))
    assert (rccl["version"], rccl["nccl_version"]) == ("", "2.22.3")
    assert rccl["devices"][8]["host"] == "gpu-56" and rccl["devices"][8]["bus_id"] == "0000:05:00.0"
    old = bench_output.parse(read("v100x2_nccl-tests-82_broadcast_warn_cut.txt"))
    assert old["nccl_version"] == "2.9.6"
    # The banner's nccl-library is what ran; a log line does not override it.
    banner = bench_output.parse(read("h100nvlx4_nccl-2441_v2.18.3_step_bytes.txt"))
    assert banner["nccl_version"] == "2.30.5"
    assert bench_output.parse(read("h100x16_a3mega-ztan-fork_all_reduce.txt"))["nccl_version"] == ""


def test_rows_whose_header_line_is_not_in_the_output_are_read_by_their_shape():
    # Real tails: NVIDIA/nccl#1706 (one row, NCCL INFO lines, footer) and NVIDIA/nccl-tests#322 (rows
    # up to 16 GiB, then Test NCCL failure lines of several ranks).
    tail = bench_output.parse(read("gpux2_nccl-1706_destroy_lines_no_header.txt"))
    assert tail["header_inferred"] is True
    row = tail["rows"][0]
    assert (row["size"], row["count"], row["type"], row["redop"], row["root"]) == (
        134217728,
        33554432,
        "float",
        "sum",
        -1,
    )
    assert row["out_of_place"] == {
        "time_us": 5190.8,
        "algbw": 25.86,
        "busbw": 25.86,
        "wrong": 0,
        "error": None,
    }
    assert (tail["avg_busbw"], tail["complete"]) == (8.62002, True)
    failed = bench_output.assess(read("h100_nccl-tests-322_rows_then_test_nccl_failure_no_header.txt"), 3)
    assert [r["size"] for r in failed["parsed"]["rows"]][-1] == 17179869184
    result = bandwidth.verdict(
        failed["parsed"]["rows"],
        {"expected_busbw": 300.0, "collective": "all_reduce"},
        problems=failed["problems"],
    )
    assert result["verdict"] == "FAIL" and "Test NCCL failure common.cu:1204" in result["reason"]
    # A header in sight is used as before; a row of no known shape (the per-iteration layout with a
    # timestamp) is not guessed at.
    assert bench_output.parse(read("h100nvlx4_nccl-2441_v2.18.3_step_bytes.txt"))["header_inferred"] is False
    timed = (FIXTURES / "nccltests" / "documented_per_iter_timestamp.txt").read_text().splitlines()
    rows_only = "\n".join(line for line in timed if line.strip()[:1].isdigit())
    with pytest.raises(ValueError, match="no nccl-tests result rows"):
        bench_output.parse(rows_only)


def test_two_tables_printed_into_each_other_are_a_problem_rounded_repeats_are_not():
    # Real: NVIDIA/nccl-tests#182, two processes' rows 8..256, 8, 512, 16, 1024 B (mpirun of a
    # binary built without MPI); NVIDIA/nccl-tests#128 and the h200x2 all_gather print "0" rows
    # several times in one run (sizes rounded down to whole elements per rank).
    run = bench_output.assess(read("a100pcie_nccl-tests-182_interleaved_rows_no_header.txt"))
    assert run["problems"][0].startswith("the 8 B float sum row comes after the 256 B row (and 1 more rows)")
    zeros = bench_output.parse(read("gpux8_nccl-tests-128_reduce_scatter_zero_rows_cut.txt"))
    assert [r["size"] for r in zeros["rows"]] == [0, 0, 0, 0, 0, 128, 256]
    assert bench_output.rows_out_of_order(zeros["rows"]) == []
    gather = (FIXTURES / "nccltests" / "h200x2_v2.19.6_all_gather_perf.txt").read_text()
    assert bench_output.assess(gather, 0)["problems"] == []


def test_wrong_elements_of_a_corrupting_fabric_fail_the_run():
    # Real: the Sigma2 Olivia page (4 x 4 GH200, LL128 over Slingshot without HPE's settings).
    parsed = bench_output.parse(read("gh200x16_sigma2-olivia-docs_all_reduce_wrong_no_footer.txt"))
    wrong = [
        (r["size"], r["out_of_place"]["wrong"], r["in_place"]["wrong"])
        for r in parsed["rows"]
        if r["out_of_place"]["wrong"] or r["in_place"]["wrong"]
    ]
    assert wrong[0] == (2097152, 18134, 9609) and wrong[-1] == (67108864, 113492, 0)
    assert parsed["wrong_total"] == 3935945
    # The largest size is clean (89.85 GB/s): the verdict still fails on the corrupt sizes.
    expected = {"expected_busbw": 80.0, "collective": "all_reduce"}
    result = bandwidth.verdict(parsed["rows"], expected, min_bytes=8)
    assert result["verdict"] == "FAIL" and result["measured_busbw"] == 89.85
    assert "3935945 wrong elements" in result["reason"]


def test_a_log_of_two_binaries_is_read_as_two_runs():
    # The real h200x2 all_reduce and all_gather outputs one after the other, as a loop over the
    # binaries writes them into one log: rows are never mixed, and the output is distrusted.
    nccl = FIXTURES / "nccltests"
    text = (nccl / "h200x2_v2.19.6_all_reduce_perf.txt").read_text()
    text += (nccl / "h200x2_v2.19.6_all_gather_perf.txt").read_text()
    runs = bench_output.parse_runs(text)
    assert [(r["program"], len(r["rows"]), r["complete"]) for r in runs] == [
        ("all_reduce_perf", 31, True),
        ("all_gather_perf", 31, True),
    ]
    assert runs[1]["rows"][-1]["in_place"]["busbw"] == 311.14
    first = bench_output.parse(text)
    assert (first["program"], len(first["rows"]), first["runs"]) == ("all_reduce_perf", 31, 2)
    assert first["other_runs"] == [{"program": "all_gather_perf", "rows": 31, "complete": True}]
    assert bench_output.assess(text, 0)["problems"] == [
        "the output holds 2 nccl-tests runs (all_reduce_perf, all_gather_perf): only the first is read; "
        "give each run its own output"
    ]


# ---------------------------------------------------------------- kernel log
def test_gpu_fallen_off_the_bus_without_an_xid_line_is_xid_79():
    # Real: NVIDIA/NVSentinel#155 (driver 570.158.01): the message spans three lines, no "Xid".
    log = read("gpu10de26b5_nvsentinel-155_dmesg_fallen_off_bus_no_xid.txt")
    assert [(x["pci"], x["xid"], x["count"], x["severity"]) for x in health.parse_xid(log)] == [
        ("0000:b3:00", 79, 1, "critical")
    ]
    topo = {"gpus": [{"index": 0, "bus_id": "00000000:B3:00.0"}], "gpu_count": 1}
    items = [f for f in health.findings(topo, kernel_log=log) if f["code"] == "xid"]
    assert [(f["severity"], f["gpus"]) for f in items] == [("critical", [0])]
    # The same GPU with an Xid 79 line as well is one event, not two.
    xid_line = "[ 1843.308200] NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, "
    both = log + xid_line + "GPU has fallen off the bus.\n"
    assert [(x["xid"], x["count"]) for x in health.parse_xid(both)] == [(79, 1)]


# ---------------------------------------------------------------- every capture is covered
def test_every_public_capture_is_checked_and_documented():
    readme = (PUB / "README.md").read_text()
    checked = set(TOPO_M) | set(TOPO_P2P) | set(RUNS) | set(FAILED)
    checked |= {
        "v100_azhpc-diagnostics-73_nvlink_s_inactive.txt",
        "rtxa6000x3_siboehm-bench_nvlink_s_all_inactive_note.txt",
        "a100sxm4_nccl-tests-228_nvlink_s_cut.txt",
        "gb200_k8s-test-infra-371_nvlink_s_cut.txt",
        "b200_gpud-1085_nvlink_s_all_inactive.txt",
        "gpu_open-gpu-kernel-modules-47_nvml_version_mismatch.txt",
        "v100x2_nccl-tests-107_two_processes_header.txt",
        "gpu2gb_i3pystatus-776_query_gpu_noheader_na.txt",
        "gpu2gb_i3pystatus-776_query_gpu_noheader_not_supported.txt",
        "gb10_llama-swap-782_query_gpu_memory_na.txt",
        "gpu10de26b5_nvsentinel-155_dmesg_fallen_off_bus_no_xid.txt",
        "gpu_nccl-1453_info_interleaved_rows.txt",
    }
    files = {p.name for p in PUB.iterdir() if p.name != "README.md"}
    assert files == checked
    assert [f for f in sorted(files) if f"`{f}`" not in readme] == []


def _mutations(text):
    yield from (text[:i] for i in range(0, len(text), max(1, len(text) // 10)))
    lines = text.splitlines(True)
    yield from ("".join(lines[:i] + lines[i + 1 :]) for i in range(len(lines)))
    yield text.replace("\t", " ")
    yield text.expandtabs(8)
    yield text.replace("  ", " ")


@pytest.mark.parametrize(
    "name",
    sorted(
        set(TOPO_M)
        | set(TOPO_P2P)
        | {
            "v100_azhpc-diagnostics-73_nvlink_s_inactive.txt",
            "rtxa6000x3_siboehm-bench_nvlink_s_all_inactive_note.txt",
            "b200_gpud-1085_nvlink_s_all_inactive.txt",
        }
    ),
)
def test_mangled_public_captures_raise_only_value_error(name):
    parser = (
        topology.parse_topo_matrix
        if name in TOPO_M
        else topology.parse_topo_p2p
        if name in TOPO_P2P
        else nvlink.parse_nvlink_status
    )
    for text in _mutations(read(name)):
        with contextlib.suppress(ValueError):  # any other exception fails the test
            parser(text)


@pytest.mark.parametrize("name", sorted(RUNS) + sorted(FAILED))
def test_mangled_nccl_tests_captures_never_raise_from_assess(name):
    for text in _mutations(read(name)):
        run = bench_output.assess(text)
        assert run["parsed"] is not None or run["problems"]
