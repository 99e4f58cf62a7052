"""jobs.yml on a run launch.yml submitted to Slurm (issue 26): the run's record, squeue and sacct
read strictly (real testbed captures, then cut-off, hostile and mangled ones: "cannot tell", never
a state), the jobs plan of a Slurm run, each node's line and the closing line, list and follow."""

import json
import time

import pytest
from test_launch_jobs_follow import BASE, FINDING, GROUP, NODES, _jobctl, _node_job, launched
from test_slurm import capture

from ansible_collections.wireup.cluster.plugins.filter import wireup_slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core.checks import PATH_NAME
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

HOSTS = ["node1", "node2", "node3"]
PLAN = {"hosts": HOSTS, "nodes": {h: {"hostname": h} for h in HOSTS}}
OK = {"rc": 0, "stdout": "", "stderr": ""}
# `squeue --noheader --jobs 7 --format=%i|%T|%N` (testbed_22.05.8_squeue_format_running.txt's line
# with the sacct captures' job id 7; pending: that format without nodes); a job that left the queue
# long ago: Slurm 22.05's answer (stderr, exit code 1).
SQUEUE_RUNNING = {"rc": 0, "stdout": "7|RUNNING|node[1-3]\n", "stderr": ""}
SQUEUE_PENDING = {"rc": 0, "stdout": "7|PENDING|\n", "stderr": ""}
SQUEUE_GONE = {"rc": 1, "stdout": "", "stderr": "slurm_load_jobs error: Invalid job id specified\n"}


def sacct(name):
    return {"rc": 0, "stdout": capture(name), "stderr": ""}


def running_sacct():
    """testbed_22.05.8_sacct_running.txt without its first line (plain squeue's, pasted above it)."""
    return {"rc": 0, "stdout": "\n".join(capture("testbed_22.05.8_sacct_running.txt").splitlines()[1:])}


def test_squeue_captures_in_jobs_yml_format():
    running = {"rc": 0, "stdout": capture("testbed_22.05.8_squeue_format_running.txt"), "stderr": ""}
    assert slurm.read_squeue(running, "1") == {"known": True, "state": "RUNNING", "nodes": HOSTS, "why": ""}
    gone = {"rc": 0, "stdout": capture("testbed_22.05.8_squeue_format_after_scancel.txt"), "stderr": ""}
    assert slurm.read_squeue(gone, "1") == {"known": True, "state": "", "nodes": [], "why": ""}
    assert slurm.read_squeue(running, "2")["known"] is False  # another job's row


def test_a_running_job_stands_per_node_by_its_steps():
    st = slurm.job_status(SQUEUE_RUNNING, running_sacct(), PLAN, "7")
    assert (st["known"], st["job_state"], st["queue_state"], st["over"]) == (
        True,
        "RUNNING",
        "RUNNING",
        False,
    )
    assert [slurm.node_line(h, st) for h in HOSTS] == [
        "node1: RUNNING (step 7.1)",
        "node2: RUNNING (step 7.0)",
        "node3: no step yet (the job is RUNNING)",  # the capture caught node3's step before it began
    ]


def test_a_cancelled_job_is_over_with_every_step_cancelled():
    st = slurm.job_status(SQUEUE_GONE, sacct("testbed_22.05.8_sacct_cancelled_by_scancel.txt"), PLAN, "7")
    assert (st["known"], st["job_state"], st["queue_state"], st["over"]) == (True, "CANCELLED", "", True)
    assert slurm.node_line("node3", st) == "node3: CANCELLED, exit code 0 (step 7.2)"
    assert (
        st["reason"] == "Slurm job 7 was stopped by Slurm (CANCELLED): scancel, its time limit or preemption"
    )


def test_a_failed_node_is_named_with_its_exit_code():
    st = slurm.job_status(SQUEUE_GONE, sacct("testbed_22.05.8_sacct_node2_failed.txt"), PLAN, "5")
    assert st["known"] and st["over"] and st["first_failure"] == "node2"
    assert slurm.node_line("node2", st) == "node2: FAILED, exit code 1 (step 5.1)"
    assert st["reason"] == "node2 exited with code 1 in Slurm job 5 (FAILED)"


def test_a_job_just_submitted_stands_as_squeue_says():
    """sacct has no row of a pending job yet (the testbed capture's note): squeue's state counts."""
    st = slurm.job_status(SQUEUE_PENDING, OK, PLAN, "7")
    assert (st["known"], st["job_state"], st["over"]) == (True, "PENDING", False)
    assert slurm.node_line("node1", st) == "node1: no step yet (the job is PENDING)"


