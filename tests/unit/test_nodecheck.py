"""wireup.judge.quick (issue 26): the quick check's comparison of a node now with its baseline, on
the real 2x H200 captures, the 8x H100 NVSwitch set and the sysfs NIC trees in tests/fixtures
(faults derived from them: links down, a narrower PCIe link, a GPU gone, a rail down or slower)."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import quick
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nics as probe_nics
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nvlink, topology

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200x2"
H100 = FIXTURES / "synthetic" / "h100x8_nvswitch"
SYSFS = FIXTURES / "sysfs"
T0 = 1764583323.0  # 2025-12-01T10:02:03Z
AT = "at the last passing bench 2025-12-01T10:02:03Z"


def links_down(text, gpu, count):
    """nvlink -s text with the first ``count`` links of GPU ``gpu`` inactive."""
    out, mine, seen = [], False, 0
    for raw in text.splitlines():
        line = raw
        if line.startswith("GPU "):
            mine, seen = line.startswith(f"GPU {gpu}:"), 0
        elif mine and seen < count and "Link" in line:
            line, seen = line.split(":")[0] + ": <inactive>", seen + 1
        out.append(line)
    return "\n".join(out) + "\n"


def state(folder, *, nvlink_text=None, query_text=None, topo_text=None, sysfs=None):
    query = topology.parse_query_gpu_csv(query_text or (folder / "query_gpu.csv").read_text())
    topo = topology.parse_topo_matrix(topo_text or (folder / "topo_m.txt").read_text())
    nvl = nvlink.parse_nvlink_status(nvlink_text or (folder / "nvlink_s.txt").read_text(), len(query))
    nics = probe_nics.parse_nic_facts(probe_nics.read_tree(str(SYSFS / sysfs))) if sysfs else None
    return quick.node_state(topology.combine_topology(topo=topo, nvlink=nvl, query=query), nics)


def baseline(now, run_id="20251201T100203Z"):
    bench = {
        "run_id": run_id,
        "gpu_count": len(now["gpus"] or []),
        "links": [],
        "figure": {},
        "nccl_tests": {},
    }
    return quick.baseline_doc("node1", bench, copy.deepcopy(now), now=T0)


def messages(found):
    return [p["message"] for p in found]


def test_the_same_node_passes_with_one_line_naming_what_it_compared():
    now = state(H100, sysfs="ndr8_healthy")
    base = baseline(now)
    assert quick.baseline_problem(base) == ""
    result = quick.result("node1", base, now)
    assert (result["verdict"], result["exit"], result["problems"]) == ("PASS", 0, [])
    assert result["line"] == f"wireup-check: PASS node1: 8 GPU(s), 144 NVLinks, 9 NIC port(s) as {AT}"


def test_nvlinks_down_on_one_gpu_name_it_the_count_and_the_baseline():
    base = baseline(state(H200))
    text = links_down((H200 / "nvlink_s.txt").read_text(), 1, 3)
    result = quick.result("node1", base, state(H200, nvlink_text=text))
    assert result["verdict"] == "FAIL" and result["exit"] == 1
    assert result["line"] == (
        f"wireup-check: FAIL node1: GPU1 00000000:00:07.0 NVLink 3 of 18 links down (was 18 {AT})"
    )


def test_several_problems_name_the_worst_first_and_count_the_others():
    base = baseline(state(H100, sysfs="ndr8_healthy"))
    text = links_down((H100 / "nvlink_s.txt").read_text(), 5, 18)
    now = state(H100, nvlink_text=text, sysfs="ndr8_one_rail_hdr_one_down")
    found = quick.compare(base, now)
    assert messages(found) == [
        f"GPU5 00000000:AB:00.0 NVLink 18 of 18 links down (was 18 {AT})",
        f"NIC mlx5_5:1 at 200 Gb/s (was 400 Gb/s {AT})",
        f"NIC mlx5_7:1 down (was up at 400 Gb/s {AT})",
    ]
    line = quick.result("node1", base, now)["line"]
    assert line.endswith("(+2 more: NIC mlx5_5:1, NIC mlx5_7:1)")


def test_pcie_narrower_and_lower_max_generation_fail_but_an_idle_generation_does_not():
    base = baseline(state(H200))
    csv = (H200 / "query_gpu.csv").read_text().splitlines()
    idle = "\n".join([csv[0], csv[1].replace(" 5, 5, 16, 16,", " 1, 5, 16, 16,"), csv[2]])
    assert quick.compare(base, state(H200, query_text=idle)) == []
    worse = "\n".join([csv[0], csv[1], csv[2].replace(" 5, 5, 16, 16,", " 4, 4, 8, 16,")])
    assert messages(quick.compare(base, state(H200, query_text=worse))) == [
        f"GPU1 00000000:00:07.0 PCIe width x8 (was x16 {AT})",
        f"GPU1 00000000:00:07.0 PCIe max generation Gen4 (was Gen5 {AT})",
    ]


def test_a_gpu_gone_and_a_gpu_replaced_are_named_by_bus_id_and_uuid():
    base = baseline(state(H200))
    now = copy.deepcopy(base["node"])
    gone = now["gpus"].pop(1)
    assert messages(quick.compare(base, now)) == [
        f"GPU1 00000000:00:07.0 ({gone['uuid']}) gone: nvidia-smi lists 1 GPU(s), 2 {AT}"
    ]
    swapped = copy.deepcopy(base["node"])
    swapped["gpus"][0]["uuid"] = "GPU-new"
    [found] = quick.compare(base, swapped)
    assert found["kind"] == "gpu" and "is GPU-new, was GPU-47e4f408" in found["message"]


def test_a_link_class_that_changed_is_named():
    base = baseline(state(H200))
    text = (H200 / "topo_m.txt").read_text().replace("NV18", "NV12")
    now = state(H200, topo_text=text)
    assert messages(quick.compare(base, now)) == [f"GPU0-GPU1 link NV12 (was NV18 {AT})"]


def test_ports_watched_are_active_rails_up_physical_interfaces_and_the_socket_device():
    hdr = state(H100, sysfs="ndr8_healthy")
    watched = sorted(p["name"] for p in hdr["ports"] if p["watched"])
    assert watched == ["eno1", *(f"mlx5_{i}:1" for i in range(8))]  # not the IPoIB netdevs
    veth = quick.node_state(
        None, probe_nics.parse_nic_facts(probe_nics.read_tree(str(SYSFS / "testbed_veth")))
    )
    assert [(p["name"], p["watched"], p["gbps"]) for p in veth["ports"]] == [("host0", True, 10.0)]
    base = baseline(veth)
    down = copy.deepcopy(veth)
    down["ports"][0]["up"] = False
    assert messages(quick.compare(base, down)) == [f"NIC host0 down (was up at 10 Gb/s {AT})"]
    gone = dict(veth, ports=[])
    assert messages(quick.compare(base, gone)) == [f"NIC host0 missing (was up at 10 Gb/s {AT})"]


def test_gpu_health_findings_that_call_for_action_fail_and_monitor_does_not():
    """In the shape wireup.probe.gpuhealth gives them: the GPU named by its identity ({index, ...})."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth

    gpu3 = {"index": 3, "bus_id": "00000000:19:00.0", "uuid": "GPU-3", "serial": "1653724057182"}
    findings = [
        gpuhealth.gpu_finding(gpu3, "gpu_row_remap_pending", "pending row remap"),
        gpuhealth.gpu_finding(dict(gpu3, index=2), "gpu_ecc_corrected_growing", "corrected ECC up"),
        {"gpu": {}, "code": "x", "remediation": "isolate"},
    ]
    found = quick.gpu_health_problems(findings)
    assert messages(found) == ["GPU3 reset: pending row remap", "GPU health isolate: x"]
    now = state(H200)
    result = quick.result("node1", baseline(now), now, found={"problems": found})
    assert result["line"].startswith("wireup-check: FAIL node1: GPU3 reset: pending row remap (+1 more")


