"""wireup.judge.gpujudge: every GPU against its model's spec, its peers across the cluster and its own last
passing run (keyed by UUID), with its health, throttling and PCIe sharing. The GPUs are our 2x H200's
health read (tests/fixtures/h200x2) copied under other serials, UUIDs and slots; the figures are
written."""

import copy
import cProfile
import gc
import pathlib
import pstats

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import gpu_trial
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpujudge, gpuspec
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth

H200_XML = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "h200x2" / "nvidia_smi_q.xml"
TEMPLATE = gpuhealth.parse(H200_XML.read_text())["gpus"][0]
PEAK = gpuspec.peaks("H200")
# A healthy H200's figures (written: what the efficiencies of gpuspec expect, with some margin).
HEALTHY = {
    "gemm_bf16_flops": 0.80 * PEAK["bf16"],
    "gemm_fp16_flops": 0.76 * PEAK["fp16"],
    "gemm_tf32_flops": 0.76 * PEAK["tf32"],
    "gemm_fp8_flops": 0.66 * PEAK["fp8"],
    "hbm_copy_bytes_per_second": 0.82 * PEAK["memory"],
    "h2d_bytes_per_second": 53e9,
    "d2h_bytes_per_second": 53e9,
    "h2d_concurrent_bytes_per_second": 52e9,
    "d2h_concurrent_bytes_per_second": 52e9,
}


def stats(median):
    return {
        "median": median,
        "min": median * 0.99,
        "max": median * 1.01,
        "mean": median,
        "stdev": 1.0,
        "samples": 40,
    }


def uuid_of(serial):
    """A UUID in NVML's grammar made from a serial ('GPU-24010003-0000-4000-8000-653724010003')."""
    return f"GPU-{serial[-8:]:0>8}-0000-4000-8000-{serial[-12:]:0>12}"


def gpu(index, serial, name="NVIDIA H200", bus=None):
    out = copy.deepcopy(TEMPLATE)
    out.update(index=index, serial=serial, uuid=uuid_of(serial), name=name)
    out["bus_id"] = bus or f"00000000:{0x18 + index:02X}:00.0"
    return out


def node(gpus, figures=None, path=None):
    """The judge's input of one node: the health read and a fingerprint document."""
    fp_gpus = []
    for g in gpus:
        values = {**HEALTHY, **(figures or {}).get(g["index"], {})}
        fp_gpus.append(
            {
                "index": g["index"],
                "uuid": g["uuid"],
                "bus_id": g["bus_id"],
                "name": g["name"],
                "figures": {k: stats(v) for k, v in values.items() if v is not None},
                "pci_path": (path or {}).get(g["index"]),
                "throttle": {},
            }
        )
    return {
        "health": {"gpus": gpus, "attached_gpus": len(gpus)},
        "fingerprint": {"wireup_gpu_fingerprint": 1, "mode": "cuda", "gpus": fp_gpus},
        "findings": [],
    }


def eight(host_tag="1", figures=None):
    return node([gpu(i, f"16537240{host_tag}{i:04d}") for i in range(8)], figures)


def codes(gpu_entry):
    return [(f["code"], f["severity"], f["remediation"]) for f in gpu_entry["findings"]]


def test_healthy_node_passes_with_both_ratios():
    [section] = gpujudge.judge_run({"node1": eight()}).values()
    assert section["verdict"] == "PASS" and section["findings"] == [] and section["sharing"] == []
    first = section["gpus"][0]
    assert first["model"] == "H200" and first["verdict"] == "PASS" and first["findings"] == []
    bf16 = first["figures"]["gemm_bf16_flops"]
    assert bf16["spec"]["raw_ratio"] == pytest.approx(0.80) and bf16["spec"]["ratio"] == pytest.approx(
        0.80 / gpuspec.EFFICIENCY["gemm_bf16_flops"], abs=1e-3
    )
    assert (
        bf16["spec"]["verdict"] == "PASS"
        and bf16["peer"]["verdict"] == "PASS"
        and bf16["peer"]["ratio"] == 1.0
    )
    assert bf16["baseline"] == {"verdict": "N/A", "why": "no passing run of this GPU yet"}
    h2d = first["figures"]["h2d_bytes_per_second"]["spec"]
    assert h2d["basis"] == "PCIe Gen5 x16 = 63.0 GB/s" and h2d["verdict"] == "PASS"
    concurrent = first["figures"]["h2d_concurrent_bytes_per_second"]
    assert concurrent["spec"]["verdict"] == "N/A" and concurrent["of_alone"] == pytest.approx(
        52 / 53, abs=1e-3
    )


