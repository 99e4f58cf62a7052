"""Drift's torch and fabric manager fields (issue 37 item 5): torch's own version, CUDA and NCCL
read from pytorch_venv's local fact as the role really writes it (its ``to_nice_json`` of
``pytorch_venv.fact``: the testbed node's real fact, and one made from the 2x H200's torch), and
the fabric manager's package and state from dpkg-query's and systemctl's output
(tests/fixtures/fabricmanager), through wireup_node_facts' own readers, into the drift table and
launch.yml's refusal."""

import copy
import json
import pathlib

import pytest
import yaml
from ansible.plugins.filter.core import to_nice_json

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import drift
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import pytorch_venv
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import drift as probe_drift
from ansible_collections.wireup.cluster.plugins.modules import wireup_node_facts
from tests.unit.test_drift import H200, fleet, node_of_testbed

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
FM = FIXTURES / "fabricmanager"
TORCH_FIELDS = ("torch", "torch_cuda", "torch_nccl")
FM_FIELDS = ("fabric_manager", "fabric_manager_state")


def written(info) -> bytes:
    """The local fact file's bytes as roles/pytorch_venv's "Write the local fact wireup_torch"
    writes them: ``{{ info | to_nice_json(sort_keys=true) }}\\n``."""
    return (to_nice_json(info, sort_keys=True) + "\n").encode()


def fact_of_testbed() -> bytes:
    """The converged testbed node's real fact (the role's probe read it from the node)."""
    return written(json.loads((FIXTURES / "testbed" / "probe_converged_debian12.json").read_text())["fact"])


def h200_fact() -> bytes:
    """The fact pytorch_venv.fact makes from the 2x H200's torch (torch, CUDA, NCCL, GPUs)."""
    torch_v, cuda_v, nccl_v, count = (H200 / "torch_versions.txt").read_text().split()
    report = {"python": "3.12.3", "torch_version": torch_v, "cuda_version": cuda_v, "nccl_version": nccl_v,
              "cuda_available": True, "device_count": int(count),
              "torch_file": "/opt/wireup/venv/lib/python3.12/site-packages/torch/__init__.py"}  # fmt: skip
    info = pytorch_venv.fact(report, {"variant": "cu130"}, {}, "/opt/wireup/venv", "/usr/bin/python3")
    return written(info)


def fm_facts(dpkg_file, show_file=None):
    packages = apt.parse_dpkg_status((FM / dpkg_file).read_text())
    show = (FM / show_file).read_text() if show_file else None
    return probe_drift.fabric_manager(packages, show)


def with_parts(facts, torch=None, fabric=None):
    facts = copy.deepcopy(facts)
    facts["torch"] = probe_drift.torch_fact(torch)
    facts["fabric_manager"] = fabric if fabric is not None else probe_drift.fabric_manager({}, None)
    return facts


# ---------------------------------------------------------------- torch from the local fact
def test_the_testbed_nodes_real_fact_a_cpu_build_without_cuda_or_nccl():
    values = probe_drift.node_values(with_parts(node_of_testbed(), fact_of_testbed()))
    assert [values[f] for f in TORCH_FIELDS] == ["2.13.0+cpu", "none", "none"]


def test_the_h200s_torch_its_cuda_and_the_nccl_it_bundles():
    values = probe_drift.node_values(with_parts(node_of_testbed(), h200_fact()))
    assert [values[f] for f in TORCH_FIELDS] == ["2.11.0+cu130", "13.0", "2.28.9"]


