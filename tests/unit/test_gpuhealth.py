"""wireup.probe.gpuhealth on real nvidia-smi -q / -q -x captures of many GPU generations and drivers
(tests/fixtures/gpuhealth, sources in its README; ours in tests/fixtures/h200x2), and on cut-off,
mangled and edited ones. "Not reported" is None and never a finding."""

import pathlib
import re

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth, health

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
HEALTH = FIXTURES / "gpuhealth"
H200 = FIXTURES / "h200x2" / "nvidia_smi_q.xml"


def read(name):
    return (HEALTH / name).read_text(encoding="utf-8")


# file: (format, driver, GPUs listed, attached, GPU0 name, GPU0 serial, GPU0 bus id,
#        (the findings' codes of GPU0 and the node, sorted, without duplicates))
# fmt: off
CAPTURES = {
    "a100sxm4_telegraf_535.54.03_q_x.xml": (
        "xml", "535.54.03", 1, 4, "NVIDIA A100-SXM4-80GB", "1650522003820", "00000000:01:00.0",
        ["gpu_lost", "gpu_persistence_off"]),
    # Serial 0000000000000 (a cloud GPU's placeholder) is no serial: None.
    "t4_telegraf_515.105.01_q_x.xml": (
        "xml", "515.105.01", 1, 1, "Tesla T4", None, "00000000:00:1E.0",
        ["gpu_persistence_off", "pcie_width_reduced"]),
    "a10g_telegraf_515.105.01_q_x.xml": (
        "xml", "515.105.01", 1, 1, "NVIDIA A10G", None, "00000000:00:1E.0",
        ["gpu_persistence_off", "pcie_width_reduced"]),
    "quadrop400_telegraf_418.43_q_x.xml": (
        "xml", "418.43", 1, 1, "Quadro P400", "0424418054852", "00000000:43:00.0",
        ["gpu_persistence_off", "pcie_gen_below_max"]),
    "gtx1070ti_telegraf_minimal_q_x.xml": (
        "xml", None, 1, None, "GeForce GTX 1070 Ti", None, "00000000:01:00.0", []),
    "rtx3090_telegraf_590.44.01_q_x_sw_power_cap.xml": (
        "xml", "590.44.01", 1, 1, "NVIDIA GeForce RTX 3090", None, "00000000:09:00.0",
        ["pcie_gen_below_max"]),
    "rtxa5000x2_telegraf_590.44.01_q_x.xml": (
        "xml", "590.44.01", 2, 2, "NVIDIA RTX A5000", "0123456789012", "00000000:81:00.0",
        ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "rtxpro6000bw_telegraf_590.44.01_q_x.xml": (
        "xml", "590.44.01", 1, 1, "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "0123456789012",
        "00000000:61:00.0", ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "rtx4000sffada_telegraf_595.84_q_x.xml": (
        "xml", "595.84", 1, 1, "NVIDIA RTX 4000 SFF Ada Generation", "REDACTED", "00000000:06:00.0",
        ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "h100x8_gpud_535.161.08_q_hw_power_brake.txt": (
        "text", "535.161.08", 8, 8, "NVIDIA H100 80GB HBM3", "1650124031592", "00000000:19:00.0",
        ["gpu_pcie_replays", "gpu_throttling_now"]),
    # GPU2 of this capture has HW power brake and SW thermal slowdown active at the read.
    "h100x8_gpud_535.183.01_q.txt": (
        "text", "535.183.01", 8, 8, "NVIDIA H100 80GB HBM3", "1655022005478", "00000000:53:00.0",
        ["gpu_pcie_replays", "gpu_throttling_now"]),
    "h100x8_gpud_535.183.01_q_mangled.txt": (
        "text", "535.183.01", 1, 8, "NVIDIA H100 80GB HBM3", "1655022005478", "00000000:53:00.0",
        ["gpu_lost", "gpu_pcie_replays"]),
    "a10_gpud_535.129.03_q.txt": (
        "text", "535.129.03", 1, 1, "NVIDIA A10", "1324521052681", "00000000:07:00.0",
        ["gpu_row_remap_pending", "gpu_row_remaps"]),
    "titanv_gpud_560.35.03_q.txt": (
        "text", "560.35.03", 1, 1, "NVIDIA TITAN V", "0334517001520", "00000000:01:00.0",
        ["gpu_persistence_off", "pcie_gen_below_max"]),
    "rtx4090x8_gpud_535.154.05_q.txt": (
        "text", "535.154.05", 8, 8, "NVIDIA GeForce RTX 4090", None, "00000000:01:00.0",
        ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    # "Addressing Mode : Unknown Error" on every GPU: not reported, never a value.
    "rtx4090x8_gpud_535.154.05_q_unknown_error.txt": (
        "text", "535.154.05", 8, 8, "NVIDIA GeForce RTX 4090", None, "00000000:01:00.0",
        ["gpu_ecc_disabled", "pcie_gen_below_max"]),
    "a100sxm4x8_azhpc_460.32.03_q.txt": (
        "text", "460.32.03", 8, 8, "A100-SXM4-40GB", "1323120035212", "00000001:00:00.0",
        ["gpu_persistence_off"]),
    "a100sxm4x8_ml-engineering_510.73.08_q_pending_remap_elided.txt": (
        "text", "510.73.08", 1, 8, "NVIDIA A100-SXM4-80GB", None, "00000000:10:1C.0",
        ["gpu_ecc_corrected", "gpu_lost", "gpu_row_remap_pending", "gpu_row_remaps"]),
}
# fmt: on


def test_every_capture_is_listed_in_the_readme_and_tested():
    """Each file has its source in the README; every real read is here, and every read (real or
    written) is judged in test_gpu_captures."""
    readme = (HEALTH / "README.md").read_text()
    files = sorted(
        str(p.relative_to(HEALTH)) for p in HEALTH.rglob("*") if p.is_file() and p.name != "README.md"
    )
    for name in files:
        assert f"`{name}`" in readme, name
    real = {f for f in files if "/" not in f}
    assert real == set(CAPTURES)


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_real_captures(name):
    fmt, driver, listed, attached, gpu_name, serial, bus, codes = CAPTURES[name]
    parsed = gpuhealth.parse(read(name))
    assert parsed["format"] == fmt and parsed["driver_version"] == driver
    assert len(parsed["gpus"]) == listed and parsed["attached_gpus"] == attached
    gpu = parsed["gpus"][0]
    assert (gpu["index"], gpu["name"], gpu["serial"], gpu["bus_id"]) == (0, gpu_name, serial, bus)
    assert [g["index"] for g in parsed["gpus"]] == list(range(listed))
    found = gpuhealth.findings(parsed)
    assert sorted({f["code"] for f in found}) == codes
    for f in found:
        assert f["remediation"] in gpuhealth.REMEDIATIONS and f["source"] == "gpu_health"
        assert f["severity"] in ("critical", "warning", "info") and "\n" not in f["message"]


def test_h200_ours_every_field():
    """Our 2x H200 (driver 580.159.04): every field of the interface, read from the XML."""
    parsed = gpuhealth.parse(H200.read_text())
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["attached_gpus"]) == (
        "580.159.04",
        "13.0",
        2,
    )
    gpu = parsed["gpus"][1]
    assert gpu["uuid"] == "GPU-e3c81799-f8fd-1849-2aa3-67b5ba1b911e" and gpu["serial"] == "1653724060308"
    assert gpu["bus_id"] == "00000000:00:07.0" and gpu["persistence_mode"] is True and gpu["ecc_mode"] is True
    assert gpu["ecc"]["volatile"] == {
        "corrected": 0,
        "uncorrected": 0,
        "sram_corrected": 0,
        "sram_uncorrected": 0,
        "dram_corrected": 0,
        "dram_uncorrected": 0,
    }
    assert gpu["ecc"]["sram_threshold_exceeded"] is False and gpu["ecc"]["unrepairable_memory"] is False
    # H200 uses row remapping: page retirement is N/A (not reported), never a finding.
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert gpu["remapped_rows"]["pending"] is False and gpu["remapped_rows"]["banks"]["max"] == 3072
    assert gpu["recovery_action"] == "none"
    assert (
        gpu["clock_event_reasons"]["gpu_idle"] is True and gpu["clock_event_reasons"]["hw_slowdown"] is False
    )
    assert gpu["clock_event_counters_us"]["hw_power_brake_slowdown"] == 0
    assert gpu["power"]["limit"] == 700.0 and gpu["power"]["default_limit"] == 700.0
    assert gpu["pcie"] == {
        "replay_counter": 0,
        "gen_current": 5,
        "gen_max": 5,
        "width_current": 16,
        "width_max": 16,
    }
    assert gpu["clocks"]["sm_max"] == 1980 and gpu["temperature"]["gpu"] is not None
    assert gpuhealth.findings(parsed) == []


def test_text_and_xml_give_the_same_tree():
    xml = gpuhealth.parse(H200.read_text())["gpus"][0]
    text = gpuhealth.parse(read("h100x8_gpud_535.161.08_q_hw_power_brake.txt"))["gpus"][0]

    def shape(value):
        return {k: shape(v) for k, v in value.items()} if isinstance(value, dict) else None

    # The reasons and counters are keyed by what the driver lists (R535's text has no counters).
    dynamic = ("clock_event_reasons", "clock_event_counters_us")
    assert {k: v for k, v in shape(xml).items() if k not in dynamic} == {
        k: v for k, v in shape(text).items() if k not in dynamic
    }
    assert set(text["clock_event_reasons"]) <= set(xml["clock_event_reasons"])


def test_throttled_capture_names_the_reasons():
    parsed = gpuhealth.parse(read("h100x8_gpud_535.161.08_q_hw_power_brake.txt"))
    [first] = [
        f for f in gpuhealth.findings(parsed) if f["code"] == "gpu_throttling_now" and f["gpus"] == [0]
    ]
    assert (
        "hw_slowdown, hw_power_brake_slowdown" in first["message"] and "SM 86 of 1980 MHz" in first["message"]
    )
    assert first["severity"] == "warning" and first["remediation"] == "monitor"
    assert first["gpu"] == {
        "index": 0,
        "bus_id": "00000000:19:00.0",
        "uuid": "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",
        "serial": "1650124031592",
    }


def test_sw_power_cap_counters_are_read_not_judged():
    gpu = gpuhealth.parse(read("rtx3090_telegraf_590.44.01_q_x_sw_power_cap.xml"))["gpus"][0]
    assert gpu["clock_event_reasons"]["sw_power_cap"] is True
    assert gpu["clock_event_counters_us"]["sw_power_cap"] == 9840338777
    assert set(gpu["clock_event_counters_us"]) == {
        "sw_power_cap",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    }


def test_real_pending_remap_is_critical_reset():
    parsed = gpuhealth.parse(read("a10_gpud_535.129.03_q.txt"))
    [pending] = [f for f in gpuhealth.findings(parsed) if f["code"] == "gpu_row_remap_pending"]
    assert pending["severity"] == "critical" and pending["remediation"] == "reset"
    assert (
        "4 uncorrectable" in pending["message"]
        and "GPU0 (00000000:07:00.0, GPU-73d12ef7, S/N 1324521052681)" in pending["message"]
    )
    assert gpuhealth.short(pending) == "GPU0 GPU-73d12ef7: row_remap_pending -> reset"


def test_not_reported_is_none_never_a_finding():
    """Quadro P400 (R418): every ECC counter, retired page and power reading is N/A."""
    gpu = gpuhealth.parse(read("quadrop400_telegraf_418.43_q_x.xml"))["gpus"][0]
    assert gpu["ecc"]["volatile"]["corrected"] is None and gpu["ecc"]["aggregate"]["uncorrected"] is None
    assert gpu["power"] == {"draw": None, "limit": None, "default_limit": None}
    assert gpu["remapped_rows"]["pending"] is None and gpu["recovery_action"] is None
    minimal = gpuhealth.parse(read("gtx1070ti_telegraf_minimal_q_x.xml"))
    assert gpuhealth.findings(minimal) == []


def _edit(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "code", "remediation"),
    [
        ("<remapped_row_failure>No", "<remapped_row_failure>Yes", "gpu_row_remap_failure", "isolate"),
        ("<dram_uncorrectable>0", "<dram_uncorrectable>2", "gpu_ecc_uncorrectable", "isolate"),
        (
            "<sram_threshold_exceeded>No",
            "<sram_threshold_exceeded>Yes",
            "gpu_sram_threshold_exceeded",
            "isolate",
        ),
        ("<unrepairable_memory>No", "<unrepairable_memory>Yes", "gpu_unrepairable_memory", "isolate"),
        ("<channel_repair_pending>No", "<channel_repair_pending>Yes", "gpu_repair_pending", "reset"),
        ("<gpu_recovery_action>None", "<gpu_recovery_action>Reset", "gpu_recovery_action", "reset"),
        ("<gpu_recovery_action>None", "<gpu_recovery_action>Reboot", "gpu_recovery_action", "reboot"),
        ("<gpu_recovery_action>None", "<gpu_recovery_action>Drain and Reset", "gpu_recovery_action", "reset"),
        (
            "<current_power_limit>700.00 W",
            "<current_power_limit>500.00 W",
            "gpu_power_limit_reduced",
            "monitor",
        ),
    ],
)
def test_each_rule_on_an_edited_h200_read(old, new, code, remediation):
    parsed = gpuhealth.parse(_edit(H200.read_text(), old, new))
    [found] = [f for f in gpuhealth.findings(parsed) if f["code"] == code]
    assert found["remediation"] == remediation and found["gpus"] == [0]
    assert found["severity"] == gpuhealth.RULES[code][0]


def test_the_stand_in_capture_has_one_pending_remap():
    parsed = gpuhealth.parse(read("synthetic/h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"))
    critical = [f for f in gpuhealth.findings(parsed) if f["severity"] == "critical"]
    assert [(f["code"], f["gpus"], f["remediation"]) for f in critical] == [
        ("gpu_row_remap_pending", [0], "reset")
    ]


def test_old_reset_status_is_the_recovery_action():
    text = read("a10_gpud_535.129.03_q.txt")
    assert gpuhealth.parse(text)["gpus"][0]["recovery_action"] == "none"
    drained = _edit(
        text, "Drain and Reset Recommended       : N/A", "Drain and Reset Recommended       : Yes"
    )
    assert gpuhealth.parse(drained)["gpus"][0]["recovery_action"] == "drain_and_reset"
    reset = _edit(text, "Reset Required                    : No", "Reset Required                    : Yes")
    [found] = [f for f in gpuhealth.findings(gpuhealth.parse(reset)) if f["code"] == "gpu_recovery_action"]
    assert found["remediation"] == "reset" and "recovery action is reset" in found["message"]


def test_growth_since_the_last_pass_is_monitor():
    before = gpuhealth.parse(H200.read_text())
    after = gpuhealth.parse(
        _edit(
            _edit(
                H200.read_text(), "<replay_counter>0</replay_counter>", "<replay_counter>12</replay_counter>"
            ),
            "<aggregate>\n\t\t\t\t<sram_correctable>0",
            "<aggregate>\n\t\t\t\t<sram_correctable>3",
        )
    )
    found = {f["code"]: f for f in gpuhealth.findings(after, previous=before)}
    assert found["gpu_pcie_replays_growing"]["severity"] == "warning"
    assert found["gpu_ecc_corrected_growing"]["remediation"] == "monitor"
    assert "grew from 0 to 3" in found["gpu_ecc_corrected_growing"]["message"]
    # Matched by serial: the same GPUs' previous health as a list works too; other GPUs are ignored.
    again = gpuhealth.findings(after, previous=before["gpus"][:1])
    assert {f["code"] for f in again} >= {"gpu_pcie_replays_growing", "gpu_ecc_corrected_growing"}
    assert not [
        f for f in gpuhealth.findings(after, previous=[{"serial": "other"}]) if "growing" in f["code"]
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "printed nothing"),
        ("   \n", "printed nothing"),
        ("<nvidia_smi_log><gpu id='1'><product_name>X</product", "not a whole XML document"),
        ("<?xml version='1.0'?><html></html>", "expected nvidia-smi's <nvidia_smi_log>"),
        ("No devices were found\n", "not the output of `nvidia-smi -q`"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "not the output"),
    ],
)
def test_failed_and_garbage_outputs_say_why(text, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        gpuhealth.parse(text)


def test_cut_off_xml_is_refused_and_cut_off_text_keeps_what_it_has():
    xml = H200.read_text()
    with pytest.raises(ValueError, match="cut off or mangled"):
        gpuhealth.parse(xml[: len(xml) // 2])
    text = read("h100x8_gpud_535.183.01_q.txt")
    cut = gpuhealth.parse(text[: text.index("GPU 00000000:64:00.0")])
    assert len(cut["gpus"]) == 1 and cut["attached_gpus"] == 8
    [lost] = [f for f in gpuhealth.findings(cut) if f["code"] == "gpu_lost"]
    assert "7 of 8 GPU(s)" in lost["message"] and lost["severity"] == "critical"


def test_values():
    assert (
        gpuhealth.to_int("16x") == 16 and gpuhealth.to_int("39 C") == 39 and gpuhealth.to_int("0x19") is None
    )
    assert gpuhealth.to_int("N/A") is None and gpuhealth.to_float("700.00 W") == 700.0
    assert (
        gpuhealth.to_bool("Yes                      <===") is True
        and gpuhealth.to_bool("Not Active") is False
    )
    assert gpuhealth.to_bool("Unknown") is None
    assert gpuhealth.reason_key("clocks_event_reasons_counters_hw_therm_slowdown") == "hw_thermal_slowdown"
    assert gpuhealth.reason_key("Display Clock Setting") == "display_clocks_setting"


def test_gpu_finding_refuses_an_unknown_remediation():
    with pytest.raises(ValueError, match="remediation"):
        gpuhealth.gpu_finding({"index": 0}, "gpu_x", "m", remediation="pray")


def test_the_module_reads_a_stand_in_nvidia_smi(tmp_path):
    """wireup_gpu_health_info run by Ansible (check mode) on the testbed's stand-in nvidia-smi,
    then on one that fails as nvidia-smi does without GPUs."""
    import json
    import os
    import subprocess
    import sys

    from tests.testbed.stand_in_smi import NO_DEVICES, script

    root = pathlib.Path(__file__).resolve().parents[2]
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        script(str(HEALTH / "synthetic" / "h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"))
    )
    smi.chmod(0o755)
    broken = tmp_path / "broken-smi"
    broken.write_text(
        script(str(tmp_path / "missing.xml")).replace("exec cat", "echo 'No devices were found'; exit 6; cat")
    )
    broken.chmod(0o755)
    # A GPU lost beside a readable one: nvidia-smi names it on stderr, prints the rest, exits 15
    # (NVML_ERROR_GPU_IS_LOST).
    one = tmp_path / "one.xml"
    text = H200.read_text()
    one.write_text(text[: text.index('\t<gpu id="00000000:00:07.0">')] + "</nvidia_smi_log>\n")
    lost = tmp_path / "lost-smi"
    lost.write_text(
        "#!/bin/sh\necho 'Unable to determine the device handle for GPU 00000000:00:07.0: GPU is lost.  "
        f"Reboot the system to recover this GPU' >&2\ncat '{one}'\nexit 15\n"
    )
    lost.chmod(0o755)
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    answers = []
    for path in (smi, broken, lost):
        out = subprocess.run(
            [
                str(pathlib.Path(sys.executable).with_name("ansible")),
                "-i",
                "localhost,",
                "-c",
                "local",
                "--check",
                "-e",
                f"ansible_python_interpreter={sys.executable}",
                "localhost",
                "-m",
                "wireup.cluster.wireup_gpu_health_info",
                "-a",
                f"nvidia_smi={path}",
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        answers.append(json.loads(out.stdout.split("=>", 1)[1]))
    good, bad, gone = answers
    assert good["changed"] is False and good["error"] == "" and len(good["health"]["gpus"]) == 2
    assert [f["code"] for f in good["findings"] if f["severity"] == "critical"] == ["gpu_row_remap_pending"]
    assert (
        "2 GPU(s), driver 580.159.04: GPU0 (00000000:00:06.0, GPU-47e4f408, S/N 1653724057182): row remap "
        "pending" in good["summary"][0]
    )
    assert bad["health"] is None and NO_DEVICES in bad["error"] and "rc 6" in bad["error"]
    assert gone["error"] == "" and len(gone["health"]["gpus"]) == 1
    [lost_gpu] = [f for f in gone["findings"] if f["severity"] == "critical"]
    assert lost_gpu["code"] == "gpu_lost" and lost_gpu["remediation"] == "reboot"
    assert "1 of 2 GPU(s)" in lost_gpu["message"] and "00000000:00:07.0: GPU is lost" in lost_gpu["message"]


# ---------------------------------------------------------------- issue 35
@pytest.mark.parametrize(
    ("line", "bus", "why"),
    [
        # NVIDIA/open-gpu-kernel-modules#387, NVIDIA/nvidia-docker#1553
        (
            "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
            "0000:0B:00.0",
            "Unknown Error",
        ),
        # NVIDIA/nvidia-container-toolkit#69 (no space after GPU)
        (
            "Unable to determine the device handle for GPU0000:65:00.0: Unknown Error",
            "0000:65:00.0",
            "Unknown Error",
        ),
        # JosephKJ/OWOD#81
        (
            "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to "
            "recover this GPU",
            "0000:02:00.0",
            "GPU is lost. Reboot the system to recover this GPU",
        ),
        # R580+ names the index first
        (
            "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error",
            "0000:34:00.0",
            "Unknown Error",
        ),
        # NVIDIA/dcgm-exporter#604 (a bus id that is no bus id: the GPU is still counted)
        (
            "Unable to determine the device handle for GPU 000:BA:80.0: Unknown Error",
            "000:BA:80.0",
            "Unknown Error",
        ),
        ("Unable to determine the device handle for GPU 0: Unknown Error", None, "Unknown Error"),
    ],
)
def test_nvidia_smis_lines_about_a_gpu_it_cannot_open(line, bus, why):
    assert gpuhealth.lost_gpus(f"some text\n{line}\n") == [{"bus_id": bus, "why": why}]


def test_a_lost_gpu_line_in_stderr_or_before_the_xml_fails_the_read():
    xml = H200.read_text()
    gpu1 = xml.index('\t<gpu id="00000000:00:07.0">')
    one = xml[:gpu1] + "</nvidia_smi_log>\n"
    said = "Unable to determine the device handle for GPU 00000000:00:07.0: Unknown Error"
    for stdout, stderr in ((said + "\n" + one, ""), (one, said + "\n")):
        parsed = gpuhealth.read(stdout, stderr=stderr)
        assert parsed["format"] == "xml" and len(parsed["gpus"]) == 1
        [lost] = gpuhealth.node_findings(parsed)
        assert "1 of 2 GPU(s)" in lost["message"] and "00000000:00:07.0: Unknown Error" in lost["message"]


def test_pci_addresses_of_nvidia_smi_lspci_and_the_kernel_log_meet():
    assert {
        gpuhealth.pci_address(a) for a in ("00000008:01:00.0", "0008:01:00.0", "PCI:0008:01:00", "8:01:00")
    } == {"0008:01:00"}
    assert gpuhealth.pci_address("0008:01:00.0\n") is None or gpuhealth.pci_address("x") is None
    assert gpuhealth.pci_address("GPU 1") is None


def test_lspci_of_a_gb200_tray_lists_its_four_gpus():
    parsed = gpuhealth.read(H200.read_text(), lspci=read("lspci/gb200x4_gpud_lspci.txt"))
    assert parsed["pci_gpus"] == ["0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00"]
    # Those are not the H200's slots: all four are missing from its read.
    [lost] = gpuhealth.node_findings(parsed)
    assert lost["message"].startswith("4 of 6 GPU(s)")


def test_uuid_is_the_key_and_placeholders_are_none():
    gpu = gpuhealth.parse(H200.read_text())["gpus"][0]
    assert gpuhealth.gpu_key(gpu) == "gpu-47e4f408-caf2-4eaa-9629-5a6d1365dd75"
    for uuid in ("", None, "N/A", "GPU-00000000-0000-0000-0000-000000000000", "GPU-47e4f408", "47e4f408"):
        assert gpuhealth.gpu_key(dict(gpu, uuid=uuid)) is None, uuid
    for serial in ("0", "0000000000000", "N/A", "[N/A]", ""):
        edited = H200.read_text().replace("<serial>1653724057182</serial>", f"<serial>{serial}</serial>")
        assert gpuhealth.parse(edited)["gpus"][0]["serial"] is None, serial
    assert gpuhealth.label(dict(gpu, serial=None)) == "GPU0 (00000000:00:06.0, GPU-47e4f408)"
    assert gpuhealth.previous_by_key([dict(gpu, uuid="N/A"), gpu]) == {gpuhealth.gpu_key(gpu): gpu}


def test_one_name_for_each_counter_in_the_text_and_the_xml():
    """nvidia-smi prints the power-brake counter as 'HW Power Braking' (text) and
    clocks_event_reasons_counters_hw_power_brake (XML): both are hw_power_brake_slowdown, the
    name of the reason it counts, so a text read keeps the throttled time."""
    text = gpuhealth.parse(read("synthetic/h100_535.161.08_q_counters_written.txt"))["gpus"][0]
    xml = gpuhealth.parse(read("rtx3090_telegraf_590.44.01_q_x_sw_power_cap.xml"))["gpus"][0]
    assert (
        set(text["clock_event_counters_us"]) == set(xml["clock_event_counters_us"]) == set(gpuhealth.COUNTERS)
    )
    assert text["clock_event_counters_us"]["hw_power_brake_slowdown"] == 7250000
    assert set(gpuhealth.COUNTERS) <= set(text["clock_event_reasons"]) | {"sw_power_cap", "sync_boost"}
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpujudge

    before = dict(text["clock_event_counters_us"], hw_power_brake_slowdown=0)
    held = gpujudge.throttle({}, before, text["clock_event_counters_us"])
    assert held["source"] == "counters" and held["reasons_s"]["hw_power_brake_slowdown"] == 7.25


@pytest.mark.parametrize(
    "missing", ["Not Found", "[Not Found]", "N/A", "[N/A]", "[Not Supported]", "Unknown Error"]
)
def test_not_reported_values_are_missing_not_values(missing):
    text = read("synthetic/h100_535.161.08_q_counters_written.txt")
    edited = _edit(
        text,
        "HW Power Braking                  : 7250000 us",
        f"HW Power Braking                  : {missing}",
    )
    edited = _edit(
        edited, "Replays Since Reset               : 67", f"Replays Since Reset               : {missing}"
    )
    gpu = gpuhealth.parse(edited)["gpus"][0]
    assert gpu["clock_event_counters_us"]["hw_power_brake_slowdown"] is None
    assert gpu["pcie"]["replay_counter"] is None


def test_the_pcie_rule_is_the_topology_checks():
    """A link trained below its maximum: the GPU read's finding is health.pcie_findings' (one rule)."""
    gpu = gpuhealth.parse(read("t4_telegraf_515.105.01_q_x.xml"))["gpus"][0]
    [narrow] = [f for f in gpuhealth.findings({"gpus": [gpu]}) if f["code"].startswith("pcie_")]
    [rule] = health.pcie_findings([gpu])
    assert (
        (narrow["code"], narrow["severity"])
        == (rule["code"], rule["severity"])
        == ("pcie_width_reduced", "warning")
    )
    assert narrow["message"].endswith(rule["message"].split(": ", 1)[1]) and "x8 of x16" in narrow["message"]
    assert narrow["gpu"]["bus_id"] == "00000000:00:1E.0" and narrow["remediation"] == "monitor"


def test_retired_pages_at_the_limit_isolate_the_gpu():
    parsed = gpuhealth.parse(read("synthetic/t4_515.105.01_q_x_60_retired_pages_written.xml"))
    [limit] = [f for f in gpuhealth.findings(parsed) if f["code"] == "gpu_retired_pages_limit"]
    assert (limit["severity"], limit["remediation"]) == ("critical", "isolate")
    assert "60 retired pages (40 single-bit, 20 double-bit)" in limit["message"] and "RMA" in limit["message"]
    under = _edit(
        read("synthetic/t4_515.105.01_q_x_60_retired_pages_written.xml"),
        "<retired_count>20",
        "<retired_count>19",
    )
    assert [f["code"] for f in gpuhealth.findings(gpuhealth.parse(under)) if "retired" in f["code"]] == [
        "gpu_retired_pages"
    ]


def _many_gpus(count):
    xml = H200.read_text()
    start, end = xml.index("\t<gpu id"), xml.rindex("</gpu>") + len("</gpu>\n")
    return xml[:start] + xml[start:end] * count + xml[end:]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("<nvidia_smi_log>" + "<gpu/>" * 2_100_000 + "</nvidia_smi_log>", "over the 4 MiB"),
        (
            "<nvidia_smi_log>" + "<a>" * 100_000 + "</a>" * 100_000 + "</nvidia_smi_log>",
            "nests deeper than 32",
        ),
        (
            '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]>'
            "<nvidia_smi_log>&a;</nvidia_smi_log>",
            "declares XML entities",
        ),
        ("<nvidia_smi_log>" + "<gpu><uuid>x</uuid></gpu>" * 65 + "</nvidia_smi_log>", "more than the 64"),
        ("Driver Version : 1\n" + "".join(" " * i + f"l{i}\n" for i in range(40)), "nests deeper than 32"),
        ("<nvidia_smi_log><gpu>" + "<x>1</x>" * 520_000 + "</gpu></nvidia_smi_log>", "than 50,000 elements"),
        ("Driver Version : 1\n" + "x : 1\n" * 200_000, "more than 50,000 lines"),
    ],
    ids=["12 MB", "100k deep", "entities", "65 GPUs", "deep text", "520k siblings", "200k lines"],
)
def test_a_read_too_big_too_deep_or_too_many_is_refused_fast(text, why):
    """Refused with a clear error in about a second (on 2 busy cores), never a hang or a crash: on
    the code before issue 35 the 12 MB case ran past 600 s and the deep one raised RecursionError."""
    import time

    started = time.perf_counter()
    with pytest.raises(ValueError, match=re.escape(why)):
        gpuhealth.parse(text)
    assert time.perf_counter() - started < 5.0


def test_sixteen_gpus_parse_well_inside_the_limits():
    """16 GPUs (~430 KB, a real 16-GPU read's size) parse in 0.2 s alone (5 s allowed for a loaded
    2-core machine) and stay well inside MAX_BYTES and MAX_ELEMENTS."""
    import time

    text = _many_gpus(8)
    started = time.perf_counter()
    parsed = gpuhealth.parse(text)
    assert len(parsed["gpus"]) == 16 and len(text) < gpuhealth.MAX_BYTES / 8
    assert text.count("<") < gpuhealth.MAX_ELEMENTS / 2
    assert time.perf_counter() - started < 5.0


def test_a_listed_gpu_that_nvidia_smi_names_lost_is_counted_once():
    """nvidia-smi may list a GPU and still say it cannot open it; lspci and the kernel log may name
    it too: one GPU lost of the two the node has, not three of four."""
    parsed = gpuhealth.read(
        H200.read_text(),
        stderr="Unable to determine the device handle for GPU 00000000:00:07.0: Unknown Error\n",
        lspci="0000:00:06.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335]\n"
        "0000:00:07.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335]\n",
        kernel_log=read("synthetic/h200x2_kernel_log_xid79_written.txt"),
    )
    [lost] = gpuhealth.node_findings(parsed)
    assert lost["message"].startswith(
        "1 of 2 GPU(s) fallen off the bus or lost (00000000:00:07.0: Unknown Error)"
    )
