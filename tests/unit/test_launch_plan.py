"""torchrun_launch.job_plan and what the torchrun_launch tasks execute from it: the one probe per node,
the pre-check verdict, the end of a run, jobs.yml's call per node, and the Slurm path's plan."""

import base64
import cProfile
import json
import pathlib
import pstats

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm, wait
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def node(address, hostname="", gpus=0, cpus=None):
    return {
        "address": address,
        "interface": "eth0",
        "gpu_present": gpus > 0,
        "gpu_count": gpus,
        "infiniband": [],
        "hostname": hostname,
        "cpus": cpus,
    }


NODES = {f"n{i}": node(f"10.0.0.{i}", hostname=f"h{i}", cpus=8) for i in (1, 2, 3)}
BASE = {
    "job": "j1",
    "program": "/opt/wireup/examples/ddp_multinode.py",
    "base_dir": "/opt/wireup",
    "venv_path": "/opt/wireup/venv",
    "results_dir": "/tmp/results",
    "run_id": "r1",
    "group": "gpu_nodes",
    "node_group": "gpu_nodes",
    "nproc_per_node": 2,
}


def job(nodes=None, **kw):
    nodes = NODES if nodes is None else nodes
    return torchrun_launch.job_plan(list(nodes), nodes, **dict(BASE, **kw))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("debian12_host_2cpu.txt", 2),
        ("debian12_nspawn_node.txt", 2),
        ("debian12_nspawn_node_taskset_1.txt", 1),
    ],
)
def test_cpus_allowed_on_real_proc_status(name, expected):
    assert torchrun_launch.cpus_allowed((FIXTURES / "proc_status" / name).read_text()) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cpus_allowed_list:\t0-63,128-191\n", 128),
        ("Cpus_allowed_list:   0,2,4-5  \n", 4),
        ("Cpus_allowed_list:\t5-3\n", 0),  # mangled
        ("Cpus_allowed_list:\t0-\n", 0),  # truncated
        ("Name:\tcat\n", 0),  # no such line
        ("", 0),
    ],
)
def test_cpus_allowed_odd_lines(text, expected):
    assert torchrun_launch.cpus_allowed(text) == expected


def test_the_plan_holds_every_decision_of_a_detached_run():
    p = job()
    assert p["errors"] == []
    assert (p["mode"], p["wait"], p["precheck"], p["master"]) == ("start", False, True, "n1")
    assert p["job_dir"] == "/opt/wireup/jobs/j1" and p["jobctl"] == "/opt/wireup/bin/wireup-jobctl"
    assert p["results"] == "/tmp/results/jobs/j1-r1" and p["summary"] == "summary.json"
    assert [t["dest"] for t in p["templates"]] == [
        "/opt/wireup/jobs/j1/launch.sh",
        "/opt/wireup/jobs/j1/watchdog.json",
    ]
    assert not any(d["state"] == "absent" for d in p["dirs"])
    assert p["watchdog"]["on"] and p["watchdog"]["port"] == 29501
    # The run's key goes into the run's own folder, made before the start (issue 23).
    assert p["watchdog"]["key"] == "/opt/wireup/jobs/j1/runs/r1/watchdog.key"
    # Not made with the job's folders: start.yml makes it after the pre-checks (a refused run leaves none).
    assert "/opt/wireup/jobs/j1/runs/r1" not in [d["path"] for d in p["dirs"]]
    assert p["watchdog"]["config"]["bind"] == p["watchdog"]["config"]["addr"] == "10.0.0.1"
    assert p["watchdog"]["config"]["hosts"] == ["n1", "n2", "n3"] and p["watchdog"]["config"]["port"] == 29501
    assert [(h, n["listen"], n["connect"]) for h, n in p["nodes"].items()] == [
        ("n1", True, False),
        ("n2", False, True),
        ("n3", False, True),
    ]
    # The master resolves every job host's names; a worker its own and the master's (issue 39).
    assert p["nodes"]["n1"]["names"] == ["n1", "h1", "n2", "h2", "n3", "h3"]
    assert p["nodes"]["n2"]["names"] == ["n2", "h2", "n1", "h1"]
    assert p["precheck_paths"] == ["/opt/wireup/examples/ddp_multinode.py", "/opt/wireup/venv/bin/torchrun"]
    assert p["show"][1] == (
        "job j1: n2 is node 1 of 3, 2 process(es) (6 in all, OMP_NUM_THREADS 4), master n1 at "
        "10.0.0.1:29500, interface eth0"
    )


