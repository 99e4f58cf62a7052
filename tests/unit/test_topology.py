"""wireup.probe.topology on the real 2x H200 capture and on synthetic cases written from the documented
formats."""

import contextlib
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import topology

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200x2"
SYN = FIXTURES / "synthetic"


def read(path):
    return path.read_text(encoding="utf-8")


# (fixture, gpu count, GPU0-GPU1 class, link classes best first, nic (name, device) list,
#  GPU0 (cpu_affinity, numa_affinity, gpu_numa_id), affinity columns)
TOPO_CASES = [
    (
        H200 / "topo_m.txt",
        2,
        "NV18",
        ["NV18"],
        [],
        ("0-31", "0", None),
        ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
    ),
    (
        SYN / "h100x8_nvswitch" / "topo_m.txt",
        8,
        "NV18",
        ["NV18"],
        [(f"NIC{i}", f"mlx5_{i}") for i in range(10)],
        ("0-55,112-167", "0", None),
        ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
    ),
    (
        SYN / "pcie_4gpu" / "topo_m.txt",
        4,
        "PIX",
        ["PIX", "PXB", "SYS"],
        [("NIC0", "mlx5_0"), ("NIC1", "mlx5_1")],
        ("0-15,32-47", "0", None),
        ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
    ),
    (
        SYN / "single_gpu" / "topo_m.txt",
        1,
        None,
        [],
        [],
        ("0-23", "0", None),
        ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
    ),
    (
        SYN / "h100x4_nv6_inactive" / "topo_m.txt",
        4,
        "NV6",
        ["NV6"],
        [],
        ("0-31", "0", None),
        ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
    ),
    (
        SYN / "a100x8_no_gpu_numa_id" / "topo_m.txt",
        8,
        "NV12",
        ["NV12"],
        [(f"NIC{i}", f"mlx5_{i}") for i in range(4)],
        ("0-63,128-191", "0", None),
        ["CPU Affinity", "NUMA Affinity"],
    ),
    (
        SYN / "legacy_mlx_column" / "topo_m.txt",
        4,
        "PIX",
        ["PIX", "PHB", "SOC"],
        [("mlx4_0", "mlx4_0")],
        ("0-9,20-29", None, None),
        ["CPU Affinity"],
    ),
]


@pytest.mark.parametrize(
    ("path", "count", "pair01", "classes", "nics", "gpu0_affinity", "columns"),
    TOPO_CASES,
    ids=[c[0].parent.name for c in TOPO_CASES],
)
def test_parse_topo_matrix(path, count, pair01, classes, nics, gpu0_affinity, columns):  # noqa: PLR0917  # parametrized
    topo = topology.parse_topo_matrix(read(path))
    assert [g["index"] for g in topo["gpus"]] == list(range(count))
    assert len(topo["links"]) == count * (count - 1) // 2
    if pair01:
        assert topo["matrix"]["GPU0"]["GPU1"] == pair01
        assert topo["links"][0]["a"] == "GPU0" and topo["links"][0]["b"] == "GPU1"
        assert topo["links"][0]["class"] == pair01
    assert topo["link_classes"] == classes
    assert topo["best_link"] == (classes[0] if classes else None)
    assert topo["worst_link"] == (classes[-1] if classes else None)
    assert [(n["name"], n["device"]) for n in topo["nics"]] == nics
    g0 = topo["gpus"][0]
    assert (g0["cpu_affinity"], g0["numa_affinity"], g0["gpu_numa_id"]) == gpu0_affinity
    assert topo["columns"] == columns
    for name, row in topo["matrix"].items():
        assert row[name] == "X"


def test_h200_exact():
    topo = topology.parse_topo_matrix(read(H200 / "topo_m.txt"))
    assert topo["links"] == [{"a": "GPU0", "b": "GPU1", "class": "NV18", "kind": "nvlink", "nvlinks": 18}]
    assert topo["matrix"] == {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}}
    assert topo["legend"]["NV#"] == "Connection traversing a bonded set of # NVLinks"
    assert set(topo["legend"]) == {"X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"}


