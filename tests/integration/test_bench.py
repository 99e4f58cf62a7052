"""bench.yml on the 3-node testbed (no GPUs): every GPU part is skipped with one line per node, the
torch.distributed all-reduce benchmark runs across the 3 nodes over gloo through torchrun_launch,
and the run is stored (one JSON per host, never overwritten) and reported (Markdown, self-contained
HTML, PNG)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import ddp_step
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import runsummary
from tests import busy

from .harness import run_playbook

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TUNED = "/opt/wireup/nccl-tuned.env"  # wireup_base_dir of group_vars/all.yml
SKIP_LINES = (
    "gpu_topology {node}: skipped: no NVIDIA GPU found",
    "bench: nccl-tests and the single-node torch benchmark skipped on {node}: no NVIDIA GPU",
    # issue 25: the GPU trial says it once per node, and the CPU nodes still PASS.
    "gpu_trial {node}: no nvidia-smi (no NVIDIA driver): GPU health not read",
    "gpu_trial {node}: the GPU fingerprint needs GPUs: skipped",
)


@pytest.fixture(scope="module")
def torch_nodes(testbed):
    """Every node gets the PyTorch venv (CPU torch from the testbed's wheelhouse)."""
    extras = yaml.safe_load((REPO / "roles/pytorch_venv/defaults/main.yml").read_text())[
        "pytorch_venv_extra_packages"
    ]
    if extras:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "-d",
                str(Path(testbed.www_dir) / "wheels"),
                *extras,
            ],
            check=True,
        )
    result = run_playbook("site.yml", testbed.inventory, tags=["pytorch_venv"])
    assert result.rc == 0 and not result.failed_hosts, result.failure_messages()
    return testbed


def _bench(testbed, results_dir, **extra):
    extravars = {"wireup_results_dir": str(results_dir), "bench_iterations": 5, "bench_warmup_iterations": 2}
    extravars.update(extra)
    start = time.monotonic()
    result = run_playbook("bench.yml", testbed.inventory, extravars)
    print(f"[bench] bench.yml rc={result.rc} in {time.monotonic() - start:.0f} s")
    return result


def test_bench_on_cpu_nodes(torch_nodes, tmp_path):
    testbed = torch_nodes
    nodes = sorted(testbed.nodes)
    # A tuned NCCL env file on every node (hand-written: no origin line): a plain bench.yml reports
    # it and leaves it unused; the second run asks for it (bench_use_tuned_env).
    for node in nodes:
        testbed.ssh(node, f"printf 'NCCL_MIN_NCHANNELS=4\\n' > {TUNED} && chmod 0640 {TUNED}")
    try:
        _bench_twice(testbed, nodes, tmp_path / "results")
    finally:
        for node in nodes:
            testbed.ssh(node, f"rm -f {TUNED}", check=False)


def _records(run):
    return {p.stem: json.loads(p.read_text()) for p in run.glob("*.json")}


