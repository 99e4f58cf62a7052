"""wireup.judge.fabric_run: a pair's logs -> its result; all pairs -> the verdicts, record, history,
report section and launch's refusals. The NCCL lines are today's real H200 two-host capture; the
benchmark's JSON line is the one files/bench/torch_allreduce.py prints (appended here)."""

import json
import pathlib
import re

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import fabric_run
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_fabric, torchrun_launch
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nics as probe_nics

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "ncclinfo"


def nics(name):
    return probe_nics.parse_nic_facts(probe_nics.read_tree(str(FIXTURES / "sysfs" / name)))


def bench_line(busbw, backend="nccl", size=1 << 30):
    return json.dumps(
        {
            "wireup_bench": "torch_allreduce",
            "size": size,
            "count": size // 4,
            "dtype": "float32",
            "time_us": 1.0,
            "algbw": busbw,
            "busbw": busbw,
            "wrong": 0,
            "world_size": 2,
            "nnodes": 2,
            "backend": backend,
        }
    )


def twohost(busbw, iface="lo"):
    """The 1x H200's two-host NCCL INFO logs (NCCL on lo); ``iface``: as if NCCL had named another."""
    r0 = (LOGS / "h200x1_nccl-2.28.9_twohost_socket_rank0.txt").read_text() + bench_line(busbw) + "\n"
    r1 = (LOGS / "h200x1_nccl-2.28.9_twohost_socket_rank1.txt").read_text()
    return {h: t.replace("Using [0]lo:", f"Using [0]{iface}:") for h, t in (("a", r0), ("b", r1))}


OK = {"a": {"ok": True}, "b": {"ok": True}}


def test_socket_pair_on_the_h200_vm_has_no_hardware_expectation_on_loopback():
    vm = nics("h200vm_virtio_no_ib")
    r = fabric_run.pair_result(
        1, ["b", "a"], twohost(0.50), OK, nics={"a": vm, "b": vm}, gpus_per_node={"a": 1, "b": 1}
    )
    assert r["pair"] == ["a", "b"] and r["busbw"] == 0.50 and r["error"] == ""
    # NCCL used lo, which no NIC fact lists: eth0's rate says nothing about this run.
    assert r["expected"] == {
        "expected_gbs": None,
        "reason": "b: NCCL used lo, not one of the NICs read (eth0): no expectation from the hardware",
    }
    # Had NCCL used the VM's eth0 (no speed in sysfs), NCCL's 10 Gb/s default x sockets' 0.45.
    on_eth0 = fabric_run.pair_result(1, ["a", "b"], twohost(0.5, "eth0"), OK, nics={"a": vm, "b": vm})
    assert on_eth0["expected"]["transport"] == "socket" and on_eth0["expected"]["expected_gbs"] == 0.562
    assert r["transports"]["a"]["inter_node"] == "socket" and r["transports"]["a"]["socket_interfaces"] == [
        "lo"
    ]
    assert r["transports"]["a"]["evidence"].endswith("via NET/Socket/0")
    assert r["findings"] == []


def test_shaped_veth_pair_on_the_h200_is_judged_against_the_veths_speed():
    """The shaped pair of tests/gpu/fabric_netns.py (n3's veth under tbf 2gbit), its two logs as
    the bench brought them back (rank 0's ends with the benchmark's JSON line: 0.2354 GB/s)."""
    veth = nics("h200x1_netns_veth")
    logs = {
        "n3": (LOGS / "h200x1_nccl-2.28.9_torch-2.11_netns_veth_eth0_shaped_rank0.txt").read_text(),
        "n4": (LOGS / "h200x1_nccl-2.28.9_torch-2.11_netns_veth_eth0_shaped_rank1.txt").read_text(),
    }
    ok = {"n3": {"ok": True}, "n4": {"ok": True}}
    r = fabric_run.pair_result(
        1, ["n3", "n4"], logs, ok, nics={"n3": veth, "n4": veth}, gpus_per_node={"n3": 1, "n4": 1}
    )
    assert (r["busbw"], r["size"], r["backend"], r["error"], r["findings"]) == (
        0.2354,
        1 << 30,
        "nccl",
        "",
        [],
    )
    assert {h: (t["inter_node"], t["socket_interfaces"]) for h, t in r["transports"].items()} == {
        "n3": ("socket", ["eth0"]),
        "n4": ("socket", ["eth0"]),
    }
    assert (r["expected"]["expected_gbs"], r["expected"]["transport"]) == (0.562, "socket")
    judged = fabric_run.judge(["n3", "n4"], [r], nics={"n3": veth, "n4": veth})
    assert judged["pairs"][0]["verdict"] == "FAIL" and judged["reference_kind"] == "expected"


