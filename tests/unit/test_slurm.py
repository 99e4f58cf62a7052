"""wireup.launch.slurm on real sacct captures (tests/fixtures/slurm), and job.sbatch run against fake
scontrol/srun/torchrun: one srun step per node with its rank, the first failing step ends the job."""

import json
import os
import pathlib
import re
import subprocess
import time

import pytest
from test_launch_templates import ENV, ROLE, context, fake_venv, render

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
NODES = ["node1", "node2", "node3"]


def capture(name):
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("galvani-cn001", ["galvani-cn001"]),
        ("login1,gpu[1-2]-ib", ["login1", "gpu1-ib", "gpu2-ib"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("None assigned", []),
        ("", []),
        ("  node1 ", ["node1"]),
        ("odd[a-b]", ["odd[a-b]"]),
    ],
)
def test_expand_hostlist(text, names):
    assert slurm.expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("stdout", "job_id"),
    [
        ("42\n", "42"),
        ("42;wireup-testbed\n", "42"),
        ("", ""),
        ("sbatch: error: Batch job submission failed", ""),
    ],
)
def test_sbatch_job_id(stdout, job_id):
    assert slurm.sbatch_job_id(stdout) == job_id


def test_parse_completed_job_steps_and_nodes():
    rows = slurm.parse_sacct(capture("testbed_22.05.8_sacct_completed.txt"))
    assert [(r["jobid"], r["step"], r["state"], r["rc"], r["nodes"]) for r in rows] == [
        ("4", "", "COMPLETED", 0, NODES),
        ("4.batch", "batch", "COMPLETED", 0, ["node1"]),
        ("4.0", "0", "COMPLETED", 0, ["node1"]),
        ("4.1", "1", "COMPLETED", 0, ["node3"]),
        ("4.2", "2", "COMPLETED", 0, ["node2"]),
    ]
    assert rows[0]["end"] == 1796087699.0  # 2026-12-01T01:14:59 (UTC on the testbed)


def test_parse_cancelled_by_uid_and_unknown_end():
    cancelled = slurm.parse_sacct(capture("testbed_22.05.8_sacct_cancelled_by_scancel.txt"))
    assert cancelled[0]["state"] == "CANCELLED"  # "CANCELLED by 0"
    assert {r["signal"] for r in cancelled[1:]} == {15}
    running = slurm.parse_sacct(capture("testbed_22.05.8_sacct_running.txt"))
    assert {r["state"] for r in running} == {"RUNNING"} and {r["end"] for r in running} == {None}


def test_parse_public_captures_in_their_own_column_order():
    rows = slurm.parse_sacct(
        capture("public_cluster_utils_87_sacct_step_signal.txt"), "JobID,NodeList,State,ExitCode"
    )
    assert [r["jobid"] for r in rows] == [
        "239023",
        "239023.batch",
        "239023.extern",
        "239023.0",
    ]  # header skipped
    assert (rows[3]["state"], rows[3]["rc"], rows[3]["signal"], rows[3]["nodes"]) == (
        "CANCELLED",
        0,
        10,
        ["galvani-cn001"],
    )
    ucloud = slurm.parse_sacct(capture("public_ucloud_70_sacct_b_failed.txt"), "JobID,State,ExitCode")
    assert [(r["step"], r["state"], r["rc"]) for r in ucloud] == [
        ("", "FAILED", 127),
        ("batch", "FAILED", 127),
        ("0", "FAILED", 127),
    ]


def test_parse_mangled_output():
    text = capture("testbed_22.05.8_sacct_node2_failed.txt")
    lines = text.splitlines()
    # CRLF, padding, a NUL byte, a blank line, and the last line cut in the middle of its fields.
    mangled = "\r\n".join(f"  {line}  " for line in lines[:-1]) + "\r\n\x00\r\n\r\n" + lines[-1][:8]
    rows = slurm.parse_sacct(mangled)
    assert [r["jobid"] for r in rows] == ["5", "5.batch", "5.0", "5.1"]
    assert rows[3]["state"] == "FAILED" and rows[3]["nodes"] == ["node2"]
    assert slurm.parse_sacct("sacct: error: Slurm accounting storage is disabled\n") == []
    odd = "5|COMPLETED|0:0|node1|Unknown\n5.0|\xff\xfe|0:0|node1|Unknown\n"
    assert slurm.parse_sacct(odd)[1]["jobid"] == "5.0"
    # A step state nobody knows is never taken for success.
    v = slurm.job_verdict(odd, ["node1"], job_id="5")
    assert (v["ok"], v["nodes"]["node1"]["state"]) == (False, "lost")