@pytest.mark.parametrize(
    ("share", "verdict", "severity", "remediation"),
    [(0.85, "WARN", "warning", "monitor"), (0.75, "FAIL", "critical", "isolate")],
)
def test_a_slow_gpu_among_eight_is_named(share, verdict, severity, remediation):
    slow = {5: {"gemm_bf16_flops": share * HEALTHY["gemm_bf16_flops"]}}
    [section] = gpujudge.judge_run({"node1": eight(figures=slow)}).values()
    gpus = section["gpus"]
    assert [g["verdict"] for g in gpus].count("PASS") == 7 and gpus[5]["verdict"] == verdict
    [peer] = [f for f in gpus[5]["findings"] if f["code"] == "gpu_slower_than_peers"]
    assert (peer["severity"], peer["remediation"]) == (severity, remediation)
    assert peer["message"].startswith("node1 GPU5 (00000000:1D:00.0, GPU-24010005, S/N 1653724010005)")
    assert f"{(1 - share) * 100:.0f}% below the median of 8 H200 GPUs (791.5 TFLOPS)" in peer["message"]
    assert peer["gpu"]["serial"] == "1653724010005" and section["verdict"] == verdict
    assert gpus[5]["figures"]["gemm_bf16_flops"]["peer"]["ratio"] == pytest.approx(share)
    assert not [f for g in gpus[:5] + gpus[6:] for f in g["findings"]]


def test_a_whole_node_slow_against_the_cluster_is_named_as_the_node():
    slow = {i: {"gemm_bf16_flops": 0.85 * HEALTHY["gemm_bf16_flops"]} for i in range(8)}
    sections = gpujudge.judge_run({"node1": eight("1"), "node2": eight("2", slow), "node3": eight("3")})
    node2 = sections["node2"]
    [named] = node2["findings"]
    assert (
        named["code"] == "gpu_node_slower_than_cluster"
        and named["severity"] == "warning"
        and named["gpu"] == {}
    )
    assert (
        named["message"].startswith("node2: every H200 GPU is slow on gemm bf16")
        and "15% below the median of 3 H200 nodes (791.5 TFLOPS)" in named["message"]
    )
    # Its GPUs are compared with their own node's median: none is named on its own.
    assert not [f for g in node2["gpus"] for f in g["findings"]]
    assert {g["figures"]["gemm_bf16_flops"]["peer"]["reference"] for g in node2["gpus"]} == {
        "median of node2's 8 GPUs"
    }
    assert node2["gpus"][0]["figures"]["gemm_bf16_flops"]["peer"]["ratio"] == pytest.approx(0.85)
    assert (
        node2["verdict"] == "WARN" and sections["node1"]["verdict"] == sections["node3"]["verdict"] == "PASS"
    )


def test_a_slow_gpu_on_a_slow_node_is_still_named():
    slow = {i: {"gemm_bf16_flops": 0.85 * HEALTHY["gemm_bf16_flops"]} for i in range(8)}
    slow[3] = {"gemm_bf16_flops": 0.6 * HEALTHY["gemm_bf16_flops"]}
    node2 = gpujudge.judge_run({"node1": eight("1"), "node2": eight("2", slow)})["node2"]
    assert [f["code"] for f in node2["findings"]] == ["gpu_node_slower_than_cluster"]
    # GPU3 against its own node's median (0.6 / 0.85: 29% slower), named on its own; two nodes:
    # the node against the better one.
    [peer] = [f for f in node2["gpus"][3]["findings"] if f["code"] == "gpu_slower_than_peers"]
    assert "29% below the median of node2's 8 GPUs" in peer["message"]
    assert (
        "15% below node1's 791.5 TFLOPS" in node2["findings"][0]["message"] and peer["severity"] == "critical"
    )
    assert [i for i, g in enumerate(node2["gpus"]) if g["findings"]] == [3]


def test_an_unknown_model_gets_no_spec_verdict_and_says_so():
    gpus = [gpu(i, f"90000000000{i}", name="NVIDIA Quantum X9") for i in range(2)]
    [section] = gpujudge.judge_run(
        {"node1": node(gpus, {1: {"gemm_bf16_flops": 0.5 * HEALTHY["gemm_bf16_flops"]}})}
    ).values()
    spec = section["gpus"][0]["figures"]["gemm_bf16_flops"]["spec"]
    assert spec == {"verdict": "N/A", "basis": "unknown model 'NVIDIA Quantum X9': no spec to judge against"}
    assert section["gpus"][0]["model"] is None and section["gpus"][0]["verdict"] == "PASS"
    # ... its peers still judge it (the same product name), and the PCIe link still has a spec.
    assert (
        section["gpus"][1]["verdict"] == "FAIL"
        and section["gpus"][1]["figures"]["h2d_bytes_per_second"]["spec"]["verdict"] == "PASS"
    )