def test_ansi_escapes_are_stripped():
    text = read(H200 / "topo_m.txt")
    assert "\x1b[4m" in text  # the real capture carries them
    assert (
        topology.parse_topo_matrix(text)["matrix"]
        == topology.parse_topo_matrix(topology.strip_ansi(text))["matrix"]
    )


def test_dgx_nics_and_nearest():
    topo = topology.parse_topo_matrix(read(SYN / "h100x8_nvswitch" / "topo_m.txt"))
    by_name = {g["name"]: g for g in topo["gpus"]}
    assert by_name["GPU0"]["nearest_nics"] == ["NIC0"]
    assert by_name["GPU5"]["nearest_nics"] == ["NIC5"]
    assert by_name["GPU4"]["cpu_affinity"] == "56-111,168-223"
    assert by_name["GPU4"]["numa_affinity"] == "1"
    assert topo["matrix"]["NIC8"]["NIC9"] == "PIX"
    assert topo["matrix"]["GPU0"]["NIC4"] == "SYS"
    assert topo["matrix"]["GPU0"]["NIC8"] == "NODE"
    assert all(link["nvlinks"] == 18 and link["kind"] == "nvlink" for link in topo["links"])
    assert len(topo["links"]) == 28


def test_pcie_box_classes():
    topo = topology.parse_topo_matrix(read(SYN / "pcie_4gpu" / "topo_m.txt"))
    pairs = {(link["a"], link["b"]): link["class"] for link in topo["links"]}
    assert pairs == {
        ("GPU0", "GPU1"): "PIX",
        ("GPU0", "GPU2"): "PXB",
        ("GPU0", "GPU3"): "SYS",
        ("GPU1", "GPU2"): "PXB",
        ("GPU1", "GPU3"): "SYS",
        ("GPU2", "GPU3"): "SYS",
    }
    assert all(link["kind"] == "pcie" and link["nvlinks"] == 0 for link in topo["links"])
    assert topo["matrix"]["GPU0"]["NIC0"] == "PHB"
    assert topo["matrix"]["GPU0"]["NIC1"] == "NODE"
    assert {g["name"]: g["nearest_nics"] for g in topo["gpus"]}["GPU3"] == ["NIC0", "NIC1"]
    assert topo["gpus"][3]["numa_affinity"] == "1"


def test_link_class_ranking():
    assert topology.rank_link_classes(["SYS", "NV4", "PIX", "NODE", "NV18", "PHB", "PXB", "NV4"]) == [
        "NV18",
        "NV4",
        "PIX",
        "PXB",
        "PHB",
        "NODE",
        "SYS",
    ]
    assert topology.link_class_key("SOC") == topology.link_class_key("SYS")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("hello world\nnot a matrix\n", "no header line with GPU columns"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV18\n", "no row for them"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\n", "expected 2 link classes"),
        ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n", "unknown link class 'FOO'"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tPIX\t X \n", "not symmetric"),
        ("\tGPU0\tGPU1\nGPU0\tPIX\tNV18\nGPU1\tNV18\t X \n", "expected 'X'"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU7\tNV18\t X \n", "unexpected row 'GPU7'"),
    ],
)
def test_topo_matrix_garbage(text, message):
    with pytest.raises(ValueError, match=message):
        topology.parse_topo_matrix(text)


def test_classes_defined_by_the_legend_are_accepted():
    text = (
        "\tGPU0\tGPU1\tGPU2\n"
        "GPU0\t X \tABC\tXY4\n"
        "GPU1\tABC\t X \tSYS\n"
        "GPU2\tXY4\tSYS\t X \n"
        "\nLegend:\n\n  X    = Self\n  ABC  = A future link class\n  XY#  = A future counted class\n"
    )
    topo = topology.parse_topo_matrix(text)
    assert [link["class"] for link in topo["links"]] == ["ABC", "XY4", "SYS"]
    assert topo["link_classes"][0] == "SYS"  # unknown classes rank after the documented ones
    with pytest.raises(ValueError, match="unknown link class 'XZ4'"):
        topology.parse_topo_matrix(text.replace("XY4", "XZ4"))


