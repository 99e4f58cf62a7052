"""jobs.yml follows the run that really ran (torchrun_launch.jobs_plan with every node's ``wireup-jobctl
latest --record`` answer): a run started with torchrun_launch_on_failed=skip records its hosts and
master when it starts (runs/RUN_ID/run.json), and status, logs and stop act on exactly those hosts,
naming the others of the group as not part of it. The newest run is the newest on any node, not the
inventory master's (a run that left the master out is not there). A run without a readable record
(run.json missing or damaged) is followed on every
node of the group, with a line saying so.

The answers come from the real wireup-jobctl, one job folder per "node" under tmp_path, or are
written as it prints them."""

import json
import os
import pathlib
import subprocess
import time

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

JOBCTL = pathlib.Path(__file__).resolve().parents[2] / "roles" / "torchrun_launch" / "files" / "wireup-jobctl"
GROUP = ["node1", "node2", "node3", "node4"]
NODES = {
    h: {"address": f"10.0.0.{i}", "interface": "eth0", "gpu_present": False, "gpu_count": 0, "hostname": h}
    for i, h in enumerate(GROUP, 1)
}
BASE = {
    "job": "it-healthy-only",
    "program": "/opt/wireup/examples/ddp_multinode.py",
    "base_dir": "/opt/wireup",
    "venv_path": "/opt/wireup/venv",
    "results_dir": "/tmp/results",
    "group": "gpu_nodes",
    "node_group": "gpu_nodes",
    "nproc_per_node": 1,
    "master_host": "node1",
}
FINDING = "fabric run 20261201T040000Z named node3 bad: round 1 with node4: 0.0236 GB/s FAIL"
NO_JOBCTL = {"rc": 2, "msg": "[Errno 2] No such file or directory: b'/opt/wireup/bin/wireup-jobctl'"}
# The same under ansible-core 2.19 (registered on this machine, ansible-core 2.19.14, command module
# with failed_when: false, the program absent).
NO_JOBCTL_219 = {
    "changed": False,
    "cmd": "/opt/wireup/bin/wireup-jobctl list /opt/wireup/jobs",
    "failed": False,
    "failed_when_result": False,
    "failed_when_suppressed_exception": "(traceback unavailable)",
    "msg": "Error executing command.",
    "rc": 2,
    "stderr": "",
    "stderr_lines": [],
    "stdout": "",
    "stdout_lines": [],
}
# wireup-jobctl's own exit code 2 (its usage errors) is not a missing program.
JOBCTL_DIED = {
    "rc": 2,
    "msg": "non-zero return code",
    "stdout": "",
    "stderr": "wireup-jobctl: bad run id '../x'",
}


def inventory_plan(**kw):
    """jobs.yml's plan: the whole group from the inventory (no torchrun_launch_failed)."""
    return torchrun_launch.job_plan(GROUP, NODES, **dict(BASE, run_id="ignored", follow=True, **kw))


def launched(failed=None, run_id="20261201T050000Z-1a2b", **kw):
    """launch.yml's plan of a run (with torchrun_launch_on_failed=skip when nodes failed)."""
    return torchrun_launch.job_plan(
        GROUP, NODES, **dict(BASE, run_id=run_id, failed=failed or {}, on_failed="skip", **kw)
    )


def answer(run_id, started, record=None):
    """wireup-jobctl latest --record's answer, as the script prints it."""
    lines = [run_id, json.dumps({"run_id": run_id, "started": started, "record": record is not None})]
    if record is not None:
        lines.append(json.dumps(record))
    return {"rc": 0, "stdout": "\n".join(lines) + "\n"}


NO_RUN_LINE = {"rc": 0, "stdout": "20261130T230000Z-0001\n"}  # line 1 only: no answer


