"""The quick check through Slurm (issue 39, wireup/plans/node_check_slurm.py): which path
``bench.yml --tags quick`` takes (node_check_via and scontrol's answer), the one srun, and the
lines its tasks print read back. The seam is tested with what each side really makes: the real
wireup-check (built from this tree, run on the H200 captures as tests/unit/test_checkrun.py runs
it) through the real task script (TASK_SCRIPT under /bin/sh) into parse, then gathered and stored
as the Ansible path's answers for the same output are: the same records."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.wireup.cluster.plugins.filter import wireup_node_check as node_check_filters
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import watchsettings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_report, preflight
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import node_check_slurm as ncs
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from tests import busy
from tests.unit.test_checkrun import PYTHON, links_down, node  # noqa: F401  # node: the fixture

REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "tests/fixtures/h200x2"
NAMES = {"node1": "gpu-a01", "node2": "gpu-a02"}
RUN_ID = "20261207T210000Z"


def check_argv(node_dir):
    return [
        PYTHON,
        "-S",
        "-I",
        str(node_dir / "wireup-check"),
        "--config",
        str(node_dir / "check.json"),
        "--json",
    ]


def task(argv, slurm_node):
    """TASK_SCRIPT as srun runs it on a node: /bin/sh -c SCRIPT wireup-quick ARGV..., SLURMD_NODENAME set."""
    env = dict(os.environ, SLURMD_NODENAME=slurm_node)
    done = subprocess.run(
        ["/bin/sh", "-c", ncs.TASK_SCRIPT, ncs.HEAD, *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=busy.HANG_S,
        env=env,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def replay(tmp_path, name, stdout, stderr, rc):
    """A stand-in that prints what wireup-check printed once, with its exit code."""
    (tmp_path / f"{name}.out").write_text(stdout)
    (tmp_path / f"{name}.err").write_text(stderr)
    exe = tmp_path / name
    exe.write_text(f"#!/bin/sh\ncat {tmp_path}/{name}.out\ncat {tmp_path}/{name}.err >&2\nexit {rc}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return [str(exe)]


def store(tmp_path, run):
    params = {"results_dir": str(tmp_path), "nodes": run["nodes"], "thresholds": {}, "kind": "quick"}
    nodes = bench_report.store_nodes(dict(params, lost={}), read=lambda p: "")
    _run_id, run_dir, records = host_record.store_run(tmp_path, run["run_id"], nodes, kind="quick")
    stored = {p.name: json.loads(p.read_text()) for p in sorted(pathlib.Path(run_dir).glob("node*.json"))}
    return records, stored


def _real_runs(node_dir):
    """wireup-check's real output on two nodes: a baseline, a PASS; then 3 NVLinks down, a FAIL."""
    base = subprocess.run(
        [*check_argv(node_dir)[:-1], "--write-baseline", "--manual", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=busy.HANG_S,
    )
    assert base.returncode == 0, base.stdout + base.stderr
    runs = {}
    for host, damaged in (("node1", False), ("node2", True)):
        if damaged:
            (node_dir / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 1, 3))
        done = subprocess.run(
            check_argv(node_dir), capture_output=True, text=True, check=False, timeout=busy.HANG_S
        )
        runs[host] = (done.stdout, done.stderr, done.returncode)
    return runs


