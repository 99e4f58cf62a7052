"""The node_check role's plan and the quick check as a capability of the host record and the
report (wireup/plans/node_check.py, issue 26): check.json and wireup-check's command lines, what the
store gives a node after a bench, a node's answer as the controller keeps it (nothing it printed
trusted), and a quick run (``bench.yml --tags quick``) gathered, stored and reported by
bench_report's path under results/quick/, where the launch gate never looks."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench_report
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (
    node_check as plans_node_check,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "tests/fixtures/h200x2"
RECORD = json.loads((H200 / "bench_record_2026-11-29_healthy.json").read_text())
DEFAULTS = yaml.safe_load((REPO / "roles/node_check/defaults/main.yml").read_text())
GROUP_VARS = yaml.safe_load((REPO / "group_vars/all.yml").read_text())
REPORT_DEFAULTS = yaml.safe_load((REPO / "roles/bench_report/defaults/main.yml").read_text())


def settings(**over):
    """The role's defaults as the plan task names them (node_check_bench_bytes -> bench_bytes)."""
    # node_check_python is the bundle's, the rest the quick check's path (node_check_slurm.py).
    own = {"node_check_python", "node_check_via", "node_check_slurm_options", "node_check_slurm_wait"}
    values = {k.removeprefix("node_check_"): v for k, v in DEFAULTS.items() if k not in own}
    values.update(
        drain_max_share=GROUP_VARS["wireup_drain_max_share"],
        drain_max_nodes=GROUP_VARS["wireup_drain_max_nodes"],
    )
    return plans_node_check.CheckSettings(**dict(values, **over))


def test_the_plan_takes_the_slurm_name_and_nvidia_smi_from_preflights_facts():
    facts = {"hostname": "gpu-a01", "gpu": {"nvidia_smi": "/usr/local/nvidia/bin/nvidia-smi"}}
    plan = plans_node_check.plan("a01", facts, settings(bench_bytes="256M"))
    conf = plan["config"]
    assert conf["slurm_node"] == "gpu-a01" and conf["nvidia_smi"] == "/usr/local/nvidia/bin/nvidia-smi"
    assert conf["bench"] == {"run": False, "size": 256 << 20, "tolerance": 0.2, "iterations": 20}
    assert plans_node_check.plan("a01", {}, settings(nvidia_smi="/x"))["config"]["slurm_node"] == "a01"
    # the blast radius travels to wireup-check (issue 37), and check.json takes it (run.DEFAULTS)
    conf = plans_node_check.plan("a01", {}, settings(drain_max_share=20, drain_max_nodes=3))["config"]
    assert (conf["drain_max_share"], conf["drain_max_nodes"]) == (20, 3)
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import run as checkrun

    assert checkrun.merge_config(conf)["drain_max_share"] == 20
    head = ["/usr/local/sbin/wireup-check", "--config", "/etc/wireup/check.json"]
    assert plan["quick_argv"] == [*head, "--json"]
    assert plan["baseline_argv"] == [*head, "--write-baseline", "--json"]
    assert plan["textfile_argv"] == [*head, "--write-textfile", "wireup_bench.prom", "--json"]
    checked = plans_node_check.plan("a01", facts, settings(bench=True), check_mode=True)
    assert checked["quick_argv"] == [*head, "--json", "--bench", "--textfile", "never"]


def test_the_plan_refuses_what_it_cannot_use():
    with pytest.raises(ValueError, match="'1GB' is not a size"):
        plans_node_check.plan("a01", {}, settings(bench_bytes="1GB"))
    with pytest.raises(TypeError):
        dataclasses.replace(settings(), bench_byts="1G")


def test_read_store_gives_a_bench_part_only_from_a_passing_newest_record(tmp_path):
    build = {"bin_dir": "/opt/wireup/nccl-tests/build", "ld_library_path": "/opt/nccl/lib"}
    assert plans_node_check.read_store(tmp_path, "gpu-a01", build=build) == {
        "bench_part": {},
        "textfile": "",
        "textfiles": [],
        "note": "no bench record of it in the store",
    }
    mine = dict(RECORD, host="gpu-a01")  # the record is read only under its own host's name
    results.write_host(tmp_path, "20261201T000000Z", "gpu-a01", dict(mine, run_id="20261201T000000Z"))
    found = plans_node_check.read_store(tmp_path, "gpu-a01", build=build, size="1G")
    part = found["bench_part"]
    assert part["run_id"] == "20261201T000000Z" and part["gpu_count"] == 2 and found["note"] == ""
    assert part["figure"]["size"] == 1 << 30 and part["nccl_tests"]["bin_dir"] == build["bin_dir"]
    assert 'wireup_bench_verdict{host="gpu-a01",verdict="PASS"} 1' in found["textfile"]
    assert found["textfiles"] == [found["textfile"]]
    assert plans_node_check.read_store(tmp_path, "gpu-a01", build=build, textfile="never")["textfiles"] == []
    failed = dict(mine, run_id="20261202T000000Z", verdict="FAIL")
    results.write_host(tmp_path, "20261202T000000Z", "gpu-a01", failed)
    found = plans_node_check.read_store(tmp_path, "gpu-a01", build=build)
    assert found["bench_part"] == {} and found["note"] == (
        "its latest bench record (20261202T000000Z) is FAIL, not PASS"
    )