def test_a_node_without_the_fact_has_no_torch_of_wireups_and_an_older_facts_torch_is_unknown():
    values = probe_drift.node_values(with_parts(node_of_testbed(), None))
    assert [values[f] for f in TORCH_FIELDS] == ["none", "none", "none"]
    older = probe_drift.node_values(node_of_testbed())  # gathered before these fields
    assert [older[f] for f in TORCH_FIELDS + FM_FIELDS] == ["unknown"] * 5


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe" + fact_of_testbed(),  # not UTF-8
        fact_of_testbed()[:-40],  # cut: not JSON
        b"",
        b"[" * 100_000 + b"]" * 100_000,  # nested past the parser's depth
        b'["2.13.0+cpu"]',  # JSON, not an object
        fact_of_testbed().replace(b'"nccl_version": ""', b'"nccl_version": "' + b"2" * 70_000 + b'"'),  # huge
    ],
    ids=["not-utf8", "cut", "empty", "deep", "list", "huge"],
)
def test_a_fact_that_is_not_the_roles_json_object_is_unknown(data):
    values = probe_drift.node_values(with_parts(node_of_testbed(), data))
    assert [values[f] for f in TORCH_FIELDS] == ["unknown"] * 3


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("torch_version", "2.13.0+cpu; reboot"),
        ("torch_version", "2.13.0+cpu\n"),
        ("torch_version", "9" * 200),
        ("cuda_version", 13.0),
        ("nccl_version", ["2", "28", "9"]),
        ("nccl_version", "2.28.9\u202e"),
    ],
)
def test_a_value_off_its_grammar_is_unknown_and_the_others_stay(key, value):
    info = json.loads(fact_of_testbed())
    info[key] = value
    values = probe_drift.node_values(with_parts(node_of_testbed(), written(info)))
    field = {"torch_version": "torch", "cuda_version": "torch_cuda", "nccl_version": "torch_nccl"}[key]
    assert values[field] == "unknown"
    assert [values[f] for f in TORCH_FIELDS if f != field] == [
        v for f, v in zip(TORCH_FIELDS, ["2.13.0+cpu", "none", "none"], strict=True) if f != field
    ]


@pytest.mark.parametrize(
    "version",
    ["2.6.0a0+ecf3bae40a.nv25.01", "2.13.0", "2.11.0+cu130", "2.10.0.dev20260101+cu128", "2.5.1rc1"],
)
def test_torch_versions_of_pep_440_releases_nightlies_and_ngc_builds_are_kept(version):
    assert probe_drift.checked("torch", version) == version


def test_the_module_reads_the_file_at_most_its_cap_and_says_absent_apart(tmp_path):
    assert wireup_node_facts.read_torch_fact(str(tmp_path)) is None
    path = tmp_path / probe_drift.TORCH_FACT_NAME
    path.write_bytes(fact_of_testbed())
    assert probe_drift.torch_fact(wireup_node_facts.read_torch_fact(str(tmp_path)))["version"] == "2.13.0+cpu"
    path.write_bytes(b" " * (10 * probe_drift.TORCH_FACT_MAX) + fact_of_testbed())
    data = wireup_node_facts.read_torch_fact(str(tmp_path))
    assert len(data) == probe_drift.TORCH_FACT_MAX + 1
    assert probe_drift.torch_fact(data) == dict.fromkeys(("version", "cuda", "nccl"))
    path.unlink()
    path.mkdir()  # there but not readable as a file: unknown, not "no torch"
    assert probe_drift.torch_fact(wireup_node_facts.read_torch_fact(str(tmp_path)))["version"] is None


def test_preflight_reads_the_fact_where_pytorch_venv_writes_it():
    defaults = yaml.safe_load((ROOT / "roles" / "pytorch_venv" / "defaults" / "main.yml").read_text())
    assert defaults["pytorch_venv_fact_dir"] == probe_drift.TORCH_FACT_DIR
    assert pytorch_venv.FACT_NAME == probe_drift.TORCH_FACT_NAME
    [task] = [
        t
        for t in yaml.safe_load((ROOT / "roles" / "preflight" / "tasks" / "main.yml").read_text())
        if "wireup.cluster.wireup_node_facts" in t
    ]
    assert "pytorch_venv_fact_dir" in task["wireup.cluster.wireup_node_facts"]["torch_fact_dir"]


# ---------------------------------------------------------------- the fabric manager
def test_nvidias_550_fabric_manager_failed():
    fabric = fm_facts("dpkg_query_nccl_fm550.txt", "systemctl_show_activestate_failed.txt")
    assert fabric["package"] == "nvidia-fabricmanager-550"  # not its -dev package
    values = probe_drift.node_values(with_parts(node_of_testbed(), None, fabric))
    assert [values[f] for f in FM_FIELDS] == ["550.90.07", "failed"]


