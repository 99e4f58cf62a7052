"""Stalled jobs (issue 37 item 6): the sampling's pure parts, the module on real processes, the run's stall.

- probe/job_progress.py: /proc/PID/stat and nvidia-smi's query read (real captures), one look
  judged against the last (first, progressing, quiet, stalled; a GPU that cannot be read is no
  verdict), the kept look checked whole.
- plugins/modules/wireup_job_progress.py run by Ansible on a real wireup-jobctl run: a sleeping
  rank is quiet then stalled (its run's folder keeps the look), a spinning rank progresses.
- launch/stall.py on those answers and on jobs_plan's own plan: which node looks, the run's stall
  line, the stop on every node only when asked and never in check mode.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import stall
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import job_progress
from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
JOBCTL = ROOT / "roles" / "torchrun_launch" / "files" / "wireup-jobctl"
GROUP = ["node1", "node2"]
NODES = {
    h: {"address": f"10.0.0.{i}", "interface": "eth0", "gpu_present": False, "gpu_count": 0, "hostname": h}
    for i, h in enumerate(GROUP, 1)
}
BASE = {
    "job": "it-stall",
    "program": "/opt/wireup/examples/ddp_multinode.py",
    "base_dir": "/opt/wireup",
    "venv_path": "/opt/wireup/venv",
    "results_dir": "/tmp/results",
    "group": "gpu_nodes",
    "node_group": "gpu_nodes",
    "nproc_per_node": 1,
    "master_host": "node1",
}


# --- /proc/PID/stat ----------------------------------------------------------------------------


def test_parse_stat_reads_cpu_ticks_after_the_names_last_paren():
    sleeping = (FIX / "proc_stat" / "debian12_linux6.18_sleep_name_with_paren.txt").read_text()
    busy_ = (FIX / "proc_stat" / "debian12_linux6.18_python3_busy_0.3s.txt").read_text()
    assert job_progress.parse_stat(sleeping) == (0, 2297950)
    assert job_progress.parse_stat(busy_) == (35, 2298002)
    # cut short, no name, fields that are not numbers: nothing believed
    assert job_progress.parse_stat(busy_[:60]) is None
    assert job_progress.parse_stat("") is None
    assert job_progress.parse_stat(busy_.replace(" 10 25 ", " x 25 ")) is None


# --- nvidia-smi --query-gpu=index,utilization.gpu,power.draw,power.limit,utilization.memory -----


def _h200_rows() -> str:
    """GPU_QUERY's rows as nvidia-smi prints them (csv, noheader, nounits) from the real H200 capture's
    values (nvidia-smi -q -x of an idle H200 pair: 0 %, 80.91 W instant draw, 700 W limit)."""
    root = ET.parse(FIX / "h200x2" / "nvidia_smi_q.xml").getroot()
    rows = []
    for index, gpu in enumerate(root.findall("gpu")):
        util = gpu.findtext("utilization/gpu_util").split()[0]
        power = gpu.findtext("gpu_power_readings/instant_power_draw").split()[0]
        limit = gpu.findtext("gpu_power_readings/current_power_limit").split()[0]
        mem = gpu.findtext("utilization/memory_util").split()[0]
        rows.append(f"{index}, {util}, {power}, {limit}, {mem}")
    return "\n".join(rows) + "\n"


def _h100_samples() -> dict[str, str]:
    """{sample tag: GPU_QUERY's row} from the real H100 capture (nvidia-smi --query-gpu with a header
    and units, results/gpu-stall/capture.py on the lent H100 80GB HBM3, 2026-12-07): the GPU idle, a
    matmul, and two ranks on GPU 0 (distinct NCCL_HOSTID, socket over lo) where rank 0 waits in
    all_reduce for rank 1, which sleeps 30 s. The columns GPU_QUERY asks for, units stripped."""
    text = (FIX / "h100" / "stall_capture_nvidia_smi.txt").read_text(encoding="utf-8")
    samples, tag, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("# "):
            tag = line[2:].split(" t=")[0]
        elif not line[:1].isdigit():  # a header: the GPUs' (index, ...) or the apps' (pid, ...)
            header = [h.strip() for h in line.split(",")] if line.startswith("index,") else None
        elif tag and header and line[:1].isdigit():
            row = dict(zip(header, (f.strip().split(" ")[0] for f in line.split(","))))
            cols = (
                "index",
                "utilization.gpu [%]",
                "power.draw [W]",
                "power.limit [W]",
                "utilization.memory [%]",
            )
            samples[tag] = ", ".join(row[c] for c in cols) + "\n"
    return samples


def test_a_rank_blocked_in_an_nccl_collective_reads_busy_but_does_no_work():
    samples = _h100_samples()
    waits = [v for k, v in samples.items() if k.startswith("nccl wait")]
    assert len(waits) == 8
    for row in waits:  # utilisation 100 %: utilisation alone would call the hang progress
        (parsed,) = job_progress.parse_gpu_load(row)
        assert parsed["util"] == 100 and parsed["mem_util"] == 0 and parsed["power"] < 0.25 * parsed["limit"]
        assert job_progress.gpus_idle([parsed]) is True
    assert job_progress.gpus_idle(job_progress.parse_gpu_load(samples["idle sample 2"])) is True
    busy = [v for k, v in samples.items() if k.startswith("busy matmul")]
    # the first matmul sample came before the kernels started (0 %, 71 W): idle, as it was
    assert [job_progress.gpus_idle(job_progress.parse_gpu_load(v)) for v in busy] == [True, False, False]
    # a GPU at 100 % drawing little whose memory is read (a light kernel, not a spin) is working
    (light,) = job_progress.parse_gpu_load(waits[0].replace(", 0\n", ", 9\n"))
    assert job_progress.gpus_idle([light]) is False


def test_an_idle_h200_is_idle_and_a_busy_one_is_not():
    rows = job_progress.parse_gpu_load(_h200_rows())
    assert [r["index"] for r in rows] == [0, 1]
    assert rows[0]["util"] == 0 and rows[0]["limit"] == 700.0
    assert job_progress.gpus_idle(rows) is True
    busy_row = dict(rows[1], util=97.0, power=515.0, mem_util=9.0)  # the H100 matmul's figures
    assert job_progress.gpus_idle([rows[0], busy_row]) is False
    # a GPU at 0 % drawing half its limit (a kernel between samples) is not idle
    assert job_progress.gpus_idle([dict(rows[0], power=350.0)]) is False
    # only the run's GPUs count
    assert job_progress.gpus_idle([rows[0], busy_row], indices={0}) is True


def test_values_nvidia_smi_cannot_read_are_no_verdict():
    # The public captures' tokens ([N/A] on newer drivers, [Not Supported] on older: i3pystatus#776).
    na = (FIX / "public" / "gpu2gb_i3pystatus-776_query_gpu_noheader_na.txt").read_text()
    assert job_progress.parse_gpu_load(na) == []  # 7 fields: not this query's rows
    rows = job_progress.parse_gpu_load(
        "0, [N/A], [N/A], [N/A], [N/A]\n1, 0, [Not Supported], [Not Supported], [Not Supported]\n"
    )
    assert rows[0]["util"] is None and rows[1]["power"] is None
    assert job_progress.gpus_idle(rows) is None  # GPU0's utilisation unread: no verdict at all
    assert job_progress.gpus_idle(rows[1:]) is True  # no power reading: utilisation alone
    # no power reading and 100 %: not idle, memory utilisation or not (the spin rule needs the power)
    assert job_progress.gpus_idle([dict(rows[1], util=100.0, mem_util=0.0)]) is False
    assert job_progress.gpus_idle([]) is None
    assert job_progress.parse_gpu_load("NVIDIA-SMI has failed because it couldn't communicate\n") == []


# --- one look judged against the last ---------------------------------------------------------


def test_cpu_time_first_progressing_quiet_stalled():
    first = job_progress.judge(None, 100.0, {"7:1": 5}, None, 60)
    assert (first["state"], first["signal"]) == ("first", "cpu")
    moved = job_progress.judge(first["keep"], 130.0, {"7:1": 9}, None, 60)
    assert moved["state"] == "progressing"
    still = job_progress.judge(moved["keep"], 160.0, {"7:1": 9}, None, 60)
    assert (still["state"], still["since"]) == ("quiet", 130.0)  # no tick since the look at 130
    later = job_progress.judge(still["keep"], 189.0, {"7:1": 9}, None, 60)
    assert (later["state"], later["since"]) == ("quiet", 130.0)
    stalled = job_progress.judge(later["keep"], 190.0, {"7:1": 9}, None, 60)
    assert (stalled["state"], stalled["since"]) == ("stalled", 130.0)
    # 0: never stalled
    assert job_progress.judge(later["keep"], 10_000.0, {"7:1": 9}, None, 0)["state"] == "quiet"
    # a rank restarted (another PID:start) is not the same ranks: progress of a kind
    assert job_progress.judge(stalled["keep"], 200.0, {"8:2": 9}, None, 60)["state"] == "progressing"
    assert job_progress.judge(stalled["keep"], 200.0, {}, None, 60)["state"] == "no ranks"


def test_a_rank_waiting_in_gloo_wakes_now_and_then_and_is_still_quiet():
    """Seen on the testbed (the integration test's ranks blocked in an all_reduce, gloo, CPU nodes):
    a waiting rank's stime rose by 1 tick (10 ms) in 5 s; the first rule (any tick is progress)
    called that job progressing at every look. Below CPU_IDLE_SHARE of one CPU is no progress."""
    first = job_progress.judge(None, 100.0, {"414:1": 1.60, "415:1": 1.59}, None, 60)
    woke = job_progress.judge(first["keep"], 105.0, {"414:1": 1.60, "415:1": 1.60}, None, 60)
    assert (woke["state"], woke["since"]) == ("quiet", 100.0)
    later = job_progress.judge(woke["keep"], 165.0, {"414:1": 1.70, "415:1": 1.72}, None, 60)
    assert (later["state"], later["since"]) == ("stalled", 100.0)
    # a rank at 5 % of a CPU between the looks makes progress
    assert (
        job_progress.judge(woke["keep"], 165.0, {"414:1": 4.60, "415:1": 1.6}, None, 60)["state"]
        == "progressing"
    )


def test_gpus_idle_since_the_first_idle_look_and_unreadable_is_unknown():
    busy_look = job_progress.judge(None, 100.0, {"7:1": 5}, False, 60)
    assert (busy_look["state"], busy_look["signal"]) == ("progressing", "gpu")
    idle = job_progress.judge(busy_look["keep"], 120.0, {"7:1": 99}, True, 60)
    assert (idle["state"], idle["since"]) == ("quiet", 120.0)  # CPU time moved: the GPUs decide
    stalled = job_progress.judge(idle["keep"], 180.0, {"7:1": 150}, True, 60)
    assert (stalled["state"], stalled["since"]) == ("stalled", 120.0)
    unread = job_progress.judge(stalled["keep"], 240.0, {"7:1": 150}, None, 60)
    assert (unread["state"], unread["signal"]) == ("unknown", "gpu")  # never stalled on no reading


def test_a_kept_look_is_believed_only_whole():
    look = job_progress.judge(None, 100.0, {"7:1": 5}, None, 60)["keep"]
    assert job_progress.read_kept(json.dumps(look)) == look
    for bad in (
        "",
        "{",
        "[]",
        json.dumps(dict(look, extra=1)),
        json.dumps(dict(look, at="100")),
        json.dumps(dict(look, ranks={"../x": 1})),
        json.dumps(dict(look, ranks={"7:1": -1})),
        json.dumps(dict(look, quiet_since=float("1e12"))),
        json.dumps(dict(look, gpu_idle="yes")),
    ):
        assert job_progress.read_kept(bad) is None, bad


# --- the module on real processes under the real wireup-jobctl ---------------------------------

SLEEPING_RANK = 'LOCAL_RANK=0 exec "$WIREUP_PYTHON" -c "import time; time.sleep(600)"\n'
SPINNING_RANK = 'LOCAL_RANK=0 exec "$WIREUP_PYTHON" -c "while True: pass"\n'


def _job(tmp_path, rank_line):
    job = tmp_path / "jobs" / "it-stall"
    (job / "logs").mkdir(parents=True)
    (job / "launch.sh").write_text("#!/usr/bin/env bash\n" + rank_line)
    (job / "launch.sh").chmod(0o750)
    return job


def _jobctl(*args):
    env = dict(os.environ, WIREUP_JOBCTL_MANAGER="process", WIREUP_PYTHON=sys.executable)
    out = subprocess.run(
        [str(JOBCTL), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=busy.HANG_S,
        env=env,
        check=False,
    )
    return {"rc": out.returncode, "stdout": out.stdout, "stderr": out.stderr}


def _look(job, run_id, stall_after, check=False):
    """The module's answer, run by Ansible on this machine, registered as a loop of one (jobs.yml)."""
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    argv = [str(pathlib.Path(sys.executable).with_name("ansible")), "-i", "localhost,", "-c", "local"]
    argv += ["--check"] if check else []
    argv += ["-e", f"ansible_python_interpreter={sys.executable}", "localhost", "-m"]
    argv += [
        "wireup.cluster.wireup_job_progress",
        "-a",
        f"job_dir={job} run_id={run_id} stall_after={stall_after}",
    ]
    out = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=busy.HANG_S, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return {"results": [json.loads(out.stdout.split("=>", 1)[1])]}


@pytest.fixture
def sleeping_run(tmp_path):
    job = _job(tmp_path, SLEEPING_RANK)
    assert _jobctl("start", job, "R1")["rc"] == 0
    yield job
    _jobctl("stop", job, "R1", "1")


def test_a_sleeping_rank_is_quiet_then_stalled_and_the_look_is_kept(sleeping_run):
    job = sleeping_run
    assert busy.wait_until(lambda: stall.look_of(_look(job, "R1", 1, check=True))["ranks"] == 1)
    assert not (job / "runs" / "R1" / "progress.json").exists()  # check mode keeps nothing
    first = stall.look_of(_look(job, "R1", 1))
    assert (first["state"], first["signal"], first["ranks"]) == ("first", "cpu", 1)
    kept = job_progress.read_kept((job / "runs" / "R1" / "progress.json").read_text())
    assert kept is not None and kept["at"] == first["at"]
    # A behaviour wait: the next looks compare with the kept one until 1 s of the node's clock passed.
    looks = []
    assert busy.wait_until(
        lambda: looks.append(_look(job, "R1", 1)) or stall.look_of(looks[-1])["state"] == "stalled"
    )
    last = stall.look_of(looks[-1])
    assert last["since"] == first["at"] and last["at"] - last["since"] >= 1
    # the run's stall over the hosts' registered looks (node2 made none: a run on one node here)
    jobs = {"job": "it-stall", "run_id": "R1", "hosts": ["node1"], "argv": ["/j", "status", str(job), "R1"]}
    plan = stall.stall(jobs, {"node1": looks[-1]}, stop=True, grace=3)
    assert plan["stalled"] == {"node1": first["at"]}
    assert plan["line"].startswith("job it-stall run R1: stalled on node1 since ")
    [[argv]] = plan["stops"].values()
    assert argv[:5] == ["/j", "stop", str(job), "R1", "3"] and argv[5].startswith(
        "stalled: no progress on node1"
    )
    assert "node1: stalled since " in plan["lines"]["node1"]
    # the stop wireup-jobctl makes from that argv ends the run with the reason
    stopped = _jobctl(*argv[1:])
    assert stopped["rc"] == 0 and "stopped run R1" in stopped["stdout"]
    assert json.loads(stopped["stdout"].splitlines()[-1])["reason"] == argv[5]


def test_a_spinning_rank_progresses(tmp_path):
    job = _job(tmp_path, SPINNING_RANK)
    assert _jobctl("start", job, "R1")["rc"] == 0
    try:
        assert busy.wait_until(lambda: stall.look_of(_look(job, "R1", 1))["ranks"] == 1)
        looks = [stall.look_of(_look(job, "R1", 1)) for _ in range(2)]
        assert [look["state"] for look in looks] == ["progressing", "progressing"]
    finally:
        _jobctl("stop", job, "R1", "1")


# --- the run's stall on jobs_plan's own plan ----------------------------------------------------


def _jobs(action, gpus=None, run_id="R1"):
    plan = torchrun_launch.job_plan(GROUP, NODES, **dict(BASE, run_id="ignored", follow=True))
    found = {
        h: {
            "rc": 0,
            "stdout": f"{run_id}\n" + json.dumps({"run_id": run_id, "started": 1.0, "record": False}),
        }
        for h in GROUP
    }
    return torchrun_launch.jobs_plan(plan, action, found=found, play_hosts=GROUP, gpus=gpus or {})


def test_status_looks_on_every_host_of_the_run_with_nvidia_smi_where_there_are_gpus():
    jobs = _jobs("status")
    gpu = {"present": True, "nvidia_smi": "/usr/bin/nvidia-smi"}
    assert stall.progress_calls(jobs, "node1", gpu, 600) == [
        {
            "job_dir": "/opt/wireup/jobs/it-stall",
            "run_id": "R1",
            "stall_after": 600,
            "nvidia_smi": "/usr/bin/nvidia-smi",
        }
    ]
    assert stall.progress_calls(jobs, "node2", {"present": False}, "30")[0]["nvidia_smi"] == ""
    assert stall.progress_calls(jobs, "node9", gpu, 600) == []  # not a host of the run
    for action in ("logs", "stop", "list"):
        assert stall.progress_calls(_jobs(action), "node1", gpu, 600) == []
    assert stall.progress_calls(_jobs("status", run_id="../x"), "node1", gpu, 600) == []
    for bad in (-1, "ten", 1.5, True, None):
        with pytest.raises(ValueError, match="torchrun_launch_stall_after="):
            stall.progress_calls(jobs, "node1", gpu, bad)


def _registered(state, since=None, at=1000.0, signal="cpu"):
    return {
        "results": [{"progress": {"state": state, "since": since, "signal": signal, "ranks": 2, "at": at}}]
    }


def test_the_run_stalls_when_one_node_does_and_is_stopped_only_when_asked():
    jobs = _jobs("status")
    looks = {"node1": _registered("progressing"), "node2": _registered("stalled", since=400.0, signal="gpu")}
    seen = stall.stall(jobs, looks)
    assert seen["stalled"] == {"node2": 400.0} and seen["stops"] == {}
    assert seen["line"] == (
        "job it-stall run R1: stalled on node2 since 1970-01-01 00:06:40 UTC; "
        "stop it with -e torchrun_launch_action=stop or -e torchrun_launch_stop_stalled=true"
    )
    assert seen["lines"]["node2"] == (
        "node2: stalled since 1970-01-01 00:06:40 UTC (600 s without progress: every GPU idle, 2 rank(s))"
    )
    assert seen["lines"]["node1"] == "node1: progress: progressing (the ranks' CPU time, 2 rank(s))"
    stopped = stall.stall(jobs, looks, stop=True, grace=5)
    reason = "stalled: no progress on node2 since 1970-01-01 00:06:40 UTC"
    argv = [jobs["argv"][0], "stop", "/opt/wireup/jobs/it-stall", "R1", "5", reason]
    assert stopped["stops"] == {"node1": [argv], "node2": [argv]}
    assert stall.stall(jobs, looks, stop=True, check_mode=True)["stops"] == {}
    assert stall.stall(jobs, {"node1": _registered("quiet", since=900.0)}, stop=True)["line"] == ""


def test_a_look_not_of_its_shape_is_not_believed():
    assert stall.look_of({"results": []}) is None
    assert stall.look_of({"results": [{"skipped": True}]}) is None
    assert stall.look_of(_registered("asleep")) is None
    assert stall.look_of(_registered("stalled", since="yesterday")) is None
    assert stall.look_of(_registered("stalled", since=1.0, at=float("inf"))) is None
    assert stall.stall(_jobs("status"), {"node1": _registered("stalled", since="x")})["stalled"] == {}


def test_values_as_ansible_2_19_passes_them_tagged_are_believed():
    """ansible-core 2.19 passes a variable's int and a module's float as tagged subclasses
    (_AnsibleTaggedInt, _AnsibleTaggedFloat): the testbed's jobs.yml with -e
    torchrun_launch_stall_after=5 failed, 'torchrun_launch_stall_after=5: whole seconds'."""
    from ansible._internal._datatag._tags import Origin
    from ansible.module_utils._internal._datatag import AnsibleTagHelper

    def tagged(value):
        return AnsibleTagHelper.tag(value, [Origin(description="extra vars")])

    jobs = _jobs("status")
    assert stall.progress_calls(jobs, "node1", {"present": False}, tagged(5))[0]["stall_after"] == 5
    looks = {"node1": _registered("stalled", since=tagged(400.0), at=tagged(1000.0))}
    assert stall.stall(jobs, looks)["stalled"] == {"node1": 400.0}
    with pytest.raises(ValueError, match="torchrun_launch_stall_after="):
        stall.progress_calls(jobs, "node1", {}, tagged(-5))