def test_a_gpu_moved_between_slots_keeps_its_baseline():
    moved = gpu(6, "1653724010003", bus="00000000:2A:00.0")  # was node1 GPU3 at 00000000:1B:00.0
    before = gpujudge.judge_run({"node1": eight("1")})["node1"]["gpus"][3]
    before["verdict"] = "PASS"
    baselines = {uuid_of("1653724010003").lower(): ("20261201T100000Z", "node1", before)}
    now = node(
        [gpu(i, f"16537240{9}{i:04d}") for i in range(6)] + [moved],
        {6: {"gemm_bf16_flops": 0.85 * HEALTHY["gemm_bf16_flops"]}},
    )
    section = gpujudge.judge_run({"node4": now}, baselines)["node4"]
    entry = section["gpus"][6]
    base = entry["figures"]["gemm_bf16_flops"]["baseline"]
    assert (
        base["moved"] is True
        and base["host"] == "node1"
        and base["index"] == 3
        and base["run_id"] == "20261201T100000Z"
    )
    assert base["change"] == pytest.approx(-0.15) and base["verdict"] == "WARN"
    [drop] = [f for f in entry["findings"] if f["code"] == "gpu_baseline_drop"]
    assert (
        "then node1 GPU3 (00000000:1B:00.0)" in drop["message"]
        and "15% below its last passing run" in drop["message"]
    )
    assert entry["figures"]["hbm_copy_bytes_per_second"]["baseline"]["verdict"] == "PASS"
    # The other GPUs have no baseline of their own.
    assert section["gpus"][0]["figures"]["gemm_bf16_flops"]["baseline"]["verdict"] == "N/A"


@pytest.mark.parametrize(("share", "verdict"), [(1.0, "PASS"), (0.85, "WARN"), (0.65, "FAIL")])
def test_a_one_gpu_node_gets_a_verdict(share, verdict):
    one = node(
        [gpu(0, "1653724057182")],
        {0: {"gemm_bf16_flops": share * gpuspec.EFFICIENCY["gemm_bf16_flops"] * PEAK["bf16"]}},
    )
    section = gpujudge.judge_run({"h200x1": one})["h200x1"]
    assert section["verdict"] == verdict
    assert section["gpus"][0]["figures"]["gemm_bf16_flops"]["peer"]["verdict"] == "N/A"


def test_an_implausible_figure_fails_and_is_never_a_baseline():
    section = gpujudge.judge_run(
        {"node1": node([gpu(0, "1")], {0: {"gemm_bf16_flops": 2.0 * PEAK["bf16"]}})}
    )["node1"]
    entry = section["gpus"][0]
    assert entry["verdict"] == "FAIL" and entry["figures"]["gemm_bf16_flops"]["spec"]["implausible"] is True
    [found] = [f for f in entry["findings"] if f["code"] == "gpu_figure_implausible"]
    assert found["severity"] == "critical" and "measurement error" in found["message"]
    assert "implausible" in gpu_trial.entry_problem(entry)


def test_health_findings_join_the_gpu_and_growth_needs_the_baseline():
    sick = gpu(1, "1653724060308")
    sick["remapped_rows"].update(pending=True, uncorrectable=1)
    sick["pcie"]["replay_counter"] = 40
    old = copy.deepcopy(sick)
    old["pcie"]["replay_counter"] = 2
    baseline = {
        uuid_of("1653724060308").lower(): (
            "20261201T100000Z",
            "node1",
            {"health": old, "figures": {}, "bus_id": sick["bus_id"], "index": 1},
        )
    }
    section = gpujudge.judge_run({"node1": node([gpu(0, "1653724057182"), sick])}, baseline)["node1"]
    assert ("gpu_row_remap_pending", "critical", "reset") in codes(section["gpus"][1])
    assert ("gpu_pcie_replays_growing", "warning", "monitor") in codes(section["gpus"][1])
    assert section["gpus"][1]["verdict"] == "FAIL" and section["gpus"][1]["verdicts"]["health"] == "FAIL"
    assert section["verdict"] == "FAIL" and section["gpus"][0]["verdict"] == "PASS"


