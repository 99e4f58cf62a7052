"""Preflight's input validation: every message names the variable and the fix."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import bench_settings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight

GOOD_PINS = {
    "nvidia_driver_branch": "580",
    "cuda_repo_version": "13.0",
    "nccl_version": "2.28.9",
    "nccl_package_version": "2.28.9-1+cuda13.0",
    "nccl_tests_version": "v2.19.6",
    "pytorch_venv_torch_version": "2.13.0",
}


def test_good_pins():
    assert preflight.validate_pins(GOOD_PINS) == []


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("nvidia_driver_branch", 580, "is a number, not a string: quote it"),
        ("nvidia_driver_branch", "580.1", 'expected a value like "580"'),
        ("cuda_repo_version", 13.1, "quote it in YAML"),
        ("cuda_repo_version", "13", "cuda_repo_version='13' is malformed"),
        ("nccl_version", "2.28", "nccl_version='2.28' is malformed"),
        ("nccl_package_version", "2.28.9", 'expected a value like "2.28.9-1+cuda13.0"'),
        ("nccl_tests_version", "2.19.6", 'expected a value like "v2.19.6"'),
        ("pytorch_venv_torch_version", "latest", "pytorch_venv_torch_version='latest' is malformed"),
    ],
)
def test_malformed_pin(name, value, message):
    errors = preflight.validate_pins(dict(GOOD_PINS, **{name: value}))
    assert len(errors) == 1
    assert errors[0].startswith(name)
    assert message in errors[0]


def test_pins_must_agree():
    errors = preflight.validate_pins(dict(GOOD_PINS, nccl_version="2.27.3"))
    assert errors == [
        "nccl_package_version='2.28.9-1+cuda13.0' does not match nccl_version='2.27.3': set both to the "
        "same NCCL release"
    ]
    errors = preflight.validate_pins(dict(GOOD_PINS, cuda_repo_version="12.9"))
    assert errors == [
        "nccl_package_version='2.28.9-1+cuda13.0' is built for another CUDA than cuda_repo_version='12.9': "
        "use the '+cuda12.9' build of libnccl2"
    ]


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("2.19.14", ">=2.19.0,<2.20.0", True),
        ("2.20.0", ">=2.19.0,<2.20.0", False),
        ("2.18.9", ">=2.19.0,<2.20.0", False),
        ("2.19", ">=2.19.0", True),
        ("2.11.0+cu130", ">=2.11", True),
        ("2.10.1", "!=2.10.1", False),
        # PEP 440 through packaging.specifiers: compatible release and wildcards, which the
        # hand-written parser refused; a release candidate counts as its release.
        ("2.19.1", "~=2.19", True),
        ("2.20.0", "~=2.19.0", False),
        ("2.19.3", "==2.19.*", True),
        ("2.19.0rc1", ">=2.19.0,<2.20.0", True),
        ("2.20.0.dev0", "<2.20", False),
    ],
)
def test_version_range(version, spec, ok):
    assert checks.check_version_range(version, spec) is ok


@pytest.mark.parametrize(("version", "spec"), [("2.19.1", "=>2.19"), ("2.19.1", ">=2.19;<3"), ("two", ">=2")])
def test_version_range_rejects_what_does_not_parse(version, spec):
    with pytest.raises(ValueError, match="bad version range"):
        checks.check_version_range(version, spec)


@pytest.mark.parametrize(
    ("value", "errors"),
    [("auto", 0), (2, 0), ("8", 0), (0, 1), ("two", 1), (True, 1), (-1, 1), (None, 1)],
)
def test_nproc(value, errors):
    found = checks.validate_nproc(value)
    assert len(found) == errors
    assert all("wireup_nproc_per_node" in e for e in found)


GROUPS = {"all": ["a", "b", "c"], "gpu_nodes": ["b", "a", "c"], "ungrouped": []}


def test_cluster_ok():
    addresses = {"a": "10.1.0.1", "b": "10.1.0.2", "c": "10.1.0.3"}
    assert preflight.validate_cluster(GROUPS, "gpu_nodes", "", addresses) == []
    assert preflight.validate_cluster(GROUPS, "gpu_nodes", "b", addresses) == []


def test_missing_and_empty_group():
    [error] = preflight.validate_cluster(GROUPS, "trainers", "")
    assert "group 'trainers' (wireup_node_group) does not exist" in error
    assert "-e wireup_node_group=" in error
    [error] = preflight.validate_cluster(dict(GROUPS, trainers=[]), "trainers", "")
    assert "has no hosts" in error


def test_master_not_in_group():
    [error] = preflight.validate_cluster(GROUPS, "gpu_nodes", "z")
    assert error == (
        "wireup_master_host='z' is not a host of group 'gpu_nodes': name one of a, b, c, or leave it "
        "empty for the first"
    )


def test_duplicate_missing_loopback_and_bad_addresses():
    errors = preflight.validate_cluster(GROUPS, "gpu_nodes", "", {"a": "10.1.0.1", "b": "10.1.0.1", "c": ""})
    assert errors == [
        "hosts a and b share the address 10.1.0.1: every node needs its own (check ansible_host / "
        "wireup_address)",
        "host c has no address for the cluster network: set wireup_address for it in host_vars, or give "
        "it a default route",
    ]
    errors = preflight.validate_cluster(GROUPS, "gpu_nodes", "", {"a": "127.0.0.1", "b": "not-an-ip"})
    assert "a loopback address other nodes cannot reach" in errors[0]
    assert errors[1] == "host b: wireup_address='not-an-ip' is not an IP address"


def test_single_node_needs_no_reachable_address():
    assert preflight.validate_cluster({"gpu_nodes": ["localhost"]}, "gpu_nodes", "", {"localhost": ""}) == []


def test_master_of():
    assert checks.master_of(["n3", "n1", "n2"], "") == "n1"
    assert checks.master_of(["n3", "n1", "n2"], "n2") == "n2"
    assert checks.master_of([], "") == ""


# Issue 12, item 3: wireup_master_port was checked only by the launch plan, after every benchmark.
@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (99999, "wireup_master_port=99999 must be a TCP port from 1024 to 65535"),
        ("99999", "wireup_master_port='99999' must be a TCP port from 1024 to 65535"),
        (80, "wireup_master_port=80 must be a TCP port from 1024 to 65535"),
        ("abc", "wireup_master_port='abc' is not a port number"),
        (True, "wireup_master_port=True is not a port number"),
        (29500.5, "wireup_master_port=29500.5 is not a port number"),
        ("", "wireup_master_port='' is not a port number"),
    ],
)
def test_bad_master_port(value, fragment):
    [error] = preflight.validate_settings({"wireup_master_port": value})
    assert fragment in error
    assert "e.g. wireup_master_port: 29500" in error


@pytest.mark.parametrize("value", [29500, "29500", 1024, 65535])
def test_good_master_port(value):
    assert preflight.validate_settings({"wireup_master_port": value}) == []


def test_relative_base_dirs_are_refused():
    errors = preflight.validate_settings(
        {"wireup_base_dir": "opt/wireup", "wireup_venv_path": "", "wireup_master_port": 29500}
    )
    assert errors == [
        "wireup_base_dir='opt/wireup' must be an absolute path (starting with /) without whitespace, "
        "quotes or control characters, e.g. wireup_base_dir: /opt/wireup",
        "wireup_venv_path='' must be an absolute path (starting with /) without whitespace, "
        "quotes or control characters, e.g. wireup_venv_path: /opt/wireup/venv",
    ]
    # written into comment and #SBATCH lines: a newline would start a line of code
    assert preflight.validate_settings({"wireup_base_dir": "/opt/w\ntouch /tmp/x"})
    assert preflight.validate_settings({"wireup_base_dir": "/opt/wireup", "wireup_venv_path": "/opt/v"}) == []


@pytest.mark.parametrize("value", [1, "3", "25%", "100%"])
def test_good_driver_batch(value):
    assert preflight.validate_settings({"nvidia_driver_serial": value}) == []


@pytest.mark.parametrize("value", [0, "0%", "150%", "abc", "-1", True, 2.5, ""])
def test_bad_driver_batch(value):
    [error] = preflight.validate_settings({"nvidia_driver_serial": value})
    assert error.startswith(f"nvidia_driver_serial={value!r} is not a batch size")


def test_empty_group_names_the_variable_and_the_fix():
    [error] = preflight.validate_cluster({"gpu_nodes": [], "all": ["a"]}, "gpu_nodes", "")
    assert error == (
        "inventory group 'gpu_nodes' (wireup_node_group) has no hosts: add the cluster's nodes under "
        "it, or run with -e wireup_node_group=<the group that holds them>"
    )


@pytest.mark.parametrize("key", ["NCCL_DEBUG", "_X", "a1_b"])
def test_shell_names_accepted(key):
    assert checks.is_shell_name(key)
    assert checks.shell_name_errors("bench_env", {key: "1"}) == []


@pytest.mark.parametrize("key", ["1A", "NCCL-DEBUG", "A B", "", "X=1", 5, None])
def test_shell_names_refused_name_the_variable(key):
    assert not checks.is_shell_name(key)
    (error,) = checks.shell_name_errors("bench_env", {key: "1"})
    assert error.startswith("bench_env: ") and "not a valid shell variable name" in error


def test_shell_name_errors_values_and_mapping():
    assert checks.shell_name_errors("wireup_job_env", None) == []
    assert checks.shell_name_errors("wireup_job_env", ["A=1"]) == [
        "wireup_job_env must be a mapping of VARIABLE: value, not list"
    ]
    assert checks.shell_name_errors("wireup_job_env", {"A": [1], "B": None, "C": 2}) == [
        "wireup_job_env: A must be a string or number, not list",
        "wireup_job_env: B must be a string or number, not NoneType",
    ]


GOOD = {
    "wireup_master_port": 29500,
    "wireup_base_dir": "/opt/wireup",
    "wireup_venv_path": "/opt/wireup/venv",
    "wireup_nproc_per_node": "auto",
    "wireup_job_env": {"NCCL_DEBUG": "WARN"},
    "nccl_version": "2.28.9",
    "bench_pass_ratio": 0.9,
    "bench_warn_ratio": 0.75,
}
TWO_NODES = {"all": ["n1", "n2"], "gpu_nodes": ["n1", "n2"]}


def test_inventory_errors_all_at_once_shared_ones_once():
    bad = dict(GOOD, wireup_master_port=99999, bench_warn_ratio="0.95", bench_max_bytes="8GB")
    errors = preflight.inventory_errors(
        {"n1": bad, "n2": dict(bad, nccl_version=2.28)}, TWO_NODES, "gpu_nodes", "n9"
    )
    assert errors[0].startswith("wireup_master_host='n9' is not a host of group 'gpu_nodes'")
    assert (
        "wireup_master_port=99999 must be a TCP port from 1024 to 65535, e.g. wireup_master_port: 29500"
        in errors
    )
    assert (
        "bench_warn_ratio (0.95) must not exceed bench_pass_ratio (0.9): lower bench_warn_ratio or "
        "raise bench_pass_ratio" in errors
    )
    assert any(e.startswith("bench_max_bytes='8GB' is not a size") for e in errors)
    # Only n2 has the number: its error names it.
    assert any(e.startswith("n2: nccl_version=2.28 is a number") for e in errors), errors
    assert preflight.inventory_errors({"n1": GOOD, "n2": GOOD}, TWO_NODES, "gpu_nodes") == []


def test_inventory_errors_env_names_and_ansible_core():
    bad = dict(
        GOOD,
        wireup_job_env={"NCCL-DEBUG": "1"},
        bench_env={"1X": "1"},
        bench_fabric_env={"NCCL ALGO": "Ring"},
    )
    errors = preflight.inventory_errors(
        {"n1": bad}, {"gpu_nodes": ["n1"]}, "gpu_nodes", "", ("2.18.1", ">=2.19.0,<2.20.0")
    )
    assert errors == [
        "wireup_job_env: 'NCCL-DEBUG' is not a valid shell variable name (letters, digits, '_')",
        "bench_env: '1X' is not a valid shell variable name (letters, digits, '_')",
        "bench_fabric_env: 'NCCL ALGO' is not a valid shell variable name (letters, digits, '_')",
        "ansible-core 2.18.1 is outside wireup_ansible_core_range (>=2.19.0,<2.20.0): run wireup from its "
        "venv (make venv; .venv/bin/ansible-playbook)",
    ]


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("bench_baseline_tolerance", 1.5, "must be a fraction from 0 to below 1"),
        ("bench_step_factor", 0, "must be a whole number of at least 1"),
        ("bench_pass_ratio", "high", "bench_pass_ratio='high' is not a number"),
        ("bench_torch_goal_ratio", 0, "must be above 0"),
        ("bench_nccl_tune_min_gain", -0.1, "must be a fraction from 0 to below 1"),
        ("bench_stepcost_params", ["500M", "big"], "must be a list of parameter counts like 2M"),
        ("bench_stepcost_cpu_params", [], "must be a list of parameter counts like 2M"),
        ("bench_stepcost_hooks", [], "must name at least one hook"),
    ],
)
def test_bench_errors_name_the_variable(name, value, fragment):
    (error,) = bench_settings.bench_errors({name: value})
    assert error.startswith(name) and fragment in error


def test_bench_errors_accept_the_stepcost_defaults():
    assert (
        bench_settings.bench_errors(
            {"bench_stepcost_params": ["500M", "1.5G"], "bench_stepcost_cpu_params": ["1M"]}
        )
        == []
    )


def test_bench_errors_pass_over_the_roles_template_defaults():
    assert bench_settings.bench_errors({"bench_torch_max_bytes": "{{ bench_max_bytes }}"}) == []


def _validate_filter():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "plugins/filter/wireup_validate.py"
    spec = importlib.util.spec_from_file_location("wireup_validate_filter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_one_check_reads_every_host_and_each_roles_argument_specs():
    """The filter preflight's controller play calls: the roles' own files, each host's variables."""
    import pathlib

    roles = pathlib.Path(__file__).resolve().parents[2] / "roles"
    plugin = _validate_filter()
    hostvars = {
        "n1": dict(GOOD, nvidia_driver_flavor="closed", ansible_host="10.0.0.1", testbed_name="x"),
        "n2": dict(GOOD, bench_warn_ratio=0.95),
    }
    errors = plugin.wireup_inventory_errors(
        ["n1", "n2"],
        hostvars,
        {"gpu_nodes": ["n1", "n2"]},
        "gpu_nodes",
        "",
        roles_dir=str(roles),
        roles=["nvidia_driver", "bench", "no_such_role"],
        ansible_core=["2.19.4", ">=2.19.0,<2.20.0"],
    )
    assert errors == [
        "n2: bench_warn_ratio (0.95) must not exceed bench_pass_ratio (0.9): lower bench_warn_ratio or "
        "raise bench_pass_ratio",
        "n1: nvidia_driver role: value of nvidia_driver_flavor must be one of: open, proprietary, got: "
        "closed",
    ]
    # The roles' defaults fill what the inventory leaves out (bench_pass_ratio 0.9 for n1 and n2).
    good = plugin.wireup_inventory_errors(
        ["n1"], {"n1": dict(GOOD, bench_warn_ratio=0.85)}, {"gpu_nodes": ["n1"]}, "gpu_nodes",
        roles_dir=str(roles), roles=["bench"],
    )  # fmt: skip
    assert good == []


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("GITHUB_PAT", "must be a list of variable names (e.g. [GITHUB_PAT]), not str"),
        ({"GITHUB_PAT": 1}, "must be a list of variable names"),
        (["GITHUB_PAT", "1PAT"], "'1PAT' is not a shell variable name"),
        (["PAT\n"], "'PAT\\n' is not a shell variable name"),  # matched whole, not up to a newline
        (["MY-PAT"], "'MY-PAT' is not a shell variable name"),
        ([7], "7 is not a shell variable name"),
    ],
)
def test_secret_env_must_be_shell_names(value, needle):
    [error] = preflight.host_errors({"wireup_secret_env": value})
    assert error.startswith("wireup_secret_env") and needle in error