def test_benchmark_below_the_tolerance_fails_and_without_a_figure_it_is_not_judged():
    figure = {"collective": "all_reduce", "size": 1 << 30, "busbw": 300.0}
    measured = {"collective": "all_reduce", "size": 1 << 30, "busbw": 200.0, "error": ""}
    [found] = quick.bench_problem(figure, measured, 0.2, AT)
    assert found["message"] == (
        f"all_reduce at 1073741824 bytes 200.0 GB/s, 67% of 300.0 GB/s {AT} (tolerance 20%)"
    )
    assert quick.bench_problem(figure, dict(measured, busbw=250.0), 0.2, AT) == []
    assert quick.bench_problem({}, measured, 0.2, AT) == []
    [broken] = quick.bench_problem(figure, dict(measured, busbw=None, error="rc 124"), 0.2, AT)
    assert broken["message"].endswith("failed: rc 124")


def test_no_baseline_passes_or_fails_as_configured_and_says_why():
    now = state(H200)
    kept = quick.result("node9", None, now)
    assert (kept["verdict"], kept["exit"]) == ("PASS", 0)
    assert "no baseline (node9 has not passed bench.yml since wireup-check was installed" in kept["line"]
    required = quick.result("node9", None, now, require_baseline=True)
    assert (required["verdict"], required["exit"]) == ("NO_BASELINE", 3)
    assert required["line"].startswith("wireup-check: NO_BASELINE node9: no baseline")