def test_a_run_records_its_hosts_master_and_who_was_left_out():
    p = launched({"node3": FINDING})
    rec = p["record"]
    assert (rec["hosts"], rec["master"], rec["left_out"]) == (
        ["node1", "node2", "node4"],
        "node1",
        {"node3": FINDING},
    )
    assert (rec["run_id"], rec["job"], rec["group"], rec["nnodes"]) == (
        "20261201T050000Z-1a2b",
        "it-healthy-only",
        "gpu_nodes",
        3,
    )
    # The master left out: the record names the one that ran it.
    assert launched({"node1": FINDING})["record"]["master"] == "node2"
    json.dumps(rec)  # it travels as JSON (WIREUP_RUN_RECORD)


def test_a_skip_run_is_followed_on_its_hosts_and_names_the_left_out_node():
    rec = launched({"node3": FINDING})["record"]
    found = {h: answer("R2", 100.0 + i, rec) for i, h in enumerate(["node1", "node2", "node4"])}
    found["node3"] = answer("R1", 50.0)  # node3's newest is an older run (without a record)
    for action in ("status", "logs", "stop"):
        jobs = torchrun_launch.jobs_plan(inventory_plan(), action, found=found, play_hosts=GROUP)
        assert jobs["errors"] == [] and jobs["run_id"] == "R2"
        assert jobs["hosts"] == ["node1", "node2", "node4"] and jobs["master"] == "node1"
        assert jobs["not_part"] == {"node3": f"left out at launch: {FINDING}"}
        assert jobs["notes"] == []
    stop = torchrun_launch.jobs_plan(inventory_plan(), "stop", found=found, play_hosts=GROUP)
    assert stop["argv"][1:4] == ["stop", "/opt/wireup/jobs/it-healthy-only", "R2"]
    # node3's line: not part of the run, and why; no failure
    shown = torchrun_launch.jobs_node(stop, "node3", {"skipped": True}, stop["argv"][0])
    assert shown == {
        "errors": [],
        "status": {},
        "lines": [f"node3: not part of run R2 (left out at launch: {FINDING})"],
    }
    # the run's line is over its hosts only: not "node3 never started"
    states = {h: {"state": "exited", "rc": 0} for h in jobs["hosts"]}
    status = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)
    assert torchrun_launch.jobs_summary(status, states, {}, GROUP) == [
        "job it-healthy-only run R2: every node exited with code 0; not part of it: node3"
    ]


def test_check_mode_stop_only_looks():
    rec = launched({"node3": FINDING})["record"]
    found = {h: answer("R2", 1.0, rec) for h in ["node1", "node2", "node4"]} | {"node3": NO_JOBCTL}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "stop", found=found, play_hosts=GROUP, check_mode=True)
    assert jobs["argv"][1] == "status" and jobs["hosts"] == ["node1", "node2", "node4"]


def test_the_newest_run_is_found_on_any_node_when_the_master_was_left_out():
    """The inventory's master node1 FAILed: the skip run ran on node2..node4 with node2 as master.
    node1's newest run is the older full run: before, jobs.yml followed that one (or said 'no run')."""
    full = launched(run_id="R1")["record"]
    skip = launched({"node1": FINDING}, run_id="R2")["record"]
    found = {"node1": answer("R1", 100.0, full)} | {h: answer("R2", 200.0, skip) for h in GROUP[1:]}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)
    assert (jobs["run_id"], jobs["hosts"], jobs["master"]) == ("R2", ["node2", "node3", "node4"], "node2")
    assert jobs["not_part"] == {"node1": f"left out at launch: {FINDING}"}
    assert jobs["notes"] == ["run R2's master is node2 (the inventory's, node1, was left out)"]
    # node1 never ran anything (no wireup-jobctl there): not part of it either, and no error
    found["node1"] = NO_JOBCTL
    assert (
        torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)["errors"] == []
    )