def _bench_twice(testbed, nodes, results_dir):
    result = _bench(testbed, results_dir)
    assert result.rc == 0 and result.failed_hosts == [] and result.unreachable_hosts == [], (
        f"{result.failure_messages()}\n{result.stdout[-4000:]}"
    )

    # Each GPU part says once per node that it skipped, and nothing else ran for it. The callback
    # wraps long messages, so whitespace is normalised first.
    out = " ".join(result.stdout.split())
    for node in nodes:
        for line in SKIP_LINES:
            assert out.count(line.format(node=node)) == 1, line.format(node=node)
    assert "all_reduce_perf" not in out

    # Stored: one folder, one JSON per host.
    runs = sorted((results_dir / "bench").iterdir())
    assert len(runs) == 1
    run = runs[0]
    records = _records(run)
    assert sorted(records) == nodes
    multi = [r["torch"]["multi_node"] for r in records.values() if "multi_node" in r["torch"]]
    assert len(multi) == 3, "every node that took part keeps the cluster-wide run"
    assert multi[0] == multi[1] == multi[2]
    assert multi[0]["world_size"] == 3 and multi[0]["backend"] == "gloo"
    sizes = [row["size"] for row in multi[0]["rows"]]
    assert sizes == [1 << 20, 4 << 20, 16 << 20]
    for row in multi[0]["rows"]:
        assert row["in_place"]["wrong"] == 0
        assert row["in_place"]["busbw"] > 0
    # GPU-less nodes are judged on the gloo run against their own history (issue 12): the first
    # run passes and becomes the baseline.
    for rec in records.values():
        assert rec["verdict"] == "PASS" and rec["skipped"]
        assert rec["collectives"] == {}
        assert rec["tuned_env"]["present"] and not rec["tuned_env"]["used"]
        assert rec["tuned_env"]["values"] == {"NCCL_MIN_NCHANNELS": "4"}
        # Issue 38: the first run says it recorded the baseline and compared nothing.
        assert rec["baseline"] == {"state": "recorded", "run_id": ""}
    # The gloo figure records the environment its processes saw: default NCCL (the tuned file on
    # the nodes was not sourced), launch.sh's interface variables.
    env = multi[0]["env"]
    assert env["mode"] == "default" and env["tuned_file"] is None
    assert env["seen"]["GLOO_SOCKET_IFNAME"] and env["seen"]["NCCL_SOCKET_IFNAME"]
    assert "NCCL_MIN_NCHANNELS" not in env["seen"]

    # The DDP step benchmark ran across the group by default (gloo, the CPU size), and every node
    # keeps the group's figure.
    steps = [r["stepcost"]["multi_node"] for r in records.values()]
    assert steps[0] == steps[1] == steps[2]
    check_stepcost(steps[0], 3)

    check_baselines_and_textfiles(testbed, nodes, run.name, out, compared=0)

    # Reported: Markdown with the torch table, HTML with every plot inline, a valid PNG.
    md = (run / "report.md").read_text()
    assert "## torch.distributed all_reduce" in md
    assert re.search(r"\| node\d \| multi_node \| 3 \| gloo \| 16M \|", md)
    assert re.search(r"\| torch multi_node \| default NCCL; GLOO_SOCKET_IFNAME=\S+ NCCL_SOCKET_IFNAME=", md)
    assert "NCCL_MIN_NCHANNELS=4, written " in md and "NOT used by this run's figures (default NCCL)" in md
    page = (run / "report.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    assert base64.b64decode(images[0].split(",", 1)[1]).startswith(PNG_MAGIC)
    assert (run / "torch.png").read_bytes().startswith(PNG_MAGIC)
    # Issue 38: the first screen says the baseline was recorded; no GPU advice from the CPU run.
    said = f"Baseline: {', '.join(nodes)}: {RECORDED}."
    assert said in md.split("## Summary")[0] and said in page
    assert not [w for w in GPU_ONLY_ADVICE if w in md.split("What communication costs a DDP step")[1]]

    # One summary line per host, and the report's path.
    for node in nodes:
        assert f"'{node}: PASS, {RECORDED} - " in out, node
    assert f"bench report: {run}/report.html" in out
    check_make_run_summary(results_dir, result.stdout, nodes, f"PASS, {RECORDED}")

    # A second run gets its own folder; the first one is untouched. Asked for, the tuned env is
    # used, and the figure says so; each node is compared with its first run, and the summary
    # shows the comparison (PASS, or WARN when the shared CPUs made gloo more than
    # bench_baseline_tolerance slower).
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    # (Without the step benchmark this time: its history is tested in tests/unit/test_stepcost.py,
    # and test_stepcost_alone runs it alone.)
    again = _bench(testbed, results_dir, bench_use_tuned_env=True, bench_stepcost=False)
    assert again.rc == 0, again.failure_messages()
    runs = sorted((results_dir / "bench").iterdir())
    assert len(runs) == 2
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    records = _records(runs[1])
    multi = next(r["torch"]["multi_node"] for r in records.values() if "multi_node" in r["torch"])
    assert multi["env"]["mode"] == "tuned" and multi["env"]["seen"]["NCCL_MIN_NCHANNELS"] == "4"
    assert multi["env"]["tuned_file"]["path"] == TUNED
    assert not [f for r in records.values() for f in r["findings"] if f["code"] == "bench_env_mismatch"]
    again_out = " ".join(again.stdout.split())
    for node in nodes:
        assert re.search(
            rf"'{node}: (PASS|WARN), compared with run {run.name} - .*; against run {run.name}: torch "
            r"multi_node [0-9.]+ vs [0-9.]+ GB/s at 16M, [+-]\d+%'",
            again_out,
        ), again_out[-3000:]
    for node, rec in records.items():
        assert rec["baseline"]["state"] == "compared" and rec["baseline"]["run_id"] == run.name, node
    md = (runs[1] / "report.md").read_text()
    assert f"Baseline: {', '.join(nodes)}: compared with run {run.name}." in md.split("## Summary")[0]
    check_make_run_summary(results_dir, again.stdout, nodes, f", compared with run {run.name}")
    for node in nodes:
        prom = testbed.ssh(node, f"cat {TEXTFILES}/wireup_bench.prom").stdout
        assert f'wireup_bench_baseline_compared{{host="{node}"}} 1' in prom, node


RECORDED = "baseline recorded (first passing run: nothing compared)"
GPU_ONLY_ADVICE = ("bucket_cap_mb", "not the wire", "the wire is the limit", "faster links", "hook cuts")


def check_make_run_summary(results_dir, bench_output, nodes, said):
    """`make run`'s summary (wireup.report.runsummary) from this bench.yml's own output as its bench.log:
    each node's bench cell says what its verdict was compared with."""
    run = results_dir / f"run-{len(list(results_dir.glob('run-*')))}"
    run.mkdir()
    (run / "phases.tsv").write_text("bench\t0\t60\n")
    (run / "bench.log").write_text(bench_output)
    lines = runsummary.summary(str(run), str(results_dir))
    for node in nodes:
        [row] = [line for line in lines if line.startswith(f"  {node} ")]
        assert said in row, lines


BASELINE = "/var/lib/wireup/check/baseline.json"  # node_check_baseline
TEXTFILES = "/var/lib/prometheus/node-exporter"  # node_check_textfile_dir (node_exporter is in the image)
CHECK = "/usr/local/sbin/wireup-check"


def check_baselines_and_textfiles(testbed, nodes, run_id, out, compared=None):
    """Issue 26: after the run, every PASSing node keeps it as its quick-check baseline (0640, root,
    the run's id) and has its figures for node_exporter (wireup_bench.prom, 0644)."""
    for node in nodes:
        assert f"wireup-check: baseline of {node} written from bench run {run_id}" in out, node
        shown = testbed.ssh(node, f"stat -c '%a %U' {BASELINE} {TEXTFILES}/wireup_bench.prom").stdout.split(
            "\n"
        )
        assert shown[:2] == ["640 root", "644 root"], shown
        doc = json.loads(testbed.ssh(node, f"cat {BASELINE}").stdout)
        assert doc["bench"]["run_id"] == run_id and doc["taken"] == "bench" and doc["node"]["gpus"] == []
        assert [(p["name"], p["watched"]) for p in doc["node"]["ports"]] == [("host0", True)]
        prom = testbed.ssh(node, f"cat {TEXTFILES}/wireup_bench.prom").stdout
        assert f'wireup_bench_verdict{{host="{node}",verdict="PASS"}} 1' in prom
        if compared is not None:
            assert f'wireup_bench_baseline_compared{{host="{node}"}} {compared}' in prom
        assert (
            f'wireup_bench_torch_busbw_bytes_per_second{{host="{node}",run="multi_node",backend="gloo"'
            in prom
        )


def test_quick_check_against_the_bench_baseline(torch_nodes, tmp_path):
    """`bench.yml --tags quick`: every node against the baseline its passing bench left (or, when
    this test runs alone, one taken by hand), reported like a bench run; then two stand-in faults:
    node2's baseline claims an InfiniBand rail the node no longer has (a rail lost since the bench),
    node3's baseline is cut off (the check fails closed)."""
    testbed = torch_nodes
    nodes = sorted(testbed.nodes)
    for node in nodes:
        testbed.ssh(node, f"test -s {BASELINE} || {CHECK} --write-baseline --manual", check=False)
        testbed.ssh(node, f"test -s {BASELINE} && cp -p {BASELINE} {BASELINE}.it")
    extra = {"wireup_results_dir": str(tmp_path / "results")}
    try:
        start = time.monotonic()
        healthy = run_playbook("bench.yml", testbed.inventory, extra, tags=["quick"])
        print(f"[quick] bench.yml --tags quick rc={healthy.rc} in {time.monotonic() - start:.0f} s")
        assert healthy.rc == 0, f"{healthy.failure_messages()}\n{healthy.stdout[-3000:]}"
        out = " ".join(healthy.stdout.split())
        for node in nodes:
            assert re.search(
                rf"'{node}: PASS, [^']*? - 0 GPU\(s\), 1 NIC port\(s\) as at the "
                r"(last passing bench|baseline taken by hand) \S+"
                r"(; GPU health not checked \(.*?\))? \([0-9.]+ s\)'",
                out,
            ), out[-2000:]
        [run] = (tmp_path / "results/quick").iterdir()
        records = _records(run)
        assert {n: r["verdict"] for n, r in records.items()} == dict.fromkeys(nodes, "PASS")
        assert {r["kind"] for r in records.values()} == {"quick"}  # never read as bench records
        assert all(r["node_check"]["seconds"] < 5 for r in records.values()), records  # the budget
        assert "every node healthy." in (run / "report.md").read_text()

        rail = {"name": "mlx5_0:1", "kind": "ib", "up": True, "gbps": 400.0, "watched": True}
        testbed.ssh(
            "node2",
            f"python3 -c \"import json; p='{BASELINE}'; d=json.load(open(p)); "
            f"d['node']['ports'].append({rail!r}); json.dump(d, open(p, 'w'))\"",
        )
        testbed.ssh("node3", f"head -c 40 {BASELINE}.it > {BASELINE}")
        start = time.monotonic()
        broken = run_playbook("bench.yml", testbed.inventory, extra, tags=["quick"])
        print(f"[quick] bench.yml --tags quick (2 faults) rc={broken.rc} in {time.monotonic() - start:.0f} s")
        assert broken.rc != 0
        out = " ".join(broken.stdout.split())
        assert re.search(r"'node1: PASS, [^']*? - ", out)  # the verdict, then what it was compared with
        assert re.search(
            r"'node2: FAIL, [^']*? - NIC mlx5_0:1 missing \(was up at 400 Gb/s at the "
            r"(last passing bench|baseline taken by hand) \S+\) \([0-9.]+ s\)'",
            out,
        )
        not_json = rf"'node3: FAIL, [^']*? - ERROR: the baseline {re.escape(BASELINE)} is not JSON"
        assert re.search(not_json, out)
        assert "quick check FAIL on node2, node3" in out
        prom = testbed.ssh("node2", f"cat {TEXTFILES}/wireup_check.prom").stdout
        assert 'wireup_check_verdict{host="node2",verdict="FAIL"} 1' in prom
        assert 'wireup_check_problem{host="node2",part="NIC mlx5_0:1"} 1' in prom
        direct = testbed.ssh("node2", CHECK, check=False)
        assert direct.returncode == 1 and direct.stdout.startswith(
            "wireup-check: FAIL node2: NIC mlx5_0:1 missing"
        )
    finally:
        for node in nodes:
            testbed.ssh(node, f"test -f {BASELINE}.it && mv {BASELINE}.it {BASELINE}", check=False)


def check_stepcost(figures, world):
    """Sane, internally consistent DDP step figures of a gloo group (issue 16)."""
    [fig] = figures
    assert fig["world_size"] == world and fig["backend"] == "gloo" and fig["precision"] == "fp32"
    assert fig["params"] == 1050624 and fig["grad_bytes"] == 4 * fig["params"]  # 1M asked: 4 x 512x512+512
    assert fig["hooks"]["bf16"] == {
        "skipped": "bf16_compress needs NCCL (GPU): gloo has no bfloat16 all-reduce"
    }
    for hook in ("none", "fp16", "powersgd"):
        entry = fig["hooks"][hook]
        assert entry["step_ms"] > 0 and 0.0 <= entry["share"] <= 1.0
        assert entry["exposed_ms"] >= 0
        if not entry["clamped"]:
            assert entry["exposed_ms"] == pytest.approx(entry["step_ms"] - fig["compute_ms"], abs=1e-3)
        # Compute-only is not slower than the full step beyond the noise of a shared 2-core machine.
        assert fig["compute_ms"] <= entry["step_ms"] * 1.25, (hook, fig)
    assert fig["share"] == fig["hooks"]["none"]["share"]
    assert fig["sentence"].startswith(("Communication is ", "The full DDP step")), fig["sentence"]
    # Issue 38: a CPU run over gloo says what it shows and advises nothing that holds only on GPUs.
    assert fig["device"] == "cpu" and not [w for w in GPU_ONLY_ADVICE if w in fig["sentence"]], fig[
        "sentence"
    ]
    assert fig["verdict"] == "PASS"


def test_stepcost_alone(torch_nodes, tmp_path):
    """`--tags stepcost`: the DDP step benchmark alone across the 3 gloo nodes, stored, reported,
    and nothing else run (no torch or collective benchmark); then the program itself on one node,
    one process (no communication)."""
    testbed = torch_nodes
    results_dir = tmp_path / "results"
    start = time.monotonic()
    result = run_playbook(
        "bench.yml",
        testbed.inventory,
        {"wireup_results_dir": str(results_dir), "bench_iterations": 5, "bench_warmup_iterations": 2},
        tags=["stepcost"],
        timeout=600,
    )
    took = time.monotonic() - start
    print(f"[bench] bench.yml --tags stepcost rc={result.rc} in {took:.0f} s")
    assert result.rc == 0, f"{result.failure_messages()}\n{result.stdout[-4000:]}"
    # No wall-clock bound (180 s seen at a load of 17, ~40 s alone: the shared cores' figure, not
    # the tag's): that the tag runs the step benchmark alone is asserted below, from the output
    # and the stored records.
    out = " ".join(result.stdout.split())
    assert "torch_allreduce.py" not in out and "all_reduce_perf" not in out
    [run] = sorted((results_dir / "bench").iterdir())
    records = _records(run)
    assert sorted(records) == sorted(testbed.nodes)
    for rec in records.values():
        assert rec["torch"] == {} and rec["collectives"] == {}
        check_stepcost(rec["stepcost"]["multi_node"], 3)
        # A run of the step benchmark alone is no baseline for the bandwidth figures.
        assert rec["verdict"] == "N/A"
    md = (run / "report.md").read_text()
    assert "## What communication costs a DDP step" in md
    assert "### DDP step on the group (3 nodes, 3 ranks)" in md
    assert (run / "stepcost_group.png").read_bytes().startswith(PNG_MAGIC)
    assert re.search(
        r"'node1: N/A, [^']*? - .*; DDP step multi_node 1.05M \(3 ranks\): comm \d+% of [0-9.]+ ms", out
    ), out[-3000:]

    # The program itself, one process on one node: no gradient all-reduce, and it says so.
    direct = testbed.ssh(
        "node1",
        f"cd /tmp && OMP_NUM_THREADS=1 timeout {busy.PATIENCE_S} /opt/wireup/venv/bin/torchrun --standalone "
        "--nproc-per-node 1 /opt/wireup/bench/ddp_step.py --params 300K --warmup 3 --iters 3 "
        "--hooks none,fp16",
        timeout=busy.HANG_S,
    )
    figures = [ddp_step.figure(r) for r in ddp_step.parse_log(direct.stdout)]
    [fig] = figures
    assert fig["world_size"] == 1 and fig["share"] == 0.0 and set(fig["hooks"]) == {"none", "fp16"}
    assert fig["sentence"].startswith("One process: DDP has no gradient all-reduce")


def test_bad_threshold_is_refused(testbed, tmp_path):
    result = run_playbook(
        "bench.yml",
        testbed.inventory,
        {"wireup_results_dir": str(tmp_path), "bench_warn_ratio": 0.95},
        tags=["bench"],
    )
    assert result.rc != 0
    message = " ".join(str(item) for item in result.failure_messages())
    assert "bench_warn_ratio" in message and "bench_pass_ratio" in message
    assert not (tmp_path / "bench").exists()