def test_topo_matrix_not_text():
    with pytest.raises(ValueError, match="expected the text output"):
        topology.parse_topo_matrix(None)


@pytest.mark.parametrize(
    ("path", "mode", "gpus", "not_ok"),
    [
        (H200 / "topo_p2p_r.txt", "r", 2, []),
        (H200 / "topo_p2p_w.txt", "w", 2, []),
        (H200 / "topo_p2p_n.txt", "n", 2, []),
        (SYN / "h100x8_nvswitch" / "topo_p2p_r.txt", "r", 8, []),
        (
            SYN / "pcie_4gpu" / "topo_p2p_r.txt",
            "r",
            4,
            [("GPU0", "GPU3", "CNS"), ("GPU1", "GPU3", "CNS"), ("GPU2", "GPU3", "CNS")],
        ),
        (SYN / "a100x2_bridge_degraded" / "topo_p2p_r.txt", "r", 2, [("GPU0", "GPU1", "TNS")]),
        (SYN / "single_gpu" / "topo_p2p_r.txt", "r", 1, []),
    ],
    ids=lambda v: v.parent.name + "/" + v.name if isinstance(v, pathlib.Path) else None,
)
def test_parse_topo_p2p(path, mode, gpus, not_ok):
    p2p = topology.parse_topo_p2p(read(path), mode)
    assert len(p2p["matrix"]) == gpus
    assert [(p["a"], p["b"], p["status"]) for p in p2p["not_ok"]] == not_ok
    assert p2p["all_ok"] == (not not_ok)
    assert len(p2p["pairs"]) == gpus * (gpus - 1) // 2
    assert p2p["legend"]["CNS"] == "Chipset not supported"


def test_p2p_meaning_and_garbage():
    p2p = topology.parse_topo_p2p(read(SYN / "pcie_4gpu" / "topo_p2p_r.txt"), "r")
    assert p2p["not_ok"][0]["meaning"] == "Chipset not supported"
    with pytest.raises(ValueError, match="unknown status 'MAYBE'"):
        topology.parse_topo_p2p(" \tGPU0\tGPU1\t\n GPU0\tX\tMAYBE\t\n GPU1\tOK\tX\t\n", "r")
    with pytest.raises(ValueError, match="mode 'q'"):
        topology.parse_topo_p2p(read(H200 / "topo_p2p_r.txt"), "q")
    with pytest.raises(ValueError, match="expected only GPU columns"):
        topology.parse_topo_p2p(read(H200 / "topo_m.txt"), "r")


def test_query_gpu_h200_exact():
    rows = topology.parse_query_gpu_csv(read(H200 / "query_gpu.csv"))
    assert rows[0] == {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75",
        "pci.bus_id": "00000000:00:06.0",
        "driver_version": "580.159.04",
        "pcie.link.gen.current": 5,
        "pcie.link.gen.max": 5,
        "pcie.link.width.current": 16,
        "pcie.link.width.max": 16,
        "memory.total": 143771,
        "compute_cap": "9.0",
        "persistence_mode": "Enabled",
    }
    assert [r["index"] for r in rows] == [0, 1]


def test_query_gpu_any_fields():
    text = (
        "name, power.draw [W], clocks.max.sm [MHz], utilization.gpu [%], "
        "ecc.errors.uncorrected.volatile.total\n"
        "NVIDIA L40S, 35.12 W, 2520 MHz, 0 %, [Not Supported]\n"
        "NVIDIA L40S, [N/A], 2520 MHz, 97 %, 0\n"
    )
    rows = topology.parse_query_gpu_csv(text)
    assert rows == [
        {
            "name": "NVIDIA L40S",
            "power.draw": 35.12,
            "clocks.max.sm": 2520,
            "utilization.gpu": 0,
            "ecc.errors.uncorrected.volatile.total": None,
        },
        {
            "name": "NVIDIA L40S",
            "power.draw": None,
            "clocks.max.sm": 2520,
            "utilization.gpu": 97,
            "ecc.errors.uncorrected.volatile.total": 0,
        },
    ]


