"""wireup-jobctl (the node-side start/status/stop of a run) against small real launch.sh scripts.

The "worker" below mimics torchrun's: started in a session of its own (setsid), so killing the
run's process group does not reach it; stop must find it by the run's WIREUP_JOB_TAG.
"""

import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import time

import pytest

JOBCTL = pathlib.Path(__file__).resolve().parents[2] / "roles" / "torchrun_launch" / "files" / "wireup-jobctl"


def make_job(tmp_path, body):
    job = tmp_path / "jobs" / "demo"
    (job / "logs").mkdir(parents=True)
    script = job / "launch.sh"
    script.write_text("#!/usr/bin/env bash\nset -o errexit -o nounset\n" + body)
    script.chmod(0o750)
    return job


def jobctl(*args, check=True):
    result = subprocess.run(
        [str(JOBCTL), *map(str, args)], check=False, capture_output=True, text=True, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def status(job, run, wait=0):
    return json.loads(jobctl("status", job, run, wait).stdout)


def tagged(job, run):
    tag = f"WIREUP_JOB_TAG={job}:{run}".encode()
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if tag in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.fixture
def cleanup():
    runs = []
    yield runs
    for job, run in runs:
        jobctl("stop", job, run, 1, check=False)
        for pid in tagged(job, run):
            os.kill(pid, signal.SIGKILL)


def test_jobctl_is_shellcheck_clean():
    subprocess.run(["bash", "-n", str(JOBCTL)], check=True)
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is not installed: apt-get install shellcheck")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck); CI requires it")
    result = subprocess.run(["shellcheck", str(JOBCTL)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_a_run_that_exits_reports_its_code_and_log(tmp_path, cleanup):
    job = make_job(
        tmp_path, 'echo "hello from $WIREUP_RUN_ID" | tee -a "$WIREUP_JOB_LOG" >/dev/null\nexit 3\n'
    )
    cleanup.append((job, "r1"))
    assert "started run r1" in jobctl("start", job, "r1").stdout
    st = status(job, "r1", 10)
    assert st["state"] == "exited"
    assert st["rc"] == 3
    assert st["log"] == f"{job}/logs/r1.log"
    assert pathlib.Path(st["log"]).read_text() == "hello from r1\n"
    assert "already started" in jobctl("start", job, "r1", check=False).stderr


def test_stop_ends_the_group_and_workers_in_their_own_sessions(tmp_path, cleanup):
    job = make_job(tmp_path, "setsid sleep 300 </dev/null >/dev/null 2>&1 &\nsleep 300\n")
    cleanup.append((job, "r2"))
    jobctl("start", job, "r2")
    deadline = time.time() + 10
    while len(tagged(job, "r2")) < 3 and time.time() < deadline:
        time.sleep(0.1)
    assert status(job, "r2")["state"] == "running"
    before = tagged(job, "r2")
    assert len(before) >= 3  # the wrapper, launch.sh's sleep and the worker

    out = jobctl("stop", job, "r2", 2).stdout
    assert out.startswith("stopped run r2")
    assert tagged(job, "r2") == []
    assert status(job, "r2")["state"] == "stopped"
    assert jobctl("stop", job, "r2", 2).stdout.startswith("run r2 of")  # nothing left: no-op


def test_a_killed_run_is_reported_lost(tmp_path, cleanup):
    job = make_job(tmp_path, "sleep 300\n")
    cleanup.append((job, "r3"))
    jobctl("start", job, "r3")
    pgid = int((job / "runs" / "r3" / "pgid").read_text())
    os.killpg(pgid, signal.SIGKILL)
    st = status(job, "r3", 5)
    assert st["state"] == "lost"
    assert st["rc"] is None


def test_status_of_a_run_never_started(tmp_path):
    job = make_job(tmp_path, "true\n")
    assert status(job, "nope")["state"] == "missing"
    assert "bad run id" in jobctl("status", job, "../x", check=False).stderr


def test_a_run_log_and_state_are_the_job_users_only(tmp_path, cleanup):
    job = make_job(tmp_path, 'echo hi >>"$WIREUP_JOB_LOG"\n')
    cleanup.append((job, "r5"))
    jobctl("start", job, "r5")
    assert status(job, "r5", 10)["state"] == "exited"
    assert stat.S_IMODE((job / "logs" / "r5.log").stat().st_mode) == 0o640
    assert stat.S_IMODE((job / "runs" / "r5" / "rc").stat().st_mode) == 0o640


def test_latest_and_list(tmp_path, cleanup):
    job = make_job(tmp_path, "exit 0\n")
    assert jobctl("latest", job).stdout.strip() == ""
    for run in ("b-first", "a-second"):  # newest by start time, not by name
        cleanup.append((job, run))
        jobctl("start", job, run)
        status(job, run, 10)
        time.sleep(0.05)
    assert jobctl("latest", job).stdout.strip() == "a-second"
    rows = [json.loads(line) for line in jobctl("list", job.parent).stdout.splitlines()]
    assert sorted((r["job"], r["run_id"], r["state"], r["rc"]) for r in rows) == [
        ("demo", "a-second", "exited", 0),
        ("demo", "b-first", "exited", 0),
    ]


def test_stop_records_the_reason(tmp_path, cleanup):
    job = make_job(tmp_path, "sleep 300\n")
    cleanup.append((job, "r6"))
    jobctl("start", job, "r6")
    jobctl("stop", job, "r6", 2, "stopped by the watchdog: n2 exited with code 1")
    st = status(job, "r6")
    assert st["state"] == "stopped"
    assert st["reason"] == "stopped by the watchdog: n2 exited with code 1"


def test_status_is_valid_json_whatever_the_reason_holds(tmp_path, cleanup):
    # A reason full of control characters (a forged watchdog message's, issue 23) and bytes that
    # are not UTF-8: status and list still print JSON that parses, the reason cleaned.
    job = make_job(tmp_path, "sleep 300\n")
    cleanup.append((job, "r9"))
    jobctl("start", job, "r9")
    hostile = 'forged\x01\x1b[2J\x7f "quoted" back\\slash\ttab\r\nnext\x08\x00?'
    jobctl("stop", job, "r9", 2, hostile.replace("\x00", ""))
    st = status(job, "r9")
    assert st["state"] == "stopped"
    assert st["reason"] == 'forged  [2J  "quoted" back\\slash tab  next ?'
    (job / "runs" / "r9" / "stop_reason").write_bytes(b"by hand \xff\xfe\x1b]0;x\x07 caf\xc3\xa9\n")
    raw = subprocess.run([str(JOBCTL), "status", job, "r9"], check=True, capture_output=True).stdout
    assert json.loads(raw.decode("utf-8"))["reason"] == "by hand  ]0;x  caf\u00e9"
    listed = subprocess.run([str(JOBCTL), "list", tmp_path / "jobs"], check=True, capture_output=True).stdout
    assert [json.loads(line)["run_id"] for line in listed.decode("utf-8").splitlines()] == ["r9"]


def test_stop_answers_with_the_final_status_and_status_with_the_log_tail(tmp_path, cleanup):
    """One call per node at the end of a waited run (stop, then its state) and for jobs.yml's
    status (the state, then the log's last lines): the answer torchrun_launch.parse_status reads."""
    job = make_job(tmp_path, 'for i in 1 2 3 4; do echo "line $i" >>"$WIREUP_JOB_LOG"; done\nsleep 300\n')
    cleanup.append((job, "r7"))
    jobctl("start", job, "r7")
    deadline = time.time() + 10
    while "line 4" not in (job / "logs" / "r7.log").read_text() and time.time() < deadline:
        time.sleep(0.1)
    said, line, *tail = [*jobctl("status", job, "r7", 0, 2).stdout.splitlines(), ""]
    assert json.loads(said)["state"] == "running"
    assert [line, *tail][:2] == ["line 3", "line 4"]
    first, last = jobctl("stop", job, "r7", 1, "stopped by a test").stdout.splitlines()
    assert first.startswith("stopped run r7")
    assert (json.loads(last)["state"], json.loads(last)["reason"]) == ("stopped", "stopped by a test")
    # Nothing left to stop: it says so, and still answers with the state.
    first, last = jobctl("stop", job, "r7", 1).stdout.splitlines()
    assert first.startswith("run r7 of") and json.loads(last)["state"] == "stopped"
    never = jobctl("stop", job, "r8", 1).stdout.splitlines()
    assert never[0].endswith("never started: nothing to stop") and json.loads(never[1])["state"] == "missing"


def test_systemd_unit_names_differ_for_one_job_in_two_base_dirs(tmp_path):
    """Two inventory hosts on one machine (each its own wireup_base_dir) start the same job and
    run id: their transient units must not share a name (on the GPU machine the second host's
    job never started, and the first waited for it until the watchdog stopped the run)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls"
    (fake / "systemd-run").write_text(f'#!/usr/bin/env bash\necho "$@" >>{calls}\n')
    (fake / "systemd-run").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "WIREUP_JOBCTL_MANAGER": "systemd"}
    units = []
    for base in ("n1", "n2"):
        job = make_job(tmp_path / base, "echo hi\n")
        # The fake starts nothing, so start then says the run did not start (rc 2): the names matter here.
        subprocess.run(
            [str(JOBCTL), "start", job, "r1"], check=False, env=env, capture_output=True, timeout=60
        )
        units.append((job / "runs" / "r1" / "unit").read_text().strip())
    assert units[0] != units[1]
    assert all(u.startswith("wireup-demo-r1-") and u.endswith(".service") for u in units)
    assert calls.read_text().count("--unit=") == 2


def test_a_slurm_run_is_recorded_listed_and_its_leftovers_stopped(tmp_path, cleanup):
    """launch.yml's Slurm path keeps its run with `record` (no process of its own): latest finds it
    with its record, status and list say "slurm" with the job id, the log is the step's
    (logs/slurm-ID.log), and stop ends a process of the run left on the node (one carrying its tag,
    as job.sbatch's steps do) and then finds nothing left."""
    job = make_job(tmp_path, "exit 0\n")
    run = "slurm-42"
    record = json.dumps({"hosts": ["node1"], "master": "node1", "slurm_job_id": "42"})
    result = subprocess.run(
        [str(JOBCTL), "record", str(job), run, "42"], env=dict(os.environ, WIREUP_RUN_RECORD=record),
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert result.stdout.startswith(f"recorded run {run} of {job}: Slurm job 42")
    assert jobctl("record", job, run, "42", check=False).returncode == 2  # once only
    assert jobctl("record", job, "slurm-x", "4;2", check=False).returncode == 2  # a job id only
    latest = jobctl("latest", job, "--record").stdout.splitlines()
    assert latest[0] == run and json.loads(latest[2]) == json.loads(record)
    (job / "logs" / f"{run}.log").write_text("one\ntwo\n")
    answer = jobctl("status", job, run, 0, 1).stdout.splitlines()
    st = json.loads(answer[0])
    assert (st["state"], st["slurm_job"], st["log"], answer[1:]) == (
        "slurm",
        "42",
        f"{job}/logs/{run}.log",
        ["two"],
    )
    [row] = [json.loads(line) for line in jobctl("list", job.parent).stdout.splitlines()]
    assert (row["run_id"], row["state"], row["slurm_job"]) == (run, "slurm", "42")
    tag = f"{job}:{run}"
    left = subprocess.Popen(["sleep", "300"], env=dict(os.environ, WIREUP_JOB_TAG=tag))
    try:
        for _ in range(50):
            if tagged(job, run):
                break
            time.sleep(0.1)
        said = jobctl("stop", job, run, 1).stdout.splitlines()
        assert said[0] == f"stopped run {run} of {job}" and tagged(job, run) == []
        assert json.loads(said[1])["state"] == "slurm"
        assert jobctl("stop", job, run, 1).stdout.startswith(f"run {run} of {job} has no processes left")
    finally:
        left.kill()
        left.wait()