@pytest.mark.parametrize(
    ("kw", "mode"),
    [
        ({"run": False}, "render"),
        ({"check_mode": True}, "render"),
        ({"slurm": True}, "slurm"),
        ({"slurm": True, "check_mode": True}, "render"),
    ],
)
def test_run_mode(kw, mode):
    p = job(**kw)
    assert p["mode"] == mode
    # No key and no run folder where no wireup-jobctl run starts.
    assert p["watchdog"]["key"] == "" and not any("/runs/" in d["path"] for d in p["dirs"])
    # Port checks only before a wireup-jobctl start.
    assert not any(n["listen"] or n["connect"] for n in p["nodes"].values())
    assert ("/opt/wireup/jobs/j1/job.sbatch" in [t["dest"] for t in p["templates"]]) is bool(kw.get("slurm"))


@pytest.mark.parametrize(
    ("kw", "steps"),
    [
        ({}, ["start", "follow"]),
        ({"wait": True}, ["start", "wait", "report"]),
        ({"slurm": True}, ["slurm", "follow"]),
        ({"slurm": True, "wait": True}, ["slurm", "slurm_wait", "report"]),
        ({"run": False, "wait": True}, []),
        ({"check_mode": True, "wait": True}, []),
    ],
)
def test_the_steps_main_yml_includes(kw, steps):
    assert job(**kw)["steps"] == steps


def test_a_failed_node_to_drain_adds_the_drain_step_also_in_check_mode():
    failed = {"n3": "bench run R FAILed on n3"}
    drained = job(slurm=True, failed=failed, on_failed="skip", drain_failed=True)
    assert drained["errors"] == [] and drained["steps"] == ["drain", "slurm", "follow"]
    checked = job(slurm=True, failed=failed, on_failed="skip", drain_failed=True, check_mode=True)
    assert checked["steps"] == ["drain"] and checked["drain"] == []
    assert job(slurm=True, failed=failed, on_failed="skip")["steps"] == ["slurm", "follow"]


def test_without_the_pre_checks_start_yml_probes_nothing():
    p = job(precheck=False)
    assert (p["precheck"], p["precheck_paths"]) == (False, [])
    assert all(n["names"] == [] and not n["listen"] and not n["connect"] for n in p["nodes"].values())
    assert job(slurm=True)["precheck_paths"] == []


def test_one_node_job_has_no_watchdog_and_removes_its_settings():
    p = job({"n1": NODES["n1"]}, group="wireup_bench_solo_n1", install_examples=False)
    assert not p["watchdog"]["on"]
    assert {"path": "/opt/wireup/jobs/j1/watchdog.json", "state": "absent"} in p["dirs"]
    assert p["summary"] == "summary-wireup_bench_solo_n1.json"
    assert [c["dest"] for c in p["copies"]] == [
        f"/opt/wireup/bin/{n}" for n in ("wireup-jobctl", "wireup-watchdog", "wireup-listen")
    ]


def test_job_errors_name_the_variable_and_the_fix():
    p = job(
        job="a b",
        program="train.py",
        launcher="python",
        env={"1X": "y"},
        job_env={"A": ["list"]},
        watchdog_port=29500,
    )
    assert p["errors"] == [
        "torchrun_launch_job='a b' is not a usable job name: use 1-64 letters, digits, '_', '.' or '-', "
        "starting with a letter or digit",
        "torchrun_launch_env: '1X' is not a valid shell variable name (letters, digits, '_')",
        "wireup_job_env: A must be a string or number, not list",
        "torchrun_launch_launcher=python runs a one-node program: torchrun_launch_group=gpu_nodes holds 3 "
        "hosts; name a group with one host or use torchrun",
        "torchrun_launch_program=train.py must be an absolute path on the nodes",
    ]
    assert "wireup_master_port too" in job(watchdog_port=29500)["errors"][0]