def test_secret_env_good():
    assert preflight.host_errors({"wireup_secret_env": []}) == []
    assert preflight.host_errors({"wireup_secret_env": ["GITHUB_PAT", "_X1"]}) == []


# ---------------------------------------------------------------- names wireup does not know (issue 38)
# The documented names as preflight reads them: every role's argument_specs, through the filter.
ROLES_DIR = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "roles")
ROLE_NAMES = sorted(p.name for p in __import__("pathlib").Path(ROLES_DIR).iterdir() if p.is_dir())


def _documented():
    return _validate_filter().documented_variables(ROLES_DIR)


def test_the_done_when_typo_stops_naming_the_documented_name():
    """`-e torchrun_lauch_action=stop`: the typo is in the prefix itself (torchrun_lauch_ is no
    role's), yet the name is one letter from torchrun_launch_action."""
    problems = preflight.unknown_variables(["torchrun_lauch_action"], _documented(), ROLE_NAMES)
    message = problems["torchrun_lauch_action"]
    assert message.startswith(
        "torchrun_lauch_action is not a wireup variable: did you mean torchrun_launch_action?"
    )
    assert "preflight_foreign_variables" in message


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("torchrun_launch_actoin", "torchrun_launch_action"),  # in the role's prefix: refused whatever it is
        ("torchrun_lauch_action", "torchrun_launch_action"),  # in the prefix: one letter out
        ("torchrn_launch_action", "torchrun_launch_action"),  # in the first word
        ("torchrunlaunch_action", "torchrun_launch_action"),  # the separator lost
        ("wirup_master_port", "wireup_master_port"),
        ("wireup_master_prot", "wireup_master_port"),
        ("bench_fabirc", "bench_fabric"),
        ("nccl_test_version", "nccl_tests_version"),
        ("nvidia_drivr_branch", "nvidia_driver_branch"),
        ("nvidia_driver_brnch", "nvidia_driver_branch"),
        ("cuda_rep_version", "cuda_repo_version"),
        ("gpu_trail_fingerprint", "gpu_trial_fingerprint"),
        ("gpu_topolgy_expected_gpus", "gpu_topology_expected_gpus"),
        ("pytorch_venv_torch_verison", "pytorch_venv_torch_version"),
        ("pytroch_venv_torch_version", "pytorch_venv_torch_version"),
        ("node_chek_timeout", "node_check_timeout"),
        ("slurm_healthcheck_interval", "slurm_health_check_interval"),
        ("preflght_min_free_mb", "preflight_min_free_mb"),
        ("bench_pass_ration", "bench_pass_ratio"),
    ],
)
def test_a_typo_is_refused_naming_the_nearest_documented_name(typo, meant):
    problems = preflight.unknown_variables([typo], _documented(), ROLE_NAMES)
    assert list(problems) == [typo]
    assert f"did you mean {meant}?" in problems[typo], problems[typo]


