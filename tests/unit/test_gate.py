"""launch.yml's gate per capability (record/gate.py, gate.latest_verdicts/refusals) on real records:
the H200 x2 full bench record (tests/fixtures/h200x2), the lent H200's --tags gpu_health and
--tags gpu_trial records (docs/example-h200x1/gpu-trial-2026-12-02/bench/), a --tags stepcost
record built from the real CPU ddp_step log (tests/fixtures/stepcost) and a quick check's record.
A partial run's newest record must never hide an older FAIL of what it did not measure."""

from __future__ import annotations

import copy
import json
import pathlib
import time

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

REPO = pathlib.Path(__file__).resolve().parents[2]
FULL = json.loads((REPO / "tests/fixtures/h200x2/bench_record_2026-11-29_healthy.json").read_text())
TRIAL_RUNS = REPO / "docs/example-h200x1/gpu-trial-2026-12-02/bench"
HEALTH = json.loads((TRIAL_RUNS / "20261202T113158Z/localhost.json").read_text())
TRIAL = json.loads((TRIAL_RUNS / "20261202T113205Z/localhost.json").read_text())
CPU_LOG = (REPO / "tests/fixtures/stepcost/cpu-gloo-2ranks-torch2.13.log").read_text()
HOST = "n1"


def put(root, run_id, record, kind="bench", host=HOST):
    results.write_host(root, run_id, host, dict(copy.deepcopy(record), host=host, run_id=run_id), kind)


def refused(root, hosts=(HOST,)):
    return gate.refusals(list(hosts), *gate.latest_verdicts(str(root), list(hosts)))


def nvlink_fail():
    """The full bench record of a node that lost NVLinks between GPU0 and GPU1 (NV18 -> NV12):
    host_record.compare's finding against the healthy record, verdict FAIL."""
    broken = copy.deepcopy(FULL)
    link = broken["topology"]["links"][0]
    link["class"] = "NV12"
    found = [
        f
        for f in host_record.compare(broken, dict(FULL, run_id="20261129T181149Z"))
        if f["severity"] == "critical"
    ]
    assert found, "the comparison names the changed link"
    return dict(broken, findings=found, verdict="FAIL")


def trial_fail():
    """The real --tags gpu_trial record with a pending row remap on GPU0 (gpuhealth's finding)."""
    record = copy.deepcopy(TRIAL)
    gpu = record["gpu_trial"]["gpus"][0]
    found = gpuhealth.gpu_finding(gpu, "gpu_row_remap_pending", "GPU0 has a row remap pending")
    record["gpu_trial"]["verdict"] = gpu["verdict"] = "FAIL"
    return dict(record, findings=[found], verdict="FAIL")


def stepcost_only():
    """A --tags stepcost record (host_record.build_record): the DDP step benchmark alone (bench.plan's
    stepcost_only runs no torch all-reduce), no nccl-tests, no GPU trial; verdict N/A (the step
    benchmark adds at most a WARN: roles/bench/README.md)."""
    record = host_record.build_record(HOST, "20261203T000000Z", {"stepcost": {"single_node": CPU_LOG}})
    assert record["stepcost"] and not record["collectives"] and not record["gpu_trial"]
    assert record["verdict"] == "N/A"
    return record


def full_with_everything():
    """A full run that measured every capability: the H200 x2 record with the GPU trial's part
    (scope full) and the step benchmark's figures: PASS."""
    return dict(FULL, gpu_trial=dict(TRIAL["gpu_trial"], scope="full"), stepcost=stepcost_only()["stepcost"])


def quick(verdict, *problems):
    answer = node_check.result(
        HOST,
        stdout=json.dumps(
            {"verdict": verdict, "line": f"wireup-check: {verdict} {HOST}: x", "problems": list(problems)}
        ),
    )
    return host_record.build_record(HOST, "20261203T000000Z", {"node_check": answer}) | {"kind": "quick"}