@pytest.mark.parametrize(
    ("squeue", "sacct_result", "why"),
    [
        # sacct without slurmdbd (the real message) and a failing squeue
        (
            SQUEUE_RUNNING,
            {"rc": 1, "stderr": "sacct: error: Problem talking to the database"},
            "sacct failed (rc 1)",
        ),
        (
            {"rc": 1, "stderr": "squeue: error: Unable to contact slurm controller"},
            OK,
            "squeue failed (rc 1)",
        ),
        # the running capture as it is: plain squeue's line pasted above sacct's
        (
            SQUEUE_RUNNING,
            sacct("testbed_22.05.8_sacct_running.txt"),
            "sacct printed '7   testbed sl-cance",
        ),
        # another job's row, a cut-off row, a row with an injected field, control characters
        (SQUEUE_RUNNING, {"rc": 0, "stdout": "8|RUNNING|0:0|node1|Unknown\n"}, "not a row of job 7"),
        (SQUEUE_RUNNING, {"rc": 0, "stdout": "7|RUNNING|0:0|node[1-3]"}, "not a row of job 7"),
        (SQUEUE_RUNNING, {"rc": 0, "stdout": "7|COMPLETED|0:0|node1|Unknown|extra\n"}, "not a row"),
        (SQUEUE_RUNNING, {"rc": 0, "stdout": "7.0|COMPLETED|0:0|node1;rm -rf /|Unknown\n"}, "not a row"),
        (SQUEUE_RUNNING, {"rc": 0, "stdout": "7|COMPLETED\x1b[2J|0:0|node1|Unknown\n"}, "not a row"),
        # squeue: another job, two rows, a mangled row, nothing known anywhere
        (
            {"rc": 0, "stdout": "8|RUNNING|node1\n"},
            OK,
            "squeue printed '8|RUNNING|node1', not one row of job 7",
        ),
        ({"rc": 0, "stdout": "7|RUNNING|node1\n7|PENDING|\n"}, OK, "not one row of job 7"),
        ({"rc": 0, "stdout": "7|running|node1\n"}, OK, "not one row of job 7"),
        ({"rc": 0, "stdout": "7|RUNNING|node1 node2\n"}, OK, "not one row of job 7"),
        (SQUEUE_GONE, OK, "neither squeue nor sacct knows Slurm job 7"),
        (
            {"rc": 1, "stderr": "slurm_load_jobs error: Invalid job id specified; not really"},
            OK,
            "squeue failed",
        ),
    ],
)
def test_what_squeue_or_sacct_cannot_tell_is_never_a_state(squeue, sacct_result, why):
    st = slurm.job_status(squeue, sacct_result, PLAN, "7")
    assert st["known"] is False and st["over"] is False and st["nodes"] == {} and st["job_state"] == ""
    assert why in st["why"]
    assert slurm.node_line("node1", st).startswith("node1: cannot tell (")


@pytest.mark.parametrize("job_id", ["", "7;8", "7 ", "-7", "7.0", "7_", "\u0667", None, 7, "7_1_2", "1" * 41])
def test_a_job_id_fullmatches_its_grammar(job_id):
    assert not slurm.is_job_id(job_id)
    st = slurm.job_status(SQUEUE_RUNNING, running_sacct(), PLAN, job_id)
    assert st["known"] is False and "is not a Slurm job id" in st["why"]


def test_an_array_task_id_is_one():
    assert slurm.is_job_id("12_3") and slurm.squeue_argv("12_3")[3] == "12_3"
    st = slurm.job_status({"rc": 0, "stdout": "12_3|RUNNING|node1\n"}, OK, PLAN, "12_3")
    assert st["known"] and st["queue_state"] == "RUNNING"


# --- the jobs plan of a Slurm run -----------------------------------------------------------------


def slurm_found(job_id="4711", hosts=("node1", "node2", "node3")):
    """Each node's `wireup-jobctl latest --record` answer for a run wireup-jobctl record kept."""
    run = launched(run_id="20261202T000000Z-0001")
    sp = slurm.run_plan(f"{job_id}\n", run)
    lines = [sp["run_id"], json.dumps({"run_id": sp["run_id"], "started": 5.0, "record": True})]
    lines.append(json.dumps(sp["record"]))
    return {h: {"rc": 0, "stdout": "\n".join(lines) + "\n"} for h in hosts}, sp