def test_query_gpu_not_supported_and_garbage():
    rows = topology.parse_query_gpu_csv(read(SYN / "pcie_4gpu" / "query_gpu.csv"))
    assert rows[3]["persistence_mode"] is None
    assert rows[2]["pcie.link.width.current"] == 8
    with pytest.raises(ValueError, match="not csv,noheader"):
        topology.parse_query_gpu_csv("0, NVIDIA H200, GPU-47e4\n")
    with pytest.raises(ValueError, match="line 2 has 2 values, the header has 3"):
        topology.parse_query_gpu_csv("index, name, uuid\n0, NVIDIA H200\n")
    with pytest.raises(ValueError, match="empty"):
        topology.parse_query_gpu_csv("\n")


def test_gpu_list_and_xml():
    gpus = topology.parse_gpu_list(read(H200 / "nvidia_smi_L.txt"))
    assert gpus == [
        {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75"},
        {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-e3c81799-f8fd-1849-2aa3-67b5ba1b911e"},
    ]
    xml = topology.parse_smi_xml(read(H200 / "nvidia_smi_q.xml"))
    assert xml["driver_version"] == "580.159.04"
    assert xml["cuda_version"] == "13.0"
    assert xml["attached_gpus"] == 2
    assert [(g["bus_id"], g["fabric_state"], g["fabric_status"]) for g in xml["gpus"]] == [
        ("00000000:00:06.0", "Completed", "Success"),
        ("00000000:00:07.0", "Completed", "Success"),
    ]
    with pytest.raises(ValueError, match="not XML"):
        topology.parse_smi_xml("<nvidia_smi_log><gpu>")
    with pytest.raises(ValueError, match="no 'GPU N"):
        topology.parse_gpu_list("No devices were found\n")


def test_build_topology_h200():
    topo = topology.build_topology(
        topo_m=read(H200 / "topo_m.txt"),
        p2p={m: read(H200 / f"topo_p2p_{m}.txt") for m in "rwn"},
        nvlink_s=read(H200 / "nvlink_s.txt"),
        query_csv=read(H200 / "query_gpu.csv"),
        smi_xml=read(H200 / "nvidia_smi_q.xml"),
    )
    assert topo["gpu_count"] == 2
    assert topo["driver_version"] == "580.159.04"
    assert topo["cuda_version"] == "13.0"
    assert topo["link_classes"] == ["NV18"]
    g1 = topo["gpus"][1]
    assert g1["uuid"] == "GPU-e3c81799-f8fd-1849-2aa3-67b5ba1b911e"
    assert g1["bus_id"] == "00000000:00:07.0"
    assert g1["compute_cap"] == "9.0"
    assert g1["memory_total_mib"] == 143771
    assert g1["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert g1["nvlink"] == {"active": 18, "inactive": 0, "speed_gbps": 26.562, "total_gbps": 478.116}
    assert g1["fabric_state"] == "Completed"
    assert topo["nvlink"]["links_per_gpu"] == 18
    assert topo["nvlink"]["per_link_gbps"] == 26.562
    assert topo["nvlink"]["per_gpu_gbps"] == 478.116
    assert set(topo["p2p"]) == {"r", "w", "n"}
    assert all(v["all_ok"] for v in topo["p2p"].values())


def test_build_topology_partial():
    """A node where only query-gpu worked still yields its GPUs."""
    topo = topology.build_topology(query_csv=read(SYN / "single_gpu" / "query_gpu.csv"))
    assert topo["gpu_count"] == 1
    assert topo["gpus"][0]["name"] == "NVIDIA A10"
    assert topo["links"] == [] and topo["nvlink"] is None and topo["best_link"] is None


FAKE_SMI = """#!/bin/sh
# Stands in for nvidia-smi: prints the fixture file for each probe the module runs.
d='{folder}'
# A folder holding nvml_error.txt stands for a broken driver: every call fails with that text.
[ -f "$d/nvml_error.txt" ] && {{ cat "$d/nvml_error.txt"; exit 18; }}
case "$*" in
  "topo -m") f=topo_m.txt ;;
  "topo -p2p "*) f="topo_p2p_$3.txt" ;;
  "nvlink -s") f=nvlink_s.txt ;;
  --query-gpu=*) f=query_gpu.csv ;;
  "-q -x") f=nvidia_smi_q.xml ;;
  *) echo "fake nvidia-smi: unknown arguments $*" >&2; exit 2 ;;
esac
[ -f "$d/$f" ] || {{ echo "fake nvidia-smi: no $f" >&2; exit 3; }}
cat "$d/$f"
"""


def run_module(tmp_path, folder, args):
    """Run the real module through ansible (ad hoc, local) with a fake nvidia-smi; return its result."""
    import json
    import os
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(folder=folder), encoding="utf-8")
    smi.chmod(0o755)
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(root / ".collections"),
        ANSIBLE_STDOUT_CALLBACK="default",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOME=str(tmp_path / "home"),
    )
    cmd = [
        str(pathlib.Path(sys.executable).parent / "ansible"),
        "localhost",
        "-c",
        "local",
        "-i",
        "localhost,",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-m",
        "wireup.cluster.wireup_gpu_topology",
        "-a",
        json.dumps({"nvidia_smi": str(smi), "read_kernel_log": False, "read_lspci": False, **args}),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Ad hoc output is "localhost | SUCCESS => {...}".
    return json.loads(proc.stdout.split("=>", 1)[1])


def test_module_on_h200_capture(tmp_path):
    result = run_module(tmp_path, H200, {"expected_gpus": 2})
    assert result["changed"] is False
    topo = result["topology"]
    assert topo["gpu_count"] == 2
    assert topo["links"][0]["class"] == "NV18"
    assert topo["nvlink"]["per_link_gbps"] == 26.562
    assert topo["gpus"][0]["fabric_state"] == "Completed"
    assert topo["kernel_log"] == {"readable": False, "source": "not read", "xid": []}
    assert topo["raw"]["topo_m"] == read(H200 / "topo_m.txt")
    assert [f["code"] for f in result["findings"]] == ["kernel_log_unreadable"]
    assert result["findings_count"] == {"critical": 0, "warning": 0, "info": 1}


def test_module_on_degraded_node(tmp_path):
    result = run_module(
        tmp_path, SYN / "a100x2_bridge_degraded", {"expected_gpus": 4, "p2p_modes": ["r", "w"]}
    )
    found = [(f["severity"], f["code"]) for f in result["findings"]]
    assert ("critical", "gpu_count_low") in found
    assert ("critical", "nvlink_inactive") in found
    assert ("critical", "nvlink_below_matrix") in found
    assert ("critical", "p2p_not_ok") in found
    # No topo -p2p w, query-gpu or -q -x capture for this case: each is a probe_failed warning, not a crash.
    assert found.count(("warning", "probe_failed")) == 3
    assert result["findings_count"]["critical"] == 4


def test_module_garbage_is_a_finding(tmp_path):
    folder = tmp_path / "garbage"
    folder.mkdir()
    (folder / "topo_m.txt").write_text("this is not a matrix\n", encoding="utf-8")
    (folder / "query_gpu.csv").write_text(read(H200 / "query_gpu.csv"), encoding="utf-8")
    result = run_module(tmp_path, folder, {"p2p_modes": []})
    parse = [f for f in result["findings"] if f["code"] == "parse_failed"]
    assert (
        len(parse) == 1
        and "topo_m: parse_topo_matrix: no header line with GPU columns" in parse[0]["message"]
    )
    assert result["topology"]["gpu_count"] == 2


ROLE_PLAY = """
- name: Run gpu_topology alone
  hosts: localhost
  gather_facts: false
  vars:
    wireup_node:
      gpu: {{present: {present}, pci_count: {pci_count}, count: {pci_count}, nvidia_smi: "{smi}"}}
  roles:
    - wireup.cluster.gpu_topology
"""


def run_role(tmp_path, folder, present=True, pci_count=2, extra=()):
    """Run the role in --check with a fake nvidia-smi; return (rc, stdout)."""
    import os
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(folder=folder), encoding="utf-8")
    smi.chmod(0o755)
    play = tmp_path / "play.yml"
    play.write_text(
        ROLE_PLAY.format(present=str(present).lower(), pci_count=pci_count, smi=smi), encoding="utf-8"
    )
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(root / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOME=str(tmp_path / "home"),
    )
    cmd = [
        str(pathlib.Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        str(root / "inventory" / "local.yml"),
        "--check",
        str(play),
        "-e",
        "gpu_topology_read_kernel_log=false",
        *extra,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False, cwd=root)
    return proc.returncode, proc.stdout + proc.stderr


def test_role_check_mode_summary_line(tmp_path):
    rc, out = run_role(tmp_path, H200)
    assert rc == 0, out
    assert (
        "gpu_topology localhost: 2 GPU(s) (NVIDIA H200), links NV18, NVLink 18x26.562 GB/s per GPU, NICs 0, "
        "findings 0 critical / 0 warning / 1 info" in " ".join(out.split())
    )
    assert "changed=0" in out


def test_role_skips_gpu_less_node_with_one_line(tmp_path):
    rc, out = run_role(tmp_path, H200, present=False, pci_count=0)
    assert rc == 0, out
    assert "gpu_topology localhost: skipped: no NVIDIA GPU found (PCI vendor 10de)" in out
    assert "nvidia_smi_missing" not in out and "findings 0 critical" not in out


def test_role_fails_on_critical_when_asked(tmp_path):
    rc, out = run_role(tmp_path, H200, pci_count=4, extra=("-e", "gpu_topology_fail_on_critical=true"))
    assert rc == 2, out
    assert "1 critical finding(s) on localhost: 2 GPU(s) visible to nvidia-smi, 4 expected" in " ".join(
        out.split()
    )


def test_module_on_nvml_mismatch(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "nvml_error.txt").write_text(read(SYN / "health" / "nvml_mismatch.txt"), encoding="utf-8")
    result = run_module(tmp_path, folder, {"expected_gpus": 2})
    assert [(f["severity"], f["code"]) for f in result["findings"]] == [
        ("critical", "gpu_count_low"),
        ("critical", "nvml_driver_mismatch"),
        ("info", "kernel_log_unreadable"),
    ]
    assert result["topology"]["gpu_count"] == 0
    assert result["topology"]["raw"]["topo_m"].startswith("Failed to initialize NVML")


# ---------------------------------------------------------------- issue 11: empty cells, odd bytes
PUB = FIXTURES / "public"


def test_empty_cpu_affinity_cell_does_not_shift_the_columns():
    # GB200 layout written from the format: CPU Affinity empty, the spacer before GPU NUMA ID.
    topo = topology.parse_topo_matrix(read(SYN / "gb200x4_empty_cpu_affinity" / "topo_m.txt"))
    assert [(g["cpu_affinity"], g["numa_affinity"], g["gpu_numa_id"]) for g in topo["gpus"]] == [
        (None, "0,3-9,11-17", "2"),
        (None, "0,3-9,11-17", "10"),
        (None, "1,19-25,27-33", "18"),
        (None, "1,19-25,27-33", "26"),
    ]
    assert topo["nics"] == [{"name": "NIC0", "device": "mlx5_0"}, {"name": "NIC1", "device": "mlx5_1"}]


def test_real_h200x1_capture_with_empty_spacer_cell():
    topo = topology.parse_topo_matrix(read(FIXTURES / "h200x1" / "topo_m.txt"))
    assert [(g["cpu_affinity"], g["numa_affinity"], g["gpu_numa_id"]) for g in topo["gpus"]] == [
        ("0-15", "0", None)
    ]
    assert topo["links"] == []


def test_space_aligned_copy_still_parses():
    # Tabs expanded (a copy pasted into a ticket): the same links, the affinities read in order.
    text = read(H200 / "topo_m.txt").expandtabs(8)
    topo = topology.parse_topo_matrix(text)
    assert topo["links"][0]["class"] == "NV18"
    assert topo["gpus"][0]["cpu_affinity"] == "0-31" and topo["gpus"][0]["gpu_numa_id"] is None


@pytest.mark.parametrize(
    ("name", "gpus", "gpu0"),
    [
        ("rtx4090x8_go-gpuallocator-17_topo_m.txt", 8, ("0-55,112-167", "0", None)),
        ("v100x8_nccl-tests-37_topo_m.txt", 8, ("0-95", None, None)),
        ("rtx5090x2_club-3090-1229_topo_m.txt", 2, ("0-63", "0", None)),
    ],
)
def test_public_captures(name, gpus, gpu0):
    topo = topology.parse_topo_matrix(read(PUB / name))
    assert len(topo["gpus"]) == gpus
    g = topo["gpus"][0]
    assert (g["cpu_affinity"], g["numa_affinity"], g["gpu_numa_id"]) == gpu0


def test_bad_gpu_index_is_a_value_error():
    text = read(H200 / "query_gpu.csv").replace("\n0, ", "\nGPU0, ", 1)
    with pytest.raises(ValueError, match="line 2 has index 'GPU0'; expected a GPU number"):
        topology.parse_query_gpu_csv(text)
    with pytest.raises(ValueError, match="has no values"):
        topology.parse_query_gpu_csv(",,,\n")


def test_decode_output_names_the_bad_byte():
    assert topology.decode_output(b"GPU0\tX\n", "nvidia-smi topo -m") == "GPU0\tX\n"
    with pytest.raises(ValueError, match=r"not UTF-8: byte 0xff at offset 5"):
        topology.decode_output(b"NVIDI\xffA H200", "nvidia-smi -L")


def _mutations(text):
    yield from (text[:i] for i in range(0, len(text), max(1, len(text) // 12)))
    lines = text.splitlines(True)
    yield from ("".join(lines[:i] + lines[i + 1 :]) for i in range(len(lines)))
    yield text.replace("\t", "    ")
    yield "\n".join(line.strip() for line in text.splitlines())
    yield text.replace("X", "\x00").replace("NV", "\x1b[1mNV")


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name.startswith(("topo_m", "topo_p2p", "query_gpu", "nvlink_s", "nvidia_smi"))
    ),
    ids=str,
)
def test_mangled_inputs_raise_only_value_error(path):
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nvlink

    parsers = {
        "topo_m": topology.parse_topo_matrix,
        "topo_p2p": lambda t: topology.parse_topo_p2p(t, "r"),
        "query_gpu": topology.parse_query_gpu_csv,
        "nvlink_s": nvlink.parse_nvlink_status,
        "nvidia_smi_q": topology.parse_smi_xml,
        "nvidia_smi_L": topology.parse_gpu_list,
    }
    parser = next(p for k, p in parsers.items() if path.name.startswith(k))
    for text in _mutations(path.read_text(encoding="utf-8", errors="replace")):
        with contextlib.suppress(ValueError):  # any other exception fails the test
            parser(text)


def test_module_survives_a_non_utf8_byte(tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    for name in ("topo_m.txt", "nvlink_s.txt", "nvidia_smi_q.xml", "topo_p2p_r.txt"):
        (folder / name).write_bytes((H200 / name).read_bytes())
    (folder / "query_gpu.csv").write_bytes(
        (H200 / "query_gpu.csv").read_bytes().replace(b"NVIDIA H200", b"NVIDIA H2\xff0", 1)
    )
    result = run_module(tmp_path, folder, {"p2p_modes": ["r"]})
    parse = [f["message"] for f in result["findings"] if f["code"] == "parse_failed"]
    assert len(parse) == 1 and parse[0].startswith(
        "query_gpu: the output of `nvidia-smi --query-gpu` is not UTF-8: byte 0xff"
    )
    assert "\\xff" in result["topology"]["raw"]["query_gpu"]
    # The rest of the node is still read: the matrix and NVLink of both GPUs.
    assert result["topology"]["gpu_count"] == 2 and result["topology"]["links"][0]["class"] == "NV18"


def test_module_bad_gpu_index_is_a_finding(tmp_path):
    folder = tmp_path / "badindex"
    folder.mkdir()
    for name in ("topo_m.txt", "nvlink_s.txt"):
        (folder / name).write_text(read(H200 / name), encoding="utf-8")
    (folder / "query_gpu.csv").write_text(
        read(H200 / "query_gpu.csv").replace("\n1, ", "\nN/A?, ", 1), encoding="utf-8"
    )
    result = run_module(tmp_path, folder, {"p2p_modes": []})
    assert any(f["code"] == "parse_failed" and "index 'N/A?'" in f["message"] for f in result["findings"])


def test_module_single_gpu_vm_without_nvlink(tmp_path):
    # Real 1x H200 VM: topo -m with an empty cell, `nvlink -s` prints nothing. No parse_failed.
    folder = tmp_path / "h200x1"
    folder.mkdir()
    for name in ("topo_m.txt", "nvlink_s.txt"):
        (folder / name).write_bytes((FIXTURES / "h200x1" / name).read_bytes())
    result = run_module(tmp_path, folder, {"p2p_modes": []})
    assert [f["code"] for f in result["findings"] if f["code"] == "parse_failed"] == []
    assert result["topology"]["gpus"][0]["cpu_affinity"] == "0-15"


def _module_main_file():
    """plugins/modules/wireup_gpu_topology.py imported as a plain file (its module_utils through the
    collection's name, as Ansible packs them)."""
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[2] / "plugins/modules/wireup_gpu_topology.py"
    spec = importlib.util.spec_from_file_location("wireup_gpu_topology_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_module_parses_each_output_once(monkeypatch):
    module = _module_main_file()
    calls = []

    def counted(name, func):
        def call(*args, **kwargs):
            calls.append(name)
            return func(*args, **kwargs)

        return call

    for name in (
        "parse_topo_matrix",
        "parse_nvlink_status",
        "parse_query_gpu_csv",
        "parse_smi_xml",
        "parse_topo_p2p",
    ):
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
        monkeypatch.setattr(topology, name, counted(name, getattr(topology, name)))
    texts = {
        "topo_m": read(H200 / "topo_m.txt"),
        "nvlink_s": read(H200 / "nvlink_s.txt"),
        "query_gpu": read(H200 / "query_gpu.csv"),
        "topo_p2p_r": read(H200 / "topo_p2p_r.txt"),
    }
    extra = []
    topo, nvl = module.parse_probes(texts, ["r"], extra)
    assert extra == [] and topo["gpu_count"] == 2 and nvl["totals"]["links_per_gpu"] == 18
    assert sorted(calls) == sorted(
        ["parse_topo_matrix", "parse_nvlink_status", "parse_query_gpu_csv", "parse_topo_p2p"]
    ), calls


def test_nic_legend_without_its_title_line_still_names_the_devices():
    # Real: NVIDIA/nccl-tests#331 (4x A100, NIC legend cut after NIC1). A paste that lost the
    # "NIC Legend:" line keeps its entries after the link-class legend; one that kept only the
    # NIC legend has them right after the matrix.
    text = (FIXTURES / "public" / "a100x4_nccl-tests-331_topo_m_nv4.txt").read_text()
    untitled = text.replace("NIC Legend:\n", "")
    assert [n["device"] for n in topology.parse_topo_matrix(untitled)["nics"]] == [
        "mlx5_0",
        "mlx5_1",
        None,
        None,
    ]
    lines = text.splitlines(True)
    matrix_end = next(i for i, line in enumerate(lines) if line.startswith("NIC3"))
    only_nic = "".join(lines[: matrix_end + 1] + [line for line in lines if line.strip().startswith("NIC0:")])
    topo = topology.parse_topo_matrix(only_nic)
    assert [n["device"] for n in topo["nics"]] == ["mlx5_0", None, None, None]
    assert topo["legend"] == {}