def test_socket_pair_where_ib_is_up_is_a_finding_per_node():
    ib = nics("ndr8_healthy")
    r = fabric_run.pair_result(1, ["a", "b"], twohost(0.5), OK, nics={"a": ib, "b": ib})
    assert [(f["code"], f["nodes"]) for f in r["findings"]] == [
        ("nccl_socket_with_ib_up", ["a"]),
        ("nccl_socket_with_ib_up", ["b"]),
    ]
    # the expectation follows the transport NCCL used, not the IB it should have used
    on_eno1 = fabric_run.pair_result(1, ["a", "b"], twohost(0.5, "eno1"), OK, nics={"a": ib, "b": ib})
    assert on_eno1["expected"]["transport"] == "socket" and on_eno1["expected"]["network_gbs"] == 25 / 8


def test_failed_job_and_missing_figure_are_errors():
    r = fabric_run.pair_result(
        1,
        ["a", "b"],
        {"a": None, "b": None},
        {"a": {"ok": False, "reason": "timed out after 60 s"}, "b": {"ok": True}},
    )
    assert r["busbw"] is None and r["error"] == "a: timed out after 60 s"
    r = fabric_run.pair_result(1, ["a", "b"], {"a": "garbage", "b": ""}, OK)
    assert "without a bandwidth line" in r["error"]


def gloo_round(speeds, pairs, round_no, confirms=0):
    out = []
    for a, b in pairs:
        fig = min(speeds[a], speeds[b])
        logs = {a: bench_line(fig, backend="gloo", size=16 << 20), b: ""}
        ok = {a: {"ok": True}, b: {"ok": True}}
        out.append(fabric_run.pair_result(round_no, [a, b], logs, ok, confirms=confirms))
    return out


