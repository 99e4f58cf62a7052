"""wireup.report.runsummary: the closing lines of `make run` from its logs and the results store."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import runsummary

REPO = Path(__file__).resolve().parents[2]

RECAP = """\
PLAY [Preflight] ***************************************************************

TASK [Preflight | Check the inventory] *****************************************
ok: [localhost]

PLAY RECAP *********************************************************************
localhost   : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
node1       : ok=88   changed=31   unreachable=0    failed=0    skipped=12   rescued=0    ignored=0
node2       : ok=80   changed=30   unreachable=0    failed=1    skipped=12   rescued=0    ignored=0
node3       : ok=2    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0

"""

FAILED_YAML = """\
TASK [Launch | Report this node, or fail it with the failing node's log tail] **
ok: [node1]
fatal: [node2]: FAILED! =>
    assertion: __torchrun_launch_verdict.ok
    changed: false
    evaluated_to: false
    msg: |-
        job it-kill run 20261202T0430Z failed: node2 exited with code 1; stopped on every node.
        Last 40 lines of /r/node2.log:
"""

FAILED_JSON = (
    "TASK [Pytorch_venv | Install torch] ****\n"
    'fatal: [node1]: FAILED! => {"changed": false, "msg": "No matching distribution found for torch==9"}\n'
)


def test_the_recap_gives_every_host_s_counts():
    recap = runsummary.parse_recap("\x1b[0;33m" + RECAP)
    assert recap["node1"] == {
        "ok": 88, "changed": 31, "unreachable": 0, "failed": 0, "skipped": 12, "rescued": 0, "ignored": 0,
    }  # fmt: skip
    assert runsummary.bootstrap_cell(recap["node1"]) == "ok (changed 31, ok 88)"
    assert runsummary.bootstrap_cell(recap["node2"]) == "FAILED (changed 30, ok 80)"
    assert runsummary.bootstrap_cell(recap["node3"]) == "UNREACHABLE"
    assert runsummary.bootstrap_cell(None) == "not run"
    assert runsummary.parse_recap("no recap here") == {}


def test_a_failure_names_the_node_the_task_and_the_cause_in_either_result_format():
    [f] = runsummary.parse_failures(FAILED_YAML)
    assert f["host"] == "node2" and f["line"] == 3
    assert f["task"] == "Launch | Report this node, or fail it with the failing node's log tail"
    assert f["cause"].startswith("job it-kill run 20261202T0430Z failed: node2 exited with code 1")
    [g] = runsummary.parse_failures(FAILED_JSON)
    assert (g["host"], g["task"], g["cause"]) == (
        "node1",
        "Pytorch_venv | Install torch",
        "No matching distribution found for torch==9",
    )


def _store(tmp_path):
    results = tmp_path / "results"
    bench = results / "bench" / "20261202T043000Z"
    bench.mkdir(parents=True)
    (bench / "report.html").write_text("<html/>")
    for host, verdict, findings in (
        ("node1", "PASS", []),
        ("node2", "FAIL", [{"severity": "critical", "message": "all_reduce: busbw 3 GB/s, 1% of 300"}]),
    ):
        (bench / f"{host}.json").write_text(
            json.dumps({"host": host, "verdict": verdict, "findings": findings})
        )
    (bench / "node3.json").write_text(json.dumps({"host": "someone-else", "verdict": "PASS"}))  # not node3's
    job = results / "jobs" / "ddp-multinode-20261202T0431Z"
    job.mkdir(parents=True)
    nodes = {
        "node1": {"state": "exited", "rc": 0, "elapsed": 21.34},
        "node2": {"state": "exited", "rc": 1, "elapsed": 9.0},
    }
    (job / "summary.json").write_text(
        json.dumps(
            {
                "job": "ddp-multinode",
                "run_id": "20261202T0431Z",
                "verdict": {"ok": False, "reason": "node2 exited with code 1"},
                "nodes": nodes,
            }
        )
    )
    return results, bench, job


def test_the_bench_run_and_the_job_are_the_ones_the_logs_name_inside_the_results(tmp_path):
    results, bench, job = _store(tmp_path)
    log = f"    - 'bench report: {bench}/report.html (Markdown: {bench}/report.md)'\n"
    report, records = runsummary.bench_records(log, str(results))
    assert report == f"{bench}/report.html" and sorted(records) == ["node1", "node2"]
    assert runsummary.bench_cell(records["node2"]) == "FAIL: all_reduce: busbw 3 GB/s, 1% of 300"
    assert runsummary.bench_cell(records["node1"]) == "PASS"
    assert runsummary.bench_records(log, str(tmp_path / "elsewhere")) == ("", {})  # outside the store
    assert runsummary.bench_records("bench.yml failed before its report", str(results)) == ("", {})
    said = f"    msg: 'ddp-multinode run R on node1 ...; logs and summary in {job}/'\n"
    where, summary = runsummary.job_summary(said, str(results))
    assert where == str(job) and summary["verdict"]["reason"] == "node2 exited with code 1"
    assert runsummary.job_cell(summary["nodes"]["node1"]) == "exited 0 after 21.3 s"
    assert runsummary.job_cell(None) == "not run"


def _run_dir(tmp_path, phases, logs):
    run = tmp_path / "results" / "run-20261202T042900Z"
    run.mkdir(parents=True, exist_ok=True)
    (run / "phases.tsv").write_text("".join(f"{n}\t{rc}\t{s}\n" for n, rc, s in phases))
    for name, text in logs.items():
        (run / f"{name}.log").write_text(text)
    return run


def test_a_healthy_run_ends_with_a_line_per_node_the_report_the_logs_and_what_next(tmp_path):
    results, bench, job = _store(tmp_path)
    recap = RECAP.replace("failed=1", "failed=0").replace("unreachable=1", "unreachable=0")
    run = _run_dir(
        tmp_path,
        [("testbed", 0, 40), ("site", 0, 200), ("bench", 0, 90), ("launch", 0, 30)],
        {
            "site": recap,
            "bench": f"bench report: {bench}/report.html (Markdown: x)\n",
            "launch": f"logs and summary in {job}/\n",
        },
    )
    lines = runsummary.summary(str(run), str(results), inventory="inv.yml", testbed="wait-run")
    text = "\n".join(lines)
    assert "  site.yml (bootstrap)        ok      200 s" in lines
    [node1] = [line for line in lines if line.startswith("  node1 ")]
    assert "ok (changed 31, ok 88)" in node1 and "PASS" in node1 and "exited 0 after 21.3 s" in node1
    assert not [line for line in lines if line.startswith("  localhost")]
    assert f"Bench report: {bench}/report.html (and report.md)" in lines
    assert f"Full output:  {run}/ (testbed.log, site.log, bench.log, launch.log)" in lines
    # Commands as pasted after `make venv` (the venv's program written out; issue 38), in backticks.
    assert "Next: your own job: `.venv/bin/ansible-playbook -i inv.yml launch.yml" in text
    assert (
        "follow it with `.venv/bin/ansible-playbook -i inv.yml jobs.yml -e torchrun_launch_job=NAME`" in text
    )
    assert lines[-1].endswith("`make testbed-down TESTBED=wait-run`")


def test_a_failed_phase_says_where_and_why_and_what_to_read(tmp_path):
    results, _bench, _job = _store(tmp_path)
    run = _run_dir(tmp_path, [("site", 2, 50)], {"site": FAILED_JSON + RECAP})
    lines = runsummary.summary(str(run), str(results))
    assert "  site.yml (bootstrap)  FAILED (exit 2)  50 s" in lines
    assert (
        "  site failed on node1 at 'Pytorch_venv | Install torch': "
        "No matching distribution found for torch==9 (site.log line 2)"
    ) in lines
    assert (
        "Next: read site.log (line 2), fix the cause, then rerun `make run` (every phase is idempotent)."
        in lines
    )


def test_a_failed_bench_says_the_whole_command_that_skips_the_failed_nodes():
    """Not a bare `-e ...` to add somewhere: the line a user pastes (issue 38)."""
    lines = runsummary.next_steps(
        runsummary.read_phases("site\t0\t9\nbench\t2\t9\n"), {}, "inventory/mycluster", ""
    )
    assert lines[-1] == (
        "      launch.yml refuses nodes whose bench verdict FAILed; without them: "
        "`.venv/bin/ansible-playbook -i inventory/mycluster launch.yml -e torchrun_launch_on_failed=skip`."
    )
    assert not [
        line for line in lines if "ansible-playbook" in line and ".venv/bin/ansible-playbook" not in line
    ]


def test_values_from_the_store_are_printed_clean():
    assert runsummary.bench_cell(
        {"verdict": "FAIL", "findings": [{"severity": "critical", "message": "a\x1b[2Jb\nc"}]}
    ) == ("FAIL: a [2Jb c")
    assert runsummary.read_phases("site\t0\t3\ngarbage\nbench\tx\t1\n") == [("site", 0, 3)]


def test_tee_passes_the_output_on_and_logs_it_without_colours(tmp_path):
    sink = io.StringIO()
    runsummary.tee(str(tmp_path / "x.log"), io.StringIO("\x1b[0;32mok: [node1]\x1b[0m\nnext\n"), sink)
    assert sink.getvalue() == "\x1b[0;32mok: [node1]\x1b[0m\nnext\n"
    assert (tmp_path / "x.log").read_text() == "ok: [node1]\nnext\n"


# Real play output of the lent 1-GPU machine (tests/gpu/run.sh, 2026-12-01; kept in docs/).
LOGS = REPO / "docs" / "example-h200x1" / "logs-2026-12-01-final"
MINBW = REPO / "docs" / "example-h200x1" / "logs" / "minbw.log"


def test_real_gpu_logs_give_the_recap_the_report_and_the_job_folder():
    site = runsummary.parse_recap((LOGS / "site2.log").read_text())
    assert (
        list(site) == ["localhost"] and site["localhost"]["changed"] == 0 and site["localhost"]["failed"] == 0
    )
    report, _records = runsummary.bench_records((LOGS / "bench.log").read_text(), "/work/main/results")
    assert report == "/work/main/results/bench/20261201T090557Z/report.html"
    where, _summary = runsummary.job_summary((LOGS / "launch.log").read_text(), "/work/main/results")
    assert where == "/work/main/results/jobs/ddp-multinode-20261201T090639Z-843c"
    # The one-node inventory of that machine is localhost: it is the node, not a controller play.
    lines = runsummary.compose(
        [("site", 0, 60)], {"site": site}, {}, {}, {}, report="", job_dir="", run_dir="/r"
    )  # fmt: skip
    assert [line for line in lines if line.startswith("  localhost  ok (changed 0, ok ")]


def test_a_real_bench_failure_names_the_node_the_task_and_the_verdict():
    [failure] = runsummary.parse_failures(MINBW.read_text())
    assert failure["host"] == "localhost" and failure["task"].endswith("Bench | Fail when a host failed")
    assert failure["cause"].startswith("bench verdict FAIL on localhost: see /work/main/results/bench/")
    assert runsummary.parse_recap(MINBW.read_text())["localhost"]["failed"] == 1
