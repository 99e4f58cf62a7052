"""Hostile strings (shell metacharacters, newlines, '..', unicode, 100 kB) fed into every
inventory-facing validator and the launch templates (issue 23): a value is either refused with a
named error (a returned message, ValueError, or the AnsibleFilterError wireup's filters turn it
into) or, accepted, it runs no payload when the rendered launch.sh is executed, leaves no path
outside results/, and adds no line to job.sbatch or the tuned env file.

The payloads create a marker file (./PWNED) in the folder the script runs in; launch.sh runs for
real, against a fake venv whose torchrun is a bash script that saves its argv and environment, so
the test also checks the accepted value arrived intact (not only that nothing ran)."""

import json
import os
import pathlib
import subprocess
import tempfile

import pytest
import test_launch_templates as templates
from ansible.errors import AnsibleFilterError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import benchenv
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (
    preflight,
    slurm_health_check,
    torchrun_launch,
)

MARKER = "PWNED"
FRAGMENTS = [
    f"$(touch {MARKER})",
    f"`touch {MARKER}`",
    f";touch {MARKER};",
    f"\ntouch {MARKER}\n",
    f"\rtouch {MARKER}",
    f"' ; touch {MARKER} ; '",
    f'" ; touch {MARKER} ; "',
    f"${{IFS}}touch${{IFS}}{MARKER}",
    f"|touch {MARKER}",
    f"&& touch {MARKER}",
    "../../../../tmp/evil",
    "..",
    "/",
    " ",
    "\t",
    "\\",
    "#",
    "=",
    "--uid=0 --wrap=id",
    "\u2028",
    "\x85",
    "nöde",
    "\x00",
    "node2",
]
NAMES = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), min_size=1, max_size=4).map(
    "".join
)
HOSTILE = st.one_of(NAMES, st.text(max_size=30), st.sampled_from(FRAGMENTS).map(lambda f: "a" * 100_000 + f))
# What can reach a script at all: Ansible writes text, and bash cannot hold a NUL in a variable.
SCRIPTABLE = HOSTILE.filter(lambda s: "\x00" not in s)
NAMED = (ValueError, AnsibleFilterError)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

FAKE_TORCHRUN = """#!/usr/bin/env bash
printf '%s\\0' "$@" > "$PWD/argv"
env -0 > "$PWD/env"
"""


def _run_dir():
    """A fresh folder with a fake venv (python for launch.sh's check, torchrun that records)."""
    top = pathlib.Path(tempfile.mkdtemp(prefix="wireup-hostile-"))
    venv = top / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'VIRTUAL_ENV="{venv}"\nPATH="$VIRTUAL_ENV/bin:$PATH"\n')
    for tool in ("torchrun", "python"):
        (venv / "bin" / tool).write_text(FAKE_TORCHRUN)
        (venv / "bin" / tool).chmod(0o755)
    return top


def _context(top, **overrides):
    ctx = templates.context("three-cpu-nodes", top)
    base = top / "opt-wireup"
    ctx.update(
        wireup_venv_path=str(top / "venv"),
        __torchrun_launch_job_dir=str(base / "jobs" / "ddp-multinode"),
        torchrun_launch_args=[],
        torchrun_launch_env={},
    )
    ctx.update(overrides)
    return ctx


def _run_launch(ctx, top):
    """Render launch.sh, check it with bash -n, run it in ``top``; (argv, env) torchrun got."""
    script = templates.render("jobs/launch.sh.j2", ctx, top / "launch.sh")
    subprocess.run(["bash", "-n", str(script)], check=True, capture_output=True)
    result = subprocess.run(
        [str(script)],
        cwd=top,
        capture_output=True,
        env=dict(os.environ, WIREUP_RUN_ID="t1"),
        timeout=30,
        check=False,
    )
    assert not (top / MARKER).exists(), "a payload ran"
    assert result.returncode == 0, result.stderr[-2000:]
    argv = (top / "argv").read_bytes().decode().split("\0")[:-1]
    env = dict(
        e.split("=", 1) for e in (top / "env").read_bytes().decode("utf-8", "replace").split("\0") if "=" in e
    )
    return argv, env