def test_what_each_real_record_measured():
    assert gate.measured(FULL, "bench") == ["links", "torch", "node_check"]
    assert gate.measured(HEALTH, "bench") == ["gpu_health"]
    assert gate.measured(TRIAL, "bench") == ["gpu_health", "gpu_trial"]
    assert gate.measured(stepcost_only(), "bench") == ["stepcost"]
    assert gate.measured(full_with_everything(), "bench") == list(gate.CAPABILITIES)
    assert gate.measured(quick("PASS"), "quick") == ["node_check"]
    # A FAIL record with nothing in its parts (a node failed before anything was measured): all.
    assert gate.measured({"verdict": "FAIL"}, "bench") == list(gate.CAPABILITIES)
    assert gate.measured({"verdict": "UNREACHABLE"}, "bench") == []


def test_a_part_with_its_own_verdict_gives_it_and_an_unexplained_fail_fails_everything():
    full_with_trial = dict(nvlink_fail(), gpu_trial=dict(TRIAL["gpu_trial"], scope="full"))
    assert gate.capability_verdicts(full_with_trial, "bench") == {
        "links": "FAIL",
        "torch": "FAIL",
        "node_check": "FAIL",
        "gpu_health": "PASS",
        "gpu_trial": "PASS",
    }
    # The GPU part PASSed but the record FAILed (the node failed during the trial): fail closed.
    odd = dict(TRIAL, verdict="FAIL")
    assert gate.capability_verdicts(odd, "bench") == {"gpu_health": "FAIL", "gpu_trial": "FAIL"}
    assert gate.capability_verdicts(HEALTH, "bench") == {"gpu_health": "PASS"}


def test_a_gpu_health_run_never_hides_a_full_bench_fail_and_a_full_pass_clears_it(tmp_path):
    put(tmp_path, "20261201T000000Z", FULL)
    put(tmp_path, "20261202T000000Z", nvlink_fail())
    put(tmp_path, "20261202T010000Z", HEALTH)  # verdict N/A: "GPU trial only"
    why = refused(tmp_path)[HOST]
    assert why.startswith("bench run 20261202T000000Z FAILed on n1: GPU0-GPU1 link changed from NV18")
    assert why.endswith("(its newest record of links, torch, node_check)")
    put(tmp_path, "20261203T000000Z", FULL)
    assert refused(tmp_path) == {}


def test_a_stepcost_run_never_hides_a_gpu_trial_fail(tmp_path):
    put(tmp_path, "20261201T000000Z", FULL)
    put(tmp_path, "20261202T000000Z", trial_fail())
    put(tmp_path, "20261202T010000Z", stepcost_only())
    why = refused(tmp_path)[HOST]
    assert why == (
        "bench run 20261202T000000Z FAILed on n1: GPU0 GPU-a727f09b: row_remap_pending -> reset "
        "(its newest record of gpu_health, gpu_trial)"
    )
    assert "GPU0 GPU-a727f09b: row_remap_pending -> reset" in slurm.drain_reason(why)
    # A health read alone settles gpu_health, not the trial's figures: still refused for gpu_trial.
    put(tmp_path, "20261203T000000Z", HEALTH)
    assert refused(tmp_path)[HOST].endswith("(its newest record of gpu_trial)")
    put(tmp_path, "20261204T000000Z", TRIAL)
    assert refused(tmp_path) == {}


def test_a_quick_fail_newer_than_the_last_bench_refuses_an_older_one_does_not(tmp_path):
    problem = {"kind": "nvlink", "part": "GPU0", "message": "GPU0: 12 active NVLinks, 18 at the baseline"}
    put(tmp_path, "20261201T000000Z", quick("FAIL", problem), kind="quick")
    put(tmp_path, "20261202T000000Z", FULL)
    assert refused(tmp_path) == {}
    put(tmp_path, "20261203T000000Z", quick("FAIL", problem), kind="quick")
    assert refused(tmp_path) == {
        HOST: "quick run 20261203T000000Z FAILed on n1: GPU0: 12 active NVLinks, 18 at the baseline "
        "(its newest record of node_check)"
    }
    # A quick PASS after it settles node_check again; a bench run of the same id counts as older.
    put(tmp_path, "20261204T000000Z", quick("PASS"), kind="quick")
    assert refused(tmp_path) == {}
    assert gate.store_runs(str(tmp_path))[:2] == [
        ("quick", "20261204T000000Z"),
        ("quick", "20261203T000000Z"),
    ]


