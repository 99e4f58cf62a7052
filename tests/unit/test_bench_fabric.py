"""The bench_fabric role's plan (wireup/plans/bench_fabric.py): each node's part of every job, its job in a
round of the judged plan, what it reports of that job."""

from __future__ import annotations

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import pairwise
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_fabric

GPU = {"gpu": {"present": True, "count": 2}}
CPU = {"gpu": {"present": False, "count": 0}}
SETTINGS = {
    "max_rounds": 3,
    "max_bytes": "1G",
    "cpu_max_bytes": "16M",
    "iterations": 5,
    "env": {"NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Tree"},
    "fabric_env": {"NCCL_ALGO": "Ring"},
    "dir": "/opt/wireup/bench",
}


def test_plan_sizes_the_job_by_the_node_kind_and_layers_the_environment():
    gpu, cpu = bench_fabric.plan(GPU, **SETTINGS), bench_fabric.plan(CPU, **SETTINGS)
    assert gpu["program"] == "/opt/wireup/bench/torch_allreduce.py"
    assert gpu["args"] == ["--min-bytes", "1G", "--max-bytes", "1G", "--warmup", "2", "--iters", "5"]
    assert cpu["args"][:4] == ["--min-bytes", "16M", "--max-bytes", "16M"]
    # bench_fabric_env over bench_env, NCCL INFO over both.
    assert gpu["env"] == {
        "NCCL_P2P_DISABLE": "1",
        "NCCL_ALGO": "Ring",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
    }


def test_the_rounds_included_are_bounded_by_max_rounds_with_their_confirmations():
    # round 0 plans; then at most 3 rounds of new pairs, each with its confirmation round, the
    # whole-group run and its confirmation: 8 rounds
    assert bench_fabric.plan(GPU, **SETTINGS)["rounds"] == list(range(9))
    assert bench_fabric.plan(GPU, **dict(SETTINGS, max_rounds=1))["rounds"] == [0, 1, 2, 3, 4]


def test_a_missing_or_misspelt_setting_is_an_error():
    with pytest.raises(TypeError, match="iterations"):
        bench_fabric.plan(GPU, **{k: v for k, v in SETTINGS.items() if k != "iterations"})
    with pytest.raises(TypeError, match="itrations"):
        bench_fabric.plan(GPU, **SETTINGS, itrations=5)


def test_each_node_finds_its_job_of_the_round_or_waits():
    judged = pairwise.plan(["n1", "n2", "n3"])  # round 1: n1+n2, n3 waits
    mine = bench_fabric.job(judged, "n2", 1)
    assert mine == {
        "run": True,
        "job": "bench-fabric-r1",
        "group": "wireup_fabric_r1_n1_n2",
        "members": ["n1", "n2"],
        "kind": "pair",
        "confirms": 0,
    }
    assert bench_fabric.job(judged, "n3", 1)["run"] is False
    # Round 0 only plans: nobody runs, whatever the plan holds.
    assert bench_fabric.job(judged, "n1", 0)["run"] is False
    assert bench_fabric.job({}, "n1", 0)["run"] is False


def test_a_result_from_an_earlier_round_counts_as_the_job_not_starting():
    the_job = bench_fabric.job(pairwise.plan(["n1", "n2"]), "n1", 1)
    fresh = {
        "log": "/results/launch/bench-fabric-r1-20261201T000000Z/n1.log",
        "verdict": {"ok": True, "reason": ""},
    }
    assert bench_fabric.result(the_job, fresh, "n1", 1) == {
        "round": 1,
        "pair": ["n1", "n2"],
        "kind": "pair",
        "confirms": 0,
        "host": "n1",
        "log": fresh["log"],
        "ok": True,
        "reason": "",
    }
    stale = dict(fresh, log="/results/launch/bench-fabric-r0-20261201T000000Z/n1.log")
    assert bench_fabric.result(the_job, stale, "n1", 1)["ok"] is False
    assert bench_fabric.result(the_job, {}, "n1", 1)["reason"] == "the job did not start on this node"
    failed = dict(fresh, verdict={"ok": False, "reason": "rank 1 exited 1"})
    assert bench_fabric.result(the_job, failed, "n1", 1)["reason"] == "rank 1 exited 1"


def test_a_confirmation_job_says_which_round_it_confirms_and_its_result_says_so_too():
    """The seam pairwise.plan -> job -> torchrun_launch's result -> result: a failing pair's
    confirmation in round 2 carries confirms=1 to the judgement."""
    judged = pairwise.plan(["n1", "n2"], [{"round": 1, "pair": ["n1", "n2"], "busbw": 0.1}], expected_gbs=1.0)
    mine = bench_fabric.job(judged, "n2", 2)
    assert (mine["run"], mine["group"], mine["confirms"], mine["job"]) == (
        True,
        "wireup_fabric_r2_n1_n2",
        1,
        "bench-fabric-r2",
    )
    launch = {"log": "/results/launch/bench-fabric-r2-20261201T000000Z/n2.log", "verdict": {"ok": True}}
    reported = bench_fabric.result(mine, launch, "n2", 2)
    assert (reported["round"], reported["confirms"], reported["ok"]) == (2, 1, True)
    waits = bench_fabric.job(judged, "n3", 2)
    assert waits["run"] is False and waits["confirms"] == 0