def test_verdict_completed():
    v = slurm.job_verdict(capture("testbed_22.05.8_sacct_completed.txt"), NODES, job_id="4")
    assert (v["over"], v["ok"], v["first_failure"], v["timed_out"], v["running"]) == (
        True,
        True,
        "",
        False,
        [],
    )
    assert v["reason"] == "Slurm job 4 COMPLETED: every node exited with code 0"
    assert {h: (n["state"], n["rc"], n["step"]) for h, n in v["nodes"].items()} == {
        "node1": ("exited", 0, "4.0"),
        "node2": ("exited", 0, "4.2"),
        "node3": ("exited", 0, "4.1"),
    }
    assert (v["job_id"], v["job_state"], v["job_exit_code"]) == ("4", "COMPLETED", "0:0")


def test_verdict_failing_node_is_named_and_the_others_were_stopped():
    v = slurm.job_verdict(capture("testbed_22.05.8_sacct_node2_failed.txt"), NODES, job_id="5")
    assert (v["over"], v["ok"], v["first_failure"]) == (True, False, "node2")
    assert v["reason"] == "node2 exited with code 1 in Slurm job 5 (FAILED)"
    assert {h: n["state"] for h, n in v["nodes"].items()} == {
        "node1": "stopped",
        "node2": "exited",
        "node3": "stopped",
    }


# The race CI met on the testbed: node2's rank exits 3, its torchrun closes the rendezvous, and
# node1's and node3's torchrun exit by themselves (code 1) in the same second, before Slurm stops
# them. sacct alone cannot tell who was first (node1 sorts first); the batch script's line can.
RACE = """6|FAILED|1:0|node[1-3]|2026-12-02T06:10:41
6.batch|FAILED|1:0|node1|2026-12-02T06:10:41
6.0|FAILED|1:0|node1|2026-12-02T06:10:41
6.1|FAILED|1:0|node2|2026-12-02T06:10:41
6.2|FAILED|1:0|node3|2026-12-02T06:10:41
"""
BATCH_OUT = (
    "wireup: job it-slurm-fail (Slurm job 6) on 3 node(s) (node1 node2 node3), master node1\n"
    "wireup: first failed step: node rank 1 (node2) exited with code 1: "
    "ending the job (Slurm stops the other steps)\n"
)


def test_the_batch_scripts_first_failed_step_names_the_node_in_a_same_second_race():
    assert slurm.first_failed_step(BATCH_OUT) == "node2"
    v = slurm.job_verdict(RACE, NODES, job_id="6", first_failed=slurm.first_failed_step(BATCH_OUT))
    assert (v["over"], v["ok"], v["first_failure"]) == (True, False, "node2")
    assert v["reason"] == "node2 exited with code 1 in Slurm job 6 (FAILED)"
    # Without the line, sacct's whole seconds leave it to the name order: the old, wrong answer.
    assert slurm.job_verdict(RACE, NODES, job_id="6")["first_failure"] == "node1"
    # Slurm node names map back to inventory hosts.
    named = slurm.job_verdict(
        RACE.replace("node", "cn"),
        {h: h.replace("node", "cn") for h in NODES},
        job_id="6",
        first_failed="cn3",
    )
    assert named["first_failure"] == "node3"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "wireup: a node's step exited with code 1: ending the job (Slurm stops the other steps)\n",
        "wireup: first failed step: node rank 1 (node2;id) exited with code 1: ending the job\n",
        "wireup: first failed step: node rank 1 (node2) exited with co",  # cut off
        "wireup: first failed step: node rank 1 (node2) exited with code 1: ending the job"[:40],
    ],
)
def test_no_first_failed_step_when_the_output_does_not_say_it(text):
    assert slurm.first_failed_step(text) == ""
    # A name that failed nowhere, or that stopped, never overrides sacct.
    assert slurm.job_verdict(RACE, NODES, job_id="6", first_failed=text)["first_failure"] == "node1"


