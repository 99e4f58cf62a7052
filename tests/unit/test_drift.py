"""Drift across the fleet (issue 37 item 5): probe/drift.py's values of preflight's real
wireup_node (the testbed node's capture, and a 2x H200 node's made by wireup_node_facts' own
parsers from its captures), capability/drift.py's table, findings, refusals and report part, fed
the producers' output, and the capability's record part through the real host_record."""

import copy
import json
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.wireup.cluster.plugins.filter import wireup_drift
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import drift, registry
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import shape
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_report
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import drift as probe_drift
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import node
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record
from tests.unit.test_report import good_node

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTBED = ROOT / "fixtures" / "testbed" / "wireup_node_debian12.json"
H200 = ROOT.parent.parent / "shared" / "fixtures" / "h200x2"
if not H200.is_dir():
    H200 = pathlib.Path("/work/shared/fixtures/h200x2")
NODE = ROOT / "fixtures" / "node"
QUERY = ["index", "name", "uuid", "pci.bus_id", "driver_version", "pcie.link.gen.current",
         "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max", "memory.total",
         "compute_cap", "persistence_mode"]  # fmt: skip
RUN = "20261207T100000Z"


def node_of_testbed():
    return json.loads(TESTBED.read_text())


def h200_facts():
    """A 2x H200 node's wireup_node: the testbed capture's shape, its GPU, driver and NCCL parts
    made by the parsers wireup_node_facts calls, from the H200 machine's captures."""
    facts = node_of_testbed()
    rows = (H200 / "query_gpu.csv").read_text().splitlines()[1:]
    inventory = node.parse_gpu_inventory("\n".join(r.replace(" MiB", "") for r in rows), QUERY)
    pci = node.classify_pci_devices(
        [{"address": g["pci.bus_id"], "vendor": "0x10de", "class": "0x030200"} for g in inventory]
    )
    facts["gpu"] = node.summarize_gpus(pci, inventory)
    for device, row in zip(facts["gpu"]["devices"], inventory, strict=True):
        device.update(probe_drift.device_modes(row))
    facts["driver"] = dict(
        node.parse_proc_driver_version((H200 / "proc_driver_version.txt").read_text()), loaded=True
    )
    facts["cuda"] = dict(facts["cuda"], **node.parse_nvcc_version((H200 / "nvcc_version.txt").read_text()))
    version = node.parse_nccl_header((NODE / "nccl_h_excerpt.txt").read_text())
    facts["nccl"] = {"version": version, "package": "", "source": "header", "packages": {}, "net_plugins": []}
    facts["kernel"] = "6.8.0-85-generic"
    facts["infiniband_fw"] = {}
    return facts


def fleet(n=4):
    return {f"gpu-a{i:02d}": h200_facts() for i in range(1, n + 1)}


# ---------------------------------------------------------------- one node's values
def test_the_testbed_nodes_values_missing_fields_are_unknown_never_a_crash():
    values = probe_drift.node_values(node_of_testbed())
    assert values["os"] == "debian 12" and values["driver"] == "none" and values["nccl"] == "none"
    assert values["gpu_model"] == "none" and values["vbios"] == "none"  # no GPU: nothing to differ in
    # The capture predates kernel, the net plugins and the IB firmware: unknown, not none.
    assert values["kernel"] == values["nccl_net_plugin"] == values["ib_firmware"] == "unknown"


def test_an_h200_nodes_values_from_its_captures():
    values = probe_drift.node_values(h200_facts())
    assert values["driver"] == "580.159.04" and values["driver_branch"] == "580"
    assert values["kernel_module"] == "open" and values["gpu_model"] == "NVIDIA H200"
    assert values["nccl"] == "2.28.9" and values["nccl_net_plugin"] == "none" and values["cuda"] == "13.0.88"
    # The capture's query lacks the drift columns (vbios, ECC, MIG): unknown for those fields.
    assert values["vbios"] == values["ecc_mode"] == values["mig_mode"] == "unknown"