def test_judge_names_the_slow_node_and_the_record_and_report_say_so(tmp_path):
    nodes = ["n1", "n2", "n3", "n4"]
    speeds = {"n1": 0.40, "n2": 0.42, "n3": 0.02, "n4": 0.41}
    veth = {n: nics("testbed_veth") for n in nodes}
    p = fabric_run.judge(nodes, [], nics=veth)
    results = gloo_round(speeds, p["next_pairs"], 1)
    p = fabric_run.judge(nodes, results, nics=veth)
    # round 1's failing pair names nobody: both members are paired again with nodes that passed
    assert (p["phase"], p["next_pairs"], p["bad"]) == ("pairs", [["n1", "n3"], ["n2", "n4"]], [])
    results += gloo_round(speeds, p["next_pairs"], 2)
    p = fabric_run.judge(nodes, results, nics=veth, unreachable=[])
    # n1 + n3 failed with a known-good n1: run once more, alone, before n3 is named
    assert (p["phase"], p["next_pairs"], p["bad"]) == ("confirm", [["n1", "n3"]], [])
    assert p["next_jobs"][0]["confirms"] == 2 and p["verdicts"]["n3"] == "N/A" and p["failed"] == {}
    results += gloo_round(speeds, p["next_pairs"], 3, confirms=2)
    p = fabric_run.judge(nodes, results, nics=veth, unreachable=[])
    assert p["phase"] == "group" and p["bad"] == ["n3"]
    # the whole-group run: every node not named bad, in one job of round 4
    assert p["next_jobs"] == [
        {"members": ["n1", "n2", "n4"], "kind": "group", "name": "wireup_fabric_r4_group", "confirms": 0}
    ]
    logs = {"n1": bench_line(0.33, backend="gloo", size=16 << 20), "n2": "", "n4": None}
    ok = {h: {"ok": True} for h in ("n1", "n2", "n4")}
    results.append(fabric_run.pair_result(4, ["n4", "n1", "n2"], logs, ok, kind="group"))
    p = fabric_run.judge(nodes, results, nics=veth, unreachable=[])
    assert p["done"] and p["bad"] == ["n3"]
    assert p["verdicts"] == {"n1": "PASS", "n2": "PASS", "n3": "FAIL", "n4": "PASS"}
    assert [f["code"] for f in p["findings"]] == ["fabric_bad_node"]
    assert "with a known-good node twice running: " in p["findings"][0]["message"]
    g = p["group"]
    assert (g["members"], g["round"], g["busbw"], g["reference_gbs"], g["reference_kind"]) == (
        ["n1", "n2", "n4"],
        4,
        0.33,
        0.4,  # the slowest passing pair: n1 + n2 at 0.40 (n2 + n4: 0.41); 4 nodes busy, 3 in the group
        "slowest_pair",
    )
    assert g["cpu_share"] == 1.0
    assert g["verdict"] == "PASS" and p["failed"] == {
        "n3": "named bad: " + "; ".join(p["nodes"]["n3"]["evidence"])
    }
    rec = fabric_run.build_record("20261201T040000Z", p, veth)
    assert rec["rounds"] == 3 and rec["reference_kind"] == "median" and rec["group"] == g
    assert rec["failed"] == p["failed"]
    md = fabric_run.markdown(rec)
    # both figures of the confirmed pair, and the verdict says it is the confirmation's
    assert (
        "| 2 | n1 + n3 | 0.02 | 0.21 | 0.10 | 3: 0.02, 0.10 | FAIL **<-** (the confirmation's) | gloo |" in md
    )
    assert (
        "| 1 | n3 + n4 | 0.02 | 0.21 | 0.10 | not confirmed: both paired again with nodes that passed "
        "(round 2) | FAIL **<-** | gloo |" in md
    )
    assert "| 1 | n1 + n2 | 0.4 | 0.21 | 1.91 |  | PASS | gloo |" in md
    assert "| n3 | FAIL | round 1 with n4: 0.02 GB/s (0.10 of the reference) FAIL; not confirmed:" in md
    assert (
        "### Whole-group run\n\nwhole-group run of 3 node(s) (n1, n2, n4) round 4: 0.33 GB/s against "
        "0.4 GB/s (the slowest passing pair), ratio 0.82 PASS." in md
    )
    png = tmp_path / "fabric.png"
    assert fabric_run.plot(rec, str(png)) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fabric_run.plot({"pairs": []}, str(tmp_path / "none.png")) is False
    # launch refuses n3 only
    assert list(fabric_run.refusals(nodes, {}, rec)) == ["n3"]
    assert "fabric run 20261201T040000Z named n3 bad" in fabric_run.refusals(["n3"], {}, rec)["n3"]
    failed = {"verdict": "FAIL", "kind": "bench", "run_id": "R", "capabilities": ["links"], "reason": "why"}
    assert fabric_run.refusals(["n1", "n2"], {"n1": [failed]}, rec) == {"n1": "why"}


# The testbed run of 2026-12-07 (tests/fixtures/testbed/README.md): four CPU nodes, node3's host0
# shaped to 200 Mbit/s; each job's logs as torchrun_launch brought them back. (this run's round:
# the capture's round) -- the capture was taken by a planner that also reran round 1's failing
# pair (its r2), which the planner no longer does.
SHAPED = FIXTURES / "testbed" / "fabric_gloo_torch-2.13_node3_tbf200mbit"
SHAPED_ROUNDS = {1: 1, 2: 3, 3: 4, 4: 5}
CPU_NODE = {"gpu": {"present": False, "count": 0}}
FABRIC_SETTINGS = {
    "max_rounds": 3,
    "max_bytes": "1G",
    "cpu_max_bytes": "16M",
    "iterations": 5,
    "env": {},
    "fabric_env": {"NCCL_ALGO": "Ring"},
    "dir": "/opt/wireup/bench",
}


def _launched(tmp_path, job, host, capture):
    """torchrun_launch's result on host for job (its log where launch.yml puts it: a folder named
    after the job and its run), the log one of the capture's."""
    folder = tmp_path / "jobs" / f"{job['job']}-20261207T000000Z-0000"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{host}.log"
    log.write_text((capture / f"{host}.log").read_text())
    return {"log": str(log), "verdict": {"ok": True, "reason": ""}}