def test_jobs_plan_finds_a_slurm_run_by_its_record():
    found, sp = slurm_found()
    plan = torchrun_launch.job_plan(GROUP, NODES, **_inventory())
    jobs = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=GROUP)
    assert (jobs["run_id"], jobs["errors"], jobs["slurm"]["job_id"]) == ("slurm-4711", [], "4711")
    assert jobs["results"] == "/tmp/results/jobs/it-healthy-only-slurm-4711" == sp["results"]
    assert jobs["slurm"]["scancel_argv"] == [] and jobs["slurm"]["looks"] == 1
    assert jobs["slurm"]["out"] == "/opt/wireup/jobs/it-healthy-only/logs/slurm-4711.out"
    assert PATH_NAME.fullmatch(jobs["slurm"]["out_name"])
    # the same jobctl calls as a detached run: its status reads the step's log (logs/RUN_ID.log)
    assert jobs["argv"][1:4] == ["status", "/opt/wireup/jobs/it-healthy-only", "slurm-4711"]
    stop = torchrun_launch.jobs_plan(plan, "stop", found=found, play_hosts=GROUP, stop_grace=10)
    assert stop["slurm"]["scancel_argv"] == ["scancel", "4711"] and stop["slurm"]["looks"] == 20
    assert stop["argv"][1] == "stop"
    check = torchrun_launch.jobs_plan(plan, "stop", found=found, play_hosts=GROUP, check_mode=True)
    assert check["slurm"]["scancel_argv"] == [] and check["argv"][1] == "status"
    assert torchrun_launch.jobs_plan(plan, "list", found=found)["slurm"]["job_id"] == ""
    # jobs.yml's one loop on the run's master: scancel for stop, then sacct, then squeue.
    squeue = ["squeue", "--noheader", "--jobs", "4711", "--format=%i|%T|%N"]
    assert jobs["slurm"]["reads"] == [sp["sacct_argv"], squeue]
    assert stop["slurm"]["reads"] == [["scancel", "4711"], sp["sacct_argv"], squeue]
    assert check["slurm"]["reads"][0] == sp["sacct_argv"] and len(check["slurm"]["reads"]) == 2
    assert torchrun_launch.jobs_plan(plan, "list", found=found)["slurm"]["reads"] == []


def test_reads_of_takes_sacct_and_squeue_by_their_command():
    sacct = {"item": ["sacct", "-j", "7"], "rc": 0, "stdout": "7|COMPLETED"}
    squeue = {"item": ["squeue", "--jobs", "7"], "rc": 1, "stderr": "Invalid job id specified"}
    scancel = {"item": ["scancel", "7"], "rc": 0}
    assert slurm.reads_of({"results": [scancel, sacct, squeue]}) == (sacct, squeue)
    # jobs.yml's loop names its variable __argv: Ansible keeps each item under that name
    named = [{"__argv": r.pop("item"), "ansible_loop_var": "__argv", **r} for r in (scancel, sacct, squeue)]
    assert slurm.reads_of({"results": named}) == (named[1], named[2])
    # the loop's until looks at one sacct answer: squeue counts as answered
    assert slurm.reads_of({"rc": 0, "stdout": "x"}) == ({"rc": 0, "stdout": "x"}, {"rc": 0})
    # not a Slurm run: the loop ran nothing
    assert slurm.reads_of({"results": [], "skipped": True}) == ({}, {})
    assert slurm.job_status(*reversed(slurm.reads_of({"results": []})), {}, "")["known"] is False


def test_a_slurm_runs_logs_fetch_its_batch_output_too():
    jobs = _jobs("logs")
    status = {"stdout": json.dumps({"state": "slurm", "log": "/opt/wireup/jobs/x/logs/slurm-7.log"})}
    node, out = torchrun_launch.jobs_fetches(jobs, "node1", status)
    assert (node["validate_checksum"], node["fail_on_missing"]) == (False, False)
    assert node["dest"] == f"{jobs['results']}/node1.log"
    assert out == {
        "src": jobs["slurm"]["out"],
        "dest": f"{jobs['results']}/{jobs['slurm']['out_name']}",
        "validate_checksum": False,
        "fail_on_missing": False,
    }
    assert torchrun_launch.jobs_fetches(_jobs("status"), "node1", status) == []


def _inventory():
    """jobs.yml's plan of the group from the inventory."""
    return dict(BASE, run_id="ignored", follow=True)