def test_the_net_plugin_folders_follow_ld_so_conf_and_only_plugin_files_count():
    confs = [(NODE / "ld_so_conf_libc_debian12.conf").read_text(),
             (NODE / "ld_so_conf_x86_64-linux-gnu_debian12.conf").read_text()]  # fmt: skip
    dirs = probe_drift.net_plugin_dirs(confs, "/opt/aws-ofi-nccl/lib:relative:/x;rm")
    assert dirs[:4] == ["/opt/aws-ofi-nccl/lib", "/usr/local/lib", "/usr/local/lib/x86_64-linux-gnu",
                        "/lib/x86_64-linux-gnu"]  # fmt: skip
    assert len(dirs) == len(set(dirs)) and "/usr/lib64" in dirs
    names = [
        "libnccl-net.so",
        "libnccl-net-ofi.so.1",
        "libnccl.so.2",
        "libnccl-net-$(x).so",
        "libnccl-net.so",
    ]
    assert probe_drift.net_plugin_names(names) == ["libnccl-net-ofi.so.1", "libnccl-net.so"]


def test_ib_devices_and_firmware():
    assert probe_drift.is_ib_device("mlx5_0") and not probe_drift.is_ib_device("../x")
    assert probe_drift.ib_firmware({"mlx5_1": "28.39.1002\n", "mlx5_0": None}) == {"mlx5_1": "28.39.1002"}


# ---------------------------------------------------------------- the table over the fleet
def test_one_node_with_another_nccl_is_the_one_outlier_and_every_other_field_agrees():
    facts = fleet()
    facts["gpu-a03"]["nccl"]["version"] = "2.27.3"
    table = drift.table_of_facts(facts)
    [nccl] = drift.differing(table)
    assert nccl == {"field": "nccl", "majority": "2.28.9", "count": 3, "outliers": {"gpu-a03": "2.27.3"},
                    "unknown": []}  # fmt: skip
    assert drift.agreeing(table) == len(probe_drift.FIELDS) - 1
    part = drift.host_part(table, "gpu-a03")
    assert part["outliers"] == {"nccl": {"value": "2.27.3", "majority": "2.28.9"}}
    [found] = drift.findings(part)
    assert found["code"] == "drift_nccl" and found["severity"] == "warning"
    assert "2.27.3 here, 2.28.9 on most nodes" in found["message"]
    assert drift.host_part(table, "gpu-a01")["outliers"] == {}


def test_an_unknown_value_is_never_an_outlier_nor_the_majority():
    facts = fleet(3)
    del facts["gpu-a02"]["kernel"]
    facts["gpu-a03"]["kernel"] = "6.8.0-85-generic\nrm -rf /"
    [kernel] = [f for f in drift.table_of_facts(facts)["fields"] if f["field"] == "kernel"]
    assert kernel["majority"] == "6.8.0-85-generic" and kernel["outliers"] == {}
    assert kernel["unknown"] == ["gpu-a02", "gpu-a03"]


def test_the_table_is_linear_one_counter_per_field():
    """1,024 nodes, one of them different: each node's values are read once per field."""
    facts = {f"n{i:04d}": h200_facts() for i in range(1024)}
    facts["n0500"]["driver"]["branch"] = "570"
    [branch] = drift.differing(drift.table_of_facts(facts))
    assert branch["outliers"] == {"n0500": "570"} and branch["count"] == 1023


# ---------------------------------------------------------------- launch.yml's refusal
def test_launch_refuses_a_job_whose_nodes_differ_in_nccl_naming_field_values_and_nodes():
    facts = fleet(3)
    facts["gpu-a02"]["nccl"]["version"] = "2.27.3"
    [message] = drift.launch_refusals(facts)
    assert message.startswith("the nodes differ in nccl (2.28.9 on gpu-a01, gpu-a03; 2.27.3 on gpu-a02)")
    assert "-e wireup_launch_accept_drift=nccl" in message
    assert drift.launch_refusals(facts, ["nccl"]) == [] and drift.launch_refusals(facts, "nccl") == []


def test_launch_refuses_a_net_plugin_on_part_of_the_nodes_and_a_driver_branch():
    facts = fleet(3)
    facts["gpu-a01"]["nccl"]["net_plugins"] = ["libnccl-net.so"]
    facts["gpu-a03"]["driver"]["branch"] = "570"
    messages = drift.launch_refusals(facts)
    assert [m.split(" (")[0] for m in messages] == ["the nodes differ in driver_branch",
                                                    "the nodes differ in nccl_net_plugin"]  # fmt: skip
    assert (
        "570 on gpu-a03" in messages[0]
        and "none on gpu-a02, gpu-a03; libnccl-net.so on gpu-a01" in messages[1]
    )
    assert drift.launch_refusals(facts, "nccl_net_plugin,driver_branch") == []


