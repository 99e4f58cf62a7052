"""The GPU trial on the testbed (GPU-less nodes; issue 25): `bench.yml --tags gpu_health` reads every
node's GPU health in seconds; a stand-in nvidia-smi on node2 (tests/testbed/stand_in_smi.py) prints
our 2x H200 capture edited to a pending row remap, so node2 FAILs with the remediation `reset`, and
launch.yml's gate refuses it naming the GPU; on a node with torch, the fingerprint script's CPU test
mode runs the torch code paths it shares with the GPU mode. (A full bench.yml on the CPU nodes,
which PASSes them and says the fingerprint needs GPUs, is tests/integration/test_bench.py.)"""

from __future__ import annotations

import base64
import gzip
import json
import time
from pathlib import Path

import pytest

from tests.testbed.stand_in_smi import script

from .harness import run_playbook
from .test_bench import torch_nodes  # noqa: F401  # the same fixture: every node gets the torch venv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests/fixtures/gpuhealth/synthetic/h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"
STAND_IN = "/usr/local/bin/nvidia-smi"
XML_ON_NODE = "/usr/local/share/wireup-stand-in/nvidia_smi_q.xml"


def _put(testbed, node, path, text, mode="0644"):
    packed = base64.b64encode(gzip.compress(text.encode())).decode()
    testbed.ssh(
        node,
        f"mkdir -p {Path(path).parent} && echo {packed} | base64 -d | gunzip > {path} && chmod {mode} {path}",
    )


@pytest.fixture
def stand_in(testbed):
    _put(testbed, "node2", XML_ON_NODE, CAPTURE.read_text())
    _put(testbed, "node2", STAND_IN, script(XML_ON_NODE), mode="0755")
    try:
        yield testbed
    finally:
        testbed.ssh("node2", f"rm -rf {STAND_IN} {Path(XML_ON_NODE).parent}", check=False)