def _stat(path, exists):
    return {"item": path, "stat": {"exists": exists}}


def _getent(name, found):
    return {
        "item": name,
        "ansible_facts": {"getent_ahostsv4": {"10.0.0.1": ["STREAM", name]} if found else {name: None}},
    }


def test_precheck_errors_from_the_registered_probes():
    p = job(plan_id="pass1")
    slices = {h: torchrun_launch.node_plan(p, h, "pass1", "n1") for h in ("n1", "n2", "n3")}
    play = []  # dropped_out's entry of the job: none left the play
    ok = torchrun_launch.precheck_errors(
        slices["n2"],
        "n2",
        play,
        paths={"results": [_stat(x, True) for x in p["precheck_paths"]]},
        names={"results": [_getent("h1", True)]},
        connect={"state": "started", "port": 29500, "elapsed": 0, "failed": False},
        listener={"skipped": True},
    )
    assert ok == []
    gone = torchrun_launch.dropped_out(slices, ["n1", "n2"], "pass1")["n1"]  # n3 left the play
    errors = torchrun_launch.precheck_errors(
        slices["n2"],
        "n2",
        gone,
        paths={"results": [_stat(p["precheck_paths"][0], True), _stat(p["precheck_paths"][1], False)]},
        names={"results": [_getent("h1", True), _getent("h2", False), {"item": "h3", "failed": True}]},
        # As registered under failed_when: false (its "failed" cleared; only the message says it).
        connect={"msg": "Timeout when waiting for 10.0.0.1:29500", "elapsed": 3, "failed": False},
        timeout=3,
    )
    assert errors == [
        "not starting job j1: n3 dropped out of the play (failed or unreachable; see above)",
        "n2 lacks /opt/wireup/venv/bin/torchrun: create the venv (wireup_venv_path=/opt/wireup/venv) with "
        ".venv/bin/ansible-playbook site.yml --tags pytorch_venv",
        "n2 cannot resolve h2, h3: torchrun needs the node's own hostname and the master's name; set "
        "torchrun_launch_manage_hosts: true or fix DNS.",
        "n2 cannot reach the master n1 at 10.0.0.1:29500 within 3 s: check routes and firewalls between the "
        "nodes and the master's wireup_address/wireup_interface (or torchrun_launch_master_addr)",
    ]
    # torchrun_launch_precheck: false skips the probes (a block's `when:` registers each loop item
    # as skipped): no evidence, no error.
    skipped = {"results": [{"item": x, "skipped": True} for x in p["precheck_paths"]], "skipped": True}
    assert (
        torchrun_launch.precheck_errors(p, "n2", play, paths=skipped, names={"results": [], "skipped": True})
        == []
    )
    # No answer for the job (its planner's entry missing from dropped_out's): fails closed.
    unknown = torchrun_launch.precheck_errors(slices["n2"], "n2", None, paths=skipped, names={"results": []})
    assert unknown == [
        "not starting job j1: which of its hosts are still in the play is unknown (no answer for its "
        "planner n1); run the play again"
    ]
    busy = torchrun_launch.precheck_errors(
        p,
        "n1",
        play,
        listener={"finished": 1, "rc": 1, "stderr": "cannot listen on port 29500: Address already in use\n"},
    )
    assert busy == [
        "port 29500 is in use on the master n1 (cannot listen on port 29500: Address already in use): "
        "stop what listens there (a job still running?) or choose another wireup_master_port"
    ]


