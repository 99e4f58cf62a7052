"""repair.yml -e repair_act=true (issue 37 item 2): which drained node is acted on in which batch,
within the blast radius; the idle check before acting (squeue and nvidia-smi --query-compute-apps,
a failed read is busy); each action's result and the recheck as history events. Fed with what the
producers really make: wireup-check's --json answer (check/run.py on our gpuhealth captures),
repair.plan/returns on the testbed's scontrol capture, node_check.result on that answer."""

import json
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.filter import wireup_repair
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import run
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import quick
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight, remediate, repair
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history

F = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
G = F / "gpuhealth/synthetic"
RESET = G / "h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"
REBOOT = G / "h200x2_580.159.04_q_x_gpu1_unknown_error_written.xml"
ISOLATE = G / "t4_515.105.01_q_x_60_retired_pages_written.xml"
IDLE = F / "slurm/testbed_22.05.8_scontrol_show_node_o_idle.txt"
SETTINGS = {"act": True, "batch": 1, "max_share": 10, "max_nodes": 8}


def check_json(host, xml_path):
    """wireup-check --json's stdout for a node whose nvidia-smi -q -x printed xml_path."""
    _parsed, found, problems, errors, _notes = run.gpu_health({"-q -x": xml_path.read_text()}, None)
    result = quick.result(
        host, None, None, found={"problems": problems, "errors": errors}, gpu_findings=found
    )
    return json.dumps(run._public(result), sort_keys=True, default=str)


def drained_state(reasons):
    """The testbed's scontrol show node -o (3 idle nodes) with wireup's drains set as slurmctld shows them."""
    lines = []
    for shown in IDLE.read_text().splitlines():
        node = shown.split()[0].removeprefix("NodeName=")
        if node in reasons:
            drained = shown.replace(" State=IDLE ", " State=IDLE+DRAIN ").rstrip()
            shown = f"{drained} Reason={reasons[node]} [root@2026-12-07T10:00:00]"  # noqa: PLW2901
        lines.append(shown)
    return {"rc": 0, "stdout": "\n".join(lines) + "\n", "stderr": ""}


def plans(faults, **settings):
    """repair.plan -> the recheck (node_check.result of wireup-check's answer) -> returns -> run_plan."""
    reasons = {n: slurm.drain_reason(f"GPU fault on {n}", whose="hw", check="quick") for n in faults}
    state = drained_state(reasons)
    nodes = {n: {"hostname": n} for n in ("node1", "node2", "node3")}
    plan = repair.plan(state, nodes)
    runs = {h: {"rc": 1, "stdout": check_json(h, faults[h])} for h in plan["recheck"]}
    results = {h: node_check.result(h, stdout=r["stdout"], rc=1) for h, r in runs.items()}
    back = repair.returns(plan, results, resume=True, check_mode=False)
    given = remediate.ActSettings(**{**SETTINGS, **settings})
    return plan, remediate.run_plan(plan, back, runs, state, "gpu_nodes", settings=given)


def test_the_findings_come_from_wireup_checks_own_answer():
    found = remediate.findings_of(check_json("node2", REBOOT))
    assert [f["remediation"] for f in found] == ["reboot"]
    reset = remediate.findings_of(check_json("node2", RESET))
    assert reset[0]["gpu"] == {
        "index": 0,
        "bus_id": "00000000:00:06.0",
        "uuid": "GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75",
        "serial": "1653724057182",
    }
    # off its grammar: a field is dropped, never passed on to an argv
    hostile = json.dumps(
        {"gpu_findings": [{"remediation": "reset", "message": "x", "gpu": {"bus_id": "0;reboot"}}]}
    )
    assert remediate.findings_of(hostile)[0]["gpu"]["bus_id"] is None
    assert remediate.findings_of("wireup-check: FAIL node2") == []


def test_one_node_within_the_blast_radius_is_acted_on():
    _plan, remedy = plans({"node2": REBOOT})
    assert remedy["act"] == ["node2"] and remedy["refused"] == []
    assert remedy["nodes"]["node2"]["cls"] == "reboot"
    assert remedy["batches"] == [["node2"]]
    assert remedy["show"][0].startswith("Remediate: node2 (node2): reboot (reboot the node")
    dry = plans({"node2": REBOOT}, act=False)[1]
    assert dry["act"] == [] and "would act on it (dry run: -e repair_act=true does it)" in dry["show"][0]


