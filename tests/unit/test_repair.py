"""repair.yml's decisions (issue 37 item 1): which drained nodes are rechecked and returned, from
real scontrol captures (the testbed's Slurm 22.05.8) and wireup-check's own answers (check/run.py's
result as --json prints it, read back by node_check.result, as the role does)."""

import json
import pathlib

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import run as checkrun
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import quick
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import repair

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
NODES = {f"n{i}": {"hostname": f"node{i}"} for i in (1, 2, 3)}


def shown(text):
    return {"rc": 0, "stdout": text, "stderr": ""}


def capture(name):
    return (FIXTURES / name).read_text()


def drained_for(reasons: dict) -> str:
    """The testbed's idle capture with nodes drained for ``reasons`` ({node: Reason}), in the
    record layout scontrol printed for the drained capture."""
    lines = []
    for record in capture("testbed_22.05.8_scontrol_show_node_o_idle.txt").splitlines():
        node = record.split()[0].split("=", 1)[1]
        if node in reasons:
            why = f" Reason={reasons[node]} [root@2026-12-07T07:00:00] LastBusyTime"
            lines.append(record.replace("State=IDLE", "State=IDLE+DRAIN").replace(" LastBusyTime", why, 1))
        else:
            lines.append(record)
    return "\n".join(lines) + "\n"


def checked(host, baseline=None, error=""):
    """wireup-check's --json answer (PASS with no baseline, or ERROR), as the role reads it."""
    config = dict(checkrun.DEFAULTS, host=host)
    result = checkrun.could_not_check(config, error) if error else quick.result(host, baseline, {})
    return node_check.result(
        host, stdout=json.dumps(checkrun._public(result), default=str), rc=result["exit"]
    )


def test_a_person_drain_is_left_alone_and_an_older_wireup_drain_is_rechecked():
    plan = repair.plan(shown(capture("testbed_22.05.8_scontrol_show_node_o_drained.txt")), NODES)
    assert plan["nodes"]["n3"]["action"] == "not_ours"
    assert plan["nodes"]["n2"]["action"] == "recheck" and plan["nodes"]["n2"]["whose"] == "node"
    assert plan["nodes"]["n1"]["action"] == "unread"  # not in that answer: nothing is done
    assert plan["recheck"] == ["n2"]
    assert (
        "Repair: n3 (node3) drained by a person or another tool (Reason=bad dimm=2 [see ticket 7]): "
        "left alone" in plan["show"]
    )
    back = repair.returns(plan, {"n2": checked("n2")}, resume=True, check_mode=False)
    assert [r["node"] for r in back["resume"]] == ["node2"]
    assert back["resume"][0]["argv"] == ["scontrol", "update", "NodeName=node2", "State=RESUME"]
    assert "n3" not in back["nodes"] and "n1" not in back["nodes"]


def test_a_job_drain_is_cleared_without_a_recheck():
    text = drained_for(
        {"node2": slurm.drain_reason("rank 3 ran out of host memory", whose="job", check="job")}
    )
    plan = repair.plan(shown(text), NODES)
    assert plan["nodes"]["n2"]["action"] == "clear" and plan["recheck"] == []
    back = repair.returns(plan, {}, resume=True, check_mode=False)
    assert back["resume"][0]["why"] == "a job's problem: no hardware recheck needed"


def test_a_node_drained_for_a_fault_returns_only_when_the_recheck_passes_and_resume_is_asked():
    reason = slurm.drain_reason("NIC mlx5_0:1 missing", whose="hw", check="quick")
    plan = repair.plan(shown(drained_for({"node2": reason})), NODES)
    assert plan["recheck"] == ["n2"] and plan["nodes"]["n1"]["action"] == "in_service"
    # the fault is still there: ERROR (or FAIL) keeps it drained
    still = repair.returns(
        plan, {"n2": checked("n2", error="nvidia-smi not found")}, resume=True, check_mode=False
    )
    assert still["resume"] == [] and still["nodes"]["n2"]["action"] == "kept"
    assert "stays drained: the quick check says ERROR" in still["show"][0]
    # no result at all (the recheck did not run): kept, fails closed
    assert repair.returns(plan, {}, resume=True, check_mode=False)["resume"] == []
    # fixed: a dry run by default, check mode too, and only -e repair_resume=true returns it
    dry = repair.returns(plan, {"n2": checked("n2")}, resume=False, check_mode=False)
    assert dry["resume"] == [] and dry["nodes"]["n2"]["action"] == "would_resume"
    assert "dry run: -e repair_resume=true returns it" in dry["show"][0]
    assert repair.returns(plan, {"n2": checked("n2")}, resume=True, check_mode=True)["resume"] == []
    assert len(repair.returns(plan, {"n2": checked("n2")}, resume=True, check_mode=False)["resume"]) == 1


def test_a_bench_drain_is_not_returned_by_the_quick_check_alone():
    reason = slurm.drain_reason("fabric run R named node2 bad", whose="hw", check="bench")
    plan = repair.plan(shown(drained_for({"node2": reason})), NODES)
    back = repair.returns(plan, {"n2": checked("n2")}, resume=True, check_mode=False)
    assert back["resume"] == [] and "run bench.yml on it" in back["nodes"]["n2"]["why"]


def test_a_failed_read_does_nothing_and_a_bad_node_name_is_an_error():
    plan = repair.plan({"rc": 1, "stdout": "", "stderr": "slurm_load_node error: Unable to contact"}, NODES)
    assert {e["action"] for e in plan["nodes"].values()} == {"unread"} and plan["recheck"] == []
    assert "(scontrol: slurm_load_node error: Unable to contact)" in plan["show"][0]
    bad = repair.plan(shown(""), {"n1": {"hostname": "node1 State=RESUME"}})
    assert bad["nodes"] == {} and "is not a plain host name" in bad["errors"][0]
