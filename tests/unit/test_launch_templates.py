"""torchrun_launch's rendered scripts, for several inventories: bash -n, shellcheck, and a real run
of launch.sh against a fake venv whose torchrun/python print the argv and environment they got."""

import json
import os
import pathlib
import shutil
import stat
import subprocess

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as AnsibleCoreFilters

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "torchrun_launch"
FILTERS_PY = ROOT / "plugins" / "filter" / "wireup_launch.py"
SLURM_FILTERS_PY = ROOT / "plugins" / "filter" / "wireup_slurm.py"
DEVICE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _wireup_filters(path=FILTERS_PY):
    namespace = {"__file__": str(path), "__name__": "wireup_filters_" + path.stem}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["FilterModule"]().filters()


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(ROLE / "templates")),
    trim_blocks=True,  # as Ansible's template module does
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
ENV.filters.update(AnsibleCoreFilters().filters())
# The templates call wireup's filters by their FQCN, as Ansible registers them from the collection.
for _path in (FILTERS_PY, SLURM_FILTERS_PY):
    ENV.filters.update({f"wireup.cluster.{name}": func for name, func in _wireup_filters(_path).items()})


def node(address, interface="eth0", gpus=0, ib=(), hostname=""):
    return {
        "address": address,
        "interface": interface,
        "gpu_present": gpus > 0,
        "gpu_count": gpus,
        "infiniband": list(ib),
        "hostname": hostname,
    }


INVENTORIES = {
    "one-node-2gpu": dict(
        nodes={"localhost": node("172.16.0.2", gpus=2, hostname="h200box")}, kw={}, host="localhost"
    ),
    "three-cpu-nodes": dict(
        nodes={f"node{i}": node(f"10.77.0.1{i}", hostname=f"wb-node{i}") for i in (1, 2, 3)},
        kw={"nproc_per_node": 2},
        host="node2",
    ),
    "master-not-first": dict(
        nodes={f"gpu-a0{i}": node(f"10.40.0.1{i}", gpus=8) for i in (1, 2, 3)},
        kw={"master_host": "gpu-a03", "master_port": 29611},
        host="gpu-a03",
    ),
    "explicit-interface-ib": dict(
        nodes={
            "gpu-a01": node("10.40.0.11", interface="ens7f0np0", gpus=8, ib=["mlx5_1", "mlx5_0"]),
            "gpu-a02": node("10.40.0.12", interface="ens7f0np0", gpus=8, ib=["mlx5_1", "mlx5_0"]),
        },
        kw={"nproc_per_node": 4},
        host="gpu-a02",
    ),
}


def context(name, tmp_path, **overrides):
    inv = INVENTORIES[name]
    plan = torchrun_launch.plan(list(inv["nodes"]), inv["nodes"], **inv["kw"])
    assert plan["errors"] == []
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    base = tmp_path / "opt-wireup"
    ctx = {k: v for k, v in defaults.items() if "{{" not in str(v)}
    ctx.update(
        ansible_managed="Ansible managed: do not edit",
        inventory_hostname=inv["host"],
        wireup_base_dir=str(base),
        torchrun_launch_nccl_tuned_env=str(base / "nccl-tuned.env"),
        wireup_venv_path=str(base / "venv"),
        wireup_job_env=dict(DEVICE_ENV),
        torchrun_launch_program=str(base / "examples" / "ddp_multinode.py"),
        torchrun_launch_args=["--steps", 5, "two words"],
        torchrun_launch_env={"NCCL_DEBUG": "INFO", "QUOTED": 'it\'s "odd" $HOME'},
        # job_plan's keys the templates read, for the layout-only plan torchrun_launch.plan gives.
        __torchrun_launch_plan=dict(plan, job_dir=str(base / "jobs" / "ddp-multinode"), slurm_exclude=""),
        __torchrun_launch_job_dir=str(base / "jobs" / "ddp-multinode"),
    )
    ctx.update(overrides)
    return ctx