def test_two_nodes_over_the_blast_radius_stop_with_the_shared_cause():
    _plan, remedy = plans({"node2": REBOOT, "node3": REBOOT}, batch=2)
    assert remedy["act"] == [] and remedy["batches"] == []
    assert remedy["show"][0].endswith(
        "reboot the node (a GPU off the bus or the driver asks for it)): "
        "not acted on: above the blast radius (below): " + remedy["nodes"]["node2"]["why"]
    )
    [line, *_] = remedy["refused"]
    assert line.startswith(
        "wireup: blast radius: 2 of 3 nodes of Slurm partition testbed would be out of service"
    )
    assert "The cause is likely shared (a driver rollout, a switch, the fabric manager): 2 of 2 have" in line
    # a bigger limit: both, in batches of repair_batch
    wide = plans({"node2": REBOOT, "node3": RESET}, batch=1, max_share=100)[1]
    assert wide["batches"] == [["node2"], ["node3"]] and wide["refused"] == []


def test_batches_of():
    assert remediate.batches_of(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    assert remediate.batches_of([], 3) == []


STEP = remediate.StepSettings(act=True, driver="580.159.04", run_id="20261207T140000Z", results_dir="/srv/r")
IDLE_READ = {"rc": 0, "stdout": "", "stderr": ""}


def candidate(xml):
    return plans({"node2": xml}, max_share=100)[1]["nodes"]["node2"]


def test_a_node_with_a_slurm_job_is_refused_with_the_reason():
    jobs = {"rc": 0, "stdout": "4242\n", "stderr": ""}
    step = remediate.node_step(candidate(RESET), jobs, IDLE_READ, STEP)
    assert step["commands"] == [] and step["reboot"] == [] and not step["recheck"]
    assert step["show"] == [
        f"Remediate: node2: reset ({remediate.CLASSES['reset']}): not now, the node is busy: "
        "Slurm job(s) 4242 on it"
    ]


@pytest.mark.parametrize(
    "apps,why",
    [
        (
            {
                "rc": 0,
                "stdout": "4121, /opt/wireup/venv/bin/python3, GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75\n",
            },
            "1 process(es) on its GPUs (/opt/wireup/venv/bin/python3)",
        ),
        ({"rc": 6, "stdout": "No devices were found\n"}, "cannot tell whether it is idle (nvidia-smi"),
        (
            {"rc": 2, "msg": "[Errno 2] No such file or directory: b'nvidia-smi'"},
            "cannot tell whether it is idle",
        ),
    ],
)
def test_gpu_processes_or_a_failed_read_refuse(apps, why):
    step = remediate.node_step(candidate(RESET), IDLE_READ, apps, STEP)
    assert step["blocked"].startswith(why) and step["commands"] == []


def test_an_idle_node_gets_its_action_then_the_recheck():
    reset = remediate.node_step(candidate(RESET), IDLE_READ, IDLE_READ, STEP)
    assert reset["commands"] == [["nvidia-smi", "--gpu-reset", "-i", "00000000:00:06.0"]] and reset["recheck"]
    reboot = remediate.node_step(candidate(REBOOT), IDLE_READ, IDLE_READ, STEP)
    assert reboot["reboot"] == ["systemctl reboot"] and reboot["commands"] == []
    shown = remediate.node_step(
        candidate(REBOOT), IDLE_READ, IDLE_READ, remediate.StepSettings(**{**STEP.__dict__, "act": False})
    )
    assert shown["reboot"] == [] and "would run (dry run): systemctl reboot" in shown["show"][0]


def test_isolation_writes_the_ticket_and_leaves_the_node_drained():
    step = remediate.node_step(candidate(ISOLATE), IDLE_READ, IDLE_READ, STEP)
    assert not step["recheck"] and step["commands"][0][:4] == [
        "scontrol",
        "update",
        "NodeName=node2",
        "State=DRAIN",
    ]
    [t] = step["tickets"]
    assert t["path"] == "/srv/r/tickets/node2/20261207T140000Z-gpu0.json"
    assert t["ticket"]["gpu"]["bus_id"] == "00000000:00:1E.0" and t["ticket"]["driver"] == "580.159.04"
    done = remediate.acted(step, [{"rc": 0, "changed": True}], [])
    assert not done["recheck"] and done["events"][-1]["why"].endswith("it stays drained")


def test_each_action_and_its_result_is_an_event_and_a_failure_stops_the_recheck():
    step = remediate.node_step(candidate(REBOOT), IDLE_READ, IDLE_READ, STEP)
    ok = remediate.acted(step, [], [{"rebooted": True, "changed": True, "elapsed": 9}])
    assert ok["rechecks"] == ["quick"] and ok["events"] == [
        {"host": "node2", "why": "reboot: systemctl reboot: done (rebooted)"}
    ]
    bad = remediate.acted(
        step, [], [{"rebooted": False, "failed": True, "msg": "Timed out waiting for boot"}]
    )
    assert (
        not bad["recheck"]
        and bad["show"][-1] == "Remediate: node2: an action failed: no recheck, it stays drained"
    )
    events = history.item_events("action", ok["events"], "controller:root", when=1.0)
    assert events[0]["kind"] == "action" and events[0]["why"] == ok["events"][0]["why"]


def test_the_recheck_events_and_the_batchs_returns():
    plan, remedy = plans({"node2": REBOOT})
    step = remediate.node_step(remedy["nodes"]["node2"], IDLE_READ, IDLE_READ, STEP)
    acted = {"node2": remediate.acted(step, [], [{"rebooted": True}])}
    passed = node_check.result(
        "node2", stdout=json.dumps({"verdict": "PASS", "line": "wireup-check: PASS node2"})
    )
    [item] = remediate.recheck_items(remediate.rechecked(acted), {"node2": passed})
    assert item == {"host": "node2", "why": "recheck after the action: PASS: wireup-check: PASS node2"}
    assert history.item_events("recheck", [item], "controller:root")[0]["kind"] == "recheck"
    batch = repair.batch_plan(plan, remediate.rechecked(acted))
    assert batch["recheck"] == ["node2"] and list(batch["nodes"]) == ["node2"]
    back = repair.returns(batch, {"node2": passed}, resume=True, check_mode=False)
    assert [r["node"] for r in back["resume"]] == ["node2"]


@pytest.mark.parametrize("value", [0, -1, 1001, True, "2"])
def test_preflight_names_repair_batch(value):
    [error] = [e for e in preflight.host_errors({"repair_batch": value}) if "repair_batch" in e]
    assert error.startswith(f"repair_batch={value!r} must be a whole number from 1 to 1000")
    assert remediate.setting_errors({"repair_batch": 4, "repair_act": True}) == []
    assert remediate.setting_errors({"repair_act": "yes"})[0].startswith(
        "repair_act='yes' must be true or false"
    )


def test_the_filters_take_what_the_tasks_pass():
    """remedy.yml's and act.yml's filter calls, with the tasks' arguments by name (a missing or
    misspelled setting is an error)."""
    reasons = {"node2": slurm.drain_reason("GPU fault on node2", whose="hw", check="quick")}
    state = drained_state(reasons)
    plan = wireup_repair.wireup_repair_plan(state, {n: {"hostname": n} for n in ("node1", "node2", "node3")})
    runs = {"node2": {"rc": 1, "stdout": check_json("node2", REBOOT)}}
    back = wireup_repair.wireup_repair_return(
        plan, {"node2": node_check.result("node2", stdout=runs["node2"]["stdout"], rc=1)}, resume=True
    )
    remedy = wireup_repair.wireup_repair_remedy(
        plan, back, runs, state, "gpu_nodes", act=True, batch=1, max_share=10, max_nodes=8
    )
    assert remedy["act"] == ["node2"]
    step = wireup_repair.wireup_repair_step(
        remedy["nodes"]["node2"],
        IDLE_READ,
        IDLE_READ,
        act=True,
        driver="",
        run_id="20261207T140000Z",
        results_dir="/r",
    )
    acted = wireup_repair.wireup_repair_acted(step, [], [{"rebooted": True}])
    passed = node_check.result("node2", stdout=json.dumps({"verdict": "PASS", "line": "ok"}))
    assert wireup_repair.wireup_repair_rechecks({"node2": acted}, {"node2": passed})[0]["host"] == "node2"
    assert wireup_repair.wireup_repair_batch(plan, {"node2": acted})["recheck"] == ["node2"]
    with pytest.raises(TypeError):
        wireup_repair.wireup_repair_remedy(
            plan, back, runs, state, "gpu_nodes", act=True, batch=1, max_share=10
        )