def _run_the_role(tmp_path, nodes, captures, unreachable=()):
    """The bench_fabric role's rounds in Python: each node's job (bench_fabric.job), its result
    (bench_fabric.result over torchrun_launch's result), the module's judgement
    (fabric_run.judge_round); returns (the last judgement, [(round, members, confirms)])."""
    veth = nics("testbed_veth")
    params = {
        "nodes": nodes,
        "unreachable": list(unreachable),
        "nics": dict.fromkeys(nodes, veth),
        "topologies": {},
        "ranks": dict.fromkeys(nodes, 1),
        "pass_ratio": 0.7,
        "max_rounds": 3,
    }
    results, jobs, judged = [], [], {}
    for round_no in bench_fabric.plan(CPU_NODE, **FABRIC_SETTINGS)["rounds"]:
        if round_no and judged["done"]:
            break
        for host in sorted(set(nodes) - set(unreachable)):
            job = bench_fabric.job(judged if round_no else {}, host, round_no)
            if job["run"]:
                launch = _launched(tmp_path, job, host, captures[round_no])
                results.append(bench_fabric.result(job, launch, host, round_no))
                jobs.append((round_no, tuple(job["members"]), job["confirms"]))
        judged = fabric_run.judge_round(
            dict(params, results=results), lambda path: pathlib.Path(path).read_text()
        )
    return judged, [(r, list(m), c) for r, m, c in dict.fromkeys(jobs)]


def test_the_shaped_testbed_node_is_named_after_its_confirmation_from_the_real_logs(tmp_path):
    captures = {r: SHAPED / f"r{c}" for r, c in SHAPED_ROUNDS.items()}
    nodes = ["node1", "node2", "node3", "node4"]
    p, jobs = _run_the_role(tmp_path, nodes, captures)
    assert jobs == [
        (1, ["node1", "node2"], 0),
        (1, ["node3", "node4"], 0),
        (2, ["node1", "node3"], 0),
        (2, ["node2", "node4"], 0),
        (3, ["node1", "node3"], 2),
        (4, ["node1", "node2", "node4"], 0),
    ]
    assert p["done"] and p["bad"] == ["node3"] and p["failed"].keys() == {"node3"}
    [j] = [j for j in p["pairs"] if j["pair"] == ["node1", "node3"]]
    assert (j["first"]["busbw"], j["confirmation"]["busbw"], j["used"], j["verdict"]) == (
        0.0228,
        0.022,
        "confirmation",
        "FAIL",
    )
    g = p["group"]
    # gloo: the group against the slowest passing pair (node2 + node4, round 2, four nodes busy)
    assert (g["busbw"], g["reference_gbs"], g["cpu_share"], g["verdict"]) == (0.1048, 0.077, 1.0, "PASS")
    assert all(d["backend"] == "gloo" for d in p["pair_details"])
    md = fabric_run.markdown(fabric_run.build_record("20261207T040859Z", p, {}))
    assert (
        "| 2 | node1 + node3 | 0.0228 | 0.067 | 0.34 | 3: 0.022, 0.33 | FAIL **<-** (the confirmation's) |"
        in md
    )


def test_a_group_of_three_on_two_shared_cores_is_judged_at_its_cpu_share_from_the_real_logs(tmp_path):
    """node4's link down (the integration test's second run; logs of 2026-12-07): the pairs ran
    alone, two nodes busy on the machine's two cores, the group runs three. The logs say gloo, so
    the group's reference is the slowest passing pair x 2/3."""
    down = FIXTURES / "testbed" / "fabric_gloo_torch-2.13_node4_down"
    captures = {r: down / f"r{r}" for r in (1, 2, 3)}
    p, jobs = _run_the_role(tmp_path, ["node1", "node2", "node3", "node4"], captures, unreachable=["node4"])
    assert jobs == [
        (1, ["node1", "node2"], 0),
        (2, ["node1", "node3"], 0),
        (3, ["node1", "node2", "node3"], 0),
    ]
    g = p["group"]
    assert (g["busbw"], g["reference_kind"], g["cpu_share"], g["reference_gbs"]) == (
        0.1312,
        "slowest_pair",
        0.667,
        0.036,  # 0.0534 (node1 + node2, alone) x 2/3
    )
    assert (g["verdict"], g["used"]) == ("PASS", "first") and p["verdicts"]["node4"] == "UNREACHABLE"
    line = fabric_run.group_line(g)
    assert "against 0.036 GB/s (the slowest passing pair x 0.67, a rank's CPU share in the group" in line


