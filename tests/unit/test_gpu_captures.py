"""Every GPU health capture of tests/fixtures/gpuhealth (real public ones and the cases written from
NVIDIA's documentation, sources in its README) judged through the path a bench run takes: the
read as wireup_gpu_health_info makes it (gpuhealth.read, then gpuhealth.answer), the node's fact
(gpu_trial.node_data), the controller's input (gpu_trial.node_inputs) and the run's judgement
(gpujudge.judge_run). Each case names the GPU verdict a person reading the capture would give and
the finding codes of the node and its GPUs."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import gpu_trial
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpujudge
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import gpu_trial as plans_gpu_trial
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth

HEALTH = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gpuhealth"
FIXTURES = HEALTH.parent
PLAN = {"notes": [], "dcgm_level": 0}
GB200_LSPCI = "lspci/gb200x4_gpud_lspci.txt"
XID79 = "synthetic/h200x2_kernel_log_xid79_written.txt"
H200 = "../h200x2/nvidia_smi_q.xml"

# capture: (evidence {lspci, kernel_log: fixture files}, GPU verdict, finding codes (sorted, unique))
# fmt: off
CASES = {
    # Real captures (public test data and issue text; ours: ../h200x2)
    H200: ({}, "PASS", []),
    "a100sxm4_telegraf_535.54.03_q_x.xml": ({}, "FAIL", ["gpu_lost", "gpu_persistence_off"]),
    "a100sxm4x8_azhpc_460.32.03_q.txt": ({}, "PASS", ["gpu_persistence_off"]),
    "a100sxm4x8_ml-engineering_510.73.08_q_pending_remap_elided.txt": (
        {}, "FAIL", ["gpu_ecc_corrected", "gpu_lost", "gpu_row_remap_pending", "gpu_row_remaps"]),
    "a10_gpud_535.129.03_q.txt": ({}, "FAIL", ["gpu_row_remap_pending", "gpu_row_remaps"]),
    "a10g_telegraf_515.105.01_q_x.xml": ({}, "WARN", ["gpu_persistence_off", "pcie_width_reduced"]),
    "gtx1070ti_telegraf_minimal_q_x.xml": ({}, "PASS", []),
    "h100x8_gpud_535.161.08_q_hw_power_brake.txt": ({}, "WARN", ["gpu_pcie_replays", "gpu_throttling_now"]),
    "h100x8_gpud_535.183.01_q.txt": ({}, "WARN", ["gpu_pcie_replays", "gpu_throttling_now"]),
    "h100x8_gpud_535.183.01_q_mangled.txt": ({}, "FAIL", ["gpu_lost", "gpu_pcie_replays"]),
    "quadrop400_telegraf_418.43_q_x.xml": ({}, "PASS", ["gpu_persistence_off", "pcie_gen_below_max"]),
    "rtx3090_telegraf_590.44.01_q_x_sw_power_cap.xml": ({}, "PASS", ["pcie_gen_below_max"]),
    "rtx4000sffada_telegraf_595.84_q_x.xml": ({}, "PASS", ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "rtx4090x8_gpud_535.154.05_q.txt": ({}, "PASS", ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "rtx4090x8_gpud_535.154.05_q_unknown_error.txt": ({}, "PASS", ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "rtxa5000x2_telegraf_590.44.01_q_x.xml": ({}, "PASS", ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "rtxpro6000bw_telegraf_590.44.01_q_x.xml": ({}, "PASS", ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "t4_telegraf_515.105.01_q_x.xml": ({}, "WARN", ["gpu_persistence_off", "pcie_width_reduced"]),
    "titanv_gpud_560.35.03_q.txt": ({}, "PASS", ["gpu_persistence_off", "pcie_gen_below_max"]),
    # Written from NVIDIA's documentation of the fields (synthetic/, the README says how)
    "synthetic/h200x16_580.159.04_q_x_1_of_16_listed_written.xml": ({}, "FAIL", ["gpu_lost"]),
    "synthetic/h200x2_580.159.04_q_x_gpu1_unknown_error_written.xml": ({}, "FAIL", ["gpu_lost"]),
    "synthetic/a100sxm4x8_460.32.03_q_gpu3_lost_written.txt": (
        {}, "FAIL", ["gpu_lost", "gpu_persistence_off"]),
    "synthetic/gb200x4_580.159.04_q_x_3_listed_written.xml": ({"lspci": GB200_LSPCI}, "FAIL", ["gpu_lost"]),
    H200 + " + Xid 79": ({"kernel_log": XID79}, "FAIL", ["gpu_lost"]),
    "synthetic/h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml": (
        {}, "FAIL", ["gpu_row_remap_pending", "gpu_row_remaps"]),
    "synthetic/a10_535.129.03_q_row_remap_failure_written.txt": (
        {}, "FAIL", ["gpu_row_remap_failure", "gpu_row_remap_pending", "gpu_row_remaps"]),
    "synthetic/a10_535.129.03_q_reset_required_written.txt": (
        {}, "FAIL", ["gpu_recovery_action", "gpu_row_remap_pending", "gpu_row_remaps"]),
    "synthetic/t4_515.105.01_q_x_60_retired_pages_written.xml": (
        {}, "FAIL", ["gpu_persistence_off", "gpu_retired_pages_limit", "pcie_width_reduced"]),
    "synthetic/t4_515.105.01_q_x_page_retirement_pending_written.xml": (
        {}, "FAIL", ["gpu_page_retirement_pending", "gpu_persistence_off", "gpu_retired_pages",
                     "pcie_width_reduced"]),
    "synthetic/h100_535.161.08_q_counters_written.txt": (
        {}, "WARN", ["gpu_pcie_replays", "gpu_throttling_now"]),
}
# fmt: on


def judge(name):
    """(GPU verdict, finding codes) of a capture as a bench run judges it."""
    evidence, _verdict, _codes = CASES[name]
    text = (HEALTH / name.split(" + ")[0]).read_text(encoding="utf-8")
    read = gpuhealth.read(text, **{k: (HEALTH / v).read_text() for k, v in evidence.items()})
    registered = gpuhealth.answer(read, "")  # what wireup_gpu_health_info returns
    fact = plans_gpu_trial.node_data(PLAN, "20261207T000000Z", "n1", reads=[registered, None])
    section = gpujudge.judge_run({"n1": gpu_trial.node_inputs("n1", fact)})["n1"]
    found = [f for g in section["gpus"] for f in g["findings"]] + section["findings"]
    return section["verdict"], sorted({f["code"] for f in found}), found


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_capture_is_judged_as_a_person_would(name):
    verdict, codes, found = judge(name)
    assert (verdict, codes) == CASES[name][1:]
    for f in found:
        assert f["remediation"] in gpuhealth.REMEDIATIONS and "\n" not in f["message"]


def test_every_capture_of_the_fixtures_is_judged_here():
    judged = {name.split(" + ")[0] for name in CASES}
    reads = {
        str(p.relative_to(HEALTH))
        for p in HEALTH.rglob("*")
        if p.is_file() and "_q" in p.name and not p.name.endswith(".json")
    }
    assert reads <= judged, sorted(reads - judged)


def test_a_lost_gpu_is_named_with_its_bus_id_and_the_fix():
    _verdict, _codes, found = judge("synthetic/a100sxm4x8_460.32.03_q_gpu3_lost_written.txt")
    [lost] = [f for f in found if f["code"] == "gpu_lost"]
    assert (lost["severity"], lost["remediation"], lost["source"]) == ("critical", "reboot", "gpu_health")
    assert "1 of 8 GPU(s)" in lost["message"] and "00000004:00:00.0: GPU is lost" in lost["message"]
    assert "reboot the node" in lost["message"] and "reseat" in lost["message"]


def test_one_of_sixteen_listed_names_how_many_are_missing():
    _verdict, _codes, found = judge("synthetic/h200x16_580.159.04_q_x_1_of_16_listed_written.xml")
    [lost] = [f for f in found if f["code"] == "gpu_lost"]
    assert "15 of 16 GPU(s)" in lost["message"] and "bus ids not known" in lost["message"]


def test_lspci_and_the_kernel_log_name_the_missing_bus_ids():
    *_rest, found = judge("synthetic/gb200x4_580.159.04_q_x_3_listed_written.xml")
    [lost] = [f for f in found if f["code"] == "gpu_lost"]
    assert (
        "1 of 4 GPU(s)" in lost["message"] and "0019:01:00" in lost["message"] and "lspci" in lost["message"]
    )
    *_rest, found = judge(H200 + " + Xid 79")
    [lost] = [f for f in found if f["code"] == "gpu_lost"]
    assert "0000:00:07" in lost["message"] and "Xid 79" in lost["message"]


def test_a_real_kernel_log_with_another_xid_names_no_lost_gpu():
    """leptonai/gpud's dmesg of a Dell XE9680 (8x H100) whose GPU4 timed out on GSP RPCs (Xid 119):
    not a GPU fallen off the bus, so the health read names none lost; the topology check (the
    kernel log's rule, health.findings) names the Xid, critical."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import health

    log = (HEALTH / "kernel_log/h100x8_gpud_dmesg_xid119_gsp_timeout.log").read_text()
    read = gpuhealth.read((FIXTURES / "h200x2" / "nvidia_smi_q.xml").read_text(), kernel_log=log)
    assert read["fallen"] == [] and gpuhealth.node_findings(read) == []
    [xid] = [f for f in health.findings(kernel_log=log) if f["code"] == "xid"]
    assert xid["severity"] == "critical" and "PCI 0000:9b:00: Xid 119 x5" in xid["message"]
