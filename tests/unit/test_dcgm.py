"""wireup.probe.dcgm on `dcgmi diag -j` documents: DCGM 3.x (microsoft/VirtualClient's real T4 runs), DCGM 4
(a real test object cut from NVIDIA/DCGM#215; a written failing document), mangled and cut ones."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import dcgm, gpuhealth

DCGM = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gpuhealth" / "dcgm"
WRITTEN = DCGM.parent / "synthetic" / "h200x2_dcgm4_diag_r2_memory_fail_written.json"


def read(name):
    return (DCGM / name).read_text()


@pytest.mark.parametrize(
    ("name", "tests", "not_passed"),
    [
        ("t4_virtualclient_dcgm3_diag_r2.json", 11, []),
        ("t4_virtualclient_dcgm3_diag_r3.json", 16, [("EUD Test", "skip")]),
    ],
)
def test_dcgm3_real_runs(name, tests, not_passed):
    parsed = dcgm.parse(read(name))
    assert len(parsed["tests"]) == tests
    assert [(t["name"], t["status"]) for t in parsed["tests"] if t["status"] != "pass"] == not_passed
    pcie = next(t for t in parsed["tests"] if t["name"] == "PCIe")
    assert pcie["category"] == "Integration" and pcie["results"][0]["gpus"] == [0]
    assert "Host to GPU bandwidth" in pcie["results"][0]["info"][0]
    found = dcgm.findings(parsed, [{"index": 0, "serial": "X1"}], level=3)
    assert [(f["severity"], f["remediation"]) for f in found] == [("info", "monitor")] * len(not_passed)
    if found:
        assert found[0]["message"].startswith("GPU0 (S/N X1): DCGM diag -r 3 EUD Test: SKIP")


def test_dcgm4_written_failure_takes_dcgm_severity():
    parsed = dcgm.parse(WRITTEN.read_text())
    assert (parsed["version"], parsed["driver"]) == ("4.2.3", "580.159.04")
    assert [(t["name"], t["status"]) for t in parsed["tests"]] == [
        ("software", "warn"),
        ("memory", "fail"),
        ("pcie", "pass"),
    ]
    health = gpuhealth.parse((DCGM.parents[1] / "h200x2" / "nvidia_smi_q.xml").read_text())
    found = {(f["code"], f["severity"]): f for f in dcgm.findings(parsed, health["gpus"], level=2)}
    fail = found[("gpu_dcgm_diag", "critical")]
    assert (
        fail["remediation"] == "isolate" and fail["gpus"] == [1] and fail["gpu"]["serial"] == "1653724060308"
    )
    assert (
        "memory: FAIL: GPU 1 has uncorrectable memory errors and row remappings are pending"
        in fail["message"]
    )
    warn = found[("gpu_dcgm_diag", "warning")]
    assert warn["remediation"] == "monitor" and "Persistence mode for GPU 1 is disabled" in warn["message"]
    assert found[("gpu_dcgm_diag", "info")]["message"].endswith("pcie: SKIP: no message")


def test_severity_picks_the_strongest_remediation():
    warnings = [("a", 1, 1), ("b", 2, 6)]
    assert dcgm._remediation("fail", warnings) == "reset"
    assert dcgm._remediation("fail", [*warnings, ("c", 3, 2)]) == "isolate"
    assert dcgm._remediation("fail", [("no severity", None, None)]) == "isolate"
    assert dcgm._remediation("warn", warnings) == "monitor"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no JSON document"),
        ("Error: unable to connect to host engine\n", "no JSON document"),
        ('{"DCGM GPU Diagnostic": {"test_categories": [', "cut off or mangled"),
        ('{"DCGM GPU Diagnostic": {"version": "4.2.3"}}', "no test_categories"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "lists no test"),
        ("[1, 2]", "no JSON document"),
    ],
)
def test_refused_and_broken_documents_never_pass(text, why):
    with pytest.raises(ValueError, match=why):
        dcgm.parse(text)


def test_real_mangled_and_cut_documents_are_refused():
    with pytest.raises(ValueError, match="no test_categories"):
        dcgm.parse(read("t4_virtualclient_dcgm3_diag_mangled_no_categories.json"))
    # NVIDIA/DCGM#215: one test object of a DCGM 4 run, the paste cut after it.
    with pytest.raises(ValueError, match="no test_categories"):
        dcgm.parse(read("gpux8_dcgm-215_dcgm4_diag_r4_test_cut.json"))


def test_dcgm4_results_name_the_gpu_by_entity():
    text = read("gpux8_dcgm-215_dcgm4_diag_r4_test_cut.json")
    body = text[text.find("{") : text.rfind("}") + 1]
    parsed = dcgm.parse(
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [' + body + "]}]}}"
    )
    [test] = parsed["tests"]
    assert test["status"] == "pass" and [r["gpus"] for r in test["results"]] == [[i] for i in range(8)]
    assert "859.08 gigaflops" in test["results"][0]["info"][2]
    assert dcgm.findings(parsed) == []