def test_the_baseline_line_is_wireup_checks_own_or_says_why_none_was_written():
    read = {"bench_part": {"run_id": "r1"}, "textfile": "", "textfiles": [], "note": ""}
    ran = {"stdout": json.dumps({"changed": True, "line": "wireup-check: baseline of n1 written"})}
    assert plans_node_check.baseline_line(read, ran, "n1") == "wireup-check: baseline of n1 written"
    # --check: the command module reports skipped with an empty stdout (not JSON).
    would = {"skipped": True, "stdout": "", "msg": "Command would have run if not in check mode"}
    assert plans_node_check.baseline_line(read, would, "n1", check_mode=True) == (
        "wireup-check: baseline of n1 not written (check mode)"
    )
    # What the node printed is not trusted: one line, and an answer without one says so.
    two = {"stdout": json.dumps({"changed": False, "line": "wireup-check: same\nsecond  line"})}
    assert plans_node_check.baseline_line(read, two, "n1") == "wireup-check: same second line"
    for odd in ("{not json", "[1]", json.dumps({"changed": True}), json.dumps({"line": ""})):
        said = plans_node_check.baseline_line(read, {"stdout": odd}, "n1")
        assert said.startswith("wireup-check: baseline of n1: no line in its answer: "), said
    kept = dict(read, bench_part={}, note="its latest bench record (r2) is FAIL, not PASS")
    skipped = {"skipped": True, "changed": False, "false_condition": "..."}
    for check_mode in (False, True):
        assert plans_node_check.baseline_line(kept, skipped, "n1", check_mode=check_mode) == (
            "wireup-check: baseline of n1 kept: its latest bench record (r2) is FAIL, not PASS"
        )


def test_a_nodes_answer_is_checked_not_trusted():
    said = node_check.result("n2", stdout="Traceback ...", stderr="ModuleNotFoundError: x\n", rc=1)
    assert said["verdict"] == "ERROR" and said["line"].endswith("(exit code 1): ModuleNotFoundError: x")
    assert said["errors"] == [said["line"]] and said["problems"] == [] and said["baseline"] is None
    odd = {
        "verdict": "<script>",
        "line": "x | [y](z)\nsecond",
        "problems": [{"kind": "nic", "part": "NIC a\nb", "message": "m"}, {"kind": "?", "part": 1}, "x"],
        "seconds": "fast",
        "baseline": {"run_id": "r1", "time": 1.5, "taken": "bench", "node": {"huge": 1}},
        "bench": {"collective": "all_reduce", "size": 1024, "busbw": "lots", "error": ""},
    }
    kept = node_check.result("n2", stdout=json.dumps(odd), stderr="", rc=1)
    assert kept["verdict"] == "ERROR" and "gave the verdict '<script>'" in kept["errors"][-1]
    assert kept["line"] == "x | [y](z) second" and kept["seconds"] is None
    assert kept["problems"] == [
        {"kind": "nic", "part": "NIC a b", "message": "m"},
        {"kind": "unknown", "part": "1", "message": ""},
    ]
    assert kept["baseline"] == {"run_id": "r1", "time": 1.5, "taken": "bench"}
    assert kept["bench"]["busbw"] is None and kept["bench"]["size"] == 1024


def _answer(host, verdict, line, **extra):
    return node_check.result(
        host,
        stdout=json.dumps({"verdict": verdict, "line": f"wireup-check: {verdict} {host}: {line}", **extra}),
    )