def test_a_prefixed_name_with_nothing_close_points_at_the_role_readme():
    problems = preflight.unknown_variables(
        ["torchrun_launch_xyzzy_plugh", "wireup_qqqqqqqqqqqq"], _documented(), ROLE_NAMES
    )
    assert "roles/torchrun_launch/README.md lists them" in problems["torchrun_launch_xyzzy_plugh"]
    assert "group_vars/all.yml" in problems["wireup_qqqqqqqqqqqq"]


@pytest.mark.parametrize(
    "name",
    [
        "ansible_host",
        "ansible_python_interpreter",
        "inventory_hostname",
        "group_names",
        "foo",
        "slurm_partition",  # another Slurm role's (wireup's prefix there is slurm_health_check_)
        "slurm_user",
        "node_exporter_version",  # prometheus roles'
        "node_exporter_textfile_dir",
        "gpu_operator_version",
        "cuda_version",
        "nvidia_container_toolkit_version",
        "pytorch_version",
        "testbed_name",  # the local testbed's inventory
        "__bench_result",  # a register: not a user variable
        "__preflight_errors",
    ],
)
def test_other_tools_variables_pass(name):
    assert preflight.unknown_variables([name], _documented(), ROLE_NAMES) == {}


def test_facts_wireup_sets_are_not_refused():
    names = [*preflight.FACTS]
    assert preflight.unknown_variables(names, _documented(), ROLE_NAMES) == {}


