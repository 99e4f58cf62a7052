"""torchrun_launch.health_plan and its part of torchrun_launch.job_plan: a job refused, or started on the
healthy nodes only (ranks renumbered, the master re-chosen), or (Slurm) the FAILed nodes drained first with
the finding as the reason; slurm.drain_reason keeps that reason one safe, short line."""

import pathlib
import shlex

import pytest
from test_launch_plan import BASE  # the job settings every launch plan test starts from

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def node(address, hostname="", cpus=None):
    return {
        "address": address,
        "interface": "eth0",
        "gpu_present": False,
        "gpu_count": 0,
        "infiniband": [],
        "hostname": hostname,
        "cpus": cpus,
    }


NODES = {f"n{i}": node(f"10.0.0.{i}", hostname=f"h{i}", cpus=8) for i in (1, 2, 3, 4)}
FABRIC = "fabric run 20261201T040000Z named n2 bad: round 1 with n1: 0.0236 GB/s (0.21 of the reference) FAIL"


def job(failed, nodes=None, **kw):
    nodes = NODES if nodes is None else nodes
    return torchrun_launch.job_plan(list(nodes), nodes, **dict(BASE, failed=failed, **kw))


def test_no_failed_node_changes_nothing():
    assert job({}) == job(None) == torchrun_launch.job_plan(list(NODES), NODES, **BASE)
    p = job({"elsewhere": "not in this group"}, on_failed="skip")
    assert p["errors"] == [] and p["hosts"] == list(NODES) and p["left_out"] == {} and p["drain"] == []
    assert p["slurm_exclude"] == ""


def test_refuse_is_the_default_and_names_the_node_the_finding_and_the_ways_out():
    p = job({"n2": FABRIC})
    [error] = p["errors"]
    assert error.startswith(f"launch refused: {FABRIC}. Fix the node or leave it out")
    assert "torchrun_launch_on_failed=skip" in error and "wireup_launch_refuse_failed=false" in error
    assert "torchrun_launch_group=gpu_nodes" in error
    # two nodes: both reasons, in host order
    error = job({"n3": "bench run R FAILed on n3: NVLink down", "n1": FABRIC})["errors"][0]
    assert error.index("NVLink down") > error.index(FABRIC)


def test_skip_renumbers_the_ranks_contiguously_and_says_who_was_left_out():
    p = job({"n2": FABRIC}, on_failed="skip")
    assert p["errors"] == []
    assert p["hosts"] == ["n1", "n3", "n4"] and p["nnodes"] == 3 and p["world_size"] == 6
    assert {h: n["node_rank"] for h, n in p["nodes"].items()} == {"n1": 0, "n3": 1, "n4": 2}
    assert p["master"] == "n1" and p["left_out"] == {"n2": FABRIC}
    assert f"left out n2 (torchrun_launch_on_failed=skip): {FABRIC}" in p["show"]
    assert p["slurm_exclude"] == "h2" and p["drain"] == []  # not drained without the setting
    # the left-out node is no job host: not in the /etc/hosts block, the watchdog or the names
    assert "n2" not in p["watchdog"]["config"]["hosts"]
    assert all("10.0.0.2" not in line for line in torchrun_launch.hosts_entries(p))


def test_an_excluded_master_is_replaced_and_the_play_says_so():
    p = job({"n1": FABRIC}, on_failed="skip", master_host="n1")
    assert p["errors"] == [] and p["master"] == "n2" and p["master_addr"] == "10.0.0.2"
    assert p["nodes"]["n2"]["node_rank"] == 0 and p["nodes"]["n2"]["is_master"]
    assert "the master n1 is left out: n2 is the master" in p["show"]
    # static rendezvous: the new master is node 0 too
    p = job({"n1": FABRIC, "n3": "x"}, on_failed="skip", master_host="n1", rdzv_backend="static")
    assert p["order"] == ["n2", "n4"] and p["nodes"]["n4"]["node_rank"] == 1