def _quick_run(tmp_path):
    group = ["n1", "n2", "n3", "n4", "n5"]
    run_ids = ["20261202T100000Z", "20261202T100000Z", "20261202T100000Z", "", ""]
    answers = [
        _answer("n1", "PASS", "0 GPU(s), 1 NIC port(s) as at the last passing bench x", seconds=0.3),
        _answer(
            "n2",
            "FAIL",
            "NIC mlx5_0:1 missing (was up)",
            problems=[{"kind": "nic", "part": "NIC mlx5_0:1", "message": "NIC mlx5_0:1 missing (was up)"}],
            seconds=0.4,
        ),
        None,  # reached the check, kept no result
        None,  # lost before the check
        None,  # not in this run (--limit)
    ]
    reached = [{"hostname": h} for h in group[:4]] + [{}]
    return bench_report.gather_quick(
        group, name="gpu_nodes", run_ids=run_ids, results=answers, reached=reached
    )


def test_a_quick_run_is_gathered_stored_and_reported_like_a_bench_run(tmp_path):
    run = _quick_run(tmp_path)
    assert run["kind"] == "quick" and run["hosts"] == ["n1", "n2", "n3"] and run["lost"] == ["n4"]
    assert run["nodes"]["n3"] == bench_report.NO_CHECK
    thresholds = {
        "pass_ratio": REPORT_DEFAULTS["bench_pass_ratio"],
        "warn_ratio": REPORT_DEFAULTS["bench_warn_ratio"],
        "min_bytes": REPORT_DEFAULTS["bench_verdict_min_bytes"],
        "tolerance": REPORT_DEFAULTS["bench_baseline_tolerance"],
        "torch_goal": REPORT_DEFAULTS["bench_torch_goal_ratio"],
    }
    params = {"results_dir": str(tmp_path), "nodes": run["nodes"], "thresholds": thresholds, "kind": "quick"}
    nodes = bench_report.store_nodes(dict(params, lost={"n4": "ssh: timed out"}), read=lambda p: "")
    run_id, run_dir, records = host_record.store_run(tmp_path, run["run_id"], nodes, kind="quick")
    assert pathlib.Path(run_dir) == tmp_path / "quick" / run_id
    verdicts = {h: r["verdict"] for h, r in records.items()}
    assert verdicts == {"n1": "PASS", "n2": "FAIL", "n3": "FAIL", "n4": "UNREACHABLE"}
    assert {r["kind"] for r in records.values()} == {"quick"}
    stored = host_record.load_record(pathlib.Path(run_dir) / "n2.json")
    assert stored["node_check"]["verdict"] == "FAIL" and stored["baseline"] == {"state": "none", "run_id": ""}
    [nic] = [f for f in stored["findings"] if f["source"] == "node_check"]
    assert nic["code"] == "node_check_nic" and nic["severity"] == "critical" and nic["part"] == "NIC mlx5_0:1"
    lines = [assemble.summary_line(records[h]) for h in sorted(records)]
    assert lines[:2] == [
        "n1: PASS, nothing compared (no passing run to compare with) - 0 GPU(s), 1 NIC port(s) as at the "
        "last passing bench x (0.3 s)",
        "n2: FAIL, nothing compared (no passing run to compare with) - NIC mlx5_0:1 missing (was up) (0.4 s)",
    ]
    assert lines[2].startswith("n3: FAIL, nothing compared (no passing run to compare with) - no quick-check")
    assert "ssh: timed out" in lines[3]
    paths = assemble.write_report(run_dir, run_id, records)
    md = pathlib.Path(paths["md"]).read_text()
    assert md.startswith(f"# wireup quick check report: run {run_id}")
    assert "## Quick node check" in md and "not healthy: n2, n3, n4." in md
    assert "| n2 | FAIL | FAIL | NIC mlx5_0:1 missing (was up) | 0.4 | - |" in md
    assert "## n1: PASS" not in md  # no figures: the quick check's part shows each host


def test_what_a_node_printed_reaches_the_report_escaped(tmp_path):
    answer = _answer(
        "n1", "FAIL", "x | [y](z) <script>", problems=[{"kind": "link", "part": "p", "message": "m"}]
    )
    nodes = {"n1": {"node_check": answer, "thresholds": {}}}
    run_id, run_dir, records = host_record.store_run(tmp_path, "20261202T100000Z", nodes, kind="quick")
    md = pathlib.Path(assemble.write_report(run_dir, run_id, records)["md"]).read_text()
    assert "\\[y\\]" in md and "<script>" not in md and "&lt;script>" in md
    again, again_dir, _ = host_record.store_run(tmp_path, run_id, nodes, kind="quick")
    assert again == f"{run_id}-2" and again_dir != run_dir  # a taken id gets -2, nothing overwritten