def test_errors_fail_closed_before_anything_else():
    now = state(H200)
    result = quick.result("n", baseline(now), now, found={"errors": ["cannot read the baseline x"]})
    assert (result["verdict"], result["exit"]) == ("ERROR", 2)
    assert (
        result["line"] == "wireup-check: ERROR n: cannot read the baseline x (cannot check: failing closed)"
    )


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d.update(kind="other"), "not a wireup-check-baseline document"),
        (lambda d: d.update(schema=99), "schema 99"),
        (lambda d: d["node"].update(gpus={}), "node.gpus is not a list of entries"),
        (lambda d: d.pop("bench"), "no node or bench part"),
        (lambda d: d.update(time="yesterday"), "no time"),
    ],
)
def test_a_damaged_baseline_is_refused(edit, problem):
    doc = baseline(state(H200))
    edit(doc)
    assert problem in quick.baseline_problem(doc)
    assert quick.baseline_problem([]) == "not a wireup-check-baseline document"


def test_bench_part_keeps_the_passing_records_figure_and_refuses_other_verdicts():
    record = json.loads((H200 / "bench_record_2026-11-29_healthy.json").read_text())
    build = {"bin_dir": "/opt/wireup/nccl-tests/build", "ld_library_path": "/x/nccl/lib"}
    part = quick.bench_part(record, build, 1 << 30)
    assert part["run_id"] == record["run_id"] and part["gpu_count"] == 2
    assert part["links"] == [("GPU0", "GPU1", "NV18")]
    assert part["figure"]["size"] == 1 << 30 and 200 < part["figure"]["busbw"] < 400
    assert part["nccl_tests"] == build
    assert quick.bench_part(record, None, 3)["figure"] == {}  # no row at 3 bytes
    with pytest.raises(ValueError, match="not PASS"):
        quick.bench_part(dict(record, verdict="FAIL"), build, 1 << 30)
    now = state(H200)
    assert quick.record_mismatch(json.loads(json.dumps(part)), now) == ""
    assert "1 GPU(s) now, the bench record 2" in quick.record_mismatch(part, dict(now, gpus=now["gpus"][:1]))
    other = dict(part, links=[["GPU0", "GPU1", "SYS"]])
    assert "link classes" in quick.record_mismatch(other, now)


def test_gpus_not_read_are_not_compared_and_nvidia_smis_problem_names_the_part():
    base = baseline(state(H200))
    unread = dict(state(H200), gpus=None)
    assert quick.compare(base, unread) == []
    smi = {
        "kind": "nvidia_smi",
        "part": "nvidia-smi topo -m",
        "message": "nvidia-smi topo -m failed (exit code 255): NVML",
    }
    result = quick.result("n", base, unread, found={"problems": [smi]})
    assert result["line"] == "wireup-check: FAIL n: nvidia-smi topo -m failed (exit code 255): NVML"
    assert quick.reason(result) == "nvidia-smi topo -m failed (exit code 255): NVML"
    gpu_less = quick.baseline_doc("c1", {"run_id": "r"}, dict(unread, gpus=None))
    assert gpu_less["node"]["gpus"] == [] and quick.baseline_problem(gpu_less) == ""


def test_a_drain_says_the_worst_part_or_that_the_check_could_not_judge():
    """Issue 35 item 1: Slurm's reason for an ERROR says wireup-check could not check, and why."""
    now = state(H200)
    base = baseline(now)
    error = quick.result("n2", None, None, found={"errors": ["the baseline /b is not JSON (x)"]})
    assert (
        quick.drain_finding(error)
        == "wireup-check ERROR n2: could not check: the baseline /b is not JSON (x)"
    )
    down = state(H200, nvlink_text=links_down((H200 / "nvlink_s.txt").read_text(), 1, 3))
    fail = quick.result("n2", base, down)
    assert quick.drain_finding(fail) == quick.reason(fail) == fail["problems"][0]["message"]


def test_a_result_takes_only_the_extras_its_type_names():
    with pytest.raises(TypeError, match="takes no gpu"):
        quick.result("n", None, None, time=1.0, gpu=[])
    done = quick.result("n", None, None, time=1.0)
    assert set(done) == set(quick.CheckRun.__required_keys__)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda b: b["node"]["links"].append({"a": "GPU0", "b": "GPU1"}),
            "an entry of node.links has no class",
        ),
        (lambda b: b["node"]["ports"].append({"up": True}), "an entry of node.ports has no name"),
        (lambda b: b["bench"].update(figure=[]), "bench.figure is not an object"),
        (lambda b: b.update(gpu_health=3), "gpu_health is not a health read"),
    ],
)
def test_a_baseline_whose_entries_compare_cannot_read_is_refused(edit, said):
    doc = baseline(state(H200, sysfs="ndr8_healthy"))
    assert quick.baseline_problem(doc) == ""
    edit(doc)
    assert quick.baseline_problem(doc) == said