def test_the_real_check_through_the_task_script_stores_the_records_the_ansible_path_stores(node, tmp_path):  # noqa: F811
    runs = _real_runs(node)
    assert [r[2] for r in runs.values()] == [0, 1]  # PASS, FAIL
    # The Ansible path: the command module's stdout (its last newline stripped), stderr, rc.
    by_ansible = [
        node_check.result(h, stdout=o.rstrip("\n"), stderr=e.rstrip("\n"), rc=rc)
        for h, (o, e, rc) in runs.items()
    ]
    # The Slurm path: the same output, through the task script and srun's stdout, read back.
    lines = "".join(task(replay(tmp_path, h, *runs[h]), NAMES[h]) for h in ("node2", "node1"))
    assert len(lines.splitlines()) == 2 and all(ncs.LINE.fullmatch(x) for x in lines.splitlines())
    got = ncs.parse({"rc": 0, "stdout": "srun: a note of its own\n" + lines, "stderr": ""}, NAMES)
    assert got["refused"] == [] and got["said"] == "2 of 2 node(s) answered through Slurm"
    assert [got["results"][h] for h in ("node1", "node2")] == by_ansible
    group, reached = ["node1", "node2"], [{"hostname": NAMES[h]} for h in ("node1", "node2")]
    one = bench_report.gather_quick(
        group, name="g", run_ids=[RUN_ID] * 2, results=by_ansible, reached=reached
    )
    two = bench_report.gather_quick(
        group, name="g", run_ids=[RUN_ID] * 2, results=[{}, {}], reached=reached, slurm=got
    )
    assert one == two
    _records_a, stored_a = store(tmp_path / "a", one)
    records_s, stored_s = store(tmp_path / "s", two)
    assert {h: r["verdict"] for h, r in records_s.items()} == {"node1": "PASS", "node2": "FAIL"}
    assert stored_s == stored_a and stored_s["node2.json"]["node_check"]["verdict"] == "FAIL"
    # The real check run by the script itself (no replay) gives the verdict too.
    real = ncs.parse({"rc": 0, "stdout": task(check_argv(node), "gpu-a02")}, {"node2": "gpu-a02"})
    assert (
        real["results"]["node2"]["verdict"] == "FAIL"
        and "NVLink 3 of 18 links down" in real["results"]["node2"]["line"]
    )


def test_a_node_with_no_line_or_two_lines_is_error_never_pass():
    ok = ncs.encode_line(
        "gpu-a01", 0, json.dumps({"verdict": "PASS", "line": "wireup-check: PASS node1: ok"})
    )
    got = ncs.parse({"rc": 1, "stdout": ok + "\n", "stderr": "srun: error: gpu-a02: task 1: Exited"}, NAMES)
    assert got["results"]["node1"]["verdict"] == "PASS"
    lost = got["results"]["node2"]
    assert (
        lost["verdict"] == "ERROR"
        and "no line from Slurm node gpu-a02 in the job step (srun exit code 1)" in lost["line"]
    )
    assert "task 1: Exited" in lost["line"] and got["said"] == "1 of 2 node(s) answered through Slurm"
    twice = ncs.parse({"rc": 0, "stdout": f"{ok}\n{ok}\n"}, NAMES)
    assert (
        twice["results"]["node1"]["verdict"] == "ERROR"
        and "two lines from Slurm node gpu-a01" in twice["results"]["node1"]["line"]
    )
    assert twice["refused"] == ["refused a second line from node1 (Slurm node gpu-a01): neither trusted"]
    assert {r["verdict"] for r in ncs.parse({"rc": 0, "stdout": ""}, NAMES)["results"].values()} == {"ERROR"}


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            ncs.encode_line("gpu-b07", 0, "{}"),
            "refused a line from Slurm node 'gpu-b07', which is not one of the play's nodes",
        ),
        (f"{ncs.HEAD} gpu-a01 0 !!!! ", "refused a line off the wireup-quick grammar"),
        (
            f"{ncs.HEAD} gpu-a01 0 abc ",
            "refused node1's line (Slurm node gpu-a01): its wireup-check output is not base64",
        ),
        (f"{ncs.HEAD} gpu a01 0  ", "refused a line off the wireup-quick grammar"),
        (f"{ncs.HEAD} -gpu-a01 0  ", "refused a line off the wireup-quick grammar"),
        (f"{ncs.HEAD} gpu-a01 0  \x1b[31m", "refused a line off the wireup-quick grammar"),
        (f"{ncs.HEAD} gpu-a01 1234  ", "refused a line off the wireup-quick grammar"),
        (
            ncs.encode_line("gpu-a01", 0, "x" * (ncs.MAX_STDOUT + 1)),
            "its wireup-check output is more than 262144 bytes",
        ),
    ],
)
def test_hostile_lines_are_refused_and_said(line, said):
    got = ncs.parse({"rc": 0, "stdout": line + "\n"}, NAMES)
    assert len(got["refused"]) == 1 and said in got["refused"][0]
    assert "\x1b" not in got["refused"][0]
    assert got["results"]["node1"]["verdict"] == "ERROR"  # nothing accepted: no line for it


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_line_is_passed_over_refused_or_read_never_a_crash(text):
    line = ncs.HEAD + " " + text
    got = ncs.parse({"rc": 0, "stdout": line}, NAMES)
    assert set(got["results"]) == set(NAMES)
    for host, result in got["results"].items():
        assert result["host"] == host and result["verdict"] in ("PASS", "FAIL", "ERROR", "NO_BASELINE")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000), st.integers(min_value=0, max_value=255))
