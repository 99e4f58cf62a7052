"""The blast radius (issue 37 item 3): the limit's arithmetic (integer percent, rounding down, at
least one node, the absolute cap), the shared-cause line, and the partitions and wireup's own
drains read from real scontrol captures (the testbed's Slurm 22.05.8, a public 20.02 one)."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import blast, slurm

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def parsed(name):
    return slurm.parse_show_node((FIXTURES / name).read_text())


@pytest.mark.parametrize(
    "size,share,cap,want",
    [
        (0, 10, 8, 0),  # no node, nothing to take
        (1, 10, 8, 1),  # one bad node can always go
        (3, 10, 8, 1),  # 10% of 3 is 0.3: at least one
        (9, 10, 8, 1),  # 0.9 rounds down, then the floor of one
        (10, 10, 8, 1),
        (19, 10, 8, 1),  # 1.9 rounds down
        (20, 10, 8, 2),
        (1000, 10, 8, 8),  # the absolute cap
        (1000, 10, 0, 0),  # a cap of 0: wireup drains nothing
        (3, 100, 8, 3),
        (7, 0, 8, 1),  # share 0 still lets the one node go (the floor), cap 0 is the off switch
        (64, 15, 100, 9),  # 9.6 -> 9
    ],
)
def test_the_limit(size, share, cap, want):
    assert blast.limit(size, share, cap) == want


@pytest.mark.parametrize("share,cap", [(-1, 8), (101, 8), (10, -1)])
def test_a_limit_off_its_range_is_refused(share, cap):
    with pytest.raises(ValueError, match="blast radius"):
        blast.limit(10, share, cap)


def test_the_common_finding_sets_gpu_identities_and_figures_aside():
    findings = [
        "GPU3 (00000000:19:00.0, GPU-ee7954ec) row remap pending -> reset",
        "GPU0 (00000000:07:00.0, GPU-47e4f408) row remap pending -> reset",
        "NIC mlx5_5:1 link down",
    ]
    assert blast.common_finding(findings) == (findings[0], 2)
    assert blast.common_finding([]) == ("", 0)


def test_within_the_limit_the_drain_goes_ahead():
    got = blast.check(
        "the node group g", [f"n{i}" for i in range(20)], [], {"n1": "x"}, max_share=10, max_nodes=8
    )
    assert got["allowed"] and got["limit"] == 2 and got["line"] == ""


def test_above_the_limit_nothing_is_drained_and_the_line_names_the_shared_cause():
    members = [f"n{i:02d}" for i in range(20)]
    wanted = {
        "n03": "driver 550.90.07 does not load",
        "n04": "driver 550.90.07 does not load",
        "n05": "GPU1 lost",
    }
    got = blast.check("the node group g", members, ["n01"], wanted, max_share=10, max_nodes=8)
    assert not got["allowed"]
    assert got["line"] == (
        "wireup: blast radius: 4 of 20 nodes of the node group g would be out of service "
        "(1 drained by wireup already, 3 now; the limit is 2: 10%, at most 8): nothing more is drained. "
        "The cause is likely shared (a driver rollout, a switch, the fabric manager): 2 of 3 have "
        "'driver 550.90.07 does not load'"
    )


def test_a_node_held_out_already_is_not_counted_twice_and_outsiders_do_not_count():
    members = ["a", "b", "c"]
    got = blast.check("g", members, ["a", "zz"], {"a": "f"}, max_share=10, max_nodes=8)
    assert got["allowed"] and got["wanted"] == [] and got["out"] == ["a"]
    # 10% of 3: one node; a second is refused
    got = blast.check("g", members, ["a"], {"b": "f"}, max_share=10, max_nodes=8)
    assert not got["allowed"] and "2 of 3 nodes of g" in got["line"]


def test_the_partitions_and_wireups_drains_from_the_testbeds_slurm():
    nodes = parsed("testbed_22.05.8_scontrol_show_node_o_drained.txt")
    assert blast.groups_of(nodes, ["node2"]) == {"Slurm partition testbed": ["node2", "node3"]}
    # node2 is wireup's drain, node3 a person's ("bad dimm=2"): only node2 counts against wireup
    assert blast.held_out(nodes, slurm.reason_owner) == ["node2"]
    got = blast.verdict(
        blast.groups_of(nodes, ["node3"]),
        blast.held_out(nodes, slurm.reason_owner),
        {"node3": "f"},
        max_share=10,
        max_nodes=8,
    )
    assert not got["allowed"] and got["lines"][0].startswith(
        "wireup: blast radius: 2 of 2 nodes of Slurm partition testbed would be out"
    )
    assert blast.verdict({}, [], {"node1": "f"}, max_share=10, max_nodes=8)["lines"] == [
        "wireup: blast radius: no node group or partition could be read: nothing is drained"
    ]
    assert blast.verdict({}, [], {}, max_share=10, max_nodes=8)["allowed"]


def test_a_public_capture_names_its_partition():
    nodes = parsed("public_bih_cluster_faq_scontrol_show_node_mixed_drain.txt")
    assert all(st["partitions"] == ["gpu"] for st in nodes.values())


def test_a_partition_name_off_the_grammar_is_dropped():
    nodes = slurm.parse_show_node("NodeName=n1 State=IDLE Partitions=gpu,$(reboot),ok.2\n")
    assert nodes["n1"]["partitions"] == ["gpu", "ok.2"]


@pytest.mark.parametrize(
    "values,said",
    [
        ({"wireup_drain_max_share": 101}, "wireup_drain_max_share=101 must be a whole number from 0 to 100"),
        ({"wireup_drain_max_share": "10%"}, "wireup_drain_max_share='10%' must be"),
        ({"wireup_drain_max_nodes": -1}, "wireup_drain_max_nodes=-1 must be a whole number from 0"),
        ({"wireup_drain_max_nodes": True}, "wireup_drain_max_nodes=True must be"),
    ],
)
def test_preflight_refuses_a_blast_radius_off_its_range(values, said):
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight

    assert any(e.startswith(said) for e in preflight.host_errors(values)), preflight.host_errors(values)
    assert blast.setting_errors({"wireup_drain_max_share": 10, "wireup_drain_max_nodes": 8}) == []