def test_a_dip_that_its_confirmation_clears_names_nobody(tmp_path):
    """The same run, but the confirmation of node1 + node3 reads a healthy figure (node1's log of
    round 1: 0.11 GB/s): round 2's 0.023 was a dip, nobody is named, the record keeps both."""
    healthy, group = tmp_path / "healthy", tmp_path / "group"
    for folder, log, members in (
        (healthy, SHAPED / "r1" / "node1.log", ("node1", "node3")),
        (group, SHAPED / "r5" / "node1.log", ("node1", "node2", "node3", "node4")),
    ):
        folder.mkdir()
        for host in members:  # the first member's log holds the figure, the others' none
            (folder / f"{host}.log").write_text(log.read_text() if host == "node1" else "")
    captures = {1: SHAPED / "r1", 2: SHAPED / "r3", 3: healthy, 4: group}
    p, jobs = _run_the_role(tmp_path, ["node1", "node2", "node3", "node4"], captures)
    assert (3, ["node1", "node3"], 2) in jobs and p["bad"] == [] and p["failed"] == {}
    [j] = [j for j in p["pairs"] if j["pair"] == ["node1", "node3"]]
    assert (j["first"]["busbw"], j["confirmation"]["busbw"]) == (0.0228, 0.1105)
    assert (j["first"]["verdict"], j["confirmation"]["verdict"], j["verdict"]) == ("FAIL", "PASS", "PASS")
    assert p["verdicts"] == dict.fromkeys(["node1", "node2", "node3", "node4"], "PASS")


def test_unreachable_node_is_named_not_waited_for():
    nodes = ["n1", "n2", "n3", "n4"]
    p = fabric_run.judge(nodes, [], unreachable=["n2"])
    assert p["next_pairs"] == [["n1", "n3"]] and p["verdicts"]["n2"] == "UNREACHABLE"
    assert any(f["code"] == "fabric_unreachable" for f in p["findings"])


def test_history_nic_change_and_drop():
    prev = {
        "run_id": "P",
        "nics": {"a": {"rails": 8, "rail_gbps": 400.0}},
        "verdicts": {"a": "PASS"},
        "pairs": [{"pair": ["a", "b"], "busbw": 40.0}],
    }
    cur = {
        "run_id": "C",
        "nics": {"a": {"rails": 7, "rail_gbps": 400.0}},
        "verdicts": {"a": "PASS"},
        "pairs": [{"pair": ["a", "b"], "busbw": 30.0}],
    }
    out = fabric_run.compare(cur, prev)
    assert [f["code"] for f in out] == ["fabric_nic_changed", "fabric_pair_dropped"]
    assert "25% below 40 GB/s" in out[1]["message"]
    assert fabric_run.compare(cur, None) == []


def test_node_findings_closeness_and_mismatch():
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import topology

    topo = topology.parse_topo_matrix(
        (FIXTURES / "public" / "rtx4090x8_go-gpuallocator-17_topo_m.txt").read_text()
    )
    out = fabric_run.node_findings(
        {"a": nics("ndr8_healthy"), "b": nics("ndr8_one_rail_hdr_one_down")}, {"a": topo}
    )
    codes = [f["code"] for f in out]
    assert "gpu_without_close_nic" in codes and "nic_rate_low" in codes and "fabric_rate_mismatch" in codes
    assert all(f["nodes"] for f in out)