def test_a_first_failed_name_that_was_stopped_does_not_override_sacct():
    v = slurm.job_verdict(
        capture("testbed_22.05.8_sacct_node2_failed.txt"), NODES, job_id="5", first_failed="node1"
    )
    assert v["first_failure"] == "node2"


def test_verdict_every_node_failed_at_once():
    v = slurm.job_verdict(capture("testbed_22.05.8_sacct_exit127_every_node.txt"), NODES, job_id="3")
    assert v["over"] and not v["ok"]
    assert v["first_failure"] in NODES and "exited with code 127" in v["reason"]


def test_verdict_running_and_pending():
    v = slurm.job_verdict(capture("testbed_22.05.8_sacct_running.txt"), NODES, job_id="7")
    assert (v["over"], v["ok"], v["running"]) == (False, False, NODES)
    # A pending job has no sacct row yet (seen on the testbed: sacct printed nothing).
    pending = slurm.job_verdict("", NODES, job_id="7")
    assert (pending["over"], pending["ok"], pending["reason"]) == (False, False, "the Slurm job is pending")


def test_verdict_cancelled_by_wireup_at_the_timeout():
    text = capture("testbed_22.05.8_sacct_cancelled_by_scancel.txt")
    v = slurm.job_verdict(text, NODES, job_id="7", timed_out=True)
    assert (v["over"], v["ok"], v["timed_out"], v["first_failure"]) == (True, False, True, "")
    assert "ran out of time (torchrun_launch_timeout) and was cancelled (CANCELLED)" in v["reason"]
    # The same job cancelled by someone else: no node is to blame either.
    other = slurm.job_verdict(text, NODES, job_id="7")
    assert (other["over"], other["ok"], other["first_failure"]) == (True, False, "")
    assert other["reason"].startswith("Slurm job 7 was stopped by Slurm (CANCELLED)")
    # Still running (or never seen) when the time ran out: over, not ok.
    late = slurm.job_verdict("", NODES, job_id="7", timed_out=True)
    assert (late["over"], late["ok"], late["timed_out"]) == (True, False, True)


def test_verdict_cancelled_while_pending():
    v = slurm.job_verdict(capture("testbed_22.05.8_sacct_cancelled_while_pending.txt"), NODES, job_id="13")
    assert (v["over"], v["ok"], v["first_failure"]) == (True, False, "")
    assert v["reason"] == "Slurm job 13 ended CANCELLED with exit code 0:0 before any node ran its step"
    assert {n["state"] for n in v["nodes"].values()} == {"missing"}


def test_verdict_step_killed_by_a_signal_fails_a_completed_job():
    text = capture("public_cluster_utils_87_sacct_step_signal.txt")
    rows = slurm.parse_sacct(text, "JobID,NodeList,State,ExitCode")
    normalized = "\n".join(
        f"{r['jobid']}|{r['state']}|{r['rc']}:{r['signal']}|{','.join(r['nodes'])}|Unknown" for r in rows
    )
    v = slurm.job_verdict(normalized, {"gpu1": "galvani-cn001"}, job_id="239023")
    assert (v["over"], v["ok"]) == (True, False)
    assert v["nodes"]["gpu1"]["slurm_state"] == "CANCELLED"


def test_node_names_and_nodelist_use_hostnames():
    plan = {"hosts": ["a", "b"], "nodes": {"a": {"hostname": "gpu01"}, "b": {"hostname": ""}}}
    assert slurm.node_names(plan) == {"a": "gpu01", "b": "b"}
    assert slurm.nodelist(plan) == "gpu01,b"


