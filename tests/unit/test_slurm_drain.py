"""torchrun_launch_drain_failed is idempotent: the nodes' Slurm state is read once (scontrol show
node -o, slurm.parse_show_node) and only nodes not drained already are drained (slurm.drain_plan).
Real captures from the testbed's Slurm 22.05.8 and a public one (20.02.0), plus the state forms
Slurm's documentation and source give (older scontrol's DRAINED/DRAINING, sinfo's suffixes)."""

import pathlib
import shlex

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
WIREUP = "wireup: fabric run 20261201T050000Z named node2 bad: round 1 with node1: 0.0236 GB/s FAIL"


def capture(name):
    return (FIXTURES / name).read_text()


def item(node, finding="fabric run R named it bad", host=None):
    argv = slurm.drain_argv(node, finding)
    return {"host": host or node, "node": node, "reason": argv[-1][len("Reason=") :], "argv": argv}


def shown(name):
    return {"rc": 0, "stdout": capture(name), "stderr": ""}


def test_parse_idle_nodes_one_line_each():
    nodes = slurm.parse_show_node(capture("testbed_22.05.8_scontrol_show_node_o_idle.txt"))
    assert sorted(nodes) == ["node1", "node2", "node3"]
    for st in nodes.values():
        assert (st["state"], st["drain"], st["draining"], st["reason"]) == ("IDLE", False, False, None)


@pytest.mark.parametrize(
    "name",
    ["testbed_22.05.8_scontrol_show_node_o_drained.txt", "testbed_22.05.8_scontrol_show_node_drained.txt"],
)
def test_parse_drained_nodes_and_their_reasons_in_both_layouts(name):
    nodes = slurm.parse_show_node(capture(name))
    two, three = nodes["node2"], nodes["node3"]
    assert (two["state"], two["drain"], two["draining"]) == ("IDLE+DRAIN", True, False)
    assert two["reason"] == WIREUP and two["reason_user"] == "root"
    assert two["reason_time"].startswith("2026-12-01T20:00:")
    # a reason holding '=' and a bracket of its own: only " [USER@TIME]" ends it
    assert three["reason"] == "bad dimm=2 [see ticket 7]" and three["drain"]


def test_parse_draining_and_down_drained():
    nodes = slurm.parse_show_node(capture("testbed_22.05.8_scontrol_show_node_o_draining.txt"))
    assert {n: (st["state"], st["drain"], st["draining"]) for n, st in nodes.items()} == {
        "node2": ("MIXED+DRAIN", True, True),
        "node3": ("ALLOCATED+DRAIN", True, True),
    }
    assert {st["reason"] for st in nodes.values()} == {"wireup: latest bench verdict FAIL"}
    down = slurm.parse_show_node(capture("testbed_22.05.8_scontrol_show_node_o_down_drain.txt"))["node3"]
    assert (down["state"], down["drain"], down["draining"]) == ("DOWN+DRAIN", True, False)


def test_parse_a_public_capture_of_an_older_slurm():
    [(name, st)] = slurm.parse_show_node(
        capture("public_bih_cluster_faq_scontrol_show_node_mixed_drain.txt")
    ).items()
    assert (name, st["state"], st["draining"]) == ("med0304", "MIXED+DRAIN", True)
    assert (st["reason"], st["reason_user"], st["reason_time"]) == (
        "deep power-off required for PSU",
        "root",
        "2020-07-17T13:21:02",
    )