def test_names_from_before_the_prefixes_settled_are_unknown_names_like_any_other():
    """No list of renamed variables (issue 36: none of those names ever shipped): a name from
    before a role's prefix settled is refused by the one names check, with its near miss."""
    found = preflight.unknown_variables(
        ["cuda_repo_toolkit_on_gpu_less_node", "bench_dcgm_diag"], _documented(), ROLE_NAMES
    )
    assert "did you mean cuda_repo_toolkit_on_gpu_less_nodes?" in found["cuda_repo_toolkit_on_gpu_less_node"]
    assert "bench_dcgm_diag is not a wireup variable" in found["bench_dcgm_diag"]


def test_the_prefixes_are_every_role_and_wireup():
    prefixes = preflight.variable_prefixes(ROLE_NAMES)
    assert set(prefixes) == {f"{role}_" for role in ROLE_NAMES} | {"wireup_"}
    # Longest first: a name is owned by its most specific role (nccl_tests_, not nccl_).
    assert prefixes.index("nccl_tests_") < prefixes.index("nccl_")


# Hypothesis draws from the real documented names (read once, at collection).
DOCUMENTED = sorted(_validate_filter().documented_variables(ROLES_DIR))
KNOWN = frozenset(DOCUMENTED) | preflight.FACTS
_LETTERS = "abcdefghijklmnopqrstuvwxyz_0123456789"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(DOCUMENTED), min_size=1, max_size=40, unique=True))
def test_no_documented_name_is_ever_refused(names):
    assert preflight.unknown_variables(names, DOCUMENTED, ROLE_NAMES) == {}