def test_a_pending_row_remap_fails_the_node_and_the_gate_refuses_it(stand_in, tmp_path):
    testbed = stand_in
    results_dir = tmp_path / "results"
    start = time.monotonic()
    result = run_playbook(
        "bench.yml", testbed.inventory, {"wireup_results_dir": str(results_dir)}, tags=["gpu_health"]
    )
    took = time.monotonic() - start
    print(f"[gpu_trial] bench.yml --tags gpu_health rc={result.rc} in {took:.0f} s")
    out = " ".join(result.stdout.split())
    # The run fails on node2's verdict (bench_fail_on_fail), after storing and reporting every node.
    assert result.rc != 0 and "bench verdict FAIL on node2" in out, out[-3000:]
    assert took < 240  # seconds alone; a loaded 2-core machine is slower
    for node in ("node1", "node3"):
        assert f"gpu_trial {node}: no nvidia-smi (no NVIDIA driver): GPU health not read" in out
    assert (
        "gpu_trial node2: 2 GPU(s), driver 580.159.04: GPU0 (00000000:00:06.0, GPU-47e4f408, "
        "S/N 1653724057182): row remap pending (1 uncorrectable, 0 correctable rows)" in out
    ), out[-3000:]
    # --tags gpu_health runs no fingerprint (its task and its cost line are absent).
    assert "Fingerprint every GPU of the node at once" not in out and "fingerprint of" not in out

    [run] = sorted((results_dir / "bench").iterdir())
    records = {p.stem: json.loads(p.read_text()) for p in run.glob("*.json")}
    node2 = records["node2"]
    assert node2["verdict"] == "FAIL" and node2["gpu_trial"]["scope"] == "gpu_only"
    # The part names the capability it measured: the health read alone.
    assert (node2["gpu_trial"]["capability"], node2["gpu_trial"]["measured"]) == ("gpu_health", ["health"])
    first = node2["findings"][0]
    assert (first["code"], first["severity"], first["remediation"]) == (
        "gpu_row_remap_pending",
        "critical",
        "reset",
    )
    assert first["gpu"] == {
        "index": 0,
        "bus_id": "00000000:00:06.0",
        "uuid": "GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75",
        "serial": "1653724057182",
    }
    assert [g["verdict"] for g in node2["gpu_trial"]["gpus"]] == ["FAIL", "PASS"]
    for node in ("node1", "node3"):
        assert records[node]["verdict"] == "N/A" and records[node]["gpu_trial"]["gpus"] == []
    md = (run / "report.md").read_text()
    assert (
        "| node2 GPU0 | 00000000:00:06.0 | 1653724057182 | H200 | FAIL | row_remap_pending -> reset |" in md
    )

    # launch.yml's gate reads node2's latest record and refuses it, naming the GPU and the remedy.
    refused = run_playbook(
        "launch.yml",
        testbed.inventory,
        {"wireup_results_dir": str(results_dir), "torchrun_launch_run": False},
    )
    said = " ".join(m for _, _, m in refused.failure_messages())
    assert refused.rc != 0, refused.stdout[-3000:]
    assert (
        f"launch refused: bench run {run.name} FAILed on node2: "
        "GPU0 GPU-47e4f408: row_remap_pending -> reset" in " ".join(said.split())
    ), said

    # A later --tags gpu_health read that judged nothing (node1's N/A record of this run, stored as
    # node2's in a newer run) hid the FAIL while the gate read each node's newest record alone; the
    # gate per capability (record/gate.py: N/A settles nothing) still refuses node2 on the older run.
    later = results_dir / "bench" / f"{run.name}-2"
    later.mkdir()
    (later / "node2.json").write_text(json.dumps(dict(records["node1"], host="node2", run_id=later.name)))
    t0 = time.monotonic()
    still = run_playbook(
        "launch.yml",
        testbed.inventory,
        {"wireup_results_dir": str(results_dir), "torchrun_launch_run": False},
    )
    print(f"[gpu_trial] launch.yml refused past a later N/A record in {time.monotonic() - t0:.1f} s")
    said = " ".join(" ".join(m for _, _, m in still.failure_messages()).split())
    assert still.rc != 0 and f"bench run {run.name} FAILed on node2: GPU0 GPU-47e4f408" in said, said
    assert "(its newest record of gpu_health)" in said, said


def test_the_fingerprint_script_runs_its_torch_paths_on_a_cpu_node(torch_nodes):  # noqa: F811  # the fixture
    """The script's CPU test mode with the node's venv torch: the matmul, copy, batching, threads
    and JSON paths the GPU mode shares, honestly labelled (never judged)."""
    testbed = torch_nodes
    venv = "/opt/wireup/venv/bin/python"
    _put(
        testbed,
        "node1",
        "/tmp/gpu_fingerprint.py",
        (REPO / "roles/gpu_trial/files/gpu_fingerprint.py").read_text(),
    )
    start = time.monotonic()
    done = testbed.ssh(
        "node1", f"{venv} /tmp/gpu_fingerprint.py --device cpu --seconds 0.3 --gpus 0,1", timeout=180
    )
    print(f"[gpu_trial] fingerprint --device cpu on node1 in {time.monotonic() - start:.1f} s")
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["mode"] == "cpu-test" and doc["note"].startswith("cpu-test (torch 2.13.0+cpu on CPU)")
    assert (
        doc["torch"] == "2.13.0+cpu" and doc["errors"] == [] and doc["nvml_note"] == "CPU test mode: no NVML"
    )
    for gpu in doc["gpus"]:
        assert gpu["errors"] == {} and "gemm_fp8_flops" in gpu["skipped"]
        assert gpu["figures"]["gemm_bf16_flops"]["median"] > 0
        assert gpu["figures"]["h2d_concurrent_bytes_per_second"]["samples"] >= 1
    # The venv has the pinned NVML bindings the GPU mode samples with (pytorch_venv_extra_packages).
    testbed.ssh("node1", f"{venv} -c 'import pynvml'")