def test_an_older_run_is_followed_by_its_id_on_exactly_its_hosts():
    full = launched(run_id="R1")["record"]
    skip = launched({"node3": FINDING}, run_id="R2")["record"]
    # asked for R1: every node has it (node3's wireup-jobctl answers for R1 too)
    found = {h: answer("R1", 100.0, full) for h in GROUP}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "status", "R1", found=found, play_hosts=GROUP)
    assert (jobs["run_id"], jobs["hosts"], jobs["not_part"]) == ("R1", GROUP, {})
    # asked for R2: node3 does not have it (wireup-jobctl answers an empty run id)
    found = {h: answer("R2", 200.0, skip) for h in ("node1", "node2", "node4")}
    found["node3"] = answer("", None)
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "logs", "R2", found=found, play_hosts=GROUP)
    assert (jobs["run_id"], jobs["hosts"]) == ("R2", ["node1", "node2", "node4"])
    assert jobs["results"] == "/tmp/results/jobs/it-healthy-only-R2"
    # a run no node has
    nowhere = {h: answer("", None) for h in GROUP}
    assert torchrun_launch.jobs_plan(inventory_plan(), "status", "R9", found=nowhere, play_hosts=GROUP)[
        "errors"
    ] == [
        "job it-healthy-only has no run R9 on node1, node2, node3, node4: list the runs with "
        "-e torchrun_launch_action=list"
    ]
    bad = torchrun_launch.jobs_plan(inventory_plan(), "status", "../x", found=nowhere, play_hosts=GROUP)
    assert bad["errors"][0].startswith("torchrun_launch_run_id='../x' is not a usable run id")
    assert bad["hosts"] == []


def test_a_run_without_a_record_is_followed_on_the_whole_group_and_says_so():
    found = {h: answer("R1", 100.0) for h in GROUP}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)
    assert (jobs["run_id"], jobs["hosts"], jobs["not_part"]) == ("R1", GROUP, {})
    assert jobs["notes"] == [
        "run R1 has no record of its hosts (no run.json on its nodes): following every node of "
        "torchrun_launch_group=gpu_nodes; a node the run left out shows as never started"
    ]
    assert (
        torchrun_launch.jobs_summary(jobs, {h: {"state": "running"} for h in GROUP}, {}, GROUP)[1:]
        == jobs["notes"]
    )


def test_a_node_whose_answer_has_no_run_line_is_not_compared():
    """node3 answered its run id alone (a cut-off answer): the others' newest run wins, and node3,
    which the run left out, is not part of it."""
    rec = launched({"node3": FINDING})["record"]
    found = {h: answer("R2", 200.0, rec) for h in ("node1", "node2", "node4")} | {"node3": NO_RUN_LINE}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)
    assert (jobs["run_id"], jobs["hosts"], list(jobs["not_part"])) == (
        "R2",
        ["node1", "node2", "node4"],
        ["node3"],
    )


def test_no_run_and_no_wireup_jobctl_anywhere():
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "status", found={h: answer("", None) for h in GROUP})
    assert jobs["errors"] == [
        "job it-healthy-only has no run on node1, node2, node3, node4: start one with "
        ".venv/bin/ansible-playbook launch.yml -e torchrun_launch_job=it-healthy-only, or list the runs with "
        "-e torchrun_launch_action=list"
    ]
    assert jobs["hosts"] == []
    none = torchrun_launch.jobs_plan(inventory_plan(), "status", found=dict.fromkeys(GROUP, NO_JOBCTL))
    assert none["errors"] == [
        "node1, node2, node3, node4 of torchrun_launch_group=gpu_nodes has no /opt/wireup/bin/wireup-jobctl: "
        "wireup never launched a job there (.venv/bin/ansible-playbook launch.yml installs it)"
    ]
    # every node shows the error (the assert fails them all)
    assert torchrun_launch.jobs_node(none, "node1", {"skipped": True}, "/x")["errors"] == none["errors"]