@pytest.mark.parametrize("text", ['{"verdict": "PA', "", '{"verdict": "MAYBE"}'])
def test_a_damaged_record_newer_than_a_capabilitys_newest_good_one_refuses(tmp_path, text):
    put(tmp_path, "20261201T000000Z", nvlink_fail())
    put(tmp_path, "20261202T000000Z", FULL)
    damaged = tmp_path / "bench" / "20261203T000000Z" / f"{HOST}.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text(text)
    why = refused(tmp_path)[HOST]
    assert why.startswith(f"latest bench record of n1 cannot be read: {damaged}: ")
    assert "newer than n1's newest readable record of links, torch, stepcost, gpu_health" in why
    # Never read past it: the older FAIL is not what refuses, the damaged file is.
    assert "20261201T000000Z" not in why


def test_a_damaged_record_older_than_every_capabilitys_newest_record_is_not_read(tmp_path):
    damaged = tmp_path / "bench" / "20261201T000000Z" / f"{HOST}.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text("{")
    put(tmp_path, "20261202T000000Z", full_with_everything())
    put(tmp_path, "20261202T010000Z", HEALTH)
    assert refused(tmp_path) == {}
    # Without a judged record of every capability the damaged one is reached, and refuses.
    put(tmp_path, "20261202T000000Z-2", FULL)
    (tmp_path / "bench" / "20261202T000000Z" / f"{HOST}.json").unlink()
    assert "cannot be read" in refused(tmp_path)[HOST]


def test_hostile_host_names_never_leave_the_store(tmp_path):
    root = tmp_path / "results"
    put(root, "20261201T000000Z", FULL)
    # A FAIL record where ../ would lead, outside results/bench/<run>/.
    (root / "evil.json").write_text(json.dumps(dict(FULL, verdict="FAIL")))
    (tmp_path / "evil.json").write_text(json.dumps(dict(FULL, verdict="FAIL")))
    hosts = ["../../evil", "../evil", "n1/../../../evil", "", "n1"]
    failures, _fabric = gate.latest_verdicts(str(root), hosts)
    assert failures == {}
    assert refused(root, hosts) == {}


def test_a_health_read_that_judged_nothing_settles_nothing(tmp_path):
    """N/A is no verdict: a --tags gpu_health run that could not read the GPUs (no driver: its
    part N/A with no GPU, as the testbed's nodes give) never clears an older GPU FAIL."""
    put(tmp_path, "20261201T000000Z", trial_fail())
    unread = copy.deepcopy(HEALTH)
    unread["gpu_trial"].update(verdict="N/A", gpus=[], measured=[])
    put(tmp_path, "20261202T000000Z", unread)
    assert gate.capability_verdicts(unread, "bench") == {"gpu_health": "N/A"}
    assert refused(tmp_path)[HOST].startswith("bench run 20261201T000000Z FAILed on n1: GPU0 GPU-a727f09b")


# ---------------------------------------------------------------- the store's order (issue 35, item 7)
# Run ids are the controller's clock at the run's start. A run stored while that clock was ahead (or
# a folder put there by hand) was ordered by its name alone: its PASS outranked every real run after
# it, FAILs included, until the clock caught up. And a record was read as the node its file is named
# after, whatever host it said it was.
DAY = 86400


def rid(offset_s):
    """A run id ``offset_s`` seconds from now."""
    return results.new_run_id(time.time() + offset_s)


def test_a_future_dated_pass_never_hides_a_later_real_fail(tmp_path):
    before, future, later = rid(-2 * DAY), rid(400 * DAY), rid(-DAY)
    put(tmp_path, before, FULL)
    put(tmp_path, future, FULL)  # the controller's clock was 400 days ahead for this run
    put(tmp_path, later, nvlink_fail())
    assert results.list_runs(str(tmp_path)) == [future, before, later]
    assert refused(tmp_path)[HOST].startswith(f"bench run {later} FAILed on n1: GPU0-GPU1 link changed")
    # The same order everywhere a newest record is looked for: the figures and the baseline.
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import metrics

    assert metrics.latest_record(str(tmp_path), HOST)["run_id"] == later
    assert host_record.baseline_of(str(tmp_path), HOST, before_run_id=rid(0)) == (
        (before, host_record.read_host(str(tmp_path), before, HOST)),
        [],
    )


def test_a_future_dated_record_is_damaged_where_it_is_reached(tmp_path):
    future = rid(400 * DAY)
    put(tmp_path, future, FULL)
    why = refused(tmp_path)[HOST]
    assert why.startswith(
        f"latest bench record of n1 cannot be read: {tmp_path / 'bench' / future / 'n1.json'}: "
    )
    assert f"run {future} is dated 400.0 days after the controller's clock (more than the 300 s" in why
    # A baseline is never taken from it either.
    base, warnings = host_record.baseline_of(str(tmp_path), HOST, before_run_id=rid(0))
    assert base is None and "dated 400.0 days after" in warnings[0]["message"]


def test_a_run_within_the_clock_skew_allowance_orders_by_its_time(tmp_path):
    soon, now = rid(results.CLOCK_SKEW_S - 60), rid(-60)
    put(tmp_path, now, nvlink_fail())
    put(tmp_path, soon, FULL)  # another controller's clock, a little ahead
    assert results.list_runs(str(tmp_path)) == [now, soon]
    assert refused(tmp_path) == {}


def test_run_ids_order_by_time_then_serial_and_a_non_time_is_never_trusted(tmp_path):
    for run_id in (
        "20261201T000000Z-10",
        "20261201T000000Z-2",
        "20261130T235959Z",
        "20261201T000000Z",
        "20261399T000000Z",
    ):
        (tmp_path / "bench" / run_id).mkdir(parents=True)
    assert results.list_runs(str(tmp_path)) == [
        "20261399T000000Z",
        "20261130T235959Z",
        "20261201T000000Z",
        "20261201T000000Z-2",
        "20261201T000000Z-10",
    ]
    assert results.untrusted_time("20261399T000000Z") == "run id 20261399T000000Z is not a time"
    with pytest.raises(ValueError, match="is not like"):
        results.reserve_run(str(tmp_path), "20261399T000000Z")


@pytest.mark.parametrize("given", ["20261205T100000Z\n", "20261205T100000Z-2\n"])
def test_a_run_id_or_host_with_a_trailing_newline_is_no_path_in_the_store(tmp_path, given):
    with pytest.raises(ValueError, match="is not like"):
        results.reserve_run(str(tmp_path), given)
    with pytest.raises(ValueError, match="cannot be a file name"):
        host_record.read_host(str(tmp_path), "20261205T100000Z", "n1\n")
    assert not (tmp_path / "bench").exists() or list((tmp_path / "bench").iterdir()) == []


def test_a_record_that_says_it_is_another_hosts_is_damaged(tmp_path):
    put(tmp_path, rid(-2 * DAY), nvlink_fail())
    theirs = rid(-DAY)
    put(tmp_path, theirs, FULL, host="n2")
    path = tmp_path / "bench" / theirs
    (path / "n1.json").write_text((path / "n2.json").read_text())  # n2's PASS copied as n1's
    why = refused(tmp_path, hosts=(HOST, "n2"))
    assert list(why) == [HOST]
    assert why[HOST].startswith(
        f"latest bench record of n1 cannot be read: {path / 'n1.json'}: its host is 'n2', not n1"
    )


def test_a_record_in_another_runs_folder_is_damaged(tmp_path):
    put(tmp_path, rid(-2 * DAY), nvlink_fail())
    older = rid(-3 * DAY)
    put(tmp_path, older, FULL)
    moved = tmp_path / "bench" / rid(-DAY)
    moved.mkdir()
    (moved / "n1.json").write_text((tmp_path / "bench" / older / "n1.json").read_text())
    why = refused(tmp_path)[HOST]
    assert f"its run id is '{older}', not {moved.name} (its folder's name)" in why