def test_throttling_from_the_driver_counters_and_from_samples():
    g = {
        "throttle_sampled": {
            "gemm_bf16_flops": {
                "window_s": 25.0,
                "reasons_s": {"hw_thermal_slowdown": 4.0, "sw_power_cap": 20.0},
            },
            "hbm": {"window_s": 25.0, "reasons_s": {}},
        }
    }
    sampled = gpujudge.throttle(g)
    assert sampled == {
        "window_s": 50.0,
        "reasons_s": {"hw_thermal_slowdown": 4.0, "sw_power_cap": 20.0},
        "source": "sampled",
    }
    counted = gpujudge.throttle(
        g,
        {"hw_thermal_slowdown": 1_000_000, "sw_power_cap": 0},
        {"hw_thermal_slowdown": 7_500_000, "sw_power_cap": 9_000_000},
    )
    assert counted["source"] == "counters" and counted["reasons_s"] == {
        "hw_thermal_slowdown": 6.5,
        "sw_power_cap": 9.0,
    }
    entry = dict(gpu(0, "1"), throttle=counted)
    [found] = gpujudge._throttle_findings("node1", entry)
    assert (
        found["code"] == "gpu_throttled"
        and "hw_thermal_slowdown 6.5 s" in found["message"]
        and found["severity"] == "warning"
    )
    # Power capping alone (a GEMM at the board's power limit) is shown, not a finding.
    assert (
        gpujudge._throttle_findings(
            "node1",
            dict(entry, throttle={"window_s": 50, "reasons_s": {"sw_power_cap": 40}, "source": "sampled"}),
        )
        == []
    )
    assert (
        gpujudge._throttle_findings(
            "node1",
            dict(entry, throttle={"window_s": 75, "reasons_s": {"hw_slowdown": 0.2}, "source": "sampled"}),
        )
        == []
    )


def test_gpus_behind_one_root_port_share_its_link():
    paths = {
        i: ["pci0000:00", f"0000:00:0{1 + i // 2}.0", f"0000:0{1 + i // 2}:00.0", f"0000:0{2 + i}:00.0"]
        for i in range(4)
    }
    gpus = [gpu(i, str(i)) for i in range(4)]
    section = gpujudge.judge_run(
        {"node1": node(gpus, {0: {"h2d_concurrent_bytes_per_second": 27e9}}, paths)}
    )["node1"]
    assert section["sharing"] == [
        {"port": "0000:00:01.0", "switch": "0000:01:00.0", "gpus": [0, 1]},
        {"port": "0000:00:02.0", "switch": "0000:02:00.0", "gpus": [2, 3]},
    ]
    concurrent = section["gpus"][0]["figures"]["h2d_concurrent_bytes_per_second"]
    assert concurrent["shared_with"] == [1] and concurrent["of_alone"] == pytest.approx(27 / 53, abs=1e-3)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"spec_pass_ratio": 1.2}, "gpu_trial_spec_pass_ratio must be a fraction in (0, 1)"),
        ({"spec_warn_ratio": 0.95}, "must not exceed gpu_trial_spec_pass_ratio"),
        ({"warn_tolerance": 0.3}, "gpu_trial_warn_tolerance (0.3) must not exceed gpu_trial_fail_tolerance"),
        (
            {"efficiency": {"gemm_int4_flops": 0.5}},
            "gpu_trial_efficiency.gemm_int4_flops: not a judged figure",
        ),
        (
            {"efficiency": {"gemm_fp8_flops": 1.5}},
            "gpu_trial_efficiency.gemm_fp8_flops must be a fraction in (0, 1]",
        ),
    ],
)
def test_bad_thresholds_name_the_variable(settings, message):
    assert any(message in e for e in gpujudge.settings_errors(settings))
    with pytest.raises(ValueError, match="gpu_trial_"):
        gpujudge.judge_run({}, settings=settings)


def test_spec_table_matches_product_names():
    names = {
        "NVIDIA H100 80GB HBM3": "H100 SXM",
        "NVIDIA H100 PCIe": "H100 PCIe",
        "NVIDIA H100 NVL": "H100 NVL",
        "NVIDIA H200": "H200",
        "NVIDIA H200 NVL": "H200 NVL",
        "NVIDIA B200": "B200",
        "NVIDIA GB200": None,
        "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
        "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
        "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
        "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
        "NVIDIA L40S": "L40S",
        "NVIDIA L4": "L4",
        "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
        "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
        "NVIDIA A10": "A10",
        "NVIDIA A10G": None,
        "Tesla T4": None,
        "NVIDIA H800": None,
    }
    assert {n: gpuspec.model_of(n) for n in names} == names
    assert gpuspec.peaks("A100 SXM4 80GB")["fp8"] is None and gpuspec.peaks("H200")["memory"] == 4.8e12