def _plan_with(top, hosts, nodes, **kw):
    return torchrun_launch.job_plan(
        hosts,
        nodes,
        job="ddp-multinode",
        program="/opt/wireup/examples/ddp_multinode.py",
        base_dir=str(top / "opt-wireup"),
        venv_path=str(top / "venv"),
        results_dir=str(top / "results"),
        run_id="t1",
        **kw,
    )


# ---------------------------------------------------------------- host names
@FAST
@given(name=HOSTILE)
def test_an_inventory_host_name_is_refused_or_harmless(name):
    errors = checks.inventory_host_errors([name])
    assert checks.is_inventory_host(name) is not bool(errors)
    top = _run_dir()
    nodes = dict(templates.INVENTORIES["three-cpu-nodes"]["nodes"])
    nodes[name] = dict(nodes.pop("node2"), hostname="")
    plan = _plan_with(top, sorted(nodes), nodes)
    if errors:
        assert plan["errors"], "torchrun_launch.plan took a host name preflight refuses"
        return
    assert plan["errors"] == []
    path = checks.results_path(plan["results"], name + ".log")
    assert os.path.realpath(path).startswith(os.path.realpath(top / "results") + os.sep)
    ctx = _context(top, inventory_hostname=name, __torchrun_launch_plan=plan)
    _, env = _run_launch(ctx, top)
    assert env["WIREUP_HOST"] == name


@FAST
@given(hostname=HOSTILE)
def test_a_node_hostname_is_refused_or_stays_one_word_of_job_sbatch(hostname):
    top = _run_dir()
    nodes = dict(templates.INVENTORIES["three-cpu-nodes"]["nodes"])
    nodes["node2"] = dict(nodes["node2"], hostname=hostname)
    plan = _plan_with(top, sorted(nodes), nodes, slurm=True)
    refused = checks.node_hostname_errors({"node2": hostname})
    assert bool(plan["errors"]) is bool(refused)
    if refused:
        with pytest.raises(ValueError):
            slurm.nodelist({"hosts": sorted(nodes), "nodes": nodes})
        return
    ctx = _context(top, __torchrun_launch_plan=plan, torchrun_launch_slurm_nodelist=True)
    text = templates.render("jobs/job.sbatch.j2", ctx, top / "job.sbatch").read_text()
    lines = [line for line in text.splitlines() if line.startswith("#SBATCH --nodelist=")]
    assert lines == [f"#SBATCH --nodelist=wb-node1,{hostname or 'node2'},wb-node3"]  # '': the inventory name
    subprocess.run(["bash", "-n", str(top / "job.sbatch")], check=True, capture_output=True)


# ---------------------------------------------------------------- quoted values
@FAST
@given(value=SCRIPTABLE, arg=SCRIPTABLE, program=SCRIPTABLE, interface=SCRIPTABLE)
def test_values_reach_the_program_intact_and_run_nothing(value, arg, program, interface):
    """Values that are quoted, not held to a grammar: env values, the program's arguments and
    path, the node's interface."""
    top = _run_dir()
    nodes = dict(templates.INVENTORIES["three-cpu-nodes"]["nodes"])
    nodes["node2"] = dict(nodes["node2"], interface=interface or "eth0")
    plan = _plan_with(top, sorted(nodes), nodes, env={"HOSTILE": value})
    assert plan["errors"] == []
    ctx = _context(
        top,
        __torchrun_launch_plan=plan,
        torchrun_launch_env={"HOSTILE": value},
        wireup_job_env={"JOB_HOSTILE": value},
        torchrun_launch_args=["--x", arg],
        torchrun_launch_program="/" + program,
    )
    argv, env = _run_launch(ctx, top)
    assert argv[-3:] == ["/" + program, "--x", arg]
    assert env["HOSTILE"] == value and env["JOB_HOSTILE"] == value
    assert env["NCCL_SOCKET_IFNAME"] == (interface or "eth0")


@FAST
@given(args=NAMES.filter(lambda s: "\x00" not in s))
def test_a_string_of_arguments_is_split_with_shlex_or_refused(args):
    top = _run_dir()
    ctx = _context(top, torchrun_launch_args=args)
    if checks.program_args_errors(args):
        with pytest.raises(NAMED):
            templates.render("jobs/launch.sh.j2", ctx, top / "launch.sh")
        return
    split = checks.program_args(args)
    argv, _ = _run_launch(ctx, top)
    assert argv[len(argv) - len(split) - 1 :] == [ctx["torchrun_launch_program"], *split]


