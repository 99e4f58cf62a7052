"""A synthetic fleet for tests/perf/fleet.py: N nodes of 8 GPUs, built with wireup's own producers.

Every record comes out of the code that makes it in a real run, fed with real captures from
tests/fixtures (README.md in each folder says where each came from), varied per node
deterministically:

* a node's bench data: ``topology.build_topology`` on an 8x H100 ``topo -m`` (public capture,
  NVIDIA/nccl#1264) with the 8x H100 NVSwitch ``nvlink -s``, ``--query-gpu`` and ``topo -p2p r``
  written from the documented formats (tests/fixtures/synthetic/h100x8_nvswitch), its findings
  from ``health.findings``; ``bench.plan`` and ``bench.node_results`` on the 2x H200's nccl-tests
  outputs; the torch all-reduce and DDP step logs of the testbed (nccltests, stepcost);
* a node's GPU trial: ``gpuhealth.read`` / ``gpuhealth.answer`` (what wireup_gpu_health_info
  returns) on the real 8x H100 ``nvidia-smi -q`` (gpud), each node's GPUs with UUIDs of their own;
  the fingerprint's document from roles/gpu_trial/files/gpu_fingerprint.py's own ``summarize`` and
  ``document``; ``gpu_trial.node_data`` and ``run_data``;
* the quick check: ``run.check`` (wireup-check's code) with nvidia-smi answering the 8x H100
  captures and a sysfs NIC tree, then ``node_check.result`` on its ``--json`` line;
* the fabric run: ``bench_fabric.job`` / ``result`` per node and round, ``fabric_run.judge_round``
  on the real two-host NCCL INFO logs (ncclinfo/h200x1_nccl-2.28.9_twohost_socket_rank*) with the
  benchmark's JSON line, stored by wireup_fabric_bench's own ``_store``;
* the store: ``bench_report.store_nodes`` (the GPU trial judged across the run by
  ``gpu_trial_run.attach``) and ``host_record.store_run``, as wireup_bench_store does.

Per node: its name (``gpu0000``...), address, GPU UUIDs, and each figure's spread (a seeded
random per node, GPU and day). About 2% of the nodes are bad, each in one way (BAD_KINDS): a slow
GPU, a pending row remap, slow collectives, a slow fabric link, GPUs held down by their power
brake, or unreachable. The healthy nodes' ``nvidia-smi -q`` is the capture with GPU2's throttle
reasons as the other seven GPUs of the same capture show them (not active).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import importlib.util
import json
import os
import pathlib
import random
import re
import sys
import types

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT / ".collections") not in sys.path:
    sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import run as check_run  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import (  # noqa: E402
    fabric_run as judge_fabric_run,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import (  # noqa: E402
    gpu_trial_settings,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (  # noqa: E402
    bench,
    bench_fabric,
    bench_report,
    gpu_trial,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import (  # noqa: E402
    gpuhealth,
    health,
    nics,
    topology,
)
from ansible_collections.wireup.cluster.plugins.modules import wireup_fabric_bench  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
GPUS = 8
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
BAD_KINDS = ("gpu_slow", "row_remap", "links_slow", "fabric_slow", "throttled", "unreachable")
BAD_FRACTION = 0.02
# The fingerprint's medians of a healthy H100 SXM (gpuspec: above spec_pass_ratio of each peak x
# its efficiency; the host copies of a PCIe Gen5 x16 link).
FIGURES = {
    "gemm_bf16_flops": 700e12,
    "gemm_fp16_flops": 690e12,
    "gemm_tf32_flops": 360e12,
    "gemm_fp8_flops": 1300e12,
    "hbm_copy_bytes_per_second": 3.0e12,
    "h2d_bytes_per_second": 53e9,
    "d2h_bytes_per_second": 52e9,
    "h2d_concurrent_bytes_per_second": 50e9,
    "d2h_concurrent_bytes_per_second": 49e9,
}
THRESHOLDS = {
    "pass_ratio": 0.9,
    "warn_ratio": 0.75,
    "min_bytes": 1 << 30,
    "tolerance": 0.1,
    "torch_goal": 0.97,
}
_THROTTLE_LINE = re.compile(
    r"^(\s+(?:SW Power Cap|HW Slowdown|HW Thermal Slowdown|HW Power Brake Slowdown|Sync Boost|"
    r"SW Thermal Slowdown)\s+: )Active$",
    re.M,
)
_UUID = re.compile(r"GPU-([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})")
_PENDING_ROWS = re.compile(r"(Remapped Rows\n(?:.*\n){2}\s+Pending\s+: )No")


def _read(*parts):
    return (FIXTURES.joinpath(*parts)).read_text()


@functools.cache
def captures():
    """The real captures every node is built from (read once)."""
    synthetic = ("synthetic", "h100x8_nvswitch")
    return types.SimpleNamespace(
        health=_read("gpuhealth", "h100x8_gpud_535.183.01_q.txt"),
        brake=_read("gpuhealth", "h100x8_gpud_535.161.08_q_hw_power_brake.txt"),
        topo_m=_read("public", "h100x8_nccl-1264_topo_m_cut.txt"),
        nvlink_s=_read(*synthetic, "nvlink_s.txt"),
        query_csv=_read(*synthetic, "query_gpu.csv"),
        p2p_r=_read(*synthetic, "topo_p2p_r.txt"),
        nccl={c: _read("nccltests", f"h200x2_v2.19.6_{c}_perf.txt") for c in COLLECTIVES},
        torch=_read("nccltests", "torch_allreduce_gloo_3ranks.txt"),
        stepcost=_read("stepcost", "cpu-gloo-2ranks-torch2.13.log"),
        node=json.loads(_read("testbed", "wireup_node_debian12.json")),
        proc_status=_read("proc_status", "debian12_nspawn_node.txt"),
        mountinfo=_read("mountinfo", "debian12_nspawn_node.txt"),
        fabric_logs=[_read("ncclinfo", f"h200x1_nccl-2.28.9_twohost_socket_rank{r}.txt") for r in (0, 1)],
        nics=nics.parse_nic_facts(nics.read_tree(str(FIXTURES / "sysfs" / "h200vm_virtio_no_ib"))),
        sysfs=str(FIXTURES / "sysfs" / "h200vm_virtio_no_ib"),
    )


@functools.cache
def fingerprint_script():
    """roles/gpu_trial/files/gpu_fingerprint.py, the program the nodes run, as a module."""
    path = ROOT / "roles" / "gpu_trial" / "files" / "gpu_fingerprint.py"
    spec = importlib.util.spec_from_file_location("wireup_gpu_fingerprint", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _defaults(role):
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())


# ---------------------------------------------------------------- the fleet's shape
@dataclasses.dataclass(frozen=True)
class Fleet:
    """N nodes; ``bad`` {host: kind} of the few bad ones."""

    hosts: tuple
    bad: dict

    @classmethod
    def of(cls, n):
        hosts = tuple(f"gpu{i:04d}" for i in range(n))
        count = max(1, round(n * BAD_FRACTION)) if n > 1 else 0
        spots = sorted({(k * n) // max(count, 1) + n // (2 * max(count, 1)) for k in range(count)})
        return cls(hosts, {hosts[i]: BAD_KINDS[k % len(BAD_KINDS)] for k, i in enumerate(spots)})

    def kind(self, host):
        return self.bad.get(host, "good")

    def reachable(self):
        return [h for h in self.hosts if self.kind(h) != "unreachable"]


def host_index(host):
    return int(host[3:])


def run_id_of(day, hour=6):
    """The run id of a day's run (day 0: 2026-01-01), ``hour`` o'clock UTC."""
    month_days = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    year, left = 2026, day
    while left >= 365:
        year, left = year + 1, left - 365
    month = 0
    while left >= month_days[month]:
        left -= month_days[month]
        month += 1
    return f"{year}{month + 1:02d}{left + 1:02d}T{hour:02d}0000Z"


def _own_uuids(text, host):
    """The capture's GPU UUIDs made this node's own (the last group: the node's index)."""
    i = host_index(host)
    return _UUID.sub(lambda m: f"GPU-{m[1]}-{m[2]}-{m[3]}-{m[4]}-{i:012x}", text)


def health_text(kind, host):
    """The node's ``nvidia-smi -q``: the capture, its GPUs' UUIDs its own; healthy nodes' GPU2 not
    throttled (as the capture's seven other GPUs), a pending row remap on GPU0 for row_remap, the
    power-brake capture (every GPU held down) for throttled."""
    text = captures().brake if kind == "throttled" else _THROTTLE_LINE.sub(r"\1Not Active", captures().health)
    if kind == "row_remap":
        text = _PENDING_ROWS.sub(r"\1Yes", text, count=1)
    return _own_uuids(text, host)


# ---------------------------------------------------------------- bench data
@functools.cache
def _topology():
    c = captures()
    topo = topology.build_topology(
        topo_m=c.topo_m, p2p={"r": c.p2p_r}, nvlink_s=c.nvlink_s, query_csv=c.query_csv
    )
    topo["findings"] = health.findings(topo, expected_gpus=GPUS)
    return json.dumps(topo)


def wireup_node(host):
    """preflight's wireup_node of a GPU node: the testbed node's capture with this node's name,
    address and 8 H100 GPUs (driver, CUDA and NCCL as the H100 capture's)."""
    i = host_index(host)
    node = json.loads(json.dumps(captures().node))
    node["hostname"] = host
    node["network"] = {"address": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}", "interface": "ib0"}
    node["gpu"] = dict(node["gpu"], present=True, count=GPUS, nvidia_smi="/usr/bin/nvidia-smi")
    node["driver"] = dict(node["driver"], version="535.183.01", loaded=True)
    node["cuda"] = dict(node["cuda"], version="12.2")
    node["nccl"] = dict(node["nccl"], version="2.28.9")
    return node


BUILD = {
    "bin_dir": "/opt/wireup/nccl-tests/build",
    "json": True,
    "ld_library_path": "/opt/wireup/venv/nvidia/nccl/lib",
    "nccl_version": "2.28.9",
    "nccl_source": "venv",
    "version": "v2.19.6",
}


@functools.cache
def bench_settings(stepcost=True):
    """bench.BenchSettings from the role's defaults, as the plan task names them."""
    plan_defaults = {k: v for k, v in _defaults("bench").items() if k not in bench.PLAY_SETTINGS}
    values = dict(plan_defaults, bench_dir="/opt/wireup/bench")
    values.update(
        bench_torch_max_bytes=values["bench_max_bytes"],
        bench_collectives=list(COLLECTIVES),
        bench_stepcost=stepcost,
        wireup_base_dir="/opt/wireup",
        wireup_job_env={},
        stepcost_only=False,
    )
    names = {"wireup_base_dir": "base_dir", "wireup_job_env": "job_env"}
    return bench.BenchSettings(**{names.get(k, k.removeprefix("bench_")): v for k, v in values.items()})


def _scaled_busbw(text, factor):
    """An nccl-tests output with every bandwidth column scaled (a node whose links are slow)."""
    if factor == 1.0:
        return text

    def row(m):
        cells = m[0].split()
        for col in (6, 7, 10, 11):  # algbw, busbw: out-of-place and in-place
            if col < len(cells):
                cells[col] = f"{float(cells[col]) * factor:.2f}"
        return "  ".join(cells)

    return re.sub(r"^\s+\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+.*$", row, text, flags=re.M)


def bench_node(fleet, host, run_id, stepcost=True):
    """The node's __bench_result (bench.node_results over what the bench role's tasks register)."""
    node = wireup_node(host)
    the_plan = bench.plan(node, bench_settings(stepcost), BUILD, "", host)
    factor = 0.5 if fleet.kind(host) == "links_slow" else 1.0
    text = {c: _scaled_busbw(captures().nccl[c], factor) for c in COLLECTIVES}
    runs = [
        {"item": r, "rc": 0, "stdout": text[r["collective"]], "stderr": ""} for r in the_plan["nccl_runs"]
    ]
    return bench.node_results(
        {
            "plan": the_plan,
            "run_id": run_id,
            "host": host,
            "node": node,
            "build": BUILD,
            "topology": json.loads(_topology()),
            "nccl_runs": {"results": runs},
        }
    )


# ---------------------------------------------------------------- the GPU trial
TRIAL_PLAN = {"notes": [], "dcgm_level": 0, "capability": "gpu_trial"}


def _figure(rng, median, samples=30):
    return fingerprint_script().summarize([median * (1 + rng.uniform(-0.01, 0.01)) for _ in range(samples)])


def fingerprint_doc(fleet, host, health_doc, day):
    """gpu_fingerprint.py's JSON document for the node's GPUs (its own document()), each figure's
    samples around the healthy medians, seeded by node, GPU and day (GPU3 of gpu_slow at 0.7x)."""
    fp = fingerprint_script()
    devices, out = [], {}
    for g in health_doc["gpus"]:
        rng = random.Random(f"{host}/{g['index']}/{day}")
        scale = 1 + rng.uniform(-0.03, 0.03)
        if fleet.kind(host) == "gpu_slow" and g["index"] == 3:
            scale = 0.7
        figures = {name: _figure(rng, value * scale) for name, value in FIGURES.items()}
        out[g["index"]] = {"figures": figures, "skipped": {}, "errors": {}}
        devices.append(
            types.SimpleNamespace(
                index=g["index"], name=g["name"], uuid=g["uuid"], bus_id=g["bus_id"], capability=(9, 0)
            )
        )
    run = types.SimpleNamespace(out=out, sampler=None, set_seconds={"gemm": 25.3, "hbm": 25.1, "pcie": 26.0})
    meta = {"mode": "cuda", "torch": "2.11.0+cu130", "cuda": "13.0", "nvml": "12.535.183", "nvml_note": ""}
    return fp.document(fp.parse_args([]), devices, run, dict(meta, elapsed_s=84.2, errors=[]))


@functools.lru_cache(maxsize=8192)
def health_answer(text):
    """What wireup_gpu_health_info returns for this ``nvidia-smi -q`` (gpuhealth.read, answer)."""
    return json.dumps(gpuhealth.answer(gpuhealth.read(text), "", ""))


def trial_node(fleet, host, run_id, day):
    """The node's gpu_trial_node fact (gpu_trial.node_data over the role's registered results)."""
    read = json.loads(health_answer(health_text(fleet.kind(host), host)))
    doc = fingerprint_doc(fleet, host, read["health"], day)
    registered = {"rc": 0, "stdout": json.dumps(doc), "stderr": "", "delta": "0:01:24.2"}
    return gpu_trial.node_data(TRIAL_PLAN, run_id, host, reads=[read, read], fingerprint=registered)


def trial_run(hosts, facts):
    """gpu_trial_run as the report play gathers it (the role's default thresholds)."""
    given = gpu_trial.JudgeSettings(**gpu_trial_settings.thresholds(_defaults("gpu_trial")))
    return gpu_trial.run_data(list(hosts), [facts.get(h) for h in hosts], given)


# ---------------------------------------------------------------- a bench run stored
def _torch_logs(logs_dir, host, stepcost):
    """The torch and DDP step logs torchrun_launch brought back for the node, as paths."""
    out = {"single_node": os.path.join(logs_dir, "torch.log")}
    if stepcost:
        out["stepcost_single_node"] = os.path.join(logs_dir, "stepcost.log")
    return out


def _shared_logs(results_dir):
    """The torch and DDP step captures written once where the run's logs are read from."""
    logs_dir = os.path.join(results_dir, "logs")
    os.makedirs(logs_dir, exist_ok=True)
    for name, text in (("torch.log", captures().torch), ("stepcost.log", captures().stepcost)):
        path = os.path.join(logs_dir, name)
        if not os.path.exists(path):
            pathlib.Path(path).write_text(text)
    return logs_dir


def bench_params(fleet, results_dir, run_id, day, stepcost=True):
    """wireup_bench_store's arguments for the day's full bench run (bench and GPU trial)."""
    reach = fleet.reachable()
    logs_dir = _shared_logs(results_dir)
    facts = {h: trial_node(fleet, h, run_id, day) for h in reach}
    return {
        "results_dir": results_dir,
        "run_id": run_id,
        "kind": "bench",
        "nodes": {h: bench_node(fleet, h, run_id, stepcost) for h in reach},
        "thresholds": THRESHOLDS,
        "torch_logs": {h: _torch_logs(logs_dir, h, stepcost) for h in reach},
        "lost": {
            h: "UNREACHABLE! ssh: connect to host: Connection timed out" for h in fleet.bad if h not in reach
        },
        "gpu_trial": trial_run(fleet.hosts, facts),
    }


def store_bench(params):
    """What wireup_bench_store does with a run: {host: record} stored (store_nodes, store_run) and
    entered in the store's index (gate.index_run)."""
    return bench_report.store(params, lambda path: pathlib.Path(path).read_text())


# ---------------------------------------------------------------- the quick check
def _smi_answers(kind, host):
    c = captures()
    texts = {
        "topo -m": c.topo_m,
        "nvlink -s": c.nvlink_s,
        "--query-gpu": c.query_csv,
        "-q -x": health_text(kind, host),
    }
    return lambda commands, timeout: {k: (0, texts[k].encode(), b"") for k in commands}


def quick_result(kind, host):
    """The node's __node_check_result: wireup-check's check (run.check, nvidia-smi answering
    the captures) as its --json line, read back by node_check.result."""
    config = check_run.merge_config(
        {"host": host, "nvidia_smi": "/bin/true", "sysfs_root": captures().sysfs, "baseline": "/nonexistent"}
    )
    said = check_run.check(config, run=_smi_answers(kind, host))
    stdout = json.dumps(check_run._public(said), sort_keys=True, default=str)
    return node_check.result(host, stdout=stdout, stderr="", rc=said["exit"])


@functools.lru_cache(maxsize=8192)
def _quick_json(kind, host):
    return json.dumps(quick_result(kind, host))


def store_quick(fleet, results_dir, run_id):
    """A quick check's run stored as bench.yml --tags quick stores it."""
    reach = fleet.reachable()
    run = bench_report.gather_quick(
        list(fleet.hosts),
        name="gpu_nodes",
        run_ids=[run_id if h in reach else "" for h in fleet.hosts],
        results=[json.loads(_quick_json(fleet.kind(h), h)) if h in reach else {} for h in fleet.hosts],
        reached=[h in reach for h in fleet.hosts],
    )
    params = {"results_dir": results_dir, "run_id": run_id, "kind": run["kind"], "nodes": run["nodes"]}
    params.update(thresholds=THRESHOLDS, lost=dict.fromkeys(run["lost"], "UNREACHABLE! ssh"))
    return store_bench(params)


# ---------------------------------------------------------------- the fabric run
FABRIC_BUSBW = 0.50


def _bench_line(busbw, members):
    """files/bench/torch_allreduce.py's result line (its documented JSON)."""
    return json.dumps(
        {
            "wireup_bench": "torch_allreduce",
            "size": 1 << 30,
            "count": (1 << 30) // 4,
            "dtype": "float32",
            "time_us": 1.0,
            "algbw": busbw,
            "busbw": busbw,
            "wrong": 0,
            "world_size": len(members),
            "nnodes": len(members),
            "backend": "nccl",
        }
    )


def _job_busbw(fleet, members, round_no, confirms):
    rng = random.Random(f"{'+'.join(members)}/{round_no}/{confirms}")
    slow = any(fleet.kind(h) == "fabric_slow" for h in members)
    return round(FABRIC_BUSBW * (0.1 if slow else 1 + rng.uniform(-0.03, 0.03)), 4)


def _launched(fleet, jobs_dir, job, host):
    """torchrun_launch's result of the job on host: its log where launch.yml puts it (the first
    member's carries the benchmark's line)."""
    folder = os.path.join(jobs_dir, f"{job['job']}-{job['group']}-0000")
    os.makedirs(folder, exist_ok=True)
    first = host == sorted(job["members"])[0]
    text = captures().fabric_logs[0 if first else 1]
    if first:
        text += (
            _bench_line(_job_busbw(fleet, job["members"], job["job"], job["confirms"]), job["members"]) + "\n"
        )
    path = os.path.join(folder, f"{host}.log")
    pathlib.Path(path).write_text(text)
    return {"log": path, "verdict": {"ok": True, "reason": ""}}


@functools.cache
def fabric_settings():
    d = _defaults("bench_fabric")
    return {
        "max_rounds": d["bench_fabric_max_rounds"],
        "max_bytes": d["bench_fabric_max_bytes"],
        "cpu_max_bytes": d["bench_fabric_cpu_max_bytes"],
        "iterations": d["bench_fabric_iterations"],
        "env": {},
        "fabric_env": d["bench_fabric_env"],
        "dir": "/opt/wireup/bench",
    }


def fabric_params(fleet, results):
    reach = fleet.reachable()
    return {
        "nodes": list(fleet.hosts),
        "results": results,
        "unreachable": [h for h in fleet.hosts if h not in reach],
        "nics": dict.fromkeys(fleet.hosts, captures().nics),
        "topologies": {},
        "ranks": dict.fromkeys(fleet.hosts, GPUS),
        "pass_ratio": _defaults("bench_fabric")["bench_fabric_pass_ratio"],
        "max_rounds": fabric_settings()["max_rounds"],
    }


class _Module:
    """The two things wireup_fabric_bench's _store asks of its AnsibleModule."""

    check_mode = False

    @staticmethod
    def fail_json(msg, **_kw):
        raise RuntimeError(msg)


def fabric_run(fleet, results_dir, jobs_dir, timer=None):
    """The bench_fabric role's rounds: each node's job and result, the module's judgement per
    round (fabric_run.judge_round; timed by ``timer`` when given), then the run stored as the
    module stores it. Returns (record, rounds run, jobs run)."""
    timer = timer or (lambda fn: fn())
    results_so_far, judged, jobs = [], {}, set()
    node = wireup_node(fleet.hosts[0])
    reach = fleet.reachable()

    def read(path):
        return pathlib.Path(path).read_text() if path else None

    rounds = 0
    for round_no in bench_fabric.plan(node, **fabric_settings())["rounds"]:
        if round_no and judged.get("done"):
            break
        for host in reach:
            job = bench_fabric.job(judged if round_no else {}, host, round_no)
            if job["run"]:
                launch = _launched(fleet, jobs_dir, job, host)
                results_so_far.append(bench_fabric.result(job, launch, host, round_no))
                jobs.add((round_no, tuple(job["members"]), job["confirms"]))
        rounds += 1 if round_no else 0
        params = fabric_params(fleet, results_so_far)
        judged = timer(lambda p=params: judge_fabric_run.judge_round(p, read))
    params = dict(fabric_params(fleet, results_so_far), results_dir=results_dir, run_id="", tolerance=0.10)
    record, _paths = timer(lambda: wireup_fabric_bench._store(_Module, params, judged))
    return record, rounds, len(jobs)


# ---------------------------------------------------------------- the launch plan's inputs
def launch_node(host):
    """torchrun_launch.node_facts' input as plan.yml gives it: wireup_node, the /proc probe's slurp."""
    c = captures()
    probe = {
        "results": [
            {"item": "/proc/self/status", "content": base64.b64encode(c.proc_status.encode()).decode()},
            {"item": "/proc/self/mountinfo", "content": base64.b64encode(c.mountinfo.encode()).decode()},
        ]
    }
    return wireup_node(host), probe


@functools.cache
def launch_settings():
    """wireup_launch_plan's keyword arguments as roles/torchrun_launch/tasks/plan.yml passes them,
    from the role's and group_vars' defaults."""
    d = _defaults("torchrun_launch")
    g = yaml.safe_load((ROOT / "group_vars" / "all.yml").read_text())
    return {
        "group": "gpu_nodes",
        "node_group": "gpu_nodes",
        "job": d["torchrun_launch_job"],
        "program": "/opt/wireup/examples/ddp_multinode.py",
        "launcher": d["torchrun_launch_launcher"],
        "master_host": "",
        "master_addr": d["torchrun_launch_master_addr"],
        "master_port": g.get("wireup_master_port", 29500),
        "rdzv_backend": d["torchrun_launch_rdzv_backend"],
        "omp_threads": d["torchrun_launch_omp_threads"],
        "env": d["torchrun_launch_env"],
        "job_env": {},
        "base_dir": "/opt/wireup",
        "venv_path": "/opt/wireup/venv",
        "results_dir": "/srv/wireup/results",
        "run_id": "20260201T060000Z-1a2b",
        "run": True,
        "wait": False,
        "slurm": False,
        "check_mode": False,
        "precheck": True,
        "install_examples": True,
        "examples_src": str(ROOT / "files" / "examples") + "/",
        "watchdog": True,
        "watchdog_port": d["torchrun_launch_watchdog_port"],
        "watchdog_interval": d["torchrun_launch_watchdog_interval"],
        "watchdog_timeout": d["torchrun_launch_watchdog_timeout"],
        "join_timeout": d["torchrun_launch_join_timeout"],
        "stop_grace": d["torchrun_launch_stop_grace"],
        "on_failed": "skip",
        "drain_failed": False,
        "follow": False,
    }
