"""The bench role's plan (wireup/plans/bench.py) and the node results the controller builds from what
the role's tasks registered, on the 2x H200 captures."""

import base64
import dataclasses
import pathlib

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import (
    bandwidth,
    bench_settings,
    benchenv,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record

REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "tests/fixtures/h200x2"
# The role's defaults the plan reads: every one but the play's own (bench.PLAY_SETTINGS).
DEFAULTS = {
    k: v
    for k, v in yaml.safe_load((REPO / "roles/bench/defaults/main.yml").read_text()).items()
    if k not in bench.PLAY_SETTINGS
}
REPORT_DEFAULTS = yaml.safe_load((REPO / "roles/bench_report/defaults/main.yml").read_text())
GPU_NODE = {
    "gpu": {"present": True, "count": 2, "nvidia_smi": "/usr/bin/nvidia-smi"},
    "driver": {"version": "580.159.04"},
    "cuda": {"version": "13.0"},
    "nccl": {"version": "2.28.9"},
}
CPU_NODE = {"gpu": {"present": False, "count": 0}, "driver": {"version": ""}, "cuda": {}, "nccl": {}}
BUILD = {
    "bin_dir": "/opt/wireup/nccl-tests/build",
    "json": True,
    "ld_library_path": "/opt/wireup/venv/nvidia/nccl/lib",
    "nccl_version": "2.28.9",
    "nccl_source": "venv",
    "version": "v2.19.6",
}
TUNED = "NCCL_MIN_NCHANNELS='32'\nNCCL_NVLS_ENABLE='1'\n"


def settings(**over):
    """The role's defaults as Ansible renders them, plus what the plan task adds, as the plan task
    names them (bench_min_bytes -> min_bytes)."""
    values = dict(DEFAULTS, bench_dir="/opt/wireup/bench", bench_torch_max_bytes=DEFAULTS["bench_max_bytes"])
    values.update(
        wireup_base_dir="/opt/wireup", wireup_job_env={"NCCL_NVLS_ENABLE": "0"}, stepcost_only=False
    )
    values.update(over)
    names = {"wireup_base_dir": "base_dir", "wireup_job_env": "job_env"}
    return bench.BenchSettings(**{names.get(k, k.removeprefix("bench_")): v for k, v in values.items()})


def b64(text):
    return base64.b64encode(text.encode()).decode()


def test_defaults_pass_the_one_inventory_check():
    assert bench_settings.bench_errors(DEFAULTS) == []
    assert bench_settings.bench_errors(REPORT_DEFAULTS) == []


def test_a_setting_the_plan_task_forgets_or_misspells_is_an_error():
    values = dataclasses.asdict(settings())
    with pytest.raises(TypeError, match="collectives"):
        bench.BenchSettings(**{k: v for k, v in values.items() if k != "collectives"})
    with pytest.raises(TypeError, match="colectives"):
        bench.BenchSettings(**values, colectives=["all_reduce"])


def test_gpu_node_runs_every_collective_with_one_argv_each():
    plan = bench.plan(GPU_NODE, settings(), BUILD, "", "gpu-a01")
    assert [r["collective"] for r in plan["nccl_runs"]] == DEFAULTS["bench_collectives"]
    argv = plan["nccl_runs"][0]["argv"]
    assert argv[:7] == [
        "/bin/sh",
        "-c",
        'rm -f "$1" && shift && exec "$@"',
        "sh",
        "/opt/wireup/bench/all_reduce.json",
        "timeout",
        "900",
    ]
    assert argv[7] == "/opt/wireup/nccl-tests/build/all_reduce_perf"
    assert argv[8:] == [
        "-b",
        "8",
        "-e",
        "8G",
        "-f",
        "2",
        "-g",
        "2",
        "-w",
        "5",
        "-n",
        "20",
        "-J",
        "/opt/wireup/bench/all_reduce.json",
    ]
    assert plan["json"] and plan["torch_single"] and plan["compare"] == {} and plan["notes"] == []
    assert plan["probe"]["paths"] == [
        "/opt/wireup",
        "/opt/wireup/venv/nvidia/nccl/lib",
        "/usr/bin",
        "/var/lib/dpkg/info",
    ]
    # The venv's NCCL is on the loader's path; no tuned file was asked for.
    assert plan["nccl_env"] == {"NCCL_NVLS_ENABLE": "0", "LD_LIBRARY_PATH": BUILD["ld_library_path"]}


def test_cpu_node_skips_with_one_note_and_needs_no_build():
    plan = bench.plan(CPU_NODE, settings(), None, "", "node1")
    assert plan["nccl_runs"] == [] and not plan["torch_single"] and plan["compare"] == {}
    assert plan["notes"] == [
        "bench: nccl-tests and the single-node torch benchmark skipped on node1: no NVIDIA GPU found "
        "(PCI vendor 10de)"
    ]
    assert plan["torch_args_cpu"][:4] == ["--min-bytes", "1M", "--max-bytes", "16M"]
    # A tuned file (empty here) but no nvidia-smi, no venv NCCL: no empty path is looked at.
    assert plan["probe"]["paths"] == ["/opt/wireup", "/var/lib/dpkg/info"]
    assert bench.plan(CPU_NODE, settings(), None, None, "node1")["probe"]["paths"] == ["/var/lib/dpkg/info"]


def test_gpu_node_without_the_build_names_the_fix():
    with pytest.raises(
        ValueError, match=r"nccl_tests_build is not set on gpu-a01: run bench.yml with the nccl_tests tag"
    ):
        bench.plan(GPU_NODE, settings(), None, "", "gpu-a01")


@pytest.mark.parametrize("used", [False, True])
def test_tuned_env_only_when_asked_and_job_env_wins(used):
    plan = bench.plan(
        GPU_NODE, settings(bench_use_tuned_env=used, bench_env={"NCCL_P2P_DISABLE": "1"}), BUILD, TUNED, "h"
    )
    env = plan["nccl_env"]
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NCCL_P2P_DISABLE"] == "1"
    assert ("NCCL_MIN_NCHANNELS" in env) is used
    assert ("NCCL_MIN_NCHANNELS" in plan["torch_env_given"]) is used
    assert plan["tuned"]["used"] is used
    # With the tuned file in use, all_reduce at the top size runs with default NCCL beside it.
    assert (plan["compare"].get("mode") == "tuned_vs_default") is used
    # Beside it only: the tuned file is neither written nor removed, whatever wins.
    fast = {"rc": 0, "stdout": (H200 / "all_reduce_perf.txt").read_text(), "stderr": ""}
    tune = bench.tuning(plan, [fast, fast])
    assert (tune.get("writes"), tune.get("removes")) == (([], []) if used else (None, None))


def test_missing_tuned_file_is_said_and_figures_use_default_nccl():
    plan = bench.plan(GPU_NODE, settings(bench_use_tuned_env=True), BUILD, "", "gpu-a01")
    assert not plan["tuned"]["used"] and plan["compare"] == {}
    assert "bench_use_tuned_env is true but gpu-a01 has no /opt/wireup/nccl-tuned.env" in plan["notes"][0]


def _run(text, rc=0):
    return {"rc": rc, "stdout": text, "stderr": ""}


def test_sweep_ranks_stores_the_winner_and_says_so():
    plan = bench.plan(GPU_NODE, settings(bench_nccl_tune=True), BUILD, "", "gpu-a01")
    compare = plan["compare"]
    assert compare["store"] and len(compare["envs"]) == 1 + len(DEFAULTS["bench_nccl_tune_candidates"])
    # Every candidate sits under the default environment: wireup_job_env wins.
    assert all(env["NCCL_NVLS_ENABLE"] == "0" for env in compare["envs"])
    fast = (H200 / "all_reduce_perf.txt").read_text()
    slow = (H200 / "all_reduce_perf_p2p_disabled.txt").read_text()
    origin = bench.origin_of("20261201T010203Z", "gpu-a01", GPU_NODE, BUILD)
    # Identical figures (and one hung candidate): nothing beats the default, the file is removed.
    tune = bench.tuning(plan, [_run(fast), _run(fast), _run("", rc=124), _run(fast)], origin)
    assert tune["best"] == {} and tune["file_text"] == ""
    assert tune["writes"] == [] and tune["removes"] == ["/opt/wireup/nccl-tuned.env"]
    assert tune["summary"].startswith("bench tuning: all_reduce at 8G, default NCCL 347.66 GB/s; ")

    # The default measured without P2P (27.91 GB/s), the first candidate with it (347.66 GB/s).
    tune = bench.tuning(plan, [_run(slow), _run(fast), _run(slow), _run(slow)], origin)
    assert tune["best"] == {"NCCL_MIN_NCHANNELS": "32"} and tune["best_busbw"] == 347.66
    parsed = benchenv.parse_tuned_env(tune["file_text"])
    assert parsed["values"] == {"NCCL_MIN_NCHANNELS": "32"}
    assert parsed["origin"]["written"] == "2026-12-01T01:02:03Z"
    assert parsed["origin"]["run_id"] == "20261201T010203Z" and parsed["origin"]["nccl"] == "2.28.9"
    assert "stored NCCL_MIN_NCHANNELS=32 in /opt/wireup/nccl-tuned.env" in tune["summary"]
    assert tune["writes"] == ["/opt/wireup/nccl-tuned.env"] and tune["removes"] == []


def test_node_results_carry_outputs_json_and_the_tuned_file_state():
    plan = bench.plan(GPU_NODE, settings(), BUILD, "", "gpu-a01")
    text = (H200 / "all_reduce_perf.txt").read_text()
    runs = {
        "results": [{"item": r, "rc": 0, "stdout": text, "stderr": "NCCL WARN x"} for r in plan["nccl_runs"]]
    }
    jsons = {
        "results": [{"item": r, "content": b64("{}")} for r in plan["nccl_runs"][:1]] + [{"msg": "gone"}]
    }
    found = {
        "files": [
            {"path": "/opt/wireup/nccl-tuned.env", "mtime": 1764550000.0, "mode": "0640"},
            {"path": "/var/lib/dpkg/info/libnccl2.list", "mtime": 1764500000.0},
            {"path": "/usr/bin/nvidia-smi", "mtime": 1764400000.0},
        ]
    }
    node = bench.node_results(
        {
            "plan": plan,
            "run_id": "20261201T010203Z",
            "host": "gpu-a01",
            "node": GPU_NODE,
            "build": BUILD,
            "topology": {"gpu_count": 2},
            "tuned_read": {"content": b64(TUNED)},
            "found": found,
            "nccl_runs": runs,
            "nccl_json": jsons,
        }
    )
    # stdout and stderr joined with a real newline (NCCL's stderr line stays its own line).
    assert node["nccl_tests"]["all_reduce"]["output"].endswith("\nNCCL WARN x")
    assert node["nccl_tests"]["all_reduce"]["json"] == "{}" and node["nccl_tests"]["all_gather"]["json"] == ""
    assert node["tuned_env"]["text"] == TUNED and node["tuned_env"]["mode"] == "0640"
    assert [
        p["what"]
        for p in benchenv.change_probes(node["tuned_env"]["package_lists"], node["tuned_env"]["files"])
    ] == ["nccl", "driver"]
    assert node["versions"]["nccl_tests"] == "v2.19.6" and node["topology"] == {"gpu_count": 2}
    # The record builds from it, with the run-wide thresholds the store adds.
    record = host_record.build_record(
        "gpu-a01", "20261201T010203Z", dict(node, thresholds={"pass_ratio": 0.9, "warn_ratio": 0.75})
    )
    assert set(record["collectives"]) == set(DEFAULTS["bench_collectives"])


def test_a_node_that_stopped_midway_has_no_data():
    plan = bench.plan(GPU_NODE, settings(), BUILD, "", "gpu-a01")
    assert bench.node_results({"plan": plan})["failed"] is True
    assert bench.node_results({})["skipped"].startswith("no bench data")


def test_threshold_rule_is_one_rule():
    assert bench_settings.bench_threshold_errors({"bench_pass_ratio": 0.5, "bench_warn_ratio": 0.8}) == [
        "bench_warn_ratio (0.8) must not exceed bench_pass_ratio (0.5): lower bench_warn_ratio or "
        "raise bench_pass_ratio"
    ]
    with pytest.raises(ValueError, match=r"bench_warn_ratio \(0\.8\) must not exceed bench_pass_ratio"):
        bandwidth.check_thresholds(0.5, 0.8)


def test_python_fallback_thresholds_equal_the_role_defaults():
    """Re-judging outside a play uses bandwidth.DEFAULT_THRESHOLDS: the same as the role's."""
    assert {
        "pass_ratio": REPORT_DEFAULTS["bench_pass_ratio"],
        "warn_ratio": REPORT_DEFAULTS["bench_warn_ratio"],
        "min_bytes": REPORT_DEFAULTS["bench_verdict_min_bytes"],
        "tolerance": REPORT_DEFAULTS["bench_baseline_tolerance"],
        "torch_goal": REPORT_DEFAULTS["bench_torch_goal_ratio"],
    } == bandwidth.DEFAULT_THRESHOLDS


def multi(group, play_hosts_all, play_hosts, *, name, torch_on, gpu_present, stepcost_on=False):
    """bench.multi_node with a plan that wants the torch all-reduce and/or the DDP step across the group."""
    the_plan = bench.plan(
        GPU_NODE, settings(bench_torch=torch_on, bench_stepcost=stepcost_on), BUILD, "", "a"
    )
    hosts = {"group": group, "play_hosts_all": play_hosts_all, "play_hosts": play_hosts}
    return bench.multi_node(the_plan, hosts, name=name, gpu_present=gpu_present)


PLAN = bench.plan(GPU_NODE, settings(), BUILD, "", "a")


def job(kind, name, args):
    """A bench.TorchJob: the all-reduce (torch_allreduce.py) or the DDP step (ddp_step.py)."""
    script = "ddp_step.py" if kind.startswith("stepcost") else "torch_allreduce.py"
    return {"kind": kind, "job": name, "script": script, "args": PLAN[args]}


def test_multi_node_runs_only_with_every_node_left():
    gpus = {"a": True, "b": False}
    ran = multi(["b", "a"], ["a", "b"], ["a", "b"], name="g", torch_on=True, gpu_present=gpus)
    assert ran == {
        "run": True,
        "skipped": "",
        "lost": [],
        "gpu": False,
        "stepcost": False,
        "jobs": [job("multi_node", "bench-torch-multi", "torch_args_cpu")],
        "notes": [],
    }
    lost = multi(["a", "b"], ["a", "b"], ["a"], name="g", torch_on=True, gpu_present=gpus)
    assert not lost["run"] and lost["lost"] == ["b"] and lost["jobs"] == []
    assert lost["skipped"] == "not every node of g is left in this run (b unreachable or failed earlier)"
    assert lost["notes"] == ["bench: torch benchmark across all nodes skipped: " + lost["skipped"]]
    limited = multi(["a", "b"], ["a"], ["a"], name="g", torch_on=True, gpu_present=gpus)
    assert limited["skipped"] == "not every node of g is left in this run (b left out by --limit)"
    off = multi(["a", "b"], ["a"], ["a"], name="g", torch_on=False, gpu_present=gpus)
    assert off["skipped"] == "" and not off["run"]


def test_stepcost_runs_on_gpu_nodes_alone_and_its_args():
    plan = bench.plan(GPU_NODE, settings(), BUILD, "", "gpu-a01")
    assert plan["stepcost_single"] and not plan["stepcost_only"]
    args = plan["stepcost_args_gpu"]
    assert args[:4] == [
        "--params",
        ",".join(DEFAULTS["bench_stepcost_params"]),
        "--hooks",
        "none,fp16,bf16,powersgd",
    ]
    assert args[args.index("--warmup") + 1] == str(max(DEFAULTS["bench_warmup_iterations"], 3))
    assert "--backend" not in args
    assert plan["stepcost_args_cpu"][-2:] == ["--backend", "gloo"]
    assert plan["single_jobs"] == [
        job("single_node", "bench-torch-single", "torch_args_gpu"),
        job("stepcost_single_node", "bench-stepcost-single", "stepcost_args_gpu"),
    ]
    one_gpu = bench.plan({**GPU_NODE, "gpu": {**GPU_NODE["gpu"], "count": 1}}, settings(), BUILD, "", "g")
    assert [j["kind"] for j in one_gpu["single_jobs"]] == ["stepcost_single_node"]  # no all-reduce on 1 GPU
    cpu = bench.plan(CPU_NODE, settings(), None, "", "cpu-1")
    assert not cpu["stepcost_single"] and cpu["stepcost"] and cpu["single_jobs"] == []
    assert not bench.plan(GPU_NODE, settings(bench_stepcost=False), BUILD, "", "g")["stepcost_single"]


def test_stepcost_tag_alone_needs_no_build_and_runs_no_collective():
    plan = bench.plan(GPU_NODE, settings(stepcost_only=True), None, "", "gpu-a01")
    assert plan["nccl_runs"] == [] and plan["compare"] == {} and not plan["torch_single"]
    assert plan["scripts"] == ["ddp_step.py"]
    assert bench.plan(GPU_NODE, settings(), BUILD, "", "g")["scripts"] == [
        "torch_allreduce.py",
        "ddp_step.py",
    ]
    assert bench.plan(CPU_NODE, settings(bench_stepcost=False), None, "", "c")["scripts"] == [
        "torch_allreduce.py"
    ]
    assert plan["stepcost_single"]


def test_multi_node_stepcost_needs_every_node_too():
    gpu = {"a": True, "b": True}
    both = multi(
        ["a", "b"], ["a", "b"], ["a", "b"], name="g", torch_on=False, gpu_present=gpu, stepcost_on=True
    )
    assert both["stepcost"] and not both["run"]
    assert both["jobs"] == [job("stepcost_multi_node", "bench-stepcost-multi", "stepcost_args_gpu")]
    every = multi(
        ["a", "b"], ["a", "b"], ["a", "b"], name="g", torch_on=True, gpu_present=gpu, stepcost_on=True
    )
    assert [j["args"] for j in every["jobs"]] == [
        PLAN["torch_args_gpu"],
        PLAN["stepcost_args_gpu"],
    ]  # all-reduce first
    lost = multi(["a", "b"], ["a", "b"], ["a"], name="g", torch_on=True, gpu_present=gpu, stepcost_on=True)
    assert not lost["stepcost"] and not lost["run"] and "b unreachable" in lost["skipped"]


def test_only_this_jobs_log_is_its_result():
    log = "/results/launch/bench-torch-single-20261201T000000Z/gpu-a01.log"
    assert bench.fresh_log("bench-torch-single", {"log": log}) == log
    # A result an earlier job left: its log path names that job.
    assert bench.fresh_log("bench-stepcost-single", {"log": log}) == ""
    assert bench.fresh_log("bench-torch-single", {}) == ""


def test_one_gpu_runs_no_nccl_tests_needs_no_build_and_says_so():
    """Issue 26, item 5: no GPU pair, no bus bandwidth figure: nccl-tests and the comparison are not
    planned (no build needed), the DDP step benchmark still is (its step time is a figure)."""
    one = {"gpu": dict(GPU_NODE["gpu"], count=1)}
    plan = bench.plan(one, settings(nccl_tune=True), None, None, "h1")
    assert plan["nccl_runs"] == [] and plan["compare"] == {} and not plan["torch_single"]
    why = (
        "nccl-tests skipped on h1: 1 GPU, no GPU pair to give a bus bandwidth figure (every collective "
        "would be N/A)"
    )
    assert plan["skipped"] == why and plan["notes"] == [f"bench: {why}"]
    assert [j["kind"] for j in plan["single_jobs"]] == ["stepcost_single_node"]
    two = bench.plan(GPU_NODE, settings(nccl_tune=True), BUILD, None, "h2")
    assert len(two["nccl_runs"]) == len(DEFAULTS["bench_collectives"]) and two["skipped"] == ""
    assert two["compare"]["mode"] == "sweep"
    assert bandwidth.nccl_tests_skip(bandwidth.MIN_GPUS_FOR_NCCL_TESTS) == ""
    assert bandwidth.nccl_tests_skip(0, "c").startswith("nccl-tests skipped on c: 0 GPU")