@FAST
@given(base=SCRIPTABLE)
def test_a_base_dir_is_refused_or_harmless(base):
    """wireup_base_dir is written into comment lines too, where only the grammar protects."""
    top = _run_dir()
    path = str(top) + "/" + base
    if checks.validate_abs_paths({"wireup_base_dir": path}):
        return
    plan = _plan_with(top, ["node1", "node2", "node3"], templates.INVENTORIES["three-cpu-nodes"]["nodes"])
    job_dir = path + "/jobs/ddp-multinode"
    ctx = _context(top, wireup_base_dir=path, __torchrun_launch_job_dir=job_dir, __torchrun_launch_plan=plan)
    _run_launch(ctx, top)


# ---------------------------------------------------------------- Slurm options
@FAST
@given(
    key=st.one_of(st.sampled_from(checks.SBATCH_OPTIONS), HOSTILE), value=st.one_of(HOSTILE, st.just(True))
)
def test_a_slurm_option_is_refused_or_one_sbatch_line(key, value):
    options = {key: value}
    top = _run_dir()
    ctx = _context(top, torchrun_launch_slurm_options=options)
    if checks.slurm_option_errors(options):
        with pytest.raises(NAMED):
            slurm.sbatch_options(options)
        with pytest.raises(NAMED):
            templates.render("jobs/job.sbatch.j2", ctx, top / "job.sbatch")
        return
    text = templates.render("jobs/job.sbatch.j2", ctx, top / "job.sbatch").read_text()
    plain = templates.render("jobs/job.sbatch.j2", dict(ctx, torchrun_launch_slurm_options={}), top / "plain")
    word = f"--{key}" if value is True else f"--{key}={value}"
    assert text.splitlines() == [
        *plain.read_text().splitlines()[: text.splitlines().index(f"#SBATCH {word}")],
        f"#SBATCH {word}",
        *plain.read_text().splitlines()[text.splitlines().index(f"#SBATCH {word}") :],
    ]
    assert len(word.split()) == 1
    subprocess.run(["bash", "-n", str(top / "job.sbatch")], check=True, capture_output=True)


# ---------------------------------------------------------------- controller paths
@FAST
@given(names=st.lists(HOSTILE, min_size=1, max_size=3))
def test_a_controller_path_stays_under_results_or_is_refused(names):
    top = pathlib.Path(tempfile.mkdtemp(prefix="wireup-paths-"))
    root = top / "results" / "jobs"
    try:
        path = checks.results_path(str(root), *names)
    except ValueError:
        return
    assert os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


@FAST
@given(run_id=HOSTILE)
def test_a_run_id_a_node_answers_is_refused_or_stays_under_results(run_id):
    top = pathlib.Path(tempfile.mkdtemp(prefix="wireup-runid-"))
    nodes = templates.INVENTORIES["three-cpu-nodes"]["nodes"]
    plan = _plan_with(top, sorted(nodes), nodes, follow=True)
    # wireup-jobctl's answer: line 1 the run id as it is, line 2 its JSON
    answer = {
        "rc": 0,
        "stdout": f"{run_id}\n" + json.dumps({"run_id": run_id, "started": 1.0, "record": False}),
    }
    jobs = torchrun_launch.jobs_plan(plan, "logs", "", found=dict.fromkeys(nodes, answer))
    if jobs["errors"]:
        assert jobs["results"] == ""
        return
    root = os.path.realpath(top / "results" / "jobs")
    assert os.path.realpath(jobs["results"]).startswith(root + os.sep)


# ---------------------------------------------------------------- where jobs.yml connects (issue 35)
@FAST
@given(master=st.one_of(HOSTILE, st.sampled_from(["localhost", "node9", "-oProxyCommand=x", "node1\n"])))
def test_a_master_a_node_records_is_a_host_of_the_run_or_nothing_is_delegated(master):
    top = pathlib.Path(tempfile.mkdtemp(prefix="wireup-master-"))
    nodes = templates.INVENTORIES["three-cpu-nodes"]["nodes"]
    hosts = sorted(nodes)
    # The run's record as launch.yml's Slurm path keeps it (slurm.run_plan), its master rewritten.
    record = slurm.run_plan("4711\n", _plan_with(top, hosts, nodes))["record"] | {"master": master}
    meta = {"run_id": "slurm-4711", "started": 1.0, "record": True}
    answer = {"rc": 0, "stdout": "\n".join(["slurm-4711", json.dumps(meta), json.dumps(record)]) + "\n"}
    plan = _plan_with(top, hosts, nodes, follow=True)
    jobs = torchrun_launch.jobs_plan(plan, "stop", found=dict.fromkeys(hosts, answer), play_hosts=hosts)
    if master in hosts:
        assert jobs["slurm"]["on"] == master and jobs["slurm"]["reads"][0] == ["scancel", "4711"]
    else:
        assert jobs["slurm"]["on"] == "" and jobs["slurm"]["reads"] == [], jobs["slurm"]
        assert sum("is refused" in n for n in jobs["notes"]) == len(hosts)