@pytest.mark.parametrize("bad", ["4711;reboot", "../4711", "", " 4711", 4711, "4711\n"])
def test_a_record_whose_slurm_job_id_is_not_one_is_unreadable(bad):
    found, _sp = slurm_found()
    for result in found.values():
        lines = result["stdout"].splitlines()
        record = json.loads(lines[2])
        record["slurm_job_id"] = bad
        result["stdout"] = "\n".join([*lines[:2], json.dumps(record)])
    plan = torchrun_launch.job_plan(GROUP, NODES, **_inventory())
    jobs = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=GROUP)
    if bad == "":
        return  # no Slurm job: a detached run's record
    assert jobs["slurm"]["job_id"] == "" and any("is not one" in n for n in jobs["notes"])


def test_records_naming_different_slurm_jobs_stop_jobs_yml():
    found, _sp = slurm_found()
    other, _ = slurm_found("4712")
    found["node2"] = dict(other["node2"])
    found["node2"]["stdout"] = found["node2"]["stdout"].replace('"slurm-4712"', '"slurm-4711"', 2)
    found["node2"]["stdout"] = found["node2"]["stdout"].replace("slurm-4712\n", "slurm-4711\n", 1)
    plan = torchrun_launch.job_plan(GROUP, NODES, **_inventory())
    jobs = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=GROUP)
    assert jobs["hosts"] == [] and any("name different Slurm jobs: 4711, 4712" in e for e in jobs["errors"])


def _jobs(action="status"):
    found, _sp = slurm_found("7")
    plan = torchrun_launch.job_plan(GROUP, NODES, **_inventory())
    return torchrun_launch.jobs_plan(plan, action, found=found, play_hosts=GROUP)


def _jobctl_status(tail=("step output",), said=()):
    line = {"state": "slurm", "rc": None, "started": 5.0, "log": "/x/logs/slurm-7.log", "slurm_job": "7"}
    return {"rc": 0, "stdout": "\n".join([*said, json.dumps(line), *tail])}


def test_each_node_says_its_step_and_log_tail_and_the_run_its_job_state():
    jobs = _jobs()
    st = slurm.job_status(SQUEUE_RUNNING, running_sacct(), {"hosts": jobs["hosts"], "nodes": NODES}, "7")
    node = torchrun_launch.jobs_node(
        jobs, "node2", _jobctl_status(), "/opt/wireup/bin/wireup-jobctl", slurm=st
    )
    assert node["errors"] == [] and node["lines"] == ["node2: RUNNING (step 7.0)", "step output"]
    lines = torchrun_launch.jobs_summary(jobs, {}, {}, GROUP, slurm=st)
    assert lines[0].startswith(
        "job it-healthy-only run slurm-7 (Slurm job 7): RUNNING: Slurm job 7 is running on"
    )


def test_a_node_fails_when_slurm_cannot_tell():
    jobs = _jobs()
    st = slurm.job_status(SQUEUE_RUNNING, {"rc": 1, "stderr": "no slurmdbd"}, {"hosts": jobs["hosts"]}, "7")
    node = torchrun_launch.jobs_node(jobs, "node1", _jobctl_status(), "/x", slurm=st)
    assert node["errors"] == ["node1: cannot tell how Slurm job 7 stands: sacct failed (rc 1): 'no slurmdbd'"]
    assert torchrun_launch.jobs_node(jobs, "node1", _jobctl_status(), "/x")["errors"][0].startswith(
        "node1: cannot tell how Slurm job 7 stands: squeue and sacct were not read"
    )
    assert (
        "(Slurm job 7): cannot tell: sacct failed"
        in torchrun_launch.jobs_summary(jobs, {}, {}, GROUP, slurm=st)[0]
    )


def test_stop_needs_the_job_ended_and_nothing_left_on_the_node():
    jobs = _jobs("stop")
    hosts = {"hosts": jobs["hosts"], "nodes": NODES}
    said = ("stopped run slurm-7 of /opt/wireup/jobs/it-healthy-only",)
    over = slurm.job_status(SQUEUE_GONE, sacct("testbed_22.05.8_sacct_cancelled_by_scancel.txt"), hosts, "7")
    node = torchrun_launch.jobs_node(jobs, "node1", _jobctl_status(said=said), "/x", slurm=over)
    assert node["errors"] == [] and node["lines"][-1] == f"node1: {said[0]} (nothing of it left here)"
    still = slurm.job_status(SQUEUE_RUNNING, running_sacct(), hosts, "7")
    node = torchrun_launch.jobs_node(jobs, "node1", _jobctl_status(said=said), "/x", slurm=still)
    assert node["errors"] == ["node1: Slurm job 7 is still RUNNING after scancel"]
    # wireup-jobctl stop found processes of the run it could not end: its own failure
    died = {"rc": 2, "stdout": "", "stderr": "wireup-jobctl: processes of run slurm-7 still alive: 123"}
    node = torchrun_launch.jobs_node(jobs, "node1", died, "/x", slurm=over)
    assert node["errors"] == [
        "node1: wireup-jobctl failed: wireup-jobctl: processes of run slurm-7 still alive: 123"
    ]


