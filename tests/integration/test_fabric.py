"""The fabric bench on 4 testbed nodes (gloo on CPU): shape one node's traffic with tc (a token
bucket of 200 Mbit/s on its interface, from inside its namespace) and that node, only it, is named
bad with its pairs' figures against the others, after its failing pair with a known-good node ran a
second time and failed again (issue 35: confirmation before naming), and the whole-group run of the
three others passes; remove the shaping and take another node's link down: the shaped node passes
again and the down node is named unreachable, within a bounded time, and the whole-group run of
three nodes on the machine's two cores passes against pairs that ran alone (its CPU share, 2/3).
The verdicts do not depend on spare CPU: docs/testing.md has this test green beside two busy
loops.
In between, launch.yml refuses to start a job on the node the fabric bench named bad, and with
torchrun_launch_on_failed=skip runs it on the three others (ranks renumbered); jobs.yml then
follows that run on those three (status, stop) and names the bad node as not part of it.
Each run is bounded (ansible-runner timeout, bench_fabric_timeout per pair job)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests import busy

from .harness import ensure_torch_venvs, run_playbook

pytestmark = pytest.mark.integration

SHAPE = "tc qdisc replace dev host0 root tbf rate 200mbit burst 64kb latency 100ms"
JOBS_SHOW = "Jobs | Show this node's part of the run"
JOBS_ASK = "Jobs | Ask wireup-jobctl on this node (status, logs, stop or list), and nvidia-smi for status"
JOBS_STANDS = "Jobs | Say how the run stands, or list the runs"
UNSHAPE = "tc qdisc del dev host0 root"


@pytest.fixture(scope="module")
def fabric_bed(testbed_factory):
    bed = testbed_factory("fabric", nodes=4)
    ensure_torch_venvs(bed)
    return bed


def _fabric(bed, results_dir):
    start = time.monotonic()
    result = run_playbook(
        "bench.yml",
        bed.inventory,
        {"wireup_results_dir": str(results_dir), "bench_fabric_timeout": 180},
        tags=["fabric"],
        # up to 2 x 3 + 2 rounds (confirmations and the group's), each normally 30-60 s here
        timeout=1800,
    )
    took = time.monotonic() - start
    print(f"[fabric] bench.yml --tags fabric rc={result.rc} in {took:.0f} s")
    (results_dir / "bench-fabric.log").parent.mkdir(parents=True, exist_ok=True)
    (results_dir / "bench-fabric.log").write_text(result.stdout)  # kept beside the record for a failing test
    runs = sorted((results_dir / "fabric").iterdir())
    record = json.loads((runs[-1] / "fabric.json").read_text())
    return result, record, (runs[-1] / "fabric.md").read_text(), took


def test_shaped_node_is_named_then_passes_and_a_down_node_is_unreachable(fabric_bed, tmp_path):
    bed = fabric_bed
    results = tmp_path / "results"
    bed.ssh("node3", SHAPE)
    try:
        result, record, md, _ = _fabric(bed, results)
    finally:
        bed.ssh("node3", UNSHAPE, check=False)
    # node3 and only node3: every pair with it fails, its first partner is cleared by a second pair.
    assert record["bad"] == ["node3"], md
    assert record["verdicts"] == {"node1": "PASS", "node2": "PASS", "node3": "FAIL", "node4": "PASS"}, md
    assert record["reference_kind"] == "median"
    slow = [p for p in record["pairs"] if "node3" in p["pair"]]
    fast = [p for p in record["pairs"] if "node3" not in p["pair"]]
    assert len(slow) == 2 and all(p["verdict"] == "FAIL" for p in slow)
    assert max(p["busbw"] for p in slow) < 0.5 * min(p["busbw"] for p in fast)
    # named on a confirmed failure: its pair with a known-good node failed twice, both figures kept
    [named] = [p for p in slow if p["used"] == "confirmation"]
    assert named["first"]["verdict"] == named["confirmation"]["verdict"] == "FAIL", md
    assert named["confirmation"]["round"] == named["round"] + 1
    assert "FAIL **<-** (the confirmation's)" in md
    assert all(d["backend"] == "gloo" for d in record["pair_details"])
    # the recap fails node3 alone, with its evidence
    assert result.failed_hosts == ["node3"] and result.unreachable_hosts == [], result.failure_messages()
    assert any("fabric verdict FAIL on node3" in m for _, _, m in result.failure_messages("node3"))
    assert "| node3 | FAIL | round 1 with node4:" in md
    # the whole-group run after the pairs: the nodes not named bad, one job in round 3
    group = record["group"]
    # (rounds: the pairs' last round, confirmations included; 3 without a dip, more with one)
    assert (group["members"], group["round"], group["reference_kind"]) == (
        ["node1", "node2", "node4"],
        record["rounds"] + 1,
        "slowest_pair",
    ), md
    assert group["verdict"] == "PASS" and group["busbw"] > 0, md
    assert "### Whole-group run" in md and record["failed"].keys() == {"node3"}

    # launch.yml refuses to start a job while node3's latest fabric verdict is FAIL.
    launch = run_playbook("launch.yml", bed.inventory, {"wireup_results_dir": str(results)}, timeout=600)
    refused = " ".join(m for _, _, m in launch.failure_messages())
    assert launch.rc != 0 and "launch refused: fabric run" in refused and "named node3 bad" in refused, (
        refused
    )
    # Opt-in: the job starts on the healthy nodes only, node3 left out, ranks 0..2 over the others.
    extra = {
        "wireup_results_dir": str(results),
        "torchrun_launch_on_failed": "skip",
        "torchrun_launch_job": "it-healthy-only",
        "torchrun_launch_wait": True,
        "torchrun_launch_poll_interval": 2,
        "torchrun_launch_timeout": 300,
    }
    t0 = time.monotonic()
    healthy = run_playbook("launch.yml", bed.inventory, extra, timeout=600)
    print(f"[fabric] launch.yml on the healthy nodes rc={healthy.rc} in {time.monotonic() - t0:.0f} s")
    assert healthy.rc == 0, f"{healthy.failure_messages()}\n{healthy.stdout[-4000:]}"
    [run_dir] = (results / "jobs").glob("it-healthy-only-*")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {h: n["node_rank"] for h, n in summary["nodes"].items()} == {"node1": 0, "node2": 1, "node4": 2}
    assert summary["verdict"]["ok"] is True and summary["left_out"]["node3"].startswith("fabric run ")
    assert "left out node3 (torchrun_launch_on_failed=skip): fabric run" in healthy.stdout

    # jobs.yml follows that run as it ran, with no -e torchrun_launch_failed/on_failed: status on
    # node1, node2, node4, node3 named as not part of it (not "never started"); stop on those three.
    run_id, follow = (
        summary["run_id"],
        {"torchrun_launch_job": "it-healthy-only", "wireup_results_dir": str(results)},
    )
    t0 = time.monotonic()
    status = run_playbook("jobs.yml", bed.inventory, follow, timeout=busy.HANG_S)
    assert status.rc == 0, f"{status.failure_messages()}\n{status.stdout[-4000:]}"
    shown = {h: r["msg"] for h, r in status.task_results(JOBS_SHOW).items()}
    assert shown["node3"] == [
        f"node3: not part of run {run_id} (left out at launch: {summary['left_out']['node3']})"
    ]
    assert all(
        shown[n][0].startswith(f"{n}: exited with code 0 after ") for n in ("node1", "node2", "node4")
    ), shown
    [stands] = [r["msg"] for r in status.task_results(JOBS_STANDS).values()]
    assert stands == [
        f"job it-healthy-only run {run_id}: every node exited with code 0; not part of it: node3"
    ]
    stop = run_playbook(
        "jobs.yml", bed.inventory, dict(follow, torchrun_launch_action="stop"), timeout=busy.HANG_S
    )
    assert stop.rc == 0, f"{stop.failure_messages()}\n{stop.stdout[-4000:]}"
    assert sorted(stop.task_results(JOBS_ASK)) == ["node1", "node2", "node4"]  # node3: skipped
    assert stop.changed_hosts == []  # the run had ended: nothing to stop
    print(f"[fabric] jobs.yml status and stop of the healthy-only run in {time.monotonic() - t0:.0f} s")

    # Shaping removed, node4's link down (the host side of its veth): node3 passes, node4 is
    # named unreachable (not waited for), the three others pair up in two rounds (odd count).
    veth = bed.state["nodes"]["node4"]["veth"]
    subprocess.run(["ip", "link", "set", veth, "down"], check=True)
    try:
        result, record, md, took = _fabric(bed, results)
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
    assert record["unreachable"] == ["node4"] and record["bad"] == [], md
    assert record["verdicts"] == {
        "node1": "PASS",
        "node2": "PASS",
        "node3": "PASS",
        "node4": "UNREACHABLE",
    }, md
    # round 1: node1 + node2 (node3 waits), round 2: node3 with one of them (and a confirmation if
    # a dip failed it); each ran alone on the two cores, the group of three shares them three ways
    assert record["rounds"] in (2, 3), md
    group = record["group"]
    assert group["members"] == ["node1", "node2", "node3"] and group["verdict"] == "PASS", md
    assert (group["reference_kind"], group["cpu_share"]) == ("slowest_pair", 0.667), md
    assert result.unreachable_hosts == ["node4"] and result.failed_hosts == []
    assert "fabric_unreachable" in {f["code"] for f in record["findings"]}
    assert took < 900