def test_every_node_failed_is_an_error_naming_the_variable():
    failed = dict.fromkeys(NODES, "bench FAIL")
    for kw in ({"on_failed": "skip"}, {"drain_failed": True, "slurm": True}):
        p = job(failed, **kw)
        assert len(p["errors"]) == 1, p["errors"]
        assert p["errors"][0].startswith(
            "every node of torchrun_launch_group=gpu_nodes FAILed its latest bench"
        )
        assert "n1, n2, n3, n4" in p["errors"][0]
    assert "torchrun_launch_on_failed=skip leaves none" in job(failed, on_failed="skip")["errors"][0]


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"on_failed": "drop"}, "torchrun_launch_on_failed='drop' must be refuse or skip"),
        ({"drain_failed": True}, "torchrun_launch_drain_failed=true drains Slurm nodes"),
    ],
)
def test_bad_settings_name_the_variable(kw, says):
    assert says in job({}, **kw)["errors"][0]
    assert torchrun_launch.health_plan(["a"], {}, ["a"])["errors"] == [
        "torchrun_launch_failed must map inventory hosts to reasons, got ['a']"
    ]


def test_drain_on_slurm_leaves_out_and_drains_from_the_submit_host():
    p = job({"n3": FABRIC}, slurm=True, drain_failed=True)  # refuse (the default) + drain: drained, skipped
    assert p["errors"] == [] and p["mode"] == "slurm" and p["hosts"] == ["n1", "n2", "n4"]
    [d] = p["drain"]
    assert d["host"] == "n3" and d["node"] == "h3"  # the Slurm name is the hostname
    assert d["argv"] == ["scontrol", "update", "NodeName=h3", "State=DRAIN", f"Reason={d['reason']}"]
    assert (
        d["reason"].startswith("wireup: [node_problem] hw/bench: fabric run 20261201T040000Z named n2 bad")
        and len(d["reason"]) <= 120
    )
    assert p["slurm_exclude"] == "h3"
    assert (
        f"Slurm: drain h3 before sbatch unless Slurm has it drained already: {shlex.join(d['argv'])}"
        in p["show"]
    )
    # the drain step reads the state of every node first (slurm.drain_plan decides, and
    # slurm.limit_drains counts the partitions' drains: issue 37)
    assert p["drain_read"] == p["drain"] and p["drain_state_argv"] == ["scontrol", "show", "node", "-o"]
    assert "left out n3 (torchrun_launch_drain_failed): " + FABRIC in p["show"]


@pytest.mark.parametrize(
    ("kw", "held"), [({"check_mode": True}, "check mode"), ({"run": False}, "torchrun_launch_run=false")]
)
def test_check_mode_and_render_only_drain_nothing_but_say_what_would_be(kw, held):
    p = job({"n3": FABRIC}, slurm=True, drain_failed=True, **kw)
    assert p["errors"] == [] and p["mode"] == "render" and p["drain"] == []
    assert p["hosts"] == ["n1", "n2", "n4"]  # the same job as a real run
    [line] = [s for s in p["show"] if s.startswith("Slurm:")]
    assert line.startswith(
        f"Slurm: would drain h3 unless Slurm has it drained already ({held}: nothing changes): "
        "scontrol update NodeName=h3"
    )
    # --check reads the node's state (and says what it would drain); render-only reads nothing
    assert [d["node"] for d in p["drain_read"]] == (["h3"] if held == "check mode" else [])
    # skip without Slurm: the same hosts and ranks in check mode as in a run
    checked, ran = (
        job({"n1": FABRIC}, on_failed="skip", master_host="n1", check_mode=c) for c in (True, False)
    )
    assert checked["mode"] == "render" and ran["mode"] == "start"
    assert (checked["hosts"], checked["master"], checked["show"]) == (
        ran["hosts"],
        ran["master"],
        ran["show"],
    )


def test_a_slurm_name_scontrol_could_misread_is_an_error():
    nodes = dict(NODES, n2=node("10.0.0.2", hostname="bad name=x", cpus=8))
    p = job({"n2": "slow"}, nodes=nodes, slurm=True, drain_failed=True)
    assert p["errors"] == [
        "n2's Slurm node name 'bad name=x' (its hostname) is not a plain host name: "
        "it cannot go into job.sbatch (--nodelist, --exclude) or be drained; fix the node's hostname"
    ]
    # without a hostname the inventory name is the Slurm name
    nodes = dict(NODES, n2=node("10.0.0.2", cpus=8))
    assert job({"n2": "slow"}, nodes=nodes, slurm=True, drain_failed=True)["drain"][0]["node"] == "n2"


