"""The gpu_trial role's plan, node fact and cost line (wireup.plans.gpu_trial), and its settings' rule in
preflight (preflight.host_errors)."""

import dataclasses
import json
import pathlib
import re

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpu_trial_settings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import gpu_trial, preflight
from tests import busy
from tests.unit.test_layout import ROOT

DEFAULTS = yaml.safe_load((ROOT / "roles/gpu_trial/defaults/main.yml").read_text())
GPU_NODE = {"gpu": {"present": True, "count": 8, "nvidia_smi": "/usr/bin/nvidia-smi"}}
CPU_NODE = {"gpu": {"present": False, "count": 0, "nvidia_smi": ""}}


def values(**extra):
    """The role's variables as preflight sees them (the defaults, a rendered gpu_trial_dir)."""
    return {**DEFAULTS, "gpu_trial_dir": "/opt/wireup/gpu_trial", **extra}


def settings(health_only=False, **extra):
    """The plan's TrialSettings as the role's task passes them (each variable by name)."""
    given = {k.removeprefix("gpu_trial_"): v for k, v in values(**extra).items() if k in DEFAULTS}
    return gpu_trial.TrialSettings(
        **{k: v for k, v in given.items() if k in TRIAL_FIELDS},
        venv_path="/opt/wireup/venv",
        health_only=health_only,
    )


TRIAL_FIELDS = {f.name for f in dataclasses.fields(gpu_trial.TrialSettings)}


def test_the_task_passes_every_setting_the_plan_takes():
    """roles/gpu_trial/tasks/main.yml names each TrialSettings field once (a forgotten or misspelt
    one would be a TypeError on the node)."""
    task = (ROOT / "roles/gpu_trial/tasks/main.yml").read_text()
    call = task[task.index("wireup_gpu_trial_plan(") : task.index("}}", task.index("wireup_gpu_trial_plan("))]
    assert set(re.findall(r"(\w+)=", call)) == TRIAL_FIELDS
    with pytest.raises(TypeError):
        gpu_trial.TrialSettings(**{**dataclasses.asdict(settings()), "second": 10})


def test_a_gpu_node_reads_health_and_runs_the_fingerprint_within_its_budget():
    plan = gpu_trial.plan(GPU_NODE, settings(), "gpu-a01")
    assert plan["health"] and plan["fingerprint"] and plan["notes"] == [] and plan["dcgm_level"] == 0
    assert plan["argv"][:6] == [
        "timeout",
        "-k",
        "10",
        "135",
        "/opt/wireup/venv/bin/python",
        "/opt/wireup/gpu_trial/gpu_fingerprint.py",
    ]
    assert plan["argv"][6:] == [
        "--seconds",
        "25",
        "--sets",
        "gemm,hbm,pcie",
        "--gemm-dtypes",
        "bf16,fp16,tf32,fp8",
        "--gemm-size",
        "8192",
        "--copy-bytes",
        "1073741824",
        "--pcie-bytes",
        "268435456",
    ]
    # The default: 3 x 25 s of windows and the setup, within issue 25's 90 s per node; stopped at 135 s.
    assert 3 * DEFAULTS["gpu_trial_seconds"] + 10 <= 90 and plan["timeout"] == 135
    short = gpu_trial.plan(
        GPU_NODE, settings(gpu_trial_seconds=8, gpu_trial_python="/opt/torch/.venv/bin/python3"), "h"
    )
    assert plan["capability"] == "gpu_trial"
    assert short["argv"][3:5] == ["84", "/opt/torch/.venv/bin/python3"] and "8" in short["argv"]


def test_a_gpu_less_node_says_the_fingerprint_needs_gpus():
    plan = gpu_trial.plan(CPU_NODE, settings(), "node1")
    assert not plan["health"] and not plan["fingerprint"]
    assert plan["notes"] == [
        "gpu_trial node1: no nvidia-smi (no NVIDIA driver): GPU health not read",
        "gpu_trial node1: the GPU fingerprint needs GPUs: skipped (no NVIDIA GPU that nvidia-smi lists)",
    ]
    # The testbed's stand-in: an nvidia-smi but no GPU -> the health read runs, the fingerprint not.
    stand_in = gpu_trial.plan(
        {"gpu": {"present": False, "count": 0, "nvidia_smi": "/usr/local/bin/nvidia-smi"}},
        settings(),
        "node2",
    )
    assert stand_in["health"] and not stand_in["fingerprint"] and len(stand_in["notes"]) == 1


def test_gpu_health_alone_reads_health_only():
    plan = gpu_trial.plan(GPU_NODE, settings(health_only=True, gpu_trial_dcgm_diag=2), "h")
    assert plan["health"] and not plan["fingerprint"] and plan["dcgm_level"] == 0 and plan["notes"] == []
    # The record says which capability the run measured (a per-capability reader tells them apart).
    assert plan["capability"] == "gpu_health"
    fact = gpu_trial.node_data(plan, "r", "h", reads=[], fingerprint=None, dcgm_run=None)
    assert fact["capability"] == "gpu_health"


