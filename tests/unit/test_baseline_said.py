"""Issue 38 item 3: a first run says it recorded a baseline and compared nothing, a second run
says which run it was compared with, wherever the verdict is shown: the bench summary line, the
report's first screen (Markdown and HTML), make run's summary, the node's textfile, and the quick
check's summary and table (which agree). Every record comes from the real producer
(host_record.store_run on the testbed's gloo capture; the quick check's answer through
nodecheck/checkrun/node_check from that bench record and a real NIC capture)."""

from __future__ import annotations

import json
import pathlib

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import run as check_run
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import quick
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nics
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import (
    assemble,
    metrics,
    runsummary,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
GLOO = (FIXTURES / "nccltests" / "torch_allreduce_gloo_3ranks.txt").read_text()
VETH = FIXTURES / "sysfs" / "testbed_veth"
HOSTS = ("node1", "node2", "node3")
FIRST, SECOND = "20261207T060000Z", "20261207T070000Z"
RECORDED = "baseline recorded (first passing run: nothing compared)"


def _cpu_node():
    """A testbed node's bench data: no GPU, the group's gloo all-reduce (a real 3-rank capture)."""
    return {"skipped": "no NVIDIA GPU: GPU benchmarks skipped", "torch": {"multi_node": GLOO}}


def _two_runs(root):
    first = host_record.store_run(root, FIRST, {h: _cpu_node() for h in HOSTS})
    second = host_record.store_run(root, SECOND, {h: _cpu_node() for h in HOSTS})
    return first, second


def _no_plots(monkeypatch):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)


def test_the_record_says_recorded_then_compared(tmp_path):
    (_, _, first), (_, _, second) = _two_runs(str(tmp_path))
    for host in HOSTS:
        assert first[host]["verdict"] == "PASS"  # the gate's word does not move
        assert first[host]["baseline"] == {"state": "recorded", "run_id": ""}
        assert second[host]["baseline"]["state"] == "compared"
        assert second[host]["baseline"]["run_id"] == FIRST
        # What was stored is what every consumer reads.
        stored = host_record.read_host(str(tmp_path), SECOND, host)
        assert results.read_baseline(stored) == second[host]["baseline"]


def test_the_summary_line_says_it_beside_the_verdict(tmp_path):
    (_, _, first), (_, _, second) = _two_runs(str(tmp_path))
    assert assemble.summary_line(first["node1"]).startswith(f"node1: PASS, {RECORDED} - ")
    assert assemble.summary_line(second["node1"]).startswith(f"node1: PASS, compared with run {FIRST} - ")


def test_the_report_s_first_screen_says_it_in_markdown_and_html(tmp_path, monkeypatch):
    _no_plots(monkeypatch)
    (_, first_dir, first), (_, second_dir, second) = _two_runs(str(tmp_path))
    for run_dir, records, said in (
        (first_dir, first, RECORDED),
        (second_dir, second, f"compared with run {FIRST}"),
    ):
        paths = assemble.write_report(run_dir, pathlib.Path(run_dir).name, records)
        md = pathlib.Path(paths["md"]).read_text()
        opening = md.split("\n\n")[1]
        assert opening.startswith(f"3 host(s): 3 PASS. Baseline: node1, node2, node3: {said}."), opening
        assert "| node1 | PASS | 0 | - | 0/0/0 | " + said + " |" in md
        # The torch table's verdict says how a GPU-less node was judged, not "not judged".
        assert "not judged" not in md
        page = pathlib.Path(paths["html"]).read_text()
        assert f"Baseline: node1, node2, node3: {said}." in page