def test_summary_says_who_was_left_out_and_drained():
    p = job({"n3": FABRIC}, slurm=True, drain_failed=True)
    out = torchrun_launch.summary(p, {}, {"ok": True}, program="/p.py", args=[], slurm_job_id="7")
    assert out["left_out"] == {"n3": FABRIC} and out["drained"] == {"h3": p["drain"][0]["reason"]}
    assert "left_out" not in torchrun_launch.summary(job({}), {}, {}, program="/p.py", args=[])


@pytest.mark.parametrize(
    ("finding", "reason"),
    [
        ("NVLink down", "wireup: NVLink down"),
        ("", "wireup: latest bench verdict FAIL"),
        (None, "wireup: latest bench verdict FAIL"),
        ('said "slow"\n\tthen | more', "wireup: said 'slow' then / more"),
        ("r\u00e9sum\u00e9 \x00\x1b[31mred\x7f", "wireup: r?sum? [31mred"),
        ("surrogate \udcff byte", "wireup: surrogate ? byte"),
        ("  \r\n ", "wireup: latest bench verdict FAIL"),
        ("$(reboot); `id` 'q' \\", "wireup: $(reboot); `id` 'q' \\"),  # argv: no shell sees it
    ],
)
def test_drain_reason_is_one_printable_line(finding, reason):
    assert slurm.drain_reason(finding) == reason


def test_drain_reason_is_cut_to_its_limit():
    long = "x" * 500
    cut = slurm.drain_reason(long)
    assert len(cut) == 120 and cut.endswith("x...") and cut.startswith("wireup: xxx")
    assert slurm.drain_reason("a " * 100, limit=20) == "wireup: a a a a a..."
    assert slurm.drain_reason("y" * 112) == "wireup: " + "y" * 112  # exactly the limit: kept whole
    assert slurm.drain_argv("gpu-01", "z")[-1] == "Reason=wireup: z"


def test_the_filter_passes_the_failed_mapping_through():
    path = ROOT / "plugins" / "filter" / "wireup_launch.py"
    namespace = {"__file__": str(path), "__name__": "wireup_filters_launch_health"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    filters = namespace["FilterModule"]().filters()
    nodes = {
        h: filters["wireup_launch_node"](
            {"gpu": {}, "network": {"address": f"10.0.0.{i}", "interface": "eth0"}, "hostname": h}, None, 1
        )
        for i, h in enumerate(["a", "b", "c"], 1)
    }
    p = filters["wireup_launch_plan"](
        ["a", "b", "c"], nodes, **dict(BASE, failed={"a": "bad"}, on_failed="skip", master_host="a")
    )
    assert p["errors"] == [] and p["hosts"] == ["b", "c"] and p["master"] == "b"


def test_each_fabric_job_of_a_round_writes_its_own_summary_and_logs():
    """The fabric bench runs a round's jobs at once with one run id and one job name: each job's
    summary file is named by its group (pairwise.job_name), each node's log by the node."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import pairwise

    p = pairwise.plan(list(NODES))
    nodes = list(NODES)
    results = [{"round": 1, "pair": m, "busbw": 1.0} for m in p["next_pairs"]]
    jobs = p["next_jobs"] + pairwise.plan(nodes, results)["next_jobs"]
    assert [j["kind"] for j in jobs] == ["pair", "pair", "group"] and jobs[-1]["members"] == nodes
    paths = set()
    for j in jobs:
        members = {h: NODES[h] for h in j["members"]}
        plan = torchrun_launch.job_plan(
            j["members"], members, **dict(BASE, job="bench-fabric-r1", group=j["name"])
        )
        assert plan["errors"] == []
        paths.add(f"{plan['results']}/{plan['summary']}")
        paths.update(f"{plan['results']}/{h}.log" for h in plan["hosts"] if j["kind"] == "pair")
    assert "/tmp/results/jobs/bench-fabric-r1-r1/summary-wireup_fabric_r1_n1_n2.json" in paths
    assert "/tmp/results/jobs/bench-fabric-r1-r1/summary-wireup_fabric_r2_group.json" in paths
    assert len(paths) == 3 + 4  # three summaries, four pair logs: none shared