@pytest.mark.parametrize(
    ("level", "timeout", "limit"), [(1, 0, "120"), (2, 0, "600"), (3, 0, "2400"), (2, 900, "900")]
)
def test_dcgm_levels_and_their_time_limits(level, timeout, limit):
    plan = gpu_trial.plan(GPU_NODE, settings(gpu_trial_dcgm_diag=level, gpu_trial_dcgm_timeout=timeout), "h")
    assert plan["dcgm_level"] == level and plan["dcgm_argv"] == [
        "timeout",
        "-k",
        "10",
        limit,
        "dcgmi",
        "diag",
        "-r",
        str(level),
        "-j",
    ]
    assert gpu_trial.dcgm_note(plan, {"dcgmi": ""}, "h").startswith(
        f"gpu_trial h: gpu_trial_dcgm_diag={level} but dcgmi is not installed"
    )
    assert gpu_trial.dcgm_note(plan, {"dcgmi": "/usr/bin/dcgmi"}, "h") == ""


def test_the_node_fact_keeps_what_the_controller_reads():
    plan = gpu_trial.plan(GPU_NODE, settings(), "h")
    read = {
        "health": {"gpus": []},
        "error": "",
        "dcgmi": "",
        "findings": [],
        "summary": ["x"],
        "changed": False,
    }
    doc = {
        "wireup_gpu_fingerprint": 1,
        "gpus": [{}, {}],
        "sets": ["gemm", "hbm", "pcie"],
        "seconds_per_set": 25,
        "set_seconds": {"gemm": 25.2, "hbm": 25.0, "pcie": 26.1},
    }
    ran = {
        "rc": 0,
        "stdout": "warning: noise\n" + json.dumps(doc),
        "stderr": "",
        "delta": "0:01:23.500000",
        "cmd": ["x"],
    }
    data = gpu_trial.node_data(
        plan, "20261203T100000Z", "h", reads=[read, None], fingerprint=ran, dcgm_run={"skipped": True}
    )
    assert data["health_before"] == {"health": {"gpus": []}, "error": "", "dcgmi": ""}
    assert data["health_after"] == {"skipped": True} and data["dcgm"] == {"skipped": True, "level": 0}
    assert data["fingerprint"]["seconds"] == 83.5 and "cmd" not in data["fingerprint"]
    assert gpu_trial.cost_line("h", ran) == (
        "gpu_trial h: fingerprint of 2 GPU(s) took 84 s (rc 0; windows 3 x 25 s; "
        "gemm 25.2 s; hbm 25.0 s; pcie 26.1 s)"
    )
    assert gpu_trial.cost_line("h", {"skipped": True}) == ""
    # The line shown: the read after the load where it ran, else the one before; none without a read.
    before, after = {"summary": ["2 GPU(s): no health finding"]}, {"summary": ["2 GPU(s): ECC"]}
    assert gpu_trial.health_lines("h", [before, after]) == ["gpu_trial h: 2 GPU(s): ECC"]
    assert gpu_trial.health_lines("h", [before, {"skipped": True}]) == [
        "gpu_trial h: 2 GPU(s): no health finding"
    ]
    assert gpu_trial.health_lines("h", [before, None]) == ["gpu_trial h: 2 GPU(s): no health finding"]
    assert gpu_trial.health_lines("h", [{"skipped": True, "changed": False}, None]) == []
    assert gpu_trial.seconds_of("1:02:03.5") == 3723.5 and gpu_trial.seconds_of("soon") is None


