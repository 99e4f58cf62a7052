"""wireup.wait: one look of the launch wait (plugins/action/wireup_wait.py), on jobctl's answers."""

from __future__ import annotations

import json

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import wait


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