# ---------------------------------------------------------------- what Slurm prints (issue 35)
SACCT_FIELD = st.one_of(
    HOSTILE,
    st.sampled_from(
        ["7", "7.0", "7.\u00b2", "8.0", "7+1", "7_1", "7.batch", "n[0-9999999]", "node[1-3]", "\u0667.0"]
    ),
)


@FAST
@given(jobid=SACCT_FIELD, nodes=SACCT_FIELD, state=st.sampled_from(["RUNNING", "COMPLETED", "FAILED"]))
def test_a_sacct_row_is_the_asked_jobs_or_the_verdict_is_never_ok(jobid, nodes, state):
    text = f"7|COMPLETED|0:0|node[1-3]|Unknown\n{jobid}|{state}|0:0|{nodes}|Unknown\n"
    verdict = slurm.job_verdict(text, ["node1", "node2", "node3"], job_id="7")  # never raises
    if verdict["ok"]:  # only when every row sacct printed is job 7's, naming at most its 3 nodes
        assert all(slurm.is_row_of(r["jobid"], "7") for r in slurm.parse_sacct(text, max_nodes=3))
    for st_ in verdict["nodes"].values():
        assert st_["step"] == "" or slurm.is_row_of(st_["step"], "7")


@FAST
@given(text=SACCT_FIELD, limit=st.integers(min_value=0, max_value=50))
def test_a_host_list_is_expanded_within_its_limit_or_refused_by_name(text, limit):
    try:
        names = slurm.expand_hostlist(text, limit)
    except ValueError as exc:
        assert f"more than {limit}" in str(exc)
        return
    assert len(names) <= limit


# ---------------------------------------------------------------- what goes into slurm.conf (issue 35)
@FAST
@given(value=st.one_of(HOSTILE, st.sampled_from(["\nANY", "ANY\n", "ANY, IDLE", "IDLE,CYCLE"])))
def test_a_health_check_node_state_is_refused_or_one_word_of_one_line(value):
    settings = slurm_health_check.Settings(
        conf="/etc/slurm/slurm.conf", state="present", program="/usr/local/sbin/wireup-slurm-health",
        interval=300, node_state=value,
    )  # fmt: skip
    plan = slurm_health_check.plan("ClusterName=c\n", "n1", settings)
    refused = preflight.host_errors({"slurm_health_check_node_state": value})
    assert bool(plan["errors"]) == bool(refused)
    if refused:
        assert plan["block"] == ""
        return
    assert plan["block"].split("\n")[2] == f"HealthCheckNodeState={value}"
    assert len(plan["block"].split("\n")) == 3 and value.isprintable() and " " not in value


# ---------------------------------------------------------------- the tuned env file
@FAST
@given(host=SCRIPTABLE, value=SCRIPTABLE)
def test_the_tuned_env_file_runs_nothing_when_sourced(host, value):
    top = pathlib.Path(tempfile.mkdtemp(prefix="wireup-tuned-"))
    text = benchenv.tuned_env_file({"NCCL_ALGO": value}, {"run_id": "r1", "host": host, "driver": host})
    (top / "nccl-tuned.env").write_text(text)
    result = subprocess.run(
        ["bash", "-c", 'set -e; source ./nccl-tuned.env; printf %s "$NCCL_ALGO"'],
        cwd=top,
        capture_output=True,
        check=False,
    )
    assert not (top / MARKER).exists()
    assert result.returncode == 0 and result.stdout.decode() == value
    origin = [line for line in text.split("\n") if line.startswith("# wireup:")]
    assert len(origin) == 1 and origin[0].isprintable()