def test_parse_status_of_stop_and_of_status_with_the_log_tail():
    line = '{"state": "stopped", "rc": null, "elapsed": 3.0, "log": "/j/logs/r1.log", "reason": "x"}'
    st = wait.parse_status(f"stopped run r1 of /j\n{line}\n")
    assert (st["state"], st["said"], st["tail"]) == ("stopped", ["stopped run r1 of /j"], [])
    st = wait.parse_status(f"{line}\nrank 0 step 3\n{{not json\n")
    assert st["tail"] == ["rank 0 step 3", "{not json"]
    assert wait.parse_status("wireup-jobctl: bad run id ''")["state"] == "unknown"


def _result(p, host, state, rc, verdict):
    status = {"state": state, "rc": rc, "elapsed": 4.0, "log": "/opt/wireup/jobs/j1/logs/r1.log"}
    return torchrun_launch.node_result(p, host, status, verdict)


def test_report_of_a_failed_run_shows_the_first_failure_tail_and_names_it_elsewhere():
    p = job()
    verdict = wait.job_verdict(
        {
            "n1": {"state": "stopped"},
            "n2": {"state": "exited", "rc": 1, "ended": 2},
            "n3": {"state": "stopped"},
        },
        ["n1", "n2", "n3"],
    )
    log = "\n".join(f"line {i}" for i in range(100))
    failing = torchrun_launch.report(p, _result(p, "n2", "exited", 1, verdict), verdict, log_text=log, tail=3)
    assert failing["failed"] == (
        "job j1 run r1 failed: n2 exited with code 1; stopped on every node.\n"
        "Last 3 lines of /tmp/results/jobs/j1-r1/n2.log:\nline 97\nline 98\nline 99"
    )
    other = torchrun_launch.report(p, _result(p, "n1", "stopped", None, verdict), verdict)
    assert other["failed"] == (
        "job j1 run r1 failed: n2 exited with code 1; stopped on every node.\n"
        "n1: stopped after n2 failed; see n2's log tail for the cause.\n"
        "logs and summary in /tmp/results/jobs/j1-r1/"
    )
    ok = wait.job_verdict({h: {"state": "exited", "rc": 0} for h in NODES}, list(NODES))
    assert torchrun_launch.report(p, _result(p, "n1", "exited", 0, ok), ok)["ok"] == (
        "j1 run r1 on n1 (node 0, 2 process(es)): exited 0 after 4.0 s; log /tmp/results/jobs/j1-r1/n1.log; "
        "job j1 run r1 on 3 node(s), 6 process(es): completed; logs and summary in /tmp/results/jobs/j1-r1/"
    )


def test_summary_keeps_its_keys():
    p = job()
    verdict = {
        "over": True,
        "ok": True,
        "first_failure": "",
        "timed_out": False,
        "running": [],
        "reason": "r",
    }
    s = torchrun_launch.summary(p, {"n1": {}}, verdict, program="/p.py", args=["--x"])
    assert list(s) == [
        "job",
        "run_id",
        "program",
        "args",
        "master",
        "rdzv_endpoint",
        "world_size",
        "verdict",
        "nodes",
    ]
    s = torchrun_launch.summary(p, {}, dict(verdict, nodes={}), program="/p.py", args=[], slurm_job_id="42")
    assert list(s) == ["job", "run_id", "slurm_job_id", "program", "args", "world_size", "verdict", "nodes"]
    assert "nodes" not in s["verdict"]


def _latest(run_id, hosts=()):
    """A node's `wireup-jobctl latest --record` answer for ``run_id`` ('' : none), with the run's
    record of ``hosts`` (none: no record)."""
    meta = json.dumps({"run_id": run_id, "started": 1.0 if run_id else None, "record": bool(hosts)})
    record = json.dumps({"hosts": list(hosts), "master": hosts[0]}) + "\n" if hosts else ""
    return {"rc": 0, "stdout": f"{run_id}\n{meta}\n{record}"}