def test_latest_verdicts_and_the_launch_filter(tmp_path):
    import importlib.util

    root = tmp_path / "results"
    for run_id, verdicts in (("20261201T010000Z", {"n3": "FAIL"}), ("20261201T020000Z", {"n3": "PASS"})):
        (root / "fabric" / run_id).mkdir(parents=True)
        rec = {
            "run_id": run_id,
            "verdicts": verdicts,
            "nodes": {"n3": {"evidence": ["round 1 with n4: slow"]}},
        }
        (root / "fabric" / run_id / "fabric.json").write_text(json.dumps(rec))
    (root / "bench" / "20261201T030000Z").mkdir(parents=True)
    (root / "bench" / "20261201T030000Z" / "n1.json").write_text(
        json.dumps(
            {
                "host": "n1",
                "run_id": "20261201T030000Z",
                "verdict": "FAIL",
                "findings": [{"severity": "critical", "message": "NVLink down"}],
            }
        )
    )
    bench, record = fabric_run.latest_verdicts(str(root), ["n1", "n3"])
    assert [(f["verdict"], f["run_id"]) for f in bench["n1"]] == [("FAIL", "20261201T030000Z")]
    assert list(bench) == ["n1"]
    assert record["run_id"] == "20261201T020000Z"  # the newest fabric run, where n3 passed
    spec = importlib.util.spec_from_file_location(
        "wireup_fabric_filter",
        pathlib.Path(__file__).resolve().parents[2] / "plugins/filter/wireup_fabric.py",
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    refuse = mod.FilterModule().filters()["wireup_launch_refusals"]
    # A record with no sign of what it measured (before the record had parts) counts for everything.
    assert refuse(["n1", "n3"], root) == {
        "n1": "bench run 20261201T030000Z FAILed on n1: NVLink down (its newest record of links, torch, "
        "stepcost, gpu_health, gpu_trial, node_check)"
    }
    # an empty store refuses nobody
    assert refuse(["n1"], tmp_path / "none") == {}


def test_socket_expectation_follows_the_interface_nccl_named():
    facts = nics("testbed_veth")  # host0 at 10000 Mb/s
    r = fabric_run.pair_result(1, ["a", "b"], twohost(1.0, "host0"), OK, nics={"a": facts, "b": facts})
    assert r["expected"]["network_gbs"] == 1.25 and r["expected"]["transport"] == "socket"
    assert (
        fabric_run.pair_result(1, ["a", "b"], twohost(1.0), OK, nics={"a": facts, "b": facts})["expected"][
            "expected_gbs"
        ]
        is None
    )  # lo: not a NIC the facts list
    ib = nics("ndr8_healthy")  # eno1 25G listed; lo is not an interface the facts keep: unchanged
    assert probe_nics.on_interface(ib, "eno1")["rail_gbps"] == 25.0
    assert probe_nics.on_interface(ib, None) is ib  # the log names no interface
    # The lent GPU machine's two-host run: NIC facts list eth0 only, NCCL's log names lo (loopback).
    vm = dict(ib, interfaces=[{"name": "eth0", "speed_mbps": None}], devices=["eth0"], transport="socket")
    unlisted = probe_nics.expected_busbw(
        {"a": probe_nics.on_interface(vm, "lo"), "b": vm}, 1, transport="socket"
    )
    assert unlisted == {
        "expected_gbs": None,
        "reason": "a: NCCL used lo, not one of the NICs read (eth0): no expectation from the hardware",
    }


def test_failed_group_run_fails_its_members_with_a_finding_and_a_bar(tmp_path):
    nodes = ["n1", "n2", "n3", "n4"]
    speeds = dict.fromkeys(nodes, 0.40)
    results = gloo_round(speeds, [["n1", "n2"], ["n3", "n4"]], 1)
    p = fabric_run.judge(nodes, results)
    assert p["phase"] == "group" and p["next_pairs"] == [nodes] and p["failed"] == {}
    launch = {"n1": {"ok": True}, "n2": {"ok": False, "reason": "exited with code 1"}, "n3": {}, "n4": {}}
    results.append(fabric_run.pair_result(2, nodes, {"n1": bench_line(0.1, "gloo")}, launch, kind="group"))
    p = fabric_run.judge(nodes, results)
    # rerun once before it fails anyone
    assert (p["phase"], p["next_jobs"][0]["confirms"], p["failed"]) == ("confirm", 2, {})
    results.append(
        fabric_run.pair_result(3, nodes, {"n1": bench_line(0.1, "gloo")}, launch, kind="group", confirms=2)
    )
    p = fabric_run.judge(nodes, results)
    g = p["group"]
    assert (g["verdict"], g["busbw"], g["error"], g["used"]) == (
        "FAIL",
        None,
        "n2: exited with code 1; n3: failed; n4: failed",
        "confirmation",
    )
    assert p["verdicts"] == dict.fromkeys(nodes, "PASS")  # it names no node
    assert sorted(p["failed"]) == nodes and p["failed"]["n1"].startswith("whole-group run of 4 node(s)")
    assert "FAIL: n2: exited with code 1" in p["failed"]["n1"]
    [f] = [f for f in p["findings"] if f["code"] == "fabric_group_failed"]
    assert f["severity"] == "critical" and f["nodes"] == nodes
    rec = fabric_run.build_record("20261201T050000Z", p, {})
    assert (
        "round 2: no figure against 0.4 GB/s (the slowest passing pair) FAIL: n2: exited with code 1; "
        "n3: failed; n4: failed; confirmation round 3: no figure FAIL: n2: exited" in fabric_run.markdown(rec)
    )
    assert fabric_run.plot(rec, str(tmp_path / "f.png"))
    # the group decides nothing for launch: nobody is refused
    assert fabric_run.refusals(nodes, {}, rec) == {}


def test_a_group_run_without_an_expectation_leaves_the_pairs_judged_by_theirs():
    def result(round_no, pair, busbw, expected, *, kind="pair", confirms=0):
        e = {"expected_gbs": expected} if expected else {"expected_gbs": None, "reason": "no NIC facts"}
        return {
            "round": round_no,
            "pair": pair,
            "kind": kind,
            "confirms": confirms,
            "busbw": busbw,
            "error": "",
            "expected": e,
        }

    nodes = ["n1", "n2", "n3", "n4"]
    results = [result(1, ["n1", "n2"], 40.0, 42.0), result(1, ["n3", "n4"], 20.0, 42.0)]
    results += [result(2, ["n3", "n4"], 20.0, 42.0, confirms=1)]
    results += [result(3, ["n1", "n3"], 20.0, 42.0), result(3, ["n2", "n4"], 41.0, 42.0)]
    results += [result(4, ["n1", "n3"], 20.0, 42.0, confirms=3)]
    results.append(result(5, ["n1", "n2", "n4"], 39.0, None, kind="group"))
    p = fabric_run.judge(nodes, results)
    # before, the group's missing expectation sent every pair to the median (n3 then passed)
    assert p["reference_kind"] == "expected" and p["bad"] == ["n3"]
    assert (p["group"]["reference_kind"], p["group"]["reference_gbs"], p["group"]["verdict"]) == (
        "slowest_pair",
        40.0,
        "PASS",
    )


def test_the_group_runs_transport_findings_are_not_said_twice():
    ib = nics("ndr8_healthy")
    logs = twohost(0.5)
    pair = fabric_run.pair_result(1, ["a", "b"], logs, OK, nics={"a": ib, "b": ib})
    group = fabric_run.pair_result(2, ["a", "b"], logs, OK, nics={"a": ib, "b": ib}, kind="group")
    p = fabric_run.judge(["a", "b"], [pair, group], nics={"a": ib, "b": ib})
    codes = [(f["code"], f["nodes"]) for f in p["findings"] if f["code"] == "nccl_socket_with_ib_up"]
    assert codes == [("nccl_socket_with_ib_up", ["a"]), ("nccl_socket_with_ib_up", ["b"])]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"host": "n1", "verdict": "FA', "not valid JSON"),
        ("", "empty (a write cut off"),
        ("[]", "is a list, not a host record"),
        ('{"verdict": "MAYBE"}', "verdict is 'MAYBE'"),
    ],
)
def test_a_latest_bench_record_that_cannot_be_read_refuses_its_node(tmp_path, text, said):
    # A record cut off at its final name (a full disk before writes were atomic): the gate read it
    # as no verdict, went back to an older PASS and started the job on the node that FAILed.
    root = tmp_path / "results"
    passed = {"host": "n1", "run_id": "20261201T010000Z", "verdict": "PASS"}
    for run_id, body in (("20261201T010000Z", json.dumps(passed)), ("20261201T020000Z", text)):
        (root / "bench" / run_id).mkdir(parents=True)
        (root / "bench" / run_id / "n1.json").write_text(body)
    (root / "bench" / "20261201T020000Z" / "n2.json").write_text(
        json.dumps(dict(passed, host="n2", run_id="20261201T020000Z"))
    )
    bench, record = fabric_run.latest_verdicts(str(root), ["n1", "n2"])
    out = fabric_run.refusals(["n1", "n2"], bench, record)
    path = root / "bench" / "20261201T020000Z" / "n1.json"
    assert list(out) == ["n1"]
    assert out["n1"].startswith(f"latest bench record of n1 cannot be read: {path}: ") and said in out["n1"]
    # torchrun_launch_on_failed=skip leaves it out like a FAILed node.
    plan = torchrun_launch.health_plan(["n1", "n2"], {}, out, on_failed="skip")
    assert plan["hosts"] == ["n2"] and plan["left_out"] == out