def test_list_shows_slurm_runs_beside_detached_ones():
    runs = {
        "node1": [
            {"job": "train", "run_id": "slurm-7", "started": 20, "state": "slurm", "slurm_job": "7"},
            {"job": "train", "run_id": "r1", "started": 10, "state": "exited", "rc": 0},
        ],
        "node2": [{"job": "train", "run_id": "slurm-7", "started": 20, "state": "slurm", "slurm_job": "7;x"}],
    }
    assert torchrun_launch.runs_table(runs) == [
        "train slurm-7 started 1970-01-01 00:00:20 UTC: node1 Slurm job 7, node2 Slurm job ?",
        "train r1 started 1970-01-01 00:00:10 UTC: node1 exited 0",
    ]


def test_launch_says_the_job_id_and_how_to_follow_it():
    run = launched(slurm=True)
    plan = dict(run, **slurm.run_plan("4711\n", run))
    lines = torchrun_launch.follow_lines(
        plan, {h: f"recorded run slurm-4711 on {h}" for h in plan["hosts"]}, ["inv.yml"]
    )
    assert lines[len(plan["hosts"])] == (
        f"job it-healthy-only run slurm-4711 submitted as Slurm job 4711 for {plan['nnodes']} node(s), "
        f"{plan['world_size']} process(es); Slurm runs it without this playbook."
    )
    assert lines[-1] == (
        "list:   .venv/bin/ansible-playbook -i inv.yml jobs.yml -e torchrun_launch_action=list"
    )


# --- where jobs.yml connects (issue 35 item 6): the master a node's record names ------------------
# jobs.yml runs scancel, sacct and squeue on the run's master (delegate_to). The master comes from
# run.json on the nodes, which a node (or whoever owns its job folder) can rewrite: it must be a
# host of the run in this inventory, or nothing is delegated to it.
HOSTILE_MASTERS = [
    "localhost",  # the controller itself
    "node9",  # a host outside the inventory
    "-oProxyCommand=touch /tmp/wireup-pwned",  # an ssh option
    "node1\n",  # a host name with a trailing newline
    "node4",  # in the group, but not one of the run's hosts (it ran on node1-3)
    "",  # no master at all
    ["node1"],  # not a string
]


def _recorded(tmp_path, job_id="4711", hosts=("node1", "node2", "node3"), masters=None):
    """Each node's `wireup-jobctl latest --record` answer from the real wireup-jobctl, after
    `wireup-jobctl record` kept slurm.run_plan's record there (launch.yml's Slurm path); ``masters``
    rewrites a node's run.json with another master (a node that lies)."""

    # node4 was left out at launch (torchrun_launch_on_failed=skip): the run is node1-3's.
    sp = slurm.run_plan(f"{job_id}\n", launched({"node4": FINDING}, run_id="20261202T000000Z-0001"))
    found = {}
    for host in hosts:
        job = _node_job(tmp_path, host)
        env = {"WIREUP_RUN_RECORD": json.dumps(sp["record"])}
        assert _jobctl("record", job, sp["run_id"], job_id, env=env)["rc"] == 0
        if host in (masters or {}):
            run_json = job / "runs" / sp["run_id"] / "run.json"
            record = json.loads(run_json.read_text())
            record["master"] = masters[host]
            run_json.write_text(json.dumps(record) + "\n")
        found[host] = _jobctl("latest", job, "--record", "")
    return found, sp


