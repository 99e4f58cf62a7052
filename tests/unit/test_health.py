"""wireup.probe.health: every finding rule, on the real capture (no findings) and on synthetic cases."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import health, nvlink, topology

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200x2"
SYN = FIXTURES / "synthetic"


def read(path):
    return path.read_text(encoding="utf-8")


def load(folder, modes="r"):
    """build_topology + parsed nvlink from the files a fixture folder has."""
    files = {p.name: read(p) for p in folder.iterdir()}
    topo = topology.build_topology(
        topo_m=files.get("topo_m.txt"),
        p2p={m: files.get(f"topo_p2p_{m}.txt") for m in modes},
        nvlink_s=files.get("nvlink_s.txt"),
        query_csv=files.get("query_gpu.csv"),
        smi_xml=files.get("nvidia_smi_q.xml"),
    )
    nvl = nvlink.parse_nvlink_status(files["nvlink_s.txt"]) if "nvlink_s.txt" in files else None
    return topo, nvl


def codes(items):
    return [(f["severity"], f["code"], f["gpus"]) for f in items]


def test_h200_is_healthy():
    topo, nvl = load(H200, "rwn")
    items = health.findings(topo, nvl, expected_gpus=2, kernel_log="", lspci=None)
    assert items == []
    assert health.count_by_severity(items) == {"critical": 0, "warning": 0, "info": 0}


def test_dgx_is_healthy():
    topo, nvl = load(SYN / "h100x8_nvswitch")
    assert health.findings(topo, nvl, expected_gpus=8, kernel_log="") == []


@pytest.mark.parametrize(
    ("folder", "modes", "expected"),
    [
        (
            "h100x4_nv6_inactive",
            "r",
            [("critical", "nvlink_inactive", [2])],
        ),
        (
            "a100x2_bridge_degraded",
            "r",
            [
                ("critical", "nvlink_below_matrix", [0, 1]),
                ("critical", "nvlink_inactive", [1]),
                ("critical", "p2p_not_ok", [0, 1]),
            ],
        ),
        (
            "pcie_4gpu",
            "rn",
            [
                ("warning", "p2p_not_ok", [0, 1, 2, 3]),
                ("warning", "pcie_width_reduced", [2]),
                ("info", "pcie_gen_below_max", [0]),
            ],
        ),
        ("single_gpu", "r", []),
    ],
)
def test_findings_per_case(folder, modes, expected):
    topo, nvl = load(SYN / folder, modes)
    assert codes(health.findings(topo, nvl, kernel_log="")) == expected


def test_messages_are_one_line_and_specific():
    topo, nvl = load(SYN / "a100x2_bridge_degraded")
    items = {f["code"]: f["message"] for f in health.findings(topo, nvl, kernel_log="")}
    assert (
        items["nvlink_inactive"]
        == "GPU1: 4 of 12 NVLinks inactive (links 8, 9, 10, 11); NVLink bandwidth is reduced"
    )
    assert items["nvlink_below_matrix"] == "GPU0-GPU1: topo -m says NV12 but GPU1 has 8 active"
    assert items["p2p_not_ok"] == "P2P not OK (r=TNS) over NV12 for 1 GPU pair(s): GPU0-GPU1"
    assert all("\n" not in m for m in items.values())


def test_pcie_rule_messages():
    topo, nvl = load(SYN / "pcie_4gpu", "rn")
    items = {(f["code"], tuple(f["gpus"])): f["message"] for f in health.findings(topo, nvl, kernel_log="")}
    assert items[("pcie_gen_below_max", (0,))].startswith(
        "GPU0: PCIe Gen1 of Gen4 at x16; expected on an idle GPU"
    )
    assert items[("pcie_width_reduced", (2,))].startswith("GPU2: PCIe link x8 of x16;")
    # NVLink P2P ("n" = NS) on PCIe pairs is by design and not reported; PCIe read P2P CNS is.
    assert items[("p2p_not_ok", (0, 1, 2, 3))] == (
        "P2P not OK (r=CNS) over SYS for 3 GPU pair(s): GPU0-GPU3, GPU1-GPU3, GPU2-GPU3; "
        "NCCL falls back to host memory"
    )


def test_width_and_gen_together_is_one_warning():
    topo = {
        "gpus": [{"index": 0, "pcie": {"gen_current": 3, "gen_max": 5, "width_current": 8, "width_max": 16}}]
    }
    items = health.findings(topo, kernel_log="")
    assert codes(items) == [("warning", "pcie_width_reduced", [0])]
    assert "x8 of x16, Gen3 of Gen5" in items[0]["message"]


@pytest.mark.parametrize(
    ("expected", "found", "result"),
    [
        (8, 7, [("critical", "gpu_count_low", [])]),
        (8, 8, []),
        (2, 4, [("info", "gpu_count_high", [])]),
        (0, 3, []),
    ],
)
def test_gpu_count(expected, found, result):
    assert codes(health.findings({}, expected_gpus=expected, found_gpus=found, kernel_log="")) == result


def test_gpu_count_from_topology():
    topo, nvl = load(H200)
    items = health.findings(topo, nvl, expected_gpus=4, kernel_log="")
    assert codes(items) == [("critical", "gpu_count_low", [])]
    assert items[0]["message"].startswith("2 GPU(s) visible to nvidia-smi, 4 expected")


@pytest.mark.parametrize("bad", [-1, "8", True, 2.0])
def test_expected_gpus_validated(bad):
    with pytest.raises(ValueError, match="expected_gpus must be a non-negative integer"):
        health.findings({}, expected_gpus=bad, kernel_log="")


def test_nvml_mismatch():
    text = read(SYN / "health" / "nvml_mismatch.txt")
    items = health.findings({}, command_errors={"topo -m": text, "nvlink -s": text}, kernel_log="")
    assert codes(items) == [("critical", "nvml_driver_mismatch", [])]
    assert "reboot" in items[0]["message"]
    assert health.classify_smi_error(text) == (
        "nvml_driver_mismatch",
        "Failed to initialize NVML: Driver/library version mismatch",
    )


def test_other_probe_errors():
    items = health.findings(
        {},
        command_errors={
            "topo -p2p a": "Invalid combination of input arguments.",
            "topo -m": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        },
        kernel_log="",
    )
    assert codes(items) == [("critical", "nvml_failed", []), ("warning", "probe_failed", [])]
    assert items[1]["message"] == "`nvidia-smi topo -p2p a` failed: Invalid combination of input arguments."


def test_xid_dmesg():
    xids = health.parse_xid(read(SYN / "health" / "dmesg_xid.txt"))
    assert [(x["pci"], x["xid"], x["count"], x["severity"]) for x in xids] == [
        ("0000:19:00", 13, 2, "warning"),
        ("0000:1a:00", 74, 1, "critical"),
        ("0000:ba:00", 79, 1, "critical"),
        ("0000:1a:00", 140, 1, "warning"),
    ]
    assert xids[2]["meaning"] == "GPU has fallen off the bus"
    assert xids[3]["meaning"] == "see NVIDIA's Xid catalogue"


def test_xid_findings_map_to_gpus():
    topo = {
        "gpus": [
            {"index": 0, "bus_id": "00000000:19:00.0"},
            {"index": 1, "bus_id": "00000000:1A:00.0"},
        ]
    }
    items = health.findings(topo, kernel_log=read(SYN / "health" / "dmesg_xid.txt"))
    assert codes(items) == [
        ("critical", "xid", []),
        ("critical", "xid", [1]),
        ("warning", "xid", [0]),
        ("warning", "xid", [1]),
    ]
    messages = [f["message"] for f in items]
    assert "PCI 0000:ba:00: Xid 79 x1 since boot: GPU has fallen off the bus" in messages
    assert "GPU1: Xid 74 x1 since boot: NVLink error" in messages
    assert "GPU0: Xid 13 x2 since boot: graphics engine exception (often an application fault)" in messages


def test_xid_journal_form():
    xids = health.parse_xid(read(SYN / "health" / "journal_xid.txt"))
    assert [(x["xid"], x["severity"]) for x in xids] == [(94, "warning"), (63, "warning")]
    assert health.parse_xid(read(H200 / "proc_driver_version.txt")) == []


def test_xid_meanings_cover_the_common_ones():
    assert set(health.XID_MEANINGS) == {13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120}


def test_kernel_log_unreadable_is_noted():
    items = health.findings({}, kernel_log=None, kernel_log_readable=False)
    assert codes(items) == [("info", "kernel_log_unreadable", [])]


def test_acs_above_gpu():
    text = read(SYN / "health" / "lspci_acs.txt")
    devices = health.parse_lspci(text)
    bridges, readable = health.acs_above_gpus(devices)
    assert readable
    # 0000:18:00.0 sits above GPU 19:00.0 with ACS on; 16:01.0 and 18:01.0 have it off; 30:00.0 has it on
    # but only a NIC below it.
    assert bridges == [
        {
            "address": "0000:18:00.0",
            "flags": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"],
            "gpus": ["0000:19:00.0"],
        }
    ]
    topo = {"gpus": [{"index": 0, "bus_id": "00000000:19:00.0"}, {"index": 1, "bus_id": "00000000:1A:00.0"}]}
    items = health.findings(topo, kernel_log="", lspci=text, nvswitch_fabric_manager_running=True)
    assert codes(items) == [("warning", "acs_enabled", [0])]
    assert items[0]["message"].startswith(
        "ACS SrcValid+ReqRedir+CmpltRedir+UpstreamFwd on bridge 0000:18:00.0 above"
    )


def test_lspci_without_root():
    devices = health.parse_lspci(read(SYN / "health" / "lspci_not_root.txt"))
    bridges, readable = health.acs_above_gpus(devices)
    assert bridges == [] and readable is False


def test_nvswitch_without_fabric_manager():
    text = read(SYN / "health" / "lspci_acs.txt")
    assert [d["address"] for d in health.parse_lspci(text) if health.is_nvswitch(d)] == ["0000:05:00.0"]
    items = health.findings({}, kernel_log="", lspci=text, nvswitch_fabric_manager_running=False)
    assert ("critical", "fabric_manager_not_running", []) in codes(items)
    # Unknown (None) is not reported; H200 capture has no NVSwitch on its own bus (VM).
    items = health.findings({}, kernel_log="", lspci=text, nvswitch_fabric_manager_running=None)
    assert "fabric_manager_not_running" not in [f["code"] for f in items]


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        ("Completed", "Success", []),
        ("In Progress", None, [("critical", "fabric_not_ready", [3])]),
        ("Not Started", None, [("critical", "fabric_not_ready", [3])]),
        ("Completed", "Failure", [("critical", "fabric_not_ready", [3])]),
        (None, None, []),
        ("Not Supported", None, []),
    ],
)
def test_fabric_state(state, status, expected):
    topo = {"gpus": [{"index": 3, "fabric_state": state, "fabric_status": status}]}
    assert codes(health.findings(topo, kernel_log="")) == expected


def test_severity_order_and_bad_severity():
    topo, nvl = load(SYN / "pcie_4gpu", "r")
    items = health.findings(topo, nvl, expected_gpus=8, kernel_log=None, kernel_log_readable=False)
    severities = [f["severity"] for f in items]
    assert severities == sorted(severities, key=health.SEVERITIES.index)
    assert severities[0] == "critical" and severities[-1] == "info"
    with pytest.raises(ValueError, match="severity 'fatal'"):
        health.finding("fatal", "x", "y")


def test_findings_are_grouped_on_big_boxes():
    """8 idle GPUs at Gen1 and a fabric that is not up give one finding each, not eight."""
    gpus = [
        {
            "index": i,
            "pcie": {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16},
            "fabric_state": "In Progress",
            "fabric_status": None,
        }
        for i in range(8)
    ]
    items = health.findings({"gpus": gpus}, kernel_log="")
    assert codes(items) == [
        ("critical", "fabric_not_ready", list(range(8))),
        ("info", "pcie_gen_below_max", list(range(8))),
    ]
    assert items[1]["message"].startswith(
        "GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7: PCIe Gen1 of Gen5 at x16"
    )


def test_p2p_pairs_sorted_numerically():
    links = [{"a": f"GPU{a}", "b": f"GPU{b}", "class": "SYS"} for a, b in ((2, 10), (1, 11), (0, 12))]
    not_ok = [{"a": link["a"], "b": link["b"], "status": "CNS"} for link in links]
    topo = {"links": links, "p2p": {"r": {"not_ok": not_ok}}}
    (item,) = health.findings(topo, kernel_log="")
    assert "for 3 GPU pair(s): GPU0-GPU12, GPU1-GPU11, GPU2-GPU10;" in item["message"]
    assert item["gpus"] == [0, 1, 2, 10, 11, 12]


def _one_gpu_links_down(text, gpu, how):
    """nvlink -s text with GPU ``gpu``'s links all inactive (``how``: 'lines') or replaced by
    NVML's note ('note'), as a GPU that lost its NVLinks prints them."""
    out, mine = [], False
    for line in text.splitlines():
        if line.startswith("GPU "):
            mine = line.startswith(f"GPU {gpu}:")
            out.append(line)
            if mine and how == "note":
                out.append("NVML: Unable to retrieve NVLink information as all links are inActive")
            continue
        if mine:
            if how == "lines":
                out.append(line.split(":")[0] + ": <inactive>")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("how", ["lines", "note"])
