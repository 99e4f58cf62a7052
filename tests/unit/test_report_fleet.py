"""The report at fleet size (issue 39): bench_report_detail chooses the nodes shown in detail,
every report opens with what failed, the aggregate's statistics, and a wrong detail refused in
preflight and by write_report. Records from the real producer (host_record.build_record) on the
2x H200 captures (tests/unit/test_report.py); the 1,024-node report is
tests/unit/test_report_browser.py's."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import bench_settings
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import aggregate, assemble, triage
from tests.unit import test_report

RUN = "20261207T060000Z"


@pytest.fixture
def records():
    """A FAILed host (alltoall did not run) among two that passed."""
    good = test_report.good_node()
    return {
        "gpu-a01": host_record.build_record("gpu-a01", RUN, good),
        "gpu-a02": host_record.build_record("gpu-a02", RUN, test_report.node()),
        "gpu-a03": host_record.build_record("gpu-a03", RUN, test_report.good_node()),
    }


def _md(tmp_path, records, monkeypatch, detail="auto"):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    return pathlib.Path(assemble.write_report(str(tmp_path), RUN, records, detail=detail)["md"]).read_text()


def test_what_failed_comes_first_with_its_finding(tmp_path, records, monkeypatch):
    assert [h for h, r in records.items() if r["verdict"] != "PASS"] == ["gpu-a02"]
    md = _md(tmp_path, records, monkeypatch)
    opening = md.split("## What failed", 1)[1].split("\n## ", 1)[0]
    assert "Did not pass (1 of 3): gpu-a02 FAIL." in opening
    assert (
        "| gpu-a02 | FAIL | alltoall FAIL -/334.7 GB/s | critical: alltoall: alltoall_perf failed" in opening
    )
    assert md.index("## What failed") < md.index("## The fleet in aggregate") < md.index("## Summary")


def test_a_small_fleet_keeps_every_node_s_detail_and_failed_keeps_only_those(tmp_path, records, monkeypatch):
    (tmp_path / "auto").mkdir()
    auto = _md(tmp_path / "auto", records, monkeypatch)
    assert {"## gpu-a01: PASS", "## gpu-a02: FAIL", "## gpu-a03: PASS"} <= set(auto.splitlines())
    (tmp_path / "failed").mkdir()
    failed = _md(tmp_path / "failed", records, monkeypatch, detail="failed")
    assert "## gpu-a02: FAIL" in failed.splitlines()
    assert "## gpu-a01: PASS" not in failed and "## gpu-a03: PASS" not in failed
    assert (
        "Per-node detail below: the 1 node(s) that did not PASS of 3 (bench_report_detail: failed;" in failed
    )
    # The PASS nodes keep their summary lines; their findings are counted by code.
    assert "| gpu-a01 | PASS |" in failed and "The other nodes' findings, by code:" in failed


def test_a_large_fleet_details_only_failed_nodes_and_plots_the_worst(records):
    fleet = {f"n{i:03d}": dict(records["gpu-a01"], host=f"n{i:03d}") for i in range(40)}
    fleet.update({f"bad{i}": dict(records["gpu-a02"], host=f"bad{i}") for i in range(5)})
    fleet["lost"] = {"host": "lost", "verdict": "UNREACHABLE", "findings": []}
    assert triage.failed_hosts(fleet)[0] == "lost"
    assert triage.detail_hosts(fleet, "auto") == ["bad0", "bad1", "bad2", "bad3", "bad4", "lost"]
    assert triage.plotted_hosts(fleet, "auto") == ["bad0", "bad1", "bad2"][: triage.PLOTTED_HOSTS]
    assert len(triage.detail_hosts(fleet, "all")) == len(fleet)
    # Every node has the 2x H200's topology: no plotted node gets a heatmap of it.
    usual = triage.usual_topology(fleet)
    assert usual and not triage.topology_drawn(fleet["bad0"], usual)


def test_names_on_the_first_screen_stay_short():
    assert triage.names(["a", "b"]) == "a, b"
    assert triage.names([f"n{i}" for i in range(1000)]) == "1000 nodes"


def test_the_aggregate_s_percentiles_and_outliers():
    ordered = [float(v) for v in range(101)]
    assert aggregate.percentile(ordered, 5) == 5.0 and aggregate.percentile(ordered, 50) == 50.0
    assert aggregate.percentile([1.0, 2.0], 50) == 1.5
    values = [(f"n{i}", 100.0) for i in range(20)] + [("slow", 60.0), ("odd", 115.0), ("near", 95.0)]
    assert aggregate.outliers(values, 100.0) == [("slow", 60.0), ("odd", 115.0)]
    counts, edges = aggregate.histogram(sorted(v for _n, v in values), bins=4)
    assert sum(counts) == len(values) and edges[0] == 60.0 and edges[-1] == 115.0


@pytest.mark.parametrize("value", ["some", "", None, 1, "ALL"])
def test_a_wrong_detail_is_refused_in_preflight_and_by_the_report(tmp_path, records, value):
    (error,) = bench_settings.bench_errors({"bench_report_detail": value})
    assert error.startswith(f"bench_report_detail={value!r} must be one of auto, failed, all")
    with pytest.raises(ValueError, match="bench_report_detail"):
        assemble.write_report(str(tmp_path), RUN, records, detail=value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", bench_settings.REPORT_DETAIL)
def test_every_documented_detail_is_accepted(value):
    assert bench_settings.bench_errors({"bench_report_detail": value}) == []