@pytest.mark.parametrize("tuned", ["default", ""])
def test_launch_sh_and_job_sbatch_render_one_env_block(tmp_path, tuned):
    over = {} if tuned == "default" else {"torchrun_launch_nccl_tuned_env": ""}
    ctx = context("explicit-interface-ib", tmp_path, **over)
    node = ctx["__torchrun_launch_plan"]["nodes"][ctx["inventory_hostname"]]
    block = ENV.get_template("jobs/job_env.sh.j2").render(**ctx, node=node)
    assert "export NCCL_IB_HCA=" in block and "export NCCL_DEBUG=INFO" in block
    for template in ("jobs/launch.sh.j2", "jobs/job.sbatch.j2"):
        assert block in ENV.get_template(template).render(**ctx)
        # The block's lines live in job_env.sh.j2 only, not in a copy of their own.
        source = (ROLE / "templates" / template).read_text()
        assert "GLOO_SOCKET_IFNAME" not in source and "wireup_job_env" not in source
        assert "{% include 'jobs/job_env.sh.j2' %}" in source
        # The venv check and the program's argv too: program.sh.j2 only.
        assert "{% include 'jobs/program.sh.j2' %}" in source and "bin/activate" not in source


# --- job.sbatch against fake Slurm tools ---------------------------------------------------------
FAKE_SCONTROL = """#!/bin/bash
[[ $1 == show && $2 == hostnames ]] || exit 9
tr ',' '\\n' <<<"$3"
"""
# srun --nodes=1 --ntasks=1 --nodelist=N --job-name=J CMD...: run CMD as that node's step, its
# output in a file of its own (as on a real node): steps writing to one shared pipe interleave their
# writes (print makes two of them under PYTHONUNBUFFERED=1), and a step that holds the batch
# script's pipes would keep subprocess.run waiting after the batch script ended.
FAKE_SRUN = """#!/bin/bash
for a in "$@"; do case $a in --nodelist=*) node=${a#--nodelist=}; shift;; --*) shift;; *) break;; esac; done
echo "$node" >> "$FAKE_SRUN_LOG"
SLURM_STEP_NODE=$node SLURM_NODEID=0 exec "$@" >"$FAKE_STEPS/$node.out" 2>&1 </dev/null
"""
# torchrun: print the argv and env it got; exit FAIL_RC on the node named FAIL_NODE; with HOLD set,
# every other node waits until the file HOLD exists (at most 60 s), then writes FAKE_STEPS/NODE.done.
FAKE_TORCHRUN = """#!/usr/bin/env python3
import json, os, sys, time
node = os.environ["SLURM_STEP_NODE"]
print(json.dumps({"node": node, "argv": sys.argv[1:], "rank": os.environ.get("WIREUP_NODE_RANK"),
                  "master": os.environ.get("WIREUP_MASTER"), "run": os.environ.get("WIREUP_RUN_ID"),
                  "gloo": os.environ.get("GLOO_SOCKET_IFNAME"), "quoted": os.environ.get("QUOTED")}))
if node == os.environ.get("FAIL_NODE"):
    sys.exit(int(os.environ["FAIL_RC"]))
hold, deadline = os.environ.get("HOLD"), time.monotonic() + 60
while hold and not os.path.exists(hold) and time.monotonic() < deadline:
    time.sleep(0.05)
open(os.path.join(os.environ["FAKE_STEPS"], node + ".done"), "w").close()
"""


