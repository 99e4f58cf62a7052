"""Remediation, dry-run first (issue 37 item 2): the plan per finding class from gpuhealth's own
findings on real and written captures (tests/fixtures/gpuhealth), the busy check on nvidia-smi
--query-compute-apps and squeue's output, and the vendor ticket of an isolated GPU (written
atomically, 0640, never over an earlier one)."""

import json
import os
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import remediate
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth

G = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gpuhealth"
RESET = G / "synthetic/h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"
REBOOT = G / "synthetic/h200x2_580.159.04_q_x_gpu1_unknown_error_written.xml"
ISOLATE = G / "synthetic/t4_515.105.01_q_x_60_retired_pages_written.xml"
BOTH = G / "synthetic/a10_535.129.03_q_row_remap_failure_written.txt"  # isolate and reset: isolate wins


def found(path):
    parsed = gpuhealth.parse(path.read_text())
    return parsed, gpuhealth.findings(parsed)


@pytest.mark.parametrize(
    "path,cls,first",
    [
        (RESET, "reset", "nvidia-smi --gpu-reset -i 00000000:00:06.0"),
        (REBOOT, "reboot", "systemctl reboot"),
        (
            ISOLATE,
            "isolate",
            "scontrol update NodeName=gpu-a01 State=DRAIN 'Reason=wireup: [node_problem] hw/quick:",
        ),
        (BOTH, "isolate", "scontrol update NodeName=gpu-a01 State=DRAIN"),
    ],
)
def test_the_dry_run_per_class_shows_the_command_and_the_recheck(path, cls, first):
    _parsed, findings = found(path)
    got = remediate.plan("gpu-a01", findings, busy_now="", act=False)
    assert got["cls"] == cls and got["blocked"] == ""
    assert got["show"][0].startswith(
        f"Remediate: gpu-a01: {cls} ({remediate.CLASSES[cls]}): would run (dry run"
    )
    assert f": {first}" in got["show"][0], got["show"][0]
    after = (
        "stays drained until the GPU is replaced"
        if cls == "isolate"
        else "repair.yml's quick check) before it returns"
    )
    assert got["show"][-1].endswith(after)
    acted = remediate.plan("gpu-a01", findings, busy_now="", act=True)
    assert acted["show"][0].startswith(f"Remediate: gpu-a01: {cls} ({remediate.CLASSES[cls]}): run: ")


@pytest.mark.parametrize("cls", ["reinstall_driver", "restart_fabric_manager"])
def test_the_node_level_classes(cls):
    # No gpuhealth rule names these yet (a node-level finding would): the plan takes the class.
    got = remediate.plan("gpu-a01", [{"remediation": cls, "message": "x"}], busy_now="", act=False)
    assert got["cls"] == cls and len(got["steps"]) == 1


def test_a_busy_node_is_not_touched():
    _parsed, findings = found(RESET)
    apps = "4121, /opt/wireup/venv/bin/python3, GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75\n"
    why = remediate.busy("", apps)
    assert why == "1 process(es) on its GPUs (/opt/wireup/venv/bin/python3)"
    got = remediate.plan("gpu-a01", findings, busy_now=why, act=True)
    assert got["blocked"] == why and got["show"] == [
        f"Remediate: gpu-a01: reset ({remediate.CLASSES['reset']}): not now, the node is busy: {why}"
    ]
    assert remediate.busy("42\n43_1\n", "") == "Slurm job(s) 42, 43_1 on it"
    assert remediate.busy("", "") == ""
    # output off its grammar: busy (a read it cannot understand never clears a reset)
    assert remediate.busy("", "No devices were found\n").startswith("cannot tell whether it is idle")
    assert remediate.busy("42; reboot", "").startswith("cannot tell whether it is idle")


def test_no_action_for_monitor_findings_and_a_bad_host_is_refused():
    _parsed, findings = found(G / "h100x8_gpud_535.183.01_q.txt")
    assert remediate.plan("n1", findings, busy_now="", act=True)["steps"] == []
    with pytest.raises(ValueError, match="not a host name"):
        remediate.plan("n1;reboot", findings, busy_now="", act=False)


def test_the_ticket_of_an_isolated_gpu(tmp_path):
    parsed, findings = found(ISOLATE)
    worst = next(f for f in findings if f["remediation"] == "isolate")
    record = remediate.ticket(
        "gpu-a01", worst, driver=parsed["driver_version"], run_id="20261207T080000Z", figures={"retired": 60}
    )
    assert record["gpu"]["uuid"].startswith("GPU-") and record["gpu"]["bus_id"] == "00000000:00:1E.0"
    assert "serial" in record["gpu"]  # None on this cloud T4: nvidia-smi prints none
    assert record["finding"]["code"] == "gpu_retired_pages_limit" and record["driver"] == "515.105.01"
    path = remediate.ticket_path(str(tmp_path), "gpu-a01", worst, "20261207T080000Z")
    assert path == str(tmp_path / "tickets/gpu-a01/20261207T080000Z-gpu0.json")
    os.makedirs(os.path.dirname(path), mode=0o750)
    atomicfile.write_json(path, record, exclusive=True)
    assert json.loads(pathlib.Path(path).read_text()) == record
    assert oct(os.stat(path).st_mode & 0o777) == "0o640"
    with pytest.raises(FileExistsError):
        atomicfile.write_json(path, record, exclusive=True)  # never rewritten
    with pytest.raises(ValueError, match="off its grammar"):
        remediate.ticket_path(str(tmp_path), "../etc", worst, "20261207T080000Z")