def test_jobs_plan_one_call_per_node_and_its_errors():
    p = job(run_id="")
    jobs = torchrun_launch.jobs_plan(p, "status", "", found={"n1": _latest("r9")})
    assert jobs["argv"] == ["/opt/wireup/bin/wireup-jobctl", "status", "/opt/wireup/jobs/j1", "r9", "0", "5"]
    assert jobs["results"] == "/tmp/results/jobs/j1-r9" and jobs["errors"] == []
    stop = torchrun_launch.jobs_plan(p, "stop", "r2", found={"n1": _latest("r2")}, stop_grace=7)
    assert stop["argv"][1:] == ["stop", "/opt/wireup/jobs/j1", "r2", "7", "stopped by jobs.yml"]
    assert (
        torchrun_launch.jobs_plan(p, "stop", "r2", found={"n1": _latest("r2")}, check_mode=True)["argv"][1]
        == "status"
    )
    assert torchrun_launch.jobs_plan(p, "list")["argv"] == [
        "/opt/wireup/bin/wireup-jobctl",
        "list",
        "/opt/wireup/jobs",
    ]
    never = torchrun_launch.jobs_plan(p, "logs", "", found={"n1": _latest("")})
    assert never["errors"] == [
        "job j1 has no run on n1: start one with .venv/bin/ansible-playbook launch.yml "
        "-e torchrun_launch_job=j1, or list the runs with -e torchrun_launch_action=list"
    ]
    missing = {"rc": 2, "msg": "[Errno 2] No such file or directory: b'/opt/wireup/bin/wireup-jobctl'"}
    assert torchrun_launch.jobs_plan(p, "status", "", found={"n1": missing})["errors"] == [
        "n1 of torchrun_launch_group=gpu_nodes has no /opt/wireup/bin/wireup-jobctl: wireup never launched a "
        "job there (.venv/bin/ansible-playbook launch.yml installs it)"
    ]


def test_jobs_node_and_the_line_for_the_run():
    p = job()
    found = {h: _latest("r1", ["n1", "n2", "n3"]) for h in ("n1", "n2", "n3")}
    jobs = torchrun_launch.jobs_plan(p, "status", "r1", found=found)
    running = '{"state": "running", "rc": null, "started": 1796086923.5, "elapsed": 12.4, "log": "/l"}'
    answer = {"rc": 0, "stdout": f"{running}\nrank 1 step 7"}
    shown = torchrun_launch.jobs_node(jobs, "n2", answer, p["jobctl"], "0, 97, 40960, 143771\n")
    assert shown["errors"] == []
    assert shown["lines"] == [
        "n2: running since 2026-12-01 01:02:03 UTC (12 s); GPU0 97% 40.0/140 GiB",
        "rank 1 step 7",
    ]
    missing = {"rc": 2, "msg": "[Errno 2] No such file or directory: b'/opt/wireup/bin/wireup-jobctl'"}
    assert (
        "n3 has no /opt/wireup/bin/wireup-jobctl"
        in torchrun_launch.jobs_node(jobs, "n3", missing, p["jobctl"])["errors"][0]
    )
    states = {
        "n1": {"state": "exited", "rc": 0},
        "n2": {"state": "exited", "rc": 1, "ended": 3},
        "n3": {"state": "stopped"},
    }
    assert (
        torchrun_launch.jobs_stands(jobs, states, list(states))
        == "job j1 run r1: FAILED: n2 exited with code 1"
    )
    running_all = {h: {"state": "running"} for h in states}
    logs = torchrun_launch.jobs_plan(p, "logs", "r1", found=found)
    assert torchrun_launch.jobs_stands(logs, running_all, list(states)) == (
        "job j1 run r1: running on n1, n2, n3; logs in /tmp/results/jobs/j1-r1/"
    )
    # jobs.yml's one closing task: the run's line, or for list every run (or that there is none).
    assert torchrun_launch.jobs_summary(jobs, states, {}, list(states)) == [
        torchrun_launch.jobs_stands(jobs, states, list(states))
    ]
    listing = torchrun_launch.jobs_plan(p, "list")
    runs = {"n1": [{"job": "j1", "run_id": "r1", "started": 0, "state": "running"}]}
    assert torchrun_launch.jobs_summary(listing, {}, runs, ["n1"], "/opt/wireup") == [
        "j1 r1 started 1970-01-01 00:00:00 UTC: n1 running"
    ]
    assert torchrun_launch.jobs_summary(listing, {}, {"n1": []}, ["n1"], "/opt/wireup") == [
        "no runs under /opt/wireup/jobs"
    ]