def test_a_run_host_outside_the_play_is_named_and_the_left_out_node_need_not_be_reachable():
    rec = launched({"node3": FINDING})["record"]
    play = ["node1", "node2"]  # node4 unreachable, node3 (left out) unreachable too
    found = {h: answer("R2", 200.0, rec) for h in play}
    jobs = torchrun_launch.jobs_plan(inventory_plan(play_hosts=play), "stop", found=found, play_hosts=play)
    assert jobs["errors"] == [] and jobs["hosts"] == ["node1", "node2", "node4"]
    assert jobs["notes"] == [
        "node4 of run R2 not in this play (unreachable, or --limit): its part is not known, nor acted on"
    ]
    # the run's line counts node4 as gone: the run is not known to be well
    states = {"node1": {"state": "stopped"}, "node2": {"state": "stopped"}, "node4": {"state": "gone"}}
    assert torchrun_launch.jobs_stands(jobs, states, play) == (
        "job it-healthy-only run R2: FAILED: node4 became unreachable; not part of it: node3"
    )


def test_the_inventory_plan_of_jobs_yml_tolerates_hosts_outside_the_play():
    """jobs.yml plans the group with follow=True: node3 (left out at launch, now unreachable) is
    no error there; launch.yml keeps the rule that a job needs every node of its group."""
    play = ["node1", "node2", "node4"]
    assert inventory_plan(play_hosts=play)["errors"] == []
    strict = torchrun_launch.job_plan(GROUP, NODES, **dict(BASE, run_id="r", play_hosts=play))
    assert any("node3 of torchrun_launch_group='gpu_nodes' not in this play" in e for e in strict["errors"])


def test_records_that_differ_follow_every_host_any_names():
    a = launched({"node3": FINDING})["record"]
    b = dict(a, hosts=["node1", "node2", "node3", "node4"])
    found = {"node1": answer("R2", 2.0, a), "node2": answer("R2", 2.0, b), "node4": answer("R2", 2.0, a)}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)
    assert jobs["hosts"] == GROUP and jobs["not_part"] == {}
    assert jobs["notes"][0].startswith("the nodes' records of run R2 differ (node1: node1, node2, node4; ")


def test_list_is_unchanged_by_records():
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "list", found={}, play_hosts=GROUP)
    assert jobs["argv"][1:] == ["list", "/opt/wireup/jobs"] and jobs["hosts"] == GROUP
    assert jobs["errors"] == [] and jobs["not_part"] == {}


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        # no run line (a cut-off answer): no run, said so
        ("R1\n", {"run_id": "", "record": None, "started": None, "why": "wireup-jobctl gave no run line"}),
        ("\n", {"run_id": "", "record": None}),
        ("", {"run_id": "", "record": None}),
        # CRLF and a NUL byte (a copy through a Windows terminal, a torn read)
        (
            (
                'R1\r\n{"run_id": "R1", "started": 12.5, "record": true}\r\n'
                '{"hosts": ["a"], "master": "a"}\r\n\x00'
            ),
            {
                "run_id": "R1",
                "started": 12.5,
                "record": {"hosts": ["a"], "master": "a", "left_out": {}, "slurm_job_id": ""},
            },
        ),
        # a record cut short (disk full while it was written by hand), or not about hosts
        (
            'R1\n{"run_id": "R1", "started": 1, "record": true}\n{"hosts": ["a", "b"',
            {"record": None, "why": "its record (run.json) is unreadable"},
        ),
        (
            'R1\n{"run_id": "R1", "started": 1, "record": true}\n{"hosts": []}\n',
            {"record": None, "why": "its record (run.json) is unreadable"},
        ),
        # a start time jobctl could not read
        ('R1\n{"run_id": "R1", "started": null, "record": false}\n', {"started": None, "record": None}),
    ],
)
def test_parse_latest(stdout, expected):
    got = torchrun_launch.parse_latest(stdout)
    assert {k: got[k] for k in expected} == expected


# --- the real wireup-jobctl: start records, latest --record answers ------------------------------


def _node_job(tmp_path, node):
    job = tmp_path / node / "jobs" / "it-healthy-only"
    (job / "logs").mkdir(parents=True)
    (job / "launch.sh").write_text('#!/usr/bin/env bash\nenv >"$WIREUP_JOB_LOG.env"\n')
    (job / "launch.sh").chmod(0o750)
    return job


