"""A node's history (issue 37 item 4): one file per event (atomic, 0640, never rewritten), read
back in order, the report's lines and the Prometheus families (promtool accepts them)."""

import os
import shutil
import subprocess

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import metrics

T0 = 1796630400.0  # 2026-12-07T08:00:00Z


def test_events_are_files_never_rewritten_and_read_back_in_order(tmp_path):
    root = str(tmp_path)
    drain = history.event(
        "node2", "drain", "node:wireup-check", "wireup: [node_problem] hw/quick: NIC\nx", when=T0
    )
    paths = [history.write(root, drain), history.write(root, drain)]  # the same second: two files
    assert [os.path.basename(p) for p in paths] == [
        "20261207T080000Z-000-drain.json",
        "20261207T080000Z-001-drain.json",
    ]
    assert oct(os.stat(paths[0]).st_mode & 0o777) == "0o640"
    history.write(
        root, history.event("node2", "recheck", "controller:root", "quick check PASS", when=T0 + 600)
    )
    history.write(
        root, history.event("node2", "return", "controller:root", "the quick check passes", when=T0 + 660)
    )
    (tmp_path / "history/node2/notes.txt").write_text("not an event")
    (tmp_path / "history/node2/20261207T090000Z-000-drain.json").write_text("{broken")
    got = history.read(root, "node2")
    assert [e["kind"] for e in got] == ["drain", "drain", "recheck", "return"]
    assert got[0]["why"] == "wireup: [node_problem] hw/quick: NIC x"  # one line
    assert history.summary(got, T0 + 700) == {"out_since": None, "returns": [660.0], "out_for": None}


@pytest.mark.parametrize(
    "host,kind,who",
    [
        ("../x", "drain", "controller:root"),
        ("n1", "erase", "controller:root"),
        ("n1", "drain", "controller:$(id)"),
    ],
)
def test_an_event_off_its_grammar_is_refused(host, kind, who):
    with pytest.raises(ValueError, match="history"):
        history.event(host, kind, who, "x", when=T0)


def test_the_report_lines_and_the_metrics_promtool_accepts(tmp_path):
    per_host = {
        "node2": [
            history.event("node2", "drain", "node:wireup-check", "NIC", when=T0),
            history.event("node2", "return", "controller:root", "PASS", when=T0 + 1800),
        ],
        "node3": [history.event("node3", "drain", "controller:root", "fabric", when=T0 + 3600)],
    }
    now = T0 + 3600 + 5400
    assert history.lines(per_host, now) == [
        "node2: last returned 30 min after it was drained",
        "node3: out of service since 2026-12-07T09:00:00Z (1.5 h)",
    ]
    text = metrics.render(history.families(per_host, now))
    assert 'wireup_node_out_of_service{host="node3"} 1' in text
    assert 'wireup_node_out_of_service{host="node2"} 0' in text
    assert 'wireup_node_last_return_duration_seconds{host="node2"} 1800' in text
    assert 'wireup_node_history_events{host="node2",kind="return"} 1' in text
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool missing: make deps installs Debian's prometheus")
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_an_event_whose_time_is_no_date_is_refused_and_skipped_when_read(tmp_path):
    for when in (float("nan"), float("inf"), -1.0, 1e12):
        with pytest.raises(ValueError, match="history: time"):
            history.event("n2", "drain", "controller:root", "x", when=when)
    folder = tmp_path / "history" / "n2"
    folder.mkdir(parents=True)
    doc = '{"host": "n2", "kind": "drain", "time": "nan", "who": "controller:root", "why": "x"}'
    (folder / "20261207T080000Z-000-drain.json").write_text(doc)
    assert history.read_counted(str(tmp_path), "n2") == ([], 1)
    assert "NaN" not in metrics.controller_text(str(tmp_path), "n2", now=T0)


def test_an_event_file_nested_too_deep_is_skipped_when_read_not_a_crash(tmp_path):
    """The controller's reader and the node files' collector parse an event the same way
    (history.parsed_event): JSON nested past Python's recursion limit is no event to either."""
    folder = tmp_path / "history" / "n2"
    folder.mkdir(parents=True)
    good = history.event("n2", "drain", "controller:root", "x", when=T0)
    history.write(str(tmp_path), good)
    (folder / "20261207T080001Z-000-drain.json").write_text("[" * 60000 + "]" * 60000)
    assert history.read_counted(str(tmp_path), "n2") == ([good], 1)