def test_launch_fails_closed_on_a_hang_field_one_node_did_not_give():
    facts = fleet(2)
    facts["gpu-a02"]["nccl"]["version"] = "2.28.9; reboot"
    [message] = drift.launch_refusals(facts)
    assert "unknown on gpu-a02" in message and "reboot" not in message


def test_a_fleet_that_agrees_or_differs_only_elsewhere_starts():
    facts = fleet(3)
    facts["gpu-a02"]["kernel"] = "6.8.0-90-generic"
    assert drift.launch_refusals(facts) == []
    assert drift.launch_refusals({"node1": node_of_testbed(), "node2": node_of_testbed()}) == []


@pytest.mark.parametrize(
    ("accept", "said"),
    [(["kernel"], "names 'kernel', not a field"), (3, "must be a list of field names, got int")],
)
def test_a_wrong_accept_names_the_variable_and_the_fields(accept, said):
    with pytest.raises(ValueError, match="wireup_launch_accept_drift") as err:
        drift.accepted_fields(accept)
    assert said in str(err.value) and "nccl, nccl_net_plugin, driver_branch, torch_nccl" in str(err.value)


def test_the_filter_launch_yml_calls():
    facts = fleet(2)
    facts["gpu-a02"]["driver"]["branch"] = "570"
    assert len(wireup_drift.drift_refusals(facts, [])) == 1
    assert wireup_drift.drift_refusals(facts, "driver_branch") == []
    with pytest.raises(ValueError, match="input must be"):
        wireup_drift.drift_refusals([facts], [])


_TEXT = st.one_of(st.none(), st.integers(), st.text(max_size=40), st.lists(st.text(max_size=12), max_size=3))


@settings(max_examples=200, deadline=None)
@given(nccl=_TEXT, branch=_TEXT, plugins=_TEXT, kernel=_TEXT, model=_TEXT)
def test_hostile_facts_are_unknown_or_of_their_grammar_and_never_reach_a_message(
    nccl, branch, plugins, kernel, model
):
    facts = fleet(2)
    hostile = facts["gpu-a02"]
    hostile["nccl"]["version"], hostile["driver"]["branch"], hostile["nccl"]["net_plugins"] = (
        nccl,
        branch,
        plugins,
    )
    hostile["kernel"], hostile["gpu"]["models"] = kernel, model
    values = probe_drift.node_values(hostile)
    for field, value in values.items():
        assert value in ("none", "unknown") or probe_drift.checked(field, value) == value
    for message in drift.launch_refusals(facts):
        assert "\n" not in message and all(v in message for v in ("gpu-a01", "gpu-a02"))
    drift.report_sections({h: {"drift": drift.host_part(drift.table_of_facts(facts), h)} for h in facts})


# ---------------------------------------------------------------- the capability: record and report
def records_of(facts):
    """Host records of the 2x H200 bench captures, each with the run's drift attached (attach)."""
    nodes = drift.attach({host: good_node() for host in facts}, facts)
    return {host: host_record.build_record(host, RUN, data) for host, data in nodes.items()}


def test_the_record_keeps_the_hosts_part_and_a_warning_per_outlier():
    facts = fleet(3)
    facts["gpu-a03"]["nccl"]["net_plugins"] = ["libnccl-net.so"]
    records = records_of(facts)
    odd = records["gpu-a03"]
    assert odd["drift"]["outliers"] == {"nccl_net_plugin": {"value": "libnccl-net.so", "majority": "none"}}
    assert "drift_nccl_net_plugin" in [f["code"] for f in odd["findings"]]
    assert odd["verdict"] == records["gpu-a01"]["verdict"] == "PASS"  # drift warns; launch.yml refuses
    assert all(host_record.record_problem(r) == "" for r in records.values())
    # A run without drift writes no part: the records of before stay as they were (golden file).
    assert "drift" not in host_record.build_record("gpu-a01", RUN, good_node())


def test_a_damaged_part_is_a_record_problem_and_a_malformed_node():
    record = records_of(fleet(2))["gpu-a01"]
    broken = copy.deepcopy(record)
    broken["drift"]["values"]["nccl"] = "2.28.9 && reboot"
    assert host_record.record_problem(broken) == "drift.nccl is not of its grammar"
    assert host_record.record_problem(dict(record, drift=[])) == "drift is a list, not an object"
    with pytest.raises(shape.Malformed):
        drift.section({"drift": {"values": {"nccl": 1}, "outliers": {}}}, {}, None)