def _jobctl(*args, env=None):
    result = subprocess.run(
        [str(JOBCTL), *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, WIREUP_JOBCTL_MANAGER="process", **(env or {})),
    )
    return {"rc": result.returncode, "stdout": result.stdout, "stderr": result.stderr}


def _wait_ended(job, run_id):
    deadline = time.monotonic() + 30
    while not (job / "runs" / run_id / "rc").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_wireup_jobctl_records_the_run_and_jobs_plan_follows_it(tmp_path):
    full = launched(run_id="R1")
    skip = launched({"node1": FINDING}, run_id="R2")
    jobs = {h: _node_job(tmp_path, h) for h in GROUP}
    for p in (full, skip):
        for host in p["hosts"]:
            env = {"WIREUP_RUN_RECORD": json.dumps(p["record"])}
            assert _jobctl("start", jobs[host], p["run_id"], env=env)["rc"] == 0
            _wait_ended(jobs[host], p["run_id"])
        time.sleep(0.05)
    # the record is the run's, not the job's environment
    assert "WIREUP_RUN_RECORD" not in (jobs["node2"] / "logs" / "R2.log.env").read_text()
    saved = json.loads((jobs["node2"] / "runs" / "R2" / "run.json").read_text())
    assert saved == skip["record"]
    found = {h: _jobctl("latest", jobs[h], "--record", "") for h in GROUP}
    assert found["node1"]["stdout"].splitlines()[0] == "R1"  # the master's newest: the old run
    plan = inventory_plan()
    jobs_ = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=GROUP)
    assert (jobs_["run_id"], jobs_["hosts"], jobs_["master"]) == ("R2", ["node2", "node3", "node4"], "node2")
    assert jobs_["not_part"] == {"node1": f"left out at launch: {FINDING}"}
    # by id: R1 ran everywhere
    found = {h: _jobctl("latest", jobs[h], "--record", "R1") for h in GROUP}
    assert torchrun_launch.jobs_plan(plan, "status", "R1", found=found, play_hosts=GROUP)["hosts"] == GROUP
    # a record gone (a run of an older wireup): every node, said so
    for host in GROUP[1:]:
        (jobs[host] / "runs" / "R2" / "run.json").unlink()
    found = {h: _jobctl("latest", jobs[h], "--record", "") for h in GROUP}
    older = torchrun_launch.jobs_plan(plan, "status", found=found, play_hosts=GROUP)
    assert (older["run_id"], older["hosts"]) == ("R2", GROUP)
    assert "has no record of its hosts" in older["notes"][0]
    # a bad run id is refused by wireup-jobctl too
    assert "bad run id" in _jobctl("latest", jobs["node1"], "--record", "../x")["stderr"]
    # the answer without --record is the one it always was
    assert _jobctl("latest", jobs["node2"])["stdout"] == "R2\n"