def _sbatch_run(tmp_path, **env):
    ctx = context("three-cpu-nodes", tmp_path, torchrun_launch_slurm_options={"partition": "gpu"})
    job_dir = pathlib.Path(ctx["__torchrun_launch_job_dir"])
    script = render("jobs/job.sbatch.j2", ctx, job_dir / "job.sbatch")
    venv = pathlib.Path(ctx["wireup_venv_path"])
    fake_venv(venv)
    (venv / "bin" / "torchrun").write_text(FAKE_TORCHRUN)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "steps").mkdir()
    for name, text in (("scontrol", FAKE_SCONTROL), ("srun", FAKE_SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    full_env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        SLURM_JOB_ID="77",
        SLURM_JOB_NODELIST="wb-node1,wb-node2,wb-node3",
        SLURM_JOB_NUM_NODES="3",
        FAKE_SRUN_LOG=str(tmp_path / "srun.log"),
        FAKE_STEPS=str(tmp_path / "steps"),
        **env,
    )
    result = subprocess.run(
        ["/bin/bash", str(script), "--extra"],
        check=False,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )
    return ctx, job_dir, result


def test_sbatch_runs_one_step_per_node_with_its_rank(tmp_path):
    _ctx, job_dir, result = _sbatch_run(tmp_path)
    assert result.returncode == 0, result.stderr
    text = (job_dir / "job.sbatch").read_text()
    assert "#SBATCH --nodelist=wb-node1,wb-node2,wb-node3\n" in text  # the hosts' hostnames
    assert "#SBATCH --partition=gpu\n" in text
    outs = sorted((tmp_path / "steps").glob("*.out"))
    steps = [json.loads(line) for p in outs for line in p.read_text().splitlines() if line.startswith("{")]
    assert len(steps) == 3
    assert sorted((s["node"], s["rank"]) for s in steps) == [
        ("wb-node1", "0"),
        ("wb-node2", "1"),
        ("wb-node3", "2"),
    ]
    for s in steps:
        assert s["master"] == "wb-node1" and s["run"] == "slurm-77" and s["gloo"] == "eth0"
        assert s["quoted"] == 'it\'s "odd" $HOME'
        argv = s["argv"]
        assert argv[:7] == [
            "--nnodes=3",
            "--nproc_per_node=2",
            f"--node_rank={s['rank']}",
            "--rdzv_backend=c10d",
            "--rdzv_endpoint=wb-node1:29500",
            "--rdzv_id=ddp-multinode-77",
            "--rdzv_conf=join_timeout=300",
        ]
        assert argv[-4:] == ["--steps", "5", "two words", "--extra"]
    # Every node's output lands in its own log (here the three share one folder: appended).
    log = (job_dir / "logs" / "slurm-77.log").read_text()
    assert log.count("wireup: job ddp-multinode Slurm job 77 on ") == 3


def test_sbatch_first_failing_step_ends_the_job_with_its_code(tmp_path):
    # The other steps are held until the batch script has ended: it must not wait for them.
    hold = tmp_path / "release"
    _ctx, _job_dir, result = _sbatch_run(tmp_path, FAIL_NODE="wb-node2", FAIL_RC="5", HOLD=str(hold))
    steps = tmp_path / "steps"
    assert not list(steps.glob("*.done"))
    assert result.returncode == 5
    line = "wireup: first failed step: node rank 1 (wb-node2) exited with code 5: ending the job"
    assert line in result.stderr
    assert slurm.first_failed_step(result.stderr) == "wb-node2"
    hold.touch()  # Slurm would now stop them; here they end by themselves
    deadline = time.monotonic() + 60
    while len(list(steps.glob("*.done"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(p.name for p in steps.glob("*.done")) == ["wb-node1.done", "wb-node3.done"]


# --- what sacct and a host list may say (issue 35 item 7) -----------------------------------------


def test_a_host_list_expands_only_up_to_its_limit_and_says_so():
    # The list: 10 M names. Refused at once (counted, never expanded), naming the cap.
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"n\[0-9999999\]' names 10000000 hosts, more than 65536"):
        slurm.expand_hostlist("n[0-9999999]")
    with pytest.raises(ValueError, match="names 4 hosts, more than 3"):
        slurm.expand_hostlist("node[1-4]", limit=3)
    with pytest.raises(ValueError, match="more than 3"):
        slurm.expand_hostlist("r[1-2]-n[1-2]", limit=3)  # a product of groups counts whole
    assert time.monotonic() - t0 < 1
    assert slurm.expand_hostlist("node[1-3]", limit=3) == NODES
    # A range whose ends are no plain numbers is no range (superscripts, 5000 digits): kept as text.
    assert slurm.expand_hostlist("n[\u00b9-\u00b3]") == ["n[\u00b9-\u00b3]"]
    huge = "n[0-" + "9" * 5000 + "]"
    assert slurm.expand_hostlist(huge) == [huge]


def _sacct_verdict(text, job_id, hosts=NODES, **kw):
    """The verdict slurm_wait.yml takes, through its filter, with the plan slurm.yml made: the
    launch plan combined with slurm.run_plan of sbatch's answer (the real producers)."""
    from test_launch_jobs_follow import launched

    from ansible_collections.wireup.cluster.plugins.filter import wireup_slurm

    base = launched(run_id="20261202T000000Z-0001")
    plan = base | slurm.run_plan(f"{job_id}\n", base) | {"hosts": list(hosts)}
    return wireup_slurm.wireup_slurm_verdict(text, plan, **kw)


def test_the_verdict_takes_only_the_asked_jobs_rows():
    completed = capture("testbed_22.05.8_sacct_completed.txt")  # job 4, every node exited 0
    assert _sacct_verdict(completed, "4")["ok"]
    # sacct on the master answered with another job's rows: never this job's success.
    other = _sacct_verdict(completed, "5")
    assert (other["over"], other["ok"], other["job_id"]) == (True, False, "5")
    assert (
        other["reason"]
        == "sacct printed '4|COMPLETED|0:0|node[1-3]|2026-12-01T01:14:59', not a row of Slurm job 5"
    )
    # job 5's own rows with one of job 4's among them
    failed = capture("testbed_22.05.8_sacct_node2_failed.txt").replace("5.1|FAILED|1:0", "4.1|COMPLETED|0:0")
    mixed = _sacct_verdict(failed, "5")
    assert not mixed["ok"] and "not a row of Slurm job 5" in mixed["reason"]
    # an array task and a het job component's rows are rows of their own ids only
    task = re.sub(r"(?m)^4", "4_2", completed)
    assert slurm.job_verdict(task, NODES, job_id="4_2")["ok"]
    assert "not a row of Slurm job 4" in slurm.job_verdict(task, NODES, job_id="4")["reason"]
    assert slurm.job_verdict(completed.replace("4|", "4+0|"), NODES, job_id="4")["ok"]


@pytest.mark.parametrize(
    "jobid",
    [
        "4",
        "4.batch",
        "4.extern",
        "4.interactive",
        "4.0",
        "4.12",
        "4+1",
        "4+1.batch",
        "4.0+1",
        "4_7",
        "4_[1-3%2]",
    ],
)
def test_sacct_job_ids_in_the_forms_slurm_documents_are_rows(jobid):
    rows = slurm.parse_sacct(f"{jobid}|COMPLETED|0:0|node1|Unknown\n")
    assert [r["jobid"] for r in rows] == [jobid]


def test_a_step_id_that_is_no_plain_number_is_no_step():
    # "7.\u00b2": str.isdigit() says yes, int() says no: the verdict crashed with ValueError.
    text = capture("testbed_22.05.8_sacct_running.txt").splitlines()[1:]
    for step in ("7.\u00b2", "7.\u0661", "7.0x", "7.-1", "7.1+x", "\uff17.1"):
        rows = "\n".join([*text, f"{step}|FAILED|1:0|node3|2026-12-01T01:15:48"])
        v = _sacct_verdict(rows, "7")
        assert v["nodes"]["node3"]["state"] != "exited", step  # never node3's step
        assert (v["over"], v["ok"]) == (False, False)


def test_a_row_naming_more_nodes_than_the_job_has_is_not_its_row():
    # The job ran on 3 hosts (job.sbatch --nodes=3): a row naming 4, or 10 M, is not its row.
    text = capture("testbed_22.05.8_sacct_completed.txt")
    for nodes in ("node[1-4]", "n[0-9999999]"):
        t0 = time.monotonic()
        v = _sacct_verdict(text.replace("node[1-3]", nodes, 1), "4")
        assert time.monotonic() - t0 < 1
        assert (v["over"], v["ok"]) == (True, False)
        assert "more than 3" in v["reason"], v["reason"]