def test_the_report_part_shows_only_the_fields_that_differ_and_counts_the_rest():
    facts = fleet(3)
    facts["gpu-a02"]["nccl"]["version"] = "2.27.3"
    sections = drift.report_sections(records_of(facts))
    assert sections[0] == ("h", (2, "Drift across the nodes"))
    assert sections[1] == ("p", f"1 field(s) differ between the nodes, {len(probe_drift.FIELDS) - 1} agree.")
    header, rows = sections[2][1]
    assert rows == [["nccl", "2.28.9", "2", "gpu-a02: 2.27.3"]] and len(header) == 4
    same = drift.report_sections(records_of(fleet(2)))
    assert same[1][1].startswith(f"All {len(probe_drift.FIELDS)} fields agree") and len(same) == 2
    assert drift.report_sections({"gpu-a01": host_record.build_record("gpu-a01", RUN, good_node())}) == []


def test_the_registry_declares_drift_outside_the_gate():
    [cap] = [c for c in registry.CAPABILITIES if c.name == "drift"]
    assert cap.part == "drift" and cap.report is drift.report_sections and not cap.keep_empty
    assert "drift" not in registry.names() and "drift" not in gate.CAPABILITIES
    assert registry.empty_dropped() == frozenset({"drift"})
    assert "drift" not in gate.measured({"verdict": "FAIL"}, "bench")


# ---------------------------------------------------------------- the bench's store: the seam
def test_the_bench_store_attaches_the_runs_drift_and_the_records_and_report_show_it():
    """bench_report.store_nodes (wireup_bench_store's first step) with each host's wireup_node:
    the host records host_record.store_run writes carry the part, the odd host its warning, and
    the report part names it; a lost host and a run without facts get none."""
    facts = fleet(3)
    facts["gpu-a02"]["driver"]["branch"], facts["gpu-a02"]["driver"]["version"] = "570", "570.195.03"
    facts["lost"] = h200_facts()
    params = {
        "nodes": {h: good_node() for h in ("gpu-a01", "gpu-a02", "gpu-a03")},
        "thresholds": {
            "pass_ratio": 0.9,
            "warn_ratio": 0.8,
            "min_bytes": 0,
            "tolerance": 0.1,
            "torch_goal": 0.5,
        },
        "lost": {"lost": "UNREACHABLE! ssh"},
        "node_facts": facts,
    }
    nodes = bench_report.store_nodes(params, lambda path: "")
    assert "drift" not in nodes["lost"]
    records = {h: host_record.build_record(h, RUN, n) for h, n in nodes.items() if h != "lost"}
    assert set(records["gpu-a02"]["drift"]["outliers"]) == {"driver", "driver_branch"}
    codes = [f["code"] for f in records["gpu-a02"]["findings"]]
    assert "drift_driver" in codes and "drift_driver_branch" in codes
    _, rows = drift.report_sections(records)[2][1]
    assert [r[0] for r in rows] == ["driver", "driver_branch"] and rows[1][3] == "gpu-a02: 570"
    without = bench_report.store_nodes(dict(params, node_facts={}), lambda path: "")
    assert all("drift" not in n for n in without.values())


def test_the_testbeds_three_nodes_as_wireup_node_facts_answered_with_a_plugin_on_node3():
    """The module's own answer on the testbed (tests/fixtures/testbed/README.md): node3's empty
    libnccl-net.so is the one outlier and the refusal; every other field agrees."""
    facts = json.loads(
        (ROOT / "fixtures" / "testbed" / "wireup_node_debian12_three_nodes_plugin_on_node3.json").read_text()
    )
    table = drift.table_of_facts(facts)
    [plugin] = drift.differing(table)
    assert plugin["field"] == "nccl_net_plugin" and plugin["outliers"] == {"node3": "libnccl-net.so"}
    assert plugin["majority"] == "none" and plugin["unknown"] == []
    [message] = drift.launch_refusals(facts)
    assert message.startswith(
        "the nodes differ in nccl_net_plugin (none on node1, node2; libnccl-net.so on node3)"
    )
