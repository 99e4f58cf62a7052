"""tests/perf/fleet.py and fleet_build.py: the synthetic fleet is what wireup's own producers make
of the captures (each bad node judged bad for its own reason), every step runs on a small fleet,
and the growth check tells a linear step from a quadratic one."""

from __future__ import annotations

import json
import os

import pytest

from tests.perf import fleet, fleet_build


def test_each_bad_node_is_judged_bad_by_wireups_own_code(tmp_path):
    hosts = tuple(f"gpu{i:04d}" for i in range(8))
    kinds = dict(zip(hosts[1:7], fleet_build.BAD_KINDS, strict=True))
    shape = fleet_build.Fleet(hosts, kinds)
    run_id = fleet_build.run_id_of(0)
    _rid, _dir, records = fleet_build.store_bench(fleet_build.bench_params(shape, str(tmp_path), run_id, 0))
    verdicts = {kinds.get(h, "good"): r["verdict"] for h, r in records.items()}
    assert verdicts == {
        "good": "PASS",
        "gpu_slow": "FAIL",  # GPU3 at 0.7x: below its spec and its peers
        "row_remap": "FAIL",  # a pending row remap on GPU0
        "links_slow": "FAIL",  # nccl-tests at half the bus bandwidth
        "fabric_slow": "PASS",  # its bench is healthy: the fabric run names it
        "throttled": "WARN",  # the power-brake capture
        "unreachable": "UNREACHABLE",
    }
    gpus = records["gpu0001"]["gpu_trial"]["gpus"]
    assert len(gpus) == 8 and [g["verdict"] for g in gpus].count("FAIL") == 1
    # Every node's GPUs are its own (the gate and the baselines find GPUs by UUID).
    uuids = [g["uuid"] for r in records.values() for g in (r.get("gpu_trial") or {}).get("gpus", [])]
    assert len(uuids) == len(set(uuids)) == 7 * 8
    record, rounds, jobs = fleet_build.fabric_run(shape, str(tmp_path), str(tmp_path / "jobs"))
    assert record["bad"] == ["gpu0004"] and rounds >= 2 and jobs > 3
    quick = fleet_build.store_quick(shape, str(tmp_path), fleet_build.run_id_of(0, 7))[2]
    assert quick["gpu0002"]["verdict"] == "FAIL" and quick["gpu0000"]["verdict"] == "PASS"


def test_the_fleets_shape():
    big = fleet_build.Fleet.of(1024)
    assert (
        len(big.hosts) == 1024 and len(big.bad) == 20 and set(big.bad.values()) == set(fleet_build.BAD_KINDS)
    )
    assert fleet_build.Fleet.of(8).bad == {"gpu0004": "gpu_slow"}
    assert (
        fleet_build.run_id_of(0) == "20260101T060000Z" and fleet_build.run_id_of(364, 7) == "20261231T070000Z"
    )
    assert fleet_build.run_id_of(365) == "20270101T060000Z"
    assert fleet.spread(range(10), 3) == [0, 4, 9] and fleet.spread(range(3), 5) == [0, 1, 2]


def test_every_step_runs_on_a_small_fleet(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet, "HISTORY_DAYS", 3)
    out = tmp_path / "fleet.json"
    args = ["--sizes", "2,3", "--days", "3", "--history-hosts", "2", "--calls", "--json", str(out)]
    assert fleet.main([*args, "--tmp", str(tmp_path)]) == 0
    data = json.loads(out.read_text())
    assert set(data["steps"]) == set(fleet.STEPS)
    for name, per_size in data["steps"].items():
        m = per_size["3"]
        assert m["cpu"] >= 0 and not m["skipped"], name
        assert m["calls"] is None or m["calls"] > 0, name
    assert data["steps"]["fabric"]["3"]["extra"]["rounds"] >= 1
    assert data["steps"]["gate_history"]["3"]["sampled"] == 2
    assert data["steps"]["store"]["3"]["calls"] > 0
    assert os.listdir(tmp_path) == ["fleet.json"]  # the temporary stores are gone


def _m(cpu, calls):
    return fleet.Measure(cpu=cpu, calls=calls)


@pytest.mark.parametrize(
    ("small", "large", "problems"),
    [
        (_m(1.0, 1000), _m(4.2, 4300), []),  # linear
        (_m(1.0, 1000), _m(7.5, 4300), []),  # CPU within the busy machine's slack
        (_m(1.0, 1000), _m(16.0, 16000), ["calls", "CPU"]),  # quadratic
        (_m(1.0, 1000), _m(4.0, 4800), ["calls"]),  # 4.8x the calls: past 4.5x
        (_m(1.0, None), _m(9.0, None), ["CPU"]),  # only CPU counted
        (_m(1.0, 1000), fleet.Measure(cpu=99.0, skipped=True), []),  # an estimate is no figure
    ],
)
def test_the_growth_check(small, large, problems):
    found = fleet.check({"step": {64: small, 256: large}}, [64, 256])
    assert ["calls" if " the calls " in p else "CPU" for p in found] == problems


def test_the_gate_may_not_read_every_record_of_a_host():
    many = fleet.Measure(cpu=1.0, extra={"reads_per_host": 365.0})
    few = fleet.Measure(cpu=1.0, extra={"reads_per_host": 2.0})
    assert fleet.check({"gate_history": {64: few, 256: few}}, [64, 256]) == []
    [found] = fleet.check({"gate_history": {64: few, 256: many}}, [64, 256])
    assert found.startswith("gate_history: 365.0 records read per host of 365 at 256 nodes")


def test_a_step_that_would_take_too_long_is_estimated_not_run():
    history = [(64, _m(0.5, None)), (256, _m(25.0, None))]
    guess = fleet._estimate(history, 1024, "peers")
    assert guess.skipped and 1000 < guess.cpu < 1500  # 25 s x 4 ** 2.8
    assert fleet._estimate([(64, _m(1.0, None))], 256, "gate").cpu == 4.0