@pytest.mark.parametrize(
    ("line", "drain", "draining", "reason"),
    [
        # written from Slurm's documentation (scontrol(1) NODE STATE, sinfo(1) NODE STATE CODES) and
        # node_info.c: older scontrol printed sinfo's long names, with '*' for not responding
        (
            "NodeName=n1 State=DRAINED ThreadsPerCore=1 Reason=maint [slurm@2019-01-29T10:42:12]",
            True,
            False,
            "maint",
        ),
        (
            "NodeName=n1 State=DRAINING ThreadsPerCore=1 Reason=maint [root@2019-01-29T10:42:12]",
            True,
            True,
            "maint",
        ),
        (
            "NodeName=n1 State=DOWN*+DRAIN Reason=Not responding [slurm@2021-10-19T12:56:19]",
            True,
            False,
            "Not responding",
        ),
        (
            "NodeName=n1 State=IDLE+DRAIN+NOT_RESPONDING Reason=x [root@2026-12-01T00:00:00]",
            True,
            False,
            "x",
        ),
        (
            "NodeName=n1 State=MIXED+DRAIN+REBOOT_REQUESTED Reason=upd [root@2026-12-01T00:00:00]",
            True,
            True,
            "upd",
        ),
        (
            "NodeName=n1 State=DOWN* ThreadsPerCore=1 Reason=Not responding [slurm@2021-10-19T12:56:19]",
            False,
            False,
            "Not responding",
        ),
        ("NodeName=n1 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=1", False, False, None),
        # what follows Reason= on the one line: Comment=, Extra=, ReservationName=
        (
            "NodeName=n1 State=IDLE+DRAIN Reason=wireup: x [root@2026-12-01T00:00:00] Comment=rack 4",
            True,
            False,
            "wireup: x",
        ),
        # a reason set without a time (none printed): it ends where Comment= begins
        (
            "NodeName=n1 State=IDLE+DRAIN Reason=wireup: x Comment=rack 4 ReservationName=r",
            True,
            False,
            "wireup: x",
        ),
        # tabs collapsed, CRLF
        (
            "NodeName=n1\tState=IDLE+DRAIN\tReason=wireup: x [root@2026-12-01T00:00:00]\r\n",
            True,
            False,
            "wireup: x",
        ),
    ],
)
def test_parse_state_forms_from_the_documentation(line, drain, draining, reason):
    st = slurm.parse_show_node(line)["n1"]
    assert (st["drain"], st["draining"], st["reason"]) == (drain, draining, reason)


def test_parse_skips_what_is_no_node_record():
    text = capture("testbed_22.05.8_scontrol_show_node_o_not_found.txt")
    assert list(slurm.parse_show_node(text)) == ["node2"]  # "Node nodeX not found" is no record
    assert slurm.parse_show_node("") == {}
    assert slurm.parse_show_node("slurm_load_node error: Unable to contact slurm controller\n") == {}
    # a record cut before its State= is not guessed
    assert slurm.parse_show_node("NodeName=n9 Arch=x86_64 CoresPer") == {}
    # NUL bytes in a torn read
    assert slurm.parse_show_node("NodeName=n1 State=IDLE+DRAIN\x00 Reason=wireup: x\n")["n1"]["drain"]


def test_a_node_drained_by_an_earlier_launch_is_not_drained_again():
    """The bug: every launch ran scontrol update on node2 again, reported changed."""
    plan = slurm.drain_plan([item("node2")], shown("testbed_22.05.8_scontrol_show_node_o_drained.txt"))
    assert plan["drain"] == []
    assert plan["nodes"]["node2"]["action"] == "drained_already"
    assert plan["show"][0].startswith(
        "Slurm: node2 is drained already for a wireup reason (State=IDLE+DRAIN, Reason=wireup: fabric run"
    )
    assert plan["show"][0].endswith("[root@2026-12-01T20:00:43]): not drained again")
    # draining (jobs still running) counts as drained: no new job lands there
    draining = slurm.drain_plan([item("node2")], shown("testbed_22.05.8_scontrol_show_node_o_draining.txt"))
    assert draining["drain"] == [] and "is draining already for a wireup reason" in draining["show"][0]


def test_a_node_drained_for_another_reason_keeps_it():
    plan = slurm.drain_plan([item("node3")], shown("testbed_22.05.8_scontrol_show_node_o_drained.txt"))
    assert plan["drain"] == [] and plan["nodes"]["node3"]["action"] == "kept"
    assert plan["show"] == [
        "Slurm: node3 is drained already for another reason (State=IDLE+DRAIN, "
        "Reason=bad dimm=2 [see ticket 7] [root@2026-12-01T20:00:43]): left as it is, its reason kept"
    ]