def test_any_output_of_a_named_node_comes_back_as_the_ansible_path_reads_it(out, rc):
    text = out.decode("utf-8", "replace")
    got = ncs.parse({"rc": 0, "stdout": ncs.encode_line("gpu-a02", rc, text)}, NAMES)
    assert got["refused"] == []
    assert got["results"]["node2"] == node_check.result("node2", stdout=text, stderr="", rc=rc)


def test_the_route_takes_slurm_only_where_slurm_can_run_a_step_on_every_node():
    text = "".join(
        f"NodeName={n} Arch=x86_64 CoresPerSocket=1 State={s} ThreadsPerCore=1 Partitions=debug\n"
        for n, s in (
            ("gpu-a01", "IDLE"),
            ("gpu-a02", "MIXED"),
            ("gpu-a03", "IDLE+DRAIN"),
            ("gpu-a04", "DOWN*"),
        )
    )
    scontrol = {"rc": 0, "stdout": text, "stderr": ""}
    both = ncs.route("auto", NAMES, scontrol)
    assert (both["via"], both["tasks"], both["errors"]) == ("slurm", "quick_slurm.yml", [])
    assert both["why"].startswith("one Slurm job step: Slurm knows all 2 node(s)")
    assert ncs.route("ansible", NAMES, scontrol)["tasks"] == "quick.yml"
    drained = dict(NAMES, node3="gpu-a03", node4="gpu-a04", node5="gpu-z09")
    auto = ncs.route("auto", drained, scontrol)
    assert auto["via"] == "ansible" and auto["tasks"] == "quick.yml" and auto["errors"] == []
    assert (
        "node3 (gpu-a03) is IDLE+DRAIN in Slurm" in auto["why"] and "node4 (gpu-a04) is DOWN*" in auto["why"]
    )
    assert "Slurm does not know node5 (node name 'gpu-z09')" in auto["why"]
    [error] = ncs.route("slurm", drained, scontrol)["errors"]
    assert error.startswith("node_check_via is slurm, but ") and error.endswith(
        "set node_check_via: auto or ansible"
    )
    gone = {"rc": 2, "msg": "[Errno 2] No such file or directory: b'scontrol'"}
    assert (
        "scontrol show node on the Slurm submit host failed ([Errno 2]"
        in ncs.route("auto", NAMES, gone)["why"]
    )
    assert ncs.route("slurm", NAMES, gone)["errors"]
    shared = ncs.route("auto", {"a": "n1", "b": "n1"}, scontrol)
    assert shared["via"] == "ansible" and "a, b share the Slurm node name 'n1'" in shared["why"]
    assert ncs.route("slurm", {"a": "bad name"}, scontrol)["errors"][0].count("not a plain host name") == 1


def test_the_srun_runs_one_task_per_node_bounded_with_the_users_options():
    argv = ncs.srun_argv(
        {"node2": "gpu-a02", "node1": "gpu-a01"},
        ["/usr/local/sbin/wireup-check", "--json"],
        options={"reservation": "maint", "partition": "gpu", "exclusive": True},
        wait=20,
        timeout=10,
        bench=True,
    )
    assert argv[:10] == [
        "srun",
        "--job-name=wireup-quick",
        "--nodelist=gpu-a01,gpu-a02",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--immediate=20",
        "--time=2",
        "--kill-on-bad-exit=0",
        "--exclusive",
    ]
    assert argv[10:12] == ["--partition=gpu", "--reservation=maint"]
    assert argv[12:] == [
        "/bin/sh",
        "-c",
        ncs.TASK_SCRIPT,
        "wireup-quick",
        "/usr/local/sbin/wireup-check",
        "--json",
    ]
    for bad, said in (
        ({"time": "5"}, "time is not passed to srun"),
        ({"requeue": True}, "requeue is not passed to srun"),
        ({"reservation": "a b"}, "must be one word"),
        ({"chdir": "/"}, "is not an sbatch option wireup passes on"),
    ):
        with pytest.raises(ValueError, match=said):
            ncs.srun_argv(NAMES, ["x"], options=bad)
    with pytest.raises(ValueError, match="not a plain host name"):
        ncs.srun_argv({"node1": "a\nb"}, ["x"])