def test_a_gpu_with_all_nvlinks_down_on_an_hgx_board(how):
    # The other 7 H100s are NV18 to each other (topo -m is the healthy one: NVML may keep NV18 in
    # the matrix while the links are down): GPU 5 without any active link is critical.
    topo, _ = load(SYN / "h100x8_nvswitch")
    text = _one_gpu_links_down(read(SYN / "h100x8_nvswitch" / "nvlink_s.txt"), 5, how)
    items = [
        f for f in health.findings(topo, nvlink.parse_nvlink_status(text)) if f["code"] == "nvlink_gpu_down"
    ]
    assert codes(items) == [("critical", "nvlink_gpu_down", [5])]
    assert "GPU5: no active NVLink" in items[0]["message"]
    assert "GPU0, GPU1, GPU2, GPU3, GPU4, GPU6, GPU7 have theirs" in items[0]["message"]


def test_all_nvlinks_down_with_nvswitches_on_the_bus():
    # Public: leptonai/gpud#1085 (a B200 whose links are all inActive), beside a B200 with links:
    # with NVSwitch devices counted on the bus, the GPU's loss is critical even without a mesh.
    down = read(FIXTURES / "public" / "b200_gpud-1085_nvlink_s_all_inactive.txt")
    up = "GPU 1: NVIDIA B200 (UUID: GPU-yyy)\n" + "".join(f"\t Link {i}: 50 GB/s\n" for i in range(18))
    nvl = nvlink.parse_nvlink_status(up + down)
    items = health.findings(None, nvl, nvswitches=2, kernel_log="")
    assert codes(items) == [("critical", "nvlink_gpu_down", [2])]
    assert health.findings(None, nvl, nvswitches=0, kernel_log="") == []


def test_a_lone_gpu_beside_a_bridged_pair_is_not_flagged():
    # Public: siboehm/bench (3x RTX A6000: GPUs 0-1 bridged, GPU 2 with NVML's all-inactive note).
    nvl = nvlink.parse_nvlink_status(
        read(FIXTURES / "public" / "rtxa6000x3_siboehm-bench_nvlink_s_all_inactive_note.txt")
    )
    assert [f for f in health.findings(None, nvl) if f["code"] == "nvlink_gpu_down"] == []
