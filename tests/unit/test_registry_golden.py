"""Issue 36 stage 2b's guard: the records, reports, gate verdicts, record problems and preflight
messages of every capability, made by the real producers from the unit suite's captures, stay
byte-identical to tests/fixtures/golden/registry.json while the six per-capability lists become
reads of capability/registry.py.

The golden file was written by the code before the registry (commit 'golden before the registry');
WIREUP_WRITE_GOLDEN=1 rewrites it, for a change that means to change what wireup writes (say why in
the commit)."""

import copy
import json
import os
import pathlib

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import context
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from tests.unit import test_gpurecord, test_node_check, test_report, test_stepcost

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "registry.json"
STEPCOST = (
    pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "stepcost" / "cpu-gloo-2ranks-torch2.13.log"
)
BENCH_RUN, NEXT_RUN = "20261129T100000Z", "20261129T110000Z"


def _bench_records():
    """Two hosts of the 2x H200 captures (one with the CPU step-cost capture and a GPU step-cost
    line), then a degraded rerun of the first against its baseline."""
    first = test_report.good_node()
    first["stepcost"] = {
        "single_node": test_stepcost.log_of(test_stepcost.gpu_result(compute=40.0, none=41.6)),
        "multi_node": STEPCOST.read_text(),
    }
    a = host_record.build_record("gpu-a01", BENCH_RUN, copy.deepcopy(first))
    b = host_record.build_record("gpu-a02", BENCH_RUN, test_report.node())
    rerun = test_report.node("h200x2_v2.19.6_all_reduce_perf_p2p_disabled.txt", env={"NCCL_P2P_DISABLE": "1"})
    rerun["stepcost"] = {
        "single_node": test_stepcost.log_of(test_stepcost.gpu_result(compute=40.0, none=60.0))
    }
    c = host_record.build_record("gpu-a01", NEXT_RUN, rerun, (BENCH_RUN, dict(a, verdict="PASS")))
    return {"first": {"gpu-a01": a, "gpu-a02": b}, "rerun": {"gpu-a01": c}}


def _trial_records(tmp_path):
    run_id = "20261203T100000Z"
    facts = {
        "gpu-a": test_gpurecord.fact(test_gpurecord.H200, run_id, "gpu-a"),
        "gpu-b": test_gpurecord.fact(test_gpurecord.PENDING, run_id, "gpu-b"),
    }
    return test_gpurecord.store(tmp_path / "trial", run_id, facts)[2]


def _quick_records(tmp_path):
    run = test_node_check._quick_run(tmp_path)
    params = {
        "results_dir": str(tmp_path / "quick"),
        "nodes": run["nodes"],
        "thresholds": test_gpurecord.THRESHOLDS,
    }
    nodes = test_node_check.bench_report.store_nodes(
        dict(params, kind="quick", lost={"n4": "ssh: timed out"}), read=lambda p: ""
    )
    return host_record.store_run(str(tmp_path / "quick"), run["run_id"], nodes, kind="quick")[2]


def _report(tmp_path, name, run_id, records):
    """report.md as the bench store writes it, its context a results folder without history."""
    run_dir = tmp_path / "reports" / name
    run_dir.mkdir(parents=True)
    ctx = context.Reporting(results_dir=str(tmp_path / "results"), now=0.0)
    paths = assemble.write_report(str(run_dir), run_id, copy.deepcopy(records), context=ctx)
    return pathlib.Path(paths["md"]).read_text()


def _broken_records(record):
    """record_problem's answer for a record broken in each part a capability owns."""
    cases = {
        "fine": record,
        "collectives": dict(record, collectives=[]),
        "collectives_rows": dict(record, collectives={"x": {"rows": [{"size": 1.5}]}}),
        "torch_busbw": dict(record, torch={"x": {"verdict": {"measured_busbw": "fast"}}}),
        "torch_implausible": dict(
            record, torch={"x": {"verdict": {"measured_busbw": 1e9}, "expected": {"link_gbps": 100}}}
        ),
        "stepcost": dict(record, stepcost={"single_node": "slow"}),
        "stepcost_hooks": dict(record, stepcost={"single_node": [{"hooks": []}]}),
        "gpu_trial": dict(record, gpu_trial={"gpus": "all"}),
        "node_check": dict(record, node_check=[]),
        "verdict": dict(record, verdict="GOOD"),
        "topology": dict(record, topology={"gpus": "none"}),
    }
    return {name: host_record.record_problem(case) for name, case in cases.items()}


PREFLIGHT_VALUES = {
    "bench_collectives": ["all_reduce", "bogus"],
    "bench_pass_ratio": 2,
    "bench_env": {"1BAD": "x"},
    "gpu_trial_seconds": 0,
    "gpu_trial_sets": ["gemm", "bogus"],
    "gpu_trial_dcgm_diag": 7,
    "node_check_timeout": "often",
    "node_check_bench_tolerance": 3,
    "slurm_health_check_node_state": "ANY;rm",
    "wireup_drain_max_share": 7,
    "wireup_drain_max_nodes": -1,
    "wireup_job_env": {"bad name": "1"},
}


def _produced(tmp_path):
    bench = _bench_records()
    trial = _trial_records(tmp_path)
    quick = _quick_records(tmp_path)
    sets = {"bench_first": bench["first"], "bench_rerun": bench["rerun"], "trial": trial, "quick": quick}
    kinds = {"quick": "quick"}
    return {
        "records": json.loads(json.dumps(sets, sort_keys=True)),
        "reports": {
            "bench_first": _report(tmp_path, "first", BENCH_RUN, bench["first"]),
            "bench_rerun": _report(tmp_path, "rerun", NEXT_RUN, bench["rerun"]),
            "trial": _report(tmp_path, "trial", "20261203T100000Z", trial),
            "quick": _report(tmp_path, "quick", next(iter(quick.values()))["run_id"], quick),
        },
        "summary_lines": {
            name: [assemble.summary_line(r) for _h, r in sorted(s.items())] for name, s in sets.items()
        },
        "gate": {
            name: {h: gate.capability_verdicts(r, kinds.get(name, "bench")) for h, r in sorted(s.items())}
            for name, s in sets.items()
        },
        "record_problems": _broken_records(bench["first"]["gpu-a01"]),
        "preflight": preflight.host_errors(dict(PREFLIGHT_VALUES)),
    }


def test_records_reports_verdicts_and_messages_stay_as_they_were(tmp_path):
    produced = json.loads(json.dumps(_produced(tmp_path), sort_keys=True))
    if os.environ.get("WIREUP_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(produced, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    for part in sorted(golden):
        if isinstance(golden[part], dict):
            for key in sorted(golden[part]):
                assert produced[part].get(key) == golden[part][key], f"{part}.{key} changed"
        assert produced[part] == golden[part], f"{part} changed"
    assert sorted(produced) == sorted(golden)