def _one_edit(name, kind, at, letter):
    at %= len(name) + (kind == "insert")
    if kind == "insert":
        return name[:at] + letter + name[at:]
    if kind == "delete":
        return name[:at] + name[at + 1 :]
    if kind == "substitute":
        return name[:at] + letter + name[at + 1 :]
    return name[:at] + name[at + 1 : at + 2] + name[at : at + 1] + name[at + 2 :]  # transpose


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(DOCUMENTED),
    st.sampled_from(["insert", "delete", "substitute", "transpose"]),
    st.integers(min_value=0, max_value=60),
    st.sampled_from(_LETTERS),
)
def test_one_slip_of_a_documented_name_is_refused_naming_a_documented_one(name, kind, at, letter):
    typo = _one_edit(name, kind, at, letter)
    assume(typo not in KNOWN and not typo.startswith(("__", "ansible_")))
    problems = preflight.unknown_variables([typo], DOCUMENTED, ROLE_NAMES)
    assert list(problems) == [typo]
    meant = problems[typo].split("did you mean ", 1)[1].split("?", 1)[0]
    assert meant in DOCUMENTED


def _filter_errors(hostvars, **kwargs):
    """preflight's controller check as its task calls it, on {host: variables}."""
    hosts = sorted(hostvars)
    kwargs.setdefault("roles", ["bench"])
    return _validate_filter().wireup_inventory_errors(
        hosts, hostvars, {"gpu_nodes": hosts}, "gpu_nodes", "", roles_dir=ROLES_DIR, **kwargs
    )