def test_one_fast_gpu_does_not_make_the_fleet_slow():
    # The fastest of a fleet's GPUs is an extreme of their noise (or a measurement just under the
    # plausibility bound): judged against it, every healthy GPU of the run was WARN. Against the
    # model's median (computed once per model and figure) only the GPUs off the fleet are named.
    fast = {2: {"gemm_bf16_flops": 1.15 * HEALTHY["gemm_bf16_flops"]}}
    slow = {6: {"gemm_bf16_flops": 0.75 * HEALTHY["gemm_bf16_flops"]}}
    nodes = {f"node{i}": eight(str(i), fast if i == 0 else slow if i == 3 else None) for i in range(6)}
    sections = gpujudge.judge_run(nodes)
    assert {h: s["verdict"] for h, s in sections.items() if s["verdict"] != "PASS"} == {"node3": "FAIL"}
    [peer] = [f for f in sections["node3"]["gpus"][6]["findings"] if f["code"] == "gpu_slower_than_peers"]
    assert "25% below the median of 48 H200 GPUs" in peer["message"]
    bf16 = sections["node1"]["gpus"][0]["figures"]["gemm_bf16_flops"]["peer"]
    assert bf16["reference"] == "median of 48 H200 GPUs" and bf16["median"] == HEALTHY["gemm_bf16_flops"]
    assert bf16["spread"] == 0.0 and bf16["best_gpu"].startswith("node0 GPU2")


def _peer_calls(hosts):
    sections = {f"n{i}": gpujudge.prepare_node(f"n{i}", eight(f"{i:02d}"), {}, gpujudge.DEFAULT_SETTINGS)
                for i in range(hosts)}  # fmt: skip
    profile = cProfile.Profile()
    profile.enable()
    gpujudge.judge_peers(sections, gpujudge.DEFAULT_SETTINGS)
    profile.disable()
    return pstats.Stats(profile).total_calls


def test_the_peer_judgement_is_linear_in_the_gpus():
    # Every GPU against every other was O(G^2): 4x the nodes made 16x the Python calls.
    assert _peer_calls(32) / _peer_calls(8) <= 4 * 1.125


def _sections(hosts):
    return {f"n{i}": gpujudge.prepare_node(f"n{i}", eight(f"{i:02d}"), {}, gpujudge.DEFAULT_SETTINGS)
            for i in range(hosts)}  # fmt: skip


def test_only_the_best_gpu_is_named_not_every_gpu_of_the_fleet(monkeypatch):
    """The reference names its best GPU; naming every GPU (its UUID read, short_name) cost a third
    of the step at 1,024 nodes (issue 39): the names made no longer grow with the fleet."""
    named = []
    real = gpujudge.short_name
    monkeypatch.setattr(gpujudge, "short_name", lambda host, gpu: named.append(host) or real(host, gpu))
    counts = []
    for hosts in (8, 32):
        sections = _sections(hosts)
        named.clear()  # prepare_node names each GPU it finds below its spec: none here
        gpujudge.judge_peers(sections, gpujudge.DEFAULT_SETTINGS)
        counts.append(len(named))
    assert counts[0] == counts[1] <= len(HEALTHY)
    peer = sections["n1"]["gpus"][0]["figures"]["gemm_bf16_flops"]["peer"]
    assert peer["best_gpu"] == real("n0", sections["n0"]["gpus"][0])  # all equal: the first is the best


def test_the_peer_judgement_runs_with_the_cyclic_collector_paused_and_restores_it(monkeypatch):
    """Each collection the judgement triggered walked the whole fleet's records (7x the CPU for 4x
    the nodes at 1,024, issue 39): the collector is paused while it judges (seen from inside, by
    the reference it computes per model and figure), on again after it, and a caller's paused
    collector stays paused."""
    seen = []
    real = gpujudge.peer_reference
    monkeypatch.setattr(gpujudge, "peer_reference", lambda *a: seen.append(gc.isenabled()) or real(*a))
    gpujudge.judge_peers(_sections(4), gpujudge.DEFAULT_SETTINGS)
    assert seen and not any(seen)
    assert gc.isenabled()
    gc.disable()
    try:
        gpujudge.judge_peers(_sections(2), gpujudge.DEFAULT_SETTINGS)
        assert not gc.isenabled()
    finally:
        gc.enable()