@pytest.mark.parametrize("master", HOSTILE_MASTERS)
def test_a_master_that_is_not_a_host_of_the_run_is_never_connected_to(tmp_path, master):
    found, _sp = _recorded(tmp_path, masters=dict.fromkeys(HOSTS, master))
    plan = torchrun_launch.job_plan(GROUP, NODES, **_inventory())
    for action in ("status", "logs", "stop"):
        jobs = torchrun_launch.jobs_plan(plan, action, found=found, play_hosts=GROUP)
        # Nothing of Slurm is asked anywhere, and the master is none of the hostile values.
        assert jobs["slurm"]["reads"] == [], jobs["slurm"]
        assert jobs["master"] != master and jobs["slurm"].get("on") == ""
        refused = [n for n in jobs["notes"] if "is refused" in n]
        assert len(refused) == 3, jobs["notes"]
        for host, line in zip(HOSTS, refused, strict=True):
            assert line.startswith(f"{host}'s record of run slurm-4711 is refused: its master ")
            assert "not a host of the run in torchrun_launch_group=gpu_nodes" in line
            assert "\n" not in line


def test_one_lying_node_is_refused_and_the_others_records_decide(tmp_path):
    found, _sp = _recorded(tmp_path, masters={"node2": "localhost"})
    plan = torchrun_launch.job_plan(GROUP, NODES, **_inventory())
    jobs = torchrun_launch.jobs_plan(plan, "stop", found=found, play_hosts=GROUP)
    assert (jobs["master"], jobs["errors"], jobs["hosts"]) == ("node1", [], HOSTS)
    assert jobs["slurm"]["reads"][0] == ["scancel", "4711"] and jobs["slurm"].get("on") == "node1"
    assert jobs["notes"] == [
        "node2's record of run slurm-4711 is refused: its master 'localhost' is not a host of the run in "
        "torchrun_launch_group=gpu_nodes (jobs.yml runs scancel, sacct and squeue there); nothing of it "
        "is used: check /opt/wireup/jobs/it-healthy-only/runs/slurm-4711/run.json on node2"
    ]
    # A master that is a host of the run is followed (the run re-chose it when node1 was left out).
    found, _ = _recorded(tmp_path / "again", masters=dict.fromkeys(HOSTS, "node3"))
    jobs = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=GROUP)
    assert (jobs["master"], jobs["slurm"].get("on"), jobs["notes"]) == ("node3", "node3", [])


# --- host lists bounded by what the job could have (issue 35 item 7) ----------------------------
def test_a_host_list_longer_than_the_job_is_cannot_tell_and_never_expanded():
    t0 = time.monotonic()
    huge = {"rc": 0, "stdout": "7|RUNNING|n[0-9999999]\n", "stderr": ""}
    st = slurm.job_status(huge, running_sacct(), PLAN, "7")
    assert st["known"] is False and "names 10000000 hosts, more than 3" in st["why"], st["why"]
    four = {"rc": 0, "stdout": running_sacct()["stdout"].replace("node[1-3]", "node[1-4]")}
    st = slurm.job_status(SQUEUE_RUNNING, four, PLAN, "7")
    assert st["known"] is False and "names 4 hosts, more than 3" in st["why"], st["why"]
    assert time.monotonic() - t0 < 1


def test_a_run_that_also_ran_outside_the_inventory_may_name_all_its_nodes(tmp_path):
    # The run's record names node1-4; this inventory's group has node1-3 only (node4 not followed).
    sp = slurm.run_plan("7\n", launched(run_id="20261202T000000Z-0001"))
    meta = {"run_id": sp["run_id"], "started": 5.0, "record": True}
    line = "\n".join([sp["run_id"], json.dumps(meta), json.dumps(sp["record"])]) + "\n"
    found = {h: {"rc": 0, "stdout": line} for h in HOSTS}
    plan = torchrun_launch.job_plan(HOSTS, NODES, **_inventory())
    jobs = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=HOSTS)
    assert (jobs["hosts"], jobs["slurm"]["nodes_max"]) == (HOSTS, 4)
    sacct_ = {"__argv": ["sacct"], "ansible_loop_var": "__argv", **running_sacct()}
    sacct_["stdout"] = sacct_["stdout"].replace("node[1-3]", "node[1-4]")
    squeue = {"__argv": ["squeue"], "ansible_loop_var": "__argv", "rc": 0, "stdout": "7|RUNNING|node[1-4]\n"}
    st = wireup_slurm.wireup_slurm_job_status({"results": [sacct_, squeue]}, jobs, plan)
    assert st["known"] and st["job_state"] == "RUNNING", st["why"]
    # one more than the run had is not its answer
    squeue["stdout"] = "7|RUNNING|node[1-5]\n"
    st = wireup_slurm.wireup_slurm_job_status({"results": [sacct_, squeue]}, jobs, plan)
    assert not st["known"] and "more than 4" in st["why"]
