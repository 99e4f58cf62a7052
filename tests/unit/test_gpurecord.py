"""The GPU trial from the nodes' facts to the records, the report, the launch gate and Slurm's drain
reason (wireup.plans.gpu_trial -> bench_report.store_nodes -> gpu_trial_run.attach ->
host_record.store_run, whose SECTIONS hold gpu_trial.section -> report; fabricrun; launch; slurm),
on our 2x H200's health read and written fingerprint documents."""

import copy
import json
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import gpu_trial
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpu_trial_settings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_report, torchrun_launch
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import gpu_trial as plans_gpu_trial
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import (
    gate,
    gpu_trial_run,
    host_record,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
H200 = (FIXTURES / "h200x2" / "nvidia_smi_q.xml").read_text()
PENDING = (
    FIXTURES / "gpuhealth" / "synthetic" / "h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"
).read_text()
FIGURES = {
    "gemm_bf16_flops": 780e12,
    "gemm_fp16_flops": 740e12,
    "gemm_tf32_flops": 370e12,
    "gemm_fp8_flops": 1300e12,
    "hbm_copy_bytes_per_second": 3.9e12,
    "h2d_bytes_per_second": 53e9,
    "d2h_bytes_per_second": 52e9,
    "h2d_concurrent_bytes_per_second": 52e9,
    "d2h_concurrent_bytes_per_second": 51e9,
}
PLAN = {"notes": [], "dcgm_level": 0}


def fingerprint_doc(health, scale=1.0, mode="cuda"):
    gpus = []
    for g in health["gpus"]:
        gpus.append(
            {
                "index": g["index"],
                "uuid": g["uuid"],
                "bus_id": g["bus_id"],
                "name": g["name"],
                "figures": {
                    k: {
                        "median": v * scale,
                        "min": v * scale * 0.98,
                        "max": v * scale * 1.01,
                        "mean": v * scale,
                        "stdev": 1.0,
                        "samples": 30,
                    }
                    for k, v in FIGURES.items()
                },
                "throttle": {},
                "skipped": {},
                "errors": {},
            }
        )
    return {
        "wireup_gpu_fingerprint": 1,
        "mode": mode,
        "gpus": gpus,
        "elapsed_s": 84.2,
        "seconds_per_set": 25,
        "sets": ["gemm", "hbm", "pcie"],
        "set_seconds": {"gemm": 25.3, "hbm": 25.1, "pcie": 26.0},
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "nvml": "13.615.71",
        "nvml_note": "",
        "errors": [],
    }


def fact(xml, run_id, host, *, scale=1.0, rc=0, mode="cuda", stdout=None):
    health = gpuhealth.parse(xml)
    read = {"health": health, "error": "", "dcgmi": "", "summary": ["x"]}
    doc = fingerprint_doc(health, scale, mode)
    registered = {
        "rc": rc,
        "stdout": json.dumps(doc) if stdout is None else stdout,
        "stderr": "",
        "delta": "0:01:24.2",
    }
    return plans_gpu_trial.node_data(PLAN, run_id, host, reads=[read, read], fingerprint=registered)


THRESHOLDS = {
    "pass_ratio": 0.9,
    "warn_ratio": 0.75,
    "min_bytes": 1 << 30,
    "tolerance": 0.1,
    "torch_goal": 0.97,
}


def trial_run(run_id, facts):
    """gpu_trial_run as the report play gathers it (the role's default thresholds)."""
    given = plans_gpu_trial.JudgeSettings(**gpu_trial_settings.thresholds({}))
    return plans_gpu_trial.run_data(sorted(facts), [facts[h] for h in sorted(facts)], given)


def store(tmp_path, run_id, facts, bench_nodes=None):
    """What wireup_bench_store does with the run: bench_report.store_nodes (the GPU trial judged
    across the run) then host_record.store_run."""
    params = {
        "results_dir": str(tmp_path),
        "run_id": run_id,
        "nodes": bench_nodes if bench_nodes is not None else {h: {} for h in facts},
        "thresholds": THRESHOLDS,
        "gpu_trial": trial_run(run_id, facts),
    }
    nodes = bench_report.store_nodes(params, lambda path: "")
    return host_record.store_run(str(tmp_path), run_id, nodes)


def test_a_run_judged_stored_reported_and_gated(tmp_path):
    run_id = "20261203T100000Z"
    _rid, run_dir, records = store(
        tmp_path, run_id, {"gpu-a": fact(H200, run_id, "gpu-a"), "gpu-b": fact(PENDING, run_id, "gpu-b")}
    )
    a, b = records["gpu-a"], records["gpu-b"]
    assert a["verdict"] == "PASS" and [g["verdict"] for g in a["gpu_trial"]["gpus"]] == ["PASS", "PASS"]
    assert a["gpu_trial"]["scope"] == "full" and a["gpu_trial"]["fingerprint"]["elapsed_s"] == 84.2
    # The part says which capability it measured and what ran (a per-capability gate reads it).
    assert a["gpu_trial"]["capability"] == "gpu_trial" and a["gpu_trial"]["measured"] == [
        "health",
        "fingerprint",
    ]
    assert b["verdict"] == "FAIL" and [g["verdict"] for g in b["gpu_trial"]["gpus"]] == ["FAIL", "PASS"]
    first = b["findings"][0]
    assert (first["code"], first["remediation"], first["gpus"]) == ("gpu_row_remap_pending", "reset", [0])
    # Every figure in base units with its spread, the three judgements beside it.
    bf16 = a["gpu_trial"]["gpus"][0]["figures"]["gemm_bf16_flops"]
    assert bf16["median"] == 780e12 and bf16["samples"] == 30 and bf16["min"] < bf16["median"] < bf16["max"]
    assert {"spec", "peer", "baseline"} <= set(bf16) and bf16["peer"]["best_gpu"].startswith("gpu-")
    # Written as strict JSON and read back as a record.
    assert (
        host_record.read_host(str(tmp_path), run_id, "gpu-b")["gpu_trial"]["gpus"][0]["serial"]
        == "1653724057182"
    )

    paths = assemble.write_report(run_dir, run_id, records)
    md = pathlib.Path(paths["md"]).read_text()
    assert "## GPUs on trial: health, fingerprint, spec, peers, baseline" in md
    assert (
        "| gpu-b GPU0 | 00000000:00:06.0 | 1653724057182 | H200 | FAIL | row_remap_pending -> reset |" in md
    )
    # 119%: 780 / (989.4 x 0.66, gpuspec.EFFICIENCY)
    assert "| gpu-a GPU0 | gemm bf16 | 780.0 TFLOPS |" in md and "119%" in md
    assert "gpus.png" in "".join(paths["pngs"])
    assert "GPUs FAIL (1 FAIL, 1 PASS), fingerprint 84 s, reset: GPU0" in assemble.summary_line(b)

    # The launch gate refuses gpu-b naming the GPU, the finding and the remediation; Slurm's drain
    # reason carries them too (within its 120 characters).
    bench, fabric_record = gate.latest_verdicts(str(tmp_path), ["gpu-a", "gpu-b"])
    refused = gate.refusals(["gpu-a", "gpu-b"], bench, fabric_record)
    assert list(refused) == ["gpu-b"]
    assert "FAILed on gpu-b: GPU0 GPU-47e4f408: row_remap_pending -> reset" in refused["gpu-b"]
    assert "GPU0 GPU-47e4f408: row_remap_pending -> reset" in slurm.drain_reason(refused["gpu-b"])
    skip = torchrun_launch.health_plan(["gpu-a", "gpu-b"], {}, refused, on_failed="skip")
    assert skip["hosts"] == ["gpu-a"] and "row_remap_pending" in skip["left_out"]["gpu-b"]


@pytest.mark.parametrize(
    "serial",
    [
        "0",  # cloud and GeForce cards print a placeholder
        "1653724057182",  # the two GPUs of one board (K80) share the board's serial
    ],
)
def test_gpus_that_share_a_serial_each_meet_their_own_baseline_by_uuid(tmp_path, serial):
    shared = H200.replace("<serial>1653724057182</serial>", f"<serial>{serial}</serial>").replace(
        "<serial>1653724060308</serial>", f"<serial>{serial}</serial>"
    )
    first, second = "20261203T100000Z", "20261204T100000Z"
    store(tmp_path, first, {"gpu-a": fact(shared, first, "gpu-a")})
    _rid, _dir, records = store(tmp_path, second, {"gpu-a": fact(shared, second, "gpu-a")})
    for index, gpu in enumerate(records["gpu-a"]["gpu_trial"]["gpus"]):
        base = gpu["figures"]["gemm_bf16_flops"]["baseline"]
        assert (base["run_id"], base["index"], base["moved"]) == (first, index, False), gpu["bus_id"]
    assert records["gpu-a"]["verdict"] == "PASS"


def test_a_gpu_without_a_uuid_has_no_history(tmp_path):
    """No UUID, no key: its serial (all it has) never finds another GPU's run."""
    nameless = H200.replace("GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75", "N/A")
    first, second = "20261203T100000Z", "20261204T100000Z"
    store(tmp_path, first, {"gpu-a": fact(nameless, first, "gpu-a")})
    _rid, _dir, records = store(tmp_path, second, {"gpu-a": fact(nameless, second, "gpu-a")})
    gpu0, gpu1 = records["gpu-a"]["gpu_trial"]["gpus"]
    assert gpu0["figures"]["gemm_bf16_flops"]["baseline"]["verdict"] == "N/A"
    assert gpu1["figures"]["gemm_bf16_flops"]["baseline"]["run_id"] == first


def test_each_gpu_meets_its_own_baseline_by_uuid_wherever_it_moved(tmp_path):
    first = "20261203T100000Z"
    store(tmp_path, first, {"gpu-a": fact(H200, first, "gpu-a")})
    # The same two GPUs, 12% slower, now in gpu-b and in swapped slots.
    swapped = H200.replace("00000000:00:06.0", "00000000:00:99.0").replace(
        "00000000:00:07.0", "00000000:00:06.0"
    )
    second = "20261204T100000Z"
    _rid, _dir, records = store(tmp_path, second, {"gpu-b": fact(swapped, second, "gpu-b", scale=0.88)})
    gpu0 = records["gpu-b"]["gpu_trial"]["gpus"][0]
    base = gpu0["figures"]["gemm_bf16_flops"]["baseline"]
    assert (base["run_id"], base["host"], base["moved"], base["verdict"]) == (first, "gpu-a", True, "WARN")
    assert base["change"] == pytest.approx(-0.12)
    assert records["gpu-b"]["verdict"] == "WARN"
    assert any(
        f["code"] == "gpu_baseline_drop" and "then gpu-a GPU0" in f["message"]
        for f in records["gpu-b"]["findings"]
    )


def test_a_damaged_record_is_a_warning_and_never_a_baseline(tmp_path):
    first = "20261203T100000Z"
    store(tmp_path, first, {"gpu-a": fact(H200, first, "gpu-a")})
    path = tmp_path / "bench" / first / "gpu-a.json"
    damaged = json.loads(path.read_text())
    damaged["gpu_trial"]["gpus"][0]["figures"]["gemm_bf16_flops"]["median"] = 5e16  # 50 x its peak: edited
    path.chmod(0o640)
    path.write_text(json.dumps(damaged))
    found, warnings = gpu_trial_run.baselines(
        str(tmp_path), "20261204T100000Z", ["1653724057182", "1653724060308"]
    )
    assert set(found) == set()
    assert [w["code"] for w in warnings] == [
        "baseline_record_damaged"
    ] and "gpu_trial.gpus[0]: figures.gemm_bf16_flops" in warnings[0]["message"]
    second = "20261204T100000Z"
    _rid, _dir, records = store(tmp_path, second, {"gpu-a": fact(H200, second, "gpu-a")})
    assert any(f["code"] == "baseline_record_damaged" for f in records["gpu-a"]["findings"])
    assert (
        records["gpu-a"]["gpu_trial"]["gpus"][0]["figures"]["gemm_bf16_flops"]["baseline"]["verdict"] == "N/A"
    )


def test_a_gpu_only_run_passes_no_host_but_fails_one(tmp_path):
    """`bench.yml --tags gpu_trial`: no bench data, every host's record from the GPU trial alone."""
    run_id = "20261203T100000Z"
    facts = {"gpu-a": fact(H200, run_id, "gpu-a"), "gpu-b": fact(PENDING, run_id, "gpu-b")}
    nodes = gpu_trial_run.attach(
        str(tmp_path), run_id, {}, trial_run(run_id, facts), run_wide={"secret_env": []}
    )
    assert nodes["gpu-a"]["gpu_only"] and nodes["gpu-a"]["skipped"] == gpu_trial_run.GPU_ONLY
    _rid, _dir, records = host_record.store_run(str(tmp_path), run_id, nodes)
    assert records["gpu-a"]["gpu_trial"]["scope"] == "gpu_only"
    # Not a bandwidth baseline (N/A), but the GPUs passed: they are GPU baselines.
    assert records["gpu-a"]["verdict"] == "N/A" and records["gpu-a"]["gpu_trial"]["verdict"] == "PASS"
    assert records["gpu-b"]["verdict"] == "FAIL"
    uuid = "gpu-47e4f408-caf2-4eaa-9629-5a6d1365dd75"  # GPU0's UUID, the key (lower case)
    found, _ = gpu_trial_run.baselines(str(tmp_path), "20261204T100000Z", [uuid, "1653724057182"])
    assert found[uuid][1] == "gpu-a" and "1653724057182" not in found  # a serial is never a key


@pytest.mark.parametrize(
    ("kwargs", "code", "severity"),
    [
        ({"rc": 124, "stdout": ""}, "gpu_fingerprint_failed", "critical"),
        ({"rc": 1, "stdout": "Traceback (most recent call last):"}, "gpu_fingerprint_failed", "critical"),
        ({"stdout": '{"hello": 1}'}, "gpu_fingerprint_failed", "critical"),
        ({"mode": "cpu-test"}, "gpu_fingerprint_test_mode", "warning"),
    ],
)
def test_a_fingerprint_that_failed_or_ran_in_test_mode_is_never_judged(tmp_path, kwargs, code, severity):
    run_id = "20261203T100000Z"
    _rid, _dir, records = store(tmp_path, run_id, {"gpu-a": fact(H200, run_id, "gpu-a", **kwargs)})
    rec = records["gpu-a"]
    assert [(f["code"], f["severity"]) for f in rec["findings"] if f["code"] == code] == [(code, severity)]
    assert all(g["figures"] == {} for g in rec["gpu_trial"]["gpus"])
    assert rec["gpu_trial"]["measured"] == ["health"]


def test_a_health_read_that_failed_is_critical():
    data = plans_gpu_trial.node_data(
        PLAN,
        "r",
        "gpu-a",
        reads=[
            {"health": None, "error": "`nvidia-smi -q -x` failed (rc 9): No devices were found", "dcgmi": ""}
        ],
    )
    inputs = gpu_trial.node_inputs("gpu-a", data)
    [found] = inputs["findings"]
    assert (
        found["code"] == "gpu_health_unreadable"
        and found["severity"] == "critical"
        and found["remediation"] == "reboot"
    )
    assert "No devices were found" in found["message"]


def test_record_problem_checks_the_gpu_section():
    base = {"verdict": "PASS", "gpu_trial": {"gpus": [{"figures": {"gemm_bf16_flops": {"median": 1e15}}}]}}
    assert host_record.record_problem(base) == ""
    assert host_record.record_problem(dict(base, gpu_trial=[])) == "gpu_trial is a list, not an object"
    assert host_record.record_problem(dict(base, gpu_trial={"gpus": "all"})) == "gpu_trial.gpus is not a list"
    broken = copy.deepcopy(base)
    broken["gpu_trial"]["gpus"][0]["figures"]["gemm_bf16_flops"]["median"] = "fast"
    assert "gpu_trial.gpus[0]: figures.gemm_bf16_flops.median is 'fast'" in host_record.record_problem(broken)


def test_the_gpu_trial_is_a_section_of_the_host_record():
    """host_record.SECTIONS holds it (after the bench's, before the host's verdict); a host without a
    GPU trial gets an empty part and nothing from it."""
    keys = [key for key, _ in host_record.SECTIONS]
    assert keys.index("gpu_trial") > keys.index("stepcost")
    assert gpu_trial.section({}, {}, None) == ({}, [], [])


def test_a_run_without_the_gpu_trial_stores_as_before(tmp_path):
    """`--tags bench`: gpu_trial_run gathered no node; the records are the bench's alone."""
    params = {
        "results_dir": str(tmp_path),
        "run_id": "20261203T100000Z",
        "nodes": {"a": {}},
        "thresholds": THRESHOLDS,
        "gpu_trial": trial_run("20261203T100000Z", {}),
    }
    nodes = bench_report.store_nodes(params, lambda path: "")
    assert "gpu_trial" not in nodes["a"]
    _rid, _dir, records = host_record.store_run(str(tmp_path), "20261203T100000Z", nodes)
    assert records["a"]["gpu_trial"] == {}


def test_a_health_read_alone_records_its_capability(tmp_path):
    """`bench.yml --tags gpu_health`: the part says so (a newer health read is no fingerprint)."""
    run_id = "20261203T100000Z"
    plan = {"notes": [], "dcgm_level": 0, "capability": "gpu_health"}
    read = {"health": gpuhealth.parse(H200), "error": "", "dcgmi": ""}
    facts = {
        "gpu-a": plans_gpu_trial.node_data(
            plan, run_id, "gpu-a", reads=[read], fingerprint=None, dcgm_run=None
        )
    }
    nodes = gpu_trial_run.attach(
        str(tmp_path), run_id, {}, trial_run(run_id, facts), run_wide={"secret_env": []}
    )
    _rid, run_dir, records = host_record.store_run(str(tmp_path), run_id, nodes)
    part = records["gpu-a"]["gpu_trial"]
    assert (part["capability"], part["measured"], part["scope"]) == ("gpu_health", ["health"], "gpu_only")
    assert records["gpu-a"]["verdict"] == "N/A" and part["verdict"] == "PASS"
    md = pathlib.Path(assemble.write_report(run_dir, run_id, records)["md"]).read_text()
    assert "gpu-a: the GPUs' health read alone (bench.yml --tags gpu_health): no fingerprint" in md


def test_a_lost_gpu_fails_the_record_the_report_and_the_gate(tmp_path):
    """1 of 16 GPUs listed, GPU0 healthy (issue 35 item 3): the node's record FAILs on gpu_lost, the
    report says so and the launch gate refuses the node naming how many are missing."""
    one = (
        FIXTURES / "gpuhealth" / "synthetic" / "h200x16_580.159.04_q_x_1_of_16_listed_written.xml"
    ).read_text()
    run_id = "20261201T100000Z"  # a past run: the store refuses one dated ahead of its clock
    _rid, run_dir, records = store(
        tmp_path, run_id, {"gpu-a": fact(H200, run_id, "gpu-a"), "gpu-b": fact(one, run_id, "gpu-b")}
    )
    b = records["gpu-b"]
    assert b["verdict"] == "FAIL" and b["gpu_trial"]["verdict"] == "FAIL"
    assert [g["verdict"] for g in b["gpu_trial"]["gpus"]] == ["PASS"]
    [lost] = [f for f in b["findings"] if f["code"] == "gpu_lost"]
    assert (lost["severity"], lost["remediation"], lost["gpu"]) == ("critical", "reboot", {})
    assert records["gpu-a"]["verdict"] == "PASS"
    paths = assemble.write_report(run_dir, run_id, records)
    assert "15 of 16 GPU(s) fallen off the bus or lost" in pathlib.Path(paths["md"]).read_text()
    bench, fabric_record = gate.latest_verdicts(str(tmp_path), ["gpu-a", "gpu-b"])
    refused = gate.refusals(["gpu-a", "gpu-b"], bench, fabric_record)
    assert list(refused) == ["gpu-b"] and "15 of 16 GPU(s) fallen off the bus or lost" in refused["gpu-b"]
    assert "15 of 16 GPU(s)" in slurm.drain_reason(refused["gpu-b"])