def test_preflight_refuses_an_unknown_wireup_name_from_any_host_once():
    """An -e typo reaches every host (one error, no host list); an inventory one names its host."""
    every = {"torchrun_lauch_action": "stop", "ansible_host": "10.0.0.1", "slurm_partition": "gpu"}
    errors = _filter_errors({"n1": dict(GOOD, **every), "n2": dict(GOOD, **every, bench_fabirc=True)})
    assert len(errors) == 2, errors
    assert errors[0].startswith(
        "torchrun_lauch_action is not a wireup variable: did you mean torchrun_launch_action?"
    )
    assert errors[1].startswith("n2: bench_fabirc is not a wireup variable: did you mean bench_fabric?")


def test_preflight_foreign_variables_lets_another_tools_name_through():
    """nvidia.nvidia_driver's own variables share wireup's nvidia_driver_ prefix."""
    other = {"nvidia_driver_skip_reboot": True, "nvidia_driver_package_state": "present"}
    assert len(_filter_errors({"n1": dict(GOOD, **other)})) == 2
    allowed = dict(GOOD, **other, preflight_foreign_variables=sorted(other))
    assert _filter_errors({"n1": allowed}) == []
    # The play's own value (the role default, or -e) counts when a host sets none.
    assert _filter_errors({"n1": dict(GOOD, **other)}, foreign_variables=sorted(other)) == []


def test_preflight_foreign_variables_must_be_a_list_of_names():
    [error] = _filter_errors({"n1": dict(GOOD, preflight_foreign_variables="nvidia_driver_skip_reboot")})
    assert error.startswith("preflight_foreign_variables must be a list of variable names")


