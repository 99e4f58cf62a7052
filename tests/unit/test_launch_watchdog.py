"""wireup-watchdog with wireup-jobctl: three "nodes" (job folders) on loopback, runs in process mode.

- decide(): the master's rules, one by one;
- a node whose run fails ends the run on the two others, each naming the failed node;
- a node whose watchdog goes silent (SIGSTOP: a node down or cut off, its TCP connection still
  open) ends the run on the others within timeout + interval + grace;
- every node exiting 0 ends every watchdog by itself.
"""

import importlib.machinery
import importlib.util
import json
import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest

FILES = pathlib.Path(__file__).resolve().parents[2] / "roles" / "torchrun_launch" / "files"
JOBCTL = FILES / "wireup-jobctl"
HOSTS = ["n1", "n2", "n3"]


def load_watchdog():
    loader = importlib.machinery.SourceFileLoader("wireup_watchdog", str(FILES / "wireup-watchdog"))
    spec = importlib.util.spec_from_loader("wireup_watchdog", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


wd = load_watchdog()


def peer(last=None, state="running", rc=None, closed=False):
    return {"last": last, "state": state, "rc": rc, "closed": closed}


@pytest.mark.parametrize(
    ("own", "peers", "expected"),
    [
        (("running", None), {"n2": peer(99), "n3": peer(99)}, None),
        (("exited", 3), {"n2": peer(99), "n3": peer(99)}, "n1 exited with code 3"),
        (("stopped", None), {"n2": peer(99), "n3": peer(99)}, "n1 was stopped"),
        (("running", None), {"n2": peer(99, "exited", 1), "n3": peer(99)}, "n2 exited with code 1"),
        (("running", None), {"n2": peer(99), "n3": peer(99, "stopped")}, "n3 was stopped"),
        (
            ("running", None),
            {"n2": peer(50), "n3": peer(99)},
            "n2 silent for 30 s (node down or network lost)",
        ),
        (
            ("running", None),
            {"n2": peer(99, closed=True), "n3": peer(99)},
            "n2 lost its watchdog connection while running (node down or its processes killed)",
        ),
        (
            ("exited", 0),
            {"n2": peer(99, closed=True, state="exited", rc=0), "n3": peer(99, "exited", 0)},
            "done",
        ),
        (("exited", 0), {"n2": peer(99, "exited", 0), "n3": peer(99)}, None),
        (("running", None), {"n2": peer(None), "n3": peer(99)}, None),
    ],
)
def test_decide(own, peers, expected):
    assert (
        wd.decide(100.0, 90.0, own="n1", own_state=own, peers=peers, timeout=30, join_timeout=300) == expected
    )


def test_decide_a_node_that_never_joined():
    peers = {"n2": peer(None), "n3": peer(399)}
    reason = wd.decide(
        400.0, 90.0, own="n1", own_state=("running", None), peers=peers, timeout=30, join_timeout=300
    )
    assert reason == "n2 never reached the watchdog in 300 s (node down or unreachable)"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_cluster(tmp_path, body, port, interval=0.2, timeout=1.5):
    """Three job folders, one per node, each with its watchdog.json (n1 is the master)."""
    jobs = {}
    for host in HOSTS:
        job = tmp_path / host / "jobs" / "demo"
        (job / "logs").mkdir(parents=True)
        script = job / "launch.sh"
        script.write_text(f"#!/usr/bin/env bash\nset -o errexit -o nounset\nhost={host}\n{body}")
        script.chmod(0o750)
        cfg = {
            "self": host,
            "master": "n1",
            "hosts": HOSTS,
            "addr": "127.0.0.1",
            "bind": "127.0.0.1",
            "port": port,
            "interval": interval,
            "timeout": timeout,
            "join_timeout": 20,
            "grace": 2,
            "job_dir": str(job),
        }
        (job / "watchdog.json").write_text(json.dumps(cfg))
        jobs[host] = job
    return jobs


def jobctl(*args, check=True):
    env = dict(os.environ, WIREUP_JOBCTL_MANAGER="process")
    result = subprocess.run(
        [str(JOBCTL), *map(str, args)], check=False, capture_output=True, text=True, env=env
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def status(job, run):
    return json.loads(jobctl("status", job, run).stdout)


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def watchdog_pids(job):
    """PIDs of the watchdog processes of this job folder."""
    out = subprocess.run(
        ["pgrep", "-f", f"wireup-watchdog {job}/watchdog.json"], check=False, capture_output=True, text=True
    )
    return [int(p) for p in out.stdout.split()]


@pytest.fixture
def cluster(tmp_path):
    started = []

    def start(body, port=None, **kwargs):
        jobs = make_cluster(tmp_path, body, port or free_port(), **kwargs)
        for host in HOSTS:
            jobctl("start", jobs[host], "r1")
            started.append(jobs[host])
        return jobs

    yield start
    for job in started:
        for pid in watchdog_pids(job):
            os.kill(pid, signal.SIGCONT)
        jobctl("stop", job, "r1", 1, check=False)


def test_a_failing_node_ends_the_run_on_every_node_naming_it(cluster):
    # n2 fails once every node runs; the others would run for a minute.
    jobs = cluster("[[ $host == n2 ]] && { sleep 1; exit 3; }\nsleep 60\n")
    assert wait_for(lambda: all(status(j, "r1")["state"] != "running" for j in jobs.values()), 15)
    assert status(jobs["n2"], "r1")["state"] == "exited" and status(jobs["n2"], "r1")["rc"] == 3
    for host in ("n1", "n3"):
        st = status(jobs[host], "r1")
        assert st["state"] == "stopped", st
        assert st["reason"] == "stopped by the watchdog: n2 exited with code 3"
        log = (jobs[host] / "logs" / "r1.log").read_text()
        assert "stopping run r1 on " + host in log
    assert wait_for(lambda: not any(watchdog_pids(j) for j in jobs.values()), 10)


def test_a_silent_node_ends_the_run_on_the_others_within_the_bound(cluster):
    jobs = cluster("sleep 60\n", interval=0.2, timeout=1.5)
    assert wait_for(lambda: all(status(j, "r1")["state"] == "running" for j in jobs.values()), 5)
    time.sleep(1)  # every follower has joined
    [frozen] = watchdog_pids(jobs["n3"])
    os.kill(frozen, signal.SIGSTOP)  # n3 goes silent, its connection stays open
    t0 = time.monotonic()
    # timeout 1.5 + interval 0.2 + grace 2, and slack for a busy 2-core machine.
    assert wait_for(lambda: status(jobs["n1"], "r1")["state"] == "stopped", 10)
    assert wait_for(lambda: status(jobs["n2"], "r1")["state"] == "stopped", 10)
    took = time.monotonic() - t0
    assert took < 10
    for host in ("n1", "n2"):
        assert status(jobs[host], "r1")["reason"] == (
            "stopped by the watchdog: n3 silent for 1.5 s (node down or network lost)"
        )
    os.kill(frozen, signal.SIGCONT)
    # n3 hears the stop (or loses the master) and stops itself.
    assert wait_for(lambda: status(jobs["n3"], "r1")["state"] == "stopped", 10)


def test_every_node_exiting_zero_ends_every_watchdog(cluster):
    jobs = cluster("sleep 1\n")
    assert wait_for(lambda: all(status(j, "r1")["state"] == "exited" for j in jobs.values()), 15)
    assert all(status(j, "r1")["rc"] == 0 for j in jobs.values())
    assert wait_for(lambda: not any(watchdog_pids(j) for j in jobs.values()), 10)
    assert "every node exited with code 0" in (jobs["n1"] / "logs" / "r1.log").read_text()


def test_a_taken_watchdog_port_ends_the_job_instead_of_leaving_it_unwatched(cluster):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        jobs = cluster("sleep 60\n", port=port, interval=0.2, timeout=1.5)
        assert wait_for(lambda: status(jobs["n1"], "r1")["state"] == "stopped", 10)
        assert f"port {port} is taken" in status(jobs["n1"], "r1")["reason"]
        # The workers reach a socket that never answers: the master is silent, they stop too.
        assert wait_for(lambda: all(status(jobs[h], "r1")["state"] == "stopped" for h in ("n2", "n3")), 15)


@pytest.mark.parametrize("first", ["n2", "n1"])
def test_a_deliberate_stop_of_one_node_stops_every_node_with_its_reason(cluster, first):
    # jobs.yml stops every node at once; whichever node's stop lands first (a worker, or the
    # master), the watchdogs pass its reason on, so every node says "stopped by jobs.yml", not
    # "n2 lost its watchdog connection" (the race a loaded CI machine showed on the testbed).
    jobs = cluster("sleep 60\n", interval=0.2, timeout=5)
    assert wait_for(lambda: all(status(j, "r1")["state"] == "running" for j in jobs.values()), 5)
    time.sleep(1)  # every follower has joined
    jobctl("stop", jobs[first], "r1", 2, "stopped by jobs.yml")
    assert wait_for(lambda: all(status(j, "r1")["state"] == "stopped" for j in jobs.values()), 10)
    assert {h: status(j, "r1")["reason"] for h, j in jobs.items()} == dict.fromkeys(
        HOSTS, "stopped by jobs.yml"
    )
    assert wait_for(lambda: not any(watchdog_pids(j) for j in jobs.values()), 10)


def test_deliberate_reasons_are_passed_on_the_watchdogs_own_are_not():
    wd = load_watchdog()
    assert wd.deliberate("stopped by jobs.yml") == "stopped by jobs.yml"
    assert wd.deliberate("stopped by the watchdog: n2 exited with code 3") == ""
    assert wd.deliberate("") == "" and wd.deliberate(None) == ""