def test_slurm_run_plan():
    p = job(slurm=True)
    sp = slurm.run_plan("4711;cluster\n", p, stop_grace=5)
    assert sp == {
        "job_id": "4711",
        "run_id": "slurm-4711",
        "results": "/tmp/results/jobs/j1-slurm-4711",
        "sacct_argv": [
            "sacct",
            "--parsable2",
            "--noheader",
            "-j",
            "4711",
            "--format=JobID,State,ExitCode,NodeList,End",
        ],
        "cancel_looks": 17,
        # The run recorded like a detached one (wireup-jobctl record on every node; slurm-job.json
        # on the controller): the launch plan's record, its own run id, the job id and the logs.
        "record": dict(
            p["record"],
            run_id="slurm-4711",
            slurm_job_id="4711",
            logs={
                "node": f"{p['job_dir']}/logs/slurm-4711.log",
                "batch": f"{p['job_dir']}/logs/slurm-4711.out",
            },
        ),
        "record_argv": [p["jobctl"], "record", p["job_dir"], "slurm-4711", "4711"],
        "errors": [],
    }
    assert sp["record"]["hosts"] == ["n1", "n2", "n3"] and p["record"]["run_id"] != "slurm-4711"
    assert slurm.run_plan("", p)["errors"] == ["sbatch printed no job id: ''"]