def test_a_node_not_drained_is_drained_and_check_mode_says_it_would():
    todo = item("node2")
    plan = slurm.drain_plan([todo], shown("testbed_22.05.8_scontrol_show_node_o_idle.txt"))
    assert plan["drain"] == [todo] and plan["nodes"]["node2"]["action"] == "drain"
    assert plan["show"] == [f"Slurm: drain node2 (State=IDLE): {shlex.join(todo['argv'])}"]
    checked = slurm.drain_plan(
        [todo], shown("testbed_22.05.8_scontrol_show_node_o_idle.txt"), check_mode=True
    )
    assert checked["drain"] == []
    assert checked["show"] == [
        f"Slurm: would drain node2 (State=IDLE; check mode: nothing changes): {shlex.join(todo['argv'])}"
    ]
    # DOWN without a drain: drained (it stays out once it is back)
    down = "NodeName=node2 State=DOWN+NOT_RESPONDING Reason=Not responding [slurm@2026-12-01T00:00:00]\n"
    assert slurm.drain_plan([todo], {"rc": 0, "stdout": down})["drain"] == [todo]


def test_an_unknown_state_is_drained_as_before():
    todo = item("nodeX")
    # the read failed altogether (no controller): every node drained, saying why
    failed = {"rc": 1, "stdout": "", "stderr": "slurm_load_node error: Unable to contact slurm controller"}
    plan = slurm.drain_plan([todo], failed)
    assert plan["drain"] == [todo]
    assert plan["show"][0].startswith(
        "Slurm: drain nodeX (state unknown: scontrol failed (slurm_load_node error: Unable to contact slurm "
        "controller)): scontrol update NodeName=nodeX"
    )
    # one node missing from the answer (exit code 1, the others there)
    partial = {"rc": 1, "stdout": capture("testbed_22.05.8_scontrol_show_node_o_not_found.txt")}
    plan = slurm.drain_plan([item("node2"), todo], partial)
    assert [d["node"] for d in plan["drain"]] == ["node2", "nodeX"]
    assert "state unknown: not in scontrol's answer" in plan["show"][1]
    assert slurm.drain_plan([todo], None)["drain"] == [todo]


def test_the_launch_plan_reads_the_state_and_the_summary_says_what_was_drained():
    p = _launch_plan({"n2": "fabric run R named n2 bad", "n3": "x"}, group=None)
    # every node: the blast radius counts the partitions' drains (issue 37)
    assert p["drain_state_argv"] == ["scontrol", "show", "node", "-o"]
    decided = slurm.drain_plan(p["drain_read"], shown("testbed_22.05.8_scontrol_show_node_o_drained.txt"))
    assert decided["drain"] == []
    out = torchrun_launch.summary(
        p, {}, {"ok": True}, program="/p.py", args=[], slurm_job_id="7", drain=decided
    )
    assert out["drained"] == {"node2": WIREUP}  # drained for it already, by an earlier launch
    assert out["not_drained"] == {"node3": "bad dimm=2 [see ticket 7]"}
    idle = slurm.drain_plan(p["drain_read"], shown("testbed_22.05.8_scontrol_show_node_o_idle.txt"))
    out = torchrun_launch.summary(p, {}, {"ok": True}, program="/p.py", args=[], slurm_job_id="7", drain=idle)
    assert out["drained"] == {d["node"]: d["reason"] for d in p["drain"]} and "not_drained" not in out


def test_the_filter_reads_the_plans_drain_read():
    import test_launch_templates as t

    filters = t._wireup_filters(t.SLURM_FILTERS_PY)
    plan = {"drain_read": [item("node2")]}
    got = filters["wireup_slurm_drain_plan"](shown("testbed_22.05.8_scontrol_show_node_o_drained.txt"), plan)
    assert got["drain"] == [] and got["nodes"]["node2"]["action"] == "drained_already"
    empty = filters["wireup_slurm_drain_plan"]({}, {"drain_read": []})
    assert {k: empty[k] for k in ("drain", "nodes", "show", "refused")} == {
        "drain": [],
        "nodes": {},
        "show": [],
        "refused": [],
    }


def _launch_plan(failed, count=3, group="gpu_nodes"):
    """A Slurm job plan of ``count`` nodes whose ``failed`` are to be drained (no group: None)."""
    nodes = {
        f"n{i}": {"address": f"10.0.0.{i}", "interface": "eth0", "hostname": f"node{i}", "cpus": 2}
        for i in range(1, count + 1)
    }
    base = {
        "job": "j",
        "program": "/p.py",
        "base_dir": "/opt/wireup",
        "venv_path": "/opt/wireup/venv",
        "results_dir": "/tmp/r",
        "run_id": "r1",
        "nproc_per_node": 1,
        "slurm": True,
        "drain_failed": True,
        "failed": failed,
        **({"group": group} if group else {}),
    }
    return torchrun_launch.job_plan(list(nodes), nodes, **base)


