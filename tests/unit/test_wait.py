"""wireup.launch.wait: one look of the launch wait (plugins/action/wireup_wait.py), on jobctl's answers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import wait


def answer(state, elapsed=12.04, rc=None, **extra):
    line = {
        "state": state,
        "rc": rc,
        "started": 1.0,
        "ended": None,
        "elapsed": elapsed,
        "log": "/l",
        "reason": "",
    }
    return json.dumps(dict(line, **extra)) + "\n"


def test_a_running_look_goes_on_and_says_state_and_elapsed():
    seen = wait.look(
        {"rc": 0, "stdout": answer("running"), "stderr": ""}, host="node1", job="ex2", timeout=1800, waited=10
    )
    assert seen["over"] is False and seen["error"] == ""
    assert seen["line"] == "[node1] waiting for job ex2: running, 12.0 s elapsed (timeout 1800 s)"
    assert (
        wait.look({"rc": 0, "stdout": answer("running"), "stderr": ""}, host="node1")["line"]
        == "[node1] waiting for the run: running, 12.0 s elapsed (no timeout)"
    )


@pytest.mark.parametrize(
    ("state", "rc", "said"),
    [
        ("exited", 0, "exited with code 0"),
        ("exited", 1, "exited with code 1"),
        ("stopped", None, "was stopped"),
        ("lost", None, "lost its processes without an exit code (killed)"),
        ("missing", None, "never started"),
    ],
)
def test_an_ended_run_ends_the_wait_and_says_how(state, rc, said):
    seen = wait.look(
        {"rc": 0, "stdout": answer(state, 30, rc), "stderr": ""}, host="node2", job="ex2", timeout=60
    )
    assert seen["over"] and seen["error"] == ""
    assert seen["line"] == f"[node2] job ex2: {said} after 30.0 s"


def test_the_timeout_ends_the_wait_by_the_run_s_clock_or_the_wait_s_own():
    assert wait.look({"rc": 0, "stdout": answer("running", 60), "stderr": ""}, host="n", timeout=60)["over"]
    assert wait.look(
        {"rc": 0, "stdout": answer("running", 5), "stderr": ""}, host="n", timeout=60, waited=61
    )["over"]  # a lagging node clock
    assert not wait.look(
        {"rc": 0, "stdout": answer("running", 10**6), "stderr": ""}, host="n", timeout=0, waited=10**6
    )["over"]


def test_a_failed_look_fails_the_wait_naming_the_node_and_jobctl_s_words():
    seen = wait.look(
        {"rc": 2, "stdout": "", "stderr": "wireup-jobctl: no run r9 of /j\n"}, host="node3", timeout=60
    )
    assert (
        seen["over"]
        and seen["error"] == "node3: wireup-jobctl status failed (rc 2): wireup-jobctl: no run r9 of /j"
    )
    assert wait.look({"rc": 127, "stdout": "", "stderr": ""}, host="node3")["error"].endswith(
        "(rc 127): no output"
    )


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "not json\n",
        answer("sleeping"),  # a word jobctl never says: not "not running" (fail closed)
        answer("running", elapsed="soon"),
        answer("running", elapsed=float("nan")).replace("NaN", "NaN"),
        answer("running", elapsed=-1),
        "\x1b[31mrunning\x1b[0m\n",
    ],
)
def test_an_answer_that_is_no_status_line_fails_the_wait(stdout):
    seen = wait.look({"rc": 0, "stdout": stdout, "stderr": ""}, host="node1", timeout=60)
    assert seen["over"] and seen["error"].startswith("node1: wireup-jobctl status gave no usable status line")
    assert "\x1b" not in seen["error"]


def test_looks_are_paced_and_lines_at_most_one_a_second():
    assert wait.pause(5, 0.1) == pytest.approx(0.4)  # a look that came back at once
    assert wait.pause(5, 5.0) == 0.0  # it blocked its interval on the node
    assert wait.pause(0, 0.0) == 0.0  # interval 0: as fast as the looks go
    assert wait.shows(10.0, None) and wait.shows(11.0, 10.0) and not wait.shows(10.5, 10.0)


# --- the sacct judge: a job under Slurm, looked at with slurm.sacct_argv on its master ----------
SLURM = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def sacct(name, rc=0, stderr=""):
    return {"rc": rc, "stdout": (SLURM / name).read_text(), "stderr": stderr}


def running_sacct():
    """testbed_22.05.8_sacct_running.txt without its first line (plain squeue's, pasted above it)."""
    return {
        "rc": 0,
        "stdout": "\n".join(sacct("testbed_22.05.8_sacct_running.txt")["stdout"].splitlines()[1:]),
    }


def test_a_running_slurm_job_goes_on_and_says_its_state_and_the_time_waited():
    seen = wait.look_sacct(
        running_sacct(), host="node1", job="example2", timeout=1800, waited=12.04, slurm_job="7"
    )
    assert not seen["over"] and not seen["error"]
    assert seen["status"] == {"state": "RUNNING", "job_id": "7"}
    assert seen["line"] == (
        "[node1] waiting for Slurm job 7 (job example2): RUNNING, 12.0 s waited (timeout 1800 s)"
    )


@pytest.mark.parametrize(
    ("name", "job_id", "state"),
    [
        ("testbed_22.05.8_sacct_completed.txt", "4", "COMPLETED"),
        ("testbed_22.05.8_sacct_node2_failed.txt", "5", "FAILED"),
        ("testbed_22.05.8_sacct_cancelled_by_scancel.txt", "7", "CANCELLED"),
        ("testbed_22.05.8_sacct_cancelled_while_pending.txt", "13", "CANCELLED"),
    ],
)
def test_a_slurm_job_in_a_final_state_ends_the_wait(name, job_id, state):
    seen = wait.look_sacct(sacct(name), host="node1", waited=40, slurm_job=job_id)
    assert seen["over"] and not seen["error"]
    assert seen["status"]["state"] == state
    assert seen["line"].startswith("[node1] Slurm job ") and seen["line"].endswith(f": {state} after 40.0 s")


def test_a_job_sacct_has_no_row_for_yet_is_pending_and_waited_for():
    seen = wait.look_sacct({"rc": 0, "stdout": "", "stderr": ""}, host="node1", waited=1, slurm_job="8")
    assert not seen["over"] and seen["status"]["state"] == "PENDING"
    assert seen["line"] == "[node1] waiting for Slurm job 8: PENDING, 1.0 s waited (no timeout)"


def test_the_timeout_ends_a_slurm_wait_by_the_controller_s_clock_and_0_means_none():
    running = running_sacct()
    assert wait.look_sacct(running, host="n", timeout=30, waited=30.0, slurm_job="7")["over"]
    assert not wait.look_sacct(running, host="n", timeout=30, waited=29.9, slurm_job="7")["over"]
    # torchrun_launch_timeout 0 is "no limit": the old until/retries loop made it one look, then scancel.
    assert not wait.look_sacct(running, host="n", timeout=0, waited=86400.0, slurm_job="7")["over"]


def test_a_failing_sacct_fails_the_wait_naming_the_node_and_sacct_s_words():
    seen = wait.look_sacct(
        {
            "rc": 1,
            "stdout": "",
            "stderr": "sacct: error: Problem talking to the database: Connection refused\n",
        },
        host="node1",
    )
    assert seen["over"]
    assert seen["error"] == (
        "node1: sacct failed (rc 1): sacct: error: Problem talking to the database: Connection refused"
    )


def test_hostile_sacct_text_reaches_the_line_printable_and_short():
    text = "7\x1b[2J|RUNNING\x07" + "X" * 500 + "|0:0|node1|Unknown\n"
    seen = wait.look_sacct({"rc": 0, "stdout": text, "stderr": ""}, host="n", slurm_job="7")
    assert seen["line"].isprintable() and len(seen["line"]) < 200


def test_sacct_looks_sleep_the_interval_between_them_at_least_a_second():
    assert wait.pause_between(5, 0.2) == pytest.approx(4.8)
    assert wait.pause_between(0, 0.1) == pytest.approx(0.9)  # 0 must not hammer slurmdbd
    assert wait.pause_between(5, 7.0) == 0.0


def test_each_judge_names_its_look_its_pause_and_whether_the_interval_is_appended():
    assert {
        "jobctl": (wait.look, wait.pause, True),
        "sacct": (wait.look_sacct, wait.pause_between, False),
    } == wait.JUDGES


# --- the action's loop, with the node's answers scripted (the real task: tests/integration) -----
def _action(args, answers, monkeypatch):
    from ansible.plugins.action import ActionBase

    from ansible_collections.wireup.cluster.plugins.action import wireup_wait as plugin

    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(plugin.time, "sleep", lambda seconds: None)
    shown, ran = [], []
    monkeypatch.setattr(plugin.display, "display", shown.append)
    action = plugin.ActionModule.__new__(plugin.ActionModule)
    action._task = SimpleNamespace(args=args, delegate_to="node1")
    queue = list(answers)
    action._low_level_execute_command = lambda command: ran.append(command) or queue.pop(0)
    return action, shown, ran


def test_the_action_follows_a_slurm_job_with_sacct_until_it_ends(monkeypatch):
    argv = ["sacct", "--parsable2", "--noheader", "-j", "7", "--format=JobID,State,ExitCode,NodeList,End"]
    # job 7 running, then job 7 completed (the completed capture's rows, with 7 for job 4)
    completed = sacct("testbed_22.05.8_sacct_completed.txt")
    completed["stdout"] = re.sub(r"(?m)^4", "7", completed["stdout"])
    answers = [running_sacct()] * 2 + [completed]
    action, shown, ran = _action(
        {"argv": argv, "judge": "sacct", "interval": 5, "timeout": 1800, "job": "example2", "slurm_job": "7"},
        answers,
        monkeypatch,
    )
    result = action.run(task_vars={"inventory_hostname": "node3"})
    assert ran == [" ".join(argv)] * 3  # sacct's words as they are: no interval appended
    assert result["looks"] == 3 and not result.get("failed") and result["stdout"].startswith("7|COMPLETED")
    assert shown[0].startswith("[node1] waiting for Slurm job 7 (job example2): RUNNING")
    assert shown[-1].startswith("[node1] Slurm job 7 (job example2): COMPLETED after ")


def test_the_action_appends_the_interval_for_jobctl_and_refuses_an_unknown_judge(monkeypatch):
    action, _, ran = _action(
        {"argv": ["/j", "status", "/d", "r1"], "interval": 5},
        [{"rc": 0, "stdout": answer("exited", rc=0)}],
        monkeypatch,
    )
    assert not action.run(task_vars={}).get("failed") and ran == ["/j status /d r1 5"]
    action, _, _ = _action({"argv": ["sacct"], "judge": "squeue"}, [], monkeypatch)
    with pytest.raises(AnsibleActionFail, match="judge must be one of jobctl, sacct, not 'squeue'"):
        action.run(task_vars={})


# --- the sacct judge takes only the asked job's rows (issue 35) ----------------------------------
def test_a_look_at_another_jobs_rows_fails_the_wait_naming_the_node():
    seen = wait.look_sacct(
        sacct("testbed_22.05.8_sacct_completed.txt"), host="node1", job="example2", slurm_job="5"
    )
    assert seen["over"] and seen["error"] == (
        "node1: sacct printed '4|COMPLETED|0:0|node[1-3]|2026-12-01T01:14:59', not a row of Slurm job 5"
    )
    # a row naming 10 M nodes is refused at once, never expanded
    huge = {"rc": 0, "stdout": "5|RUNNING|0:0|n[0-99999999]|Unknown\n", "stderr": ""}
    assert "names 100000000 hosts, more than 65536" in wait.look_sacct(huge, host="n", slurm_job="5")["error"]
    assert not wait.look_sacct(sacct("testbed_22.05.8_sacct_node2_failed.txt"), host="n", slurm_job="5")[
        "error"
    ]


def test_the_action_ends_a_wait_whose_sacct_answers_for_another_job(monkeypatch):
    argv = ["sacct", "--parsable2", "--noheader", "-j", "7", "--format=JobID,State,ExitCode,NodeList,End"]
    answers = [running_sacct(), sacct("testbed_22.05.8_sacct_completed.txt")]
    action, _, _ = _action(
        {"argv": argv, "judge": "sacct", "interval": 5, "job": "example2", "slurm_job": "7"},
        answers,
        monkeypatch,
    )
    result = action.run(task_vars={})
    assert result["failed"] and "not a row of Slurm job 7" in result["msg"]
    # a sacct wait must say which job it waits for
    for slurm_job in (None, "", "7;reboot", "7\n"):
        action, _, _ = _action({"argv": argv, "judge": "sacct", "slurm_job": slurm_job}, [], monkeypatch)
        with pytest.raises(
            AnsibleActionFail, match="slurm_job must be the Slurm job id the sacct judge waits for"
        ):
            action.run(task_vars={})