def test_ubuntus_580_fabric_manager_active():
    fabric = fm_facts("dpkg_query_nccl_fm580.txt", "systemctl_show_activestate_active.txt")
    values = probe_drift.node_values(with_parts(node_of_testbed(), None, fabric))
    assert [values[f] for f in FM_FIELDS] == ["580.159.03", "active"]


def test_a_node_without_the_fabric_manager_is_none_and_systemctl_is_not_asked():
    probe = json.loads((FIXTURES / "testbed" / "probe_fresh_debian12.json").read_text())
    packages = apt.parse_dpkg_status(probe["dpkg"])
    assert not probe_drift.fabric_manager_installed(packages)
    fabric = probe_drift.fabric_manager(packages, None)
    values = probe_drift.node_values(with_parts(node_of_testbed(), None, fabric))
    assert [values[f] for f in FM_FIELDS] == ["none", "none"]


def test_the_nccl_packages_stay_apart_from_the_fabric_managers():
    packages = apt.parse_dpkg_status((FM / "dpkg_query_nccl_fm550.txt").read_text())
    assert set(probe_drift.nccl_packages(packages)) == {"libnccl2"}
    assert "nvidia-fabricmanager*" in apt.dpkg_query_argv(*probe_drift.DPKG_PATTERNS)


FM_550 = "nvidia-fabricmanager-550 ii  550.90.07-1\n"
FM_HOSTILE = "nvidia-fabricmanager-550 ii  550.90.07$(reboot)-1\n"


@pytest.mark.parametrize(
    ("dpkg", "show", "field"),
    [
        (FM_HOSTILE, "ActiveState=active\n", "fabric_manager"),
        (FM_550, "ActiveState=active; reboot\n", "fabric_manager_state"),
        (FM_550, None, "fabric_manager_state"),  # no systemctl, or it failed
        (FM_550, "LoadState=loaded\n", "fabric_manager_state"),
        (FM_550, "ActiveState=" + "a" * 5000, "fabric_manager_state"),
    ],
)
def test_a_fabric_manager_value_off_its_grammar_or_unread_is_unknown(dpkg, show, field):
    fabric = probe_drift.fabric_manager(apt.parse_dpkg_status(dpkg), show)
    values = probe_drift.node_values(with_parts(node_of_testbed(), None, fabric))
    assert values[field] == "unknown"


# ---------------------------------------------------------------- across the fleet
def h200_fleet(n=3):
    fabric = fm_facts("dpkg_query_nccl_fm580.txt", "systemctl_show_activestate_active.txt")
    return {host: with_parts(facts, h200_fact(), fabric) for host, facts in fleet(n).items()}


def test_a_node_whose_torch_bundles_another_nccl_is_refused_by_launch():
    facts = h200_fleet()
    other = json.loads(h200_fact())
    other["nccl_version"] = "2.27.3"
    facts["gpu-a02"]["torch"] = probe_drift.torch_fact(written(other))
    [message] = drift.launch_refusals(facts)
    assert message.startswith(
        "the nodes differ in torch_nccl (2.28.9 on gpu-a01, gpu-a03; 2.27.3 on gpu-a02)"
    )
    assert drift.launch_refusals(facts, "torch_nccl") == []
    [field] = drift.differing(drift.table_of_facts(facts))
    assert field["field"] == "torch_nccl"


def test_a_failed_fabric_manager_or_another_torch_is_a_warning_never_a_refusal():
    facts = h200_fleet()
    failed = fm_facts("dpkg_query_nccl_fm550.txt", "systemctl_show_activestate_failed.txt")
    facts["gpu-a03"]["fabric_manager"] = failed
    other = json.loads(h200_fact())
    other["torch_version"] = "2.11.1+cu130"
    facts["gpu-a01"]["torch"] = probe_drift.torch_fact(written(other))
    assert drift.launch_refusals(facts) == []
    table = drift.table_of_facts(facts)
    assert {f["field"] for f in drift.differing(table)} == {"torch", "fabric_manager", "fabric_manager_state"}
    codes = {f["code"] for f in drift.findings(drift.host_part(table, "gpu-a03"))}
    assert codes == {"drift_fabric_manager", "drift_fabric_manager_state"}