def test_make_run_s_summary_says_it(tmp_path):
    root = tmp_path / "results"
    (_, first_dir, _), (_, second_dir, _) = _two_runs(str(root))
    for run_dir, said in ((first_dir, RECORDED), (second_dir, f"compared with run {FIRST}")):
        run = tmp_path / f"run-{pathlib.Path(run_dir).name}"
        run.mkdir()
        (run / "phases.tsv").write_text("bench\t0\t60\n")
        (run / "bench.log").write_text(f"    - 'bench report: {run_dir}/report.html (Markdown: x)'\n")
        lines = runsummary.summary(str(run), str(root))
        [node1] = [line for line in lines if line.startswith("  node1 ")]
        assert f"PASS, {said}" in node1, lines


def test_the_textfile_says_whether_it_was_compared(tmp_path):
    _two_runs(str(tmp_path))
    first = metrics.bench_families("node1", host_record.read_host(str(tmp_path), FIRST, "node1"))
    assert 'wireup_bench_baseline_compared{host="node1"} 0' in metrics.render(first)
    now = metrics.controller_text(str(tmp_path), "node1")  # the newest record: the second run's
    assert 'wireup_bench_baseline_compared{host="node1"} 1' in now
    assert "# TYPE wireup_bench_baseline_compared gauge" in now


def test_an_old_or_malformed_baseline_part_claims_no_comparison():
    assert results.read_baseline({"baseline": {}}) == {"state": "none", "run_id": ""}
    assert results.read_baseline({"baseline": {"run_id": FIRST}}) == {"state": "compared", "run_id": FIRST}
    assert results.read_baseline({"baseline": {"state": "compared", "run_id": "../x"}})["run_id"] == ""
    assert results.read_baseline({"baseline": "yes"}) == {"state": "none", "run_id": ""}
    assert results.read_baseline([]) == {"state": "none", "run_id": ""}


def _quick_answer(host, bench_record):
    """What wireup-check --json prints on a node whose baseline its passing bench left: the real
    baseline (quick.bench_part of the stored record), the testbed's veth read, checkrun's
    public form, as node_check.result keeps it."""
    state = quick.node_state(None, nics.parse_nic_facts(nics.read_tree(str(VETH))))
    doc = quick.baseline_doc(host, quick.bench_part(bench_record), state, now=1.0)
    run = quick.result(host, doc, state, seconds=0.2)
    return node_check.result(host, stdout=json.dumps(check_run._public(run)))


def test_the_quick_check_s_summary_and_table_name_the_same_baseline(tmp_path, monkeypatch):
    _no_plots(monkeypatch)
    (_, _, first), _second = _two_runs(str(tmp_path))
    nodes = {h: {"node_check": _quick_answer(h, first[h]), "thresholds": {}} for h in HOSTS}
    run_id, run_dir, records = host_record.store_run(str(tmp_path), "20261207T080000Z", nodes, kind="quick")
    assert records["node1"]["baseline"] == {"state": "compared", "run_id": FIRST}
    assert assemble.summary_line(records["node1"]).startswith(f"node1: PASS, compared with run {FIRST} - ")
    md = pathlib.Path(assemble.write_report(run_dir, run_id, records)["md"]).read_text()
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    table = md.split("## Quick node check", 1)[1]
    for host in HOSTS:
        assert f"| {host} | PASS | 0 | - | 0/0/0 | compared with run {FIRST} |" in summary, summary
        row = next(line for line in table.splitlines() if line.startswith(f"| {host} "))
        assert row.endswith(f" | {FIRST} |"), row


def test_a_quick_check_without_a_baseline_compared_nothing(tmp_path):
    state = quick.node_state(None, nics.parse_nic_facts(nics.read_tree(str(VETH))))
    run = quick.result("node1", None, state, seconds=0.1)
    answer = node_check.result("node1", stdout=json.dumps(check_run._public(run)))
    _, _, records = host_record.store_run(
        str(tmp_path), FIRST, {"node1": {"node_check": answer}}, kind="quick"
    )
    assert records["node1"]["baseline"] == {"state": "none", "run_id": ""}
    assert assemble.summary_line(records["node1"]).startswith(
        "node1: PASS, nothing compared (no passing run to compare with) - "
    )