def render(template, ctx, dest):
    # torchrun_launch.job_plan's job_dir, for the layout-only plans these tests build with
    # torchrun_launch.plan.
    ctx = dict(
        ctx,
        __torchrun_launch_plan=dict(ctx["__torchrun_launch_plan"], job_dir=ctx["__torchrun_launch_job_dir"]),
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(ENV.get_template(template).render(**ctx))
    dest.chmod(0o750)
    return dest


def check_shell(path):
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is not installed: apt-get install shellcheck")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck); CI requires it")
    result = subprocess.run(
        ["shellcheck", "-s", "bash", str(path)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


FAKE_TOOL = """#!/usr/bin/env python3
import json, os, sys
keys = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "NCCL_DEBUG", "QUOTED",
        "NCCL_MIN_NCHANNELS", "WIREUP_NCCL_TUNED_ENV", "WIREUP_JOB", "WIREUP_RUN_ID", "WIREUP_JOB_TAG",
        "WIREUP_HOST", "WIREUP_NODE_RANK", "WIREUP_NNODES", "VIRTUAL_ENV", "OMP_NUM_THREADS"]
print(json.dumps({"tool": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                  "env": {k: os.environ.get(k) for k in keys}}))
"""


def fake_venv(venv):
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(
        f'VIRTUAL_ENV="{venv}"\nexport VIRTUAL_ENV\nPATH="$VIRTUAL_ENV/bin:$PATH"\n'
    )
    for tool in ("torchrun", "python"):
        (venv / "bin" / tool).write_text(FAKE_TOOL)
        (venv / "bin" / tool).chmod(0o755)


def run_launch(ctx, script, *args):
    fake_venv(pathlib.Path(ctx["wireup_venv_path"]))
    env = dict(os.environ, WIREUP_RUN_ID="t1")
    result = subprocess.run(
        [str(script), *args], check=False, capture_output=True, text=True, env=env, timeout=30
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("wireup: job ddp-multinode run t1 on ")
    log = pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "logs" / "t1.log"
    assert log.read_text() == result.stdout  # everything shown also lands in the per-job log
    return json.loads(lines[-1])


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_launch_sh_passes_bash_n_and_shellcheck(name, tmp_path):
    ctx = context(name, tmp_path)
    check_shell(render("jobs/launch.sh.j2", ctx, tmp_path / "launch.sh"))


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_job_sbatch_passes_bash_n_and_shellcheck(name, tmp_path):
    ctx = context(name, tmp_path, torchrun_launch_slurm_options={"partition": "gpu", "time": "01:00:00"})
    path = render("jobs/job.sbatch.j2", ctx, tmp_path / "job.sbatch")
    text = path.read_text()
    nnodes = len(INVENTORIES[name]["nodes"])
    assert f"#SBATCH --nodes={nnodes}\n" in text
    assert "#SBATCH --partition=gpu\n" in text and "#SBATCH --time=01:00:00\n" in text
    assert 'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in text
    assert 'srun --nodes=1 --ntasks=1 --nodelist="${nodes[rank]}"' in text
    for key, value in DEVICE_ENV.items():
        assert f"export {key}={value}\n" in text
    assert "--exclude" not in text
    check_shell(path)


def test_job_sbatch_excludes_the_nodes_left_out(tmp_path):
    """Nodes left out for a FAILed bench verdict (torchrun_launch.health_plan) are excluded from the
    allocation even where the job is not pinned with --nodelist (Slurm would pick them)."""
    ctx = context("three-cpu-nodes", tmp_path, torchrun_launch_slurm_nodelist=False)
    ctx["__torchrun_launch_plan"] = dict(ctx["__torchrun_launch_plan"], slurm_exclude="wb-node4,wb-node5")
    text = render("jobs/job.sbatch.j2", ctx, tmp_path / "job.sbatch").read_text()
    assert "#SBATCH --exclude=wb-node4,wb-node5\n" in text and "#SBATCH --nodelist" not in text


def test_three_cpu_nodes_worker_runs_torchrun_with_its_rank(tmp_path):
    ctx = context("three-cpu-nodes", tmp_path)
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    out = run_launch(ctx, script, "--extra", "x y")
    program = ctx["torchrun_launch_program"]
    assert out["tool"] == "torchrun"
    assert out["argv"] == [
        "--nnodes=3",
        "--nproc_per_node=2",
        "--node_rank=1",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=10.77.0.11:29500",
        "--rdzv_id=ddp-multinode-t1",
        "--rdzv_conf=is_host=0,join_timeout=300",
        "--local_addr=10.77.0.12",
        "--max_restarts=0",
        program,
        "--steps",
        "5",
        "two words",
        "--extra",
        "x y",
    ]
    env = out["env"]
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert env["NCCL_IB_HCA"] is None
    assert {k: env[k] for k in DEVICE_ENV} == DEVICE_ENV
    assert env["QUOTED"] == 'it\'s "odd" $HOME'
    assert env["WIREUP_NODE_RANK"] == "1" and env["WIREUP_NNODES"] == "3" and env["WIREUP_HOST"] == "node2"
    assert env["WIREUP_JOB_TAG"] == f"{ctx['__torchrun_launch_job_dir']}:t1"
    assert env["VIRTUAL_ENV"] == ctx["wireup_venv_path"]


def test_master_not_first_hosts_the_store(tmp_path):
    ctx = context("master-not-first", tmp_path)
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    argv = run_launch(ctx, script)["argv"]
    assert "--node_rank=2" in argv
    assert "--nproc_per_node=8" in argv
    assert "--rdzv_endpoint=10.40.0.13:29611" in argv
    assert "--rdzv_conf=is_host=1,join_timeout=300" in argv


def test_explicit_interface_and_ib_hca(tmp_path):
    ctx = context("explicit-interface-ib", tmp_path)
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    env = run_launch(ctx, script)["env"]
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "ens7f0np0"
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"


def test_tuned_env_is_sourced_and_job_env_wins_over_it(tmp_path):
    ctx = context("one-node-2gpu", tmp_path)
    base = pathlib.Path(ctx["wireup_base_dir"])
    base.mkdir(parents=True, exist_ok=True)
    (base / "nccl-tuned.env").write_text("NCCL_MIN_NCHANNELS=32\nNCCL_NVLS_ENABLE=1\n")
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    out = run_launch(ctx, script)
    assert out["env"]["NCCL_MIN_NCHANNELS"] == "32"
    assert out["env"]["NCCL_NVLS_ENABLE"] == "0"  # wireup_job_env (the GPU machine's rule) wins
    assert "--nproc_per_node=2" in out["argv"] and "--rdzv_conf=is_host=1,join_timeout=300" in out["argv"]
    assert out["env"]["WIREUP_NCCL_TUNED_ENV"] == str(base / "nccl-tuned.env")


def test_tuned_env_not_sourced_when_path_empty(tmp_path):
    # The bench role renders with an empty path unless bench_use_tuned_env: default NCCL.
    ctx = context("one-node-2gpu", tmp_path, torchrun_launch_nccl_tuned_env="")
    base = pathlib.Path(ctx["wireup_base_dir"])
    base.mkdir(parents=True, exist_ok=True)
    (base / "nccl-tuned.env").write_text("NCCL_MIN_NCHANNELS=32\n")
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    env = run_launch(ctx, script)["env"]
    assert env["NCCL_MIN_NCHANNELS"] is None and env["WIREUP_NCCL_TUNED_ENV"] is None
    assert "nccl-tuned.env" not in script.read_text()
    check_shell(script)


def test_static_backend_and_python_launcher(tmp_path):
    inv = INVENTORIES["master-not-first"]
    plan = torchrun_launch.plan(
        list(inv["nodes"]), inv["nodes"], master_host="gpu-a03", rdzv_backend="static"
    )
    ctx = context(
        "master-not-first", tmp_path, torchrun_launch_rdzv_backend="static", __torchrun_launch_plan=plan
    )
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    argv = run_launch(ctx, script)["argv"]
    assert argv[:6] == [
        "--nnodes=3",
        "--nproc_per_node=8",
        "--node_rank=0",
        "--rdzv_backend=static",
        "--master_addr=10.40.0.13",
        "--master_port=29500",
    ]
    check_shell(script)

    ctx = context("one-node-2gpu", tmp_path / "py", torchrun_launch_launcher="python")
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    out = run_launch(ctx, script, "--nproc", "2")
    assert out["tool"] == "python"
    assert out["argv"] == [ctx["torchrun_launch_program"], "--steps", "5", "two words", "--nproc", "2"]
    check_shell(script)


def test_missing_venv_fails_with_the_fix(tmp_path):
    ctx = context("one-node-2gpu", tmp_path)
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    result = subprocess.run([str(script)], check=False, capture_output=True, text=True)
    assert result.returncode == 2
    assert "site.yml --tags pytorch_venv" in result.stderr


def test_omp_threads_from_the_plan_and_the_job_env_wins(tmp_path):
    # torchrun sets OMP_NUM_THREADS=1 and prints a warning banner unless it is set: the plan sets
    # the node's CPUs / its processes (here 16 CPUs, 2 processes per node).
    inv = INVENTORIES["three-cpu-nodes"]
    nodes = {h: dict(f, cpus=16) for h, f in inv["nodes"].items()}
    plan = torchrun_launch.plan(list(nodes), nodes, **inv["kw"])
    ctx = context("three-cpu-nodes", tmp_path, __torchrun_launch_plan=plan)
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    assert run_launch(ctx, script)["env"]["OMP_NUM_THREADS"] == "8"
    ctx = context(
        "three-cpu-nodes",
        tmp_path / "b",
        __torchrun_launch_plan=plan,
        torchrun_launch_env={"OMP_NUM_THREADS": 3},
    )
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    assert run_launch(ctx, script)["env"]["OMP_NUM_THREADS"] == "3"


def test_the_job_log_is_not_world_readable(tmp_path):
    ctx = context("three-cpu-nodes", tmp_path)
    script = render("jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh")
    run_launch(ctx, script)
    log = pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "logs" / "t1.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o640