def _inventory_check(source, **kwargs):
    """preflight's check on what Ansible itself makes of an inventory (its hostvars, with the
    repository's group_vars/all.yml as beside the entry playbooks)."""
    import pathlib

    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    loader.set_basedir(str(pathlib.Path(ROLES_DIR).parent))
    inventory = InventoryManager(loader=loader, sources=[str(source)])
    manager = VariableManager(loader=loader, inventory=inventory)
    hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    hosts = [h.name for h in inventory.get_hosts("gpu_nodes")]
    assert hosts, source
    kwargs.setdefault("roles", ["bench", "nccl", "pytorch_venv"])
    return _validate_filter().wireup_inventory_errors(
        hosts, hostvars, inventory.get_groups_dict(), "gpu_nodes", "", roles_dir=ROLES_DIR,
        inventory_sources=[str(source)], **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("source", ["inventory/example", "inventory/local.yml", "tests/gpu/inventory.yml"])
def test_the_repositorys_inventories_pass(source):
    import pathlib

    assert _inventory_check(pathlib.Path(ROLES_DIR).parent / source) == []


def test_the_testbed_inventory_passes(tmp_path):
    """The inventory `python -m tests.testbed up` writes (its own writer, on a made-up state)."""
    from tests.testbed.testbed import Testbed

    testbed = Testbed.__new__(Testbed)
    testbed.name, testbed.dir = "unit", tmp_path
    testbed.state = {
        "bridge_ip": "10.213.9.1",
        "port": 8080,
        "nodes": {"node1": {"index": 0, "address": "10.213.9.11"}},
        "cuda_repo": {
            "base_url_path": "cuda/",
            "key_name": "k.pub",
            "fingerprint": "AB" * 20,
            "key_sha256": "0" * 64,
        },
    }
    testbed._write_inventory()
    assert "testbed_name" in testbed.inventory.read_text()
    assert _inventory_check(testbed.inventory) == []
    # The same inventory with a slip in one of wireup's names is refused (the check does read it).
    text = testbed.inventory.read_text().replace("pytorch_venv_wheelhouse_url", "pytorch_venv_wheelhose_url")
    testbed.inventory.write_text(text)
    [error] = _inventory_check(testbed.inventory)
    assert "did you mean pytorch_venv_wheelhouse_url?" in error


def test_a_missing_inventory_says_it_is_missing(tmp_path):
    """ansible-playbook -i inventory/nope: Ansible goes on with the implicit localhost alone."""
    there = tmp_path / "hosts.yml"
    there.write_text("all: {}\n")
    missing = str(tmp_path / "nope")
    [error] = preflight.inventory_source_errors([str(there), missing, "node1,node2,"])
    assert error.startswith(f"the inventory {missing} does not exist")
    assert "-i" in error and "inventory/example" in error
    assert preflight.inventory_source_errors([str(there), "node1,", str(tmp_path)]) == []


def test_preflight_says_the_inventory_is_missing_before_the_missing_group(tmp_path):
    missing = str(tmp_path / "nope")
    errors = _validate_filter().wireup_inventory_errors(
        [], {}, {"all": [], "ungrouped": []}, "gpu_nodes", "", roles_dir=ROLES_DIR, roles=[],
        inventory_sources=[missing],
    )  # fmt: skip
    assert errors == preflight.inventory_source_errors([missing])


def _names_set_by_wireup():
    """Every variable name wireup's own tasks, playbooks and modules set: set_fact keys, registers
    and the modules' ansible_facts."""
    import pathlib
    import re

    import yaml

    repo = pathlib.Path(ROLES_DIR).parent
    names = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
                    names.update(value)
                elif key == "register":
                    names.add(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in [
        *repo.glob("roles/*/tasks/*.yml"),
        *repo.glob("roles/*/handlers/*.yml"),
        *repo.glob("playbooks/*.yml"),
    ]:
        walk(yaml.safe_load(path.read_text()))
    for path in repo.glob("plugins/modules/*.py"):
        for facts in re.findall(r"ansible_facts=\{([^}]*)\}", path.read_text()):
            names.update(re.findall(r'"([a-z_]+)":', facts))
    return names


def test_facts_keeps_step_with_what_wireup_sets():
    """A fact a role starts to set under its prefix is either documented or in preflight.FACTS, so a
    fact cache that brings it back never stops preflight; FACTS names nothing that is gone."""
    prefixes = preflight.variable_prefixes(ROLE_NAMES)
    set_by_wireup = {n for n in _names_set_by_wireup() if not n.startswith("__")}
    undeclared = sorted(n for n in set_by_wireup if n.startswith(prefixes) and n not in KNOWN)
    assert undeclared == []
    assert sorted(preflight.FACTS - set_by_wireup) == []


def test_ansible_playbook_on_a_missing_inventory_says_so():
    """The user's command itself: before, Ansible warned, went on with the implicit localhost and
    preflight said "inventory group 'gpu_nodes' (wireup_node_group) does not exist"."""
    import os
    import pathlib
    import subprocess
    import sys

    repo = pathlib.Path(ROLES_DIR).parent
    result = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory/nope", "site.yml"],
        cwd=repo,
        env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode != 0
    assert f"the inventory {repo}/inventory/nope does not exist" in result.stdout, result.stdout[-2000:]
    assert "group 'gpu_nodes'" not in result.stdout