def test_a_node_without_wireup_jobctl_under_ansible_core_2_19():
    """ansible-core 2.19 reports a missing program as "Error executing command." (rc 2, the errno):
    jobs.yml said "wireup-jobctl failed: Error executing command." instead of naming the fix."""
    for missing in (NO_JOBCTL, NO_JOBCTL_219):
        listing = torchrun_launch.jobs_plan(inventory_plan(), "list", found={}, play_hosts=GROUP)
        # list: a node a run left out, that never ran a wireup job, has no runs; no failure
        assert torchrun_launch.jobs_node(listing, "node3", missing, "/opt/wireup/bin/wireup-jobctl") == {
            "errors": [],
            "status": {},
            "lines": ["node3: 0 run(s) (no /opt/wireup/bin/wireup-jobctl)"],
        }
        status = torchrun_launch.jobs_plan(
            inventory_plan(), "status", "R1", found={"node1": answer("R1", 1.0)}
        )
        assert torchrun_launch.jobs_node(status, "node2", missing, "/opt/wireup/bin/wireup-jobctl")[
            "errors"
        ] == [
            "node2 has no /opt/wireup/bin/wireup-jobctl: wireup never launched a job here "
            "(.venv/bin/ansible-playbook launch.yml installs it)"
        ]
        found = dict.fromkeys(GROUP, missing)
        assert (
            "has no /opt/wireup/bin/wireup-jobctl"
            in torchrun_launch.jobs_plan(inventory_plan(), "status", found=found)["errors"][0]
        )
    died = torchrun_launch.jobs_node(
        torchrun_launch.jobs_plan(inventory_plan(), "list"), "node3", JOBCTL_DIED, "/x"
    )
    assert died["errors"] == ["node3: wireup-jobctl failed: wireup-jobctl: bad run id '../x'"]
    # a node whose wireup-jobctl fails does not stop the others from naming the run
    rec = launched({"node3": FINDING})["record"]
    found = {h: answer("R2", 2.0, rec) for h in ("node1", "node2", "node4")} | {"node3": JOBCTL_DIED}
    assert torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)["hosts"] == [
        "node1",
        "node2",
        "node4",
    ]


def test_each_host_of_the_run_makes_its_calls_and_status_reads_the_gpus_where_there_are():
    found = {h: answer("R1", 1.0) for h in GROUP}
    gpus = {"node1": {"present": True, "nvidia_smi": "/usr/bin/nvidia-smi"}, "node2": {"present": False}}
    status = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP, gpus=gpus)
    assert status["calls"]["node1"] == [status["argv"], ["/usr/bin/nvidia-smi", *torchrun_launch.GPU_QUERY]]
    assert status["calls"]["node2"] == status["calls"]["node3"] == [status["argv"]]
    assert sorted(status["calls"]) == sorted(status["hosts"])
    stop = torchrun_launch.jobs_plan(inventory_plan(), "stop", found=found, play_hosts=GROUP, gpus=gpus)
    assert stop["calls"]["node1"] == [stop["argv"]]
    bad = torchrun_launch.jobs_plan(
        inventory_plan(), "status", "../x", found=found, play_hosts=GROUP, gpus=gpus
    )
    assert bad["calls"] == {}


def test_call_answers_reads_the_loop_over_a_hosts_calls():
    jobctl, smi = {"rc": 0, "stdout": "{}"}, {"rc": 0, "stdout": "0, 5, 10, 80"}
    assert torchrun_launch.call_answers({"results": [jobctl, smi]}) == (jobctl, "0, 5, 10, 80")
    assert torchrun_launch.call_answers({"results": [jobctl]}) == (jobctl, "")
    assert torchrun_launch.call_answers({"results": [], "skipped": True}) == ({"skipped": True}, "")
    assert torchrun_launch.call_answers(jobctl) == (jobctl, "")


def test_jobs_fetches_only_for_logs_on_a_host_of_the_run():
    found = {h: answer("R1", 1.0) for h in GROUP}
    jobs = torchrun_launch.jobs_plan(inventory_plan(), "logs", found=found, play_hosts=GROUP)
    running = {"stdout": json.dumps({"state": "running", "log": "/opt/wireup/jobs/j/logs/R1.log"})}
    [fetch] = torchrun_launch.jobs_fetches(jobs, "node2", running)
    assert fetch == {
        "src": "/opt/wireup/jobs/j/logs/R1.log",
        "dest": f"{jobs['results']}/node2.log",
        "validate_checksum": False,  # it grows while it is copied
        "fail_on_missing": True,
    }
    ended = {"stdout": json.dumps({"state": "exited", "log": "/l"})}
    assert torchrun_launch.jobs_fetches(jobs, "node2", ended)[0]["validate_checksum"] is True
    assert torchrun_launch.jobs_fetches(jobs, "elsewhere", ended) == []
    status = torchrun_launch.jobs_plan(inventory_plan(), "status", found=found, play_hosts=GROUP)
    assert torchrun_launch.jobs_fetches(status, "node2", ended) == []
