"""Issue 26's settings and Slurm block: preflight refuses bad node_check_*/slurm_health_check_*
values naming the variable and the fix (wireup.watchsettings through validate.host_errors, and
the roles' argument_specs through preflight's filter), slurm.conf's block and its conflicts
(wireup.slurmhealth), and the bench plan's 1-GPU rule (bench.nccl_tests_skip)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from wireup import bench, slurmhealth, validate, watchsettings

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("node_check_path", "wireup-check", "must be an absolute path"),
        ("node_check_baseline", "/var/lib/wireup/base line.json", "must be an absolute path"),
        ("node_check_textfile_dir", "", "must be an absolute path"),
        ("slurm_health_check_conf", "/etc/slurm/slurm.conf\nX=1", "must be an absolute path"),
        ("node_check_bench_bytes", "1GB", "is not a size in nccl-tests' syntax"),
        ("node_check_bench_tolerance", 1.5, "must be a fraction from 0 to below 1"),
        ("node_check_bench_tolerance", True, "must be a fraction"),
        ("node_check_bench_iterations", 0, "must be a whole number of at least 1"),
        ("node_check_timeout", "ten", "must be a whole number of at least 1"),
        ("slurm_health_check_interval", 0, "must be a whole number of at least 1"),
        ("slurm_health_check_node_state", "BUSY", "is not Slurm's HealthCheckNodeState"),
        ("slurm_health_check_node_state", "CYCLE", "CYCLE with another"),
        ("wireup_slurm_health_check", "maybe", "must be true or false"),
    ],
)
def test_bad_values_are_refused_naming_the_variable(name, value, needle):
    [error] = validate.host_errors({name: value})
    assert error.startswith(name) and needle in error


def test_good_values_and_the_roles_template_defaults_pass():
    good = {
        "node_check_path": "/usr/local/sbin/wireup-check",
        "node_check_bench_bytes": "256M",
        "node_check_bench_tolerance": 0.2,
        "node_check_bench_iterations": 20,
        "slurm_health_check_interval": 300,
        "slurm_health_check_node_state": "IDLE,CYCLE",
        "wireup_slurm_health_check": "true",
        "node_check_config": "{{ wireup_base_dir }}/check.json",
    }
    assert watchsettings.errors(good) == []
    assert [watchsettings.size_bytes(s) for s in ("8", "64K", "256M", "1G")] == [
        8,
        64 << 10,
        256 << 20,
        1 << 30,
    ]


def test_preflight_checks_the_roles_argument_specs_too():
    path = REPO / "plugins/filter/wireup_validate.py"
    spec = importlib.util.spec_from_file_location("wireup_validate_filter_26", path)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    pins = {
        "nvidia_driver_branch": "580",
        "cuda_repo_version": "13.0",
        "nccl_version": "2.28.9",
        "nccl_package_version": "2.28.9-1+cuda13.0",
        "nccl_tests_version": "v2.19.6",
        "pytorch_venv_torch_version": "2.13.0",
    }
    hostvars = {"n1": dict(pins, node_check_textfile="sometimes", slurm_health_check_state="off")}
    errors = plugin.wireup_inventory_errors(
        ["n1"],
        hostvars,
        {"gpu_nodes": ["n1"]},
        "gpu_nodes",
        roles_dir=str(REPO / "roles"),
        roles=["node_check", "slurm_health_check"],
    )
    assert errors == [
        "node_check role: value of node_check_textfile must be one of: auto, always, never, got: sometimes",
        "slurm_health_check role: value of slurm_health_check_state must be one of: present, absent, "
        "got: off",
    ]
    defaults = REPO / "roles/preflight/defaults/main.yml"
    assert "  - node_check\n  - slurm_health_check\n" in defaults.read_text()


CONF = """# slurm.conf
ClusterName=c
SlurmctldHost=n1
NodeName=n[1-3] CPUs=2 State=UNKNOWN
"""
BLOCK = (
    "# BEGIN wireup slurm_health_check (managed by Ansible: roles/slurm_health_check)\n"
    "HealthCheckProgram=/usr/local/sbin/wireup-slurm-health\nHealthCheckInterval=300\nHealthCheckNodeState=ANY\n"
    "# END wireup slurm_health_check (managed by Ansible: roles/slurm_health_check)\n"
)
SETTINGS = {
    "present": True,
    "program": "/usr/local/sbin/wireup-slurm-health",
    "interval": 300,
    "node_state": "ANY",
}


def test_the_block_and_a_slurm_conf_that_carries_it_already():
    plan = slurmhealth.plan(CONF, "/etc/slurm/slurm.conf", "n1", SETTINGS)
    assert plan["errors"] == [] and plan["state"] == "present"
    assert plan["block"] + "\n" == BLOCK.split("\n", 1)[1].rsplit("# END", 1)[0]
    assert plan["marker"].replace("{mark}", "BEGIN") + "\n" == BLOCK.splitlines(keepends=True)[0]
    assert slurmhealth.conflicts(CONF + BLOCK) == []


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ("HealthCheckProgram=/usr/sbin/nhc", "line 5: HealthCheckProgram=/usr/sbin/nhc"),
        ("healthcheckinterval=60", "line 5: healthcheckinterval=60"),
        (
            "SlurmctldPort=6817 HealthCheckNodeState=IDLE  # two words",
            "line 5: SlurmctldPort=6817 HealthCheckNodeState=IDLE",
        ),
    ],
)
def test_a_health_check_outside_the_block_is_refused_with_its_line(line, where):
    plan = slurmhealth.plan(CONF + line + "\n" + BLOCK, "/etc/slurm/slurm.conf", "n1", SETTINGS)
    [error] = plan["errors"]
    assert where in error and "LBNL NHC" in error
    assert slurmhealth.conflicts(CONF + "# HealthCheckProgram=/usr/sbin/nhc\n") == []


def test_no_slurm_conf_and_removal():
    [error] = slurmhealth.plan(None, "/etc/slurm/slurm.conf", "n2", SETTINGS)["errors"]
    assert error.startswith("n2 has no /etc/slurm/slurm.conf") and "slurm_health_check_conf" in error
    gone = slurmhealth.plan(CONF + "HealthCheckProgram=/x\n", "/c", "n1", dict(SETTINGS, present=False))
    assert gone == {"errors": [], "block": "", "state": "absent", "marker": slurmhealth.MARKER}


NODE = {"gpu": {"present": True, "count": 1, "nvidia_smi": "/usr/bin/nvidia-smi"}}
BENCH_SETTINGS = {
    "bench_collectives": ["all_reduce"],
    "bench_min_bytes": "8",
    "bench_max_bytes": "8G",
    "bench_step_factor": 2,
    "bench_iterations": 20,
    "bench_warmup_iterations": 5,
    "bench_timeout": 900,
    "bench_dir": "/opt/wireup/bench",
    "wireup_base_dir": "/opt/wireup",
    "bench_torch": True,
    "bench_torch_min_bytes": "1M",
    "bench_torch_max_bytes": "8G",
    "bench_torch_cpu_max_bytes": "16M",
    "bench_torch_step_factor": 4,
    "bench_stepcost": True,
    "bench_stepcost_params": ["500M"],
    "bench_stepcost_cpu_params": ["1M"],
    "bench_stepcost_hooks": ["none"],
    "bench_nccl_tune": True,
    "bench_nccl_tune_candidates": [{"NCCL_ALGO": "Ring"}],
    "bench_nccl_tune_min_gain": 0.02,
}


def test_one_gpu_runs_no_nccl_tests_needs_no_build_and_says_so():
    plan = bench.plan(NODE, BENCH_SETTINGS, None, None, "h1")
    assert plan["nccl_runs"] == [] and plan["compare"] == {} and not plan["torch_single"]
    why = (
        "nccl-tests skipped on h1: 1 GPU, no GPU pair to give a bus bandwidth figure (every collective "
        "would be N/A)"
    )
    assert plan["skipped"] == why and plan["notes"] == [f"bench: {why}"]
    assert [j["kind"] for j in plan["single_jobs"]] == ["stepcost_single_node"]  # the step time is a figure
    build = {"bin_dir": "/b", "json": True}
    two = bench.plan({"gpu": dict(NODE["gpu"], count=2)}, BENCH_SETTINGS, build, None, "h2")
    assert len(two["nccl_runs"]) == 1 and two["skipped"] == "" and two["compare"]
    assert bench.nccl_tests_skip(2) == "" and bench.nccl_tests_skip(0, "c").startswith(
        "nccl-tests skipped on c: 0 GPU"
    )
