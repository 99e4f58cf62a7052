"""The bench report's History section (issue 37 item 4): events written by the real producer
(history.write) into a results folder, the report written by the real writer
(assemble.write_report) with that folder in its context, the section read back from report.md."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import context
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history, host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from tests import busy
from tests.unit import test_redact_results, test_report

T0 = 1796630400.0  # 2026-12-07T08:00:00Z
RUN = "20261207T100000Z"


def _records(*hosts):
    """The run's records, each from the 2x H200 captures through host_record.build_record."""
    return {host: host_record.build_record(host, RUN, test_report.node()) for host in hosts}


def _report(tmp_path, records, ctx):
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    paths = assemble.write_report(str(run_dir), RUN, records, context=ctx)
    return pathlib.Path(paths["md"]).read_text(), pathlib.Path(paths["html"]).read_text()


def _history(md):
    """report.md's History section, up to the next heading of its level."""
    return md.split("\n## History\n", 1)[1].split("\n## ", 1)[0]


def _rows(part):
    """The History table's rows (not its header)."""
    return [line for line in part.splitlines() if re.match(r"\| n[0-9]", line)]


def _write(root, host, kind, why, when):
    return history.write(root, history.event(host, kind, "controller:ops", why, when=when))


def test_a_returned_node_its_time_to_return_and_a_drained_one_out_since(tmp_path):
    root = str(tmp_path / "results")
    _write(root, "n2", "drain", "wireup: [node_problem] hw/quick: NIC down", T0)
    _write(root, "n2", "recheck", "quick check PASS", T0 + 3000)
    _write(root, "n2", "return", "the quick check passes", T0 + 3600)
    _write(root, "n3", "drain", "wireup: [node_problem] hw/bench: all_reduce FAIL", T0 + 1800)
    md, page = _report(tmp_path, _records("n1", "n2", "n3"), context.Reporting(root, T0 + 7200))
    part = _history(md)
    assert "1 of the 2 node(s) with a history is out of service now" in part
    rows = _rows(part)
    assert rows[0].startswith("| n3 | since 2026-12-07T08:30:00Z (1.5 h) | - | 1 |")  # out first
    assert rows[1].startswith("| n2 | no | 60 min | 3 |")
    assert "2026-12-07T08:50:00Z recheck by controller:ops: quick check PASS" in rows[1]
    assert "The other 1 node(s) of this run have no events in their history." in part
    assert "<h2>History</h2>" in page and "since 2026-12-07T08:30:00Z (1.5 h)" in page


def test_no_history_folder_is_one_line_at_fleet_size(tmp_path):
    hosts = [f"gpu-{i:04d}" for i in range(1024)]
    records = dict.fromkeys(hosts, _records("gpu-0000")["gpu-0000"])
    md, _page = _report(tmp_path, records, context.Reporting(str(tmp_path / "results"), T0))
    part = _history(md).strip()
    assert part == "No node has events in its history (docs/repair.md, History)."


def test_the_table_and_each_node_s_events_are_bounded(tmp_path):
    root = str(tmp_path / "results")
    hosts = [f"n{i:03d}" for i in range(history.MAX_ROWS + 6)]
    for i, host in enumerate(hosts):
        _write(root, host, "drain", "wireup: [node_problem] hw/quick", T0 + i)
    for when in range(5):
        _write(root, "n000", "action", f"reset {when}", T0 + 100 + when)
    md, _page = _report(tmp_path, _records("n000"), context.Reporting(root, T0 + 3600))
    part = _history(md)
    rows = _rows(part)
    assert len(rows) == history.MAX_ROWS
    assert f"{history.MAX_ROWS + 6} of the {history.MAX_ROWS + 6} node(s) with a history are out" in part
    assert "6 more node(s) with events are not listed" in part
    assert rows[0].startswith("| n000 |") and rows[0].count(" by controller:ops") == history.LAST_EVENTS
    assert "reset 4" in rows[0] and "reset 1" not in rows[0]


def test_hostile_or_unreadable_history_is_said_and_the_rest_shown(tmp_path):
    root = tmp_path / "results"
    _write(str(root), "n2", "drain", "wireup: [node_problem] hw/quick: NIC down", T0)
    folder = root / "history" / "n2"
    (folder / "20261207T090000Z-000-drain.json").write_text("{broken")
    nan = '{"host": "n2", "kind": "return", "time": "nan", "who": "controller:x", "why": "x"}'
    (folder / "20261207T090100Z-000-return.json").write_text(nan)
    other = '{"host": "n3", "kind": "return", "time": 1796634000, "who": "controller:x", "why": "x"}'
    (folder / "20261207T090200Z-000-return.json").write_text(other)
    os.symlink("/etc/hostname", folder / "20261207T090300Z-000-return.json")
    (root / "history" / "bad name").mkdir()
    (root / "history" / "n4").write_text("not a folder")
    md, _page = _report(tmp_path, _records("n1", "n2"), context.Reporting(str(root), T0 + 3600))
    part = _history(md)
    assert "| n2 | since 2026-12-07T08:00:00Z (1.0 h) |" in part  # the one good event
    assert "6 entries of the history skipped" in part


def test_a_history_that_cannot_be_read_is_said(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    (root / "history").write_text("not a folder")
    md, _page = _report(tmp_path, _records("n1"), context.Reporting(str(root), T0))
    assert "The history could not be read: results/history is not a folder" in _history(md)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "history").unlink()
    os.symlink(elsewhere, root / "history")
    md, _page = _report(tmp_path, _records("n1"), context.Reporting(str(root), T0))
    assert "The history could not be read: " in _history(md)


def test_a_report_without_the_results_folder_says_so(tmp_path):
    md, _page = _report(tmp_path, _records("n1"), None)
    assert _history(md).strip() == (
        "The nodes' history was not read: the report was written without the results folder."
    )


def test_the_bench_store_module_reports_the_history_of_its_results_folder(tmp_path):
    """wireup_bench_store run by Ansible (as the bench play runs it): its report's History section
    reads the results folder it stores into, at the time it runs."""
    root = tmp_path / "results"
    _write(str(root), "node1", "drain", "wireup: [node_problem] hw/quick: NIC down", time.time() - 1800)
    args = {
        "results_dir": str(root),
        "run_id": RUN,
        "nodes": {"node1": test_redact_results._node(torch={}, figure_env={})},
        "thresholds": {"pass_ratio": 0.9, "warn_ratio": 0.75, "min_bytes": 1 << 30, "tolerance": 0.1,
                       "torch_goal": 0.97},
    }  # fmt: skip
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    out = subprocess.run(
        [str(pathlib.Path(sys.executable).with_name("ansible")), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", "localhost",
         "-m", "wireup.cluster.wireup_bench_store", "-a", json.dumps(args)],
        cwd=test_redact_results.ROOT, env=env, capture_output=True, text=True, timeout=busy.HANG_S,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    part = _history((root / "bench" / RUN / "report.md").read_text())
    assert "1 of the 1 node(s) with a history is out of service now" in part
    assert re.search(r"\| node1 \| since [0-9T:-]{19}Z \(0\.5 h\) \| - \| 1 \|", part), part