def test_run_data_keeps_each_host_that_kept_the_fact_and_the_thresholds_as_numbers():
    nodes = [{"run_id": "20261203T100001Z"}, None, {"run_id": "20261203T100000Z"}]
    given = gpu_trial.JudgeSettings(
        spec_pass_ratio=0.9, spec_warn_ratio="0.75", warn_tolerance="0.15", fail_tolerance=0.2, efficiency={}
    )
    run = gpu_trial.run_data(["a", "b", "c"], nodes, given)
    assert (
        run["hosts"] == ["a", "c"] and run["run_id"] == "20261203T100000Z" and set(run["nodes"]) == {"a", "c"}
    )
    assert run["thresholds"] == {
        "spec_pass_ratio": 0.9,
        "spec_warn_ratio": 0.75,
        "warn_tolerance": 0.15,
        "fail_tolerance": 0.2,
        "efficiency": {},
    }
    with pytest.raises(ValueError):  # one entry per host of the group
        gpu_trial.run_data(["a", "b"], nodes, given)
    with pytest.raises(TypeError):  # a threshold the task misspells
        gpu_trial.JudgeSettings(
            spec_pass=0.9, spec_warn_ratio=0.75, warn_tolerance=0.1, fail_tolerance=0.2, efficiency={}
        )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"gpu_trial_seconds": 0}, "gpu_trial_seconds must be seconds in (0, 3600]"),
        ({"gpu_trial_seconds": "fast"}, "gpu_trial_seconds must be"),
        ({"gpu_trial_sets": ["gemm", "disk"]}, "gpu_trial_sets must be a non-empty list of gemm, hbm, pcie"),
        ({"gpu_trial_gemm_dtypes": []}, "gpu_trial_gemm_dtypes must be a non-empty list"),
        ({"gpu_trial_dcgm_diag": 4}, "gpu_trial_dcgm_diag must be 0 (off), 1, 2 or 3"),
        ({"gpu_trial_gemm_size": -1}, "gpu_trial_gemm_size must be a positive whole number"),
        ({"gpu_trial_spec_warn_ratio": 0.95}, "must not exceed gpu_trial_spec_pass_ratio"),
        (
            {"gpu_trial_fail_tolerance": 0.05},
            "gpu_trial_warn_tolerance (0.1) must not exceed gpu_trial_fail_tolerance (0.05)",
        ),
        (
            {"gpu_trial_efficiency": {"gemm_bf16_flops": 0}},
            "gpu_trial_efficiency.gemm_bf16_flops must be a fraction",
        ),
    ],
)
def test_preflight_names_the_variable(values, message):
    errors = preflight.host_errors({**DEFAULTS, **values})
    assert any(message in e for e in errors), errors


def test_the_defaults_pass_preflight():
    assert gpu_trial_settings.settings_errors(values()) == []
    assert not [e for e in preflight.host_errors(dict(DEFAULTS)) if "gpu_trial" in e]


def test_extra_vars_given_as_strings_are_numbers():
    """`-e gpu_trial_seconds=10` arrives as the string '10' (so do the thresholds)."""
    strings = {
        "gpu_trial_seconds": "10",
        "gpu_trial_dcgm_diag": "2",
        "gpu_trial_gemm_size": "4096",
        "gpu_trial_warn_tolerance": "0.15",
    }
    given = values(**strings)
    assert gpu_trial_settings.settings_errors(given) == []
    plan = gpu_trial.plan(GPU_NODE, settings(**strings), "h")
    assert (
        plan["argv"][3] == "90"
        and plan["argv"][7] == "10"
        and "4096" in plan["argv"]
        and plan["dcgm_level"] == 2
    )
    assert gpu_trial_settings.thresholds(given)["warn_tolerance"] == 0.15
    assert gpu_trial_settings.settings_errors(values(gpu_trial_seconds="ten"))[0].startswith(
        "gpu_trial_seconds must be"
    )
    assert gpu_trial_settings.settings_errors(values(gpu_trial_gemm_size="8192.5"))[0].startswith(
        "gpu_trial_gemm_size"
    )


def test_the_run_filter_under_ansible_takes_lazy_facts_and_settings(tmp_path):
    """wireup_gpu_trial_run in a real play (ansible-core 2.19 hands filters lazy containers: a
    dataclasses.asdict of them failed with "Direct construction of lazy containers")."""
    import os
    import subprocess
    import sys

    play = tmp_path / "run.yml"
    play.write_text(
        """
- hosts: localhost
  gather_facts: false
  vars:
    efficiency: {gemm_bf16_flops: 0.7}
  tasks:
    - ansible.builtin.set_fact:
        gpu_trial_node: {run_id: "20261203T100000Z", capability: gpu_health}
    - ansible.builtin.set_fact:
        run: >-
          {{ ['localhost', 'gone'] | wireup.cluster.wireup_gpu_trial_run(
               nodes=[hostvars.localhost.gpu_trial_node, none], spec_pass_ratio=0.9, spec_warn_ratio='0.75',
               warn_tolerance=0.1, fail_tolerance=0.2, efficiency=efficiency) }}
    - ansible.builtin.copy:
        content: "{{ run | to_json }}"
        dest: "{{ playbook_dir }}/run.json"
        mode: "0600"
"""
    )
    out = subprocess.run(
        [
            str(pathlib.Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(play),
        ],
        cwd=ROOT,
        env=dict(os.environ, ANSIBLE_PYTHON_INTERPRETER=sys.executable),
        capture_output=True,
        text=True,
        timeout=busy.HANG_S,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["hosts"] == ["localhost"] and run["run_id"] == "20261203T100000Z"
    assert run["thresholds"]["spec_warn_ratio"] == 0.75 and run["thresholds"]["efficiency"] == {
        "gemm_bf16_flops": 0.7
    }