def test_a_latest_fabric_record_that_cannot_be_read_refuses_every_node(tmp_path):
    root = tmp_path / "results"
    good = {"run_id": "20261201T010000Z", "verdicts": {"n1": "PASS", "n2": "PASS"}, "nodes": {}}
    (root / "fabric" / "20261201T010000Z").mkdir(parents=True)
    (root / "fabric" / "20261201T010000Z" / "fabric.json").write_text(json.dumps(good))
    (root / "fabric" / "20261201T020000Z").mkdir(parents=True)
    (root / "fabric" / "20261201T020000Z" / "fabric.json").write_text('{"verdicts": {"n1": "PA')
    # A run folder without a record yet (a run that is starting) is passed over.
    (root / "fabric" / "20261201T030000Z").mkdir(parents=True)
    out = fabric_run.refusals(["n1", "n2"], *fabric_run.latest_verdicts(str(root), ["n1", "n2"]))
    assert sorted(out) == ["n1", "n2"]
    assert "20261201T020000Z/fabric.json: not valid JSON" in out["n1"]


def test_fabric_markdown_escapes_what_nodes_said():
    rec = {
        "run_id": "20261201T010000Z",
        "pairs": [
            {
                "round": 1,
                "pair": ["n1", "n2"],
                "verdict": "FAIL",
                "busbw": None,
                "error": "<script>x</script>",
            }
        ],
        "verdicts": {"n1": "FAIL"},
        "nodes": {"n1": {"evidence": ["<img src=x onerror=alert(1)> | [a](javascript:b)"]}},
        "findings": [{"severity": "warning", "code": "c", "message": "<b>m</b>", "evidence": "`x` <i>"}],
    }
    md = fabric_run.markdown(rec)
    assert "<" not in md.replace("**<-**", "") and not re.search(r"(?<!\\)[\[\]`]", md)
    assert "&lt;script>" in md and "\\| \\[a\\]" in md


def test_a_second_fabric_run_in_the_same_second_never_replaces_the_first(tmp_path):
    import os
    import subprocess
    import sys
    import time

    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

    root = pathlib.Path(__file__).resolve().parents[2]
    fabric_dir = tmp_path / "fabric"
    now = time.time()
    taken = [results.new_run_id(now + s) for s in range(0, 30)]
    for run_id in taken:  # earlier runs with every id this run could pick
        (fabric_dir / run_id).mkdir(parents=True)
        (fabric_dir / run_id / "fabric.json").write_text('{"first": true}')
    out = subprocess.run(
        [
            str(pathlib.Path(sys.executable).with_name("ansible")),
            *["-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"],
            *["localhost", "-m", "wireup.cluster.wireup_fabric_bench"],
            *["-a", json.dumps({"nodes": ["n1", "n2"], "store": True, "results_dir": str(tmp_path)})],
        ],
        cwd=root,
        env=dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert all((fabric_dir / r / "fabric.json").read_text() == '{"first": true}' for r in taken)
    [new] = sorted(set(os.listdir(fabric_dir)) - set(taken))
    assert new.endswith("-2") and json.loads((fabric_dir / new / "fabric.json").read_text())["run_id"] == new
