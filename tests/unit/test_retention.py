"""The store's retention (issue 39, record/retention.py, bench_keep_days) on a synthetic store of
real records (the H200 x2 bench record, the lent H200's GPU trial record, a quick check's record,
written by results.write_host and entered in the index as wireup_bench_store does): what it
removes, that every reader's answer (the gate, the bandwidth baseline, the GPU baselines) is the
same after it, and preflight's rule for the setting."""

from __future__ import annotations

import calendar
import os
import time

import pytest
from test_gate import FULL, HOST, TRIAL, nvlink_fail, quick, trial_fail
from test_store_index import no_stepcost

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import bench_settings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import (
    gate,
    gpu_trial_run,
    host_record,
    retention,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

DAY0 = calendar.timegm((2026, 6, 1, 0, 0, 0))
NOW = DAY0 + 120 * retention.DAY_S


def day_id(day):
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(DAY0 + day * retention.DAY_S))


def write(root, day, record, kind="bench", host=HOST):
    rid = day_id(day)
    stored = dict(record, host=host, run_id=rid)
    results.write_host(str(root), rid, host, stored, kind)
    gate.index_run(str(root), kind, rid, {host: stored})


def answers(root, hosts):
    """What every reader of old records answers: the gate, each host's bandwidth baseline (for a
    run after the last), the GPU baselines of the trial's GPUs."""
    keys = [g.get("uuid") for g in TRIAL["gpu_trial"]["gpus"]]
    return (
        gate.latest_verdicts(str(root), hosts)[0],
        {h: (host_record.last_passing(str(root), h) or ("none",))[0] for h in hosts},
        {k: v[:2] for k, v in gpu_trial_run.baselines(str(root), None, keys)[0].items()},
    )


@pytest.fixture
def store(tmp_path, monkeypatch):
    """Three hosts over 120 days: n1 a GPU trial FAIL on day 0 and a passing GPU trial on day 1
    (neither capability judged again), then full runs without the trial and the step benchmark, a
    damaged record on day 40 and a quick check every tenth day; n2 a PASS on day 2, WARNs after it
    (its baseline stays day 2) and a FAIL on day 80; n3 one NVLink FAIL on day 80. The GPU
    baselines look at 5 runs here."""
    monkeypatch.setattr(retention, "BASELINE_RUNS", 5)
    write(tmp_path, 0, trial_fail())
    write(tmp_path, 1, dict(TRIAL, gpu_trial=dict(TRIAL["gpu_trial"], scope="full")))
    write(tmp_path, 2, FULL, host="n2")
    for day in range(3, 120):
        write(tmp_path, day, no_stepcost(FULL))
        write(tmp_path, day, dict(no_stepcost(FULL), verdict="WARN" if day != 80 else "FAIL"), host="n2")
        if day == 80:
            write(tmp_path, day, nvlink_fail(), host="n3")
        if day % 10 == 0:
            write(tmp_path, day, quick("PASS"), kind=node_check.KIND)
    damaged = tmp_path / "bench" / day_id(40) / "n1.json"
    damaged.write_text('{"verdict": "MAYBE"}')
    return tmp_path


def test_retention_removes_only_what_no_reader_needs_and_every_answer_stays(store):
    hosts = ["n1", "n2", "n3"]
    before = answers(store, hosts)
    assert {h: [f["verdict"] for f in fs] for h, fs in before[0].items()} == {
        "n1": ["DAMAGED"],
        "n3": ["FAIL"],
    }
    assert before[1] == {"n1": day_id(119), "n2": day_id(2), "n3": "none"}
    plan = retention.plan(str(store), 30, now=NOW)
    removed = {os.path.relpath(p, store) for p in plan["remove"]}
    assert f"bench/{day_id(1)}/n1.json" not in removed  # n1's newest GPU trial: the gate's
    assert f"bench/{day_id(0)}/n1.json" in removed  # the older trial FAIL: day 1 judged it again
    assert f"bench/{day_id(40)}/n1.json" not in removed  # damaged: the user moves it away
    assert f"bench/{day_id(2)}/n2.json" not in removed  # n2's newest PASS: its baseline
    assert f"bench/{day_id(80)}/n3.json" not in removed  # n3's only record: the gate's
    assert f"bench/{day_id(80)}/n2.json" in removed  # an old FAIL a newer WARN judged again
    assert f"bench/{day_id(60)}/n1.json" in removed and f"quick/{day_id(60)}/n1.json" in removed
    assert f"bench/{day_id(110)}/n1.json" not in removed  # within 30 days
    assert plan["kept"] == {"gate": 2, "damaged": 1, "baseline": 1}
    assert retention.apply(str(store), plan) == len(plan["remove"])
    assert answers(store, hosts) == before
    assert retention.plan(str(store), 30, now=NOW)["remove"] == []


def test_a_run_folder_empty_after_retention_goes_one_with_its_report_stays(store):
    plan = retention.plan(str(store), 30, now=NOW)
    (store / "bench" / day_id(60) / "report.md").write_text("# the run's report\n")
    retention.apply(str(store), plan)
    assert not (store / "bench" / day_id(61)).exists()
    assert sorted(os.listdir(store / "bench" / day_id(60))) == ["report.md"]


def test_the_newest_passing_record_a_baseline_points_at_is_never_removed_however_old(tmp_path, monkeypatch):
    monkeypatch.setattr(retention, "BASELINE_RUNS", 5)
    write(tmp_path, 0, FULL)
    for day in range(1, 40):
        write(tmp_path, day, dict(FULL, verdict="WARN"))
    plan = retention.plan(str(tmp_path), 1, now=NOW)
    assert results.host_path(str(tmp_path), day_id(0), HOST) not in plan["remove"]
    retention.apply(str(tmp_path), plan)
    assert len(plan["remove"]) == 34  # days 1 to 34; the 5 newest runs stay
    assert host_record.last_passing(str(tmp_path), HOST)[0] == day_id(0)


def test_keep_days_zero_removes_nothing_and_a_wrong_value_names_the_variable(tmp_path):
    write(tmp_path, 0, FULL)
    assert retention.plan(str(tmp_path), 0, now=NOW) == {"remove": [], "kept": {}}
    for wrong in (-1, True, "30", 1.5):
        with pytest.raises(ValueError, match="bench_keep_days"):
            retention.plan(str(tmp_path), wrong, now=NOW)


@pytest.mark.parametrize("value", [-1, "x", True, "1.5"])
def test_preflight_refuses_a_keep_days_that_is_no_whole_number(value):
    (error,) = bench_settings.bench_errors({"bench_keep_days": value})
    assert error.startswith(f"bench_keep_days={value!r} must be a whole number of days")


@pytest.mark.parametrize("value", [0, 30, "365"])
def test_preflight_passes_whole_days(value):
    assert bench_settings.bench_errors({"bench_keep_days": value}) == []
