"""Issue 26's settings and Slurm block: preflight refuses bad node_check_*/slurm_health_check_*
values naming the variable and the fix (wireup.core.watchsettings through preflight.host_errors, and
the roles' argument_specs through preflight's filter), slurm.conf's block and its conflicts
(wireup.plans.slurm_health_check)."""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import watchsettings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight, slurm_health_check

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
    [error] = preflight.host_errors({name: value})
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
SETTINGS = slurm_health_check.Settings(
    conf="/etc/slurm/slurm.conf",
    state="present",
    program="/usr/local/sbin/wireup-slurm-health",
    interval=300,
    node_state="ANY",
)


def test_the_block_and_a_slurm_conf_that_carries_it_already():
    plan = slurm_health_check.plan(CONF, "n1", SETTINGS)
    assert plan["errors"] == [] and plan["state"] == "present"
    assert plan["install"] == ["/usr/local/sbin/wireup-slurm-health"] and plan["remove"] == []
    assert plan["block"] + "\n" == BLOCK.split("\n", 1)[1].rsplit("# END", 1)[0]
    assert plan["marker"].replace("{mark}", "BEGIN") + "\n" == BLOCK.splitlines(keepends=True)[0]
    assert slurm_health_check.conflicts(CONF + BLOCK) == []


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
    plan = slurm_health_check.plan(CONF + line + "\n" + BLOCK, "n1", SETTINGS)
    [error] = plan["errors"]
    assert where in error and "LBNL NHC" in error
    assert slurm_health_check.conflicts(CONF + "# HealthCheckProgram=/usr/sbin/nhc\n") == []


def test_no_slurm_conf_and_removal():
    [error] = slurm_health_check.plan(None, "n2", SETTINGS)["errors"]
    assert error.startswith("n2 has no /etc/slurm/slurm.conf") and "slurm_health_check_conf" in error
    absent = dataclasses.replace(SETTINGS, state="absent", conf="/c")
    gone = slurm_health_check.plan(CONF + "HealthCheckProgram=/x\n", "n1", absent)
    assert gone == {
        "errors": [],
        "block": "",
        "state": "absent",
        "marker": slurm_health_check.MARKER,
        "install": [],
        "remove": ["/usr/local/sbin/wireup-slurm-health"],
    }
    with pytest.raises(ValueError, match="slurm_health_check_state='gone' is not present or absent"):
        slurm_health_check.plan(CONF, "n1", dataclasses.replace(SETTINGS, state="gone"))


def test_the_plan_reads_the_slurped_file_and_every_setting_by_name():
    slurp = {"content": base64.b64encode(CONF.encode()).decode(), "encoding": "base64"}
    assert slurm_health_check.conf_text(slurp) == CONF
    assert slurm_health_check.conf_text({"failed": True, "msg": "file not found"}) is None
    with pytest.raises(TypeError):
        slurm_health_check.Settings(conf="/c", state="present", program="/p", interval=1, node_sate="ANY")


# --- HealthCheckNodeState reaches slurm.conf: Slurm's grammar, matched whole (issue 35) -----------
@pytest.mark.parametrize(
    "value",
    ["\nANY", "ANY\n", "ANY,\nIDLE", " ANY", "ANY ", "ANY, IDLE", "ANY,", ",ANY", "ANY,,IDLE", "any",
     "ANY\nSlurmUser=root", "IDLE\u2028", "ANY\x00", ["ANY"], None, 1],
)  # fmt: skip
def test_a_node_state_outside_slurms_grammar_is_refused(value):
    [error] = preflight.host_errors({"slurm_health_check_node_state": value})
    assert error.startswith("slurm_health_check_node_state=") and "HealthCheckNodeState" in error
    assert "\n" not in error  # the value is shown quoted (repr), never as a line of its own
    plan = slurm_health_check.plan(CONF, "n1", dataclasses.replace(SETTINGS, node_state=value))
    assert plan["errors"] == [error], plan  # the plan refuses it too: no block with it is written


@pytest.mark.parametrize(
    "value",
    ["ANY", "ALLOC", "IDLE,CYCLE", "MIXED,IDLE", "NONDRAINED_IDLE", "START_ONLY", "ALLOC,MIXED,CYCLE"],
)
def test_a_node_state_in_slurms_grammar_is_written_as_it_is(value):
    assert preflight.host_errors({"slurm_health_check_node_state": value}) == []
    plan = slurm_health_check.plan(CONF, "n1", dataclasses.replace(SETTINGS, node_state=value))
    assert plan["errors"] == [] and plan["block"].splitlines()[2] == f"HealthCheckNodeState={value}"


@pytest.mark.parametrize("program", ["/usr/local/sbin/x\nSlurmUser=root", "relative", "/a b"])
def test_the_plan_refuses_a_program_slurm_conf_cannot_hold_as_one_word(program):
    plan = slurm_health_check.plan(CONF, "n1", dataclasses.replace(SETTINGS, program=program))
    assert len(plan["errors"]) == 1 and plan["errors"][0].startswith("slurm_health_check_program")