def test_a_quick_pass_never_hides_a_bench_fail_from_the_launch_gate(tmp_path):
    """The gate reads each capability's newest record (record/gate.py): a later quick run that PASSes
    settles node_check only; the bench's FAIL of the links and torch still refuses the node."""
    failed = dict(RECORD, host="n1", run_id="20261201T000000Z", verdict="FAIL")
    results.write_host(tmp_path, failed["run_id"], "n1", failed)
    nodes = {"n1": {"node_check": _answer("n1", "PASS", "fine"), "thresholds": {}}}
    host_record.store_run(tmp_path, "20261202T000000Z", nodes, kind="quick")
    refused = gate.refusals(["n1"], *gate.latest_verdicts(tmp_path, ["n1"]))
    assert refused == {
        "n1": "bench run 20261201T000000Z FAILed on n1: see its report (its newest record of links, torch)"
    }
    assert results.list_runs(tmp_path) == ["20261201T000000Z"]
    assert results.list_runs(tmp_path, "quick") == ["20261202T000000Z"]


def test_a_quick_fail_refuses_until_a_bench_that_measured_the_links_passes(tmp_path):
    """A quick check is a check a node can fail: its FAIL refuses the node while it is the newest
    record of node_check; a later passing bench (bench.yml takes the quick-check baseline after
    it: node_check after_bench) settles node_check again. An older quick FAIL refuses nothing."""
    passed = dict(RECORD, host="n1", run_id="20261201T000000Z")
    results.write_host(tmp_path, passed["run_id"], "n1", passed)
    bad = _answer(
        "n1",
        "FAIL",
        "GPU0 has 12 active NVLinks, 18 at the baseline",
        problems=[
            {"kind": "nvlink", "part": "GPU0", "message": "GPU0: 12 active NVLinks, 18 at the baseline"}
        ],
    )
    host_record.store_run(
        tmp_path, "20261202T000000Z", {"n1": {"node_check": bad, "thresholds": {}}}, kind="quick"
    )
    refused = gate.refusals(["n1"], *gate.latest_verdicts(tmp_path, ["n1"]))
    assert refused == {
        "n1": "quick run 20261202T000000Z FAILed on n1: GPU0: 12 active NVLinks, 18 at the baseline "
        "(its newest record of node_check)"
    }
    again = dict(RECORD, host="n1", run_id="20261203T000000Z")
    results.write_host(tmp_path, again["run_id"], "n1", again)
    assert gate.refusals(["n1"], *gate.latest_verdicts(tmp_path, ["n1"])) == {}


def test_a_bench_record_has_no_node_check_part_and_a_damaged_one_is_named():
    assert node_check.section({}, {}, None) == ({}, [], [])
    assert host_record.record_problem(dict(RECORD, node_check=[])) == "node_check is a list, not an object"
    odd = dict(RECORD, node_check={"verdict": "MAYBE", "problems": []})
    assert host_record.record_problem(odd).startswith("node_check.verdict is 'MAYBE'")
    with pytest.raises(ValueError, match="kind 'other' is not one of bench, quick"):
        host_record.store_run("/nonexistent", "20261202T000000Z", {}, kind="other")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"verdict": "PASS"}, "node_check has no baseline, bench, errors, exit, host, line, notes, problems"),
        ("PASS", "node_check is a string, not an object"),
        ([], "node_check is a list, not an object"),
    ],
)
def test_a_check_that_is_no_result_answer_is_damaged_never_read_as_no_check(tmp_path, given, said):
    """node_check.section reads result()'s answer: one that is not a CheckResult (not made by
    result(), or changed on the way) stopped the whole quick run's store with a KeyError, or (not an
    object) was read as no check at all. Now that node alone is DAMAGED."""
    ok = node_check.result("n1", stdout=json.dumps({"verdict": "PASS", "line": "wireup-check: PASS n1: ok"}))
    nodes = {"n1": {"node_check": ok}, "n2": {"node_check": given}}
    _rid, _dir, records = host_record.store_run(str(tmp_path), "20261202T000000Z", nodes, kind="quick")
    assert records["n1"]["verdict"] == "PASS" and records["n2"]["verdict"] == "DAMAGED"
    assert records["n2"]["damaged"].startswith(said) and records["n2"]["kind"] == "quick"
    with pytest.raises(ValueError, match="node_check"):
        node_check.section({"node_check": given}, {}, None)


def test_no_host_reached_the_quick_check():
    with pytest.raises(ValueError, match="No host of group gpu_nodes reached the quick check"):
        bench_report.gather_quick(["n1"], name="gpu_nodes", run_ids=[""], results=[None], reached=[{}])