def _filters():
    path = ROOT / "plugins" / "filter" / "wireup_launch.py"
    namespace = {"__file__": str(path), "__name__": "wireup_filters_launch"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["FilterModule"]().filters()


def test_the_filter_reads_the_probe_and_preflights_hostname():
    """Without a fact-gathering play (launch.yml runs none) ansible_facts has no hostname: the
    node's own hostname comes from preflight's wireup_node. Before, it was read from ansible_facts
    only, so the /etc/hosts block missed a node whose hostname differs from its inventory name."""
    status = (FIXTURES / "proc_status" / "debian12_nspawn_node_taskset_1.txt").read_bytes()
    mounts = (FIXTURES / "mountinfo" / "debian12_nspawn_node_hosts_bind.txt").read_bytes()
    probe = {
        "results": [
            {"item": "/proc/self/status", "content": base64.b64encode(status).decode()},
            {"item": "/proc/self/mountinfo", "content": base64.b64encode(mounts).decode()},
        ]
    }
    wireup_node = {
        "gpu": {"present": False, "count": 0},
        "network": {"address": "10.0.0.1", "interface": "eth0"},
        "infiniband": [],
        "hostname": "box-17",
    }
    filters = _filters()
    # Each node's facts (its own task, with its own registered probe), then the plan over them.
    nodes = {"n1": filters["wireup_launch_node"](wireup_node, probe, "auto")}
    settings = dict(BASE, nproc_per_node="auto")
    p = filters["wireup_launch_plan"](["n1"], nodes, **settings)
    assert p["errors"] == []
    assert p["nodes"]["n1"]["hostname"] == "box-17"
    assert torchrun_launch.hosts_entries(p, mapped=False) == ["10.0.0.1 n1 box-17"]
    assert p["nodes"]["n1"]["cpus"] == 1 and p["nodes"]["n1"]["hosts_mounted"] is True


def test_the_key_filter_gives_a_new_32_byte_key_each_call():
    make = _filters()["wireup_launch_watchdog_key"]
    first, second = make(32), make(32)
    assert len(first) == len(second) == 64 and first != second


# Issue 39: name resolution linear in the nodes. The real producers: preflight's wireup_node (a
# testbed capture) through torchrun_launch.node_facts, then the plan start.yml's getent loop reads.
def _fleet(count):
    captured = json.loads((FIXTURES / "testbed/wireup_node_debian12.json").read_text())
    nodes = {}
    for i in range(1, count + 1):
        network = dict(captured["network"], address=f"10.0.{i // 250}.{i % 250 + 1}")
        wireup_node = dict(captured, hostname=f"h{i}", network=network)
        nodes[f"n{i}"] = torchrun_launch.node_facts(wireup_node, nproc=1)
    return nodes


def test_the_master_resolves_every_name_once_the_others_their_own_and_the_masters():
    p = job(_fleet(3))
    assert p["errors"] == [] and p["master"] == "n1"
    assert p["nodes"]["n1"]["names"] == ["n1", "h1", "n2", "h2", "n3", "h3"]
    # A worker: its own names (torchrun checks its own hostname) and the master's (the rendezvous
    # endpoint), in its own resolver: its /etc/hosts may differ from the master's.
    assert p["nodes"]["n2"]["names"] == ["n2", "h2", "n1", "h1"]
    assert p["nodes"]["n3"]["names"] == ["n3", "h3", "n1", "h1"]


def test_name_lookups_grow_linearly_with_the_nodes():
    lookups = {n: sum(len(v["names"]) for v in job(_fleet(n))["nodes"].values()) for n in (16, 256)}
    assert lookups[16] == 16 * 2 + 15 * 4 and lookups[256] == 256 * 2 + 255 * 4  # was n * 2n: 512, 131,072


# Issue 39: the plan once per job, on its planner, each node taking its own slice (plan.yml).
def _slices(plan, planner, plan_id="pass1", hosts=None):
    return {h: torchrun_launch.node_plan(plan, h, plan_id, planner) for h in hosts or plan["hosts"]}


def test_each_job_has_one_planner_the_first_of_its_hosts_in_the_play():
    groups = {
        "all": ["n4", "n2", "n1", "n3", "x9"],
        "gpu_nodes": ["n3", "n1", "n2"],
        "fabric_r0_p1": ["n4", "n2"],  # bench_fabric's pair groups, bench's one-node groups
        "empty": [],
        "away": ["x9"],  # no host in the play: no planner (each node then plans it, and fails)
    }
    planners = torchrun_launch.job_planners(groups, ["n1", "n2", "n3", "n4"])
    assert planners == {"all": "n1", "gpu_nodes": "n1", "fabric_r0_p1": "n2"}


def test_each_node_takes_its_own_nodeplan_and_the_job_wide_values_unchanged():
    p = job(_fleet(4), plan_id="pass1")
    assert p["errors"] == [] and p["plan_id"] == "pass1"
    part = torchrun_launch.node_plan(p, "n2", "pass1", "n1")
    assert part["nodes"] == {"n2": p["nodes"]["n2"]} and part["planner"] == "n1"
    assert part["show"] == [] and part["order"] == []  # the planner shows the plan
    same = set(p) - {"nodes", "show", "order"}
    assert {k: part[k] for k in same} == {k: p[k] for k in same}
    # Shared, not copied: a slice costs the same at 4 nodes or 4,096.
    assert part["hosts"] is p["hosts"] and part["record"] is p["record"]
    assert part["hosts_entries"] is p["hosts_entries"] and part["node_names"] is p["node_names"]
    assert torchrun_launch.node_plan(p, "x9", "pass1", "n1")["nodes"] == {}  # not a host of the job


@pytest.mark.parametrize(("plan_id", "made"), [("pass2", True), ("", True), ("pass2", False)])
def test_a_plan_of_another_pass_or_none_is_refused_naming_the_planner(plan_id, made):
    # A planner that did not run the role in this pass still holds an older job's plan: never used.
    p = job(plan_id="pass1") if made else None
    part = torchrun_launch.node_plan(p, "n2", plan_id, "n1")
    assert part["nodes"] == {} and len(part["errors"]) == 1
    assert "planner n1" in part["errors"][0] and "did not run this role in this pass" in part["errors"][0]


def test_a_slice_renders_what_the_whole_plan_did_for_slurm_and_etc_hosts():
    p = job(_fleet(3), plan_id="pass1", slurm=True)
    whole = {k: v for k, v in p.items() if k != "node_names"}  # slurm.node_names from every NodePlan
    part = torchrun_launch.node_plan(p, "n3", "pass1", "n1")
    assert slurm.node_names(part) == slurm.node_names(whole) == {"n1": "h1", "n2": "h2", "n3": "h3"}
    assert slurm.nodelist(part) == slurm.nodelist(whole)
    assert part["hosts_entries"] == torchrun_launch.hosts_entries(whole)


def _answer(state, rc, elapsed=4.0):
    # wireup_wait's registered result (plugins/modules/wireup_wait.py RETURN): wireup-jobctl's status line.
    line = {
        "state": state,
        "rc": rc,
        "elapsed": elapsed,
        "log": "/opt/wireup/jobs/j1/logs/r1.log",
        "reason": "",
    }
    return {"rc": 0, "stdout": json.dumps(line), "looks": 1}


def test_who_left_and_how_each_job_went_once_for_the_play():
    # Two jobs in one play (bench: several at once), and a node holding an older pass's slice.
    a = job({h: NODES[h] for h in ("n1", "n2")}, plan_id="pass1")
    b = job({"n3": NODES["n3"]}, plan_id="pass1", job="j2", group="n3", launcher="python")
    old = job({"n4": node("10.0.0.4", "h4")}, plan_id="pass0")
    slices = {**_slices(a, "n1"), **_slices(b, "n3"), **_slices(old, "n4", "pass0")}
    play = ["n1", "n3", "n4"]  # n2 left the play
    assert torchrun_launch.dropped_out(slices, play, "pass1") == {"n1": ["n2"], "n3": []}
    answers = {"n1": _answer("exited", 0), "n3": _answer("exited", 0), "n4": _answer("exited", 1)}
    verdicts = torchrun_launch.job_verdicts(slices, answers, play, "pass1")
    assert set(verdicts) == {"n1", "n3"}
    assert verdicts["n3"]["ok"] and verdicts["n3"]["over"]
    assert not verdicts["n1"]["ok"] and verdicts["n1"]["first_failure"] == "n2"  # gone: left the play
    # The same verdict as each node reached before from every host's answer (wait.job_verdict).
    states = torchrun_launch.states_of(a["hosts"], {"n1": answers["n1"]})
    assert verdicts["n1"] == wait.job_verdict(states, play, 0)


def _plan_calls(count):
    nodes = _fleet(count)
    profile = cProfile.Profile()
    profile.enable()
    p = torchrun_launch.job_plan(
        list(nodes), nodes, **dict(BASE, nproc_per_node=1, plan_id="p", play_hosts=list(nodes))
    )
    slices = _slices(p, "n1", "p")
    torchrun_launch.dropped_out(slices, list(nodes), "p")
    profile.disable()
    assert p["errors"] == []
    return pstats.Stats(profile).total_calls


def test_the_plan_and_every_node_s_slice_are_linear_in_the_nodes():
    # Every node planning the whole job was O(N^2): 4x the nodes made 16x the Python calls.
    assert _plan_calls(256) / _plan_calls(64) <= 4 * 1.125


def test_the_verdicts_filter_takes_a_missing_answer_as_gone():
    # wait.yml gathers the answers with map(attribute=..., default={}) (default=none is no default
    # in Jinja's map): a host without one is gone, as before.
    a = job({h: NODES[h] for h in ("n1", "n2")}, plan_id="pass1")
    verdicts = _filters()["wireup_launch_verdicts"](
        _slices(a, "n1"), {"n1": _answer("exited", 0), "n2": {}}, ["n1", "n2"], "pass1", 0
    )
    assert verdicts["n1"]["first_failure"] == "n2" and "n2 " in verdicts["n1"]["reason"]