def test_the_launch_drain_stays_within_the_blast_radius():
    """Issue 37 item 3: before, launch.yml drained every FAILed node of the group, 2 of 3 here.
    10% of 3 is 0.3: one node may go; two is a shared cause, nothing is drained and the play stops."""
    import test_launch_templates as t

    filters = t._wireup_filters(t.SLURM_FILTERS_PY)
    idle = shown("testbed_22.05.8_scontrol_show_node_o_idle.txt")
    one = filters["wireup_slurm_drain_plan"](idle, _launch_plan({"n2": "GPU0 row remap pending"}))
    assert [d["node"] for d in one["drain"]] == ["node2"] and one["refused"] == []
    assert one["drain"][0]["reason"] == "wireup: [node_problem] hw/bench: GPU0 row remap pending"
    two = filters["wireup_slurm_drain_plan"](
        idle, _launch_plan({"n2": "driver 580.95 does not load", "n3": "driver 580.95 does not load"})
    )
    assert two["drain"] == []
    assert two["refused"] == [
        "wireup: blast radius: 2 of 3 nodes of Slurm partition testbed would be out of service (0 drained "
        "by wireup already, 2 now; the limit is 1: 10%, at most 8): nothing more is drained. The cause is "
        "likely shared (a driver rollout, a switch, the fabric manager): 2 of 2 have "
        "'driver 580.95 does not load'",
        "wireup: blast radius: 2 of 3 nodes of the node group gpu_nodes would be out of service (0 drained "
        "by wireup already, 2 now; the limit is 1: 10%, at most 8): nothing more is drained. The cause is "
        "likely shared (a driver rollout, a switch, the fabric manager): 2 of 2 have "
        "'driver 580.95 does not load'",
    ]
    assert two["show"][-2:] == two["refused"]
    # a wider share lets both go
    wide = filters["wireup_slurm_drain_plan"](
        idle, _launch_plan({"n2": "x", "n3": "x"}), max_share=100, max_nodes=8
    )
    assert [d["node"] for d in wide["drain"]] == ["node2", "node3"] and wide["refused"] == []


@pytest.mark.parametrize(
    "whose,check,said",
    [
        ("hw", "quick", "wireup: [node_problem] hw/quick: GPU0 reset"),
        ("sw", "quick", "wireup: [node_problem] sw/quick: GPU0 reset"),
        ("job", "job", "wireup: [user_problem] job/job: GPU0 reset"),
        ("", "", "wireup: GPU0 reset"),  # no owner given: the reason before issue 37
    ],
)
def test_a_drain_reason_says_whose_problem_it_is_and_reads_back(whose, check, said):
    """Issue 37 item 1: the soperator prefixes ([node_problem], [user_problem]) after wireup's mark,
    hardware or software, and the check repair.yml runs again."""
    reason = slurm.drain_reason("GPU0 reset", whose=whose, check=check)
    assert reason == said
    owner = slurm.reason_owner(reason)
    assert owner == {"wireup": True, "whose": whose or "node", "check": check, "finding": "GPU0 reset"}


def test_reasons_of_a_person_or_another_tool_are_not_wireups():
    drained = slurm.parse_show_node(capture("testbed_22.05.8_scontrol_show_node_o_drained.txt"))
    assert slurm.reason_owner(drained["node3"]["reason"]) == {
        "wireup": False,
        "whose": "",
        "check": "",
        "finding": "bad dimm=2 [see ticket 7]",
    }
    assert slurm.reason_owner(drained["node2"]["reason"])["whose"] == "node"  # an older wireup drain
    for other in ("NHC: check_hw_cpuinfo: Actual CPU core count", "Kill task failed", "", None, " wireup: x"):
        assert not slurm.reason_owner(other)["wireup"]
    # a tag off the grammar is an untagged wireup reason, never a job's (which skips the recheck)
    assert slurm.reason_owner("wireup: [user_problem] job/jobx: f")["whose"] == "node"
    with pytest.raises(ValueError, match="whose='net'"):
        slurm.drain_reason("f", whose="net", check="quick")