def test_preflight_names_the_variable_of_a_bad_setting():
    errors = watchsettings.errors(
        {"node_check_via": "srun", "node_check_slurm_options": {"time": "1"}, "node_check_slurm_wait": 0}
    )
    assert errors == [
        "node_check_slurm_wait=0 must be a whole number of at least 1",
        "node_check_via='srun' must be one of auto, ansible, slurm",
        "node_check_slurm_options: time is not passed to srun (time: wireup bounds the step from "
        "node_check_timeout; requeue: a job step is never requeued): remove it",
    ]
    assert "node_check_via='srun' must be one of auto, ansible, slurm" in preflight.host_errors(
        {"node_check_via": "srun"}
    )


def test_the_encoder_in_python_is_the_task_scripts(tmp_path):
    out, err = '{"verdict": "PASS"}', "warn\n" * 200
    argv = replay(tmp_path, "w", out, err, 3)
    assert task(argv, "gpu-a01") == ncs.encode_line("gpu-a01", 3, out, err) + "\n"
    assert len(base64.b64decode(ncs.encode_line("gpu-a01", 0, "", err).split(" ")[4])) == ncs.MAX_STDERR
    assert shutil.which("base64")


STAND_IN_SRUN = """#!/bin/sh
# srun as far as the module uses it: each node of --nodelist runs the command with SLURMD_NODENAME.
nodes=""
while [ $# -gt 0 ]; do
  case "$1" in --nodelist=*) nodes="${1#--nodelist=}" ;; --*) ;; *) break ;; esac
  shift
done
echo "$@" > "$(dirname "$0")/argv"
for n in $(echo "$nodes" | tr , ' '); do SLURMD_NODENAME=$n "$@"; done
"""


def run_module(tmp_path, args, states):
    """wireup_quick_slurm through ansible (ad hoc, local), stand-in scontrol and srun first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    shown = "".join(f"NodeName={n} Arch=x86_64 State={s} Partitions=debug\n" for n, s in states.items())
    (tmp_path / "shown").write_text(shown)
    for name, text in (("scontrol", f"#!/bin/sh\ncat {tmp_path}/shown\n"), ("srun", STAND_IN_SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"),
        ANSIBLE_STDOUT_CALLBACK="default",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOME=str(tmp_path / "home"),
    )
    ansible = str(pathlib.Path(sys.executable).parent / "ansible")
    cmd = [
        ansible,
        "localhost",
        "-c",
        "local",
        "-i",
        "localhost,",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    cmd += ["-m", "wireup.cluster.wireup_quick_slurm", "-a", json.dumps(args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=busy.HANG_S, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.split("=>", 1)[1])


def test_the_module_runs_one_step_on_the_submit_host_or_says_why_not(tmp_path):
    said = {"verdict": "FAIL", "line": "wireup-check: FAIL x: NIC gone", "problems": [], "errors": []}
    check = replay(tmp_path, "check", json.dumps(said), "", 1)
    args = {"via": "auto", "names": NAMES, "check_argv": check, "options": {"reservation": "maint"}}
    done = run_module(tmp_path / "a", args, {"gpu-a01": "IDLE", "gpu-a02": "MIXED"})
    assert done["changed"] is False and done["route"]["via"] == "slurm"
    assert done["srun"]["rc"] == 0 and done["srun"]["argv"][:3] == [
        "srun",
        "--job-name=wireup-quick",
        "--nodelist=gpu-a01,gpu-a02",
    ]
    # srun's lines come back as they are and are read on the controller (the filter, as the role does).
    facts = [{"hostname": "gpu-a01"}, {"hostname": "gpu-a02"}]
    read = node_check_filters.node_check_slurm_results(done["srun"], hosts=["node1", "node2"], facts=facts)
    assert read["refused"] == [] and {h: r["verdict"] for h, r in read["results"].items()} == {
        "node1": "FAIL",
        "node2": "FAIL",
    }
    assert (tmp_path / "a/bin/argv").read_text().startswith("/bin/sh -c ")
    drained = run_module(tmp_path / "b", args, {"gpu-a01": "IDLE", "gpu-a02": "IDLE+DRAIN"})
    assert drained["route"]["via"] == "ansible" and drained["srun"] == {}
    assert not (tmp_path / "b/bin/argv").exists()  # no srun
    assert "node2 (gpu-a02) is IDLE+DRAIN in Slurm" in drained["route"]["why"]
